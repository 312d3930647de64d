#!/usr/bin/python3
"""Hand variants of a training step's weight-gradient GEMMs (dW = dYᵀ·X, the kernels that fuse
`grad_reshape_*, grad_reshape_*, grad_transpose_*, grad_matmul_*` into the SGD update), written from
the schedule the cost model printed (`loom compile --train --print-schedule`), for D210's A/B:

  b      B (the activation rows) copied per micro-kernel column strip: `B.in(G)` at G's `jo`
  a      A (dY transposed) copied per k chunk: `A.in(G)` at G's `ko` (the tile's rows x 256 k)
  ab     both
  A      A copied per micro-kernel row tile: `A.in(G)` at G's `io` (8 x 256, recopied per column strip)
  R      row tiles outside the column strips in G's update (reorder jo, io)
  T      A materialized: `grad_transpose_*` computed at root, vectorized along i (dYᵀ stored once)
  Tt     the same in tiles of 128 x 16 whose source tile is copied first with dense loads (the
         schedule of a weight's transpose)
  kNNN   k chunks of NNN instead of 256
  mMnN   micro-kernel of M rows x N columns instead of 8 x 32

usage: dw_gemm_variants.py PRINTED_SCHEDULE OUT.sched VARIANT
then: loom compile M --train --target <the preset's target> --schedule OUT.sched ... ; time the
libraries with step_turns_one_process.py.
"""
import re
import sys

src, out, variant = sys.argv[1], sys.argv[2], sys.argv[3]
text = open(src).read().split("\ncompiled a training step")[0] + "\n"  # the schedule, not compile's report
DW = r"# kernel fused_reshape_transpose_mm\w* \(gemm\): fuses (grad_reshape_\d+), grad_reshape_\d+, (grad_transpose_\d+), (grad_matmul_\d+)"
UPDATE = "{g}.update(0).split(k, ko, ki, {kc})\n    .split(j, jo, ji, {nr})\n    .split(ji, jvo, jvi, 16)\n    .split(i, io, ii, {mr})\n    .split(ki, kio, kii, 4)\n    .reorder(jvi, jvo, ii, kii, kio, {order}, ko)"
kernels = re.findall(DW, text)
assert kernels, "no weight-gradient GEMM kernel in " + src
extra = []
for b, a, g in kernels:
    old = UPDATE.format(g=g, kc=256, nr=32, mr=8, order="io, jo")
    assert old in text, g + ": not the cost model's 8x32 cache-blocked update"
    kc, nr, mr, order = 256, 32, 8, "io, jo"
    if re.fullmatch(r"k\d+", variant):
        kc = int(variant[1:])
    elif re.fullmatch(r"m\d+n\d+", variant):
        mr, nr = map(int, re.findall(r"\d+", variant))
    elif variant == "R":
        order = "jo, io"
    elif variant == "T":
        text = text.replace(f"{a}.compute_inline();", f"{a}.compute_root().vectorize(i, 16);")
    elif variant == "Tt":
        src_rows = re.search(rf"fuses {b}, (grad_reshape_\d+), {a}", text).group(1)
        text = text.replace(f"{a}.compute_inline();", f"{a}.compute_root()\n    .split(i, io, ii, 128)\n"
                            f"    .split(j, jo, ji, 16)\n    .reorder(ji, ii, jo, io)\n    .vectorize(ji);")
        extra.append(f"{src_rows}.in({a}) as {a}_tile;\n{a}_tile.compute_at({a}, jo).vectorize(j, 16);\n")
    else:
        assert variant in ("a", "b", "ab", "A"), "unknown variant " + variant
        if "b" in variant:
            extra.append(f"{b}.in({g}) as {g}_bpack;\n{g}_bpack.compute_at({g}, jo).vectorize(j, 16);\n")
        if "a" in variant:
            extra.append(f"{a}.in({g}) as {g}_apack;\n{g}_apack.compute_at({g}, ko).vectorize(i, 16);\n")
        if variant == "A":
            extra.append(f"{a}.in({g}) as {g}_apack;\n{g}_apack.compute_at({g}, io).vectorize(i, 8);\n")
    text = text.replace(old, UPDATE.format(g=g, kc=kc, nr=nr, mr=mr, order=order))
open(out, "w").write(text + "\n" + "\n".join(extra))
print(f"{out}: variant {variant} of {len(kernels)} weight-gradient GEMMs ({', '.join(k[2] for k in kernels)})")
