#!/bin/bash
# On the GPU machine: whole networks at batch 1. Each Loom artifact under artifacts/net/<name>
# (built on a build machine: `loom compile bench/workloads/<name>.onnx --target cuda -o
# artifacts/net/<name>`, then drop lib*.a and *_halide.o to fit the carry) is checked against its
# saved float64 reference and timed by tools/loom_run, then PyTorch eager and torch.compile time
# the same torchvision architecture (bench/gpu/network_bench.py), then loom_run times Loom again
# (the host's state drifts over a call: the two Loom figures bracket PyTorch's). Loom runs as a
# CUDA graph (codegen/cuda_graph_glue.h); the second loom_run line of each network is without.
# Usage: bench/gpu/run_networks.sh [artifacts/net] [loom_run flags…]
set -o pipefail
cd "$(dirname "$0")/../.."
net=${1:-artifacts/net}; shift 2>/dev/null
runner=/tmp/loom_run
cudnn=$(python3 -c "import nvidia.cudnn, os; print(os.path.join(list(nvidia.cudnn.__path__)[0], 'lib'))" 2>/dev/null)
[ -n "$cudnn" ] && export LD_LIBRARY_PATH="$cudnn${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
tools/loom_run/build.sh $runner >/dev/null || exit 1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
names=$(for d in "$net"/*/; do [ -f "$d/manifest.txt" ] && basename "$d"; done)
status=0
for n in $names; do
  $runner "$net/$n" --mode device --reps 200 --warmup 20 "$@" || status=1
  $runner "$net/$n" --mode device --reps 200 --warmup 20 --no-graphs "$@" | grep -E "RESULT|host time" || status=1
done
PYTHONUNBUFFERED=1 python3 bench/gpu/network_bench.py $names || status=1
for n in $names; do $runner "$net/$n" --mode device --reps 200 --warmup 20 "$@" | grep RESULT || status=1; done
exit $status
