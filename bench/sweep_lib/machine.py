"""What machine a worker is: CPU model, cores, vector ISA, GPU model (nvidia-smi), host name.

A machine *kind* (`machine_id`) leaves the host name out, so that two identical hosts share
results and comparisons; tables name the hosts beside it. A CPU job's kind is its CPU alone; a
GPU job's adds the GPU model of the card it runs on (CUDA_VISIBLE_DEVICES picks it)."""
import os
import platform
import shutil
import subprocess


def _cpuinfo():
    model, flags = "", set()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                k, _, v = line.partition(":")
                k = k.strip()
                if k == "model name" and not model:
                    model = v.strip()
                elif k == "flags" and not flags:
                    flags = set(v.split())
    except OSError:
        pass
    return model or platform.processor() or platform.machine(), flags


def gpus():
    """[(index, name, memory MiB)] of every GPU nvidia-smi sees (NVML ignores CUDA_VISIBLE_DEVICES)."""
    smi = shutil.which("nvidia-smi")
    if not smi:
        return []
    try:
        out = subprocess.run([smi, "--query-gpu=index,name,memory.total", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    res = []
    for line in out.strip().splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) >= 2 and parts[0].isdigit():
            res.append((int(parts[0]), parts[1], parts[2] if len(parts) > 2 else ""))
    return res


def facts(cuda_visible=None):
    """This host's facts, as a worker advertises them. `cuda_visible`: the worker's
    CUDA_VISIBLE_DEVICES (default: this process's), which names the GPU a GPU worker owns."""
    model, flags = _cpuinfo()
    isa = "avx512" if "avx512f" in flags else "avx2" if "avx2" in flags else "sse" if "sse4_1" in flags else platform.machine()
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    f = {"host": platform.node(), "cpu": model, "cores": os.cpu_count(), "usable_cores": cores, "isa": isa,
         "avx512": "avx512f" in flags, "gpus": [{"index": i, "name": n, "memory_mib": m} for i, n, m in gpus()]}
    vis = os.environ.get("CUDA_VISIBLE_DEVICES") if cuda_visible is None else cuda_visible
    f["cuda_visible"] = vis
    return f


def cpu_id(f):
    return f"{f['cpu']} | {f['cores']} cores | {f['isa']}"


def gpu_name(f, cuda_visible=None):
    """The model of the GPU this worker's jobs use: the first of CUDA_VISIBLE_DEVICES, else GPU 0."""
    vis = f.get("cuda_visible") if cuda_visible is None else cuda_visible
    first = (vis or "").split(",")[0].strip()
    for g in f["gpus"]:
        if not first or str(g["index"]) == first:
            return g["name"]
    return None


def machine_id(f, gpu_job, cuda_visible=None):
    """The machine kind a job's result belongs to (None: a GPU job on a machine with no GPU)."""
    if not gpu_job:
        return cpu_id(f)
    g = gpu_name(f, cuda_visible)
    return f"{cpu_id(f)} | {g}" if g else None
