#!/bin/bash
# The GPU sweep's wall time on one GPU worker against two (issue 32's target: two take <= 0.6x the
# time of one, with the same results within noise). Run on a host with two GPUs, after the sweep's
# artifacts were compiled (bench/sweep compile, on a build host; bench/out/sweep/artifacts and the
# model files copied here) or with loom built here. python3 must hold PyTorch (data = "torch").
# Without Dask here (a GPU host with only the driver, python3 and PyTorch) the same worker slots
# run as threads of bench/sweep (--no-dask); with python3-distributed, a LocalCluster.
#   bench/sweeps/gpu_scaling.sh [sweep.toml] [out dir] [bench/sweep run flags…]
# ORDER="1 2 1" (the default) runs it on 1, 2, then 1 GPU again (the host's drift shows).
set -o pipefail
cd "$(dirname "$0")/../.."
sweep=${1:-bench/sweeps/gpu_suite.toml}
out=${2:-${OUT:-/tmp}/gpu_scaling}
if [ $# -ge 2 ]; then shift 2; else shift $#; fi
py=${PYTHON:-python3}
mkdir -p "$out"
if [ -z "$SWEEP_FLAGS" ]; then
  if $py -c "import distributed" 2>/dev/null; then SWEEP_FLAGS=""; else SWEEP_FLAGS="--no-dask"; fi
fi
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader
echo "python: $($py -V 2>&1) ($(command -v $py)); flags: ${SWEEP_FLAGS:-(Dask LocalCluster)}"
runner=${LOOM_RUN:-/tmp/loom_run_sweep}
tools/loom_run/build.sh "$runner" >/dev/null || exit 1   # built before the clocks start
status=0
i=0
for n in ${ORDER:-1 2 1}; do
  i=$((i + 1))
  store="$out/run${i}_${n}gpu.jsonl"
  data=/tmp/gpu_scaling_data_run$i   # each run makes its own inputs: no run starts warm
  rm -rf "$store" "$data"
  t0=$(date +%s.%N)
  PYTHONUNBUFFERED=1 ${SWEEP_TIMEOUT:+timeout $SWEEP_TIMEOUT} $py bench/sweep run "$sweep" --store "$store" --gpus "$n" --loom-run "$runner" --data-cache "$data" \
    --python "$py" $SWEEP_FLAGS "$@" 2>&1 | tee "$out/run${i}_${n}gpu.log" | grep -E "^sweep|FAILED|failed " || true
  [ "${PIPESTATUS[0]}" = 0 ] || status=1
  t1=$(date +%s.%N)
  wall=$(awk "BEGIN { printf \"%.1f\", $t1 - $t0 }")
  echo "WALL run$i gpus=$n ${wall} s"
  echo "$i $n $wall" >> "$out/walls.txt"
  rm -rf "$data"
done
# results: each run against the first (same jobs, same machine kind)
first=$(ls "$out"/run1_*.jsonl)
for s in "$out"/run[2-9]_*.jsonl; do
  echo "== $(basename "$first") (A) vs $(basename "$s") (B)"
  $py bench/sweep compare "$first" "$s" | tail -n 40
done
$py bench/sweep merge --store "$first" --markdown "$out/merged.md" --json "$out/merged.json" --csv "$out/merged.csv"
exit $status
