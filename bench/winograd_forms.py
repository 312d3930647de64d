#!/usr/bin/python3
"""winograd_forms.py OUT C K H W [mm|grp|sep]: one 3x3 conv + bias + ReLU at 1xCxHxW as ONNX, direct, or as
Winograd F(2x2, 3x3) with the 16 products as a batched MatMul (mm), one 16-group 1x1 Conv (grp: what
graph/winograd_rewrite.cpp makes) or 16 separate 1x1 Convs (sep). bench/DECISIONS.md#d169."""
import sys, numpy as np, onnx
from onnx import helper as h, TensorProto as TP, numpy_helper as nh
out, C, K, H, W = sys.argv[1], *map(int, sys.argv[2:6]); wino = sys.argv[6] if len(sys.argv) > 6 else ""
rng = np.random.default_rng(0)
w = (rng.standard_normal((K, C, 3, 3)) / np.sqrt(9 * C)).astype(np.float32)
b = rng.standard_normal(K).astype(np.float32) * 0.1
nodes, inits = [], [nh.from_array(b.reshape(K, 1, 1), "bias")]
cnt = [0]
def n(op, ins, **kw):
    cnt[0] += 1; o = f"t{cnt[0]}"; nodes.append(h.make_node(op, ins, [o], **kw)); return o
def const(a, name):
    inits.append(nh.from_array(np.asarray(a), name)); return name
if not wino:
    inits.append(nh.from_array(w, "w"))
    y = n("Conv", ["x", "w"], pads=[1, 1, 1, 1], kernel_shape=[3, 3])
else:
    G = np.array([[1, 0, 0], [.5, .5, .5], [.5, -.5, .5], [0, 0, 1]])
    U = np.einsum("ai,kcij,bj->abkc", G, w.astype(np.float64), G).reshape(16, 1, K, C).astype(np.float32)
    th, tw = (H + 1) // 2, (W + 1) // 2
    xp = n("Pad", ["x", const(np.array([0, 0, 1, 1, 0, 0, 2 * th + 1 - H, 2 * tw + 1 - W], np.int64), "pads")])
    def sl(x, s, e, ax): return n("Slice", [x, const(np.array([s], np.int64), f"s{cnt[0]}"), const(np.array([e], np.int64), f"e{cnt[0]}"), const(np.array([ax], np.int64), f"a{cnt[0]}"), const(np.array([2], np.int64), f"p{cnt[0]}")])
    def bt(r):  # B^T rows applied to 4 slices
        return [n("Sub", [r[0], r[2]]), n("Add", [r[1], r[2]]), n("Sub", [r[2], r[1]]), n("Sub", [r[1], r[3]])]
    R = bt([sl(xp, r, r + 2 * th, 2) for r in range(4)])
    V = []
    for a in range(4):
        V += bt([sl(R[a], s, s + 2 * tw, 3) for s in range(4)])
    if wino == "mm":
        v = n("Concat", V, axis=0)  # [16N, C, th, tw]
        v = n("Reshape", [v, const(np.array([16, -1, C, th * tw], np.int64), "vshape")])
        m = n("MatMul", [const(U, "U"), v])  # [16, N, K, T]
        m = n("Reshape", [m, const(np.array([16, -1, K, th, tw], np.int64), "mshape")])
        M = [n("Slice", [m, const(np.array([t], np.int64), f"ms{t}"), const(np.array([t + 1], np.int64), f"me{t}"), const(np.array([0], np.int64), f"max{t}")]) for t in range(16)]
    elif wino == "grp":
        v = n("Concat", V, axis=1)  # [N, 16C, th, tw]
        m = n("Conv", [v, const(U.reshape(16 * K, C, 1, 1), "U")], group=16, kernel_shape=[1, 1])
        M = [n("Slice", [m, const(np.array([t * K], np.int64), f"ms{t}"), const(np.array([t * K + K], np.int64), f"me{t}"), const(np.array([1], np.int64), f"max{t}")]) for t in range(16)]
    else:  # sep: 16 convs
        M = [n("Conv", [V[t], const(U[t, 0].reshape(K, C, 1, 1), f"U{t}")], kernel_shape=[1, 1]) for t in range(16)]
    def at(q):  # A^T = [[1,1,1,0],[0,1,-1,-1]]
        return [n("Add", [n("Add", [q[0], q[1]]), q[2]]), n("Sub", [n("Sub", [q[1], q[2]]), q[3]])]
    P = [at([M[4 * i + j] for i in range(4)]) for j in range(4)]  # P[j][a]
    Ys = []
    for a in range(2):
        Ys += at([P[j][a] for j in range(4)])
    if wino == "mm":
        Ys = [n("Reshape", [q, const(np.array([-1, K, th, tw], np.int64), f"ys{i}")]) for i, q in enumerate(Ys)]
    y = n("DepthToSpace", [n("Concat", Ys, axis=1)], blocksize=2, mode="DCR")
    if 2 * th != H or 2 * tw != W:
        y = n("Slice", [y, const(np.array([0, 0], np.int64), "zs"), const(np.array([H, W], np.int64), "ze"), const(np.array([2, 3], np.int64), "za")])
y = n("Add", [y, "bias"])
nodes.append(h.make_node("Relu", [y], ["y"]))
g = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", TP.FLOAT, [1, C, H, W])], [h.make_tensor_value_info("y", TP.FLOAT, [1, K, H, W])], inits)
mo = h.make_model(g, opset_imports=[h.make_opsetid("", 13)]); mo.ir_version = 8
onnx.checker.check_model(mo); onnx.save(mo, out)
x = rng.standard_normal((1, C, H, W)).astype(np.float32)
