#!/usr/bin/env bash
# The GPU training-step benchmark, run on the GPU machine from a folder holding what
# bench/train/prepare_gpu_bench.sh put there: for the MLP, the transformer block and the CNN, Loom's
# CUDA step (gpu_step_driver.c; first its one-step check against the CPU artifact: the relative
# difference of every parameter's update, compare_params.py), the same with Halide's own GEMMs and
# convs when cuda_halide/ is there; then the CPU steps at 1 and 2 threads (cores 0-1) against
# PyTorch eager, on that quiet CPU; then PyTorch eager, torch.compile and torch.compile max-autotune
# on the GPU (gpu_torch_step.py, each under a time limit; MODES picks some).
# usage: [MODES="eager default"] [AUTOTUNE_S=110] [AUTOTUNE_MODELS=cnn] [CPU_THREADS="1 2"] run_gpu_bench.sh DIR OUT_FILE [REPS]
set -u
D=$1; OUT=$2; REPS=${3:-50}
# Seconds torch.compile max-autotune gets per model (its GEMM autotuning can run for minutes).
AUTOTUNE_S=${AUTOTUNE_S:-110}
cd "$D"
# cuDNN comes with PyTorch's wheels on the GPU machines, not with the toolkit.
cudnn=$(python3 -c "import nvidia.cudnn, os; print(os.path.join(list(nvidia.cudnn.__path__)[0], 'lib'))" 2>/dev/null)
[ -n "$cudnn" ] && export LD_LIBRARY_PATH="$cudnn${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
cc -O2 -o gpu_step_driver gpu_step_driver.c -ldl || exit 1
cc -O2 -o train_step_driver train_step_driver.c -ldl || exit 1
{
  echo "== machine"; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  lscpu | grep -E "Model name|^CPU\(s\)"; date -u; python3 -c 'import torch; print("torch", torch.__version__)'
} 2>&1 | tee "$OUT"
for m in mlp transformer cnn; do
  echo "== $m loom" | tee -a "$OUT"
  LOOM_PARAM_DUMP=$m.cpu.params ./gpu_step_driver cpu/${m}_step/lib${m}_step_train.so ${m}_step bins/$m.x.bin bins/$m.t.bin 20 cpu 2>&1 | sed 's/^/cpu  /' | tee -a "$OUT"
  LOOM_PARAM_DUMP=$m.cuda.params ./gpu_step_driver cuda/${m}_step/lib${m}_step_train.so ${m}_step bins/$m.x.bin bins/$m.t.bin $REPS cuda 2>&1 | sed 's/^/cuda /' | tee -a "$OUT"
  python3 compare_params.py $m.cuda.params $m.cpu.params 1e-4 2>&1 | sed 's/^/cuda vs cpu /' | tee -a "$OUT"
  # The same step with Halide's own GEMMs and convs (--no-cublas --no-cudnn; cuda_halide/, when present).
  if [ -d cuda_halide ]; then
    LOOM_PARAM_DUMP=$m.halide.params ./gpu_step_driver cuda_halide/${m}_step/lib${m}_step_train.so ${m}_step bins/$m.x.bin bins/$m.t.bin $REPS cuda 2>&1 | sed 's/^/cuda-halide /' | tee -a "$OUT"
    python3 compare_params.py $m.halide.params $m.cpu.params 1e-4 2>&1 | sed 's/^/cuda-halide vs cpu /' | tee -a "$OUT"
  fi
done
# CPU steps on cores 0-1 of that quiet host at 1 and 2 threads, Loom against PyTorch eager (CPU_THREADS
# overrides the thread counts; the pinned cores are 0..max-1).
for th in ${CPU_THREADS:-1 2}; do
  cores=0-$(( ${CPU_THREADS_MAX:-2} - 1 ))
  for m in mlp transformer cnn; do
    case $m in
      mlp) args="cross_entropy 100 16384 640 64 10";;
      transformer) args="mse 100 65536 65536 8 64";;
      cnn) args="mse 100 24576 80 8 10";;
    esac
    echo "== $m cpu, cores $cores" | tee -a "$OUT"
    HL_NUM_THREADS=$th taskset -c $cores ./train_step_driver cpu/${m}_step/lib${m}_step_train.so ${m}_step $args 2>&1 | sed "s/^/loom cpu $m threads $th /" | tee -a "$OUT"
    # An earlier build of the same step (cpu_before/, when present): the A/B of a schedule change.
    [ -d cpu_before ] && HL_NUM_THREADS=$th taskset -c $cores ./train_step_driver cpu_before/${m}_step/lib${m}_step_train.so ${m}_step $args 2>&1 | sed "s/^/loom-before cpu $m threads $th /" | tee -a "$OUT"
    taskset -c $cores python3 -c "$(python3 -c 'import run_train_bench as b; print(b.TORCH_WORKER)')" . . $m $th 100 2>&1 | tail -1 | sed "s/^/torch cpu $m threads $th /" | tee -a "$OUT"
  done
done
for mode in ${MODES:-eager default max-autotune}; do
  for m in mlp transformer cnn; do
    [ $mode = max-autotune ] && ! echo " ${AUTOTUNE_MODELS:-mlp transformer cnn} " | grep -q " $m " && continue
    lim=60; [ $mode = max-autotune ] && lim=$AUTOTUNE_S; [ $mode = default ] && lim=75
    timeout $lim python3 gpu_torch_step.py $m $mode $REPS 2>&1 | grep -E "^torch|Error|error" | tail -2 | tee -a "$OUT"
    [ ${PIPESTATUS[0]} = 124 ] && echo "torch $m $mode: did not finish within ${lim} s" | tee -a "$OUT"
  done
done
