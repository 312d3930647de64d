#!/bin/bash
# On the GPU machine: Nsight Compute on launches 61-65 of the LayerNorm row kernel inside a timing
# loop (a 256 MB memset flushing L2 before every launch, as the benchmark does), caches and clocks
# left alone: the kernel's own warm duration, for Loom's artifact (artifacts/rowvar/layernorm_rows)
# and for Inductor's kernel (RESULTS_GPU.md run 68).
set -e
cd "$(dirname "$0")/../../.."
tools/loom_run/build.sh /tmp/loom_run >/dev/null
python3 bench/gpu/gpu_bench.py --artifacts artifacts/rowvar --runner /tmp/loom_run --keep-data --reps 20 --out /tmp/k.json layernorm_rows >/dev/null 2>&1
M="--cache-control none --clock-control none --metrics gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed"
ncu $M -k regex:_kernel_ln --launch-skip 60 -c 5 /tmp/loom_run artifacts/rowvar/layernorm_rows --mode device --reps 100 --warmup 3 2>&1 | grep -E "gpu__time_duration|dram__throughput" 
cat > /tmp/ind.py <<'PY'
import sys, torch
sys.path.insert(0, "bench/gpu")
from workloads import WORKLOADS
factory, shapes, _, _ = WORKLOADS["layernorm_rows"]
m = torch.compile(factory().cuda().eval())
ins = [torch.rand(s, device="cuda") for s in shapes.values()]
flush = torch.empty(256 << 20, dtype=torch.int8, device="cuda")
with torch.no_grad():
    for _ in range(100):
        flush.zero_()
        m(*ins)
    torch.cuda.synchronize()
PY
ncu $M -k regex:'triton|fused' --launch-skip 60 -c 5 python3 /tmp/ind.py 2>&1 | grep -E "gpu__time_duration|dram__throughput"
