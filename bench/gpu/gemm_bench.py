#!/usr/bin/python3
"""GEMMs at BERT-base (16x512) and ViT-B/16 (b32) shapes on the GPU, in one process: Loom's CUDA
artifacts of kernel_models.py's linear models against PyTorch's cuBLAS calls on the same shapes.

Rows:
  fp32 nn / tn     Loom FP32 (`loom compile --precision fp32`) of x·W with W stored [K, N] (MatMul) and
                   [N, K] (Gemm transB=1, which Loom transposes at compile time); PyTorch x @ W and F.linear(x, Wᵀ stored [N, K]) in FP32
                   (TF32 off): the call inductor makes for nn.Linear is the latter.
  bf16 epilogue    Loom `--precision bf16` of x·W + b then GELU (erf) or ReLU, FP32 in and out, against
                   cuBLASLt alone on the same shape (PyTorch's BF16 x @ W: no bias, no activation, BF16
                   in and out) and F.linear with bias (cuBLASLt's bias epilogue).
  fp32 epilogue    Loom `--precision fp32` of the same, against PyTorch's FP32 x @ W alone.
  tf32 epilogue    Loom `--precision tf32` of the same (and of bias_gelu_tanh, the tanh form in
                   cuBLASLt's epilogue), Loom rows only.
  bf16 model       Loom `--precision bf16` of the bf16-stored models (bf16_bias_gelu / _relu: BF16 x
                   in, BF16 y out, as the cuBLASLt-alone row), against the same rows plus PyTorch's own
                   fused epilogue on those tensors (torch._addmm_activation: cuBLASLt GELU_BIAS, the tanh
                   form, or RELU_BIAS).
Every Loom output is checked against PyTorch's FP64 product on the same data (for a bf16 model: x, W
and b rounded to bf16 as the model stores them; rel err under 1e-5 in FP32, 1e-2 in BF16); times are
triton.testing.do_bench medians (L2 flushed between calls).

Usage: gemm_bench.py --artifacts DIR   (DIR/<model>__<fp32|bf16>: `loom compile` outputs of kernel_models.py)
"""
import argparse
import glob
import os
import sys

import torch
import torch.nn.functional as F
from triton.testing import do_bench

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from in_process import Artifact  # noqa: E402
from kernel_models import linear_weights  # noqa: E402
from serving_bench import kernel_profile  # noqa: E402


def kernel_times(fn, reps=5):
    """The CUDA kernels of one call of `fn` (serving_bench.kernel_profile over `reps` calls), as
    "name µs×count" (names shortened), longest first."""
    _, _, rows = kernel_profile(fn, top=1000, reps=reps)
    return "; ".join(f"{name[:90]} {us:.1f}us x{count:.0f}" for us, count, name in rows)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--artifacts", required=True)
    ap.add_argument("--kernels", action="store_true", help="print each row's kernel names")
    args = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    print(f"device: {torch.cuda.get_device_name()}; torch {torch.__version__}")
    failed = 0
    print(f"{'shape MxKxN':<16} {'what':<44} {'ms':>8} {'TFLOP/s':>8} {'rel err':>9}")
    for folder in sorted(glob.glob(os.path.join(args.artifacts, "linear_*"))):
        name, prec = os.path.basename(folder).rsplit("__", 1)
        _, shape, form = name.split("_", 2)
        stored_bf16 = form.startswith("bf16_")  # kernel_models.py's bf16-stored models
        form = form[len("bf16_"):] if stored_bf16 else form
        M, K, N = (int(s) for s in shape.split("x"))
        w, b = linear_weights(M, K, N)
        w, b = torch.from_numpy(w).cuda(), torch.from_numpy(b).cuda()
        x = torch.randn(M, K, device="cuda", generator=torch.Generator(device="cuda").manual_seed(M + K + N))
        if stored_bf16:  # the model's own values: its weights are stored rounded, its input is BF16
            x, w, b = (t.bfloat16().float() for t in (x, w, b))
        ref = x.double() @ w.double()
        if form.startswith("bias"):
            ref = ref + b.double()
            ref = (F.gelu(ref) if form == "bias_gelu" else F.gelu(ref, approximate="tanh") if form == "bias_gelu_tanh"
                   else F.relu(ref))
        flops = 2 * M * K * N

        def row(what, fn, check=None):
            out = fn()
            err = ((out.double() - ref).norm() / ref.norm()).item() if check is None else check(out)
            t = do_bench(fn, warmup=25, rep=200)
            print(f"{shape:<16} {what:<44} {t:8.3f} {flops / t / 1e9:8.1f} {err:9.2e}", flush=True)
            if args.kernels:
                print(f"{'':<16}   kernels: {kernel_times(fn)}")
            return t

        art = Artifact(folder)
        art.bind([x.bfloat16() if stored_bf16 else x])
        loom_ms = row(f"loom {prec} {'bf16 model ' if stored_bf16 else ''}{form}", lambda: art.run()[0])
        tol = 1e-5 if prec == "fp32" else 1e-2
        err = ((art.run()[0].double() - ref).norm() / ref.norm()).item()
        if not err < tol:
            print(f"{shape:<16} loom {prec} {form}: CHECK FAILED, rel err {err:.2e} (tolerance {tol:.0e})")
            failed += 1
        art.close()
        if prec == "fp32" and form == "nn":
            row("torch fp32 x @ W[K,N] (nn)", lambda: x @ w)
            wt = w.t().contiguous()
            row("torch fp32 F.linear(x, W[N,K]) (tn)", lambda: F.linear(x, wt))
        if prec == "bf16" and form.startswith("bias"):
            xb, wb, wtb, bb = x.bfloat16(), w.bfloat16(), w.t().contiguous().bfloat16(), b.bfloat16()
            nan = lambda out: float("nan")  # noqa: E731 (no bias, no activation: not the model's function)
            t0 = row("cuBLASLt alone: torch bf16 x @ W (nn)", lambda: xb @ wb, nan)
            row("cuBLASLt alone: torch bf16 F.linear (tn)", lambda: F.linear(xb, wtb), nan)
            row("torch bf16 F.linear(x, W, b) (bias epilogue)", lambda: F.linear(xb, wtb, bb), nan)
            if stored_bf16:  # PyTorch's own bias+activation epilogue on the same tensors
                gelu = form == "bias_gelu"
                row(f"torch bf16 _addmm_activation ({'GELU' if gelu else 'RELU'}_BIAS)",
                    lambda: torch._addmm_activation(bb, xb, wb, use_gelu=gelu))
            print(f"{shape:<16} loom {'bf16 model ' if stored_bf16 else ''}{form} vs cuBLASLt alone: "
                  f"{100 * t0 / loom_ms:.0f}% of its throughput")
        if prec == "fp32" and form.startswith("bias"):
            t0 = row("cuBLAS alone: torch fp32 x @ W (nn)", lambda: x @ w, lambda out: float("nan"))
            print(f"{shape:<16} loom fp32 {form} vs cuBLAS alone: {100 * t0 / loom_ms:.0f}% of its throughput")
    if failed:
        sys.exit(f"{failed} Loom artifact(s) failed their check")


if __name__ == "__main__":
    main()
