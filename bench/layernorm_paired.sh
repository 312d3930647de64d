#!/bin/bash
# Paired CPU timing of layernorm_rows (bench/layernorm_paired.cpp): Loom's eager and auto schedules
# and any schedule files given, each compiled as a host artifact, timed call by call in one process
# against hand-written AVX-512 references (copy, LayerNorm, streaming-store LayerNorm).
# Usage: [MODEL=softmax_rows] [COPIES=4] bench/layernorm_paired.sh [path/to/loom] [schedule.sched …]
# (needs an AVX-512 CPU)
set -e
cd "$(dirname "$0")/.."
loom=${1:-build/loom}; shift || true
out=${OUT:-/tmp/layernorm_paired}
rm -rf "$out" && mkdir -p "$out"
model=bench/workloads/${MODEL:-layernorm_rows}.onnx  # MODEL=softmax_rows: the same shape
[ -f $model ] || { echo "missing $model: run bench/run_suite once (it exports the workloads)"; exit 2; }
# Each schedule from ${COPIES:-4} copies of its artifact (see layernorm_paired.cpp), interleaved.
copies=${COPIES:-4}
names=()
for s in eager auto "$@"; do
  name=$(basename "$s" .sched); name=${name%.cpu}
  flag=(--schedule "$s"); [ "$s" = auto ] || [ "$s" = eager ] && flag=(--$s)
  $loom compile $model --target host "${flag[@]}" --no-reference -o "$out/$name" >/dev/null 2>&1
  for c in $(seq 1 $copies); do cp -r "$out/$name" "$out/$name.$c"; done
  names+=("$name")
done
# Copy c lists the schedules rotated by c places: the load order moves a schedule's time by 2-3%
# (later-loaded artifacts ran faster, thirteenth session), so each schedule takes every place once.
dirs=()
for c in $(seq 1 $copies); do
  for k in $(seq 0 $((${#names[@]} - 1))); do dirs+=("$out/${names[$(( (k + c) % ${#names[@]} ))]}.$c"); done
done
g++ -O3 -march=native -fopenmp bench/layernorm_paired.cpp -o "$out/layernorm_paired" -ldl
OMP_NUM_THREADS=${OMP_NUM_THREADS:-$(nproc)} "$out/layernorm_paired" "${dirs[@]}"
