"""The sweep file: models x schedules x targets x threads, in TOML or YAML, expanded into jobs.

    [sweep]                      # optional; defaults for every [[matrix]] block
    name = "cpu-fixtures"
    timeout_s = 300              # one attempt of one job step (subprocess) is killed after this
    retries = 2                  # attempts after the first, on a nonzero exit or a timeout
    budget_ms = 200

    [[matrix]]                   # one block = one product; a sweep is the union of its blocks
    kind = "bench"               # bench | autoschedule | compile_run
    models = ["tests/data/sigmoid_affine.onnx", "tests/data/gpu_suite/*.onnx"]
    schedules = ["eager", "auto", "halide:li2018", "hand", "schedules/mlp.cpu.sched"]
    targets = ["host"]           # bench: host; autoschedule, compile_run: host, cuda or a Halide target
    threads = [1, 2]             # HL_NUM_THREADS, and that many cores pinned (0: the worker's cores)
    flags = []                   # extra loom flags, part of the job's identity (e.g. ["--tf32"])
    inputs = []                  # --input bindings (x=1x3x224x224, batch=8)
    budget_ms = 200              # bench, and autoschedule with bench = true (then `loom bench --schedule`)
    timeout_s, retries           # as in [sweep]
    reps = 200, warmup = 20, tol = 1e-5      # compile_run: tools/loom_run --reps --warmup --tol
    data = "loom"                # compile_run: "loom" (loom compile's reference data) or "torch"

Schedules per kind: bench: eager, inline, auto, ort, halide:NAME, hand, F.sched; autoschedule:
auto, tune:N; compile_run: auto, eager, hand, F.sched. `hand` is schedules/<model>.<cpu|cuda>.sched
(a tests/data fixture's <model>_fixture.cpu.sched first); a model without one has no such job.

Paths are relative to the Loom checkout (the folder holding bench/). Every mistake is a SweepError
naming the file, the key and the fix.
"""
import glob
import hashlib
import json
import os
import re

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

KINDS = ("bench", "autoschedule", "compile_run")
SWEEP_KEYS = {"name", "timeout_s", "retries", "budget_ms", "reps", "warmup", "tol", "data", "description"}
MATRIX_KEYS = {"kind", "models", "schedules", "targets", "threads", "flags", "inputs", "budget_ms",
               "timeout_s", "retries", "reps", "warmup", "tol", "data", "bench", "name"}
BENCH_WORDS = ("eager", "inline", "auto", "ort")
SCHEDULE_HELP = {
    "bench": "eager, inline, auto, ort, halide:NAME (mullapudi2016, li2018, adams2019), hand "
             "(schedules/<model>.cpu.sched, or <model>_fixture.cpu.sched for tests/data; jobs without one are "
             "left out) or a .sched file",
    "autoschedule": "auto or tune:N (loom autoschedule --tune N)",
    "compile_run": "auto, eager, hand (schedules/<model>.<cpu|cuda>.sched) or a .sched file",
}


class SweepError(Exception):
    """A mistake in a sweep file: the message names the file, the key and the fix."""


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def sha256_text(text):
    return hashlib.sha256(text.encode()).hexdigest()


def rel(path):
    """A path relative to the checkout when inside it (what job records and tables show)."""
    p = os.path.abspath(path)
    return os.path.relpath(p, ROOT) if p.startswith(ROOT + os.sep) else p


class Job:
    """One job of a sweep, before it is placed on a machine. `spec` is everything that decides
    the result besides the model, target, machine and threads; its sha256 keys the result."""

    def __init__(self, kind, model, schedule, target, threads, opts, schedule_file=None):
        self.kind, self.model, self.schedule, self.target, self.threads = kind, model, schedule, target, threads
        self.opts = opts                      # flags, inputs, budget_ms, reps, warmup, data, bench, timeout_s, retries
        self.schedule_file = schedule_file    # absolute path of a schedule file, or None
        self.model_name = os.path.splitext(os.path.basename(model))[0]
        self.model_sha256 = sha256_file(model)
        spec = {"kind": kind, "schedule": schedule, "flags": opts.get("flags", []), "inputs": opts.get("inputs", [])}
        if schedule_file:
            spec["schedule_sha256"] = sha256_file(schedule_file)
        if kind == "bench" or (kind == "autoschedule" and opts.get("bench")):
            spec["budget_ms"] = opts["budget_ms"]
        if kind == "autoschedule":
            spec["bench"] = bool(opts.get("bench"))
        if kind == "compile_run":
            spec.update(reps=opts["reps"], warmup=opts["warmup"], data=opts["data"], tol=opts["tol"])
        self.spec = spec
        self.spec_sha256 = sha256_text(json.dumps(spec, sort_keys=True))

    @property
    def label(self):
        """The schedule as a table shows it: its kind word or file, then any extra flags."""
        return " ".join([self.schedule] + list(self.opts.get("flags", [])))

    def is_gpu(self):
        """Runs on a GPU worker: a CUDA compile_run (a CUDA autoschedule needs no GPU)."""
        return self.kind == "compile_run" and "cuda" in self.target

    def compile_spec(self):
        """What decides a compile_run job's artifact (not its timing): shared by its reruns."""
        s = {k: self.spec[k] for k in ("schedule", "flags", "inputs", "data") if k in self.spec}
        s.update(model_sha256=self.model_sha256, target=self.target, schedule_sha256=self.spec.get("schedule_sha256"))
        return sha256_text(json.dumps(s, sort_keys=True))

    def to_dict(self):
        return {"kind": self.kind, "model": rel(self.model), "model_name": self.model_name,
                "schedule_word": self.schedule, "compile_spec": self.compile_spec() if self.kind == "compile_run" else None,
                "model_sha256": self.model_sha256, "schedule": self.label, "schedule_file":
                rel(self.schedule_file) if self.schedule_file else None, "target": self.target,
                "threads": self.threads, "spec": self.spec, "spec_sha256": self.spec_sha256, "opts": self.opts}

    def key(self, machine_id):
        """The store's key: (model hash, spec hash, target, machine, threads)."""
        return "|".join([self.model_sha256, self.spec_sha256, self.target, machine_id, str(self.threads)])


