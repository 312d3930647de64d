#!/usr/bin/env bash
# Lesson 1: import a model, list its Funcs, run it on the reference interpreter.
source "$(dirname "$0")/common.sh"

show loom inspect $DATA/sincos.onnx | tee inspect.txt
expect '^input  x: f32 4096' inspect.txt
expect '^/Sin +Sin +f32 +4096' inspect.txt
expect 'nodes 5' inspect.txt

show loom inspect $DATA/sincos.onnx --funcs | sed -n '/^Funcs/,$p' | tee funcs.txt
expect '^  sin\(i:4096\)  Sin' funcs.txt
expect '^  add\(i:4096\)  Add .*\[output\]' funcs.txt
expect 'reads pow, pow_1' funcs.txt

show loom run $DATA/sincos.onnx --reference | tee ref.txt
expect '^reference run of' ref.txt
expect 'y: 4096  min 1  mean 1  max 1' ref.txt

# a model with a symbolic batch needs its size
show loom inspect $DATA/dynamic_mlp.onnx --input batch=8 | head -3 | tee dyn.txt
expect 'input  x: f32 8x64' dyn.txt
echo "lesson 1 ok"
