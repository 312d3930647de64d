"""One job's steps, run on a worker as subprocesses: `loom bench`, `loom autoschedule`, `loom
compile` then `tools/loom_run`. Each step is pinned to the worker's cores (taskset, else
sched_setaffinity) and GPU (CUDA_VISIBLE_DEVICES), killed with its whole process group after the
job's timeout, and retried a bounded number of times on a nonzero exit or a timeout; the job then
returns a record, ok or failed with its reason. Nothing here writes the store: the driver does."""
import hashlib
import io
import json
import os
import platform
import re
import shutil
import signal
import subprocess
import tarfile
import tempfile
import time

from . import machine
from .spec import ROOT, sha256_file

_commit = None
_facts = {}


def commit():
    """The worker's Loom checkout: its git commit, '+dirty' when its tracked files differ;
    $LOOM_SWEEP_COMMIT when set (a copied tree whose .git, if any, is not the one it came from)."""
    global _commit
    if _commit is None and os.environ.get("LOOM_SWEEP_COMMIT"):
        _commit = os.environ["LOOM_SWEEP_COMMIT"]
    if _commit is None:
        def git(*a):
            try:
                return subprocess.run(["git", "-C", ROOT, *a], capture_output=True, text=True, timeout=30).stdout.strip()
            except (OSError, subprocess.SubprocessError):
                return ""
        c = git("rev-parse", "--short=12", "HEAD")
        _commit = c + ("+dirty" if git("status", "--porcelain", "--untracked-files=no") else "") if c else "unknown"
    return _commit


def facts_of(cuda):
    if cuda not in _facts:
        _facts[cuda] = machine.facts(cuda_visible=cuda)
    return _facts[cuda]


def find_loom(ctx):
    for p in (ctx.get("loom"), os.environ.get("LOOM"), os.path.join(ROOT, "build", "loom"), shutil.which("loom")):
        if p and os.path.isfile(p) and os.access(p, os.X_OK):
            return os.path.abspath(p)
    return None


def find_loom_run(ctx):
    """tools/loom_run: the path given, else built once per host (CUDA build where nvcc's headers exist)."""
    p = ctx.get("loom_run")
    if p and os.path.isfile(p):
        return p
    src = os.path.join(ROOT, "tools", "loom_run", "loom_run.cpp")
    tag = hashlib.sha256(open(src, "rb").read()).hexdigest()[:12]
    cache = os.path.join(os.path.expanduser("~"), ".cache", "loom", "sweep")
    os.makedirs(cache, exist_ok=True)
    out = os.path.join(cache, f"loom_run-{tag}")
    if not os.path.exists(out):
        import fcntl
        with open(out + ".lock", "w") as lk:
            fcntl.flock(lk, fcntl.LOCK_EX)  # two workers of one host build it once
            if not os.path.exists(out):
                tmp = f"{out}.tmp{os.getpid()}"
                subprocess.run(["sh", os.path.join(ROOT, "tools", "loom_run", "build.sh"), tmp], check=True,
                               capture_output=True, timeout=600)
                os.rename(tmp, out)
    return out


def describe_exit(rc, stderr):
    if rc < 0:
        try:
            name = signal.Signals(-rc).name
        except ValueError:
            name = "?"
        return f"killed by signal {-rc} ({name})"
    lines = [l.strip() for l in (stderr or "").strip().splitlines() if l.strip()]
    return f"exit code {rc}" + (f": {lines[-1][:300]}" if lines else "")


def run_step(cmd, slot, threads, timeout, retries, env_extra=None, log=None):
    """Runs cmd pinned to the slot; retries on a nonzero exit or timeout. Returns (ok, reason,
    attempts, stdout, stderr, seconds of the last attempt)."""
    cpus = list(slot.get("cpus") or [])
    if cpus and threads:
        cpus = cpus[:threads]
    env = dict(os.environ)
    env["LOOM_SOURCE_DIR"] = ROOT
    n = threads or len(cpus) or os.cpu_count()
    env["HL_NUM_THREADS"] = env["OMP_NUM_THREADS"] = str(n)
    if slot.get("cuda") is not None:
        env["CUDA_VISIBLE_DEVICES"] = str(slot["cuda"])
    env.update(env_extra or {})
    full = list(cmd)
    preexec = None
    if cpus:
        if shutil.which("taskset"):
            full = ["taskset", "-c", ",".join(map(str, cpus))] + full  # execs the command: same pid
        else:
            preexec = lambda: os.sched_setaffinity(0, cpus)  # noqa: E731
    reason, out, err, secs = "", "", "", 0.0
    for attempt in range(1, retries + 2):
        t0 = time.time()
        p = subprocess.Popen(full, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                             cwd=ROOT, start_new_session=True, preexec_fn=preexec)
        try:
            out, err = p.communicate(timeout=timeout)
            rc = p.returncode
            reason = "" if rc == 0 else describe_exit(rc, err)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(p.pid, signal.SIGKILL)  # the step and everything it started
            except ProcessLookupError:
                pass
            out, err = p.communicate()
            reason = f"timed out after {timeout:g} s"
        secs = time.time() - t0
        if log is not None:
            log.append({"cmd": full, "attempt": attempt, "seconds": round(secs, 3), "ok": not reason,
                        "reason": reason, "cpus": cpus, "cuda": slot.get("cuda")})
        if not reason:
            return True, "", attempt, out, err, secs
    return False, reason, retries + 1, out, err, secs


