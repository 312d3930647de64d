#!/bin/sh
# Regenerates bench/DYNAMIC_SHAPES.md's tables: the real-model detector and recognizer (exported with
# dynamic axes), the transformer fixture over sequence lengths and the MLP over batch sizes, each one
# shape-generic compile checked at every size, then timed size by size against a compile specialized
# to that size and ONNX Runtime (bench/dynamic_shapes.py). Usage: bench/dynamic_shapes_all.sh [LOOM] [OUT]
set -e
LOOM=${1:-build/loom}
OUT=${2:-bench/out/dynamic/tables.md}
mkdir -p "$(dirname "$OUT")"
: > "$OUT"
frontends/torch/export_real_models.py --dynamic
run() { bench/dynamic_shapes.py "$LOOM" "$@" --ort --budget-ms "${BUDGET_MS:-1000}" --out "$OUT"; }
run tests/data/dynamic_mlp.onnx --plan x=16x64 x=1x64 x=2x64 x=7x64 x=16x64 x=33x64 x=64x64
run tests/data/dynamic_transformer.onnx --plan x=2x64x64 x=2x3x64 x=2x17x64 x=2x64x64 x=1x100x64 x=2x128x64
run bench/real_models/text_recognizer.dynamic.onnx --plan x=1x3x48x320 --dim width=32..1024 --separate --repeats 10 \
    x=1x3x48x64 x=1x3x48x160 x=1x3x48x320 x=1x3x48x480 x=1x3x48x640
run bench/real_models/text_detector.dynamic.onnx --plan x=1x3x640x640 --separate --repeats 10 \
    x=1x3x32x32 x=1x3x320x320 x=1x3x480x640 x=1x3x640x640 x=1x3x1280x1280
