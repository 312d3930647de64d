#!/usr/bin/python3
"""Reductions whose lengths no chunk divides, for checking the GPU split reductions, the row kernels
and the default long-sum schedule on a GPU machine (RESULTS_GPU.md runs 50-51, 66). On the build
machine:
    bench/gpu/reduction_tails.py build-main/loom artifacts/tails
writes ONNX models (mean of x² over 3 rows of 50000, over 2^20 + 37 and over 2^22 + 5 elements;
softmax over rows of 1001 and 8195; LayerNormalization over rows of 4100 and 3; rows of 8- to
1024-wide segments, each LayerNorm'ed, as combined's kernel) and compiles each
with --auto and --eager for CUDA, with Loom's float64 reference data.
On the GPU machine: for d in artifacts/tails/*/; do /tmp/loom_run $d; done (each checks host and
device outputs against the reference)."""
import os
import subprocess
import sys

import onnx
from onnx import TensorProto, helper

MODELS = {"rows3_tail": ([3, 50000], 1), "flat_tail": ([(1 << 20) + 37], 0), "flat_big": ([(1 << 22) + 5], 0)}
# Row kernels (one block per row, 8-byte vectors, statistics combined in registers): lengths that
# neither the vector nor the thread count divides.
ROWS = {"softmax_1001": ("Softmax", [37, 1001]), "softmax_8195": ("Softmax", [9, 8195]),
        "layernorm_4100": ("LayerNormalization", [33, 4100]), "layernorm_3": ("LayerNormalization", [5, 3]),
        # Short rows: a warp's lanes per row, several rows per block (48 x 64: 16 rows of 16 lanes;
        # 40 x 128: 8 rows of 32 lanes); 37 rows of 64 divide into no block of a warp: block path.
        "softmax_48x64": ("Softmax", [48, 64]), "layernorm_40x128": ("LayerNormalization", [40, 128]),
        "softmax_37x64": ("Softmax", [37, 64]),
        # An attention-shaped softmax: the outer three dims fused into rows, 16 rows per block.
        "softmax_2x4x64x64": ("Softmax", [2, 4, 64, 64])}
# Rows cut into segments, each LayerNorm'ed as exporters write it, then tanh (combined's kernel):
# (rows, segments, segment length). 8-128: one warp's lanes per segment, statistics by register
# shuffles (2 to 32 lanes of 4 floats); 256-1024: the block reduction.
SEGMENTS = {"segments_8": (37, 16, 8), "segments_16": (21, 32, 16), "segments_64": (19, 16, 64), "segments_128": (33, 8, 128),
            "segments_256": (17, 4, 256), "segments_512": (9, 2, 512), "segments_1024": (5, 2, 1024)}


def write_model(path, shape, axis):
    out = list(shape)
    out[axis] = 1
    nodes = [helper.make_node("Mul", ["x", "x"], ["sq"], name="square"),
             helper.make_node("ReduceMean", ["sq"], ["y"], name="mean", axes=[axis], keepdims=1)]
    g = helper.make_graph(nodes, os.path.basename(path)[:-5],
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, out)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    onnx.checker.check_model(m)
    onnx.save(m, path)


def write_row_model(path, op, shape):
    inits, ins = [], ["x"]
    if op == "LayerNormalization":  # random-looking affine, so a wrong index shows
        n = shape[-1]
        inits = [helper.make_tensor("scale", TensorProto.FLOAT, [n], [1 + 0.01 * (k % 7) for k in range(n)]),
                 helper.make_tensor("bias", TensorProto.FLOAT, [n], [0.1 * (k % 5) - 0.2 for k in range(n)])]
        ins += ["scale", "bias"]
    node = helper.make_node(op, ins, ["y"], name="row", axis=-1)
    g = helper.make_graph([node], os.path.basename(path)[:-5],
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)], initializer=inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(m)
    onnx.save(m, path)


def write_segment_model(path, rows, segs, k):
    n = segs * k
    c = lambda name, dims, vals, t=TensorProto.FLOAT: helper.make_tensor(name, t, dims, vals)
    inits = [c("s3", [3], [rows, segs, k], TensorProto.INT64), c("s2", [2], [rows, n], TensorProto.INT64),
             c("two", [], [2.0]), c("eps", [], [1e-5]),
             c("scale", [k], [1 + 0.01 * (j % 7) for j in range(k)]),
             c("bias", [k], [0.1 * (j % 5) - 0.2 for j in range(k)])]
    mk = helper.make_node
    nodes = [mk("Reshape", ["x", "s3"], ["x3"], name="view"),
             mk("ReduceMean", ["x3"], ["mean"], name="mean", axes=[2], keepdims=1),
             mk("Sub", ["x3", "mean"], ["d"], name="sub"),
             mk("Pow", ["d", "two"], ["sq"], name="pow"),
             mk("ReduceMean", ["sq"], ["var"], name="var", axes=[2], keepdims=1),
             mk("Add", ["var", "eps"], ["ve"], name="add_eps"),
             mk("Sqrt", ["ve"], ["sd"], name="sqrt"),
             mk("Div", ["d", "sd"], ["nrm"], name="div"),
             mk("Mul", ["nrm", "scale"], ["sc"], name="scale"),
             mk("Add", ["sc", "bias"], ["ln"], name="shift"),
             mk("Tanh", ["ln"], ["t"], name="tanh"),
             mk("Reshape", ["t", "s2"], ["y"], name="back")]
    g = helper.make_graph(nodes, os.path.basename(path)[:-5],
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [rows, n])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [rows, n])], initializer=inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    onnx.checker.check_model(m)
    onnx.save(m, path)


def main():
    loom, out = sys.argv[1], sys.argv[2]
    os.makedirs(out, exist_ok=True)
    models = {name: (lambda p, s=shape, a=axis: write_model(p, s, a)) for name, (shape, axis) in MODELS.items()}
    models.update({name: (lambda p, o=op, s=shape: write_row_model(p, o, s)) for name, (op, shape) in ROWS.items()})
    models.update({name: (lambda p, d=dims: write_segment_model(p, *d)) for name, dims in SEGMENTS.items()})
    for name, write in models.items():
        path = os.path.join(out, name + ".onnx")
        write(path)
        for kind in ("auto", "eager"):
            dest = os.path.join(out, name if kind == "auto" else name + "_eager")
            subprocess.run([loom, "compile", path, "--target", "cuda", "--" + kind, "-o", dest, "--force"],
                           check=True, stdout=subprocess.DEVNULL)
            for f in os.listdir(dest):  # the runner loads the .so: keep the carry small
                if f.endswith(".a") or f.endswith("_halide.o"):
                    os.remove(os.path.join(dest, f))
        os.remove(path)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
