#!/usr/bin/python3
"""Exports the GPU suite (workloads.py) to ONNX: <out>/<name>.onnx (a git-ignored output folder,
artifacts/onnx in build_gpu_artifacts.sh). Run with Debian's /usr/bin/python3 (torch 1.13, onnx) on a
build machine. The memory-bound workloads' exports (a few KB each) are also committed as
tests/data/gpu_suite/<name>.onnx, the models CI checks schedules/*.cuda.sched on: copy them there
again when workloads.py changes."""
import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from workloads import WORKLOADS, GEMM_WORKLOADS, EXTRA_WORKLOADS  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("names", nargs="*")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    for name, (factory, shapes, out, _) in {**WORKLOADS, **GEMM_WORKLOADS, **EXTRA_WORKLOADS}.items():
        if (a.names and name not in a.names) or (name in EXTRA_WORKLOADS and name not in a.names):
            continue
        model = factory().eval()
        # Small stand-in inputs: the exported graph takes its (static) shapes from them.
        args = tuple(torch.randn(*s) if len(s) > 1 else torch.randn(s[0]) for s in shapes.values())
        path = os.path.join(a.out, name + ".onnx")
        torch.onnx.export(model, args, path, input_names=list(shapes), output_names=[out],
                          opset_version=13, do_constant_folding=True)
        print(name, path, os.path.getsize(path), "bytes")


if __name__ == "__main__":
    main()
