#!/bin/bash
# Copies Debian 12's pure-Python Dask (dask, distributed 2022.12 and the packages they need that a
# PyTorch image usually lacks: tornado, tblib, zict, locket, partd, heapdict) into one folder, for
# a GPU host that has python3 and PyTorch but no Dask and no package index. There:
#   PYTHONPATH=$PWD/DIR python3 bench/sweep run bench/sweeps/gpu_suite.toml
# Seen working on a 2-GPU host with Python 3.12.3 that had psutil, msgpack, cloudpickle, toolz,
# sortedcontainers, yaml, click, jinja2, fsspec and packaging (bench/sweeps/SCALING.md). Without
# it, `bench/sweep run --no-dask` runs the same worker slots as threads.
# Usage: bench/sweeps/pack_dask.sh [DIR]    (default .sweepdeps; 8 MB)
set -e
cd "$(dirname "$0")/../.."
out=${1:-.sweepdeps}
src=/usr/lib/python3/dist-packages
[ -d $src/distributed ] || { echo "pack_dask: no $src/distributed: run scripts/install_deps.sh first" >&2; exit 1; }
rm -rf "$out" && mkdir -p "$out"
for p in dask distributed tornado tblib zict locket partd heapdict.py; do cp -rL "$src/$p" "$out/"; done
for p in dask distributed tornado tblib zict locket partd HeapDict; do cp -r "$src/$p"-*.egg-info "$out/"; done
find "$out" \( -name __pycache__ -o -name tests \) -type d -prune -exec rm -rf {} +
du -sh "$out"
