#!/usr/bin/env bash
# The training-step benchmark on the GPU machine, from a folder holding what
# bench/train/prepare_gpu_bench.sh put there, in one call:
#  1. the CPU steps first, while the host is quiet: for the MLP, the transformer block and the CNN,
#     Loom's CPU artifacts (cpu/ and any cpu_*/, e.g. cpu_avx2/) against PyTorch eager on cores 0-1
#     at 1 and 2 threads, with the step's time and peak memory;
#  2. Loom's CUDA step (gpu_step_driver.c), its first update against the CPU artifact's
#     (compare_params.py, as before), and both artifacts' gradients against PyTorch's in float64
#     (first_step_f64.py on a step whose learning rate LOOM_DUMP_LR makes the update outweigh the
#     parameter, so float32's rounding of the parameters does not hide the gradient);
#  3. PyTorch eager on the GPU, then torch.compile default and max-autotune of the three models
#     compiled at once (their trials timed one at a time under a lock), each under a time limit.
# usage: [AUTOTUNE_S=100] [DEFAULT_S=150] [CPU_THREADS="1 2"] run_gpu_bench.sh DIR OUT_FILE [REPS]
set -u
D=$1; OUT=$2; REPS=${3:-50}
AUTOTUNE_S=${AUTOTUNE_S:-100}; DEFAULT_S=${DEFAULT_S:-150}
cd "$D"
# cuDNN comes with PyTorch's wheels on the GPU machines, not with the toolkit.
cudnn=$(python3 -c "import nvidia.cudnn, os; print(os.path.join(list(nvidia.cudnn.__path__)[0], 'lib'))" 2>/dev/null)
[ -n "$cudnn" ] && export LD_LIBRARY_PATH="$cudnn${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
cc -O2 -o gpu_step_driver gpu_step_driver.c -ldl || exit 1
cc -O2 -o train_step_driver train_step_driver.c -ldl || exit 1
{
  echo "== machine"; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  lscpu | grep -E "Model name|^CPU\(s\)"; date -u; python3 -c 'import torch; print("torch", torch.__version__)'
  echo "transparent hugepages: $(cat /sys/kernel/mm/transparent_hugepage/enabled 2>/dev/null)"
} 2>&1 | tee "$OUT"
args_of() {
  case $1 in
    mlp) echo "cross_entropy 100 16384 640 64 10";;
    transformer) echo "mse 100 65536 65536 8 64";;
    cnn) echo "mse 100 24576 80 8 10";;
  esac
}
for th in ${CPU_THREADS:-1 2}; do
  for m in mlp transformer cnn; do
    echo "== $m cpu, cores 0-1" | tee -a "$OUT"
    for v in cpu cpu_*; do
      [ -f $v/${m}_step/lib${m}_step_train.so ] || continue
      HL_NUM_THREADS=$th taskset -c 0-1 ./train_step_driver $v/${m}_step/lib${m}_step_train.so ${m}_step $(args_of $m) 2>&1 |
        sed "s/^/loom $v $m threads $th /" | tee -a "$OUT"
    done
    taskset -c 0-1 python3 -c "$(python3 -c 'import run_train_bench as b; print(b.TORCH_WORKER)')" . . $m $th 100 2>&1 |
      tail -1 | sed "s/^/torch cpu $m threads $th /" | tee -a "$OUT"
  done
done
for m in mlp transformer cnn; do
  echo "== $m loom cuda" | tee -a "$OUT"
  lib="${m}_step/lib${m}_step_train.so"; bins="bins/$m.x.bin bins/$m.t.bin"
  LOOM_PARAM_DUMP=$m.cpu.params ./gpu_step_driver cpu/$lib ${m}_step $bins 1 cpu 2>&1 | sed 's/^/cpu  /' | tee -a "$OUT"
  LOOM_PARAM_DUMP=$m.cuda.params ./gpu_step_driver cuda/$lib ${m}_step $bins $REPS cuda 2>&1 | sed 's/^/cuda /' | tee -a "$OUT"
  python3 compare_params.py $m.cuda.params $m.cpu.params 1e-4 2>&1 | sed 's/^/cuda vs cpu, lr 0.01: /' | tee -a "$OUT"
  LOOM_DUMP_LR=1000 LOOM_PARAM_DUMP=$m.cpu.grad ./gpu_step_driver cpu/$lib ${m}_step $bins 1 cpu >/dev/null 2>&1
  LOOM_DUMP_LR=1000 LOOM_PARAM_DUMP=$m.cuda.grad ./gpu_step_driver cuda/$lib ${m}_step $bins 1 cuda >/dev/null 2>&1
  python3 first_step_f64.py $m 1000 $bins $m.cpu.grad $m.cuda.grad 2>&1 | sed 's/^/grad /' | tee -a "$OUT"
done
for m in mlp transformer cnn; do
  timeout 60 python3 gpu_torch_step.py $m eager $REPS 2>&1 | grep -E "^torch|Error|error" | tail -2 | tee -a "$OUT"
done
# torch.compile: the six compilations at once (CPU-bound), their trials one at a time (TIMING_LOCK).
export TIMING_LOCK=$PWD/timing.lock
for mode in default max-autotune; do
  for m in mlp transformer cnn; do
    lim=$DEFAULT_S; [ $mode = max-autotune ] && lim=$AUTOTUNE_S
    ( timeout $lim python3 gpu_torch_step.py $m $mode $REPS > torch.$m.$mode.log 2>&1
      [ $? = 124 ] && echo "torch $m $mode: did not finish within ${lim} s" >> torch.$m.$mode.log ) &
  done
done
wait
for mode in default max-autotune; do
  for m in mlp transformer cnn; do
    grep -E "^torch|Error|error" torch.$m.$mode.log | tail -2 | tee -a "$OUT"
  done
done
