#!/bin/bash
# On the remote machine, from the folder pack.sh wrote: Loom (JIT, --auto) and ONNX Runtime (its
# Python package, CPU, all graph optimizations) at equal thread counts on the real-model suite,
# weights redrawn from the stripped tensors' mean and std (regen_weights.py).
# Usage: run.sh "MODELS" "THREADS" [BUDGET_MS]   e.g. run.sh "mobilenet_v3_small resnet18" "1 2 16"
# Writes loom.jsonl and ort.jsonl under $OUT (default /tmp/remote_cpu_out), one line per run.
C=$(cd "$(dirname "$0")" && pwd)
models=$1; threads=$2; budget=${3:-1000}; OUT=${OUT:-/tmp/remote_cpu_out}
lscpu | grep -E "Model name|^CPU\(s\)|Thread\(s\)"; grep -o -w -E "avx512f|avx2" /proc/cpuinfo | sort -u
mkdir -p /tmp/l /tmp/m /tmp/o "$OUT"
if [ ! -x /tmp/l/libs/loom ]; then LD_LIBRARY_PATH=$C/zl $C/zl/zstd -dc --long=27 $C/libs.tar.zst | tar xf - -C /tmp/l; fi
export LD_LIBRARY_PATH=/tmp/l/libs
for m in $models; do
  [ -f /tmp/m/$m.onnx ] || python3 $C/regen_weights.py $C/models/$m.onnx /tmp/m/$m.onnx
  for t in $threads; do
    HL_NUM_THREADS=$t timeout 240 /tmp/l/libs/loom bench /tmp/m/$m.onnx --auto --budget-ms $budget \
      --json /tmp/o/loom_${m}_${t}.json $LOOM_FLAGS > /tmp/o/loom_${m}_${t}.txt 2>&1; rc=$?
    python3 - /tmp/o/loom_${m}_${t}.json $m $t $rc <<'PY' | tee -a $OUT/loom.jsonl
import json, sys
f, m, t, rc = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
try:
    d = json.load(open(f))
    for r in d["rows"]:
        print(json.dumps({"model": m, "threads": t, "rc": rc, "loom_ms": r["median_ms"], "ok": r["ok"],
                          "err": r["error"][:200], "compile_s": r["compile_s"], "rel": r["rel_error"],
                          "machine": d.get("machine")}))
except Exception as e:
    print(json.dumps({"model": m, "threads": t, "rc": rc, "failed": str(e)}))
PY
    python3 $C/ort_time.py /tmp/m/$m.onnx $t 1.5 | tee -a $OUT/ort.jsonl
  done
done
