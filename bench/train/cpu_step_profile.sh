#!/bin/bash
# Where a CPU training step's time goes at 1 and 2 threads, on a quiet host (the GPU machine's Xeon):
# the step time of each variant folder's artifacts, in turns (two rounds), PyTorch eager in the
# first round, at 1 thread on core 0 and at 2 threads on each core pair of CORESETS (default 0-1;
# `lscpu -e` there shows every vCPU its own core, yet 0-1 shares one core's throughput, see
# RESULTS.md); THREADING="halide openmp" adds the OpenMP team (LOOM_THREADING=openmp: the
# artifact's _set_threading(1)); then Halide's per-Func profile of each profile folder (artifacts
# compiled with `--target <T>-profile`) at 1 and 2 threads into $OUT/prof_<variant>_<model>_<threads>.txt.
# Each variant folder holds <model>_step/lib<model>_step_train.so (`loom compile --train`);
# this script, train_step_driver.c, run_train_bench.py, models.py and export_fixtures.py beside them.
# usage: OUT=dir VARIANTS="base new" PROFILES="pbase" MODELS="mlp transformer" CORESETS="0-1 0,8" bash cpu_step_profile.sh
cd "$(dirname "$0")"; O=${OUT:-.}
cc -O2 -o driver train_step_driver.c -ldl || exit 1
lscpu | grep -E "Model name"; date -u; python3 -c 'import torch; print("torch", torch.__version__)'
args_of() { case $1 in mlp) echo "cross_entropy $2 16384 640 64 10";; transformer) echo "mse $2 65536 65536 8 64";; cnn) echo "mse $2 24576 80 8 10";; esac; }
W="$(python3 -c 'import run_train_bench as b; print(b.TORCH_WORKER)')"
sets() { [ $1 = 1 ] && echo 0 || echo ${CORESETS:-0-1}; }
for th in 1 2; do for m in ${MODELS:-mlp transformer}; do for cs in $(sets $th); do
  r=200; [ $m = transformer ] && r=100
  for round in 1 2; do
    for v in ${VARIANTS:-base}; do for thr in ${THREADING:-halide}; do
      [ $th = 1 ] && [ $thr = openmp ] && continue
      LOOM_THREADING=$thr HL_NUM_THREADS=$th taskset -c $cs ./driver $v/${m}_step/lib${m}_step_train.so ${m}_step $(args_of $m $r) 2>/dev/null | sed "s|^|loom $v $thr $m threads $th cores $cs |"
    done; done
    [ $round = 1 ] && taskset -c $cs python3 -c "$W" . . $m $th $r 2>&1 | tail -1 | sed "s/^/torch $m threads $th cores $cs /"
  done
done; done; done
for v in ${PROFILES:-}; do for m in ${MODELS:-mlp transformer}; do for th in 1 2; do
  HL_NUM_THREADS=$th taskset -c 0-1 ./driver $v/${m}_step/lib${m}_step_train.so ${m}_step $(args_of $m 200) > $O/prof_${v}_${m}_$th.txt 2>&1
done; done; done
date -u
