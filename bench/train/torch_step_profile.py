#!/usr/bin/python3
"""PyTorch eager's per-op CPU profile of one bench training step (torch.profiler; self CPU time by op and
input shapes, then by op), to set beside Halide's profile of Loom's step. Run in this folder.

usage: python3 torch_step_profile.py MODEL(mlp|transformer|cnn) THREADS STEPS
"""
import sys, types, torch
try:
    import onnx  # export_fixtures (the CNN's module) imports it; the profile only needs the model classes
except ImportError:
    sys.modules["onnx"] = types.ModuleType("onnx")
sys.path.insert(0, ".")
import run_train_bench as b
name, threads, steps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
torch.set_num_threads(threads)
step = b.torch_step(name)
for _ in range(20):
    step()
from torch.profiler import profile, ProfilerActivity
with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as p:
    for _ in range(steps):
        step()
print(p.key_averages(group_by_input_shape=True).table(sort_by="self_cpu_time_total", row_limit=45, max_name_column_width=40, max_shapes_column_width=70))
print(p.key_averages().table(sort_by="self_cpu_time_total", row_limit=30, max_name_column_width=40))
