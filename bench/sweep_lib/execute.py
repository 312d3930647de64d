"""Where a sweep's jobs run: Dask (a LocalCluster of pinned workers, or an existing scheduler's
workers), or, on a host without Dask, the same slots run by threads of this process.

Planning comes first: the workers say what machine they are, each job is placed on every machine
kind that can run it (CPU jobs on each CPU kind, CUDA jobs on each GPU kind), and a (job, machine)
whose key the store already holds is skipped before anything starts. The driver alone appends to
the store, one record per job as it completes, so a worker that dies loses only the job it was
running, which Dask runs again elsewhere (up to `retries` times, then `failed: worker lost`)."""
import os
import sys
import threading
import time

from . import jobs as J
from . import machine
from .spec import ROOT


class Plan:
    def __init__(self):
        self.todo = []      # (job dict, machine id, key)
        self.skipped = []   # (job dict, machine id, key, status)
        self.unplaceable = []  # (job dict, why)


def make_plan(sweep, kinds, store_latest, retry_failed=False, force=False):
    """kinds: {machine id: {"gpu": bool}} of the workers. Every job goes to every kind that fits."""
    p = Plan()
    for job in sweep["jobs"]:
        d = job.to_dict()
        fits = [m for m, k in sorted(kinds.items()) if k["gpu"] == job.is_gpu()]
        if not fits:
            p.unplaceable.append((d, f"no {'GPU' if job.is_gpu() else 'CPU'} worker for target {job.target}"))
            continue
        for m in fits:
            key = job.key(m)
            prev = None if force else store_latest.get(key)
            if prev and (prev.get("status") == "ok" or not retry_failed):
                p.skipped.append((d, m, key, prev.get("status")))
            else:
                p.todo.append((d, m, key))
    p.todo = interleave(p.todo)
    return p


def interleave(todo):
    """Round-robin over models (each model's jobs in sweep order): workers that start together
    take different models, so they share no per-model setup (a compile, GPU data) at the same time."""
    by = {}
    for t in todo:
        by.setdefault(t[0]["model_sha256"], []).append(t)
    groups, out = list(by.values()), []
    for i in range(max((len(g) for g in groups), default=0)):
        out += [g[i] for g in groups if i < len(g)]
    return out


