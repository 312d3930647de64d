"""The GPU workload suite (sizes from TARGETS.md), shared by export_workloads.py (ONNX, run here
with Debian's torch 1.13) and gpu_bench.py (PyTorch eager / torch.compile on the GPU machine).

Each workload: name -> (module factory, {input name: shape}, output name, compulsory bytes).
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

N26 = 1 << 26


class SinCos(nn.Module):
    def forward(self, x):
        return torch.sin(x) ** 2 + torch.cos(x) ** 2


class SigmoidAffine(nn.Module):
    def forward(self, x, w, b):
        return torch.sigmoid(x * w + b)


class SumPrologue(nn.Module):
    def forward(self, x, y, z):
        return ((x + y) * z).sum(-1)


class SoftmaxRows(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=-1)


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
