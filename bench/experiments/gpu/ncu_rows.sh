#!/bin/bash
# On the GPU machine: Nsight Compute on row kernels, to see where their time goes. Loom's kernels of
# the named workloads (artifacts/gpu/<workload> with data/ from `gpu_bench.py --keep-data`), then
# Inductor's kernels for LayerNorm rows and sum_prologue (torch.compile, after a warm-up).
# Clocks left alone (--clock-control none, device/METHOD.md). Full reports in $OUT/ncu_*.txt.
# Usage: bench/experiments/gpu/ncu_rows.sh layernorm_rows softmax_rows   (KERNEL=<regex> to pick another kernel:
# the first `_kernel` of sum_prologue is a 16-block helper, not its row kernel)
set -e
cd "$(dirname "$0")/../../.."
runner=${RUNNER:-/tmp/loom_run}
out=${OUT:-/tmp}
sections="--section SpeedOfLight --section Occupancy --section WarpStateStats --section MemoryWorkloadAnalysis --section SchedulerStats --section LaunchStats"
stalls=""  # warp stall reasons, cycles per issued instruction
for r in barrier long_scoreboard short_scoreboard wait not_selected lg_throttle mio_throttle math_pipe_throttle drain membar selected; do
  stalls="$stalls${stalls:+,}smsp__average_warps_issue_stalled_${r}_per_issue_active.ratio"
done
sections="$sections --metrics $stalls"
for w in "$@"; do
  # The first launch of a kernel named after the workload's row kernel (KERNEL overrides the regex).
  ncu --clock-control none $sections -k regex:"${KERNEL:-_kernel}" -c 1 "$runner" "artifacts/gpu/$w" --mode device --reps 1 --warmup 0 \
    > "$out/ncu_loom_$w.txt" 2>&1 || { tail -20 "$out/ncu_loom_$w.txt"; exit 1; }
done
cat > /tmp/inductor_rows.py <<'PY'
import sys, torch
sys.path.insert(0, "bench/gpu")
from workloads import WORKLOADS
for name in sys.argv[1:]:
    factory, shapes, _, _ = WORKLOADS[name]
    m = torch.compile(factory().cuda().eval())
    ins = [torch.rand(s, device="cuda") for s in shapes.values()]
    with torch.no_grad():
        for _ in range(3):
            m(*ins)
        torch.cuda.synchronize()
        torch.cuda.nvtx.range_push("measured")
        m(*ins)
        torch.cuda.synchronize()
PY
ncu --clock-control none $sections -k regex:'triton|fused' --launch-skip 2 -c 1 python3 /tmp/inductor_rows.py layernorm_rows \
  > "$out/ncu_inductor_layernorm_rows.txt" 2>&1 || tail -20 "$out/ncu_inductor_layernorm_rows.txt"
for f in "$out"/ncu_*.txt; do
  echo "== $(basename "$f")"
  grep -E "^\s+(Duration|DRAM Throughput|Memory Throughput|L1/TEX Hit Rate|L2 Hit Rate|Achieved Occupancy|Theoretical Occupancy|Registers Per Thread|Block Size|Grid Size|Issue Slots Busy|No Eligible|Warp Cycles Per Issued Instruction|Avg. Active Threads Per Warp|Compute \(SM\) Throughput|Executed Ipc Active)" "$f" | head -20
  grep -E "issue_stalled" "$f" | sed 's/smsp__average_warps_issue_stalled_//; s/_per_issue_active.ratio//' | head -12
done
