#!/usr/bin/env python3
"""PyTorch's side of the GPU training-step benchmark (bench/train/run_gpu_bench.sh): the same models,
shapes, losses and SGD as bench/train/run_train_bench.py, on the GPU in FP32 (TF32 off, as Loom's
kernels), eager and torch.compile (default and max-autotune, the model compiled: forward and
backward; the optimizer step eager). Per mode: ms per step (REPS steps back to back, then one
synchronize; median and min of five such trials), torch.cuda.max_memory_allocated over them, and
the device memory the process holds after them above what was free once its CUDA context existed
(cudaMemGetInfo: the measure gpu_step_driver.c takes of Loom's trainer; it counts the caching
allocator's reserve and the libraries' handles, workspaces and loaded kernels).
With TIMING_LOCK=FILE the timed trials hold an exclusive lock on FILE, so that several modes can
compile at once on one host and still be timed one at a time. With READY_DIR=DIR and READY_COUNT=N,
a process whose warm-up is done waits (until the epoch second READY_UNTIL at most) until N processes
have written their name there, so that no trial is timed while another compilation keeps the host's
cores busy. STACK_DUMP_S=S prints every thread's Python stack to stderr every S seconds (where a
compilation that does not finish spends its time); stderr also gets the first step's time (the
compilation of forward and backward).
usage: gpu_torch_step.py MODEL MODE REPS   (MODE: eager | default | max-autotune)
"""
import faulthandler
import fcntl
import os
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run_train_bench as b  # noqa: E402

name, mode, reps = sys.argv[1], sys.argv[2], int(sys.argv[3])
torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
factory, shape, loss, _ = b.models()[name]
if os.environ.get("STACK_DUMP_S"):
    faulthandler.dump_traceback_later(float(os.environ["STACK_DUMP_S"]), repeat=True, file=sys.stderr)
torch.cuda.init()
free0 = torch.cuda.mem_get_info()[0]
torch.manual_seed(0)
model = factory().train().cuda()
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x = (torch.rand(*shape) * 2 - 1).cuda()
with torch.no_grad():
    out = model(x)
target = (torch.randint(0, out.shape[1], (out.shape[0],)) if loss == "cross_entropy"
          else torch.rand(out.shape) * 2 - 1).cuda()
fn = model if mode == "eager" else torch.compile(model, mode=None if mode == "default" else mode)


def step():
    opt.zero_grad(set_to_none=True)
    y = fn(x)
    l = F.cross_entropy(y, target) if loss == "cross_entropy" else F.mse_loss(y, target)
    l.backward()
    opt.step()
    return l


t0 = time.perf_counter()
step()
torch.cuda.synchronize()
first_s = time.perf_counter() - t0
print("torch %s %s first step (compilation) %.1f s" % (name, mode, first_s), file=sys.stderr, flush=True)
for _ in range(19):
    step()
torch.cuda.synchronize()
warm_s = time.perf_counter() - t0
if os.environ.get("READY_DIR"):
    ready = os.environ["READY_DIR"]
    open(os.path.join(ready, "%s.%s" % (name, mode)), "w").close()
    while (len(os.listdir(ready)) < int(os.environ.get("READY_COUNT", "1")) and
           time.time() < float(os.environ.get("READY_UNTIL", "0"))):
        time.sleep(0.5)
lock = open(os.environ["TIMING_LOCK"], "a") if os.environ.get("TIMING_LOCK") else None
if lock:
    fcntl.flock(lock, fcntl.LOCK_EX)
    for _ in range(5):
        step()
    torch.cuda.synchronize()
torch.cuda.reset_peak_memory_stats()
ms = []
for _ in range(5):
    t = time.perf_counter()
    for _ in range(reps):
        l = step()
    torch.cuda.synchronize()
    ms.append((time.perf_counter() - t) * 1e3 / reps)
if lock:
    fcntl.flock(lock, fcntl.LOCK_UN)
ms.sort()
held = (free0 - torch.cuda.mem_get_info()[0]) / 2**20
faulthandler.cancel_dump_traceback_later()
print("torch %s %s median_ms %.4f min_ms %.4f max_allocated_mib %.1f device_mib_held %.1f warmup_s %.1f loss %.5f %s" % (
    name, mode, ms[2], ms[0], torch.cuda.max_memory_allocated() / 2**20, held, warm_s, l.item(), torch.__version__),
    flush=True)
