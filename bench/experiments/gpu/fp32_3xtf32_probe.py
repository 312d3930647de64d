#!/usr/bin/env python3
"""FP32 GEMMs of BERT-base / ViT-B/16 shapes: FFMA SGEMM against 3xTF32 (split operands, one TF32
GEMM over K' = 3K: [A_hi, A_hi, A_lo] . [B_hi; B_lo; B_hi]) and plain TF32; time (do_bench median,
ms) and error against float64 (max |err| / max |ref|). A probe for bench/DECISIONS.md (gpu15)."""
import torch, triton.testing as tt

def split(x):  # x = hi + lo, hi exact in TF32 (10 stored mantissa bits, rounded to nearest)
    i = x.contiguous().view(torch.int32)
    hi = ((i + 0x1000) & -8192).view(torch.float32)
    return hi, x - hi

def err(y, ref):
    return ((y.double() - ref).abs().max() / ref.abs().max()).item()

torch.manual_seed(0)
shapes = [(8192, 768, 2304), (8192, 768, 768), (8192, 768, 3072), (8192, 3072, 768),
          (6304, 768, 2304), (6304, 768, 3072), (6304, 3072, 768)]
print(torch.cuda.get_device_name(), torch.__version__)
for M, K, N in shapes:
    a = torch.randn(M, K, device="cuda")
    b = torch.randn(K, N, device="cuda") / K ** 0.5
    ref = a.double() @ b.double()
    ah, al = split(a); bh, bl = split(b)
    b3 = torch.cat([bh, bl, bh], 0).contiguous()
    a3 = torch.empty(M, 3 * K, device="cuda")
    def fill():
        h, l = split(a)
        a3[:, :K] = h; a3[:, K:2 * K] = h; a3[:, 2 * K:] = l
    fill()
    torch.backends.cuda.matmul.allow_tf32 = False
    t32 = tt.do_bench(lambda: a @ b, rep=200); e32 = err(a @ b, ref)
    torch.backends.cuda.matmul.allow_tf32 = True
    ttf = tt.do_bench(lambda: a @ b, rep=200); etf = err(a @ b, ref)
    t3 = tt.do_bench(lambda: a3 @ b3, rep=200); e3 = err(a3 @ b3, ref)
    tfill = tt.do_bench(fill, rep=100)
    # three GEMMs accumulated (small terms first), for comparison
    def three():
        y = al @ bh
        y.addmm_(ah, bl)
        y.addmm_(ah, bh)
        return y
    tthree = tt.do_bench(three, rep=200); ethree = err(three(), ref)
    print(f"{M}x{K}x{N}: fp32 {t32:.4f} ms err {e32:.2e} | tf32 {ttf:.4f} err {etf:.2e} | "
          f"3xtf32 concat {t3:.4f} err {e3:.2e} (split {tfill:.4f}) | 3 gemms {tthree:.4f} err {ethree:.2e} | "
          f"speedup concat {t32 / t3:.2f}x")

# BF16 fc1 (8192x768x3072): cuBLASLt alone against its bias+GELU(tanh) and bias+ReLU epilogues.
torch.backends.cuda.matmul.allow_tf32 = False
x = torch.randn(8192, 768, device="cuda", dtype=torch.bfloat16)
w = torch.randn(768, 3072, device="cuda", dtype=torch.bfloat16) / 28
bias = torch.randn(3072, device="cuda", dtype=torch.bfloat16)
t_plain = tt.do_bench(lambda: x @ w, rep=200)
t_gelu = tt.do_bench(lambda: torch._addmm_activation(bias, x, w, use_gelu=True), rep=200)
t_relu = tt.do_bench(lambda: torch._addmm_activation(bias, x, w, use_gelu=False), rep=200)
t_sep = tt.do_bench(lambda: torch.nn.functional.gelu(torch.addmm(bias, x, w)), rep=200)
print(f"bf16 fc1 8192x768x3072: plain {t_plain:.4f} ms, GELU_BIAS {t_gelu:.4f} ({t_plain / t_gelu:.0%}), "
      f"RELU_BIAS {t_relu:.4f} ({t_plain / t_relu:.0%}), addmm+erf gelu {t_sep:.4f} ({t_plain / t_sep:.0%})")
