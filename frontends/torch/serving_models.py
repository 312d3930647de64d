#!/usr/bin/python3
"""Serving-size networks for the GPU benchmark (issue 30): ResNet-50 and MobileNetV3-large at
batch 32, a BERT-base-sized encoder at batch 16 x sequence 128 (and 512), ViT-B/16 at batch 32,
each also at batch 1. Written for both ends: on the build machine (Debian's torch 1.13) this
exports ONNX for `loom compile`; on the GPU machine (PyTorch 2.x) bench/gpu/serving_bench.py
rebuilds the same modules with the same weights and checks their fingerprint against the one the
export recorded.

Weights: every parameter and BatchNorm statistic is drawn from its own seeded generator as a sign
times one scale per tensor (the scale of PyTorch's default init, 1/sqrt(fan_in)); norm statistics
are kept away from identity. Signs make a model's artifact compress to about 1 bit a weight, which
is what lets a 100-440 MB network travel to the GPU machine; the arithmetic is that of any dense
random weights.

Usage: frontends/torch/serving_models.py [--out bench/serving] [--batch 32] [NAME ...]
writes <out>/<name>_b<batch>.onnx and <name>_b<batch>.fingerprint (git-ignored outputs).
"""
import argparse
import hashlib
import math
import os
import sys
import warnings
import zlib

import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
OPSET = 13


class SelfAttention(nn.Module):
    """Multi-head self-attention as exporters write it: MatMul, scale, Softmax, MatMul, with
    static reshapes."""

    def __init__(self, batch, seq, dim, heads):
        super().__init__()
        self.b, self.seq, self.dim, self.heads, self.hd = batch, seq, dim, heads, dim // heads
        self.scale = 1.0 / math.sqrt(self.hd)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):  # [B, S, D]
        B, S, H, hd = self.b, self.seq, self.heads, self.hd
        qkv = self.qkv(x).reshape(B, S, 3, H, hd).permute(2, 0, 3, 1, 4)  # [3, B, H, S, hd]
        q, k, v = qkv[0], qkv[1], qkv[2]
        att = torch.softmax(torch.matmul(q, k.transpose(-1, -2)) * self.scale, dim=-1)
        y = torch.matmul(att, v).permute(0, 2, 1, 3).reshape(B, S, self.dim)
        return self.proj(y)


class EncoderLayer(nn.Module):
    """BERT's post-norm encoder layer: LN(x + attn(x)), LN(x + FFN(x)), GELU (erf)."""

    def __init__(self, batch, seq, dim=768, heads=12, ffn=3072):
        super().__init__()
        self.attn = SelfAttention(batch, seq, dim, heads)
        self.ln1 = nn.LayerNorm(dim, eps=1e-12)
        self.ln2 = nn.LayerNorm(dim, eps=1e-12)
        self.fc1 = nn.Linear(dim, ffn)
        self.fc2 = nn.Linear(ffn, dim)

    def forward(self, x):
        x = self.ln1(x + self.attn(x))
        return self.ln2(x + self.fc2(F.gelu(self.fc1(x))))


class BertBase(nn.Module):
    """BERT-base's encoder stack: 12 layers, 768 wide, 12 heads, FFN 3072, on embedded tokens
    [B, S, 768] (the embedding lookup is a gather, not what the GPU spends its time on)."""

    def __init__(self, batch, seq):
        super().__init__()
        self.layers = nn.Sequential(*[EncoderLayer(batch, seq) for _ in range(12)])

    def forward(self, x):
        return self.layers(x)


def torchvision_model(name):
    import torchvision
    return getattr(torchvision.models, name)()


# name -> (factory(batch), input shape(batch), description)
MODELS = {
    "resnet50": (lambda b: torchvision_model("resnet50"), lambda b: (b, 3, 224, 224), "torchvision ResNet-50"),
    "resnet18": (lambda b: torchvision_model("resnet18"), lambda b: (b, 3, 224, 224), "torchvision ResNet-18"),
    "mobilenet_v3_large": (lambda b: torchvision_model("mobilenet_v3_large"), lambda b: (b, 3, 224, 224),
                           "torchvision MobileNetV3-large"),
    "vit_b_16": (lambda b: torchvision_model("vit_b_16"), lambda b: (b, 3, 224, 224), "torchvision ViT-B/16"),
    "bert_base_s128": (lambda b: BertBase(b, 128), lambda b: (b, 128, 768), "BERT-base encoder, sequence 128"),
    "bert_base_s512": (lambda b: BertBase(b, 512), lambda b: (b, 512, 768), "BERT-base encoder, sequence 512"),
}


