#!/usr/bin/env bash
# Installs every Debian package Loom needs, and ONNX Runtime (the benchmark peer of `loom bench
# --ort`) from the npm registry into .deps/ort. Idempotent: when all are present it only checks (fast).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
ORT_VERSION=1.30.0
PKGS=(
  cmake g++ make ninja-build pkg-config
  libhalide14-0-dev                      # Halide 14 + autoscheduler plugins
  llvm-14-dev                            # the LLVM libHalide14 links (codegen/streaming_stores)
  libonnx-dev libprotobuf-dev protobuf-compiler
  libgtest-dev googletest libcli11-dev libomp-dev
  python3 python3-numpy python3-onnx python3-torch python3-torchvision python3-matplotlib
  graphviz libssl-dev
  libboost-dev                           # Boost Graph (header-only): max-flow of the recompute partition
  procps                                 # /bin/kill -s KILL -- -PGID in the killed-compile test
  clang libclang-rt-14-dev               # libFuzzer + sanitizer runtimes (scripts/fuzz)
  nodejs                                 # runs onnxruntime-node (bench/ort/ort_worker.js)
  python3-distributed python3-yaml       # bench/sweep: Dask scheduler/workers, YAML sweep files
)
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# Some Node.js builds bring npm with them; Debian's own nodejs needs its npm package.
command -v npm >/dev/null 2>&1 || missing+=(npm)
if [ ${#missing[@]} -eq 0 ]; then
  echo "install_deps: all ${#PKGS[@]} packages present"
else
  echo "install_deps: installing ${missing[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# onnxruntime-node ships its CPU library in the package: --ignore-scripts skips only its install
# script, which would download CUDA libraries.
ORT_PKG="$ROOT/.deps/ort/node_modules/onnxruntime-node/package.json"
if [ -f "$ORT_PKG" ] && grep -q "\"version\": \"$ORT_VERSION\"" "$ORT_PKG"; then
  echo "install_deps: onnxruntime-node $ORT_VERSION present in .deps/ort"
else
  echo "install_deps: installing onnxruntime-node $ORT_VERSION into .deps/ort (npm registry)"
  mkdir -p "$ROOT/.deps/ort"
  [ -f "$ROOT/.deps/ort/package.json" ] || echo '{"name": "loom-ort-peer", "private": true}' > "$ROOT/.deps/ort/package.json"
  npm install --prefix "$ROOT/.deps/ort" --ignore-scripts --save-exact --no-audit --no-fund --loglevel=error \
    "onnxruntime-node@$ORT_VERSION"
fi
