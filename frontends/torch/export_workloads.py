#!/usr/bin/python3
"""Exports Loom's benchmark workload suite from PyTorch (Debian's torch 1.13) to ONNX.

For every workload NAME this writes bench/workloads/NAME.onnx (the CPU size of TARGETS.md: 2^24
elements for pointwise work, 2048x4096 for row reductions, ...) or, with --small,
bench/workloads/NAME.small.onnx (a CI smoke size). The .onnx files are git-ignored; run this
script (or bench/run_suite, which calls it) to make them. Weights are random but seeded, so two
runs give the same models.

compare_torch.py imports workloads() from here so PyTorch runs exactly the same modules.

Usage: frontends/torch/export_workloads.py [--small] [--out bench/workloads] [--list] [NAME ...]

resnet18 and mobilenet_v2 need torchvision; without it they are skipped with a message.
"""
import argparse
import math
import os
import sys
import warnings

import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))


from models import (MLP, MSE, Combined, ConvBNReLU, EncoderLayer, LinearReLU, MatMulAddReLU,  # noqa: E402
                    SigmoidAffine, SinCos, SoftmaxRows, SplitStack, SumPrologue)


def torchvision_model(name):
    import torchvision  # noqa: F401  (ImportError is handled by the caller)
    return getattr(torchvision.models, name)(weights=None)


# --- the suite --------------------------------------------------------------------------------

def workloads(small=False):
    """name -> (module factory, {input name: shape}, [output names], description)."""
    P = 1 << 12 if small else 1 << 24          # pointwise elements
    R, C = (64, 256) if small else (2048, 4096)  # row reductions
    B = 64 if small else 2048                   # split_stack/combined rows
    M, K, N = (32, 64, 64) if small else (512, 1024, 1024)
    conv = (1, 16, 16) if small else (4, 64, 56)  # batch, channels, spatial
    tr = (1, 16, 64, 4, 128) if small else (4, 128, 256, 4, 1024)
    img = 64 if small else 224
    return {
        "sincos": (SinCos, {"x": (P,)}, ["y"], f"sin(x)^2+cos(x)^2, x of {P}"),
        "sigmoid_affine": (SigmoidAffine, {"x": (P,), "w": (P,), "b": (P,)}, ["y"],
                           f"sigmoid(x*w+b), {P} each"),
        "mse": (MSE, {"x": (P,), "w": (P,), "b": (P,), "y": (P,)}, ["loss"],
                f"mse_loss(sigmoid(x*w+b), y), {P} each"),
        "sum_prologue": (SumPrologue, {"x": (R, C), "y": (R, C), "z": (R, C)}, ["out"],
                         f"((x+y)*z).sum(-1), {R}x{C}"),
        "softmax_rows": (SoftmaxRows, {"x": (R, C)}, ["y"], f"softmax over rows, {R}x{C}"),
        # With its affine (4096 weights): torch 1.13 exports an affine-free LayerNorm at opset 17 as
        # a LayerNormalization with an empty scale input, which ONNX's checker rejects.
        "layernorm_rows": (lambda: nn.LayerNorm(C), {"x": (R, C)}, ["y"],
                           f"LayerNorm over rows, {R}x{C}"),
        "split_stack": (SplitStack, {"x": (B, 1024)}, ["y"],
                        f"16 x (LayerNorm(64)+tanh) on {B}x1024, cat, Linear 1024->256, ReLU"),
        "combined": (Combined, {"x": (B, 1024)}, ["y"],
                     f"one LayerNorm over [{B},16,64]+tanh, Linear 1024->256, ReLU"),
        "linear_relu": (lambda: LinearReLU(K, N), {"x": (M, K)}, ["y"],
                        f"Linear {M}x{K} -> {N} + bias + ReLU"),
        "matmul_add_relu": (lambda: MatMulAddReLU(K, N), {"x": (M, K), "r": (M, N)}, ["y"],
                            f"relu(x @ W + r), {M}x{K} @ {K}x{N}"),
        "conv_bn_relu": (lambda: ConvBNReLU(conv[1]), {"x": (conv[0], conv[1], conv[2], conv[2])}, ["y"],
                         f"Conv3x3 {conv[1]}->{conv[1]} + BatchNorm + ReLU, "
                         f"{conv[0]}x{conv[1]}x{conv[2]}x{conv[2]}"),
        "mlp": (lambda: MLP(K, 2 * K if not small else K, 256 if not small else 16), {"x": (M, K)}, ["y"],
                f"Linear-ReLU-Linear-GELU-Linear, batch {M}, {K} -> {2 * K if not small else K}"),
        "transformer": (lambda: EncoderLayer(*tr), {"x": tr[:3]}, ["y"],
                        f"encoder layer: batch {tr[0]}, seq {tr[1]}, dim {tr[2]}, {tr[3]} heads, "
                        f"FFN {tr[4]}"),
        "resnet18": (lambda: torchvision_model("resnet18"), {"x": (1, 3, img, img)}, ["y"],
                     f"torchvision resnet18, random weights, 1x3x{img}x{img}"),
        "mobilenet_v2": (lambda: torchvision_model("mobilenet_v2"), {"x": (1, 3, img, img)}, ["y"],
                         f"torchvision mobilenet_v2, random weights, 1x3x{img}x{img}"),
    }


