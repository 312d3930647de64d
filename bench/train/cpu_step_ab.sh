#!/bin/bash
# Two builds of the CPU training steps side by side with PyTorch eager on a quiet host (the H200
# machine's Xeon), cores 0-1, at 1 and 2 threads: base512/ and new512/ (AVX-512 artifacts, timed
# before and after torch), new2/ (AVX2); the CNN's prev512/ and new512/; then glibc's bytes in use
# over 20 transformer steps of each variant present (base2, new2, base512, new512, sched512on2).
# Each variant folder holds <model>_step/lib<model>_step_train.so (`loom compile --train`, see
# RESULTS.md); this script, train_step_driver.c, run_train_bench.py, models.py and export_fixtures.py
# beside them. usage: OUT=dir bash cpu_step_ab.sh
cd "$(dirname "$0")"; O=${OUT:-.}
cc -O2 -o driver train_step_driver.c -ldl || exit 1
lscpu | grep -E "Model name"; date -u; python3 -c 'import torch; print("torch", torch.__version__)'
args_of() { case $1 in mlp) echo "cross_entropy $2 16384 640 64 10";; transformer) echo "mse $2 65536 65536 8 64";; cnn) echo "mse $2 24576 80 8 10";; esac; }
W="$(python3 -c 'import run_train_bench as b; print(b.TORCH_WORKER)')"
for round in 1; do for th in 1 2; do for m in mlp transformer; do
  r=200; [ $m = transformer ] && r=100
  for v in base512 new512 new2; do
    HL_NUM_THREADS=$th taskset -c 0-1 ./driver $v/${m}_step/lib${m}_step_train.so ${m}_step $(args_of $m $r) | sed "s/^/loom $v $m threads $th /"
  done
  taskset -c 0-1 python3 -c "$W" . . $m $th $r 2>&1 | tail -1 | sed "s/^/torch $m threads $th /"
  for v in new512 base512; do
    HL_NUM_THREADS=$th taskset -c 0-1 ./driver $v/${m}_step/lib${m}_step_train.so ${m}_step $(args_of $m $r) | sed "s/^/loom $v $m threads $th (again) /"
  done
done; done; done
for th in 1 2; do
  for v in prev512 new512; do HL_NUM_THREADS=$th taskset -c 0-1 ./driver $v/cnn_step/libcnn_step_train.so cnn_step $(args_of cnn 200) | sed "s/^/loom $v cnn threads $th /"; done
  taskset -c 0-1 python3 -c "$W" . . cnn $th 200 2>&1 | tail -1 | sed "s/^/torch cnn threads $th /"
done
for v in base2 new2 base512 new512 sched512on2; do
  [ -f $v/transformer_step/libtransformer_step_train.so ] || continue
  HL_NUM_THREADS=1 taskset -c 0-1 ./driver $v/transformer_step/libtransformer_step_train.so transformer_step $(args_of transformer 20) 2>&1 | tr '\n' ' ' | sed "s/^/mem $v /"; echo
done
date -u
