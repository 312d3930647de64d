#!/usr/bin/env python3
"""Serving-size networks on the GPU machine (issue 30): Loom's artifact against PyTorch eager and
torch.compile (mode="max-autotune"; at batch 1 also "reduce-overhead"), in one process, at one
precision per row, every output checked against float64.

Each artifact folder is <name>_b<batch>__<precision> (`loom compile --target cuda --precision P
--no-reference`, of frontends/torch/serving_models.py's export). This rebuilds the same torch module
with the same sign weights (serving_models.build), checks the weights' fingerprint against the one
the export recorded (so the artifact and PyTorch compute the same function), computes the float64
reference on the GPU, loads the artifact in-process (in_process.py: its run_device on PyTorch's
tensors, which replays a CUDA graph from the second call) and times all three with
triton.testing.do_bench (L2 flushed, median; PyTorch's best of three rounds).

Precision: fp32 (PyTorch's TF32 off), tf32 (TF32 allowed in cuDNN and matmul), bf16 / fp16
(torch.autocast). Loom's tolerance is its artifact's data/tolerance.txt (the rule of
src/measure/output_tolerance.h); PyTorch's outputs are held to the same bound.

A whole network's max-autotune compile can outrun a 10-minute call (each Triton GEMM template is
compiled and timed), so run_serving.sh may first run this with --compile-only in several processes
at once: that only compiles and runs each row's modes, which fills inductor's on-disk caches (FX
graph and autotuning results) and marks each finished compile in --warm-dir; the timing process
then compiles the same graphs from the cache. A compile with no mark there is made with
--fallback-gemm-backends instead (its column is named so), and every row says which it was.

Usage: serving_bench.py ARTIFACT_DIR... [--models DIR] [--out FILE.json] [--no-compile]
       [--compile-only --warm-dir DIR] [--profile REGEX]
"""
import argparse
import datetime
import json
import os
import re
import sys
import time

import torch
import triton

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from in_process import Artifact  # noqa: E402


def rel_err(out, ref):
    out = out.double()
    if not torch.isfinite(out).all():
        return float("inf")
    return (torch.linalg.vector_norm(out - ref) / torch.linalg.vector_norm(ref)).item()


def bench(fn, rounds=1):
    return min(triton.testing.do_bench(fn, warmup=25, rep=200, return_mode="median") for _ in range(rounds))


def kernel_profile(fn, top, reps=20):
    r"""The CUDA kernels of one call of \p fn (torch.profiler/CUPTI, averaged over \p reps warm
    calls): (microseconds per call, kernels per call, [(us, count per call, name)] of the top)."""
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(reps):
            fn()
        torch.cuda.synchronize()
    rows = sorted((e for e in prof.key_averages() if e.device_time_total > 0), key=lambda e: -e.device_time_total)
    total = sum(e.device_time_total for e in rows) / reps
    launches = sum(e.count for e in rows) / reps
    return total, launches, [(e.device_time_total / reps, e.count / reps, e.key[:140]) for e in rows[:top]]


def print_profile(label, prof):
    total, launches, top = prof
    print(f"KERNELS {label}: {total:.1f} us of kernels per call, {launches:.0f} kernels", flush=True)
    for us, count, name in top:
        print(f"  {us:9.1f} us  x{count:<5.0f} {name}", flush=True)


def parse_folder(folder):
    m = re.match(r"(.+)_b(\d+)__(fp32|tf32|bf16|fp16)$", os.path.basename(os.path.normpath(folder)))
    if not m:
        sys.exit(f"{folder}: expected a folder named <model>_b<batch>__<precision>")
    return m.group(1), int(m.group(2)), m.group(3)


