#!/usr/bin/python3
"""Dynamic shapes against specialized compiles and ONNX Runtime, size by size.

For a model with symbolic input dims and a list of sizes this does two things:

1. One shape-generic compile (`loom run M --auto --dynamic --input PLAN --input S1 ... --check`):
   one process, one compile, every size run and checked against the reference interpreter.
2. Per size, one `loom bench M --input S --auto --generic --generic-plan PLAN [--ort]` process:
   the same shape-generic compile (planned at PLAN, run at S), a compile specialized to S and ONNX
   Runtime at the same thread count, each validated against the reference interpreter, timed in
   interleaved rounds on the same inputs (medians). This is the comparison the table reports:
   within one process, so a shared machine's load falls on all three rows alike.

    bench/dynamic_shapes.py build/loom bench/real_models/text_detector.dynamic.onnx \\
        --plan x=1x3x640x640 x=1x3x32x32 x=1x3x320x320 ... [--ort] [--budget-ms 1500]

Prints a markdown section (--out appends it to a file); the JSON reports go to --json-dir.
"""
import argparse
import json
import os
import re
import subprocess
import sys


def run(cmd, ok_codes=(0,)):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode not in ok_codes:
        sys.exit(f"failed ({p.returncode}): {' '.join(cmd)}\n{p.stdout}\n{p.stderr}")
    return p.stdout


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("loom")
    ap.add_argument("model")
    ap.add_argument("sizes", nargs="+", help="input=DIMS, one per size")
    ap.add_argument("--plan", required=True, help="input=DIMS the shape-generic compile is planned for")
    ap.add_argument("--dim", action="append", default=[], help="--dim NAME=LO..HI for the generic compile")
    ap.add_argument("--ort", action="store_true", help="add ONNX Runtime's row (loom bench --ort)")
    ap.add_argument("--budget-ms", type=float, default=1000, help="timed runs per row (loom bench --budget-ms)")
    ap.add_argument("--json-dir", default="bench/out/dynamic", help="where the loom bench reports go")
    ap.add_argument("--name", help="label of the model in the output (default: the file's stem)")
    ap.add_argument("--out", help="append the markdown section to this file")
    ap.add_argument("--separate", action="store_true",
                    help="time the generic compile in step 1's process (--repeats runs per size) instead of a "
                         "--generic row recompiled in each size's loom bench: for models whose one-pipeline "
                         "compile takes minutes (not interleaved with the specialized row then)")
    ap.add_argument("--repeats", type=int, default=3, help="step 1's timed runs per size")
    ap.add_argument("--small-size-plan", action="store_true",
                    help="the generic compile serves short sizes with a second plan (loom --small-size-plan)")
    ap.add_argument("--generic-log", help="read step 1's output from this file (a saved run of its command) "
                                          "instead of running it")
    args = ap.parse_args()
    name = args.name or os.path.basename(args.model).split(".")[0]
    os.makedirs(args.json_dir, exist_ok=True)
    dims = sum((["--dim", d] for d in args.dim), []) + (["--small-size-plan"] if args.small_size_plan else [])
    lines = []

    # 1. One compile, every size, checked.
    gen = [args.loom, "run", args.model, "--auto", "--check", "--repeats", str(args.repeats), "--input", args.plan]
    gen += sum((["--input", s] for s in args.sizes if s != args.plan), []) + dims
    if not args.dim:
        gen.append("--dynamic")
    if args.generic_log:
        with open(args.generic_log) as f:
            out = f.read()
    else:
        out = run(gen)
    step1_ms = dict(re.findall(r"^size (\S+): run ([0-9.]+) ms", out, re.M))
    m = re.search(r"compiled once .*?: compile ([0-9.]+) s(?: \(([0-9.]+) CPU s\))?", out)
    compile_s = float(m.group(2) or m.group(1))  # CPU seconds where loom prints them
    second = re.search(r"^sizes where not \((.*?)\) run a second plan, made for (\S+)", out, re.M)
    checks = re.findall(r"^size (\S+): .*?\n(?:.*\n)*?\s+check \S+: rel error (\S+),", out, re.M)
    special = re.findall(r"^specialized when (.*?) \(tails as written", out, re.M)
    lines.append(f"### {name}: one compile planned at {args.plan}")
    lines.append("")
    lines.append(f"`{' '.join(gen)}`: compile {compile_s:.2f} CPU s, {len(checks)} sizes checked against the "
                 f"reference interpreter (rel. errors {', '.join(e for _, e in checks)}); "
                 + (f"specialized when {special[0]}" if len(special) == 1 else
                    f"{len(special)} kernel conditions, shortest: {min(special, key=len)}" if special else
                    "no specialization") + "."
                 + (f" Sizes where not ({second.group(1)}) run a second plan, made for {second.group(2)}."
                    if second else ""))
    lines.append("")

    # 2. Per size: generic, specialized and ONNX Runtime in one interleaved `loom bench`.
    if args.separate:
        lines.append(f"Generic ms: median of {args.repeats} runs in the one-compile process above; specialized "
                     "and ORT: one interleaved `loom bench` per size (separate processes: compare with care).")
        lines.append("")
    lines.append("| size | generic ms | specialized ms | generic / specialized | ORT ms | ORT / generic "
                 "| rel err generic | compile CPU s generic / specialized |")
    lines.append("|---|---|---|---|---|---|---|---|")
    for size in args.sizes:
        path = os.path.join(args.json_dir, f"{name}_{size.replace('=', '_')}.json")
        generic = [] if args.separate else ["--generic", "--generic-plan", args.plan] + dims
        cmd = [args.loom, "bench", args.model, "--input", size, "--auto", "--budget-ms", str(args.budget_ms),
               "--json", path] + generic + (["--ort"] if args.ort else [])
        run(cmd, ok_codes=(0, 1))  # 1: one of Loom's rows failed; its row says why
        with open(path) as f:
            rows = {r["schedule"]: r for r in json.load(f)["rows"]}
        g, s, o = rows.get("auto generic"), rows.get("auto"), rows.get("ort")

        def ms(r):
            return r["median_ms"] if r and r.get("ok") else None

        def fmt(v, spec=".3f"):
            return "failed" if v is None else format(v, spec)
        gm, sm, om = ms(g), ms(s), ms(o)
        if args.separate:
            gm = float(step1_ms[size]) if size in step1_ms else None
            g = {"ok": gm is not None, "compile_s": compile_s,
                 "rel_error": float(dict(checks).get(size, "nan")), "error": "failed"}
        ratio = f"{gm / sm:.2f}x" if gm and sm else "-"
        speed = f"{om / gm:.2f}x" if gm and om else ("-" if not args.ort else "failed")
        err = f"{g['rel_error']:.1e}" if g and g.get("ok") else (g or {}).get("error", "failed")
        def cpu(r):  # CPU seconds where the report has them
            return r.get("compile_cpu_s") or r["compile_s"]
        comp = f"{cpu(g):.1f} / {cpu(s):.1f}" if g and s else "-"
        lines.append(f"| {size} | {fmt(gm)} | {fmt(sm)} | {ratio} | {fmt(om) if args.ort else '-'} | {speed} "
                     f"| {err} | {comp} |")
        print(lines[-1], file=sys.stderr, flush=True)
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        with open(args.out, "a") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
