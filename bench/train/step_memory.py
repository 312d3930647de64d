#!/usr/bin/python3
"""A training step's own heap bytes, Loom's and PyTorch eager's, counted alike: run under
LD_PRELOAD=libmemtrack.so (memtrack.c beside this: glibc's allocator counted, live bytes and their
peak), one model, one process, Loom first, then torch. For each:
- held: the bytes the model holds between steps, above the process's bytes before it was created
  (parameters, optimizer state, gradients kept, buffers kept across steps; for torch also its
  autograd and optimizer objects), measured after 5 warm-up steps;
- peak: the most bytes live at once during a step, above the same base (the held bytes included),
  the largest over STEPS steps.
Loom is measured twice: as built (its trainer keeps the blocks Halide frees for the next step, so
held = peak) and as "loom_unkept", a second copy of the library whose Halide allocator hooks are
set back to Halide's own malloc and free after create (each buffer freed after its last use: the
plan's own peak).
torch is measured twice: first as is (its libraries' buffers allocated at first use counted), then
"torch_own", a second step after the first was dropped (those buffers below the base: the step's own
tensors, autograd graph and optimizer).
The input and target of the timed steps are created before either base, so neither side counts
them; torch's step also holds its own copy of both (run_train_bench.torch_step), whose bytes are
subtracted and printed. No library code, mapping or cache is in these figures (RSS has them).

usage: LD_PRELOAD=./libmemtrack.so [HL_NUM_THREADS=1] step_memory.py MODEL LIB [STEPS]
"""
import ctypes
import gc
import os
import sys

model, lib = sys.argv[1], sys.argv[2]
steps = int(sys.argv[3]) if len(sys.argv) > 3 else 10
threads = int(os.environ.setdefault("HL_NUM_THREADS", "1"))
import torch  # noqa: E402
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "frontends", "torch"))
import run_train_bench as b  # noqa: E402

me = ctypes.CDLL(None)
try:
    live, peak, reset = me.memtrack_live, me.memtrack_peak, me.memtrack_reset_peak
except AttributeError:
    sys.exit("run under LD_PRELOAD=libmemtrack.so (cc -O2 -shared -fPIC -o libmemtrack.so memtrack.c)")
live.restype = peak.restype = ctypes.c_longlong
torch.set_num_threads(threads)
x, target = b.fixed_batch(model)
io_bytes = x.numel() * x.element_size() + target.numel() * target.element_size()


def measure(make):
    """(held, peak) bytes above the base before make() ran."""
    base = live()
    step = make()
    for _ in range(5):
        step()
    held = live() - base
    top = 0
    for _ in range(steps):
        reset()
        step()
        top = max(top, peak() - base)
    return held, top, step


def loom(kept=True):
    path = lib
    if not kept:  # a second copy of the library: its own Halide runtime, its own allocator hooks
        import shutil
        import tempfile
        path = os.path.join(tempfile.mkdtemp(), os.path.basename(lib))
        shutil.copy(lib, path)
    so, step = b.loom_step(path, model, x, target)
    if not kept:  # Halide's own malloc and free again: each buffer freed after its last use
        so.halide_set_custom_malloc.restype = so.halide_set_custom_free.restype = ctypes.c_void_p
        so.halide_set_custom_malloc.argtypes = so.halide_set_custom_free.argtypes = [ctypes.c_void_p]
        so.halide_set_custom_malloc(ctypes.cast(so.halide_default_malloc, ctypes.c_void_p))
        so.halide_set_custom_free(ctypes.cast(so.halide_default_free, ctypes.c_void_p))
    return step


def torch_eager():
    s = b.torch_step(model)
    return lambda: s().item()


def torch_library_warm():
    """A throwaway torch step of the same model, run and dropped: what the libraries under torch
    allocate at their first use and keep (MKL's and oneDNN's buffers, autograd's thread state)
    is then live before the base of the measured step, not counted as the step's."""
    s = torch_eager()
    for _ in range(5):
        s()
    del s
    gc.collect()


lh, lp, ls = measure(loom)
nh, np_, ns = measure(lambda: loom(kept=False))
th, tp, ts = measure(torch_eager)
torch_library_warm()
oh, op, os_ = measure(torch_eager)
kib = 1024
print(f"{model} threads {threads} torch {torch.__version__} io_kib {io_bytes / kib:.1f}")
print(f"loom held_kib {lh / kib:.1f} peak_kib {lp / kib:.1f} loss {ls():.5f}")
print(f"loom_unkept held_kib {nh / kib:.1f} peak_kib {np_ / kib:.1f} loss {ns():.5f} "
      "(the same library with Halide's malloc and free instead of the artifact's buffer cache)")
print(f"torch held_kib {(th - io_bytes) / kib:.1f} peak_kib {(tp - io_bytes) / kib:.1f} loss {ts():.5f} "
      f"(its own input and target copy, {io_bytes / kib:.1f} KiB, subtracted)")
print(f"torch_own held_kib {(oh - io_bytes) / kib:.1f} peak_kib {(op - io_bytes) / kib:.1f} loss {os_():.5f} "
      "(a second torch step measured after a first one ran and was dropped: the libraries' buffers kept "
      "from their first use are below its base)")
print(f"peak torch / loom {(tp - io_bytes) / lp:.2f}x, torch_own / loom {(op - io_bytes) / lp:.2f}x, "
      f"torch_own / loom_unkept {(op - io_bytes) / np_:.2f}x")
