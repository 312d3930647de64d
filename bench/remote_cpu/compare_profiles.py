#!/usr/bin/env python3
"""Loom's kernels beside ONNX Runtime's nodes: for each kernel of a `loom bench --profile` report,
its time and the time ORT spent on the same graph nodes (ort_node_profile.py's JSON), largest gap
first. ORT names a node it fused (Conv + activation) after the activation, and NCHWc nodes after
their output: such a name is matched to the conv of the same block.
Usage: compare_profiles.py LOOM_REPORT.txt ORT.json [ROWS] [PROFILE_INDEX (1: the report's first)]"""
import collections, json, re, sys

report, ort_json = sys.argv[1], sys.argv[2]
rows = int(sys.argv[3]) if len(sys.argv) > 3 else 30
index = int(sys.argv[4]) if len(sys.argv) > 4 else 1
text = open(report).read().split("profile of ")[index]
kernels = []  # (name, ms, graph nodes)
for line in text.splitlines():
    m = re.match(r"\s+([\d.]+)\s+[\d.]+%\s+[\d.]+%\s+(\S+) \((.*)\)$", line)
    if m:
        kernels.append((m.group(2), float(m.group(1)), [n.strip() for n in m.group(3).split(", ")]))
    m = re.match(r"\s+([\d.]+)\s+[\d.]+%\s+[\d.]+%\s+(\d+) kernels under", line)
    if m:
        kernels.append(("(small kernels)", float(m.group(1)), []))
kernel_of = {n: k for k, _, nodes in kernels for n in nodes}


def node_name(n):
    return re.sub(r"/[A-Za-z]+Fusion/?$", "", re.sub(r"_output_\d+.*$", "", n))


ort_ms, unmatched, by_op = collections.Counter(), collections.Counter(), collections.Counter()
for key, ms in json.load(open(ort_json)).items():
    name, op = key.rsplit("|", 1)
    by_op[op] += ms
    n = node_name(name)
    k = kernel_of.get(n)
    if not k and op in ("Conv", "FusedConv"):  # fused under the activation's name
        k = kernel_of.get(re.sub(r"((?:block|features)\.\d+)\.\d+/[A-Za-z]+$", r"\1.0/Conv", n))
    if k:
        ort_ms[k] += ms
    else:
        unmatched[(n, op)] += ms
print(f"Loom {sum(t for _, t, _ in kernels):.2f} ms in kernels; ORT {sum(by_op.values()):.2f} ms in nodes "
      f"({sum(unmatched.values()):.2f} not matched to a kernel)")
print("ORT by op: " + ", ".join(f"{op} {ms:.2f}" for op, ms in by_op.most_common()))
print(f"{'loom':>7} {'ort':>7} {'gap':>7}  kernel")
for k, t, nodes in sorted(kernels, key=lambda r: -(r[1] - ort_ms.get(r[0], 0)))[:rows]:
    print(f"{t:7.3f} {ort_ms.get(k, 0):7.3f} {t - ort_ms.get(k, 0):7.3f}  {k}")
for (n, op), ms in unmatched.most_common(8):
    print(f"not matched: {op} {n} {ms:.3f}")
