#!/usr/bin/python3
"""Plots `loom bench` results (matplotlib): for one workload, a bar per schedule (median ms, with
min..max whiskers, labelled with % of roofline); for a suite (bench/run_suite's JSON), one group per
workload: each schedule's % of this machine's roofline, and its speedup over eager.

Usage: bench/plot.py report.json -o out.png
"""
import argparse
import json
import math
import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def save_atomically(fig, out):
    """A temporary name in the same folder, then a rename: a reader never sees half an image."""
    root, ext = os.path.splitext(out)
    tmp = f"{root}.tmp{os.getpid()}{ext}"
    try:
        fig.savefig(tmp, dpi=110)
        os.replace(tmp, out)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def plot_one(r, out):
    rows = r["rows"]
    labels = [x["schedule"] for x in rows]
    med = [x["median_ms"] if x["ok"] else 0 for x in rows]
    lo = [x["median_ms"] - x["min_ms"] if x["ok"] else 0 for x in rows]
    hi = [x["max_ms"] - x["median_ms"] if x["ok"] else 0 for x in rows]
    fig, ax = plt.subplots(figsize=(8, 0.6 * len(rows) + 1.5))
    y = range(len(rows))
    ax.barh(y, med, xerr=[lo, hi], color=["C0" if x["ok"] else "0.8" for x in rows], capsize=3)
    ax.set_yticks(list(y))
    ax.set_yticklabels(labels)
    ax.invert_yaxis()
    for i, x in enumerate(rows):
        txt = (f"{x['median_ms']:.3g} ms, {x['pct_roofline']:.0f}% roofline" if x["ok"]
               else "FAILED: " + x.get("failed_at", ""))
        ax.text(med[i], i, "  " + txt, va="center", fontsize=8)
    ax.set_xlabel("median ms (min..max whiskers)")
    ax.set_title(f"{r['workload']} on {r['machine']['cpu']} ({r['machine']['cores']} cores)", fontsize=9)
    ax.set_xlim(0, max(med + [1e-3]) * 1.8)
    fig.tight_layout()
    save_atomically(fig, out)


def plot_suite(d, out):
    reports = d["workloads"]
    scheds = []
    for r in reports:
        for x in r["rows"]:
            if x["schedule"] not in scheds:
                scheds.append(x["schedule"])
    torch_ms = {k: v.get("median_ms") for k, v in d.get("torch", {}).get("workloads", {}).items()}
    if torch_ms:
        scheds.append("pytorch")
    n, m = len(reports), len(scheds)
    width = 0.8 / max(m, 1)
    fig, axes = plt.subplots(2, 1, figsize=(max(8, 1.1 * n + 2), 8), sharex=True)
    for j, s in enumerate(scheds):
        roof, speed = [], []
        for r in reports:
            row = next((x for x in r["rows"] if x["schedule"] == s and x["ok"]), None)
            eager = next((x for x in r["rows"] if x["kind"] == "eager" and x["ok"]), None)
            if s == "pytorch" and torch_ms.get(r["workload"]):
                ms = torch_ms[r["workload"]]
                roof.append(100 * r["cost"]["roofline_ms"] / ms)
                speed.append(eager["median_ms"] / ms if eager else math.nan)
            elif row:
                roof.append(row["pct_roofline"])
                speed.append(row["speedup_vs_eager"] or math.nan)
            else:
                roof.append(math.nan)
                speed.append(math.nan)
        xs = [i + (j - (m - 1) / 2) * width for i in range(n)]
        axes[0].bar(xs, roof, width, label=s)
        axes[1].bar(xs, speed, width, label=s)
    axes[0].set_ylabel("% of roofline")
    axes[1].set_ylabel("speedup over eager")
    axes[1].set_yscale("log")
    axes[1].axhline(1, color="0.5", lw=0.8)
    axes[1].set_xticks(range(n))
    axes[1].set_xticklabels([r["workload"] for r in reports], rotation=30, ha="right")
    axes[0].legend(fontsize=8, ncol=min(m, 4))
    mach = reports[0]["machine"] if reports else {}
    axes[0].set_title(f"Loom bench on {mach.get('cpu', '?')} ({mach.get('cores', '?')} cores), "
                      f"{d.get('date', '')}", fontsize=9)
    fig.tight_layout()
    save_atomically(fig, out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("json")
    ap.add_argument("-o", "--out", required=True)
    args = ap.parse_args()
    with open(args.json) as f:
        d = json.load(f)
    if "workloads" in d and isinstance(d["workloads"], list):
        plot_suite(d, args.out)
    else:
        plot_one(d, args.out)


if __name__ == "__main__":
    main()
