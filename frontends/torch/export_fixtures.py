#!/usr/bin/python3
"""Exports Loom's small ONNX test fixtures and seed workloads from PyTorch (Debian's torch 1.13).

For every fixture NAME this writes
    tests/data/NAME.onnx                       the model (< 1 MB)
    tests/data/NAME/<input>.npy                fixed random inputs (seeded, never zeros)
    tests/data/NAME/expected_<output>.npy      PyTorch's outputs on those inputs
named after the ONNX graph's inputs and outputs. Everything is deterministic: run it again and the
.npy files are bit-identical (the .onnx files too, up to the producer version string).

Usage: frontends/torch/export_fixtures.py [--out tests/data] [NAME ...]

Must run under Debian's /usr/bin/python3 (python3-torch, python3-onnx); a pyenv python on PATH
does not see them.
"""
import argparse
import math
import os
import sys
import warnings

import numpy as np
import onnx
import torch
import torch.nn as nn
import torch.nn.functional as F


from models import MLP, DynamicEncoderLayer, EncoderLayer, GeluMLP, SigmoidAffine, SinCos, SoftmaxRows, SumPrologue  # noqa: E402

# --- models -----------------------------------------------------------------------------------

def conv_bn(cin, cout, k, stride=1, groups=1):
    return nn.Sequential(nn.Conv2d(cin, cout, k, stride, k // 2, groups=groups, bias=False),
                         nn.BatchNorm2d(cout))


class CNN(nn.Module):
    """Conv3x3+BN+ReLU, MaxPool, strided Conv+BN+ReLU, depthwise Conv+BN+ReLU6, AvgPool,
    GlobalAveragePool, Flatten, Linear, Softmax. Input 2x3x32x32."""

    def __init__(self):
        super().__init__()
        self.stem = conv_bn(3, 16, 3)
        self.pool = nn.MaxPool2d(2)
        self.down = conv_bn(16, 32, 3, stride=2)
        self.dw = conv_bn(32, 32, 3, groups=32)
        self.avg = nn.AvgPool2d(2)
        self.gap = nn.AdaptiveAvgPool2d(1)
        self.flatten = nn.Flatten()
        self.fc = nn.Linear(32, 10)

    def forward(self, x):
        x = self.pool(F.relu(self.stem(x)))
        x = F.relu(self.down(x))
        x = self.avg(F.relu6(self.dw(x)))
        x = self.flatten(self.gap(x))
        return F.softmax(self.fc(x), dim=1)


class InvertedResidual(nn.Module):
    """MobileNetV2's block: 1x1 expand Conv+BN+ReLU6, depthwise 3x3 Conv+BN+ReLU6, 1x1 project
    Conv+BN, plus the input. Input 2x16x14x14 (two images: the batched path of 1x1 convs)."""

    def __init__(self, c=16, expand=4):
        super().__init__()
        h = c * expand
        self.expand = conv_bn(c, h, 1)
        self.dw = conv_bn(h, h, 3, groups=h)
        self.project = conv_bn(h, c, 1)

    def forward(self, x):
        y = F.relu6(self.expand(x))
        y = F.relu6(self.dw(y))
        return x + self.project(y)


def randomize_batchnorm(model, gen):
    """Non-trivial running statistics and affine parameters, so BN (and Conv+BN folding) is
    really exercised."""
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            c = m.num_features
            m.running_mean.copy_(torch.randn(c, generator=gen) * 0.5)
            m.running_var.copy_(torch.rand(c, generator=gen) * 1.5 + 0.25)
            m.weight.data.copy_(torch.rand(c, generator=gen) + 0.5)
            m.bias.data.copy_(torch.randn(c, generator=gen) * 0.2)
        if isinstance(m, nn.LayerNorm):
            m.weight.data.copy_(torch.rand(m.weight.shape, generator=gen) + 0.5)
            m.bias.data.copy_(torch.randn(m.bias.shape, generator=gen) * 0.2)


def fixtures():
    """name -> (model factory, {input name: shape}, [output names], export options)."""
    return {
        "mlp": (lambda: MLP(64, 128, 10), {"x": (4, 64)}, ["y"], {}),
        "gelu_mlp": (lambda: GeluMLP(64, 256, 32), {"x": (8, 64)}, ["y"], {}),
        "dynamic_mlp": (lambda: MLP(64, 128, 10), {"x": (3, 64)}, ["y"],
                        {"dynamic_axes": {"x": {0: "batch"}, "y": {0: "batch"}}}),
        "cnn": (CNN, {"x": (2, 3, 32, 32)}, ["y"], {}),
        # Symbolic batch, height and width, as third-party exports carry them: what `loom inspect`
        # shows before the dims are bound, and what `loom run --inputs DIR` binds from the files.
        "dynamic_cnn": (CNN, {"x": (2, 3, 24, 40)}, ["y"],
                        {"dynamic_axes": {"x": {0: "batch", 2: "height", 3: "width"}, "y": {0: "batch"}}}),
        "inverted_residual": (InvertedResidual, {"x": (2, 16, 14, 14)}, ["y"], {}),
        # Old attribute forms (Clip min/max and Pad pads as attributes, opset-9 Softmax) and weights listed as inputs.
        "cnn_opset9": (CNN, {"x": (2, 3, 32, 32)}, ["y"],
                        {"opset_version": 9, "keep_initializers_as_inputs": True}),
        # opset 16 (< 17) so LayerNorm decomposes into ReduceMean/Sub/Pow/Sqrt/Div and GELU into Erf.
        "transformer": (lambda: EncoderLayer(2, 16, 64, 4, 256), {"x": (2, 16, 64)}, ["y"], {"opset_version": 16}),
        # The same layer with the batch and sequence length read from the input (dynamic shapes).
        "dynamic_transformer": (lambda: DynamicEncoderLayer(2, 16, 64, 4, 256), {"x": (2, 16, 64)}, ["y"],
                                {"opset_version": 16,
                                 "dynamic_axes": {"x": {0: "batch", 1: "seq"}, "y": {0: "batch", 1: "seq"}}}),
        "sincos": (SinCos, {"x": (4096,)}, ["y"], {}),
        "sigmoid_affine": (SigmoidAffine, {"x": (64, 256), "w": (256,), "b": (256,)}, ["y"], {}),
        "sum_prologue": (SumPrologue, {"x": (64, 256), "y": (64, 256), "z": (64, 256)}, ["out"], {}),
        "softmax_rows": (SoftmaxRows, {"x": (64, 256)}, ["y"], {}),
        "layernorm_rows": (lambda: nn.LayerNorm(256), {"x": (64, 256)}, ["y"], {}),
    }


def seeded_model_and_inputs(factory, input_shapes, seed):
    """The model (torch seed 0, BatchNorm statistics randomized) in eval mode, one random input per
    shape, and the generator (seeded with `seed`) they were drawn from, for what comes next."""
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(seed)
    model = factory()
    with torch.no_grad():
        randomize_batchnorm(model, gen)
    model.eval()
    return model, tuple(torch.randn(*s, generator=gen) for s in input_shapes.values()), gen


def export(name, factory, input_shapes, output_names, options, out_dir):
    model, inputs, _ = seeded_model_and_inputs(factory, input_shapes, 1234)
    with torch.no_grad():
        outputs = model(*inputs)
    if isinstance(outputs, torch.Tensor):
        outputs = (outputs,)

    path = os.path.join(out_dir, name + ".onnx")
    opts = {"opset_version": 13, "do_constant_folding": True}
    opts.update(options)
    # PRESERVE (with the model in eval mode) keeps BatchNormalization nodes in inference form;
    # EVAL would let the exporter fold them into the convs, leaving Loom's folding untested.
    torch.onnx.export(model, inputs, path, input_names=list(input_shapes),
                      output_names=output_names, training=torch.onnx.TrainingMode.PRESERVE, **opts)

    m = onnx.load(path)
    onnx.checker.check_model(m)
    graph_inputs = [i.name for i in m.graph.input
                    if i.name not in {t.name for t in m.graph.initializer}]
    assert graph_inputs == list(input_shapes), (name, graph_inputs)
    assert [o.name for o in m.graph.output] == output_names, name
    size = os.path.getsize(path)
    assert size < 1 << 20, f"{path} is {size} bytes; fixtures must stay under 1 MB"

    data_dir = os.path.join(out_dir, name)
    os.makedirs(data_dir, exist_ok=True)
    for n, t in zip(input_shapes, inputs):
        np.save(os.path.join(data_dir, n + ".npy"), t.numpy().astype(np.float32))
    for n, t in zip(output_names, outputs):
        np.save(os.path.join(data_dir, "expected_" + n + ".npy"), t.numpy().astype(np.float32))
    ops = {}
    for node in m.graph.node:
        ops[node.op_type] = ops.get(node.op_type, 0) + 1
    print(f"{name}: {size} bytes, opset {m.opset_import[0].version}, {len(m.graph.node)} nodes, "
          f"{len(m.graph.initializer)} initializers, ops {dict(sorted(ops.items()))}")


def fixture_main(description, out_below_tests, table, export_one, ignore_warning=""):
    """The command line of a fixture exporter: `[--out DIR] [names...]`, each fixture of `table`
    (name -> export_one's further arguments) exported by `export_one(name, *args, out)`, into
    tests/<out_below_tests> by default; warnings matching `ignore_warning` are not shown."""
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--out", default=os.path.join(here, "..", "..", "tests", out_below_tests))
    ap.add_argument("names", nargs="*", help="fixtures to export (default: all)")
    args = ap.parse_args()
    for n in args.names:
        if n not in table:
            sys.exit(f"unknown fixture '{n}'; known: {' '.join(table)}")
    os.makedirs(args.out, exist_ok=True)
    torch.use_deterministic_algorithms(True)
    warnings.filterwarnings("ignore", message=ignore_warning)
    for name in args.names or table:
        export_one(name, *table[name], args.out)


def main():
    # The exporter warns that constant folding may alter trainable parameters under PRESERVE; the
    # models are in eval mode, so nothing trainable is folded.
    fixture_main(__doc__.splitlines()[0], "data", fixtures(), export,
                 ignore_warning="It is recommended that constant folding")


if __name__ == "__main__":
    main()
