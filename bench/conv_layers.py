#!/usr/bin/python3
"""ResNet-18's distinct convolutions one at a time: Loom's auto schedule against PyTorch eager.

Each layer is Conv2d + BatchNorm (folded by Loom's import) + ReLU at batch 1, exported with Debian's
torch 1.13 to <out>/<layer>.onnx, timed by `loom bench --auto` and by PyTorch eager (CPU, the same
thread count) with bench/compare_torch.py's method. It says where a network's time goes, layer by
layer; the whole network is in bench/FIXTURES.md.

Usage: bench/conv_layers.py [--loom build-bench/loom] [--out /tmp/conv_layers] [--budget-ms 1000]
                            [--threads 2] [LAYER ...]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import torch
import torch.nn as nn

# layer: (input channels, output channels, kernel, stride, input height = width, times in ResNet-18)
LAYERS = {
    "conv1": (3, 64, 7, 2, 224, 1),
    "layer1": (64, 64, 3, 1, 56, 4),
    "layer2_down": (64, 128, 3, 2, 56, 1),
    "layer2": (128, 128, 3, 1, 28, 3),
    "layer3_down": (128, 256, 3, 2, 28, 1),
    "layer3": (256, 256, 3, 1, 14, 3),
    "layer4_down": (256, 512, 3, 2, 14, 1),
    "layer4": (512, 512, 3, 1, 7, 3),
    "shortcut2": (64, 128, 1, 2, 56, 1),
    "shortcut3": (128, 256, 1, 2, 28, 1),
    "shortcut4": (256, 512, 1, 2, 14, 1),
}


def module(cin, cout, k, s):
    m = nn.Sequential(nn.Conv2d(cin, cout, k, s, k // 2, bias=False), nn.BatchNorm2d(cout), nn.ReLU()).eval()
    g = torch.Generator().manual_seed(cin * 1000 + cout * 10 + k)
    with torch.no_grad():
        m[0].weight.copy_((torch.rand(m[0].weight.shape, generator=g) * 2 - 1) / (cin * k * k) ** 0.5)
        m[1].running_mean.copy_(torch.rand(cout, generator=g) * 0.4 - 0.2)
        m[1].running_var.copy_(torch.rand(cout, generator=g) + 0.5)
    return m


def torch_ms(m, x, budget_ms):
    times = []
    with torch.inference_mode():
        for _ in range(3):
            m(x)
        start = time.perf_counter()
        while len(times) < 5 or (time.perf_counter() - start) * 1e3 < budget_ms:
            t0 = time.perf_counter()
            m(x)
            times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--loom", default="build-bench/loom")
    ap.add_argument("--out", default="/tmp/conv_layers")
    ap.add_argument("--budget-ms", type=float, default=1000)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("layers", nargs="*")
    a = ap.parse_args()
    unknown = [n for n in a.layers if n not in LAYERS]
    if unknown:
        sys.exit(f"conv_layers.py: unknown layer(s) {', '.join(unknown)}; choose from {', '.join(LAYERS)}")
    if not os.access(a.loom, os.X_OK):
        sys.exit(f"conv_layers.py: no loom binary at {a.loom}; build it (ninja -C build-bench loom) or pass --loom")
    torch.set_num_threads(a.threads)
    os.makedirs(a.out, exist_ok=True)
    print(f"{'layer':12s} {'shape':26s} {'x':>2s} {'loom ms':>8s} {'GFLOP/s':>8s} {'torch ms':>9s} {'GFLOP/s':>8s} "
          f"{'torch/loom':>10s}")
    total = {"loom": 0.0, "torch": 0.0}
    for name in a.layers or LAYERS:
        cin, cout, k, s, hw, times = LAYERS[name]
        m = module(cin, cout, k, s)
        x = torch.rand(1, cin, hw, hw) * 2 - 1
        path = os.path.join(a.out, name + ".onnx")
        torch.onnx.export(m, x, path, input_names=["x"], output_names=["y"], opset_version=13)
        js = os.path.join(a.out, name + ".json")
        r = subprocess.run([a.loom, "bench", path, "--auto", "--budget-ms", str(a.budget_ms), "--json", js],
                           capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit(f"conv_layers.py: loom bench {path} failed:\n{r.stdout}{r.stderr}")
        with open(js) as f:
            row = next(row for row in json.load(f)["rows"] if row["schedule"] == "auto")
        if not row["ok"]:
            sys.exit(f"conv_layers.py: {name}: the auto schedule did not validate: {row}")
        lm, tm = row["median_ms"], torch_ms(m, x, a.budget_ms)
        gflop = 2.0 * cout * cin * k * k * ((hw + s - 1) // s) ** 2 / 1e9
        total["loom"] += times * lm
        total["torch"] += times * tm
        shape = f"{cin}->{cout} {k}x{k}/{s} @{hw}"
        print(f"{name:12s} {shape:26s} {times:2d} {lm:8.3f} {gflop / lm * 1e3:8.1f} {tm:9.3f} {gflop / tm * 1e3:8.1f} "
              f"{tm / lm:9.2f}x", flush=True)
    print(f"sum over ResNet-18's convs (each times its count): loom {total['loom']:.2f} ms, "
          f"PyTorch {total['torch']:.2f} ms")


if __name__ == "__main__":
    main()
