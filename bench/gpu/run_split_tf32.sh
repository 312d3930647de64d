#!/bin/bash
# gpu15's H200 call for D200 (3xTF32 FP32 GEMMs), in a folder laid out as pack_serving.sh does
# (gpu/, models/, run_serving_groups.sh) plus lin.tar.xz (gemm_bench.py artifacts: lin/split,
# lin/ffma, lin/bf16) and nets.tar.xz (net/<row>__fp32 built with --split-tf32, base/<row>__fp32
# the same export without it). Usage: OUT=DIR WARM_S=200 run_split_tf32.sh ROW...
set -o pipefail
cd "$(dirname "$0")"
export PYTHONUNBUFFERED=1
out=${OUT:-/tmp/split_tf32}
mkdir -p "$out" lin
[ -f lin.tar.xz ] && tar -xJf lin.tar.xz -C lin
[ -f nets.tar.xz ] && tar -xJf nets.tar.xz
for d in split ffma bf16; do
  [ -d "lin/$d" ] && timeout 150 python3 gpu/gemm_bench.py --artifacts "lin/$d" --kernels 2>&1 | grep -v Warn | tee "$out/gemm_$d.txt"
done
rows=$(printf 'net/%s ' "$@")
OUT=$out/serving WARM_JOBS=${WARM_JOBS:-2} bash run_serving_groups.sh \
  "$rows|--fallback-gemm-backends ATEN --baseline-root base --profile fp32 --top 14"
