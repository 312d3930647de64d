#!/usr/bin/env python3
"""Whole networks on the GPU machine: PyTorch eager and torch.compile (default mode, and
"reduce-overhead", which replays CUDA graphs as Loom's artifacts do) timed the way
gpu_bench.py times the suite (do_bench, L2 flushed, median; PyTorch's best of three rounds; TF32 off),
to set beside `tools/loom_run` on Loom's artifact of the same torchvision architecture (random
weights; Loom's artifact is checked against Loom's own float64 reference, not against these weights).
Usage: python3 bench/gpu/network_bench.py resnet18 [mobilenet_v2 …]"""
import sys

import torch
import torchvision
import triton


def bench_best(fn, rounds=3):
    return min(triton.testing.do_bench(fn, warmup=25, rep=200, return_mode="median") for _ in range(rounds))


def main():
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    for name in sys.argv[1:]:
        model = getattr(torchvision.models, name)().cuda().eval()
        x = torch.rand(1, 3, 224, 224, device="cuda")
        with torch.no_grad():
            eager = bench_best(lambda: model(x))
            cm = torch.compile(model)
            cm(x)
            comp = bench_best(lambda: cm(x))
            # mode="reduce-overhead" replays CUDA graphs, as Loom's artifacts do (codegen/cuda_graph_glue.h)
            ro = torch.compile(model, mode="reduce-overhead")
            for _ in range(3):
                ro(x)
            comp_ro = bench_best(lambda: ro(x))
        print(f"NETWORK {name} 1x3x224x224 eager_ms={eager:.4f} compile_ms={comp:.4f} "
              f"compile_reduce_overhead_ms={comp_ro:.4f}", flush=True)


if __name__ == "__main__":
    main()