def compile_and_run(model, x, mode, gemm_backends=None):
    """torch.compile(model, mode) run thrice (the compile happens in the first call; CUDA graphs
    record by the third): (the compiled module, its last output, seconds, inductor's FX graph
    cache hits and misses in this compile)."""
    import torch._inductor.config as inductor_config
    from torch._dynamo.utils import counters
    torch._dynamo.reset()  # a fresh compile: no earlier mode's code or CUDA graphs reused
    before = dict(counters["inductor"])
    t0 = time.time()
    patch = {"max_autotune_gemm_backends": gemm_backends} if gemm_backends else {}
    with inductor_config.patch(patch):
        cm = torch.compile(model, mode=mode)
        for _ in range(3):
            y = cm(x)
        torch.cuda.synchronize()
    cache = {k: counters["inductor"][k] - before.get(k, 0) for k in ("fxgraph_cache_hit", "fxgraph_cache_miss")}
    return cm, y, time.time() - t0, cache


def warm_mark(warm_dir, folder, mode):
    return os.path.join(warm_dir, f"{os.path.basename(os.path.normpath(folder))}.{mode}.done")


def set_precision(p):
    tf32 = p == "tf32"
    torch.backends.cudnn.allow_tf32 = tf32
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.benchmark = True


def autocast(p):
    if p in ("bf16", "fp16"):
        return torch.autocast("cuda", dtype=torch.bfloat16 if p == "bf16" else torch.float16)
    return torch.autocast("cuda", enabled=False)


