#!/usr/bin/python3
"""Exports Loom's half-precision ONNX test fixtures: models stored in float16 and bfloat16, and a
mixed graph that casts between f32, f16 and bf16.

Debian's torch 1.13 cannot run a float16 Linear or Conv on the CPU, so it cannot trace
`model.half()`; and it exports no bfloat16. So each model is exported in float32 by PyTorch and
its stored types are then converted with the onnx helper API: every float initializer, Constant
and graph input/output becomes float16 (or bfloat16, raw bits rounded to nearest even), exactly
what `model.half()` export stores. The mixed graph is written with the helper API directly.

For every fixture NAME this writes
    tests/data/NAME.onnx                   the model
    tests/data/NAME/<input>.npy            fixed random inputs (in the input's type; bf16 as f32)
    tests/data/NAME/expected_<output>.npy  PyTorch's outputs: the model computed in float32 from
                                           the stored (rounded) weights and inputs, rounded to the
                                           output's type (bf16 outputs saved as the f32 they widen to)
Usage: frontends/torch/export_half_fixtures.py [--out tests/data]
"""
import argparse
import os
import sys
import warnings

import numpy as np
import onnx
import torch
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from models import MLP, EncoderLayer  # noqa: E402
from export_fixtures import CNN, randomize_batchnorm  # noqa: E402


def bf16_round(a):
    """float32 array rounded to bfloat16 (nearest even), still float32."""
    u = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32).astype(np.uint64)
    r = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint32) << 16
    return r.astype(np.uint32).view(np.float32)


def bf16_tensor(name, a):
    """A TensorProto of type BFLOAT16 holding \\p a rounded (raw little-endian bits)."""
    bits = (bf16_round(a).view(np.uint32) >> 16).astype("<u2")
    t = TensorProto()
    t.name, t.data_type = name, TensorProto.BFLOAT16
    t.dims.extend(a.shape)
    t.raw_data = bits.tobytes()
    return t


def round_to(a, kind):
    return a.astype(np.float16).astype(np.float32) if kind == "f16" else bf16_round(a)


def convert_stored_types(model, kind):
    """Every float32 initializer, Constant and graph input/output of \\p model becomes \\p kind."""
    g = model.graph
    elem = TensorProto.FLOAT16 if kind == "f16" else TensorProto.BFLOAT16

    def conv(t):
        if t.data_type != TensorProto.FLOAT:
            return
        a = numpy_helper.to_array(t)
        t.CopyFrom(numpy_helper.from_array(a.astype(np.float16), t.name) if kind == "f16" else bf16_tensor(t.name, a))

    for t in g.initializer:
        conv(t)
    for n in g.node:
        for a in n.attribute:
            if a.type == onnx.AttributeProto.TENSOR:
                conv(a.t)
    for v in list(g.input) + list(g.output):
        if v.type.tensor_type.elem_type == TensorProto.FLOAT:
            v.type.tensor_type.elem_type = elem
    del g.value_info[:]
    return model


def export_converted(name, module, x, kind, out):
    """Exports \\p module in f32, converts its stored types to \\p kind, and saves the input and
    PyTorch's output computed in f32 from the rounded weights and input."""
    module.eval()
    with torch.no_grad():
        for p in list(module.parameters()) + list(module.buffers()):
            if p.dtype == torch.float32:
                p.copy_(torch.from_numpy(round_to(p.numpy(), kind)))
        x = torch.from_numpy(round_to(x.numpy(), kind))
        y = module(x)
    path = os.path.join(out, name + ".onnx")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(module, (x,), path, input_names=["x"], output_names=["y"], opset_version=13,
                          do_constant_folding=True)
    m = convert_stored_types(onnx.load(path), kind)
    onnx.checker.check_model(m)
    onnx.save(m, path)
    d = os.path.join(out, name)
    os.makedirs(d, exist_ok=True)
    xs = x.numpy()
    np.save(os.path.join(d, "x.npy"), xs.astype(np.float16) if kind == "f16" else xs)
    ys = round_to(y.numpy(), kind)
    np.save(os.path.join(d, "expected_y.npy"), ys.astype(np.float16) if kind == "f16" else ys)


