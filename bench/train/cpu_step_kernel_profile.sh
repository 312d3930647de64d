#!/bin/bash
# Per-kernel time of Loom's CPU training step against PyTorch eager's per-op profile, 1 thread on
# core 2, in turns (Loom, torch, Loom, torch): Halide's profile of the p<PREFIX>_<model>_step library
# (`loom compile --train --target <T>-profile`) summed by the plan's kernels (profile_by_kernel.py
# with <PREFIX>_<model>.report, `loom compile --train --report`), and torch_step_profile.py.
# Writes $OUT/prof_<model>_<i>.txt, torch_<model>_<i>.txt, bykernel_<model>_<i>.txt.
# usage: OUT=dir [MODELS="transformer mlp"] [LIB_PREFIX=o] bash cpu_step_kernel_profile.sh
cd "$(dirname "$0")"; O=${OUT:-.}; P=${LIB_PREFIX:-o}
[ -x driver ] || cc -O2 -o driver train_step_driver.c -ldl || exit 1
args_of() { case $1 in mlp) echo "cross_entropy $2 16384 640 64 10";; transformer) echo "mse $2 65536 65536 8 64";; cnn) echo "mse $2 24576 80 8 10";; esac; }
for m in ${MODELS:-transformer mlp}; do
  r=300; [ $m = transformer ] && r=200
  for i in 1 2; do
    HL_NUM_THREADS=1 taskset -c 2 ./driver p${P}_${m}_step/lib${m}_step_train.so ${m}_step $(args_of $m $r) > $O/prof_${m}_$i.txt 2>&1
    python3 profile_by_kernel.py ${P}_${m}.report $O/prof_${m}_$i.txt $O/prof_${m}_$i.txt > $O/bykernel_${m}_$i.txt
    taskset -c 2 python3 torch_step_profile.py $m 1 50 > $O/torch_${m}_$i.txt 2>&1
  done
done
