#!/usr/bin/env bash
# Gathers what bench/train/run_gpu_bench.sh needs into DIR: the CPU and CUDA training-step
# artifacts of the three models (bench/train/run_train_bench.py --compile-only, --target host and
# cuda: only the self-contained lib<model>_step_train.so of each), their seeded inputs and targets
# as raw files, the drivers' sources and the PyTorch side with the model classes.
# usage: prepare_gpu_bench.sh DIR [LOOM] [WORK]   (WORK: host/ and cuda/ already compiled there; any
#        WORK/host_X/ (the same steps for another CPU target) goes to DIR/cpu_X/, timed beside cpu/)
set -eu
DIR=$1; LOOM=${2:-build/loom}; WORK=${3:-}
HERE=$(cd "$(dirname "$0")" && pwd); ROOT=$(cd "$HERE/../.." && pwd)
if [ -z "$WORK" ]; then
  WORK=$(mktemp -d)
  for t in host cuda; do
    /usr/bin/python3 "$HERE/run_train_bench.py" --loom "$LOOM" --target $t --compile-only "$WORK/$t" >/dev/null
  done
fi
rm -rf "$DIR"; mkdir -p "$DIR/cpu" "$DIR/cuda" "$DIR/bins"
# WORK/cuda_halide (the CUDA steps compiled with --no-cublas --no-cudnn), when there: the A/B of the libraries.
[ -d "$WORK/cuda_halide" ] && mkdir -p "$DIR/cuda_halide" && for m in mlp transformer cnn; do
  mkdir -p "$DIR/cuda_halide/${m}_step"; cp "$WORK/cuda_halide/${m}_step/lib${m}_step_train.so" "$DIR/cuda_halide/${m}_step/"; done
for m in mlp transformer cnn; do
  for t in host cuda; do
    dst=$([ $t = host ] && echo cpu || echo cuda)
    mkdir -p "$DIR/$dst/${m}_step"
    cp "$WORK/$t/${m}_step/lib${m}_step_train.so" "$DIR/$dst/${m}_step/"
  done
  /usr/bin/python3 -c "import numpy as np, sys; np.load(sys.argv[1]).tofile(sys.argv[2]); np.load(sys.argv[3]).tofile(sys.argv[4])" \
    "$WORK/host/${m}_step/data/x.npy" "$DIR/bins/$m.x.bin" "$WORK/host/${m}_step/data/target.npy" "$DIR/bins/$m.t.bin"
done
for h in "$WORK"/host_*; do
  [ -d "$h" ] || continue
  v=cpu_${h##*/host_}
  for m in mlp transformer cnn; do mkdir -p "$DIR/$v/${m}_step"; cp "$h/${m}_step/lib${m}_step_train.so" "$DIR/$v/${m}_step/"; done
done
[ -f "$WORK/host/meta.json" ] && cp "$WORK/host/meta.json" "$DIR/cpu/"
cp "$HERE/gpu_step_driver.c" "$HERE/train_step_driver.c" "$HERE/compare_params.py" "$HERE/first_step_f64.py" "$HERE/gpu_torch_step.py" "$HERE/run_train_bench.py" \
   "$HERE/run_gpu_bench.sh" "$ROOT/frontends/torch/models.py" "$ROOT/frontends/torch/export_fixtures.py" "$DIR/"
du -sh "$DIR"
