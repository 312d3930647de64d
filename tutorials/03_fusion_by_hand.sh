#!/usr/bin/env bash
# Lesson 3: fusion by hand — compute_inline, a reduction with its prologue inlined, compute_at a row.
source "$(dirname "$0")/common.sh"

echo "## 3a. sigmoid(x*w + b): three loop nests -> one"
M=$DATA/sigmoid_affine.onnx
show loom inspect $M --schedule eager --loop-nest | sed -n '/^loop nest/,$p' | tee a_eager.txt
count '^ *produce ' a_eager.txt 3
cat > affine.sched <<'S'
mul.compute_inline();
add.compute_inline();
sigmoid.vectorize(j, 16).parallel(i, 8);
S
echo '$ cat affine.sched'; cat affine.sched
show loom inspect $M --schedule affine.sched --loop-nest | sed -n '/^loop nest/,$p' | tee a_fused.txt
count '^ *produce ' a_fused.txt 1
expect 'parallel i.i in \[0, 7\]' a_fused.txt
show loom run $M --schedule eager --check --repeats 100 | grep -E 'compiled|check' | tee a_run.txt
show loom run $M --schedule affine.sched --check --repeats 100 | grep -E 'compiled|check' | tee -a a_run.txt
count 'check y: .* ok(, tolerance .*)?$' a_run.txt 2

echo "## 3b. ((x+y)*z).sum(-1): the prologue inlined into the reduction"
M=$DATA/sum_prologue.onnx
cat > sum1.sched <<'S'
add.compute_inline();
mul.compute_inline();
S
echo '$ cat sum1.sched'; cat sum1.sched
show loom inspect $M --schedule sum1.sched --loop-nest | sed -n '/^loop nest/,$p' | tee b1.txt
count '^ *produce ' b1.txt 1
expect '^    for r in \[0, 255\]:' b1.txt
cat > sum2.sched <<'S'
add.compute_inline();
mul.compute_inline();
# 16 rows per vector, 4 parallel tasks; the same for the update (the += over r)
reducesum.split(i, io, ii, 16).parallel(io).vectorize(ii);
reducesum.update(0).split(i, io, ii, 16).parallel(io).vectorize(ii);
S
echo '$ cat sum2.sched'; cat sum2.sched
show loom inspect $M --schedule sum2.sched --loop-nest | sed -n '/^loop nest/,$p' | tee b2.txt
expect '^      for r in \[0, 255\]:' b2.txt
for s in eager sum1.sched sum2.sched; do
  show loom run $M --schedule $s --check --repeats 100 | grep -E 'compiled|check' | tee -a b_run.txt
done
count 'check out: .* ok(, tolerance .*)?$' b_run.txt 3

echo "## 3c. LayerNorm: row statistics computed at the row of the output"
M=$DATA/layernorm_rows.onnx
show loom inspect $M --schedule eager --loop-nest | sed -n '/^loop nest/,$p' > c_eager.txt
count '^ *produce ' c_eager.txt 9
cat > ln.sched <<'S'
sub.compute_inline();
pow.compute_inline();
add.compute_inline();
sqrt.compute_inline();
div.compute_inline();
mul.compute_inline();
reducemean.compute_at(add_1, i);
reducemean_1.compute_at(add_1, i);
add_1.parallel(i).vectorize(j, 16);
S
echo '$ cat ln.sched'; cat ln.sched
show loom inspect $M --schedule ln.sched --loop-nest | sed -n '/^loop nest/,$p' | tee c_fused.txt
count '^ *produce ' c_fused.txt 3
expect '^produce add_1:' c_fused.txt
expect '^    produce reducemean:' c_fused.txt
for s in eager ln.sched; do
  show loom run $M --schedule $s --check --repeats 100 | grep -E 'compiled|check' | tee -a c_run.txt
done
count 'check y: .* ok(, tolerance .*)?$' c_run.txt 2

# a compute_at at a var the consumer does not have: the error lists the legal places
sed 's/^reducemean.compute_at(add_1, i)/reducemean.compute_at(add_1, k)/' ln.sched > bad.sched
echo '$ loom run tests/data/layernorm_rows.onnx --schedule bad.sched'
if loom run $M --schedule bad.sched > bad.out 2>&1; then echo "bad schedule accepted?" >&2; exit 1; fi
cat bad.out
expect "bad.sched:7:.*add_1 has no var 'k'.*legal: add_1.\{i, j\}, root" bad.out
echo "lesson 3 ok"
