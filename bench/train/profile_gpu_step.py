#!/usr/bin/env python3
"""Per-kernel GPU time of a CUDA training-step artifact (`loom compile --train --target cuda`):
loads lib<NAME>_train.so into a PyTorch process, takes steps on device inputs under
torch.profiler (CUPTI sees every kernel of the process, Halide's and cuBLAS/cuDNN's), and prints
the kernels by total GPU time. Run with LOOM_CUDA_GRAPHS=0 so that each kernel is launched on its
own. usage: profile_gpu_step.py LIB NAME X.bin TARGET.bin [STEPS]"""
import ctypes
import sys

import numpy as np
import torch

lib_path, name, xbin, tbin = sys.argv[1:5]
steps = int(sys.argv[5]) if len(sys.argv) > 5 else 10
torch.cuda.init()
x = torch.from_numpy(np.fromfile(xbin, np.uint8)).cuda()
t = torch.from_numpy(np.fromfile(tbin, np.uint8)).cuda()
lib = ctypes.CDLL(lib_path)
lib[name + "_train_create"].restype = ctypes.c_void_p
step = lib[name + "_train_step_device"]
step.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p, ctypes.c_void_p]
trainer = lib[name + "_train_create"]()
assert trainer, "create failed"
inputs = (ctypes.c_void_p * 1)(x.data_ptr())


def run(n):
    for _ in range(n):
        assert step(trainer, inputs, t.data_ptr(), None) == 0, "step failed"
    torch.cuda.synchronize()


run(5)
with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
    run(steps)
rows = [(e.device_time_total / steps, e.count // steps, e.key) for e in prof.key_averages() if e.device_time_total > 0]
rows.sort(reverse=True)
total = sum(r[0] for r in rows)
print("%s: %.1f us of kernels per step over %d kinds" % (name, total, len(rows)))
for us, n, key in rows[:int(sys.argv[6]) if len(sys.argv) > 6 else 25]:
    print("%9.1f us %3d x  %s" % (us, n, key[:110]))
