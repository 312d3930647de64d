#!/usr/bin/python3
"""PyTorch eager's per-op CPU profile of one bench training step (torch.profiler; self CPU time by op and
input shapes, then by op), to set beside Halide's profile of Loom's step. Run in this folder.

usage: python3 torch_step_profile.py MODEL(mlp|transformer|cnn) THREADS STEPS
"""
import sys, types, torch, torch.nn.functional as F
try:
    import onnx
except ImportError:
    sys.modules["onnx"] = types.ModuleType("onnx")
sys.path.insert(0, ".")
import run_train_bench as b
name, threads, steps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
torch.set_num_threads(threads)
factory, shape, loss, _ = b.models()[name]
torch.manual_seed(0)
model = factory().train()
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x = torch.rand(*shape) * 2 - 1
with torch.no_grad():
    out = model(x)
target = torch.randint(0, out.shape[1], (out.shape[0],)) if loss == "cross_entropy" else torch.rand(out.shape) * 2 - 1
def step():
    opt.zero_grad(set_to_none=True)
    y = model(x)
    l = F.cross_entropy(y, target) if loss == "cross_entropy" else F.mse_loss(y, target)
    l.backward()
    opt.step()
for _ in range(20):
    step()
from torch.profiler import profile, ProfilerActivity
with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as p:
    for _ in range(steps):
        step()
print(p.key_averages(group_by_input_shape=True).table(sort_by="self_cpu_time_total", row_limit=45, max_name_column_width=40, max_shapes_column_width=70))
print(p.key_averages().table(sort_by="self_cpu_time_total", row_limit=30, max_name_column_width=40))