def _slug(s):
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", s).strip("_")[:60]


def artifact_name(job):
    return f"{job['model_name']}__{_slug(job['schedule'])}__{_slug(job['target'])}__{job['compile_spec'][:12]}"


def _pack(d):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as t:
        for name in sorted(os.listdir(d)):
            t.add(os.path.join(d, name), arcname=name)
    return buf.getvalue()


def compile_job(job, ctx, slot):
    """compile_run's first step: `loom compile` into the artifact cache (reused when there), the
    artifact packed (without its static library and object) for a GPU worker on another host."""
    cache = ctx["artifacts"]
    final = os.path.join(cache, artifact_name(job))
    info = {"ok": True, "reason": "", "name": artifact_name(job), "host": platform.node(), "cached": True}
    if not os.path.exists(os.path.join(final, ".sweep_complete")):
        loom = find_loom(ctx)
        if not loom:
            return {**info, "ok": False, "reason": f"no loom binary on {platform.node()} to compile with (--loom, "
                    f"$LOOM or build/loom); compile on a build host with `bench/sweep compile SWEEP` and copy "
                    f"{os.path.relpath(cache, ROOT)} here", "tar": None}
        os.makedirs(cache, exist_ok=True)
        tmp = tempfile.mkdtemp(prefix=".compile-", dir=cache)
        cmd = [loom, "compile", os.path.join(ROOT, job["model"]), "--target", job["target"], "-o", tmp, "--force"]
        cmd += {"auto": ["--auto"], "eager": ["--eager"]}.get(job["schedule_word"], [])
        if job["schedule_file"]:
            cmd += ["--schedule", os.path.join(ROOT, job["schedule_file"])]
        if job["opts"]["data"] == "torch":
            cmd.append("--no-reference")
        for i in job["opts"]["inputs"]:
            cmd += ["--input", i]
        cmd += job["opts"]["flags"]
        log = []
        ok, reason, attempts, out, err, secs = run_step(cmd, slot, 0, job["opts"]["timeout_s"],
                                                        job["opts"]["retries"], log=log)
        info.update(cached=False, compile_s=round(secs, 3), attempts=attempts, steps=log)
        if not ok:
            shutil.rmtree(tmp, ignore_errors=True)
            return {**info, "ok": False, "reason": f"loom compile: {reason}", "tar": None}
        for f in os.listdir(tmp):
            if (f.startswith("lib") and f.endswith(".a")) or f.endswith("_halide.o"):
                os.remove(os.path.join(tmp, f))  # loom_run loads the .so
        with open(os.path.join(tmp, ".sweep_complete"), "w") as f:
            json.dump({k: v for k, v in info.items() if k != "steps"}, f)
        if os.path.exists(final):
            shutil.rmtree(final)  # an incomplete earlier try
        os.rename(tmp, final)
    info["tar"] = _pack(final)
    return info


def _machine(slot, gpu_job):
    f = facts_of(slot.get("cuda"))
    return f, machine.machine_id(f, gpu_job, slot.get("cuda"))


def needs_gpu(job):
    return job["kind"] == "compile_run" and "cuda" in job["target"]


