"""The PyTorch modules Loom's fixtures (export_fixtures.py) and benchmark workloads
(export_workloads.py) are exported from: the seeds' pointwise chains and reductions, the GEMM and
conv blocks, an MLP and a transformer encoder layer written op by op."""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class SinCos(nn.Module):
    def forward(self, x):
        return torch.sin(x) ** 2 + torch.cos(x) ** 2


class SigmoidAffine(nn.Module):
    def forward(self, x, w, b):
        return torch.sigmoid(x * w + b)


class MSE(nn.Module):
    # Written out: torch 1.13 cannot export aten::mse_loss; this is what it computes (mean reduction).
    def forward(self, x, w, b, y):
        return ((torch.sigmoid(x * w + b) - y) ** 2).mean()


class SumPrologue(nn.Module):
    def forward(self, x, y, z):
        return ((x + y) * z).sum(-1)


class SoftmaxRows(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=-1)


class SplitStack(nn.Module):
    """16 slices of 64 columns, each LayerNorm(64) + tanh, concatenated, Linear 1024->256, ReLU."""

    def __init__(self, slices=16, width=64, out=256):
        super().__init__()
        self.width = width
        self.norms = nn.ModuleList(nn.LayerNorm(width) for _ in range(slices))
        self.fc = nn.Linear(slices * width, out)

    def forward(self, x):
        parts = torch.split(x, self.width, dim=-1)
        y = torch.cat([torch.tanh(n(p)) for n, p in zip(self.norms, parts)], dim=-1)
        return F.relu(self.fc(y))


class Combined(nn.Module):
    """The same as SplitStack with one LayerNorm over a [B, 16, 64] view."""

    def __init__(self, slices=16, width=64, out=256):
        super().__init__()
        self.slices, self.width = slices, width
        self.norm = nn.LayerNorm(width)
        self.fc = nn.Linear(slices * width, out)

    def forward(self, x):
        b = x.shape[0]
        y = torch.tanh(self.norm(x.reshape(b, self.slices, self.width))).reshape(b, -1)
        return F.relu(self.fc(y))


class LinearReLU(nn.Module):
    def __init__(self, k, n):
        super().__init__()
        self.fc = nn.Linear(k, n)

    def forward(self, x):
        return F.relu(self.fc(x))


class MatMulAddReLU(nn.Module):
    """relu(x @ W + r): a weight GEMM with a residual input in its epilogue."""

    def __init__(self, k, n):
        super().__init__()
        self.w = nn.Parameter(torch.randn(k, n) / math.sqrt(k))

    def forward(self, x, r):
        return F.relu(torch.matmul(x, self.w) + r)


class ConvBNReLU(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.conv = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(c)

    def forward(self, x):
        return F.relu(self.bn(self.conv(x)))


class MLP(nn.Module):
    def __init__(self, d_in, hidden, d_out):
        super().__init__()
        self.fc1 = nn.Linear(d_in, hidden)
        self.fc2 = nn.Linear(hidden, hidden)
        self.fc3 = nn.Linear(hidden, d_out)

    def forward(self, x):
        return self.fc3(F.gelu(self.fc2(F.relu(self.fc1(x)))))


class GeluMLP(nn.Module):
    """Linear, tanh-form GELU (GPT-2's "gelu_new"), Linear: the pattern cuBLASLt's GELU epilogue computes."""
    def __init__(self, d_in, hidden, d_out):
        super().__init__()
        self.fc1 = nn.Linear(d_in, hidden)
        self.fc2 = nn.Linear(hidden, d_out)

    def forward(self, x):
        return self.fc2(F.gelu(self.fc1(x), approximate="tanh"))


class EncoderLayer(nn.Module):
    """One post-norm transformer encoder layer written op by op, so the export shows
    MatMul/Softmax/Transpose/Reshape."""

    def __init__(self, batch, seq, dim, heads, ffn):
        super().__init__()
        self.b, self.s, self.d, self.h = batch, seq, dim, heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.ln1 = nn.LayerNorm(dim)
        self.ff1 = nn.Linear(dim, ffn)
        self.ff2 = nn.Linear(ffn, dim)
        self.ln2 = nn.LayerNorm(dim)

    def sizes(self, x):
        """Batch and sequence length: fixed at construction (a static export)."""
        return self.b, self.s

    def forward(self, x):
        (b, s), d, h = self.sizes(x), self.d, self.h
        q, k, v = self.qkv(x).split(d, dim=-1)
        q = q.reshape(b, s, h, d // h).transpose(1, 2)
        k = k.reshape(b, s, h, d // h).permute(0, 2, 3, 1)
        v = v.reshape(b, s, h, d // h).transpose(1, 2)
        att = torch.softmax(torch.matmul(q, k) / math.sqrt(d // h), dim=-1)
        o = torch.matmul(att, v).transpose(1, 2).reshape(b, s, d)
        x = self.ln1(x + self.proj(o))
        return self.ln2(x + self.ff2(F.gelu(self.ff1(x))))


class DynamicEncoderLayer(EncoderLayer):
    """EncoderLayer whose reshapes read the batch and sequence length from the input, so an export
    with dynamic axes serves every size (Loom's dynamic shapes)."""

    def sizes(self, x):
        return x.shape[0], x.shape[1]
