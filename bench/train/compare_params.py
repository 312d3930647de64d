#!/usr/bin/env python3
"""Compares the first training step of two artifacts (gpu_step_driver.c's LOOM_PARAM_DUMP files:
every parameter before and after the step): per parameter, the L2 difference of the updates
(after - before, i.e. -lr * gradient for SGD) relative to ||u_b||, floored at 1e-3 of the largest
parameter's update norm (a parameter whose gradient is zero in exact arithmetic, such as a conv's
bias before a BatchNorm, has an update of rounding noise on both sides), and the largest of them.
At a small learning rate the update read back through float32 parameters carries their rounding
(bench/DECISIONS.md#d112-gradient-check-at-raised-learning-rate); first_step_f64.py checks gradients.
usage: compare_params.py CANDIDATE.bin REFERENCE.bin [TOLERANCE]   (exit 1 above TOLERANCE, or on NaN)"""
import os
import sys

import numpy as np


def read_dump(path):
    """(names or None, parameters before, parameters after) of a LOOM_PARAM_DUMP file, as float32
    arrays; names from FILE.names when gpu_step_driver.c wrote it."""
    raw = open(path, "rb").read()
    out, at = [], 0
    while at < len(raw):
        n = int(np.frombuffer(raw, np.int64, 1, at)[0])
        at += 8
        out.append(np.frombuffer(raw, np.float32, n, at).copy())
        at += 4 * n
    half = len(out) // 2
    names = open(path + ".names").read().split() if os.path.exists(path + ".names") else None
    assert names is None or len(names) == half, f"{path}: {half} parameters, {len(names)} names"
    return names, out[:half], out[half:]


def read(path):
    _, before, after = read_dump(path)
    return [a.astype(np.float64) - b.astype(np.float64) for b, a in zip(before, after)]


def main():
    a, b = read(sys.argv[1]), read(sys.argv[2])
    tol = float(sys.argv[3]) if len(sys.argv) > 3 else 1e-4
    assert len(a) == len(b), "different parameter counts"
    worst = 0.0
    floor = 1e-3 * max(np.linalg.norm(ub) for ub in b)
    for ua, ub in zip(a, b):
        rel = np.linalg.norm(ua - ub) / max(np.linalg.norm(ub), floor, 1e-30)
        if not np.isfinite(rel) or not np.all(np.isfinite(ua)):
            rel = float("inf")
        worst = max(worst, rel)
    print("update_rel_l2 max %.3e over %d parameters (tolerance %.0e): %s" % (worst, len(a), tol, "ok" if worst <= tol else "FAIL"))
    sys.exit(0 if worst <= tol else 1)


if __name__ == "__main__":
    main()
