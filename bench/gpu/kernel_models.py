#!/usr/bin/python3
"""ONNX models of single kernels at serving shapes, for attention_bench.py and gemm_bench.py (issue 30's
attention and GEMM-epilogue targets). Writes <out>/<name>.onnx with random (seeded) FP32 weights;
needs only numpy and onnx (the build machine's /usr/bin/python3).

  attn_b<B>_s<S>        q, k, v [B, 12, S, 64] -> softmax(q·kᵀ/8)·v, as exporters write it
                        (Transpose, MatMul, Mul, Softmax, MatMul: Loom fuses it into one attention)
  attn_bf16_b<B>_s<S>   the same with bfloat16 inputs, scale and output (a bf16-stored model: what
                        PyTorch's SDPA backends are given in attention_bench.py)
  linear_<M>x<K>x<N>_<form>
      nn                x [M, K] · W [K, N] (MatMul, W stored [K, N]: what torch.onnx writes for nn.Linear
                        on a 3-D input after constant folding)
      tn                Gemm(x, W [N, K], transB=1) (the layout of nn.Linear's weight, and of the
                        cuBLAS call inductor makes for it)
      bias_gelu         x · W [K, N] + b, then the erf GELU (BERT's and ViT's fc1)
      bias_relu         Gemm(x, W, b, transB=1), then Relu (cuBLASLt's RELU_BIAS epilogue)
      bias_gelu_tanh    Gemm(x, W, b, transB=1), then the tanh-form GELU as PyTorch exports it (cuBLASLt's
                        GELU_BIAS epilogue in every precision: what the exact form would gain from it)
      bf16_bias_gelu    a model stored in bfloat16 (x, W, b, y and the constants), as torch.onnx writes
                        nn.Linear then F.gelu on a bf16 matrix: Gemm(x, W [N, K], b, transB=1), then the
                        erf GELU with bf16 Constants (√2 as 1.4140625); W and b are the bias_gelu
                        model's rounded to bf16 (nearest even, as torch's .bfloat16())
      bf16_bias_relu    the same with Relu (Gemm, Relu)

Usage: kernel_models.py --out DIR [names...]   (no names: all of ALL below)
"""
import argparse
import os

import numpy as np
ATTENTION = [(16, 512), (4, 2048), (16, 2048)]
# BERT-base at 16x512 (M = 8192) and ViT-B/16 at batch 32 (M = 32·197 = 6304): the four linear layers.
LINEAR = [(8192, 768, 2304), (8192, 768, 768), (8192, 768, 3072), (8192, 3072, 768),
          (6304, 768, 2304), (6304, 768, 3072), (6304, 3072, 768)]


def linear_weights(M, K, N):
    """W [K, N] and the bias of the linear models: signs over sqrt(K) (their artifacts compress to
    a few bits a weight for the trip to the GPU machine), the bias in [-0.5, 0.5)."""
    g = np.random.default_rng(M * 7 + K * 3 + N)
    w = np.where(g.random((K, N)) < 0.5, -1, 1).astype(np.float32) / np.float32(np.sqrt(K))
    return w, (g.random(N) - 0.5).astype(np.float32)


def attention(B, S, H=12, d=64, bf16=False):
    from onnx import TensorProto, helper, numpy_helper  # here: gemm_bench.py imports this file where onnx is absent
    F = TensorProto.BFLOAT16 if bf16 else TensorProto.FLOAT
    shape = [B, H, S, d]
    ins = [helper.make_tensor_value_info(n, F, shape) for n in ("q", "k", "v")]
    nodes = [helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2]),
             helper.make_node("MatMul", ["q", "kt"], ["s"]),
             helper.make_node("Mul", ["s", "scale"], ["ss"]),
             helper.make_node("Softmax", ["ss"], ["p"], axis=-1),
             helper.make_node("MatMul", ["p", "v"], ["y"])]
    scale = np.array(1 / np.sqrt(d), np.float32)
    if bf16:  # 1/8 is exact in bfloat16: its bits are the float's upper half
        init = [helper.make_tensor("scale", F, [], (scale.view(np.uint32) >> 16).astype(np.uint16).tobytes(), raw=True)]
    else:
        init = [numpy_helper.from_array(scale, "scale")]
    out = [helper.make_tensor_value_info("y", F, shape)]
    return helper.make_graph(nodes, f"attn{'_bf16' if bf16 else ''}_b{B}_s{S}", ins, out, init)


def bf16_bits(a):
    """float32 array -> its bfloat16 bits (round to nearest even, as torch's .bfloat16())."""
    u = np.ascontiguousarray(a, np.float32).view(np.uint32)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def linear_bf16(M, K, N, act):
    """Linear then `act` (gelu: erf, relu) stored in bfloat16, node for node as torch.onnx 1.13 writes a
    bf16 nn.Linear and F.gelu / F.relu on a matrix (checked against its export on the build machine)."""
    from onnx import TensorProto, helper
    B = TensorProto.BFLOAT16
    w, b = linear_weights(M, K, N)

    def tensor(name, a):
        return helper.make_tensor(name, B, list(np.shape(a)), bf16_bits(np.asarray(a, np.float32)).tobytes(), raw=True)

    def constant(name, value):
        return helper.make_node("Constant", [], [name], value=tensor(name + "_value", np.float32(value)))

    x = helper.make_tensor_value_info("x", B, [M, K])
    y = helper.make_tensor_value_info("y", B, [M, N])
    init = [tensor("w", w.T), tensor("b", b)]
    gemm = helper.make_node("Gemm", ["x", "w", "b"], ["h" if act == "gelu" else "hr"], alpha=1.0, beta=1.0, transB=1)
    if act == "relu":
        nodes = [gemm, helper.make_node("Relu", ["hr"], ["y"])]
    else:
        nodes = [gemm, constant("sqrt2", np.sqrt(2)), helper.make_node("Div", ["h", "sqrt2"], ["t"]),
                 helper.make_node("Erf", ["t"], ["e"]), constant("one", 1), helper.make_node("Add", ["e", "one"], ["e1"]),
                 helper.make_node("Mul", ["h", "e1"], ["m"]), constant("half", 0.5),
                 helper.make_node("Mul", ["m", "half"], ["y"])]
    return helper.make_graph(nodes, f"linear_{M}x{K}x{N}_bf16_bias_{act}", [x], [y], init)


