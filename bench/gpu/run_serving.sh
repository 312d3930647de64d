#!/bin/bash
# On the GPU machine, in a folder laid out by bench/gpu/pack_serving.sh: builds tools/loom_run,
# checks and times the precision fixtures (fx/<fixture>__<precision>, Loom's reference data), then
# unpacks the serving networks (net/*.tar.xz) and runs bench/gpu/serving_bench.py on them.
# Usage: run_serving.sh [serving_bench.py flags…]; OUT (default /tmp/serving) gets the logs and JSON.
#   NETS: the archives in the order to run them (default net/*.tar.xz).
#   WARM_S: first compile every row's torch.compile modes in WARM_JOBS (4) processes at once for at
#     most this many seconds (serving_bench.py --compile-only; WARM_ORDER: the row names in the
#     order to warm, default NETS's), so that the timing process compiles from inductor's cache.
set -o pipefail
cd "$(dirname "$0")"
out=${OUT:-/tmp/serving}
mkdir -p "$out"
cudnn=$(python3 -c "import nvidia.cudnn, os; print(os.path.join(list(nvidia.cudnn.__path__)[0], 'lib'))" 2>/dev/null)
[ -n "$cudnn" ] && export LD_LIBRARY_PATH="$cudnn${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
status=0
if ls fx/*/manifest.txt >/dev/null 2>&1; then
  sh loom_run/build.sh /tmp/loom_run >/dev/null || exit 1
  for d in fx/*/; do
    [ -f "$d/manifest.txt" ] || continue
    echo "== $(basename "$d")"
    /tmp/loom_run "$d" --mode device --reps 50 --warmup 5 2>&1 | grep -E "check|RESULT|loom_run" || status=1
  done 2>&1 | tee "$out/fixtures.log"
  grep -q FAIL "$out/fixtures.log" && status=1
fi
archives=()
for t in ${NETS:-net/*.tar.xz}; do
  [ -f "$t" ] && archives+=("$t")
done
nets=()
for t in "${archives[@]}"; do nets+=("net/$(basename "$t" .tar.xz)"); done
# Unpack beside the warm-up (which needs only the names): xz is single-threaded per archive.
for t in "${archives[@]}"; do tar -xJf "$t" -C net & done
if [ "${WARM_S:-0}" -gt 0 ] && [ ${#nets[@]} -gt 0 ]; then
  warm=()
  for n in ${WARM_ORDER:-${nets[@]}}; do warm+=("net/$(basename "$n")"); done
  echo "== warm-up: ${#warm[@]} rows, ${WARM_JOBS:-4} at once, at most $WARM_S s ($(date -u +%T))"
  printf '%s\n' "${warm[@]}" | PYTHONUNBUFFERED=1 timeout -k 5 "$WARM_S" xargs -P "${WARM_JOBS:-4}" -I{} \
    sh -c 'TORCHINDUCTOR_COMPILE_THREADS=4 python3 gpu/serving_bench.py "$@" 2>&1 | grep -E "^WARM|Error|error" | tail -3' _ {} \
    --models models --compile-only --warm-dir "$out/warm" "$@" 2>&1 | tee "$out/warm.log"
  echo "== warm-up ended $(date -u +%T): $(ls "$out/warm" 2>/dev/null | wc -l) compiles marked"
fi
wait
if [ ${#nets[@]} -gt 0 ]; then
  warm_flag=()
  [ "${WARM_S:-0}" -gt 0 ] && warm_flag=(--warm-dir "$out/warm")
  PYTHONUNBUFFERED=1 python3 gpu/serving_bench.py "${nets[@]}" --models models --out "$out/serving_bench.json" \
    "${warm_flag[@]}" "$@" 2>&1 | tee "$out/serving.log" || status=1
fi
exit $status