def sign_weights(model, seed):
    """Every floating parameter and buffer: sign(N(0,1)) x the tensor's scale, from a generator
    seeded by (seed, the tensor's name); BatchNorm and LayerNorm get scales near 1, variances in
    [0.75, 1.25] and small means and biases, so that none is an identity."""
    with torch.no_grad():
        state = model.state_dict()
        for name in sorted(state):
            t = state[name]
            if not t.is_floating_point():
                continue
            gen = torch.Generator().manual_seed(seed * 1000003 + zlib.crc32(name.encode()))
            sign = torch.randn(t.shape, generator=gen).sign()
            sign[sign == 0] = 1
            leaf = name.rsplit(".", 1)[-1]
            if leaf == "running_var":
                t.copy_(1 + 0.25 * sign)
            elif leaf == "running_mean":
                t.copy_(0.1 * sign)
            elif t.dim() == 1 and leaf == "weight":  # BatchNorm / LayerNorm scales
                t.copy_(1 + 0.25 * sign)
            elif t.dim() == 1:  # biases
                t.copy_(0.05 * sign)
            elif "pos_embedding" in name or "class_token" in name:
                t.copy_(0.02 * sign)  # ViT's init std
            else:  # Linear and Conv weights: 1/sqrt(fan_in), PyTorch's default scale
                t.copy_(sign / math.sqrt(t[0].numel()))
    model.eval()
    return model


def build(name, batch):
    """The module (eval mode, sign weights) and its seeded input."""
    factory, shape, _ = MODELS[name]
    model = sign_weights(factory(batch), zlib.crc32(name.encode()))
    gen = torch.Generator().manual_seed(zlib.crc32(name.encode()) + batch)
    x = torch.rand(*shape(batch), generator=gen) * 2 - 1
    return model, x


def fingerprint(model):
    """sha256 over the state dict's floating tensors in name order (float32 bytes)."""
    h = hashlib.sha256()
    for name, t in sorted(model.state_dict().items()):
        if t.is_floating_point():
            h.update(name.encode())
            h.update(t.detach().float().contiguous().cpu().numpy().tobytes())
    return h.hexdigest()


def rebatch(path, batch):
    r"""A BERT export traced at batch 1 made batch \p batch: the input's and output's first dim and
    the first entry of every Reshape target (the encoder's static [B, S, ...] reshapes) become
    \p batch. The weights do not depend on the batch, so the fingerprint stands; serving_bench.py
    checks the outputs against PyTorch's module built at \p batch."""
    import onnx
    from onnx import numpy_helper
    m = onnx.load(path)
    g = m.graph
    for v in list(g.input) + list(g.output):
        v.type.tensor_type.shape.dim[0].dim_value = batch
    targets = {n.input[1] for n in g.node if n.op_type == "Reshape"}
    consts = {n.output[0]: n for n in g.node if n.op_type == "Constant"}
    inits = {t.name: t for t in g.initializer}
    for name in targets:
        t = inits.get(name) or next(a.t for a in consts[name].attribute if a.name == "value")
        a = numpy_helper.to_array(t).copy()
        assert a[0] == 1, f"{name}: Reshape target {a} does not start with the traced batch 1"
        a[0] = batch
        t.CopyFrom(numpy_helper.from_array(a, t.name))
    del g.value_info[:]
    onnx.save(m, path)