def tolerance(folder):
    with open(os.path.join(folder, "data", "tolerance.txt")) as f:
        return float(f.readline().split()[1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("artifacts", nargs="+")
    ap.add_argument("--models", required=True, help="folder of the exports' .fingerprint files and serving_models.py")
    ap.add_argument("--out", default="serving_bench.json")
    ap.add_argument("--no-compile", action="store_true", help="skip torch.compile (eager and Loom only)")
    ap.add_argument("--modes", default="max-autotune",
                    help="torch.compile modes, comma-separated (at batch 1 reduce-overhead is added)")
    ap.add_argument("--conv-backends", default=None,
                    help="inductor's max_autotune_conv_backends (ATEN: convs are cuDNN's, not autotuned Triton "
                         "templates; ResNet-50 b32's full conv autotuning outran a 10-minute call on an H200)")
    ap.add_argument("--gemm-backends", default=None,
                    help="inductor's max_autotune_gemm_backends for every compile (default: inductor's, ATEN,TRITON)")
    ap.add_argument("--batch1-modes", default="reduce-overhead",
                    help="modes added at batch 1, comma-separated ('' for none)")
    ap.add_argument("--compile-only", action="store_true",
                    help="only compile and run each row's modes (fills inductor's caches), marking each in --warm-dir")
    ap.add_argument("--warm-dir", default=None, help="folder of --compile-only's marks (<row>.<mode>.done)")
    ap.add_argument("--fallback-gemm-backends", default=None,
                    help="with --warm-dir: the max_autotune_gemm_backends of a compile that has no mark there")
    ap.add_argument("--profile", default=None,
                    help="regex of artifact folder names whose kernels are listed (Loom and each mode)")
    ap.add_argument("--top", type=int, default=12, help="kernels listed per profile")
    ap.add_argument("--baseline-root", default=None,
                    help="folder of earlier artifacts of the same names: each one found is checked and timed "
                         "in its row beside the artifact (columns loom_base_*), before and after PyTorch")
    args = ap.parse_args()
    sys.path.insert(0, args.models)
    import torch._inductor.config as inductor_config
    if args.conv_backends:
        inductor_config.max_autotune_conv_backends = args.conv_backends
    if args.gemm_backends:
        inductor_config.max_autotune_gemm_backends = args.gemm_backends
    import serving_models  # noqa: E402

    def modes_of(batch):
        if args.no_compile:
            return []
        extra = [m for m in args.batch1_modes.split(",") if m] if batch == 1 else []
        return args.modes.split(",") + extra

    if args.compile_only:
        if args.warm_dir:
            os.makedirs(args.warm_dir, exist_ok=True)
        for folder in args.artifacts:
            name, batch, prec = parse_folder(folder)
            model, x = serving_models.build(name, batch)
            model, x = model.cuda(), x.cuda()
            set_precision(prec)
            for mode in modes_of(batch):
                with torch.no_grad(), autocast(prec):
                    _, _, secs, cache = compile_and_run(model, x, mode)
                print(f"WARM {os.path.basename(os.path.normpath(folder))} {mode}: compiled in {secs:.0f} s ({cache})",
                      flush=True)
                if args.warm_dir:
                    with open(warm_mark(args.warm_dir, folder, mode), "w") as f:
                        f.write(f"{secs:.1f}\n")
        return 0

    dev = torch.cuda.get_device_name()
    print(f"device: {dev}, torch {torch.__version__}, triton {triton.__version__}, "
          f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC", flush=True)
    rows, modules = [], {}
    for folder in args.artifacts:
        name, batch, prec = parse_folder(folder)
        try:
            row = measure_row(args, serving_models, modules, folder, name, batch, prec, dev, modes_of(batch))
        except Exception as e:  # noqa: BLE001 -- one row's failure must not lose the others
            print(f"ROW {name} b{batch} {prec}: FAILED {type(e).__name__}: {e}", flush=True)
            row = {"model": name, "batch": batch, "precision": prec, "device": dev, "ok": False,
                   "error": f"{type(e).__name__}: {e}"}
        rows.append(row)
        torch._dynamo.reset()
        with open(args.out, "w") as f:
            json.dump(rows, f, indent=1)
    print("\n| network | batch | precision | Loom ms | eager ms | torch.compile ms (mode) | Loom vs compile | "
          "Loom err | tol |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        if "error" in r:
            print(f"| {r['model']} | {r['batch']} | {r['precision']} | failed: {r['error'][:80]} |")
            continue
        loom = min(r["loom_ms"], r["loom_ms_again"])
        comp = {k[:-3]: v for k, v in r.items() if k.endswith("_ms") and not k.startswith(("loom", "eager"))}
        best = min(comp.values()) if comp else None
        print(f"| {r['model']} | {r['batch']} | {r['precision']} | {loom:.3f} | {r['eager_ms']:.3f} | "
              + ", ".join(f"{v:.3f} ({k})" for k, v in comp.items())
              + f" | {'-' if best is None else f'{best / loom:.2f}x'} | {r['loom_err']:.1e} | {r['tolerance']:.1e} |")
    return 0 if all(r["ok"] for r in rows) else 1


def measure_row(args, serving_models, modules, folder, name, batch, prec, dev, modes):
    r"""One row: Loom's artifact in \p folder against eager and each of \p modes, every output
    checked against the module in float64."""
    key = (name, batch)
    if key not in modules:
        model, x = serving_models.build(name, batch)
        want = open(os.path.join(args.models, f"{name}_b{batch}.fingerprint")).read().strip()
        got = serving_models.fingerprint(model)
        if got != want:  # the timings still stand; the checks then compare different functions
            print(f"WARNING {name} b{batch}: weights differ from the export's (fingerprint {got[:12]} != "
                  f"{want[:12]}): outputs will not match", flush=True)
        model = model.cuda()
        x = x.cuda()
        with torch.no_grad():
            ref = model.double()(x.double())
        model = model.float()
        modules.clear()  # one network's module and reference on the GPU at a time
        modules[key] = (model, x, ref, got == want)
    model, x, ref, weights_match = modules[key]
    tol = tolerance(folder)
    row = {"model": name, "batch": batch, "precision": prec, "tolerance": tol, "device": dev,
           "weights_match": weights_match, "torch": torch.__version__, "triton": triton.__version__}
    set_precision(prec)
    profiled = bool(args.profile and re.search(args.profile, os.path.basename(os.path.normpath(folder))))

    t0 = time.time()
    art = Artifact(folder)
    art.bind([x])
    out = art.run()[0]
    torch.cuda.synchronize()
    row["loom_first_call_s"] = time.time() - t0
    row["loom_err"] = rel_err(out, ref)
    row["loom_ms"] = bench(art.run)
    out.fill_(float("nan"))
    art.run()
    row["loom_err_after"] = rel_err(art.outputs[0], ref)
    label = f"{name} b{batch} {prec}"
    profiles = {}
    if profiled:
        profiles["loom"] = kernel_profile(art.run, args.top)
        print_profile(f"{label} Loom", profiles["loom"])
    base = None
    base_dir = args.baseline_root and os.path.join(args.baseline_root, os.path.basename(os.path.normpath(folder)))
    if base_dir and os.path.isdir(base_dir):
        art.close()  # one artifact's buffers on the GPU at a time
        base = Artifact(base_dir)
        base.bind([x])
        row["loom_base_err"] = rel_err(base.run()[0], ref)
        row["loom_base_ms"] = bench(base.run)
        print(f"BASE {label}: {row['loom_base_ms']:.3f} ms (err {row['loom_base_err']:.2e})", flush=True)
        if profiled:
            profiles["loom_base"] = kernel_profile(base.run, args.top)
            print_profile(f"{label} Loom baseline", profiles["loom_base"])
        base.close()
        base = Artifact(base_dir)
        art = Artifact(folder)
        art.bind([x])
        art.run()

    import torch._inductor.config as inductor_config
    columns = []
    with torch.no_grad(), autocast(prec):
        row["eager_err"] = rel_err(model(x), ref)
        row["eager_ms"] = bench(lambda: model(x), rounds=3)
        print(f"PARTIAL {label}: loom {row['loom_ms']:.3f} ms (err {row['loom_err']:.2e}, "
              f"tol {tol:.1e}, first call {row['loom_first_call_s']:.1f} s) eager {row['eager_ms']:.3f} ms "
              f"(err {row['eager_err']:.2e})", flush=True)
        for mode in modes:
            warm = bool(args.warm_dir) and os.path.exists(warm_mark(args.warm_dir, folder, mode))
            gemm = None
            if args.warm_dir and not warm and args.fallback_gemm_backends and mode.startswith("max-autotune"):
                gemm = args.fallback_gemm_backends
            col = mode if gemm is None else f"{mode}[gemm={gemm}]"
            columns.append(col)
            cm, y, secs, cache = compile_and_run(model, x, mode, gemm)
            row[f"{col}_compile_s"] = secs
            row[f"{col}_inductor"] = {"conv_backends": inductor_config.max_autotune_conv_backends,
                                      "gemm_backends": gemm or inductor_config.max_autotune_gemm_backends,
                                      "warmed_up": warm, "fx_graph_cache": cache}
            row[f"{col}_err"] = rel_err(y, ref)
            row[f"{col}_ms"] = bench(lambda: cm(x), rounds=3)
            print(f"PARTIAL {label}: {col} {row[col + '_ms']:.3f} ms (compile {secs:.0f} s"
                  f"{', warmed up' if warm else ''}, {cache}, err {row[col + '_err']:.2e})", flush=True)
            if profiled:
                profiles[col] = kernel_profile(lambda: cm(x), args.top)
                print_profile(f"{label} {col}", profiles[col])
            cm = y = None
    row["loom_ms_again"] = bench(art.run)
    art.close()
    if base is not None:
        base.bind([x])
        base.run()
        row["loom_base_ms_again"] = bench(base.run)
        base.close()
    if profiles:
        row["kernels"] = profiles
    ok = all(row[k] < tol for k in row if k.endswith("_err") or k == "loom_err_after")
    row["ok"] = ok
    best_pt = min(row[k] for k in row if k.endswith("_ms") and not k.startswith("loom"))
    if "loom_base_ms" in row:
        print(f"BASE {label}: baseline {min(row['loom_base_ms'], row['loom_base_ms_again']):.3f} ms -> "
              f"{min(row['loom_ms'], row['loom_ms_again']):.3f} ms", flush=True)
    loom = min(row["loom_ms"], row["loom_ms_again"])
    print(f"ROW {label}: loom {row['loom_ms']:.3f}/{row['loom_ms_again']:.3f} ms "
          f"(err {row['loom_err']:.2e}, tol {tol:.1e}) eager {row['eager_ms']:.3f} "
          + " ".join(f"{c} {row[c + '_ms']:.3f} (compile {row[c + '_compile_s']:.0f} s, err {row[c + '_err']:.2e})"
                     for c in columns)
          + f" -> loom vs best PyTorch {best_pt / loom:.2f}x {'ok' if ok else 'CHECK FAILED'}", flush=True)
    return row


if __name__ == "__main__":
    sys.exit(main())
