#!/usr/bin/env python3
"""Per-kernel CUDA times of torch.compile for suite workloads (torch.profiler, after warm-up), to
set beside Nsight Compute's per-kernel times of Loom's artifact for the same workload:
    python3 bench/gpu/gpu_bench.py --keep-data --artifacts A --runner R combined
    ncu --metrics gpu__time_duration.sum R A/combined --reps 1 --warmup 0
    python3 bench/gpu/kernel_times.py combined
Runs on the GPU machine (PyTorch 2.x there)."""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from workloads import GEMM_WORKLOADS, WORKLOADS  # noqa: E402


def main():
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    for name in sys.argv[1:]:
        factory, shapes, _, _ = {**WORKLOADS, **GEMM_WORKLOADS}[name]
        torch.manual_seed(0)
        model = torch.compile(factory().cuda().eval())
        ins = [torch.rand(s, device="cuda") * 2 - 1 for s in shapes.values()]
        with torch.no_grad():
            for _ in range(10):
                model(*ins)
            torch.cuda.synchronize()
            reps = 20
            with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
                for _ in range(reps):
                    model(*ins)
                torch.cuda.synchronize()
        print(f"== {name}: torch.compile kernels, mean us per call over {reps} calls")
        for e in sorted(prof.key_averages(), key=lambda e: -e.device_time_total):
            if e.device_time_total > 0:
                print(f"  {e.device_time_total / reps:9.1f} us  x{e.count // reps}  {e.key[:100]}")


if __name__ == "__main__":
    main()