def interpolate_batch(path1, path2, batch, out):
    r"""A model traced at batches 1 (\p path1) and 2 (\p path2) made batch \p batch: the graphs
    are the same but for the integer constants that carry the batch (Reshape targets such as
    MultiheadAttention's [S, B*H, d], Expand shapes), which are linear in it, so every such
    constant that differs between the two becomes v1 + (batch - 1) * (v2 - v1). The weights do not
    depend on the batch, so the fingerprint stands; serving_bench.py checks the outputs against
    PyTorch's module built at \p batch."""
    import numpy as np
    import onnx
    from onnx import numpy_helper
    m1, m2 = onnx.load(path1), onnx.load(path2)
    g1, g2 = m1.graph, m2.graph
    if [n.op_type for n in g1.node] != [n.op_type for n in g2.node]:
        sys.exit(f"{path1}, {path2}: the traces at batch 1 and 2 differ in their nodes; export at full batch")

    def constants(g):
        inits = {t.name: t for t in g.initializer}
        consts = {n.output[0]: next(a.t for a in n.attribute if a.name == "value")
                  for n in g.node if n.op_type == "Constant"}
        return {**inits, **consts}

    c1, c2 = constants(g1), constants(g2)
    changed, done = 0, set()
    for n1, n2 in zip(g1.node, g2.node):
        for a, b in zip(list(n1.input) + (list(n1.output) if n1.op_type == "Constant" else []),
                        list(n2.input) + (list(n2.output) if n2.op_type == "Constant" else [])):
            if a not in c1 or b not in c2 or a in done:  # a constant read by several nodes changes once
                continue
            done.add(a)
            v1, v2 = numpy_helper.to_array(c1[a]), numpy_helper.to_array(c2[b])
            if v1.dtype.kind not in "iu" or v1.shape != v2.shape or np.array_equal(v1, v2):
                continue
            c1[a].CopyFrom(numpy_helper.from_array((v1 + (batch - 1) * (v2 - v1)).astype(v1.dtype), c1[a].name))
            changed += 1
    for v in list(g1.input) + list(g1.output):
        v.type.tensor_type.shape.dim[0].dim_value = batch
    del g1.value_info[:]
    onnx.save(m1, out)
    return changed


def export(name, batch, out_dir, trace_batch=None):
    r"""Exports \p name at \p batch; BERT may be traced at batch 1 (\p trace_batch) and rebatched,
    which takes a sixteenth of the CPU time a batch-16 trace does; other models traced at batch 1
    (\p trace_batch) are traced at 1 and 2 and interpolated (interpolate_batch)."""
    model, x = build(name, batch)
    base = os.path.join(out_dir, f"{name}_b{batch}")
    # Under no_grad PyTorch's MultiheadAttention (ViT) takes its fused fast path, which has no ONNX
    # export; with gradients enabled it runs the decomposed products the exporter knows.
    grad = torch.enable_grad if name.startswith("vit") else torch.no_grad

    def trace(module, inp, path):
        with grad():
            torch.onnx.export(module, (inp,), path, input_names=["x"], output_names=["y"],
                              opset_version=OPSET, do_constant_folding=True)

    if trace_batch and trace_batch != batch and not name.startswith("bert"):
        if trace_batch != 1:
            sys.exit("--trace-batch: models other than BERT trace at batch 1 only")
        for b in (1, 2):
            trace(*build(name, b), base + f".b{b}.tmp")
        changed = interpolate_batch(base + ".b1.tmp", base + ".b2.tmp", batch, base + ".onnx.tmp")
        os.remove(base + ".b1.tmp")
        os.remove(base + ".b2.tmp")
        print(f"{name}: {changed} batch constants interpolated")
    else:
        traced, tx = (model, x)
        if trace_batch and trace_batch != batch:
            traced, tx = build(name, trace_batch)
        trace(traced, tx, base + ".onnx.tmp")
        if traced is not model:
            rebatch(base + ".onnx.tmp", batch)
    os.replace(base + ".onnx.tmp", base + ".onnx")
    with open(base + ".fingerprint", "w") as f:
        f.write(fingerprint(model) + "\n")
    params = sum(p.numel() for p in model.parameters())
    print(f"{name} b{batch}: {base}.onnx ({os.path.getsize(base + '.onnx') / 1e6:.0f} MB, {params / 1e6:.1f} M params)")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "serving"))
    ap.add_argument("--batch", type=int, action="append", help="batch sizes (default 32 and 1; BERT 16 and 1)")
    ap.add_argument("--trace-batch", type=int, help="trace at batch 1 and rebatch the export (BERT: its reshapes; "
                    "others: traced at 1 and 2, batch constants interpolated)")
    ap.add_argument("names", nargs="*")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    warnings.filterwarnings("ignore")
    for name in args.names or MODELS:
        if name not in MODELS:
            sys.exit(f"unknown model '{name}'; known: {' '.join(MODELS)}")
        for b in args.batch or ([16, 1] if name.startswith("bert") else [32, 1]):
            export(name, b, args.out, args.trace_batch)


if __name__ == "__main__":
    main()
