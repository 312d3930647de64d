#!/bin/sh
# Standalone build of loom_run (no CMake, no libHalide): on the GPU machine, or anywhere with g++.
#   tools/loom_run/build.sh [out]      CUDA build when nvcc/cuda_runtime.h is found, else host-only.
set -e
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-$here/loom_run}
cuda=${CUDA_HOME:-/usr/local/cuda}
if [ -f "$cuda/include/cuda_runtime.h" ]; then
  g++ -std=c++17 -O2 -DLOOM_RUN_CUDA -I"$here/../../src" -I"$cuda/include" "$here/loom_run.cpp" -o "$out" \
      -L"$cuda/lib64" -Wl,-rpath,"$cuda/lib64" -lcudart -ldl
else
  g++ -std=c++17 -O2 -I"$here/../../src" "$here/loom_run.cpp" -o "$out" -ldl
fi
echo "$out"
