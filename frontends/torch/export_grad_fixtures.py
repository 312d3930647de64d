#!/usr/bin/python3
"""Exports the fixtures `loom grad --check` compares with PyTorch autograd.

For every fixture NAME this writes into --out (default tests/data/grad, not in git: the tests
export it, see CMakeLists.txt)
    NAME.onnx                  the model in eval mode (BatchNorm as inference nodes; Loom's
                               training rewrite gives it batch statistics, as model.train() does)
    NAME/<input>.npy           seeded random inputs
    NAME/target.npy            the loss's target (f32 values for mse, i64 classes for cross_entropy)
    NAME/loss.npy              PyTorch's loss in train mode
    NAME/grad_<param>.npy      PyTorch's gradient of the loss for each parameter, named as in the
                               ONNX file (constant folding is off, so initializers keep their
                               state_dict names)
    NAME/buffer_<name>.npy     each BatchNorm running mean and var after that train-mode forward
Usage: frontends/torch/export_grad_fixtures.py [--out DIR] [NAME ...]
Runs under Debian's /usr/bin/python3 (python3-torch, python3-onnx).
"""
import os
import sys

import numpy as np
import onnx
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from export_fixtures import CNN, fixture_main, seeded_model_and_inputs  # noqa: E402
from models import MLP, EncoderLayer  # noqa: E402


def fixtures():
    """name -> (model factory, {input: shape}, loss, opset)."""
    return {
        "mlp": (lambda: MLP(64, 128, 10), {"x": (8, 64)}, "cross_entropy", 13),
        "cnn": (CNN, {"x": (2, 3, 16, 16)}, "mse", 13),
        "transformer": (lambda: EncoderLayer(2, 8, 32, 4, 64), {"x": (2, 8, 32)}, "mse", 16),
    }


def export(name, factory, input_shapes, loss, opset, out_dir):
    model, inputs, gen = seeded_model_and_inputs(factory, input_shapes, 4321)
    path = os.path.join(out_dir, name + ".onnx")
    torch.onnx.export(model, inputs, path, input_names=list(input_shapes), output_names=["y"],
                      opset_version=opset, do_constant_folding=False,
                      training=torch.onnx.TrainingMode.PRESERVE)
    onnx.checker.check_model(onnx.load(path))

    model.train()
    y = model(*inputs)
    if loss == "mse":
        target = torch.rand(y.shape, generator=gen) * 2 - 1
        value = F.mse_loss(y, target)
    else:
        target = torch.randint(0, y.shape[1], (y.shape[0],), generator=gen)
        value = F.cross_entropy(y, target)
    model.zero_grad()
    value.backward()

    data = os.path.join(out_dir, name)
    os.makedirs(data, exist_ok=True)
    for n, t in zip(input_shapes, inputs):
        np.save(os.path.join(data, n + ".npy"), t.numpy().astype(np.float32))
    np.save(os.path.join(data, "target.npy"),
            target.numpy().astype(np.float32 if loss == "mse" else np.int64))
    np.save(os.path.join(data, "loss.npy"), np.array(value.item(), dtype=np.float32))
    for pname, p in model.named_parameters():
        np.save(os.path.join(data, "grad_" + pname + ".npy"), p.grad.numpy().astype(np.float32))
    for bname, b in model.named_buffers():
        if "running_" in bname:
            np.save(os.path.join(data, "buffer_" + bname + ".npy"), b.numpy().astype(np.float32))
    print(f"{name}: loss {loss} = {value.item():.6f}, {sum(1 for _ in model.parameters())} parameters")


def main():
    fixture_main(__doc__.splitlines()[0], os.path.join("data", "grad"), fixtures(), export)


if __name__ == "__main__":
    main()