def linear(M, K, N, form):
    from onnx import TensorProto, helper, numpy_helper
    F = TensorProto.FLOAT
    if form.startswith("bf16_bias_"):
        return linear_bf16(M, K, N, form[len("bf16_bias_"):])
    w, b = linear_weights(M, K, N)
    x = helper.make_tensor_value_info("x", F, [M, K])
    y = helper.make_tensor_value_info("y", F, [M, N])
    if form == "nn":
        nodes, init = [helper.make_node("MatMul", ["x", "w"], ["y"])], [numpy_helper.from_array(w, "w")]
    elif form == "tn":
        nodes = [helper.make_node("Gemm", ["x", "w"], ["y"], transB=1)]
        init = [numpy_helper.from_array(np.ascontiguousarray(w.T), "w")]
    elif form == "bias_gelu":
        nodes = [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Add", ["h", "b"], ["hb"]),
                 helper.make_node("Div", ["hb", "sqrt2"], ["t"]), helper.make_node("Erf", ["t"], ["e"]),
                 helper.make_node("Add", ["e", "one"], ["e1"]), helper.make_node("Mul", ["hb", "e1"], ["m"]),
                 helper.make_node("Mul", ["m", "half"], ["y"])]
        init = [numpy_helper.from_array(a, n) for a, n in
                ((w, "w"), (b, "b"), (np.array(np.sqrt(2), np.float32), "sqrt2"),
                 (np.array(1, np.float32), "one"), (np.array(0.5, np.float32), "half"))]
    elif form == "bias_gelu_tanh":
        nodes = [helper.make_node("Gemm", ["x", "w", "b"], ["h"], transB=1),
                 helper.make_node("Mul", ["h", "h"], ["h2"]), helper.make_node("Mul", ["h2", "h"], ["h3"]),
                 helper.make_node("Mul", ["h3", "c"], ["h3c"]), helper.make_node("Add", ["h", "h3c"], ["t"]),
                 helper.make_node("Mul", ["t", "s"], ["ts"]), helper.make_node("Tanh", ["ts"], ["th"]),
                 helper.make_node("Add", ["th", "one"], ["e1"]), helper.make_node("Mul", ["h", "e1"], ["m"]),
                 helper.make_node("Mul", ["m", "half"], ["y"])]
        init = [numpy_helper.from_array(a, n) for a, n in
                ((np.ascontiguousarray(w.T), "w"), (b, "b"), (np.array(0.044715, np.float32), "c"),
                 (np.array(np.sqrt(2 / np.pi), np.float32), "s"), (np.array(1, np.float32), "one"),
                 (np.array(0.5, np.float32), "half"))]
    elif form == "bias_relu":
        nodes = [helper.make_node("Gemm", ["x", "w", "b"], ["h"], transB=1), helper.make_node("Relu", ["h"], ["y"])]
        init = [numpy_helper.from_array(np.ascontiguousarray(w.T), "w"), numpy_helper.from_array(b, "b")]
    else:
        raise ValueError(form)
    return helper.make_graph(nodes, f"linear_{M}x{K}x{N}_{form}", [x], [y], init)


def all_models():
    out = {f"attn_b{B}_s{S}": (lambda B=B, S=S: attention(B, S)) for B, S in ATTENTION}
    out.update({f"attn_bf16_b{B}_s{S}": (lambda B=B, S=S: attention(B, S, bf16=True)) for B, S in ATTENTION})
    for M, K, N in LINEAR:
        for form in ("nn", "tn"):
            out[f"linear_{M}x{K}x{N}_{form}"] = lambda M=M, K=K, N=N, form=form: linear(M, K, N, form)
    for M, K, N in ((8192, 768, 3072),):
        for form in ("bias_gelu", "bias_relu", "bias_gelu_tanh", "bf16_bias_gelu", "bf16_bias_relu"):
            out[f"linear_{M}x{K}x{N}_{form}"] = lambda M=M, K=K, N=N, form=form: linear(M, K, N, form)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("names", nargs="*")
    a = ap.parse_args()
    import onnx
    from onnx import helper
    os.makedirs(a.out, exist_ok=True)
    for name, make in all_models().items():
        if a.names and name not in a.names:
            continue
        model = helper.make_model(make(), opset_imports=[helper.make_opsetid("", 13)])
        onnx.checker.check_model(model)
        onnx.save(model, os.path.join(a.out, name + ".onnx"))
        print(name)


if __name__ == "__main__":
    main()
