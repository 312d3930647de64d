"""On the GPU machine: does a kernel's time depend on how the L2 cache was flushed before it?

tools/loom_run flushes with cudaMemsetAsync over 256 MB; Triton's do_bench, which times PyTorch and
Loom in gpu_bench.py, with `cache.zero_()` (a PyTorch kernel over 256 MB). The two agree within 1%
on every memory-bound row but conv_bn_relu (0.127 vs 0.135 ms on an H200, 0.140 vs 0.151 on an
H100: RESULTS_GPU.md runs 80, 102). This times Loom's artifacts and torch.compile by one loop of
events with either flush, in this process, so the flush is the only difference, and do_bench itself.
  LD_LIBRARY_PATH=<cudnn lib>:$LD_LIBRARY_PATH LOOM_DEBUG=1 python3 bench/experiments/gpu/flush_probe.py artifacts/gpu
"""
import ctypes
import statistics
import sys

import torch
import triton

sys.path.insert(0, "bench/gpu")
from in_process import Artifact  # noqa: E402
from workloads import GEMM_WORKLOADS, WORKLOADS  # noqa: E402

FLUSH_BYTES = 256 << 20
cudart = ctypes.CDLL("libcudart.so")  # PyTorch's process already loaded one
cudart.cudaMemsetAsync.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t, ctypes.c_void_p]
flush_buf = torch.empty(FLUSH_BYTES // 4, dtype=torch.int32, device="cuda")


def flush_memset(r):
    rc = cudart.cudaMemsetAsync(ctypes.c_void_p(flush_buf.data_ptr()), r & 0xFF, FLUSH_BYTES, None)
    assert rc == 0, f"cudaMemsetAsync: {rc}"


def flush_zero(r):
    flush_buf.zero_()


def timed(fn, flush, reps=200, warmup=25):
    """Median ms of fn() between events, each run after flush(r), all enqueued then synchronized."""
    for r in range(warmup):
        flush(r)
        fn()
    torch.cuda.synchronize()
    ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(reps)]
    for r, (a, b) in enumerate(ev):
        flush(r)
        a.record()
        fn()
        b.record()
    torch.cuda.synchronize()
    return statistics.median(a.elapsed_time(b) for a, b in ev)


def main():
    folder = sys.argv[1] if len(sys.argv) > 1 else "artifacts/gpu"
    names = sys.argv[2:] or ["conv_bn_relu", "layernorm_rows", "softmax_rows", "linear_relu"]
    print(torch.cuda.get_device_name(), flush=True)
    print("| workload | who | loop, memset flush | loop, zero_ flush | do_bench |")
    print("|---|---|---|---|---|")
    for n in names:
        factory, shapes, _, _ = {**WORKLOADS, **GEMM_WORKLOADS}[n]
        g = torch.Generator(device="cuda").manual_seed(1)
        xs = [torch.randn(s, device="cuda", generator=g) for s in shapes.values()]
        model = factory().cuda().eval()
        with torch.no_grad():
            ref = model(*xs)
            compiled = torch.compile(model)
            art = Artifact(f"{folder}/{n}")
            art.bind(xs)
            out = art.run()[0]
            torch.cuda.synchronize()
            err = ((out.double() - ref.double()).norm() / ref.double().norm()).item()
            for who, fn in (("loom", art.run), ("torch.compile", lambda: compiled(*xs))):
                fn()
                row = [timed(fn, flush_memset), timed(fn, flush_zero),
                       triton.testing.do_bench(fn, warmup=25, rep=200, return_mode="median")]
                print(f"| {n} | {who}{f' (rel err {err:.1e})' if who == 'loom' else ''} | " +
                      " | ".join(f"{t:.4f}" for t in row) + " |", flush=True)
            art.close()


if __name__ == "__main__":
    main()