def run_job(job, ctx, slot, compiled=None):
    """Runs one job on this worker; returns its record (status ok or failed, with the reason)."""
    t0 = time.time()
    gpu_job = needs_gpu(job)
    f, mid = _machine(slot, gpu_job)
    rec = {"v": 1, "key": None, "status": "failed", "reason": "", "job": {k: v for k, v in job.items() if k != "opts"},
           "opts": job["opts"], "machine": {"id": mid, "host": f["host"], "cpu": f["cpu"], "cores": f["cores"],
                                            "isa": f["isa"], "avx512": f["avx512"],
                                            "gpu": machine.gpu_name(f, slot.get("cuda")) if gpu_job else None,
                                            "cuda_visible": slot.get("cuda")},
           "worker": slot.get("name"), "commit": commit(), "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
           "steps": [], "attempts": 0, "result": None, "summary": {}}
    if mid is None:
        rec.update(reason=f"no GPU on {f['host']} for a {job['target']} job", wall_s=0.0)
        return rec
    rec["key"] = "|".join([job["model_sha256"], job["spec_sha256"], job["target"], mid, str(job["threads"])])
    model = os.path.join(ROOT, job["model"])
    if not os.path.exists(model) or sha256_file(model) != job["model_sha256"]:
        rec.update(reason=f"{job['model']} on {f['host']} is missing or differs from the driver's "
                          f"(sha256 {job['model_sha256'][:12]}…): the workers need the same checkout", wall_s=0.0)
        return rec
    work = tempfile.mkdtemp(prefix="loom-sweep-")
    try:
        reason = {"bench": _bench, "autoschedule": _autoschedule, "compile_run": _compile_run}[job["kind"]](
            job, ctx, slot, rec, work, compiled)
    except Exception as e:  # a bug of ours or a broken worker: a failed record, never a lost one
        reason = f"{type(e).__name__}: {e}"
    finally:
        shutil.rmtree(work, ignore_errors=True)
    rec["status"] = "failed" if reason else "ok"
    rec["reason"] = reason or ""
    rec["attempts"] = max([s["attempt"] for s in rec["steps"]] or [0])
    rec["wall_s"] = round(time.time() - t0, 3)
    return rec


def _opts_cmd(job):
    cmd = []
    for i in job["opts"]["inputs"]:
        cmd += ["--input", i]
    return cmd + job["opts"]["flags"]


def _bench_flags(job):
    w = job["schedule_word"]
    if job["schedule_file"]:
        return ["--schedule", os.path.join(ROOT, job["schedule_file"])]
    if w.startswith("halide:"):
        return ["--halide", w.split(":", 1)[1]]
    return ["--" + w]


def _load_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def _bench(job, ctx, slot, rec, work, compiled, sched_flags=None):
    loom = find_loom(ctx)
    if not loom:
        return f"no loom binary on {rec['machine']['host']} (--loom, $LOOM or build/loom)"
    out = os.path.join(work, "bench.json")
    cmd = [loom, "bench", os.path.join(ROOT, job["model"])] + (sched_flags or _bench_flags(job)) + [
        "--json", out, "--budget-ms", str(job["opts"]["budget_ms"])] + _opts_cmd(job)
    ok, reason, _, so, se, _ = run_step(cmd, slot, job["threads"], job["opts"]["timeout_s"], job["opts"]["retries"],
                                        log=rec["steps"])
    rep = _load_json(out)
    if rep:
        rec["result"] = rep
        rows = rep.get("rows") or [{}]
        r = rows[0]
        rec["summary"] = {k: r.get(k) for k in ("median_ms", "min_ms", "max_ms", "runs", "gbps", "gflops",
                                                 "pct_roofline", "rel_error", "compile_s", "ok")}
        rec["summary"]["threads"] = rep.get("threads")
        if not ok and r.get("fail_reason"):
            reason = f"{reason}; {r.get('schedule')}: {r.get('failed_at')} {r.get('fail_reason') or r.get('error')}"
        elif ok and not r.get("ok", False):
            reason = f"row {r.get('schedule')} failed: {r.get('error') or r.get('fail_reason')}"
    elif ok:
        reason = f"loom bench wrote no report ({out})"
    return reason


def _autoschedule(job, ctx, slot, rec, work, compiled):
    loom = find_loom(ctx)
    if not loom:
        return f"no loom binary on {rec['machine']['host']} (--loom, $LOOM or build/loom)"
    sched = os.path.join(work, f"{job['model_name']}.sched")
    cmd = [loom, "autoschedule", os.path.join(ROOT, job["model"]), "-o", sched, "--force"]
    if job["target"] != "host":
        cmd += ["--target", job["target"]]
    if job["schedule_word"].startswith("tune:"):
        cmd += ["--tune", job["schedule_word"].split(":", 1)[1]]
    cmd += _opts_cmd(job)
    ok, reason, _, so, se, secs = run_step(cmd, slot, job["threads"], job["opts"]["timeout_s"],
                                           job["opts"]["retries"], log=rec["steps"])
    if not ok:
        return f"loom autoschedule: {reason}"
    text = open(sched).read()
    rec["result"] = {"schedule_text": text, "schedule_sha256": hashlib.sha256(text.encode()).hexdigest()}
    rec["summary"] = {"schedule_sha256": rec["result"]["schedule_sha256"], "autoschedule_s": round(secs, 3),
                      "statements": sum(1 for l in text.splitlines() if l.strip() and not l.lstrip().startswith("#"))}
    if job["opts"].get("bench"):  # then time the schedule it wrote (loom bench --schedule)
        made = dict(rec["result"])
        reason = _bench(job, ctx, slot, rec, work, None, sched_flags=["--schedule", sched])
        rec["result"] = dict(rec["result"] or {}, **made)
        rec["summary"].update(schedule_sha256=made["schedule_sha256"], autoschedule_s=round(secs, 3))
        return reason
    return ""


