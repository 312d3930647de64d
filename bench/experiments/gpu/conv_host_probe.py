"""On the GPU machine: the host time of Loom's cuDNN conv stage inside a PyTorch process (RESULTS_GPU.md
runs 79b and 80). Loads artifacts/gpu/conv_bn_relu in-process (bench/gpu/in_process.py) and prints its
do_bench time, the host time per call enqueued back to back, and how long one call takes on the
host behind 2 ms of queued GPU work (a call that waited for the GPU would take 2 ms), fresh and
after what bench/gpu/gpu_bench.py does before it (PyTorch's own convs, another artifact, memory held).
  LD_LIBRARY_PATH=<cudnn lib>:$LD_LIBRARY_PATH python3 bench/experiments/gpu/conv_host_probe.py
"""
import sys, time, statistics, torch, triton
sys.path.insert(0, "bench/gpu")
from in_process import Artifact
from workloads import WORKLOADS, _seeded
import workloads as W
torch.manual_seed(0)
def host_us(fn, n=50):
    torch.cuda.synchronize(); t = time.perf_counter()
    for _ in range(n): fn()
    r = (time.perf_counter() - t) / n * 1e6; torch.cuda.synchronize(); return r
def sync_test(fn):
    # Does the call wait for queued GPU work? Queue ~2 ms of sleep, then time one call on the host.
    torch.cuda.synchronize(); torch.cuda._sleep(int(2e6 * 1.98))  # ~2 ms at 1.98 GHz
    t = time.perf_counter(); fn(); r = (time.perf_counter() - t) * 1e6; torch.cuda.synchronize(); return r
def report(tag, art):
    ms = min(triton.testing.do_bench(art.run, warmup=25, rep=200, return_mode="median") for _ in range(3))
    print(f"{tag:45s} do_bench {ms*1e3:7.1f} us  host {host_us(art.run):6.1f} us/call  one call behind 2 ms of GPU work: {sync_test(art.run):7.1f} us", flush=True)
x = torch.randn(32, 64, 56, 56, device="cuda")
art = Artifact("artifacts/gpu/conv_bn_relu"); art.bind([x]); art.run(); torch.cuda.synchronize()
report("fresh process", art)
# what gpu_bench does before: PyTorch eager + compiled conv of the same workload

m = torch.nn.Sequential(torch.nn.Conv2d(64, 64, 3, 1, 1), torch.nn.BatchNorm2d(64), torch.nn.ReLU()).cuda().eval()
with torch.no_grad():
    for _ in range(5): m(x)
    c = torch.compile(m)
    for _ in range(5): c(x)
torch.cuda.synchronize()
report("after PyTorch eager + compiled conv", art)
art2 = Artifact("artifacts/gpu/linear_relu"); a2 = torch.randn(8192, 1024, device="cuda"); art2.bind([a2]); art2.run(); torch.cuda.synchronize()
report("after loading linear_relu's artifact", art)
big = [torch.empty(int(4e9 // 4), device="cuda") for _ in range(20)]
report("with 80 GB more held by PyTorch's allocator", art)
del big; torch.cuda.empty_cache()
art3 = Artifact("artifacts/gpu/conv_bn_relu"); art3.bind([x]); art3.run(); torch.cuda.synchronize()
report("a second instance of the conv artifact", art3)
