#!/usr/bin/env bash
# Lesson 7: gradients and a training step. Check an MLP's gradients, compile its training step
# (forward, backward, Adam) into a library, train it on a synthetic task from C, and read the
# backward pass's schedule and the save-or-recompute choices.
source "$(dirname "$0")/common.sh"
M=$DATA/mlp.onnx

# 1. every parameter's gradient: compiled backward graph vs the interpreter (double) and finite differences
show loom grad $M --loss mse --check --fd-samples 4 | tee grad.txt
expect '^gradient graph of .*: 9 forward nodes, [0-9]+ backward nodes, 6 parameters' grad.txt
count ' ok$' grad.txt 6

# 2. the training step as one artifact, with its fusion report
show loom compile $M --train --loss mse --optimizer adam --lr 0.003 -o mlp_step --report step_report.txt | tee compile.txt
expect 'libmlp_step_train.so' compile.txt
ls mlp_step

# 3. train from C: learn y = tanh(x A) for a fixed random A, fresh random x every step
cat > train.c <<'C'
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include "mlp_step_train.h"
static float uniform(unsigned *s) { *s = *s * 1664525u + 1013904223u; return (*s >> 8) / 8388608.0f - 1.0f; }
int main(void) {
    enum { B = 4, IN = 64, OUT = 10 };
    static float a[IN][OUT], x[B][IN], y[B][OUT];
    unsigned seed = 7;
    for (int i = 0; i < IN; i++) for (int j = 0; j < OUT; j++) a[i][j] = uniform(&seed) * 0.3f;
    void *t = mlp_step_train_create();
    if (!t) return 1;
    float avg = 0;
    for (int step = 1; step <= 600; step++) {
        for (int b = 0; b < B; b++) for (int i = 0; i < IN; i++) x[b][i] = uniform(&seed);
        for (int b = 0; b < B; b++) for (int j = 0; j < OUT; j++) {
            float s = 0;
            for (int i = 0; i < IN; i++) s += x[b][i] * a[i][j];
            y[b][j] = tanhf(s);
        }
        const void *inputs[] = {x};
        float loss;
        if (mlp_step_train_step(t, inputs, y, &loss)) { fprintf(stderr, "%s\n", mlp_step_train_last_error()); return 1; }
        avg += loss;
        if (step % 100 == 0) { printf("steps %3d  mean loss %.4f\n", step, avg / 100); avg = 0; }
    }
    printf("%s: %d parameters, first %s[0] = %.4f\n", "trained", mlp_step_train_num_parameters(),
           mlp_step_train_parameter_name(0), mlp_step_train_parameter(t, 0)[0]);
    mlp_step_train_destroy(t);
    return 0;
}
C
show cc -O2 -o train train.c -Imlp_step -Lmlp_step -lmlp_step_train -Wl,-rpath,"$PWD/mlp_step" -lm
show ./train | tee train.txt
expect '^steps 100' train.txt
# the loss falls: the last 100 steps' mean is under a third of the first 100's
awk '/^steps/ {l[++n] = $5} END {exit !(l[n] < l[1] / 3)}' train.txt || { echo "LESSON FAILED: the loss did not fall" >&2; exit 1; }

# 4. the backward schedule: kernels holding gradient nodes, and what the backward reads from the forward
echo '$ grep -A3 "^kernel .*: .*" step_report.txt  (a backward kernel)'
grep -m1 -A4 '^kernel [0-9]*: .*' <(sed -n '/nodes: grad_/,$p' step_report.txt) || true
sed -n '/^min-cut partition/,/^$/p' step_report.txt
expect '^min-cut partition \(save or recompute\): [0-9]+ saved' step_report.txt
expect '^  save +/Relu' step_report.txt
expect '^  save +/Gelu' step_report.txt
sed -n '/^save or recompute/,$p' step_report.txt
expect '^save or recompute' step_report.txt
expect 'relu +Relu +save' step_report.txt
expect 'gelu +Gelu +save' step_report.txt
expect '^  [0-9]+ saved \(' step_report.txt
echo "lesson 7 ok"
