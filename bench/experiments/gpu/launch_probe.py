"""On the GPU machine: where the time around Loom's LayerNorm kernel goes (RESULTS_GPU.md run 78).

For Loom's layernorm_rows artifact (in-process, bench/gpu/in_process.py), Inductor's kernel, Triton
copies and CUDA-runtime copies of the same 268 MB (bench/experiments/gpu/launch_probe.cu: SASS for sm_90, PTX
JIT'd from compute_80 as Halide's is, cudaLaunchKernelEx with and without a 1x1x1 cluster): the
do_bench time, and under torch.profiler (CUPTI) the kernel's own duration and the gap between the
L2 flush's end and the kernel's start, in do_bench's sequence of stream operations.
  bench/experiments/gpu/launch_probe.sh   (builds the .so files into artifacts/launch_probe, then runs this)
"""
import ctypes, json, os, statistics, sys, inspect
import torch, triton, triton.language as tl
sys.path.insert(0, "bench/gpu")
from in_process import Artifact
from workloads import LayerNormRows

here = "artifacts/launch_probe"  # the .so files launch_probe.sh builds
out = os.environ.get("OUT", "/tmp")
try:
    import triton.backends.nvidia.driver as drv
    src = inspect.getsource(drv)
    print("--- triton launcher lines with Attribute/attr:")
    for l in src.splitlines():
        if "ttribute" in l or "LaunchKernel" in l:
            print("   ", l.strip()[:150])
except Exception as e:
    print("triton source:", e)
import torch._inductor.config as ic
print("inductor use_static_cuda_launcher:", getattr(ic, "use_static_cuda_launcher", None))

torch.manual_seed(0)
x = torch.randn(8192, 4096, device="cuda")
y = torch.empty_like(x)
ln = LayerNormRows().cuda()
comp = torch.compile(ln)
ref = ln(x)
comp(x)
art = Artifact("artifacts/gpu/layernorm_rows"); art.bind([x])
o = art.run()[0]; torch.cuda.synchronize()
print("loom rel err", ((o - ref).norm() / ref.norm()).item())

@triton.jit
def tcopy(a, b, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(b + offs, tl.load(a + offs))

n = x.numel()
libs = {k: ctypes.CDLL(os.path.abspath(f"{here}/probe_{k}.so")) for k in ("sm90", "ptx80")}
xp, yp = ctypes.c_void_p(x.data_ptr()), ctypes.c_void_p(y.data_ptr())
def rt(lib, t):
    return lambda: lib.launch_rt(xp, yp, n // 4, t)
def ex(lib, t, c):
    return lambda: lib.launch_ex(xp, yp, n // 4, t, c)
fns = {
    "loom_ln": lambda: art.run(),
    "inductor_ln": lambda: comp(x),
    "torch_copy_": lambda: y.copy_(x),
    "triton_copy_2048_w16": lambda: tcopy[(n // 2048,)](x, y, BLOCK=2048, num_warps=16),
    "triton_copy_4096_w8": lambda: tcopy[(n // 4096,)](x, y, BLOCK=4096, num_warps=8),
    "cuda_copy_sm90_512": rt(libs["sm90"], 512),
    "cuda_copy_ptx80_512": rt(libs["ptx80"], 512),
    "cuda_copy_sm90_256": rt(libs["sm90"], 256),
    "cuda_copy_ex_nocluster": ex(libs["sm90"], 512, 0),
    "cuda_copy_ex_cluster_spread": ex(libs["sm90"], 512, 1),
}
for f in fns.values():
    f()
torch.cuda.synchronize()
assert torch.equal(y, x)

from triton.testing import do_bench
res = {}
for name, f in fns.items():
    ms = min(do_bench(f, warmup=25, rep=200, return_mode="median") for _ in range(3))
    res[name] = {"do_bench_us": ms * 1e3}

# CUPTI: kernel durations and the gap after the flush, in do_bench's own sequence of stream ops.
cache = torch.empty(int(256e6 // 4), dtype=torch.int, device="cuda")
from torch.profiler import profile, ProfilerActivity
for name, f in fns.items():
    for _ in range(5):
        cache.zero_(); f()
    torch.cuda.synchronize()
    evs = []
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(60):
            cache.zero_()
            s = torch.cuda.Event(enable_timing=True); e = torch.cuda.Event(enable_timing=True)
            s.record(); f(); e.record(); evs.append((s, e))
        torch.cuda.synchronize()
    ev_us = statistics.median(s.elapsed_time(e) * 1e3 for s, e in evs)
    path = f"/tmp/trace_{name}.json"
    prof.export_chrome_trace(path)
    tr = json.load(open(path))["traceEvents"]
    ks = sorted([t for t in tr if t.get("cat") == "kernel"], key=lambda t: t["ts"])
    durs, gaps, names = [], [], set()
    for a, b in zip(ks, ks[1:]):
        if "zero" in a["name"].lower() or "fill" in a["name"].lower():
            if "zero" in b["name"].lower() or "fill" in b["name"].lower():
                continue
            durs.append(b["dur"]); gaps.append(b["ts"] - (a["ts"] + a["dur"])); names.add(b["name"][:60])
    res[name].update({"events_us": ev_us, "kernel_us": statistics.median(durs) if durs else None,
                      "gap_after_flush_us": statistics.median(gaps) if gaps else None,
                      "kernels": sorted(names), "samples": len(durs)})
    r = res[name]
    print(f"{name:30s} do_bench {r['do_bench_us']:7.2f}  events {ev_us:7.2f}  kernel {r['kernel_us']}  gap {r['gap_after_flush_us']}  n={len(durs)} {sorted(names)}", flush=True)
json.dump(res, open(f"{out}/launch_probe.json", "w"), indent=1)
