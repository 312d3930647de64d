#!/usr/bin/env bash
# The GPU training-step benchmark, run on the GPU machine from a folder holding what
# bench/train/prepare_gpu_bench.sh put there: for the MLP, the transformer block and the CNN, Loom's
# CUDA step (gpu_step_driver.c; first its one-step check against the CPU artifact), then PyTorch
# eager, torch.compile and torch.compile max-autotune (gpu_torch_step.py, each under a time limit).
# Then the CPU CNN step at 1 and 2 threads (cores 0-1) against PyTorch eager, on that quiet CPU.
# usage: run_gpu_bench.sh DIR OUT_FILE [REPS]
set -u
D=$1; OUT=$2; REPS=${3:-50}
cd "$D"
cc -O2 -o gpu_step_driver gpu_step_driver.c -ldl || exit 1
cc -O2 -o train_step_driver train_step_driver.c -ldl || exit 1
{
  echo "== machine"; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  lscpu | grep -E "Model name|^CPU\(s\)"; date -u; python3 -c 'import torch; print("torch", torch.__version__)'
} 2>&1 | tee "$OUT"
for m in mlp transformer cnn; do
  echo "== $m loom" | tee -a "$OUT"
  ./gpu_step_driver cpu/${m}_step/lib${m}_step_train.so ${m}_step bins/$m.x.bin bins/$m.t.bin 20 cpu 2>&1 | sed 's/^/cpu  /' | tee -a "$OUT"
  ./gpu_step_driver cuda/${m}_step/lib${m}_step_train.so ${m}_step bins/$m.x.bin bins/$m.t.bin $REPS cuda 2>&1 | sed 's/^/cuda /' | tee -a "$OUT"
done
echo "== cnn cpu, cores 0-1" | tee -a "$OUT"
meta=$(cat cpu/meta.json)
for th in 1 2; do
  HL_NUM_THREADS=$th taskset -c 0,1 ./train_step_driver cpu/cnn_step/libcnn_step_train.so cnn_step mse 100 24576 80 8 10 2>&1 | sed "s/^/loom cpu threads $th /" | tee -a "$OUT"
  # An earlier build of the same step (cpu_before/, when present): the A/B of a schedule change.
  [ -d cpu_before ] && HL_NUM_THREADS=$th taskset -c 0,1 ./train_step_driver cpu_before/cnn_step/libcnn_step_train.so cnn_step mse 100 24576 80 8 10 2>&1 | sed "s/^/loom-before cpu threads $th /" | tee -a "$OUT"
  taskset -c 0,1 python3 -c "$(python3 -c 'import run_train_bench as b; print(b.TORCH_WORKER)')" . . cnn $th 100 2>&1 | tail -1 | sed "s/^/torch cpu threads $th /" | tee -a "$OUT"
done
for mode in eager default max-autotune; do
  for m in mlp transformer cnn; do
    lim=60; [ $mode = max-autotune ] && lim=110; [ $mode = default ] && lim=75
    timeout $lim python3 gpu_torch_step.py $m $mode $REPS 2>&1 | grep -E "^torch|Error|error" | tail -2 | tee -a "$OUT"
    [ ${PIPESTATUS[0]} = 124 ] && echo "torch $m $mode: did not finish within ${lim} s" | tee -a "$OUT"
  done
done