def local_slots(gpus, workers, cores_per_worker, max_threads):
    """Worker slots of this host: one per GPU (its share of the cores), else core groups."""
    cpus = sorted(os.sched_getaffinity(0))
    if gpus:
        per = max(1, len(cpus) // gpus)
        return [{"name": str(i), "cuda": str(i), "cpus": cpus[i * per:(i + 1) * per] or cpus} for i in range(gpus)]
    c = cores_per_worker or max(1, max_threads)
    k = workers or max(1, len(cpus) // c)
    if not cores_per_worker and workers:
        c = max(1, len(cpus) // k)
    return [{"name": str(i), "cuda": None, "cpus": cpus[(i * c) % len(cpus):(i * c) % len(cpus) + c]} for i in range(k)]


def slot_kinds(slots):
    kinds = {}
    for s in slots:
        f = J.facts_of(s.get("cuda"))
        kinds[machine.cpu_id(f)] = {"gpu": False}
        g = machine.machine_id(f, True, s.get("cuda")) if s.get("cuda") is not None else None
        if g:
            kinds[g] = {"gpu": True}
    return kinds


def fits(slot, job):
    if J.needs_gpu(job):
        return slot.get("cuda") is not None
    return not job["threads"] or not slot.get("cpus") or job["threads"] <= len(slot["cpus"])


class Reporter:
    """Appends each record to the store (under a lock) and prints one line per job."""

    def __init__(self, store, total, quiet=False):
        self.store, self.total, self.n, self.lock, self.quiet = store, total, 0, threading.Lock(), quiet
        self.ok = self.failed = 0

    def __call__(self, rec):
        with self.lock:
            self.store.append(rec)
            self.n += 1
            self.ok += rec["status"] == "ok"
            self.failed += rec["status"] != "ok"
            if not self.quiet:
                j, s = rec["job"], rec.get("summary") or {}
                t = f"{s['median_ms']:.4f} ms" if isinstance(s.get("median_ms"), (int, float)) else ""
                print(f"[{self.n}/{self.total}] {rec['status']:6s} {j['model_name']} {j['schedule']} {j['target']} "
                      f"{j['threads']}t {t} (worker {rec.get('worker')}, {rec.get('wall_s', 0):.1f} s, "
                      f"{rec.get('attempts', 0)} attempt(s)){'  ' + rec['reason'] if rec['reason'] else ''}",
                      file=sys.stderr, flush=True)


def lost_record(job, mid, key, why, ctx):
    """The record of a job that never came back (its worker died on every try)."""
    return {"v": 1, "key": key, "status": "failed", "reason": why, "job": {k: v for k, v in job.items() if k != "opts"},
            "opts": job["opts"], "machine": {"id": mid}, "worker": None, "commit": J.commit(),
            "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "steps": [], "attempts": 0, "result": None,
            "summary": {}, "wall_s": 0.0}


def _cached_compile(job, ctx):
    """A compile_run job's artifact from this host's cache, when a build host left it there."""
    d = os.path.join(ctx["artifacts"], J.artifact_name(job))
    if os.path.exists(os.path.join(d, ".sweep_complete")):
        return {"ok": True, "reason": "", "name": J.artifact_name(job), "cached": True, "host": "driver cache",
                "tar": J._pack(d)}
    return None


# ---------------------------------------------------------------- in this process (no Dask)

def run_threads(plan, ctx, slots, report):
    """Each slot is a thread taking the next job that fits it (--local-serial: one slot)."""
    todo = list(plan.todo)
    lock = threading.Lock()

    def take(slot):
        with lock:
            for i, t in enumerate(todo):
                if fits(slot, t[0]):
                    return todo.pop(i)
        return None

    def loop(slot):
        while True:
            t = take(slot)
            if t is None:
                return
            job, mid, key = t
            compiled = _cached_compile(job, ctx) if job["kind"] == "compile_run" else None
            rec = J.run_job(job, ctx, slot, compiled)
            if rec["key"] is None:
                rec["key"] = key
            report(rec)

    threads = [threading.Thread(target=loop, args=(s,), daemon=True) for s in slots]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for job, mid, key in todo:  # nothing here could run it
        report(lost_record(job, mid, key, "no local slot fits this job (threads > cores of a slot, or no GPU)", ctx))


# ---------------------------------------------------------------- Dask

def _worker_slot(ctx):
    """The slot of the Dask worker running this task: the LocalCluster's table, else the
    worker's environment (CUDA_VISIBLE_DEVICES, LOOM_SWEEP_CPUS=0-15)."""
    from distributed import get_worker
    w = get_worker()
    s = (ctx.get("slots") or {}).get(str(w.name))
    if s:
        return s
    cpus = None
    spec = os.environ.get("LOOM_SWEEP_CPUS")
    if spec:
        cpus = []
        for part in spec.split(","):
            a, _, b = part.partition("-")
            cpus += list(range(int(a), int(b or a) + 1))
    return {"name": str(w.name), "cuda": os.environ.get("CUDA_VISIBLE_DEVICES"), "cpus": cpus}


def dask_compile(job, ctx):
    return J.compile_job(job, ctx, _worker_slot(ctx))


def dask_run(job, ctx, compiled):
    slot = _worker_slot(ctx)
    if job["kind"] == "compile_run" and compiled is None:
        compiled = _cached_compile(job, ctx)
    return J.run_job(job, ctx, slot, compiled)


def worker_info():
    """What a worker advertises: its machine facts (for its GPU) and its slot."""
    from distributed import get_worker
    w = get_worker()
    cuda = os.environ.get("CUDA_VISIBLE_DEVICES")
    f = J.facts_of(cuda)
    return {"name": str(w.name), "facts": f, "cpu_id": machine.cpu_id(f),
            "gpu_id": machine.machine_id(f, True, cuda) if cuda not in (None, "") or f["gpus"] else None,
            "loom": J.find_loom({}) is not None}


def open_cluster(args, slots):
    """A Client on --scheduler, else on a LocalCluster of the slots (each worker one thread)."""
    import logging
    import dask
    from distributed import Client, LocalCluster
    # NVML diagnostics off: the sweep needs none, and distributed 2022.12 (Debian 12) breaks on
    # newer pynvml (its GPU name is str, not bytes); the env var reaches the worker processes.
    os.environ["DASK_DISTRIBUTED__DIAGNOSTICS__NVML"] = "False"
    dask.config.set({"distributed.scheduler.allowed-failures": args.retries_lost,
                     "distributed.worker.daemon": False, "distributed.diagnostics.nvml": False})
    if args.scheduler:
        return None, Client(args.scheduler, timeout=60)
    bench = os.path.join(ROOT, "bench")
    os.environ["PYTHONPATH"] = bench + (os.pathsep + os.environ["PYTHONPATH"] if os.environ.get("PYTHONPATH") else "")
    res = {"cpu": len(slots[0]["cpus"]), "loom": 1}
    if slots[0].get("cuda") is not None:
        res["gpu"] = 1
    cluster = LocalCluster(n_workers=len(slots), threads_per_worker=1, processes=True, resources=res,
                           dashboard_address=None, silence_logs=logging.ERROR)
    return cluster, Client(cluster)


def cluster_kinds(client, ctx):
    """Asks every worker what it is; returns ({machine id: {gpu}}, {machine id: [host]})."""
    info = client.run(worker_info)
    sinfo = client.scheduler_info()["workers"]
    kinds, hosts = {}, {}
    for addr, i in info.items():
        res = sinfo.get(addr, {}).get("resources", {})
        kinds[i["cpu_id"]] = {"gpu": False}
        hosts.setdefault(i["cpu_id"], set()).add(addr.split("://")[-1].rsplit(":", 1)[0])
        if res.get("gpu") and i["gpu_id"]:
            kinds[i["gpu_id"]] = {"gpu": True}
            hosts.setdefault(i["gpu_id"], set()).add(addr.split("://")[-1].rsplit(":", 1)[0])
    return kinds, {k: sorted(v) for k, v in hosts.items()}, info


def run_dask(plan, ctx, client, hosts, retries, report):
    from distributed import as_completed
    from distributed.scheduler import KilledWorker
    several = len(hosts) > 1
    futs, meta, compiles = [], {}, {}
    for i, (job, mid, key) in enumerate(plan.todo):
        prio = len(plan.todo) - i  # Dask runs higher first: the plan's (interleaved) order
        where = {"workers": hosts[mid]} if several else {}  # by host address: a restarted worker still fits
        compiled = None
        if job["kind"] == "compile_run":
            compiled = _cached_compile(job, ctx)
            if compiled is not None:  # the artifact travels once to the cluster, not in the task graph
                [compiled] = client.scatter([compiled], hash=False)
            else:
                cs = job["compile_spec"]
                if cs not in compiles:
                    compiles[cs] = client.submit(dask_compile, job, ctx, resources={"loom": 1}, pure=False,
                                                 priority=prio + len(plan.todo),
                                                 retries=retries, key=f"compile-{job['model_name']}-{cs[:16]}")
                compiled = compiles[cs]
        need = {"gpu": 1} if J.needs_gpu(job) else {"cpu": max(1, job["threads"])}
        f = client.submit(dask_run, job, ctx, compiled, resources=need, pure=False, retries=retries, priority=prio,
                          key=f"job-{job['model_name']}-{key_hash(key)}", **where)
        futs.append(f)
        meta[f.key] = (job, mid, key)
    for f in as_completed(futs):
        job, mid, key = meta[f.key]
        try:
            rec = f.result()
            if rec["key"] is None:
                rec["key"] = key
        except KilledWorker as e:
            rec = lost_record(job, mid, key, f"worker lost: {e}", ctx)
        except Exception as e:  # noqa: BLE001 - recorded, the sweep goes on
            rec = lost_record(job, mid, key, f"{type(e).__name__}: {e}", ctx)
        report(rec)
        f.release()


def key_hash(key):
    import hashlib
    return hashlib.sha256(key.encode()).hexdigest()[:16]
