#!/usr/bin/python3
"""Training-step benchmark: Loom's `loom compile --train` artifact against PyTorch eager on this CPU,
at the same thread count, for an MLP, a transformer encoder block and a small CNN (SGD, one fixed
batch). Reports the median step time and the peak memory of both: the process's peak RSS, and its
rise above the RSS right before the first step (the step's working memory). Not a test: it writes
a results file whose first lines are the machine, date, commit and command.

usage: bench/train/run_train_bench.py [--loom build/loom] [--threads 1,2] [--reps 50]
                                      [--results bench/train/RESULTS.md] [--only mlp,cnn]
On a machine without Loom (another CPU, a quiet one): `--compile-only DIR` here, then there
`--prebuilt DIR --python /path/to/python-with-torch` (the artifacts need only libc, libdl, libgomp).
"""
import argparse
import json
import datetime
import math
import os
import platform
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "frontends", "torch"))


def models():
    """name -> (factory, input shape, loss, opset)."""
    try:
        import onnx  # noqa: F401  export_fixtures (the CNN's module) imports it; timing needs only the classes
    except ImportError:
        import types
        sys.modules["onnx"] = types.ModuleType("onnx")
    from export_fixtures import CNN
    from models import MLP, EncoderLayer
    return {
        "mlp": (lambda: MLP(256, 512, 10), (64, 256), "cross_entropy", 13),
        "transformer": (lambda: EncoderLayer(8, 64, 128, 4, 512), (8, 64, 128), "mse", 16),
        "cnn": (CNN, (8, 3, 32, 32), "mse", 13),
    }


def torch_step(name):
    """PyTorch eager's SGD training step of bench model `name` on the CPU: the model seeded, its input
    in [-1, 1) and its target fixed across steps. Returns step(), which returns the loss tensor."""
    import torch
    import torch.nn.functional as F
    factory, shape, loss, _ = models()[name]
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
        return l
    return step


def fixed_batch(name):
    """The random, fixed input and target of bench model `name` that the one-process scripts
    (step_turns_one_process.py, step_memory.py) feed both Loom's step and torch's: input in [-1, 1),
    classes or values in [-1, 1) as the loss wants, seeded 1. Returns (x, target) tensors."""
    import torch
    factory, shape, loss, _ = models()[name]
    with torch.no_grad():
        out_shape = tuple(factory()(torch.zeros(*shape)).shape)
    g = torch.Generator().manual_seed(1)
    x = (torch.rand(*shape, generator=g) * 2 - 1).contiguous()
    if loss == "cross_entropy":
        target = torch.randint(0, out_shape[1], (out_shape[0],), generator=g, dtype=torch.int64)
    else:
        target = (torch.rand(*out_shape, generator=g) * 2 - 1).contiguous()
    return x, target


def loom_step(lib, name, x, target):
    """A `loom compile --train` library of bench model `name` loaded in this process (ctypes) and
    its trainer created. Returns (the library's handle, step()), step() returning the loss and
    exiting on a failed step; x and target are the tensors it feeds every step."""
    import ctypes
    so = ctypes.CDLL(os.path.abspath(lib), mode=os.RTLD_NOW | os.RTLD_LOCAL)
    create = getattr(so, name + "_step_train_create")
    create.restype = ctypes.c_void_p
    stepf = getattr(so, name + "_step_train_step")
    stepf.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.POINTER(ctypes.c_float)]
    trainer = create()
    if not trainer:
        sys.exit(f"{lib}: {name}_step_train_create failed")
    x_ptr = (ctypes.c_void_p * 1)(x.data_ptr())
    loss_out = ctypes.c_float()

    def step():
        if stepf(trainer, x_ptr, ctypes.c_void_p(target.data_ptr()), ctypes.byref(loss_out)) != 0:
            sys.exit(f"{lib}: step failed")
        return loss_out.value
    return so, step


TORCH_WORKER = r"""
import sys, time, types, torch
try:
    import onnx  # export_fixtures (the CNN's module) imports it; the worker only needs the model classes
except ImportError:
    sys.modules["onnx"] = types.ModuleType("onnx")
sys.path.insert(0, sys.argv[1])
sys.path.insert(0, sys.argv[2])
import run_train_bench as b
name, threads, reps = sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
torch.set_num_threads(threads)
def status(key):
    for line in open("/proc/self/status"):
        if line.startswith(key):
            return int(line.split()[1])
loss_step = b.torch_step(name)
step = lambda: loss_step().item()
base = status("VmRSS:")
for _ in range(5):
    step()
ms = []
for _ in range(reps):
    t = time.perf_counter()
    l = step()
    ms.append((time.perf_counter() - t) * 1e3)
ms.sort()
print("median_ms %.4f min_ms %.4f peak_rss_kib %d step_kib %d loss %.5f" % (ms[len(ms) // 2], ms[0], status("VmHWM:"),
      status("VmHWM:") - base, l))
"""


def compile_model(loom, work, name, factory, shape, loss, opset, target="host"):
    """Exports model `name` and compiles its training step into work/<name>_step; its output shape."""
    import torch
    torch.manual_seed(0)
    model = factory().eval()
    x = torch.rand(*shape)
    onnx_path = os.path.join(work, name + ".onnx")
    torch.onnx.export(model, (x,), onnx_path, input_names=["x"], output_names=["y"], opset_version=opset,
                      do_constant_folding=False, training=torch.onnx.TrainingMode.PRESERVE)
    with torch.no_grad():
        out_shape = tuple(model(x).shape)
    c = subprocess.run([loom, "compile", onnx_path, "--train", "--loss", loss, "--optimizer", "sgd", "--lr", "0.01",
                        "--force", "--name", name + "_step", "--target", target, "-o", os.path.join(work, name + "_step")],
                       capture_output=True, text=True)
    if c.returncode != 0:
        sys.exit(f"loom compile --train {name} failed:\n{c.stdout}{c.stderr}")
    return out_shape


