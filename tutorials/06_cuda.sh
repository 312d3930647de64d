#!/usr/bin/env bash
# Lesson 6: compile for a GPU. CI has no GPU: this script compiles the CUDA artifact and checks
# what it contains; it runs the *host* artifact with tools/loom_run to show the runner. Running the
# CUDA artifact needs a GPU machine (see the lesson and bench/gpu/).
source "$(dirname "$0")/common.sh"
M=$DATA/sigmoid_affine.onnx

show loom compile $M --target cuda -o art_cuda --print-schedule | sed "s|$WORK/||g" | tee compile.txt
expect 'auto schedule' compile.txt
expect 'gpu_blocks' compile.txt
echo '$ cat art_cuda/manifest.txt'; cat art_cuda/manifest.txt
expect '^cuda 1$' art_cuda/manifest.txt
expect '^input x f32 64 256$' art_cuda/manifest.txt
echo '$ ls art_cuda art_cuda/data'; ls art_cuda art_cuda/data
[ -f art_cuda/libsigmoid_affine.so ] && [ -f art_cuda/data/expected_y.npy ]
expect 'sigmoid_affine_run_device' art_cuda/sigmoid_affine.h
# the kernels are in the object file as PTX
grep -aq '\.target sm_80' art_cuda/sigmoid_affine_halide.o && echo "PTX for sm_80 embedded in sigmoid_affine_halide.o"

# the same model for the host, and the standalone runner (no libHalide) that GPU machines use
show loom compile $M --target host -o art_host | sed "s|$WORK/||g" | tee compile_host.txt
expect 'eager schedule' compile_host.txt
CUDA_HOME=/nonexistent sh "$ROOT/tools/loom_run/build.sh" "$WORK/loom_run" > /dev/null
show ./loom_run art_host --reps 20 | tee runner.txt
expect 'check host y: .* -> ok' runner.txt
expect '^RESULT sigmoid_affine mode=host ok=1' runner.txt
echo "lesson 6 ok (CUDA artifact compiled only: no GPU in CI)"
