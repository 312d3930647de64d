#!/usr/bin/env bash
# Lesson 2: sin(x)^2 + cos(x)^2 — eager (5 loop nests) vs one fused loop written by hand.
source "$(dirname "$0")/common.sh"
M=$DATA/sincos.onnx

show loom inspect $M --schedule eager --loop-nest | sed -n '/^loop nest/,$p' | tee eager.txt
count '^ *produce ' eager.txt 5

cat > sincos.sched <<'S'
# sin(x)^2 + cos(x)^2 as one loop: the four producers are recomputed in registers, never stored
sin.compute_inline();
pow.compute_inline();
cos.compute_inline();
pow_1.compute_inline();
# 4 parallel tasks of 1024 elements, 16 f32 lanes per vector
add.split(i, io, ii, 1024).parallel(io).vectorize(ii, 16);
S
echo '$ cat sincos.sched'; cat sincos.sched
show loom schedule print sincos.sched | tee printed.txt
expect '^add.split\(i, io, ii, 1024\)' printed.txt

show loom inspect $M --schedule sincos.sched --loop-nest | sed -n '/^loop nest/,$p' | tee fused.txt
count '^ *produce ' fused.txt 1
expect '^produce add:' fused.txt
expect 'parallel i.io in \[0, 3\]' fused.txt
expect 'vectorized i.ii.v[0-9]+ in \[0, 15\]' fused.txt

show loom run $M --schedule eager --check --repeats 50 | tee run_eager.txt
show loom run $M --schedule sincos.sched --check --repeats 50 | tee run_fused.txt
expect 'check y: .* ok(, tolerance .*)?$' run_eager.txt
expect 'check y: .* ok(, tolerance .*)?$' run_fused.txt
echo "times side by side:"
grep -ho "schedule '[^']*'.*run [0-9.]* ms" run_eager.txt run_fused.txt | sed 's/ for [^:]*:/:/'

# a typo in a schedule is reported with file:line:col and a suggestion, never a crash
printf 'sin.compute_inline();\ncos.compute_inlin();\n' > typo.sched
echo '$ loom run tests/data/sincos.onnx --schedule typo.sched'
if loom run $M --schedule typo.sched > typo.out 2>&1; then echo "typo accepted?" >&2; exit 1; fi
cat typo.out
expect "typo.sched:2:5: unknown primitive 'compute_inlin'; did you mean 'compute_inline'\?" typo.out
echo "lesson 2 ok"