def load(path):
    """Parses a sweep file and expands it into Jobs (deterministic order)."""
    if not os.path.exists(path):
        raise SweepError(f"{path}: no such sweep file (examples: bench/sweeps/*.toml)")
    text = open(path, "rb").read()
    ext = os.path.splitext(path)[1].lower()
    try:
        if ext == ".toml":
            import tomllib
            doc = tomllib.loads(text.decode())
        elif ext in (".yaml", ".yml"):
            import yaml
            doc = yaml.safe_load(text) or {}
        else:
            raise SweepError(f"{path}: a sweep file is .toml or .yaml/.yml, not '{ext or 'no extension'}'")
    except SweepError:
        raise
    except Exception as e:  # tomllib.TOMLDecodeError, yaml.YAMLError: their text has the line
        raise SweepError(f"{path}: not valid {ext[1:].upper()}: {e}") from None
    if not isinstance(doc, dict):
        raise SweepError(f"{path}: the top level must be a table with [sweep] and [[matrix]] blocks")
    return expand(doc, path)


def _close(word, options):
    import difflib
    m = difflib.get_close_matches(word, list(options), n=1)
    return f"; did you mean '{m[0]}'?" if m else ""


def _check_keys(table, allowed, where, path):
    for k in table:
        if k not in allowed:
            raise SweepError(f"{path}: {where}: unknown key '{k}'{_close(k, allowed)} "
                             f"(allowed: {', '.join(sorted(allowed))})")


def _list(v, key, where, path, typ=str):
    if isinstance(v, typ) and not isinstance(v, bool):
        v = [v]
    if not isinstance(v, list) or not all(isinstance(x, typ) and not isinstance(x, bool) for x in v):
        raise SweepError(f"{path}: {where}.{key}: expected a list of {typ.__name__}s, got {v!r}")
    return v


def _num(v, key, where, path, lo=0):
    if isinstance(v, bool) or not isinstance(v, (int, float)) or v < lo:
        raise SweepError(f"{path}: {where}.{key}: expected a number >= {lo}, got {v!r}")
    return v


