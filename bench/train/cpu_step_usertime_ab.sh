#!/bin/bash
# Two builds of the CPU training steps in alternating rounds on a loaded host (the 2-core EPYC),
# judged by the process's user CPU time (less sensitive to the other tenants than wall time):
# each variant folder of VARIANTS holds <model>_step/lib<model>_step_train.so (`loom compile --train`);
# ROUNDS rounds, each running every variant once per model and thread count, in turns.
# usage: VARIANTS="base new" MODELS="mlp cnn" ROUNDS=4 REPS=400 bash cpu_step_usertime_ab.sh DIR
cd "$(dirname "$0")"; D=${1:-.}
cc -O2 -o "$D/driver" train_step_driver.c -ldl || exit 1
args_of() { case $1 in mlp) echo "cross_entropy $2 16384 640 64 10";; transformer) echo "mse $2 65536 65536 8 64";; cnn) echo "mse $2 24576 80 8 10";; esac; }
cores_of() { [ $1 = 1 ] && echo 1 || echo 0,1; }
lscpu | grep -E "Model name"; date -u; cat /proc/loadavg
for round in $(seq ${ROUNDS:-4}); do for th in 1 2; do for m in ${MODELS:-mlp cnn}; do for v in ${VARIANTS:-base new}; do
  out=$(/usr/bin/time -f "user_s %U sys_s %S" -o "$D/time.txt" env HL_NUM_THREADS=$th taskset -c $(cores_of $th) "$D/driver" \
      "$D/$v/${m}_step/lib${m}_step_train.so" ${m}_step $(args_of $m ${REPS:-400}) 2>/dev/null)
  echo "round $round $v $m threads $th $out $(cat "$D/time.txt")"
done; done; done; done
date -u; cat /proc/loadavg