def _compile_run(job, ctx, slot, rec, work, compiled):
    if compiled is None:
        compiled = compile_job(job, ctx, slot)
    rec["compile"] = {k: v for k, v in compiled.items() if k != "tar"}
    if not compiled["ok"]:
        return compiled["reason"]
    art = os.path.join(work, compiled["name"])
    os.makedirs(art)
    with tarfile.open(fileobj=io.BytesIO(compiled["tar"]), mode="r:gz") as t:
        t.extractall(art)
    if job["opts"]["data"] == "torch":
        data, reason = torch_data(job, ctx, slot, rec)
        if reason:
            return reason
        os.symlink(data, os.path.join(art, "data"))
    try:
        runner = find_loom_run(ctx)
    except (subprocess.SubprocessError, OSError) as e:
        return f"cannot build tools/loom_run on {rec['machine']['host']}: {e}"
    out = os.path.join(work, "run.json")
    cmd = [runner, art, "--reps", str(job["opts"]["reps"]), "--warmup", str(job["opts"]["warmup"]),
           "--tol", repr(job["opts"]["tol"]), "--json", out]
    cmd += ["--mode", "device" if "cuda" in job["target"] else "host"]
    cudnn = _cudnn_dir(ctx) if "cuda" in job["target"] else None
    env = {"LD_LIBRARY_PATH": cudnn + (":" + os.environ["LD_LIBRARY_PATH"] if os.environ.get("LD_LIBRARY_PATH") else "")} \
        if cudnn else None
    ok, reason, _, so, se, _ = run_step(cmd, slot, job["threads"], job["opts"]["timeout_s"], job["opts"]["retries"],
                                        env_extra=env, log=rec["steps"])
    r = _load_json(out)
    if r:
        rec["result"] = r
        rec["summary"] = {"median_ms": r.get("median_ms"), "min_ms": r.get("min_ms"), "ok": r.get("ok"),
                          "compile_s": compiled.get("compile_s")}
        res = [l for l in so.splitlines() if l.startswith("RESULT")]
        rec["result"]["stdout_result"] = res[-1] if res else ""
    elif ok:
        return f"loom_run wrote no report ({out})"
    return f"loom_run: {reason}" if not ok else ""


def torch_data(job, ctx, slot, rec):
    """A workload's inputs and float64 reference (gpu_data.py), made once per host and sweep run:
    every schedule of one model reads the same seeded data, so the jobs after the first share it
    (ctx["data_cache"]; a lock per model keeps two workers of one host from making it twice)."""
    import fcntl
    cache = ctx.get("data_cache") or os.path.join(os.path.expanduser("~"), ".cache", "loom", "sweep", "data")
    os.makedirs(cache, exist_ok=True)
    d = os.path.join(cache, f"{job['model_name']}-{job['model_sha256'][:16]}")
    with open(d + ".lock", "w") as lk:
        fcntl.flock(lk, fcntl.LOCK_EX)
        if os.path.exists(os.path.join(d, ".complete")):
            rec.setdefault("data", {"cached": True, "dir": d})
            return os.path.join(d, "data"), ""
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
        py = ctx.get("python") or os.environ.get("LOOM_SWEEP_PYTHON") or "python3"
        cmd = [py, os.path.join(ROOT, "bench", "sweep_lib", "gpu_data.py"), d, job["model_name"]]
        ok, reason, _, so, se, secs = run_step(cmd, slot, 0, job["opts"]["timeout_s"], job["opts"]["retries"],
                                               log=rec["steps"])
        if not ok:
            return None, f"inputs by PyTorch ({py}): {reason}"
        open(os.path.join(d, ".complete"), "w").close()
        rec["data"] = {"cached": False, "dir": d, "seconds": round(secs, 3)}
        return os.path.join(d, "data"), ""


_cudnn = {}


def _cudnn_dir(ctx):
    """cuDNN ships inside PyTorch's wheel on the GPU machines (nvidia.cudnn), as run_gpu_bench.sh finds it."""
    py = ctx.get("python") or os.environ.get("LOOM_SWEEP_PYTHON") or "python3"
    if py not in _cudnn:
        try:
            _cudnn[py] = subprocess.run(
                [py, "-c", "import nvidia.cudnn, os; print(os.path.join(list(nvidia.cudnn.__path__)[0], 'lib'))"],
                capture_output=True, text=True, timeout=60).stdout.strip() or None
        except (OSError, subprocess.SubprocessError):
            _cudnn[py] = None
    return _cudnn[py]
