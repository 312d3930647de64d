#!/bin/bash
# On the GPU machine, in a folder laid out by bench/gpu/pack_serving.sh: builds tools/loom_run,
# checks and times the precision fixtures (fx/<fixture>__<precision>, Loom's reference data), then
# unpacks the serving networks (net/*.tar.xz) and runs bench/gpu/serving_bench.py on them.
# Usage: run_serving.sh [serving_bench.py flags…]; OUT (default /tmp/serving) gets the logs and JSON.
set -o pipefail
cd "$(dirname "$0")"
out=${OUT:-/tmp/serving}
mkdir -p "$out"
cudnn=$(python3 -c "import nvidia.cudnn, os; print(os.path.join(list(nvidia.cudnn.__path__)[0], 'lib'))" 2>/dev/null)
[ -n "$cudnn" ] && export LD_LIBRARY_PATH="$cudnn${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
sh loom_run/build.sh /tmp/loom_run >/dev/null || exit 1
status=0
for d in fx/*/; do
  [ -f "$d/manifest.txt" ] || continue
  echo "== $(basename "$d")"
  /tmp/loom_run "$d" --mode device --reps 50 --warmup 5 2>&1 | grep -E "check|RESULT|loom_run" || status=1
done 2>&1 | tee "$out/fixtures.log"
grep -q FAIL "$out/fixtures.log" && status=1
nets=()
for t in ${NETS:-net/*.tar.xz}; do  # NETS: the archives in the order to run them
  [ -f "$t" ] || continue
  tar -xJf "$t" -C net && nets+=("net/$(basename "$t" .tar.xz)")
done
if [ ${#nets[@]} -gt 0 ]; then
  PYTHONUNBUFFERED=1 python3 gpu/serving_bench.py "${nets[@]}" --models models --out "$out/serving_bench.json" "$@" \
    2>&1 | tee "$out/serving.log" || status=1
fi
exit $status
