#!/usr/bin/python3
"""The bench transformer step's eleven dense GEMMs (EncoderLayer(8, 64, 128, 4, 512): 512 rows,
d 128, ff 512), each timed through one or more CBLAS libraries (`cblas_sgemm`, loaded by ctypes)
and through PyTorch's own GEMM (`torch.mm`, `torch.addmm_` for the weight gradients with the SGD
update folded in, as the BLAS call folds it with alpha = -lr, beta = 1), in turns inside ONE process
on this CPU, at the thread count given (HL_NUM_THREADS is irrelevant here; OPENBLAS_NUM_THREADS and
torch.set_num_threads). Per shape and library: the median and 10th percentile ms of REPS calls
(interleaved in blocks of 5), over ROUNDS rounds in alternating order, and GFLOP/s of the median.
The shapes are row-major C[M, N] = op(A) op(B) as the step writes them (the weight gradients
dW[out, in] = dYᵀ X over the rows, the forward products X Wᵀ with W [out, in]).

usage: gemm_shapes_turns.py THREADS ROUNDS REPS NAME=LIBOPENBLAS.so [NAME=LIB ...] [--no-torch]
"""
import ctypes
import os
import sys
import time

args = [a for a in sys.argv[1:] if not a.startswith("--")]
threads, rounds, reps = int(args[0]), int(args[1]), int(args[2])
libs = [a.split("=", 1) for a in args[3:]]
os.environ["OPENBLAS_NUM_THREADS"] = str(threads)
import torch  # noqa: E402

torch.set_num_threads(threads)
# name, transA, transB, M, N, K, update (beta 1, alpha -lr: the weight gradient's SGD step)
SHAPES = [("fwd qkv", 0, 1, 512, 384, 128, 0), ("fwd proj", 0, 1, 512, 128, 128, 0),
          ("fwd ff1", 0, 1, 512, 512, 128, 0), ("fwd ff2", 0, 1, 512, 128, 512, 0),
          ("dX qkv", 0, 0, 512, 128, 384, 0), ("dX proj", 0, 0, 512, 128, 128, 0),
          ("dX ff1", 0, 0, 512, 128, 512, 0), ("dX ff2", 0, 0, 512, 512, 128, 0),
          ("dW qkv", 1, 0, 384, 128, 512, 1), ("dW proj", 1, 0, 128, 128, 512, 1),
          ("dW ff1", 1, 0, 512, 128, 512, 1), ("dW ff2", 1, 0, 128, 512, 512, 1)]
ROW_MAJOR, NO_TRANS, TRANS = 101, 111, 112
g = torch.Generator().manual_seed(0)


def runners(shape):
    """Library name -> a call computing this shape's product (same operands for all)."""
    _, ta, tb, M, N, K, upd = shape
    a = torch.rand(K, M, generator=g) if ta else torch.rand(M, K, generator=g)
    b = torch.rand(N, K, generator=g) if tb else torch.rand(K, N, generator=g)
    c = torch.zeros(M, N)
    out = {}
    for name, lib in libs:
        so = ctypes.CDLL(os.path.abspath(lib), mode=os.RTLD_LOCAL)
        f = so.cblas_sgemm
        f.restype = None
        f.argtypes = [ctypes.c_int] * 6 + [ctypes.c_float, ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p,
                                           ctypes.c_int, ctypes.c_float, ctypes.c_void_p, ctypes.c_int]
        fixed = (ROW_MAJOR, TRANS if ta else NO_TRANS, TRANS if tb else NO_TRANS, M, N, K,
                 -0.01 if upd else 1.0, a.data_ptr(), a.shape[1], b.data_ptr(), b.shape[1],
                 1.0 if upd else 0.0, c.data_ptr(), N)
        out[name] = lambda f=f, fixed=fixed, keep=(a, b, c): f(*fixed)  # keep: the operands outlive the call
    if "--no-torch" not in sys.argv:
        at = a.t() if ta else a
        bt = b.t() if tb else b
        out["torch"] = (lambda: c.addmm_(at, bt, alpha=-0.01)) if upd else (lambda: torch.mm(at, bt, out=c))
    return out


print(f"threads {threads} rounds {rounds} reps {reps} torch {torch.__version__}", flush=True)
for shape in SHAPES:
    run = runners(shape)
    order = list(run)
    for f in run.values():
        for _ in range(10):
            f()
    meds = {n: [] for n in order}
    p10 = {n: [] for n in order}
    for r in range(rounds):
        ms = {n: [] for n in order}
        seq = order if r % 2 == 0 else order[::-1]
        for _ in range((reps + 4) // 5):
            for n in seq:
                for _ in range(5):
                    t = time.perf_counter()
                    run[n]()
                    ms[n].append((time.perf_counter() - t) * 1e3)
        for n in order:
            v = sorted(ms[n])
            meds[n].append(v[len(v) // 2])
            p10[n].append(v[len(v) // 10])
    flop = 2.0 * shape[3] * shape[4] * shape[5]
    cells = []
    for n in order:
        m = sorted(meds[n])[len(meds[n]) // 2]
        cells.append(f"{n} {m:.4f} (p10 {min(p10[n]):.4f}, {flop / m / 1e6:.0f} GFLOP/s)")
    print(f"{shape[0]:8s} {shape[3]}x{shape[4]}x{shape[5]}: " + "  ".join(cells), flush=True)
