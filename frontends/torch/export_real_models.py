#!/usr/bin/python3
"""Exports Loom's real-model suite from PyTorch (Debian's torch 1.13 + torchvision 0.14) to ONNX.

For every model NAME this writes bench/real_models/NAME.onnx: whole networks at their deployed
input sizes (batch 1, static shapes), as opposed to bench/workloads' single layers. Six are
torchvision classifiers; four are written here after well-known deployed models: PP-OCR's text
detector (DBNet: MobileNetV3 backbone, FPN neck, DB head), its text recognizer (conv backbone
and an SVTR-style transformer neck, CTC classes) and its direction classifier, and a BERT-mini
encoder. Weights are random but seeded per model (torch.manual_seed, and seeded BatchNorm /
LayerNorm statistics so that none is an identity), so two runs write byte-identical files.
Export: opset 13, model.eval(), constant folding on (Conv+BatchNorm fold into the Conv).
The .onnx files are git-ignored; run this script to make them.

Usage: frontends/torch/export_real_models.py [--out bench/real_models] [--list] [--force] [NAME ...]

Files already present are skipped unless --force. Self-contained: needs only torch and
torchvision.
"""
import argparse
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


def torchvision_model(name, **kwargs):
    import torchvision
    if not hasattr(torchvision.models, name):
        raise ImportError(f"torchvision {torchvision.__version__} has no {name}")
    return getattr(torchvision.models, name)(weights=None, **kwargs)


# --- shared blocks ----------------------------------------------------------------------------

class ConvBNAct(nn.Sequential):
    """Conv (no bias) + BatchNorm + activation (nn.Hardswish, nn.ReLU, ... or None)."""

    def __init__(self, cin, cout, k, stride=1, groups=1, act=nn.Hardswish):
        pad = k // 2
        layers = [nn.Conv2d(cin, cout, k, stride, pad, groups=groups, bias=False), nn.BatchNorm2d(cout)]
        if act is not None:
            layers.append(act())
        super().__init__(*layers)


class SqueezeExcite(nn.Module):
    """MobileNetV3's SE: global average pool, 1x1 reduce + ReLU, 1x1 expand + hard-sigmoid, scale."""

    def __init__(self, c, reduction=4):
        super().__init__()
        mid = max(8, c // reduction)
        self.fc1 = nn.Conv2d(c, mid, 1)
        self.fc2 = nn.Conv2d(mid, c, 1)

    def forward(self, x):
        s = x.mean(dim=(2, 3), keepdim=True)
        return x * F.hardsigmoid(self.fc2(F.relu(self.fc1(s))))


class DepthwiseSeparable(nn.Sequential):
    """Depthwise 3x3 (stride may differ per axis, as in OCR recognizers) + optional SE + pointwise 1x1,
    hard-swish: the block of PP-OCR's MobileNetV1Enhance."""

    def __init__(self, cin, cout, stride, se=False):
        layers = [ConvBNAct(cin, cin, 3, stride, groups=cin)]
        if se:
            layers.append(SqueezeExcite(cin))
        layers.append(ConvBNAct(cin, cout, 1))
        super().__init__(*layers)


class SelfAttention(nn.Module):
    """Multi-head self-attention with explicit MatMul/Softmax and static reshapes (torch 1.13's
    nn.MultiheadAttention export carries dynamic-shape plumbing)."""

    def __init__(self, seq, dim, heads):
        super().__init__()
        self.seq, self.dim, self.heads, self.hd = seq, dim, heads, dim // heads
        self.scale = 1.0 / math.sqrt(self.hd)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):  # [1, S, D]
        # The --dynamic export leaves the sequence length to the reshapes (-1): it moves with the width.
        S, H, hd = -1 if getattr(self, "dynamic_seq", False) else self.seq, self.heads, self.hd
        qkv = self.qkv(x).reshape(1, S, 3, H, hd).permute(2, 0, 3, 1, 4)  # [3, 1, H, S, hd]
        q, k, v = qkv[0], qkv[1], qkv[2]
        att = torch.softmax(torch.matmul(q, k.transpose(-1, -2)) * self.scale, dim=-1)
        y = torch.matmul(att, v).permute(0, 2, 1, 3).reshape(1, S, self.dim)
        return self.proj(y)


