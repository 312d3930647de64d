#!/bin/bash
# On a build machine (no GPU needed): export the suite to ONNX and compile every workload for CUDA
# into artifacts/gpu/<workload>[__<variant>] (no data: gpu_bench.py writes inputs and float64
# references there), and the small CUDA fixtures with Loom's reference data into artifacts/gpufx.
# Usage: bench/gpu/build_gpu_artifacts.sh [path/to/loom]
# MEMORY_ONLY=1: only the memory-bound workloads (no GEMMs, no eager variant), plus the row fixtures
# compiled with --auto as <fixture>__auto (checked against Loom's reference data).
set -e
cd "$(dirname "$0")/../.."
loom=${1:-build-cuda/loom}
/usr/bin/python3 bench/gpu/export_workloads.py --out artifacts/onnx >/dev/null 2>&1
mkdir -p artifacts/gpu artifacts/gpufx
fixtures="sigmoid_affine sum_prologue softmax_rows layernorm_rows mlp gelu_mlp cnn transformer"
small="combined split_stack conv_bn_relu"  # bench workloads at a small size, with Loom's reference data
if [ -n "$MEMORY_ONLY" ]; then
  rm -rf artifacts/gpu/* artifacts/gpufx/*
  fixtures="sigmoid_affine sum_prologue softmax_rows layernorm_rows"
  for m in softmax_rows layernorm_rows; do
    $loom compile tests/data/$m.onnx --target cuda --auto -o artifacts/gpufx/${m}__auto --force >/dev/null
  done
fi
for m in sincos sigmoid_affine sum_prologue softmax_rows layernorm_rows mse; do
  $loom compile artifacts/onnx/$m.onnx --target cuda --auto --no-reference -o artifacts/gpu/$m --force >/dev/null 2>&1
  if [ -f schedules/$m.cuda.sched ]; then
    $loom compile artifacts/onnx/$m.onnx --target cuda --schedule schedules/$m.cuda.sched --no-reference \
      -o artifacts/gpu/${m}__hand --force >/dev/null
  fi
done
if [ -z "$MEMORY_ONLY" ]; then
for m in linear_relu split_stack combined conv_bn_relu; do
  $loom compile artifacts/onnx/$m.onnx --target cuda --auto --no-reference -o artifacts/gpu/$m --force >/dev/null 2>&1 || echo "$m: compile failed"
done
# TF32 variants (cuBLAS/cuDNN tensor cores): compared against PyTorch with TF32 allowed (TF32=1 run_gpu_bench.sh)
for m in linear_relu conv_bn_relu; do
  $loom compile artifacts/onnx/$m.onnx --target cuda --auto --tf32 --no-reference -o artifacts/gpu/${m}__tf32 --force >/dev/null 2>&1 || echo "$m tf32: compile failed"
done
# the conv without cuDNN (Halide's register-tiled conv), for comparison
$loom compile artifacts/onnx/conv_bn_relu.onnx --target cuda --auto --no-cudnn --no-reference \
  -o artifacts/gpu/conv_bn_relu__halide --force >/dev/null 2>&1 || echo "conv halide: compile failed"
# GEMM without cuBLAS (the Halide register-tiled GEMM, 4x4 per thread), for comparison
$loom compile artifacts/onnx/linear_relu.onnx --target cuda --auto --no-cublas --no-reference \
  -o artifacts/gpu/linear_relu__halide --force >/dev/null 2>&1 || echo "linear_relu halide: compile failed"
$loom compile artifacts/onnx/sincos.onnx --target cuda --eager --no-reference -o artifacts/gpu/sincos__eager --force >/dev/null 2>&1
fi
for m in $fixtures; do
  $loom compile tests/data/$m.onnx --target cuda -o artifacts/gpufx/$m --force >/dev/null 2>&1 || echo "fixture $m: compile failed"
done
for m in $small; do
  $loom compile bench/workloads/$m.small.onnx --target cuda -o artifacts/gpufx/${m}_small --force >/dev/null 2>&1 || echo "small $m: compile failed"
done
rm -f artifacts/gpu/*/lib*.a artifacts/gpufx/*/lib*.a artifacts/gpu/*/*_halide.o artifacts/gpufx/*/*_halide.o  # the runner loads the .so; keep the carry small
du -sh artifacts/gpu artifacts/gpufx
