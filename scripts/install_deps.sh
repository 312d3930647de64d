#!/usr/bin/env bash
# Installs every Debian package Loom needs. Idempotent: when all are present it only checks (fast).
set -euo pipefail
PKGS=(
  cmake g++ make ninja-build pkg-config
  libhalide14-0-dev                      # Halide 14 + autoscheduler plugins
  llvm-14-dev                            # the LLVM libHalide14 links (codegen/streaming_stores)
  libonnx-dev libprotobuf-dev protobuf-compiler
  libgtest-dev googletest libcli11-dev libomp-dev
  python3 python3-numpy python3-onnx python3-torch python3-torchvision python3-matplotlib
  graphviz libssl-dev
  procps                                 # /bin/kill -s KILL -- -PGID in the killed-compile test
  clang libclang-rt-14-dev               # libFuzzer + sanitizer runtimes (scripts/fuzz)
)
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install_deps: all ${#PKGS[@]} packages present"
  exit 0
fi
echo "install_deps: installing ${missing[*]}"
SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