class TransformerBlock(nn.Module):
    """Encoder block. pre_norm: x + attn(ln(x)), x + mlp(ln(x)) (SVTR); else post-norm (BERT)."""

    def __init__(self, seq, dim, heads, ffn, pre_norm, eps=1e-5):
        super().__init__()
        self.pre_norm = pre_norm
        self.attn = SelfAttention(seq, dim, heads)
        self.ln1 = nn.LayerNorm(dim, eps=eps)
        self.ln2 = nn.LayerNorm(dim, eps=eps)
        self.fc1 = nn.Linear(dim, ffn)
        self.fc2 = nn.Linear(ffn, dim)

    def mlp(self, x):
        return self.fc2(F.gelu(self.fc1(x)))

    def forward(self, x):
        if self.pre_norm:
            x = x + self.attn(self.ln1(x))
            return x + self.mlp(self.ln2(x))
        x = self.ln1(x + self.attn(x))
        return self.ln2(x + self.mlp(x))


# --- PP-OCR-like models -----------------------------------------------------------------------

class TextDetector(nn.Module):
    """DBNet as PP-OCR's det model: MobileNetV3-large x0.5 backbone tapped at strides 4/8/16/32
    (16, 24, 56, 480 channels), DBFPN neck (1x1 laterals to 96, nearest x2 upsample + add, 3x3 convs
    to 24, upsample to stride 4, concat to 96), DB head (3x3 conv-BN-ReLU, two 2x2 stride-2
    ConvTranspose, Sigmoid): the probability map at the input's size."""

    def __init__(self, inner=96):
        super().__init__()
        f = torchvision_model("mobilenet_v3_large", width_mult=0.5).features
        self.stages = nn.ModuleList([f[0:4], f[4:7], f[7:13], f[13:17]])
        chans = [16, 24, 56, 480]
        self.lateral = nn.ModuleList([nn.Conv2d(c, inner, 1, bias=False) for c in chans])
        self.smooth = nn.ModuleList([nn.Conv2d(inner, inner // 4, 3, padding=1, bias=False) for _ in chans])
        q = inner // 4
        self.head = nn.Sequential(
            nn.Conv2d(inner, q, 3, padding=1, bias=False), nn.BatchNorm2d(q), nn.ReLU(),
            nn.ConvTranspose2d(q, q, 2, 2), nn.BatchNorm2d(q), nn.ReLU(),
            nn.ConvTranspose2d(q, 1, 2, 2), nn.Sigmoid())

    def forward(self, x):
        feats = []
        for stage in self.stages:
            x = stage(x)
            feats.append(x)
        c2, c3, c4, c5 = [lat(c) for lat, c in zip(self.lateral, feats)]
        up = lambda t, s=2: F.interpolate(t, scale_factor=s, mode="nearest")  # noqa: E731
        o4 = c4 + up(c5)
        o3 = c3 + up(o4)
        o2 = c2 + up(o3)
        p5 = up(self.smooth[3](c5), 8)
        p4 = up(self.smooth[2](o4), 4)
        p3 = up(self.smooth[1](o3), 2)
        p2 = self.smooth[0](o2)
        return self.head(torch.cat([p5, p4, p3, p2], dim=1))


class TextRecognizer(nn.Module):
    """CRNN/SVTR-style recognizer as PP-OCRv3's rec model at 3x48x320: a depthwise-separable conv
    backbone with hard-swish and SE whose strides (2,2),(2,2),(2,1),(2,2),(2,1) take the height to 2
    and the width to 40, average pooling over the height, a 1x1 conv to 120, two pre-norm transformer
    blocks (120 wide, 4 heads, GELU MLP of 240) over the 40 positions, LayerNorm, Linear to 97 CTC
    classes and Softmax: [1, 40, 97]."""

    def __init__(self, width=320, dim=120, heads=4, classes=97):
        super().__init__()
        self.seq = width // 8
        self.backbone = nn.Sequential(
            ConvBNAct(3, 32, 3, 2),                          # 24 x 160
            DepthwiseSeparable(32, 64, 1),
            DepthwiseSeparable(64, 128, 2),                  # 12 x 80
            DepthwiseSeparable(128, 128, 1),
            DepthwiseSeparable(128, 256, (2, 1)),            # 6 x 80
            DepthwiseSeparable(256, 256, 1, se=True),
            DepthwiseSeparable(256, 384, 2, se=True),        # 3 x 40
            DepthwiseSeparable(384, 384, 1, se=True),
            DepthwiseSeparable(384, 512, (2, 1), se=True),  # 2 x 40
        )
        self.pool = nn.AvgPool2d((2, 1))                     # 1 x 40
        self.reduce = ConvBNAct(512, dim, 1)
        self.blocks = nn.Sequential(*[TransformerBlock(self.seq, dim, heads, 2 * dim, pre_norm=True, eps=1e-6)
                                      for _ in range(2)])
        self.norm = nn.LayerNorm(dim, eps=1e-6)
        self.fc = nn.Linear(dim, classes)

    def forward(self, x):
        x = self.reduce(self.pool(self.backbone(x)))        # [1, dim, 1, T]
        seq = -1 if getattr(self, "dynamic_seq", False) else self.seq
        x = x.reshape(1, x.shape[1], seq).permute(0, 2, 1)  # [1, T, dim]
        x = self.norm(self.blocks(x))
        return torch.softmax(self.fc(x), dim=-1)


class DirectionClassifier(nn.Module):
    """PP-OCR's text direction classifier: MobileNetV3-small x0.35 features at 3x48x192, global
    average pool, Linear to 2 classes (0 / 180 degrees), Softmax."""

    def __init__(self):
        super().__init__()
        self.features = torchvision_model("mobilenet_v3_small", width_mult=0.35).features
        self.fc = nn.Linear(self.features[-1].out_channels, 2)

    def forward(self, x):
        x = self.features(x).mean(dim=(2, 3))
        return torch.softmax(self.fc(x), dim=-1)


# --- BERT -------------------------------------------------------------------------------------

class BertEncoder(nn.Module):
    """BERT-mini: int64 token ids [1, 128], word (30522) + position + token-type embeddings,
    LayerNorm, 4 post-norm encoder layers (256 wide, 4 heads, GELU FFN of 1024): [1, 128, 256]."""

    def __init__(self, seq=128, dim=256, heads=4, ffn=1024, layers=4, vocab=30522, max_pos=512):
        super().__init__()
        self.seq = seq
        self.word = nn.Embedding(vocab, dim)
        self.pos = nn.Embedding(max_pos, dim)
        self.tok_type = nn.Embedding(2, dim)
        self.ln = nn.LayerNorm(dim, eps=1e-12)
        self.layers = nn.Sequential(*[TransformerBlock(seq, dim, heads, ffn, pre_norm=False, eps=1e-12)
                                      for _ in range(layers)])
        for e in (self.word, self.pos, self.tok_type):
            nn.init.normal_(e.weight, std=0.02)

    def forward(self, ids):
        # Position and token-type terms are constants (positions 0..seq-1, type 0): folded at export.
        x = self.word(ids) + self.pos.weight[:self.seq].unsqueeze(0) + self.tok_type.weight[0]
        return self.layers(self.ln(x))


# --- the suite --------------------------------------------------------------------------------

def models():
    """name -> (module factory, {input name: (shape, dtype)}, [output names], description)."""
    img = {"x": ((1, 3, 224, 224), torch.float32)}
    tv = lambda n: (lambda: torchvision_model(n), img, ["y"],  # noqa: E731
                    f"torchvision {n}, 1x3x224x224 -> 1x1000")
    return {
        "mobilenet_v3_small": tv("mobilenet_v3_small"),
        "mobilenet_v3_large": tv("mobilenet_v3_large"),
        "resnet18": tv("resnet18"),
        "resnet50": tv("resnet50"),
        "shufflenet_v2_x1_0": tv("shufflenet_v2_x1_0"),
        "efficientnet_b0": tv("efficientnet_b0"),
        "text_detector": (TextDetector, {"x": ((1, 3, 640, 640), torch.float32)}, ["prob"],
                          "DBNet text detector (MobileNetV3-large x0.5, FPN, DB head), 1x3x640x640 -> 1x1x640x640"),
        "text_recognizer": (TextRecognizer, {"x": ((1, 3, 48, 320), torch.float32)}, ["prob"],
                            "SVTR-style text recognizer (conv backbone, 2 transformer blocks), "
                            "1x3x48x320 -> 1x40x97"),
        "direction_classifier": (DirectionClassifier, {"x": ((1, 3, 48, 192), torch.float32)}, ["prob"],
                                 "text direction classifier (MobileNetV3-small x0.35), 1x3x48x192 -> 1x2"),
        "bert_encoder": (BertEncoder, {"ids": ((1, 128), torch.int64)}, ["hidden"],
                         "BERT-mini encoder (4 layers, 256 wide, 4 heads), int64 ids 1x128 -> 1x128x256"),
    }


def seed_of(name):
    return zlib.crc32(name.encode())


def build(name, factory, inputs):
    """The module in eval mode with seeded weights and non-trivial BatchNorm / LayerNorm
    statistics, and one seeded set of example inputs."""
    seed = seed_of(name)
    torch.manual_seed(seed)
    model = factory()
    gen = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.BatchNorm2d):
                c = m.num_features
                m.running_mean.copy_(torch.randn(c, generator=gen) * 0.1)
                m.running_var.copy_(torch.rand(c, generator=gen) * 0.5 + 0.75)
                m.weight.copy_(torch.rand(c, generator=gen) * 0.5 + 0.75)
                m.bias.copy_(torch.randn(c, generator=gen) * 0.1)
            elif isinstance(m, nn.LayerNorm):
                m.weight.copy_(torch.rand(m.weight.shape, generator=gen) * 0.5 + 0.75)
                m.bias.copy_(torch.randn(m.bias.shape, generator=gen) * 0.1)
    model.eval()
    args = tuple(torch.rand(*shape, generator=gen) * 2 - 1 if dtype.is_floating_point
                 else torch.randint(0, 1000, shape, generator=gen, dtype=dtype)
                 for shape, dtype in inputs.values())
    return model, args


# Dynamic axes of the `--dynamic` variants (`<name>.dynamic.onnx`): what Loom's dynamic shapes
# compile once for every size.
DYNAMIC_AXES = {
    "text_detector": {"x": {0: "batch", 2: "height", 3: "width"}, "prob": {0: "batch", 2: "height", 3: "width"}},
    # The recognizer's reshapes keep batch 1: its width moves (`--dim width=LO..HI`).
    "text_recognizer": {"x": {0: "batch", 3: "width"}, "prob": {0: "batch", 1: "steps"}},
}


def export(name, spec, out_dir, dynamic=False):
    factory, inputs, output_names, desc = spec
    try:
        model, args = build(name, factory, inputs)
    except ImportError as e:
        print(f"{name}: skipped ({e})", file=sys.stderr)
        return None
    path = os.path.join(out_dir, name + (".dynamic" if dynamic else "") + ".onnx")
    tmp = path + ".tmp"
    params = sum(p.numel() for p in model.parameters())
    if dynamic:
        for m in model.modules():
            m.dynamic_seq = True
    with torch.no_grad():
        torch.onnx.export(model, args, tmp, input_names=list(inputs), output_names=output_names,
                          opset_version=OPSET, do_constant_folding=True,
                          dynamic_axes=DYNAMIC_AXES[name] if dynamic else None)
    os.replace(tmp, path)
    print(f"{name}: {path} ({os.path.getsize(path) / 1e6:.1f} MB, {params / 1e6:.2f} M params) - {desc}")
    return path


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "real_models"))
    ap.add_argument("--list", action="store_true", help="print the models and exit")
    ap.add_argument("--force", action="store_true", help="export even where the file exists")
    ap.add_argument("--dynamic", action="store_true",
                    help="export <name>.dynamic.onnx with dynamic axes (models in DYNAMIC_AXES only)")
    ap.add_argument("names", nargs="*", help="models to export (default: all)")
    args = ap.parse_args()
    table = models()
    if args.list:
        for n, spec in table.items():
            print(f"{n:22} {spec[3]}")
        return
    for n in args.names:
        if n not in table:
            sys.exit(f"unknown model '{n}'; known: {' '.join(table)}")
    os.makedirs(args.out, exist_ok=True)
    warnings.filterwarnings("ignore")
    for name in args.names or (list(DYNAMIC_AXES) if args.dynamic else table):
        if args.dynamic and name not in DYNAMIC_AXES:
            sys.exit(f"no dynamic axes for '{name}'; known: {' '.join(DYNAMIC_AXES)}")
        suffix = ".dynamic.onnx" if args.dynamic else ".onnx"
        if not args.force and os.path.exists(os.path.join(args.out, name + suffix)):
            print(f"{name}: exists, skipped (--force to redo)")
            continue
        export(name, table[name], args.out, args.dynamic)


if __name__ == "__main__":
    main()
