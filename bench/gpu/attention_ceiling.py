#!/usr/bin/python3
"""The ceiling of a fused attention forward at BERT-base's head size (d = 64) on this GPU: each of
the B·H·S² scores costs 4·d tensor-core FLOPs (q·kᵀ and p·v) and one exponential, which runs on the
special-function units (MUFU.EX2), not on the tensor cores. This measures both rates here (a cuBLAS
BF16 GEMM 8192³ through PyTorch; a CuPy kernel of independent ex2.approx chains in registers) and
prints what fraction of the BF16 GEMM rate an attention kernel can reach at most: with the
exponentials fully hidden under the products, min(1, t_mma / t_exp) of it; with none hidden,
t_mma / (t_mma + t_exp). (The max, scale, sum and rescaling FP32 work of the online softmax adds to
the non-tensor side; it is left out, so both figures are upper bounds.)

Usage: attention_ceiling.py   (on the GPU machine: PyTorch, CuPy)
"""
import cupy as cp
import torch
from triton.testing import do_bench

DATASHEET_TFLOPS = 989.4  # dense BF16, H100/H200 SXM

EX2 = r"""
extern "C" __global__ void ex2_chains(float *out, int iters) {
    // Eight independent chains a thread, so the unit's throughput, not its latency, is measured;
    // x -> 2^-x stays in [0.5, 1].
    float x[8];
    for (int c = 0; c < 8; c++) x[c] = 0.5f + 0.01f * c + 1e-6f * threadIdx.x;
    for (int i = 0; i < iters; i++)
#pragma unroll
        for (int c = 0; c < 8; c++) asm volatile("ex2.approx.ftz.f32 %0, %1;" : "=f"(x[c]) : "f"(-x[c]));
    float s = 0;
    for (int c = 0; c < 8; c++) s += x[c];
    out[blockIdx.x * blockDim.x + threadIdx.x] = s;
}
"""


def main():
    props = torch.cuda.get_device_properties(0)
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    ms = do_bench(lambda: a @ a, warmup=25, rep=200)
    mma = 2 * 8192**3 / ms / 1e9  # TFLOP/s
    kernel = cp.RawKernel(EX2, "ex2_chains")
    blocks, threads, iters = props.multi_processor_count * 16, 256, 4096
    out = cp.empty(blocks * threads, dtype=cp.float32)
    run = lambda: kernel((blocks,), (threads,), (out, cp.int32(iters)))  # noqa: E731
    run()
    cp.cuda.runtime.deviceSynchronize()
    t = do_bench(run, warmup=25, rep=200)
    ex2 = blocks * threads * iters * 8 / t / 1e9  # Tera-exponentials/s
    assert bool(cp.isfinite(out).all())
    print(f"device: {torch.cuda.get_device_name()}, {props.multi_processor_count} SMs")
    print(f"cuBLAS BF16 GEMM 8192^3: {mma:.0f} TFLOP/s ({100 * mma / DATASHEET_TFLOPS:.0f}% of the {DATASHEET_TFLOPS:.0f} datasheet)")
    print(f"MUFU ex2.approx.f32: {ex2:.2f} T/s ({ex2 * 1e3 / props.multi_processor_count / 1.98:.1f} per SM per clock at 1.98 GHz)")
    for d in (64, 128):
        t_mma, t_exp = 4 * d / (mma * 1e12), 1 / (ex2 * 1e12)  # seconds a score
        hidden = min(1.0, t_mma / t_exp)
        serial = t_mma / (t_mma + t_exp)
        print(f"d = {d}: a score's products {t_mma * 1e15:.3f} fs, its exponential {t_exp * 1e15:.3f} fs -> at most "
              f"{100 * hidden:.0f}% of the GEMM rate with the exponentials hidden ({100 * hidden * mma / DATASHEET_TFLOPS:.0f}% "
              f"of the datasheet), {100 * serial:.0f}% ({100 * serial * mma / DATASHEET_TFLOPS:.0f}%) with none hidden")


if __name__ == "__main__":
    main()
