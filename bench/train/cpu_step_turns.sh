#!/bin/bash
# Variants of the CPU training steps in turns with PyTorch eager, ROUNDS rounds, on a quiet host (the
# GPU machine's Xeon: 1 thread on CORES1, default core 2; 2 threads on CORES2, default 2,3), each run
# also timed by bash (process user CPU seconds). Each variant folder of VARIANTS holds
# <model>_step/lib<model>_step_train.so (`loom compile --train`); this script, train_step_driver.c,
# run_train_bench.py, models.py and export_fixtures.py beside them. TORCH=0 leaves PyTorch out. A
# variant DIR@openmp runs DIR's artifacts on OpenMP's team (LOOM_THREADING=openmp), at 2 threads only.
# usage: VARIANTS="base new new@openmp" MODELS="mlp cnn" ROUNDS=3 REPS=300 bash cpu_step_turns.sh
cd "$(dirname "$0")"
cc -O2 -o driver train_step_driver.c -ldl || exit 1
args_of() { case $1 in mlp) echo "cross_entropy $2 16384 640 64 10";; transformer) echo "mse $2 65536 65536 8 64";; cnn) echo "mse $2 24576 80 8 10";; esac; }
cores_of() { [ $1 = 1 ] && echo ${CORES1:-2} || echo ${CORES2:-2,3}; }
lscpu | grep -E "Model name"; date -u; cat /proc/loadavg
[ "${TORCH:-1}" = 1 ] && python3 -c 'import torch; print("torch", torch.__version__)' && W="$(python3 -c 'import run_train_bench as b; print(b.TORCH_WORKER)')"
for th in 1 2; do for m in ${MODELS:-mlp cnn}; do for round in $(seq ${ROUNDS:-3}); do
  cs=$(cores_of $th)
  for v in ${VARIANTS:-base new}; do
    d=${v%@*}; thr=halide; [ "$d" != "$v" ] && thr=${v#*@}
    [ $th = 1 ] && [ $thr != halide ] && continue
    out=$( { TIMEFORMAT="user_s %U"; time LOOM_THREADING=$thr HL_NUM_THREADS=$th taskset -c $cs ./driver \
        $d/${m}_step/lib${m}_step_train.so ${m}_step $(args_of $m ${REPS:-300}) 2>/dev/null; } 2>&1 | tr '\n' ' ')
    echo "round $round loom $v $m threads $th cores $cs $out"
  done
  [ "${TORCH:-1}" = 1 ] && echo "round $round torch $m threads $th cores $cs $(taskset -c $cs python3 -c "$W" . . $m $th ${REPS:-300} 2>&1 | tail -1)"
done; done; done
date -u
