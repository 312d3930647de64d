#!/usr/bin/env python3
"""The device work of one call of Loom CUDA artifacts, in order (issue 30: where a call's kernel
launches and memsets come from). For each artifact folder: random inputs from its manifest (integer
inputs drawn in [0, --int-high)), the graph warmed (in_process.py replays a CUDA graph from the second
call), then torch.profiler (CUPTI) over --calls calls; prints the kernels, memsets and copies of the
last call in start order with their microseconds, and per call counts of each kind.

Usage: call_trace.py ARTIFACT_DIR... [--calls N] [--int-high H] [--list]
"""
import argparse
import ctypes
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from in_process import Artifact  # noqa: E402


def inputs_of(folder, int_high):
    xs = []
    with open(os.path.join(folder, "manifest.txt")) as f:
        for line in f:
            w = line.split()
            if w and w[0] == "input":
                shape = [int(d) for d in w[3:]]
                if w[2].startswith("f"):
                    xs.append(torch.randn(shape, device="cuda"))
                else:
                    dt = {"i32": torch.int32, "i64": torch.int64}[w[2]]
                    xs.append(torch.randint(0, int_high, shape, device="cuda", dtype=dt))
    return xs


def kind(name):
    n = name.lower()
    if n.startswith("memset"):
        return "memset"
    if n.startswith("memcpy"):
        return "memcpy"
    return "kernel"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("artifacts", nargs="+")
    ap.add_argument("--calls", type=int, default=4)
    ap.add_argument("--int-high", type=int, default=2)
    ap.add_argument("--list", action="store_true", help="print every event of the last call")
    args = ap.parse_args()
    for folder in args.artifacts:
        art = Artifact(folder)
        art.bind(inputs_of(folder, args.int_high))
        for _ in range(5):
            art.run()
        torch.cuda.synchronize()
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
            for _ in range(args.calls):
                art.run()
            torch.cuda.synchronize()
        evs = sorted((e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA),
                     key=lambda e: e.time_range.start)
        counts = {}
        for e in evs:
            counts[kind(e.name)] = counts.get(kind(e.name), 0) + 1
        per = {k: v / args.calls for k, v in counts.items()}
        span = (evs[-1].time_range.end - evs[0].time_range.start) / args.calls if evs else 0
        busy = sum(e.time_range.elapsed_us() for e in evs) / args.calls
        status = getattr(art.lib, f"{art.name}_cuda_graph_status")
        status.restype, status.argtypes = ctypes.c_char_p, [ctypes.c_void_p]
        print(f"TRACE {os.path.basename(os.path.normpath(folder))}: per call {per}, busy {busy:.1f} us, "
              f"span {span:.1f} us; {status(art.model).decode()}", flush=True)
        if args.list and evs:
            last = evs[-len(evs) // args.calls:]
            prev_end = None
            for e in last:
                gap = e.time_range.start - prev_end if prev_end is not None else 0
                prev_end = e.time_range.end
                print(f"  {kind(e.name):6s} {e.time_range.elapsed_us():8.1f} us  gap {gap:6.1f}  {e.name[:110]}")
        art.close()


if __name__ == "__main__":
    main()