def parse(line):
    return {k: float(v) for k, v in re.findall(r"(\w+) ([-0-9.e]+)", line)}


def machine():
    cpu = platform.processor()
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{cpu}, {os.cpu_count()} cores"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--loom", default=os.path.join(ROOT, "build", "loom"))
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--reps", type=int, default=50)
    ap.add_argument("--results", default=os.path.join(HERE, "RESULTS.md"))
    ap.add_argument("--only", default="")
    ap.add_argument("--target", default="host", help="--compile-only: host, or cuda (bench/train/run_gpu_bench.sh times those)")
    ap.add_argument("--compile-only", default="", help="export and compile the artifacts into this folder, then stop")
    ap.add_argument("--prebuilt", default="", help="time the artifacts --compile-only wrote into this folder")
    ap.add_argument("--python", default="/usr/bin/python3", help="the Python (with torch) that runs PyTorch's side")
    args = ap.parse_args()
    table = models()
    names = [n for n in table if not args.only or n in args.only.split(",")]
    threads = [int(t) for t in args.threads.split(",")]
    work = args.prebuilt or args.compile_only or tempfile.mkdtemp(prefix="loom-train-bench.")
    os.makedirs(work, exist_ok=True)
    meta_path = os.path.join(work, "meta.json")
    meta = json.load(open(meta_path)) if args.prebuilt else {}
    if not args.prebuilt:
        for name in names:
            meta[name] = list(compile_model(args.loom, work, name, *table[name], target=args.target))
        json.dump(meta, open(meta_path, "w"))
    if args.compile_only:
        print("compiled into", work)
        return
    driver = os.path.join(work, "driver")
    subprocess.run(["cc", "-O2", "-o", driver, os.path.join(HERE, "train_step_driver.c"), "-ldl"], check=True)
    commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    load_at_start = " ".join(open("/proc/loadavg").read().split()[:3])
    rows = []
    for name in names:
        _, shape, loss, _ = table[name]
        out_shape = meta[name]
        lib = os.path.join(work, name + "_step", f"lib{name}_step_train.so")
        for t in threads:
            env = dict(os.environ, HL_NUM_THREADS=str(t), OMP_NUM_THREADS=str(t))
            lr = subprocess.run([driver, lib, name + "_step", loss, str(args.reps), str(math.prod(shape)),
                                 str(math.prod(out_shape)), str(out_shape[0]), str(out_shape[1])],
                                capture_output=True, text=True, env=env, check=True)
            tr = subprocess.run([args.python, "-c", TORCH_WORKER, HERE, os.path.join(ROOT, "frontends", "torch"),
                                 name, str(t), str(args.reps)], capture_output=True, text=True, env=env, check=True)
            lo, to = parse(lr.stdout), parse(tr.stdout)
            rows.append((name, "x".join(map(str, shape)), loss, t, lo, to))
            print(name, t, "loom", lr.stdout.strip(), "| torch", tr.stdout.strip(), flush=True)
    torch_version = subprocess.run([args.python, "-c", "import torch; print(torch.__version__)"], capture_output=True,
                                   text=True).stdout.strip()
    with open(args.results, "w") as f:
        f.write("# Training step: Loom vs PyTorch eager (CPU)\n\n")
        f.write(f"- machine: {machine()}\n- date: {datetime.datetime.utcnow():%Y-%m-%d %H:%M} UTC\n- commit: {commit}\n")
        f.write(f"- command: `bench/train/run_train_bench.py {' '.join(sys.argv[1:])}`\n")
        f.write(f"- load average when it started: {load_at_start}\n")
        f.write(f"- PyTorch {torch_version} eager, torch.optim.SGD; Loom `loom compile --train --optimizer sgd` (auto "
                "schedule), driven from C (`train_step_driver.c`); both: one fixed batch, 5 warm-up steps, median (min) of "
                f"{args.reps}; threads = HL_NUM_THREADS / torch.set_num_threads\n")
        f.write("- memory: peak RSS of the process (VmHWM), and its rise above the RSS before the first step\n\n")
        f.write("| model | input | loss | threads | Loom ms (min) | torch ms (min) | Loom vs torch (median / min) "
                "| Loom peak MiB | torch peak MiB | Loom step MiB | torch step MiB |\n|---|---|---|---|---|---|---|---|---|---|---|\n")
        for name, shape, loss, t, lo, to in rows:
            f.write(f"| {name} | {shape} | {loss} | {t} | {lo['median_ms']:.3f} ({lo['min_ms']:.3f}) | "
                    f"{to['median_ms']:.3f} ({to['min_ms']:.3f}) | {to['median_ms'] / lo['median_ms']:.2f}x / "
                    f"{to['min_ms'] / lo['min_ms']:.2f}x | {lo['peak_rss_kib'] / 1024:.1f} | {to['peak_rss_kib'] / 1024:.1f} | "
                    f"{lo['step_kib'] / 1024:.1f} | {to['step_kib'] / 1024:.1f} |\n")
    print("wrote", args.results)


if __name__ == "__main__":
    main()
