#!/usr/bin/python3
"""Attention at BERT-base shapes (12 heads of 64, batch 16, S = 512 and 2048; batch 4 at 2048 too) on the GPU: PyTorch's
scaled_dot_product_attention by backend (flash, cuDNN, memory-efficient, math) in BF16, and Loom's
CUDA artifacts of the exported pattern (MatMul, scale, Softmax, MatMul; `loom compile --target cuda
--precision bf16|fp32`: batched cuBLAS products around a softmax kernel), in the same process, outputs
checked against PyTorch's math backend in FP32. Prints a table with ms, TFLOP/s (4·B·H·S²·d) and %
of the BF16 tensor-core peak: the dense BF16 peak of the H100/H200 SXM datasheet (989 TFLOP/s), and
of a cuBLAS BF16 GEMM 8192³ measured here.

Usage: attention_bench.py [--artifacts DIR] [--shapes 16x512,...]   (DIR/loom_b<B>_s<S>_<cudnn|cudnnio|bf16|fp32|tf32|other>:
`loom compile` outputs of the exported pattern: --precision bf16 (fused, cuDNN; fp32 inputs and output
rounded and widened by Loom), the bf16 model attn_bf16_* at --precision bf16 (cudnnio: bf16 inputs and
output, as the SDPA rows), the same with LOOM_FUSE_ATTENTION=0 (unfused), and fp32)
"""
import argparse
import glob
import os
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
from triton.testing import do_bench

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__))))
DATASHEET_TFLOPS = 989.4
# Artifact folder suffix -> row label.
LABELS = {"cudnn": "fused (cuDNN SDPA), bf16", "cudnnio": "fused (cuDNN), bf16 in/out",
          "bf16": "unfused (cuBLAS), --precision bf16",
          "fp32": "unfused (cuBLAS), fp32", "fp32lt": "unfused (cuBLASLt batch), fp32",
          "tf32": "unfused (cuBLAS), tf32"}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--artifacts", default="")
    ap.add_argument("--kernels", action="store_true", help="print the kernels of each Loom row (torch.profiler)")
    ap.add_argument("--shapes", default="16x512,4x2048,16x2048", help="BxS shapes, comma-separated")
    args = ap.parse_args()
    dev = torch.cuda.get_device_name()
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    ms = do_bench(lambda: a @ a, warmup=25, rep=200)
    gemm_peak = 2 * 8192**3 / ms / 1e9
    print(f"device: {dev}; torch {torch.__version__}; cuDNN {torch.backends.cudnn.version()}")
    print(f"cuBLAS BF16 GEMM 8192^3: {ms:.3f} ms, {gemm_peak:.0f} TFLOP/s (datasheet dense BF16 {DATASHEET_TFLOPS:.0f})")
    print(f"{'B':>3} {'S':>5} {'what':<34} {'ms':>8} {'TFLOP/s':>8} {'% sheet':>8} {'% gemm':>7} {'rel err':>9}")
    H, d = 12, 64
    # Loom's unfused artifact at batch 16 x 2048 would hold 3.2 GB of scores, past Halide's 2 GB
    # buffers: it is built at batch 4 there, and PyTorch runs both batches.
    for B, S in (tuple(int(x) for x in shape.split("x")) for shape in args.shapes.split(",")):
        g = torch.Generator(device="cuda").manual_seed(S)
        q, k, v = (torch.randn(B, H, S, d, device="cuda", generator=g) for _ in range(3))
        with sdpa_kernel(SDPBackend.MATH):
            ref = F.scaled_dot_product_attention(q, k, v)
        flops = 4 * B * H * S * S * d
        qb, kb, vb = q.bfloat16(), k.bfloat16(), v.bfloat16()

        def row(what, fn, kernels=False):
            try:
                out = fn()
                err = ((out.float() - ref).norm() / ref.norm()).item()
                t = do_bench(fn, warmup=25, rep=200)
            except Exception as e:  # a backend that does not take this shape
                print(f"{B:>3} {S:>5} {what:<36} failed: {str(e).splitlines()[0][:80]}")
                return
            tf = flops / t / 1e9
            print(f"{B:>3} {S:>5} {what:<36} {t:8.3f} {tf:8.1f} {100 * tf / DATASHEET_TFLOPS:7.1f}% {100 * tf / gemm_peak:6.1f}% {err:9.2e}")
            if kernels:
                from gemm_bench import kernel_times
                print(f"{'':>9} kernels: {kernel_times(fn)}")

        for name, be in (("flash", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION),
                         ("efficient", SDPBackend.EFFICIENT_ATTENTION), ("math", SDPBackend.MATH)):
            def fn(be=be):
                with sdpa_kernel(be):
                    return F.scaled_dot_product_attention(qb, kb, vb)
            row(f"torch sdpa {name} bf16", fn)
        # The softmax over the FP32 scores alone (PyTorch's kernel): what an unfused FP32 attention's
        # softmax pass costs at the copy limit (the scores read once and the probabilities written once).
        scores = torch.randn(B, H, S, S, device="cuda", generator=g)
        t = do_bench(lambda: torch.softmax(scores, -1), warmup=25, rep=200)
        print(f"{B:>3} {S:>5} {'torch softmax of the fp32 scores':<36} {t:8.3f} ms, "
              f"{2 * scores.numel() * 4 / t / 1e6:.0f} GB/s (read + write)")
        del scores
        for folder in sorted(glob.glob(os.path.join(args.artifacts, f"loom_b{B}_s{S}_*"))):
            from in_process import Artifact
            art = Artifact(folder)
            # A bf16 model (kernel_models.py attn_bf16_*) gets the bf16 tensors the SDPA rows get;
            # an f32 one the f32 tensors, which it rounds to bf16 itself under --precision bf16.
            bf16_in = all(t == torch.bfloat16 for _, t, _ in art.input_specs)
            art.bind([qb, kb, vb] if bf16_in else [q, k, v])
            suffix = folder.rsplit("_", 1)[-1]
            row("loom " + LABELS.get(suffix, suffix), lambda: art.run()[0], args.kernels)
            art.close()
        del q, k, v, qb, kb, vb, ref
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
