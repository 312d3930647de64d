#!/usr/bin/env bash
# torch.compile max-autotune of the MLP's and the transformer block's training steps on the GPU
# machine, one model per process, against Loom's CUDA steps in the same call. From a folder holding
# what bench/train/prepare_gpu_bench.sh put there:
#  1. Loom's CUDA steps (gpu_step_driver.c: REPS steps x 5 trials after 20 warm-up) and PyTorch eager;
#  2. max-autotune of the two models at once, a process each, each under LIMIT_S; every process prints
#     its first step's time (the compilation) and its Python stacks every 60 s (where a compilation
#     that does not finish spends its time), waits after its warm-up until both are warm (or 30 s
#     before the limit), and times its trials alone (TIMING_LOCK). Logs: OUTDIR/torch.<model>.log.
# usage: run_gpu_autotune.sh DIR OUTDIR [LIMIT_S=300] [REPS=50]
set -u
D=$1; O=$2; LIMIT_S=${3:-300}; REPS=${4:-50}
cd "$D"; mkdir -p "$O"
# cuDNN comes with PyTorch's wheels on the GPU machines, not with the toolkit (as run_gpu_bench.sh).
cudnn=$(python3 -c "import nvidia.cudnn, os; print(os.path.join(list(nvidia.cudnn.__path__)[0], 'lib'))" 2>/dev/null)
[ -n "$cudnn" ] && export LD_LIBRARY_PATH="$cudnn${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; lscpu | grep -E "Model name|^CPU\(s\)"; date -u
  python3 -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__)'; } 2>&1 | tee "$O/summary.txt"
cc -O2 -o gpu_step_driver gpu_step_driver.c -ldl || exit 1
for m in mlp transformer; do
  ./gpu_step_driver cuda/${m}_step/lib${m}_step_train.so ${m}_step bins/$m.x.bin bins/$m.t.bin $REPS cuda 2>&1 |
    sed "s/^/loom $m cuda /" | tee -a "$O/summary.txt"
  timeout 60 python3 gpu_torch_step.py $m eager $REPS 2>&1 | grep -E "^torch" | tee -a "$O/summary.txt"
done
export TIMING_LOCK=$PWD/timing.lock READY_DIR=$PWD/ready READY_COUNT=2 STACK_DUMP_S=60
export READY_UNTIL=$(( $(date +%s) + LIMIT_S - 30 ))
rm -rf ready; mkdir ready
for m in mlp transformer; do
  ( timeout $LIMIT_S python3 gpu_torch_step.py $m max-autotune $REPS > "$O/torch.$m.log" 2>&1
    [ $? = 124 ] && echo "torch $m max-autotune: did not finish within ${LIMIT_S} s" >> "$O/torch.$m.log" ) &
done
wait
for m in mlp transformer; do grep -E "^torch|did not finish" "$O/torch.$m.log" | tee -a "$O/summary.txt"; done
date -u | tee -a "$O/summary.txt"
