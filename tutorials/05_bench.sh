#!/usr/bin/env bash
# Lesson 5: compare schedules side by side with loom bench: the table, the JSON and the plot.
source "$(dirname "$0")/common.sh"
M=$DATA/dynamic_mlp.onnx

loom autoschedule $M --input batch=256 -o mlp.sched > /dev/null
echo '$ loom bench tests/data/dynamic_mlp.onnx --input batch=256 --eager --inline --auto --schedule mlp.sched --halide li2018 --budget-ms 200 --json bench.json --plot bench.png'
loom bench $M --input batch=256 --eager --inline --auto --schedule mlp.sched --halide li2018 \
  --budget-ms 200 --json bench.json --plot bench.png 2> progress.txt | tee table.txt
echo '$ (stderr, progress) tail -4'; tail -4 progress.txt
for row in eager inline auto li2018 mlp.sched; do expect "^$row +[0-9.]+ " table.txt; done
expect '^schedule +median ms +min..max ms +GB/s +GFLOP/s +% roof +vs eager' table.txt
expect '^eager .* 1.00x ' table.txt
expect '"rows"' bench.json
count '"ok": true' <(tr '{' '\n' < bench.json) 5
# the plot needs matplotlib (bench/plot.py); bench says whether it wrote one
if grep -q 'plot written to bench.png' progress.txt; then
  [ -s bench.png ] || { echo "LESSON FAILED: bench said it wrote bench.png, but it is missing" >&2; exit 1; }
  echo "plot: bench.png ($(stat -c %s bench.png) bytes)"
else
  echo "(no plot: matplotlib missing?)"; grep -i plot progress.txt || true
fi
echo '$ loom bench tests/data/dynamic_mlp.onnx --input batch=256 --auto --profile --budget-ms 200'
loom bench $M --input batch=256 --auto --profile --budget-ms 200 2> /dev/null | tee profile.txt
expect '^profile of auto: [0-9]+ kernels' profile.txt
# a kernel row that computes one of the GEMMs (which one leads depends on the machine, and a
# kernel of a few percent may get no sample in a short profile)
expect '^ +[0-9.]+ +[0-9.]+% +[0-9.]+% +[^ ]+ \(.*/fc[123]/Gemm' profile.txt
echo "lesson 5 ok"
