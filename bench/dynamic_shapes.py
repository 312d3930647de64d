#!/usr/bin/python3
"""Dynamic shapes against specialized compiles: one `loom run --auto` compile of a model with open
dims runs at every size given, beside a compile specialized to each size (`--input` alone), each
checked against the reference interpreter. Prints a markdown table: run ms of both, their ratio,
and the compile seconds.

    bench/dynamic_shapes.py build/loom tests/data/dynamic_transformer.onnx x=2x128x64 x=1x1x64 ...

The first size is the one the shape-generic compile is planned for. Runs are medians of
--repeats timed runs, each compile in its own process (the machine is shared: compare ratios).
"""
import argparse
import re
import subprocess
import sys


def run(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"failed ({p.returncode}): {' '.join(cmd)}\n{p.stdout}\n{p.stderr}")
    return p.stdout


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("loom")
    ap.add_argument("model")
    ap.add_argument("sizes", nargs="+", help="input=DIMS, the first one planned for")
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--dim", action="append", default=[], help="--dim NAME=LO..HI for the generic compile")
    args = ap.parse_args()

    base = [args.loom, "run", args.model, "--auto", "--check", "--repeats", str(args.repeats)]
    gen = base + sum((["--input", s] for s in args.sizes), []) + sum((["--dim", d] for d in args.dim), [])
    if len(args.sizes) == 1 and not args.dim:
        gen.append("--dynamic")
    out = run(gen)
    gen_compile = float(re.search(r"compiled once .*?: compile ([0-9.]+) s", out).group(1))
    gen_runs = [float(m) for m in re.findall(r"^size .*?: run ([0-9.]+) ms", out, re.M)]
    guarded = re.search(r"(\d+) splits of loops whose extents move", out)
    rows = []
    for size, g_ms in zip(args.sizes, gen_runs):
        o = run(base + ["--input", size])
        m = re.search(r": compile ([0-9.]+) s.*?, run ([0-9.]+) ms", o)
        rows.append((size, g_ms, float(m.group(2)), float(m.group(1))))
    print(f"one shape-generic compile: {gen_compile:.2f} s"
          + (f" ({guarded.group(1)} splits made GuardWithIf)" if guarded else ""))
    print()
    print("| size | generic ms | specialized ms | generic / specialized | specialized compile s |")
    print("|---|---|---|---|---|")
    for size, g, s, c in rows:
        print(f"| {size} | {g:.3f} | {s:.3f} | {g / s:.2f}x | {c:.2f} |")
    mean_c = sum(r[3] for r in rows) / len(rows)
    print()
    print(f"compile: generic {gen_compile:.2f} s once, specialized {mean_c:.2f} s per size on average "
          f"(generic / specialized {gen_compile / mean_c:.2f}x; {len(rows)} sizes: {sum(r[3] for r in rows):.1f} s)")


if __name__ == "__main__":
    main()