def build(factory, input_shapes, seed=0):
    """The module in eval mode with seeded weights (non-trivial BatchNorm/LayerNorm statistics),
    and one seeded set of inputs."""
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(1234 + seed)
    model = factory()
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.BatchNorm2d):
                c = m.num_features
                m.running_mean.copy_(torch.randn(c, generator=gen) * 0.5)
                m.running_var.copy_(torch.rand(c, generator=gen) * 1.5 + 0.25)
                m.weight.data.copy_(torch.rand(c, generator=gen) + 0.5)
                m.bias.data.copy_(torch.randn(c, generator=gen) * 0.2)
            if isinstance(m, nn.LayerNorm) and m.elementwise_affine:
                m.weight.data.copy_(torch.rand(m.weight.shape, generator=gen) + 0.5)
                m.bias.data.copy_(torch.randn(m.bias.shape, generator=gen) * 0.2)
    model.eval()
    inputs = tuple(torch.rand(*s, generator=gen) * 2 - 1 for s in input_shapes.values())
    return model, inputs


def path_for(out_dir, name, small):
    return os.path.join(out_dir, name + (".small" if small else "") + ".onnx")


def export(name, spec, out_dir, small):
    factory, input_shapes, output_names, desc = spec
    try:
        model, inputs = build(factory, input_shapes)
    except ImportError as e:
        print(f"{name}: skipped ({e}; install python3-torchvision for it)", file=sys.stderr)
        return None
    path = path_for(out_dir, name, small)
    torch.onnx.export(model, inputs, path, input_names=list(input_shapes), output_names=output_names,
                      opset_version=17, do_constant_folding=True,
                      training=torch.onnx.TrainingMode.PRESERVE)  # BN stays; Loom folds it
    print(f"{name}: {path} ({os.path.getsize(path) / 1e6:.1f} MB) - {desc}")
    return path


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "workloads"))
    ap.add_argument("--small", action="store_true", help="CI smoke sizes (NAME.small.onnx)")
    ap.add_argument("--missing", action="store_true", help="export only workloads whose file is absent")
    ap.add_argument("--list", action="store_true", help="print the workloads and exit")
    ap.add_argument("names", nargs="*", help="workloads to export (default: all)")
    args = ap.parse_args()
    table = workloads(args.small)
    if args.list:
        for n, spec in table.items():
            print(f"{n:16} {spec[3]}")
        return
    for n in args.names:
        if n not in table:
            sys.exit(f"unknown workload '{n}'; known: {' '.join(table)}")
    os.makedirs(args.out, exist_ok=True)
    warnings.filterwarnings("ignore")
    for name in args.names or table:
        if args.missing and os.path.exists(path_for(args.out, name, args.small)):
            continue
        export(name, table[name], args.out, args.small)


if __name__ == "__main__":
    main()
