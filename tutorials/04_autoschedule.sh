#!/usr/bin/env bash
# Lesson 4: auto-schedule a model, read the file and the fusion report, then edit the file by hand.
source "$(dirname "$0")/common.sh"
M=$DATA/dynamic_mlp.onnx

show loom autoschedule $M --input batch=256 -o mlp.sched --report | tee report.txt
expect '^3 kernels for 9 Funcs' report.txt
expect '^kernel 1: fused_addmm_div_erf_add_mul' report.txt
expect 'nodes: /fc2/Gemm /Div /Erf /Add /Mul /Mul_1' report.txt
expect '^wrote mlp.sched' report.txt

echo '$ cat mlp.sched'; cat mlp.sched
expect '^fc2_gemm.compute_at\(mul_1, jo\)' mlp.sched
expect '^erf.compute_inline\(\);' mlp.sched

show loom run $M --input batch=256 --schedule eager --check --repeats 50 | grep -E 'compiled|check' | tee run.txt
show loom run $M --input batch=256 --schedule mlp.sched --check --repeats 50 | grep -E 'compiled|check' | tee -a run.txt

# the edit: the GEMM micro-kernels take 4 rows instead of 8
sed 's/split(i, io, ii, 8)/split(i, io, ii, 4)/' mlp.sched > mlp4.sched
echo '$ diff mlp.sched mlp4.sched'; diff mlp.sched mlp4.sched || true
show loom inspect $M --input batch=256 --schedule mlp4.sched --loop-nest | sed -n '/^loop nest/,/^consume relu/p' | tee nest4.txt
expect '^  parallel i.io in \[0, 63\]:' nest4.txt
show loom run $M --input batch=256 --schedule mlp4.sched --check --repeats 50 | grep -E 'compiled|check' | tee -a run.txt
count 'check y: .* ok$' run.txt 3
echo "lesson 4 ok"
