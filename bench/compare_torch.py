#!/usr/bin/python3
"""Times the benchmark workloads in PyTorch eager (CPU, Debian's torch 1.13) by the method
`loom bench` uses: a few warm-up runs, then runs until a time budget, inputs rotated among several
seeded sets; median, min and max. With --loom it prints the Loom/PyTorch ratio next to each.

Usage: bench/compare_torch.py [--small] [--budget-ms 1000] [--threads N] [--json out.json]
                              [--loom bench/out] [NAME ...]

--loom takes a folder of `loom bench --json` files (<workload>.json) or one suite JSON
(bench/run_suite's), and compares PyTorch with the fastest valid Loom schedule of each workload.
"""
import argparse
import glob
import json
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "frontends", "torch"))
import export_workloads  # noqa: E402


def input_sets(spec, seed0, bytes_target=64 << 20):
    """Enough seeded input sets to overflow the caches (64 MiB together), 2..8, as loom bench."""
    shapes = spec[1]
    per = sum(4 * torch.Size(s).numel() for s in shapes.values())
    n = max(2, min(8, -(-bytes_target // max(per, 1))))
    while n > 2 and per * n > 2 << 30:
        n -= 1
    sets = []
    for k in range(n):
        g = torch.Generator().manual_seed(seed0 + k)
        sets.append(tuple(torch.rand(*s, generator=g) * 2 - 1 for s in shapes.values()))
    return sets


def time_workload(name, spec, budget_ms, warmup=2, min_runs=3):
    model, _ = export_workloads.build(spec[0], spec[1])
    sets = input_sets(spec, 1)
    times = []
    with torch.inference_mode():
        k = 0
        for _ in range(warmup):
            model(*sets[k % len(sets)])
            k += 1
        start = time.perf_counter()
        while len(times) < min_runs or (time.perf_counter() - start) * 1e3 < budget_ms:
            inp = sets[k % len(sets)]
            t0 = time.perf_counter()
            model(*inp)
            times.append((time.perf_counter() - t0) * 1e3)
            k += 1
    return {"median_ms": statistics.median(times), "min_ms": min(times), "max_ms": max(times),
            "runs": len(times), "input_sets": len(sets)}


def load_loom(path):
    """workload -> (best schedule, its median ms) from loom bench JSON files."""
    reports = []
    if os.path.isdir(path):
        for f in sorted(glob.glob(os.path.join(path, "*.json"))):
            with open(f) as fh:
                d = json.load(fh)
            if "rows" in d:
                reports.append(d)
    elif os.path.exists(path):
        with open(path) as fh:
            d = json.load(fh)
        reports = d.get("workloads", [d])
    best = {}
    for r in reports:
        # Loom's own rows only: ONNX Runtime's (kind "ort") is a peer, not a Loom schedule.
        ok = [row for row in r["rows"] if row["ok"] and row.get("kind") != "ort"]
        if ok:
            b = min(ok, key=lambda row: row["median_ms"])
            # A folder may hold a workload's per-schedule files too (run_suite's re-runs): keep the best.
            if r["workload"] not in best or b["median_ms"] < best[r["workload"]][1]:
                best[r["workload"]] = (b["schedule"], b["median_ms"])
    return best


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--small", action="store_true")
    ap.add_argument("--budget-ms", type=float, default=1000)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--json", help="write the timings as JSON")
    ap.add_argument("--loom", help="loom bench JSON folder or suite JSON to compare with")
    ap.add_argument("names", nargs="*")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    table = export_workloads.all_workloads(args.small)
    names = args.names or list(table)
    loom = load_loom(args.loom) if args.loom else {}
    results = {}
    print(f"PyTorch {torch.__version__} eager, CPU, {torch.get_num_threads()} threads")
    print(f"{'workload':16} {'torch ms':>10} {'min..max ms':>19} {'runs':>5}   loom best (ms)            loom/torch")
    for name in names:
        if name not in table:
            sys.exit(f"unknown workload '{name}'; known: {' '.join(table)}")
        try:
            r = time_workload(name, table[name], args.budget_ms)
        except ImportError as e:
            print(f"{name:16} skipped ({e})")
            results[name] = {"error": str(e)}
            continue
        results[name] = r
        line = (f"{name:16} {r['median_ms']:10.3f} {r['min_ms']:9.3f}..{r['max_ms']:<9.3f} {r['runs']:5d}")
        if name in loom:
            sched, ms = loom[name]
            r["loom_schedule"], r["loom_ms"], r["loom_over_torch"] = sched, ms, ms / r["median_ms"]
            line += f"   {sched[:14]:14} {ms:9.3f}   {ms / r['median_ms']:8.3f}"
        print(line, flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"torch": torch.__version__, "threads": torch.get_num_threads(),
                       "budget_ms": args.budget_ms, "workloads": results}, f, indent=1)


if __name__ == "__main__":
    main()
