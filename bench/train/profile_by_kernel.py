#!/usr/bin/python3
"""Per-kernel time of a training step at two thread counts, from two Halide profiles (artifacts
compiled with `--target <T>-profile`, the driver's stdout), each profile's Funcs summed by the
plan's kernels (`loom compile --train --report`). Halide's profiler charges a parallel loop's wait
for its last task to the Func that owns the loop (a GEMM's output wrapper or epilogue root), so
single Funcs can look as if they did not scale while their kernel does.

usage: bench/train/profile_by_kernel.py REPORT PROFILE_1_THREAD PROFILE_2_THREADS
"""
import re
import sys


def kernels(report):
    """Func name -> the root of its kernel; root -> the kernel's name."""
    owner, name, cur = {}, {}, None
    for line in open(report):
        m = re.match(r"kernel \d+: (\S+)\s+\((\w+), loop nest of (\S+)\)", line)
        if m:
            cur = m.group(3)
            name[cur], owner[cur] = m.group(1), cur
            continue
        m = re.match(r"  (\S+) \[\w+\]", line)
        if m and cur:
            owner[m.group(1)] = cur
    return owner, name


def profile(path, owner):
    """Kernel root -> ms per run, summed over the profile's pipelines."""
    t = {}
    for line in open(path):
        m = re.match(r"\s+(\S+?):\s*([0-9.]+)ms", line)
        if not m or m.group(1).startswith("halide_"):
            continue
        f = m.group(1)
        base = re.sub(r"_weight_read_in_.*$", "_transpose", f)
        base = re.sub(r"(_global_wrapper\$\d+|\$\d+|_intm)$", "", base)
        k = owner.get(base) or owner.get(f) or "?" + f
        t[k] = t.get(k, 0) + float(m.group(2))
    return t


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    owner, name = kernels(sys.argv[1])
    a, b = profile(sys.argv[2], owner), profile(sys.argv[3], owner)
    print(f"{'kernel':40s} {'root':28s} 1t_ms  2t_ms  1t/2t")
    for k in sorted(set(a) | set(b), key=lambda k: -a.get(k, 0)):
        x, y = a.get(k, 0), b.get(k, 0)
        if max(x, y) >= 0.015:
            print(f"{name.get(k, k)[:40]:40s} {k[:28]:28s} {x:.3f}  {y:.3f}  {x / y if y else 0:.2f}")
    ta, tb = sum(a.values()), sum(b.values())
    print(f"{'total':69s} {ta:.3f}  {tb:.3f}  {ta / tb if tb else 0:.2f}")


if __name__ == "__main__":
    main()
