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

Usage: serving_bench.py ARTIFACT_DIR... [--models DIR] [--out FILE.json] [--no-compile]
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
    args = ap.parse_args()
    sys.path.insert(0, args.models)
    if args.conv_backends:
        import torch._inductor.config as inductor_config
        inductor_config.max_autotune_conv_backends = args.conv_backends
    import serving_models  # noqa: E402

    dev = torch.cuda.get_device_name()
    print(f"device: {dev}, torch {torch.__version__}, triton {triton.__version__}, "
          f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC", flush=True)
    rows, modules = [], {}
    for folder in args.artifacts:
        m = re.match(r"(.+)_b(\d+)__(fp32|tf32|bf16|fp16)$", os.path.basename(os.path.normpath(folder)))
        if not m:
            sys.exit(f"{folder}: expected a folder named <model>_b<batch>__<precision>")
        name, batch, prec = m.group(1), int(m.group(2)), m.group(3)
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
            modules[key] = (model, x, ref, got == want)
        model, x, ref, weights_match = modules[key]
        tol = tolerance(folder)
        row = {"model": name, "batch": batch, "precision": prec, "tolerance": tol, "device": dev,
               "weights_match": weights_match}
        set_precision(prec)

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

        with torch.no_grad(), autocast(prec):
            row["eager_err"] = rel_err(model(x), ref)
            row["eager_ms"] = bench(lambda: model(x), rounds=3)
            print(f"PARTIAL {name} b{batch} {prec}: loom {row['loom_ms']:.3f} ms (err {row['loom_err']:.2e}, "
                  f"tol {tol:.1e}, first call {row['loom_first_call_s']:.1f} s) eager {row['eager_ms']:.3f} ms "
                  f"(err {row['eager_err']:.2e})", flush=True)
            modes = [] if args.no_compile else (args.modes.split(",") + (["reduce-overhead"] if batch == 1 else []))
            for mode in modes:
                t0 = time.time()
                cm = torch.compile(model, mode=mode)
                for _ in range(3):
                    y = cm(x)
                torch.cuda.synchronize()
                row[f"{mode}_compile_s"] = time.time() - t0
                row[f"{mode}_err"] = rel_err(y, ref)
                row[f"{mode}_ms"] = bench(lambda: cm(x), rounds=3)
                print(f"PARTIAL {name} b{batch} {prec}: {mode} {row[mode + '_ms']:.3f} ms (compile "
                      f"{row[mode + '_compile_s']:.0f} s, err {row[mode + '_err']:.2e})", flush=True)
        row["loom_ms_again"] = bench(art.run)
        art.close()
        ok = all(row[k] < tol for k in row if k.endswith("_err") or k == "loom_err_after")
        row["ok"] = ok
        rows.append(row)
        best_pt = min(row[k] for k in row if k.endswith("_ms") and not k.startswith("loom"))
        loom = min(row["loom_ms"], row["loom_ms_again"])
        print(f"ROW {name} b{batch} {prec}: loom {row['loom_ms']:.3f}/{row['loom_ms_again']:.3f} ms "
              f"(err {row['loom_err']:.2e}, tol {tol:.1e}) eager {row['eager_ms']:.3f} "
              + " ".join(f"{mo} {row[mo + '_ms']:.3f} (compile {row[mo + '_compile_s']:.0f} s, err {row[mo + '_err']:.2e})"
                         for mo in modes if mo + "_ms" in row)
              + f" -> loom vs best PyTorch {best_pt / loom:.2f}x {'ok' if ok else 'CHECK FAILED'}", flush=True)
        with open(args.out, "w") as f:
            json.dump(rows, f, indent=1)
    print("\n| network | batch | precision | Loom ms | eager ms | torch.compile ms (mode) | Loom vs compile | "
          "Loom err | tol |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        loom = min(r["loom_ms"], r["loom_ms_again"])
        comp = {k[:-3]: v for k, v in r.items() if k.endswith("_ms") and not k.startswith(("loom", "eager"))}
        best = min(comp.values()) if comp else None
        print(f"| {r['model']} | {r['batch']} | {r['precision']} | {loom:.3f} | {r['eager_ms']:.3f} | "
              + ", ".join(f"{v:.3f} ({k})" for k, v in comp.items())
              + f" | {'-' if best is None else f'{best / loom:.2f}x'} | {r['loom_err']:.1e} | {r['tolerance']:.1e} |")
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
