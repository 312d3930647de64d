#!/bin/bash
# Packs what bench/remote_cpu/run.sh needs on a machine without Halide, LLVM or the models' weights
# (a GPU host's CPU): the loom binary with the shared libraries it loads, and the real-model suite
# with its large float initializers stripped (their mean and std kept; run.sh redraws them there).
# Usage: bench/remote_cpu/pack.sh BUILD_DIR OUT_DIR   (OUT_DIR about 40 MB; zstd compresses it)
set -euo pipefail
build=$1; out=$2; here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out/libs" "$out/zl" "$out/models"
cp "$build/loom" "$out/libs/"
for l in $(ldd "$build/loom" | awk '{print $3}' | grep -v -E 'libc\.so|libm\.so|libgcc_s|^$'); do cp -L "$l" "$out/libs/"; done
# libLLVM links Z3 (its static analyzer) and libxml2 (Windows manifests), which a JIT never calls:
# stubs that only define the symbols it binds replace them and the 60 MB of ICU behind libxml2.
tmp=$(mktemp -d)
llvm=$(ls "$out"/libs/libLLVM*.so* | head -1)
nm -D --undefined-only "$llvm" | awk '{print $2}' | grep -E '^(xml|Z3_)' > "$tmp/undef"
grep '^Z3_' "$tmp/undef" | sed 's/@.*//' | sort -u | sed 's/.*/char &[16];/' > "$tmp/z3.c"
grep '^xml' "$tmp/undef" | sed 's/@.*//' | sort -u | sed 's/.*/char &[16];/' > "$tmp/xml.c"
python3 - "$tmp" <<'PY'
import collections, sys
d = sys.argv[1]; vers = collections.defaultdict(list)
for l in open(f"{d}/undef"):
    name, _, ver = l.strip().partition("@")
    if name.startswith("xml"): vers[ver.lstrip("@")].append(name)
open(f"{d}/xml.map", "w").write("".join(f"{v} {{ global: {'; '.join(sorted(set(n)))}; }};\n" for v, n in vers.items() if v))
PY
gcc -shared -fPIC -o "$out/libs/libz3.so.4" "$tmp/z3.c" -Wl,-soname,libz3.so.4
gcc -shared -fPIC -o "$out/libs/libxml2.so.2" "$tmp/xml.c" -Wl,-soname,libxml2.so.2 -Wl,--version-script="$tmp/xml.map"
rm -f "$out"/libs/libicu*
rm -rf "$tmp"
(cd "$out" && tar cf - libs | zstd -q -19 -T0 --long=27 -f -o libs.tar.zst) && rm -rf "$out/libs"
cp "$(command -v zstd)" "$out/zl/"
for l in $(ldd "$(command -v zstd)" | awk '/liblz4|libzstd/{print $3}'); do cp -L "$l" "$out/zl/"; done
for m in "$here"/../real_models/*.onnx; do /usr/bin/python3 "$here/strip_weights.py" "$m" "$out/models/$(basename "$m")"; done
cp "$here"/regen_weights.py "$here"/ort_time.py "$here"/ort_node_profile.py "$here"/run.sh "$out/"
echo "packed into $out: $(du -sh "$out" | cut -f1)"
