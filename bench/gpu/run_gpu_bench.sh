#!/bin/bash
# On the GPU machine: build tools/loom_run (no libHalide), check each CUDA fixture artifact (small,
# with loom's reference outputs: correctness + the shared-context check), then run the suite
# (gpu_bench.py) against PyTorch eager and torch.compile. Artifacts are built on a build machine:
#   bench/gpu/build_gpu_artifacts.sh        (writes artifacts/gpu and artifacts/gpufx)
# Usage: bench/gpu/run_gpu_bench.sh [artifacts/gpu] [artifacts/gpufx] [workload …]
set -o pipefail
cd "$(dirname "$0")/../.."
art=${1:-artifacts/gpu}; fx=${2:-artifacts/gpufx}; shift 2 2>/dev/null
out=${OUT:-/tmp}
runner=/tmp/loom_run
# cuDNN (the conv extern stages) ships only inside PyTorch's wheels on the GPU machines.
cudnn=$(python3 -c "import nvidia.cudnn, os; print(os.path.join(list(nvidia.cudnn.__path__)[0], 'lib'))" 2>/dev/null)
[ -n "$cudnn" ] && export LD_LIBRARY_PATH="$cudnn${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
tools/loom_run/build.sh $runner || exit 1
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
status=0
for d in "$fx"/*/; do
  [ -f "$d/manifest.txt" ] || continue
  $runner "$d" --reps 20 --warmup 3 || status=1
done
PYTHONUNBUFFERED=1 python3 bench/gpu/gpu_bench.py --artifacts "$art" --runner $runner --out "$out/gpu_bench.json" "$@" || status=1
if [ -n "$TF32" ]; then  # the __tf32 artifacts against PyTorch with TF32 allowed
  PYTHONUNBUFFERED=1 python3 bench/gpu/gpu_bench.py --tf32 --tol 5e-3 --artifacts "$art" --runner $runner \
    --out "$out/gpu_bench_tf32.json" "$@" || status=1
fi
exit $status
