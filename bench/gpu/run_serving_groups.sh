#!/bin/bash
# On the GPU machine, in a folder laid out by bench/gpu/pack_serving.sh: the serving rows in groups,
# each group one bench/gpu/serving_bench.py process with its own flags (conv/GEMM backends differ
# between the conv networks and the transformers). The torch.compile warm-ups of every group run at
# once first (--compile-only, at most WARM_S seconds, WARM_JOBS processes a group), so that each
# timing process compiles from inductor's cache; then the groups are timed one after another.
# Archives: net/*.tar.xz (one artifact folder each, unpacked into net/) and *.multi.tar.xz (several
# folders under net/ and base/, unpacked here: artifacts of the same weights compress together).
# Usage: run_serving_groups.sh "ROWS|FLAGS" ...   ROWS: artifact folders (net/<name>), FLAGS:
#   serving_bench.py flags of that group. OUT (default /tmp/serving) gets the logs and JSON.
set -o pipefail
cd "$(dirname "$0")"
out=${OUT:-/tmp/serving}
mkdir -p "$out" net
cudnn=$(python3 -c "import nvidia.cudnn, os; print(os.path.join(list(nvidia.cudnn.__path__)[0], 'lib'))" 2>/dev/null)
[ -n "$cudnn" ] && export LD_LIBRARY_PATH="$cudnn${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
for t in net/*.tar.xz; do [ -f "$t" ] && tar -xJf "$t" -C net & done
for t in *.multi.tar.xz; do [ -f "$t" ] && tar -xJf "$t" & done
status=0
if [ "${WARM_S:-0}" -gt 0 ]; then
  echo "== warm-up: $# groups, ${WARM_JOBS:-4} processes each, at most $WARM_S s ($(date -u +%T))"
  i=0
  for g in "$@"; do
    i=$((i + 1))
    rows=${g%%|*} flags=${g#*|}
    # shellcheck disable=SC2086
    printf '%s\n' $rows | PYTHONUNBUFFERED=1 timeout -k 5 "$WARM_S" xargs -P "${WARM_JOBS:-4}" -I{} \
      sh -c 'TORCHINDUCTOR_COMPILE_THREADS=4 python3 gpu/serving_bench.py "$@" 2>&1 | grep -E "^WARM|Error|error" | tail -3' _ {} \
      --models models --compile-only --warm-dir "$out/warm" $flags > "$out/warm$i.log" 2>&1 &
  done
  wait
  cat "$out"/warm*.log
  echo "== warm-up ended $(date -u +%T): $(ls "$out/warm" 2>/dev/null | wc -l) compiles marked"
fi
wait
i=0
for g in "$@"; do
  i=$((i + 1))
  rows=${g%%|*} flags=${g#*|}
  warm_flag=()
  [ "${WARM_S:-0}" -gt 0 ] && warm_flag=(--warm-dir "$out/warm")
  # shellcheck disable=SC2086
  PYTHONUNBUFFERED=1 python3 gpu/serving_bench.py $rows --models models --out "$out/serving_g$i.json" \
    "${warm_flag[@]}" $flags 2>&1 | tee "$out/serving_g$i.log" || status=1
done
exit $status
