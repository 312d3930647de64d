#!/bin/bash
# Who costs whom when Loom's step and PyTorch eager's run in ONE process at 2 threads on the same two
# cores (step_turns_one_process.py, cores 2,3): one knob at a time. torch's OpenMP is GNU libgomp
# (the pip wheel's), whose idle workers spin GOMP_SPINCOUNT (300000 pauses by default) before they
# sleep; OMP_WAIT_POLICY=PASSIVE makes them sleep at once. Halide's pool puts an idle worker to
# sleep after a few yields (no knob). Configurations, each its own process:
#   both      Loom and torch in turns, defaults
#   both_p    Loom and torch in turns, OMP_WAIT_POLICY=PASSIVE
#   loom      Loom alone (--no-torch)
#   torch     torch alone, defaults
#   torch_p   torch alone, OMP_WAIT_POLICY=PASSIVE
# Each variant folder (LIB_DIR, default o) holds <model>_step/lib<model>_step_train.so.
# usage: [MODELS="mlp transformer cnn"] [ROUNDS=4] [LIB_PREFIX=o] bash cpu_step_wait_policy.sh
cd "$(dirname "$0")"
R=${ROUNDS:-4}; P=${LIB_PREFIX:-o}
for m in ${MODELS:-mlp transformer cnn}; do
  s=300; [ $m = transformer ] && s=200
  lib="$P=${P}_${m}_step/lib${m}_step_train.so"
  for c in both both_p loom torch torch_p; do
    case $c in both) e=""; a="$lib";; both_p) e="OMP_WAIT_POLICY=PASSIVE"; a="$lib";; loom) e=""; a="$lib --no-torch";;
      torch) e=""; a="";; torch_p) e="OMP_WAIT_POLICY=PASSIVE"; a="";; esac
    echo "== $m $c ${e:-defaults}"
    env $e taskset -c 2,3 python3 step_turns_one_process.py $m 2 $R $s $a 2>&1 | grep -v "^$m threads"
  done
done