def expand(doc, path):
    _check_keys(doc, {"sweep", "matrix"}, "top level", path)
    sweep = doc.get("sweep", {})
    if not isinstance(sweep, dict):
        raise SweepError(f"{path}: [sweep] must be a table")
    _check_keys(sweep, SWEEP_KEYS, "[sweep]", path)
    blocks = doc.get("matrix")
    if not blocks:
        raise SweepError(f"{path}: no [[matrix]] block: add one with kind, models and schedules "
                         f"(see bench/sweeps/cpu_fixtures.toml)")
    if isinstance(blocks, dict):
        blocks = [blocks]
    if not isinstance(blocks, list):
        raise SweepError(f"{path}: 'matrix' must be a list of tables ([[matrix]] in TOML, '- kind: …' in YAML)")
    jobs, seen = [], set()
    for i, b in enumerate(blocks):
        where = f"matrix[{i}]"
        if not isinstance(b, dict):
            raise SweepError(f"{path}: {where}: expected a table, got {b!r}")
        _check_keys(b, MATRIX_KEYS, where, path)
        kind = b.get("kind", "bench")
        if kind not in KINDS:
            raise SweepError(f"{path}: {where}.kind: unknown kind '{kind}'{_close(kind, KINDS)} "
                             f"(one of {', '.join(KINDS)})")
        for req in ("models", "schedules"):
            if req not in b:
                raise SweepError(f"{path}: {where}: missing '{req}' (a list; schedules: {SCHEDULE_HELP[kind]})")
        opts = {
            "flags": _list(b.get("flags", []), "flags", where, path),
            "inputs": _list(b.get("inputs", []), "inputs", where, path),
            "timeout_s": _num(b.get("timeout_s", sweep.get("timeout_s", 600)), "timeout_s", where, path, 1),
            "retries": int(_num(b.get("retries", sweep.get("retries", 2)), "retries", where, path)),
        }
        if kind in ("bench", "autoschedule"):
            opts["budget_ms"] = _num(b.get("budget_ms", sweep.get("budget_ms", 500)), "budget_ms", where, path, 1)
        if kind == "autoschedule":
            opts["bench"] = bool(b.get("bench", False))
        if kind == "compile_run":
            opts["reps"] = int(_num(b.get("reps", sweep.get("reps", 200)), "reps", where, path, 1))
            opts["warmup"] = int(_num(b.get("warmup", sweep.get("warmup", 20)), "warmup", where, path))
            opts["tol"] = float(_num(b.get("tol", sweep.get("tol", 1e-5)), "tol", where, path))  # loom_run --tol
            data = b.get("data", sweep.get("data", "loom"))
            if data not in ("loom", "torch"):
                raise SweepError(f"{path}: {where}.data: '{data}' is not 'loom' (loom compile writes inputs and "
                                 f"reference outputs) or 'torch' (the GPU worker makes them with PyTorch, "
                                 f"bench/gpu/workloads.py)")
            opts["data"] = data
        targets = _list(b.get("targets", ["host"]), "targets", where, path)
        for t in targets:
            if kind == "bench" and t != "host":
                raise SweepError(f"{path}: {where}.targets: loom bench times the host only, not '{t}'; "
                                 f"use kind = \"compile_run\" for {t}")
        threads = _list(b.get("threads", [0]), "threads", where, path, int)
        if any(t < 0 for t in threads):
            raise SweepError(f"{path}: {where}.threads: thread counts are >= 0 (0: all of the worker's cores)")
        models = []
        for pat in _list(b["models"], "models", where, path):
            full = pat if os.path.isabs(pat) else os.path.join(ROOT, pat)
            hits = sorted(glob.glob(full)) if any(c in pat for c in "*?[") else ([full] if os.path.exists(full) else [])
            if not hits:
                raise SweepError(f"{path}: {where}.models: '{pat}' matches no file (paths are relative to the "
                                 f"checkout {ROOT}; export generated workloads first, e.g. "
                                 f"frontends/torch/export_workloads.py or bench/gpu/export_workloads.py)")
            models += [h for h in hits if h not in models]
        scheds = _list(b["schedules"], "schedules", where, path)
        for j, s in enumerate(scheds):
            _check_schedule(kind, s, f"{where}.schedules[{j}]", path)
        for m in models:
            for s in scheds:
                for t in targets:
                    sfile = _schedule_file(kind, s, m, t)
                    if s == "hand" and sfile is None:
                        continue  # no hand schedule for this model and target: nothing to measure
                    for n in (threads if not ("cuda" in t and kind == "compile_run") else [0]):
                        job = Job(kind, m, s, t, n, dict(opts), sfile)
                        ident = (job.model_sha256, job.spec_sha256, t, n)
                        if ident not in seen:  # the same job from two blocks runs once
                            seen.add(ident)
                            jobs.append(job)
    if not jobs:
        raise SweepError(f"{path}: the sweep expands to no job (every 'hand' schedule missing?)")
    return {"name": sweep.get("name", os.path.splitext(os.path.basename(path))[0]), "path": path, "jobs": jobs}


def _check_schedule(kind, s, where, path):
    ok = False
    if s.endswith(".sched"):
        full = s if os.path.isabs(s) else os.path.join(ROOT, s)
        if not os.path.exists(full):
            raise SweepError(f"{path}: {where}: schedule file '{s}' does not exist (relative to {ROOT})")
        ok = kind != "autoschedule"
    elif kind == "bench":
        ok = s in BENCH_WORDS or s == "hand" or re.fullmatch(r"halide:(mullapudi2016|li2018|adams2019)", s)
    elif kind == "autoschedule":
        ok = s == "auto" or re.fullmatch(r"tune:[1-9][0-9]*", s)
    elif kind == "compile_run":
        ok = s in ("auto", "eager", "hand")
    if not ok:
        raise SweepError(f"{path}: {where}: '{s}' is not a {kind} schedule{_close(s, list(BENCH_WORDS) + ['hand'])}; "
                         f"valid: {SCHEDULE_HELP[kind]}")


def _schedule_file(kind, s, model, target):
    if s.endswith(".sched"):
        return s if os.path.isabs(s) else os.path.join(ROOT, s)
    if s == "hand":  # schedules/<stem>.<cpu|cuda>.sched; a tests/data fixture's own is <stem>_fixture.…
        stem = os.path.splitext(os.path.basename(model))[0]
        t = "cuda" if "cuda" in target else "cpu"
        names = [f"{stem}.{t}.sched"]
        if os.path.dirname(os.path.abspath(model)) == os.path.join(ROOT, "tests", "data"):
            names.insert(0, f"{stem}_fixture.{t}.sched")
        for n in names:
            f = os.path.join(ROOT, "schedules", n)
            if os.path.exists(f):
                return f
        return None
    return None
