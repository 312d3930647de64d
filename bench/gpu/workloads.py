"""The GPU workload suite (sizes from TARGETS.md), shared by export_workloads.py (ONNX, run here
with Debian's torch 1.13) and gpu_bench.py (PyTorch eager / torch.compile on the GPU machine).

Each workload: name -> (module factory, {input name: shape}, output name, compulsory bytes).
"""
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

# The seed modules are defined once, in frontends/torch/models.py (the repository travels whole).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "frontends", "torch"))
from models import SigmoidAffine, SinCos, SoftmaxRows, SumPrologue  # noqa: E402,F401

N26 = 1 << 26


class LayerNormRows(nn.Module):
    def __init__(self, n=4096):
        super().__init__()
        self.ln = nn.LayerNorm(n)
        g = torch.Generator().manual_seed(7)
        with torch.no_grad():
            self.ln.weight.copy_(torch.rand(n, generator=g) + 0.5)
            self.ln.bias.copy_(torch.randn(n, generator=g) * 0.2)

    def forward(self, x):
        return self.ln(x)


class Mse(nn.Module):
    def forward(self, x, y):
        d = torch.sin(x) ** 2 + torch.cos(x) ** 2 - y
        return (d * d).mean()  # = F.mse_loss(sin²+cos², y); written out so that ONNX opset 13 exports it


F4 = 4
WORKLOADS = {
    "sincos": (SinCos, {"x": (N26,)}, "y", 2 * N26 * F4),
    "sigmoid_affine": (SigmoidAffine, {"x": (N26,), "w": (N26,), "b": (N26,)}, "y", 4 * N26 * F4),
    "sum_prologue": (SumPrologue, {"x": (8192, 4096), "y": (8192, 4096), "z": (8192, 4096)}, "out",
                     3 * 8192 * 4096 * F4 + 8192 * F4),
    "softmax_rows": (SoftmaxRows, {"x": (8192, 8192)}, "y", 2 * 8192 * 8192 * F4),
    "layernorm_rows": (LayerNormRows, {"x": (8192, 4096)}, "y", 2 * 8192 * 4096 * F4),
    "mse": (Mse, {"x": (N26,), "y": (N26,)}, "loss", 2 * N26 * F4),
}


# Short rows (attention-sized softmax, a small model's LayerNorm): not in the suite's geomean; run
# when named (gpu_bench.py softmax_short layernorm_short). Their statistics each take one warp's
# lanes (gpu_schedule.cpp, warp_rows); before, a block of 32 threads per row.
EXTRA_WORKLOADS = {
    "softmax_short": (SoftmaxRows, {"x": (262144, 64)}, "y", 2 * 262144 * 64 * F4),
    "layernorm_short": (lambda: LayerNormRows(128), {"x": (131072, 128)}, "y", 2 * 131072 * 128 * F4),
}


def _seeded(mod, seed):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for prm in mod.parameters():
            prm.copy_((torch.rand(prm.shape, generator=g) * 2 - 1) / prm.shape[-1] ** 0.5 if prm.dim() > 1
                      else torch.rand(prm.shape, generator=g) * 0.5 + 0.25)
    return mod


class LinearRelu(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = _seeded(nn.Linear(1024, 4096), 11)

    def forward(self, x):
        return F.relu(self.fc(x))


class ConvBnRelu(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = _seeded(nn.Conv2d(64, 64, 3, padding=1, bias=False), 12)
        self.bn = nn.BatchNorm2d(64)
        g = torch.Generator().manual_seed(13)
        with torch.no_grad():
            self.bn.weight.copy_(torch.rand(64, generator=g) + 0.5)
            self.bn.bias.copy_(torch.randn(64, generator=g) * 0.1)
            self.bn.running_mean.copy_(torch.randn(64, generator=g) * 0.1)
            self.bn.running_var.copy_(torch.rand(64, generator=g) + 0.5)

    def forward(self, x):
        return F.relu(self.bn(self.conv(x)))


class SplitStack(nn.Module):
    """16 × (LayerNorm(64) + tanh) over the 64-wide slices of 1024, concatenated, Linear 1024→256, ReLU."""
    def __init__(self):
        super().__init__()
        self.lns = nn.ModuleList([nn.LayerNorm(64) for _ in range(16)])
        self.fc = _seeded(nn.Linear(1024, 256), 14)

    def forward(self, x):
        parts = [torch.tanh(ln(c)) for ln, c in zip(self.lns, torch.split(x, 64, dim=-1))]
        return F.relu(self.fc(torch.cat(parts, dim=-1)))


class Combined(nn.Module):
    """The same computation with one LayerNorm(64) over x viewed as [B, 16, 64] (shared affine)."""
    def __init__(self):
        super().__init__()
        self.ln = nn.LayerNorm(64)
        self.fc = _seeded(nn.Linear(1024, 256), 14)

    def forward(self, x):
        h = torch.tanh(self.ln(x.reshape(x.shape[0], 16, 64))).reshape(x.shape[0], 1024)
        return F.relu(self.fc(h))


GEMM_WORKLOADS = {  # name -> (factory, inputs, output, FLOPs): compute-bound, rated in TFLOP/s
    "linear_relu": (LinearRelu, {"x": (8192, 1024)}, "y", 2 * 8192 * 1024 * 4096),
    "conv_bn_relu": (ConvBnRelu, {"x": (32, 64, 56, 56)}, "y", 2 * 32 * 64 * 56 * 56 * 64 * 9),
    "split_stack": (SplitStack, {"x": (16384, 1024)}, "y", 2 * 16384 * 1024 * 256),
    "combined": (Combined, {"x": (16384, 1024)}, "y", 2 * 16384 * 1024 * 256),
}