def export_mixed_casts(out, gen):
    """f32 x -> Cast f16 -> MatMul W(f16) -> Add b(f16) -> Cast f32 -> Softmax -> y (f32);
    x -> Mul 2 (f32) -> Cast bf16 -> Mul w2 (bf16) -> Cast f16 -> z (f16 output);
    x -> Cast bf16 -> Relu -> r (bf16 output)."""
    M, K, N = 6, 24, 10
    W = (torch.rand(K, N, generator=gen) * 2 - 1).numpy() / np.sqrt(K)
    b = (torch.rand(N, generator=gen) * 2 - 1).numpy()
    w2 = (torch.rand(K, generator=gen) * 2 - 1).numpy() + 1.5
    x = (torch.rand(M, K, generator=gen) * 4 - 2).numpy()
    F16, BF16 = TensorProto.FLOAT16, TensorProto.BFLOAT16
    nodes = [
        helper.make_node("Cast", ["x"], ["x16"], to=F16, name="cast_x_f16"),
        helper.make_node("MatMul", ["x16", "W"], ["xw"], name="matmul_f16"),
        helper.make_node("Add", ["xw", "b"], ["xwb"], name="add_f16"),
        helper.make_node("Cast", ["xwb"], ["logits"], to=TensorProto.FLOAT, name="cast_logits_f32"),
        helper.make_node("Softmax", ["logits"], ["y"], axis=-1, name="softmax_f32"),
        helper.make_node("Mul", ["x", "two"], ["x2"], name="mul_f32"),
        helper.make_node("Cast", ["x2"], ["x2b"], to=BF16, name="cast_x2_bf16"),
        helper.make_node("Mul", ["x2b", "w2"], ["x2w"], name="mul_bf16"),
        helper.make_node("Cast", ["x2w"], ["z"], to=F16, name="cast_z_f16"),
        helper.make_node("Cast", ["x"], ["xb"], to=BF16, name="cast_x_bf16"),
        helper.make_node("Relu", ["xb"], ["r"], name="relu_bf16"),
    ]
    inits = [numpy_helper.from_array(W.astype(np.float16), "W"), numpy_helper.from_array(b.astype(np.float16), "b"),
             numpy_helper.from_array(np.array(2.0, np.float32), "two"), bf16_tensor("w2", w2)]
    graph = helper.make_graph(
        nodes, "mixed_casts", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [M, K])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [M, N]),
         helper.make_tensor_value_info("z", F16, [M, K]),
         helper.make_tensor_value_info("r", BF16, [M, K])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], producer_name="loom")
    onnx.checker.check_model(model)
    onnx.save(model, os.path.join(out, "mixed_casts.onnx"))
    # PyTorch computes each branch in f32 from the values each Cast rounds.
    tx = torch.from_numpy(x)
    W16, b16 = torch.from_numpy(W.astype(np.float16).astype(np.float32)), torch.from_numpy(b.astype(np.float16).astype(np.float32))
    logits = torch.from_numpy((tx.half().float() @ W16 + b16).numpy().astype(np.float16).astype(np.float32))
    y = torch.softmax(logits, -1).numpy()
    x2b = bf16_round((tx * 2).numpy())
    z = bf16_round(x2b * bf16_round(w2)).astype(np.float16)
    r = np.maximum(bf16_round(x), 0)
    d = os.path.join(out, "mixed_casts")
    os.makedirs(d, exist_ok=True)
    np.save(os.path.join(d, "x.npy"), x.astype(np.float32))
    np.save(os.path.join(d, "expected_y.npy"), y.astype(np.float32))
    np.save(os.path.join(d, "expected_z.npy"), z)
    np.save(os.path.join(d, "expected_r.npy"), r.astype(np.float32))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.path.join(HERE, "..", "..", "tests", "data"))
    args = ap.parse_args()
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(30)
    export_converted("mlp_f16", MLP(64, 128, 10), torch.rand(4, 64, generator=gen) * 2 - 1, "f16", args.out)
    cnn = CNN()
    randomize_batchnorm(cnn, gen)
    export_converted("cnn_f16", cnn, torch.rand(2, 3, 32, 32, generator=gen) * 2 - 1, "f16", args.out)
    export_converted("transformer_bf16", EncoderLayer(2, 16, 64, 4, 256), torch.rand(2, 16, 64, generator=gen) * 2 - 1, "bf16", args.out)
    export_mixed_casts(args.out, gen)


if __name__ == "__main__":
    main()
