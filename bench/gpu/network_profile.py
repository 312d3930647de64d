#!/usr/bin/env python3
"""Where a whole network's GPU time goes, Loom against PyTorch: the kernels of one call (CUDA time
per call, by kernel name, from torch.profiler/CUPTI, averaged over 20 warm calls) of Loom's
artifact artifacts/net/<name> (run in this process through its C API, bench/gpu/in_process.py)
and of torchvision's <name> under torch.compile (default mode) and eager, batch 1, TF32 off.
Usage (GPU machine): python3 bench/gpu/network_profile.py resnet18 [mobilenet_v2 ...] [--top N]"""
import argparse
import os
import sys

import torch
import torchvision

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from in_process import Artifact  # noqa: E402
from serving_bench import kernel_profile, print_profile  # noqa: E402

REPS = 20


def profile(label, fn, top):
    print_profile(label, kernel_profile(fn, top, REPS))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("names", nargs="+")
    ap.add_argument("--net", default="artifacts/net")
    ap.add_argument("--top", type=int, default=25)
    a = ap.parse_args()
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    for name in a.names:
        x = torch.rand(1, 3, 224, 224, device="cuda")
        art = Artifact(os.path.join(a.net, name))
        art.bind([x])
        profile(f"{name} Loom", art.run, a.top)
        art.close()
        model = getattr(torchvision.models, name)().cuda().eval()
        with torch.no_grad():
            profile(f"{name} eager", lambda: model(x), a.top)
            cm = torch.compile(model)
            profile(f"{name} torch.compile", lambda: cm(x), a.top)


if __name__ == "__main__":
    main()
