#!/bin/bash
# On the build machine: compiles the precision fixtures and the serving networks for CUDA and lays
# out DEST for bench/gpu/run_serving.sh on the GPU machine (networks as .tar.xz: sign weights
# compress to ~1.5 bits each; frontends/torch/serving_models.py).
# Usage: pack_serving.sh LOOM DEST MODELS_DIR [name_b<batch>__<precision> …]
#   MODELS_DIR holds serving_models.py's exports (<name>_b<batch>.onnx, .fingerprint).
set -e
loom=$1 dest=$2 models=$3
shift 3
root=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$dest/fx" "$dest/net" "$dest/gpu" "$dest/models" "$dest/loom_run"
cp "$root/tools/loom_run/build.sh" "$root/tools/loom_run/loom_run.cpp" "$dest/loom_run/"
cp "$root/bench/gpu/serving_bench.py" "$root/bench/gpu/in_process.py" "$dest/gpu/"
cp "$root/bench/gpu/run_serving.sh" "$dest/"
cp "$root/frontends/torch/serving_models.py" "$dest/models/"
if [ -n "$FIXTURES" ]; then
  for m in $FIXTURES; do
    for p in fp32 tf32 bf16 fp16; do
      $loom compile "$root/tests/data/$m.onnx" --target cuda --precision $p -o "$dest/fx/${m}__$p" --force >/dev/null
    done
  done
  rm -f "$dest"/fx/*/lib*.a "$dest"/fx/*/*_halide.o
fi
for spec in "$@"; do
  base=${spec%__*} p=${spec##*__}
  cp "$models/$base.fingerprint" "$dest/models/"
  tmp=$(mktemp -d)
  $loom compile "$models/$base.onnx" --target cuda --precision $p --no-reference -o "$tmp/$spec" --force >/dev/null
  rm -f "$tmp/$spec"/lib*.a "$tmp/$spec"/*_halide.o
  tar -cf - -C "$tmp" "$spec" | xz -T2 -3 > "$dest/net/$spec.tar.xz"
  rm -rf "$tmp"
  echo "$spec: $(du -h "$dest/net/$spec.tar.xz" | cut -f1)"
done
du -sh "$dest"
