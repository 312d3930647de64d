#!/usr/bin/python3
"""Exports Loom's benchmark workload suite from PyTorch (Debian's torch 1.13) to ONNX.

For every workload NAME this writes bench/workloads/NAME.onnx (the CPU size of TARGETS.md: 2^24
elements for pointwise work, 2048x4096 for row reductions, ...) or, with --small,
bench/workloads/NAME.small.onnx (a CI smoke size). The .onnx files are git-ignored; run this
script (or bench/run_suite, which calls it) to make them. Weights are random but seeded, so two
runs give the same models.

compare_torch.py imports workloads() from here so PyTorch runs exactly the same modules.

Usage: frontends/torch/export_workloads.py [--small] [--ops] [--out bench/workloads] [--list] [NAME ...]

--ops exports the operator-coverage workloads (op_workloads(): one op family each, at a model's
sizes) instead of the suite.

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


# --- operator coverage: one op (or a short chain) each, at the sizes a model gives them ----------

class Fn(nn.Module):
    """A module around a function of its inputs (an op that has no nn.Module of its own)."""

    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, *xs):
        return self.fn(*xs)


def op_workloads(small=False):
    """The operator-coverage workloads (bench/run_suite --ops): name -> as workloads() gives.
    Not in the suite's geomean; they check that the cost model has no blind spot per op family."""
    s = 8 if small else 1  # shrink factor of the leading dims
    H = 1024 // s  # rows of the row ops
    return {
        "op_layernorm_768": (lambda: nn.LayerNorm(768), {"x": (8 * H, 768)}, ["y"], "LayerNorm over rows of 768"),
        "op_layernorm_3d": (lambda: nn.LayerNorm(768), {"x": (32 // s, 128, 768)}, ["y"],
                            "LayerNorm over [B, S, 768]"),
        "op_rmsnorm": (lambda: Fn(lambda x: x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)),
                       {"x": (8 * H, 2048)}, ["y"], "RMSNorm over rows of 2048"),
        "op_attention_softmax": (lambda: Fn(lambda x: torch.softmax(x, -1)), {"x": (8 // s or 1, 12, 128, 128)},
                                 ["y"], "softmax over the last dim of [B, 12, 128, 128]"),
        "op_classifier_softmax": (lambda: Fn(lambda x: torch.softmax(x, -1)), {"x": (16 * H, 1000)}, ["y"],
                                  "softmax over rows of 1000"),
        "op_gelu_erf": (lambda: Fn(F.gelu), {"x": (4 * H, 4096)}, ["y"], "GELU (erf)"),
        "op_gelu_tanh": (lambda: Fn(lambda x: F.gelu(x, approximate="tanh")), {"x": (4 * H, 4096)}, ["y"],
                         "GELU (tanh)"),
        "op_silu_mul": (lambda: Fn(lambda x, y: F.silu(x) * y), {"x": (4 * H, 4096), "g": (4 * H, 4096)}, ["y"],
                        "silu(x) * g"),
        "op_bias_relu_nchw": (lambda: Fn(lambda x, b: torch.relu(x + b)),
                              {"x": (32 // s, 256, 28, 28), "b": (1, 256, 1, 1)}, ["y"], "relu(x + per-channel b)"),
        "op_batchnorm_relu": (lambda: nn.Sequential(nn.BatchNorm2d(64), nn.ReLU()), {"x": (32 // s, 64, 56, 56)},
                              ["y"], "BatchNorm (inference) + ReLU, no conv to fold into"),
        "op_global_avg_pool": (lambda: Fn(lambda x: x.mean(dim=(2, 3))), {"x": (64 // s, 512, 14, 14)}, ["y"],
                               "mean over H x W"),
        "op_column_max": (lambda: Fn(lambda x: x.amax(dim=0)), {"x": (4 * H, 4096)}, ["y"], "max down the rows"),
        "op_transpose": (lambda: Fn(lambda x: x.t().contiguous()), {"x": (4 * H, 4096)}, ["y"], "2-D transpose"),
        "op_permute_heads": (lambda: Fn(lambda x: x.permute(0, 2, 1, 3).contiguous()), {"x": (16 // s, 512, 12, 64)},
                             ["y"], "[B, S, H, D] -> [B, H, S, D]"),
        "op_nhwc_to_nchw": (lambda: Fn(lambda x: x.permute(0, 3, 1, 2).contiguous()), {"x": (16 // s, 56, 56, 64)},
                            ["y"], "NHWC -> NCHW"),
        "op_nchw_to_nhwc": (lambda: Fn(lambda x: x.permute(0, 2, 3, 1).contiguous()), {"x": (16 // s, 64, 56, 56)},
                            ["y"], "NCHW -> NHWC"),
        "op_upsample_nearest": (lambda: Fn(lambda x: F.interpolate(x, scale_factor=2, mode="nearest")),
                                {"x": (16 // s, 64, 56, 56)}, ["y"], "nearest 2x upsampling"),
        "op_maxpool": (lambda: nn.MaxPool2d(3, 2, 1), {"x": (32 // s, 64, 112, 112)}, ["y"], "MaxPool 3x3 stride 2"),
        "op_depthwise_conv": (lambda: nn.Conv2d(128, 128, 3, padding=1, groups=128), {"x": (16 // s, 128, 56, 56)},
                              ["y"], "depthwise Conv3x3, 128 channels"),
        "op_conv1x1": (lambda: nn.Conv2d(256, 256, 1), {"x": (16 // s, 256, 28, 28)}, ["y"], "Conv1x1 256 -> 256"),
        "op_gemv": (lambda: nn.Linear(4096, 4096), {"x": (1, 4096)}, ["y"], "batch-1 Linear 4096 -> 4096"),
        "op_gemv_relu": (lambda: nn.Sequential(nn.Linear(4096, 4096), nn.ReLU()), {"x": (1, 4096)}, ["y"],
                         "batch-1 Linear 4096 -> 4096 + ReLU"),
        "op_qk_matmul": (lambda: Fn(lambda q, k: q @ k.transpose(-1, -2)),
                         {"q": (96 // s, 128, 64), "k": (96 // s, 128, 64)}, ["y"], "Q Kᵀ of [B*H, 128, 64]"),
        # Added in the fifteenth session, from a sweep of shapes and ops beyond the first 23.
        "op_attention_av": (lambda: Fn(lambda p, v: p @ v), {"p": (96 // s, 128, 128), "v": (96 // s, 128, 64)},
                            ["y"], "attention weights x V of [B*H, 128, 128] x [B*H, 128, 64]"),
        "op_classifier_head": (lambda: nn.Linear(768, 1000), {"x": (256 // s, 768)}, ["y"],
                               "Linear 768 -> 1000 (columns no micro-kernel divides), batch 256"),
        "op_avgpool": (lambda: nn.AvgPool2d(2, 2), {"x": (32 // s, 64, 112, 112)}, ["y"], "AveragePool 2x2 stride 2"),
        "op_instancenorm": (lambda: nn.InstanceNorm2d(64, affine=True), {"x": (16 // s, 64, 56, 56)}, ["y"],
                            "InstanceNorm over H x W"),
        "op_groupnorm": (lambda: nn.GroupNorm(32, 256), {"x": (16 // s, 256, 28, 28)}, ["y"],
                         "GroupNorm, 32 groups of 8 channels"),
        "op_softmax_mid": (lambda: Fn(lambda x: torch.softmax(x, 1)), {"x": (64 // s, 128, 768)}, ["y"],
                           "softmax over the middle dim of [B, 128, 768]"),
        "op_argmax": (lambda: Fn(lambda x: x.argmax(-1).float()), {"x": (8 * H, 1000)}, ["y"], "argmax over rows of 1000"),
        "op_column_sum_keepdim": (lambda: Fn(lambda x: x.sum(0, keepdim=True)), {"x": (4 * H, 4096)}, ["y"],
                                  "sum down the rows, keepdim ([1, 4096])"),
        "op_upsample_bilinear": (lambda: Fn(lambda x: F.interpolate(x, scale_factor=2, mode="bilinear", align_corners=False)),
                                 {"x": (16 // s, 64, 56, 56)}, ["y"], "bilinear 2x upsampling"),
        "op_grouped_conv": (lambda: nn.Conv2d(128, 128, 3, padding=1, groups=32), {"x": (8 // s or 1, 128, 28, 28)},
                            ["y"], "grouped Conv3x3, 32 groups of 4 channels"),
    }


def all_workloads(small=False):
    """The suite and the operator-coverage workloads."""
    return {**workloads(small), **op_workloads(small)}


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
    ap.add_argument("--ops", action="store_true", help="the operator-coverage workloads instead of the suite")
    ap.add_argument("names", nargs="*", help="workloads to export (default: all of the suite, or of --ops)")
    args = ap.parse_args()
    table = all_workloads(args.small)
    default = op_workloads(args.small) if args.ops else workloads(args.small)
    if args.list:
        for n, spec in default.items():
            print(f"{n:22} {spec[3]}")
        return
    for n in args.names:
        if n not in table:
            sys.exit(f"unknown workload '{n}'; known: {' '.join(table)}")
    os.makedirs(args.out, exist_ok=True)
    warnings.filterwarnings("ignore")
    for name in args.names or default:
        if args.missing and os.path.exists(path_for(args.out, name, args.small)):
            continue
        export(name, table[name], args.out, args.small)


if __name__ == "__main__":
    main()
