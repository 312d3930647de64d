"""Writes a CUDA artifact's data/ folder (inputs and the float64 reference output) for a GPU-suite
workload, as bench/gpu/gpu_bench.py does: seeded inputs drawn on the GPU, the reference computed
by PyTorch in float64. Run by a compile_run job with `data = "torch"` on the GPU worker (its
python3 holds PyTorch), for artifacts compiled with --no-reference.

    python3 bench/sweep_lib/gpu_data.py ARTIFACT_DIR WORKLOAD
"""
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "gpu"))
from workloads import WORKLOADS, GEMM_WORKLOADS, EXTRA_WORKLOADS  # noqa: E402


def main():
    art, name = sys.argv[1], sys.argv[2]
    table = {**WORKLOADS, **GEMM_WORKLOADS, **EXTRA_WORKLOADS}
    if name not in table:
        sys.exit(f"gpu_data: no workload '{name}' in bench/gpu/workloads.py (known: {', '.join(sorted(table))}); "
                 f"a model whose inputs PyTorch cannot make needs data = \"loom\"")
    factory, shapes, out_name, _ = table[name]
    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    torch.manual_seed(0)
    model = factory().to(dev).eval()
    g = torch.Generator(device=dev).manual_seed(1234)
    ins = [torch.rand(s, device=dev, generator=g) * 2 - 1 for s in shapes.values()]
    with torch.no_grad():
        ref = model.double()(*[t.double() for t in ins])
    os.makedirs(os.path.join(art, "data"), exist_ok=True)
    for n, t in zip(shapes, ins):
        np.save(os.path.join(art, "data", n + ".npy"), t.cpu().numpy())
    np.save(os.path.join(art, "data", "expected_" + out_name + ".npy"), ref.cpu().numpy())


if __name__ == "__main__":
    main()
