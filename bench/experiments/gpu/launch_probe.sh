#!/bin/bash
# On the GPU machine: build bench/experiments/gpu/launch_probe.cu two ways and run bench/experiments/gpu/launch_probe.py
# against artifacts/gpu/layernorm_rows (bench/gpu/build_gpu_artifacts.sh). Writes $OUT/launch_probe.json.
cd "$(dirname "$0")/../../.."
h=artifacts/launch_probe
mkdir -p $h
nvcc -O2 -shared -Xcompiler -fPIC -arch=sm_90 bench/experiments/gpu/launch_probe.cu -o $h/probe_sm90.so || exit 1
nvcc -O2 -shared -Xcompiler -fPIC -gencode arch=compute_80,code=compute_80 bench/experiments/gpu/launch_probe.cu \
  -o $h/probe_ptx80.so || exit 1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
PYTHONUNBUFFERED=1 python3 bench/experiments/gpu/launch_probe.py
