#!/usr/bin/python3
"""Loom training-step libraries (several builds of one bench model) and PyTorch eager's step of the
same model, timed in turns inside ONE process on this CPU: each round runs every variant for STEPS
steps, interleaved in blocks of BLOCK steps (default 5) in an order that alternates between rounds
(a b torch, then torch b a, ...), so that a slow spell of a shared host falls on all of them alike.
Per round and variant: the median and the 10th percentile (p10: the steps no other process slowed)
ms of its steps; at the end, each variant's median over the rounds and the ratios to the first
variant and to torch.
Inputs and targets are random and fixed, as in train_step_driver.c; the threads are
HL_NUM_THREADS (set here before any library starts its pool) and torch.set_num_threads.

usage: [BLOCK=5] step_turns_one_process.py MODEL THREADS ROUNDS STEPS NAME=LIB [NAME=LIB ...] [--no-torch]
  LIB: a `loom compile --train` library (lib<model>_step_train.so); its C name is <model>_step.
"""
import os
import sys
import time

args = [a for a in sys.argv[1:] if not a.startswith("--")]
with_torch = "--no-torch" not in sys.argv
model, threads, rounds, steps = args[0], int(args[1]), int(args[2]), int(args[3])
variants = [a.split("=", 1) for a in args[4:]]
os.environ["HL_NUM_THREADS"] = str(threads)

import torch  # noqa: E402
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "frontends", "torch"))
import run_train_bench as b  # noqa: E402

torch.set_num_threads(threads)
x, target = b.fixed_batch(model)
runners = {name: b.loom_step(lib, model, x, target)[1] for name, lib in variants}
if with_torch:
    tstep = b.torch_step(model)
    runners["torch"] = lambda: tstep().item()

order = list(runners)
for f in runners.values():
    for _ in range(5):
        f()
medians = {n: [] for n in order}
p10s = {n: [] for n in order}
losses = {}
block = int(os.environ.get("BLOCK", "5"))
print(f"{model} threads {threads} rounds {rounds} steps {steps} torch {torch.__version__}", flush=True)
for r in range(rounds):
    seq = order if r % 2 == 0 else order[::-1]
    ms = {n: [] for n in order}
    for _ in range((steps + block - 1) // block):
        for n in seq:
            f = runners[n]
            for _ in range(block):
                t = time.perf_counter()
                losses[n] = f()
                ms[n].append((time.perf_counter() - t) * 1e3)
    line = []
    for n in seq:
        v = sorted(ms[n])
        medians[n].append(v[len(v) // 2])
        p10s[n].append(v[len(v) // 10])
        line.append(f"{n} {v[len(v) // 2]:.4f} (p10 {v[len(v) // 10]:.4f})")
    print(f"round {r + 1}: " + " ".join(line), flush=True)


def med(v):
    v = sorted(v)
    return v[len(v) // 2] if len(v) % 2 else (v[len(v) // 2 - 1] + v[len(v) // 2]) / 2


first = order[0]
for n in order:
    m = med(medians[n])
    s = (f"{n}: median of round medians {m:.4f} ms (rounds {min(medians[n]):.4f}-{max(medians[n]):.4f}), "
         f"of p10s {med(p10s[n]):.4f}, loss {losses[n]:.5f}")
    if n != first:
        s += f", {first}/{n} {med(medians[first]) / m:.3f}x (p10 {med(p10s[first]) / med(p10s[n]):.3f}x)"
    if with_torch and n != "torch":
        s += f", torch/{n} {med(medians['torch']) / m:.2f}x (per round " + \
             " ".join(f"{t / l:.2f}" for t, l in zip(medians["torch"], medians[n])) + ")"
    print(s, flush=True)
