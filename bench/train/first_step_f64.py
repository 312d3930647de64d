#!/usr/bin/env python3
"""The first SGD step of a training-step artifact against PyTorch's in float64, and the part of the
difference that storing the parameters in float32 alone explains.

For each LOOM_PARAM_DUMP file (gpu_step_driver.c: every parameter before and after the first step,
names beside it in FILE.names) the PyTorch model of bench/train/run_train_bench.py is loaded with
the dump's parameters as they were before the step, in float64, and takes the same step on the same
inputs; per parameter it prints the relative L2 difference of the updates (after - before) and the
rounding floor: an update read back as the difference of two float32 parameters is off by up to half
an ulp of the new value per element, so ||ulp(after)|| / sqrt(12) / ||update|| is the relative error
of a float32 step whose gradient is exact. Two float32 steps (CPU and CUDA) differ by about that much
when their gradients round differently.
With the step's learning rate raised for the dump (gpu_step_driver's LOOM_DUMP_LR) the update
outweighs the parameter, the floor falls to float32's epsilon, and the difference is the gradient's.
usage: first_step_f64.py MODEL LR X.bin TARGET.bin DUMP [DUMP...]   (LR: the dumped step's)
"""
import os
import sys

import types

import numpy as np
import torch
import torch.nn.functional as F

try:
    import onnx  # noqa: F401  (export_fixtures, the CNN's module, imports it; only the model classes are used)
except ImportError:
    sys.modules["onnx"] = types.ModuleType("onnx")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run_train_bench as b  # noqa: E402
from compare_params import read_dump  # noqa: E402

def f64_updates(name, lr, x, target, names, before):
    factory, shape, loss, _ = b.models()[name]
    torch.manual_seed(0)
    model = factory().train().double()
    params = dict(model.named_parameters())
    with torch.no_grad():
        for n, v in zip(names, before):
            params[n].copy_(torch.from_numpy(v.astype(np.float64)).reshape(params[n].shape))
    # torch.onnx.export merges initializers equal at export (the transformer's two LayerNorms' ones
    # and zeros): the ONNX model shares one parameter where torch has two, so tie them here too.
    for mod in model.modules():
        for pn, p in list(mod.named_parameters(recurse=False)):
            full = next(k for k, v in params.items() if v is p)
            if full in names:
                continue
            twin = next((k for k in names if params[k].shape == p.shape and torch.equal(params[k], p.detach())), None)
            if twin is not None:
                setattr(mod, pn, params[twin])
    y = model(torch.from_numpy(x.astype(np.float64)).reshape(shape))
    if loss == "cross_entropy":
        l = F.cross_entropy(y, torch.from_numpy(target).long().reshape(y.shape[0]))
    else:
        l = F.mse_loss(y, torch.from_numpy(target.astype(np.float64)).reshape(y.shape))
    l.backward()
    return {n: (-lr * params[n].grad).numpy().ravel() for n in names}


def main():
    name, lr, xs, ts, dumps = sys.argv[1], float(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5:]
    x = np.fromfile(xs, np.float32)
    _, _, loss, _ = b.models()[name]
    target = np.fromfile(ts, np.int64 if loss == "cross_entropy" else np.float32)
    ref, ups = None, {}
    for d in dumps:
        names, before, after = read_dump(d)
        if ref is None:
            ref = f64_updates(name, lr, x, target, names, before)
        worst, worst_floor = 0.0, 0.0
        for n, p0, p1 in zip(names, before, after):
            u = p1.astype(np.float64) - p0.astype(np.float64)
            exact = ref[n]
            norm = max(np.linalg.norm(exact), 1e-30)
            rel = np.linalg.norm(u - exact) / norm
            floor = np.linalg.norm(np.spacing(np.abs(p1))) / np.sqrt(12) / norm
            ups.setdefault(n, []).append(u)
            print(f"{os.path.basename(d)} {n:<14} vs float64 {rel:.2e}  float32 rounding floor {floor:.2e}")
            worst, worst_floor = max(worst, rel), max(worst_floor, floor)
        print(f"{os.path.basename(d)} worst vs float64 {worst:.3e}, worst floor {worst_floor:.3e}")
    if len(dumps) == 2:
        for n, (a, c) in ups.items():
            print(f"{n:<14} {os.path.basename(dumps[0])} vs {os.path.basename(dumps[1])}: "
                  f"{np.linalg.norm(a - c) / max(np.linalg.norm(c), 1e-30):.2e}")


if __name__ == "__main__":
    main()
