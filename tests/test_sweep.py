#!/usr/bin/python3
"""bench/sweep on a 2-worker Dask LocalCluster, with tiny `loom bench` jobs on committed fixtures.

    /usr/bin/python3 tests/test_sweep.py path/to/loom

loom is reached through a wrapper script that logs every call (so a test can count the jobs that
started) and, once per marker file, kills itself or the Dask worker that started it."""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
import unittest

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
SWEEP = os.path.join(ROOT, "bench", "sweep")
sys.path.insert(0, os.path.join(ROOT, "bench"))
from sweep_lib.store import Store  # noqa: E402

LOOM = None

WRAPPER = """#!/bin/sh
# loom, logged; `kill-self` and `kill-worker` markers make one call die (SIGKILL) the first time.
echo "$*" >> {dir}/calls.log
case "$*" in
  *softmax_rows*--auto*)
    if [ ! -e {dir}/kill-self.done ]; then touch {dir}/kill-self.done; kill -9 $$; fi ;;
  *sigmoid_affine*--eager*)
    if [ -e {dir}/kill-worker.armed ] && [ ! -e {dir}/kill-worker.done ]; then
      touch {dir}/kill-worker.done; sleep 1; kill -9 $PPID; exit 1
    fi ;;
  *sum_prologue*)
    sleep 30 ;;
esac
exec {loom} "$@"
"""

TINY = """
[sweep]
name = "tiny"
budget_ms = 20
timeout_s = 60
retries = 1

[[matrix]]
kind = "bench"
models = ["tests/data/sigmoid_affine.onnx", "tests/data/softmax_rows.onnx"]
schedules = ["eager", "auto"]
threads = [1]
"""


def read(path):
    with open(path) as f:
        return f.read()


def sweep(*args, timeout=300):
    p = subprocess.run([SWEEP, *args], capture_output=True, text=True, timeout=timeout, cwd=ROOT)
    return p.returncode, p.stdout, p.stderr


class SweepTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="loom-sweep-test-")
        cls.loom = os.path.join(cls.dir, "loom")
        with open(cls.loom, "w") as f:
            f.write(WRAPPER.format(dir=cls.dir, loom=os.path.abspath(LOOM)))
        os.chmod(cls.loom, 0o755)
        cls.toml = os.path.join(cls.dir, "tiny.toml")
        with open(cls.toml, "w") as f:
            f.write(TINY)
        cls.store = os.path.join(cls.dir, "results.jsonl")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir, ignore_errors=True)

    def calls(self):
        try:
            return read(os.path.join(self.dir, "calls.log")).splitlines()
        except FileNotFoundError:
            return []

    def test_1_cluster_sweep_retries_and_rerun(self):
        # (a) + (b): a 2-worker LocalCluster runs the 4 jobs. softmax_rows/auto's process is killed
        # on its first try (retried by the job: 2 attempts); sigmoid_affine/eager kills its Dask
        # worker (Dask runs it again on a live worker).
        open(os.path.join(self.dir, "kill-worker.armed"), "w").close()
        t0 = time.time()
        rc, out, err = sweep("run", self.toml, "--store", self.store, "--loom", self.loom, "--workers", "2")
        self.assertEqual(rc, 0, err)
        self.assertIn("2 worker(s) (a Dask LocalCluster)", err)
        recs = Store(self.store).read()
        self.assertEqual(len(recs), 4, err)
        self.assertEqual(len({r["key"] for r in recs}), 4)
        self.assertTrue(all(r["status"] == "ok" for r in recs), err)
        by = {(r["job"]["model_name"], r["job"]["schedule"]): r for r in recs}
        killed = by[("softmax_rows", "auto")]
        self.assertEqual(killed["attempts"], 2)
        self.assertIn("killed by signal 9 (SIGKILL)", killed["steps"][0]["reason"])
        self.assertTrue(os.path.exists(os.path.join(self.dir, "kill-worker.done")), "the worker-kill hook never ran")
        calls = self.calls()

        def n(model, kind):
            return sum(model in c and f"--{kind}" in c for c in calls)
        self.assertEqual(n("sigmoid_affine", "eager"), 2, calls)  # once on the killed worker, once after
        self.assertEqual(n("softmax_rows", "auto"), 2, calls)     # killed itself, then retried
        # no finished result lost: the other jobs ran once each, and each has its one record
        self.assertEqual(n("sigmoid_affine", "auto"), 1, calls)
        self.assertEqual(n("softmax_rows", "eager"), 1, calls)
        for r in recs:
            self.assertGreater(r["summary"]["median_ms"], 0)
            self.assertEqual(r["machine"]["cores"], os.cpu_count())
            self.assertEqual(len(r["steps"][-1]["cpus"]), 1)  # pinned to one core of its worker
        print(f"\n  cluster sweep with a killed job and a killed worker: {time.time() - t0:.1f} s", file=sys.stderr)

        # (c) a rerun skips every done job: no loom process starts, no record is added
        before = len(calls)
        rc, out, err = sweep("run", self.toml, "--store", self.store, "--loom", self.loom, "--workers", "2")
        self.assertEqual(rc, 0, err)
        self.assertIn("0 to run, 4 already in", err)
        self.assertEqual(len(self.calls()), before)
        self.assertEqual(len(Store(self.store).read()), 4)

        # (a) the merged table has each job, and is the same twice
        outs = [os.path.join(self.dir, f) for f in ("m.md", "m.json", "m.csv", "m2.md", "m2.json", "m2.csv")]
        for i in (0, 3):
            rc, out, err = sweep("merge", "--store", self.store, "--markdown", outs[i], "--json", outs[i + 1],
                                 "--csv", outs[i + 2])
            self.assertEqual(rc, 0, err)
        for i in range(3):
            self.assertEqual(read(outs[i]), read(outs[i + 3]))
        doc = json.loads(read(outs[1]))
        self.assertEqual(len(doc["machines"]), 1)
        rows = doc["machines"][0]["rows"]
        self.assertEqual([(r["model"], r["schedule"]) for r in rows],
                         [("sigmoid_affine", "auto"), ("sigmoid_affine", "eager"),
                          ("softmax_rows", "auto"), ("softmax_rows", "eager")])
        self.assertTrue(all(r["vs_eager"] for r in rows))
        md = read(outs[0])
        self.assertIn("| bench | softmax_rows | host | 1 | auto |", md)
        self.assertEqual(len(read(outs[2]).splitlines()), 5)

    def test_2_timeout_is_failed_and_retried_only_on_request(self):
        # a step that outlives timeout_s is killed, retried (bounded), then recorded failed with the
        # reason; a plain rerun skips it, --retry-failed runs it again
        toml = os.path.join(self.dir, "slow.toml")
        with open(toml, "w") as f:
            f.write('[[matrix]]\nmodels = ["tests/data/sum_prologue.onnx"]\nschedules = ["eager"]\n'
                    'threads = [1]\ntimeout_s = 1\nretries = 1\nbudget_ms = 20\n')
        store = os.path.join(self.dir, "slow.jsonl")
        t0 = time.time()
        rc, out, err = sweep("run", toml, "--store", store, "--loom", self.loom, "--local-serial")
        self.assertEqual(rc, 1, err)
        self.assertLess(time.time() - t0, 20)  # the sleeping wrapper was killed with its group, twice
        (r,) = Store(store).read()
        self.assertEqual(r["status"], "failed")
        self.assertEqual(r["reason"], "timed out after 1 s")
        self.assertEqual(r["attempts"], 2)
        rc, out, err = sweep("run", toml, "--store", store, "--loom", self.loom, "--local-serial")
        self.assertEqual(rc, 0, err)
        self.assertIn("0 to run, 1 already in", err)
        rc, out, err = sweep("run", toml, "--store", store, "--loom", self.loom, "--local-serial", "--retry-failed")
        self.assertIn("1 to run, 0 already in", err)
        self.assertEqual(len(Store(store).read()), 2)
        rc, out, err = sweep("merge", "--store", store)
        self.assertIn("FAILED: timed out after 1 s", out)

    def test_3_bad_sweep_files(self):
        # (d) each mistake names the file, the key and the fix
        cases = [
            ('[[matrix]]\nmodels = ["tests/data/mlp.onnx"]\nschedule = ["auto"]\n',
             ["bad.toml", "matrix[0]", "unknown key 'schedule'", "did you mean 'schedules'"]),
            ('[[matrix]]\nmodels = ["tests/data/mlp.onnx"]\nschedules = ["autoo"]\n',
             ["bad.toml", "matrix[0].schedules[0]", "'autoo' is not a bench schedule", "did you mean 'auto'",
              "valid: eager, inline, auto"]),
            ('[[matrix]]\nmodels = ["tests/data/nope.onnx"]\nschedules = ["auto"]\n',
             ["bad.toml", "matrix[0].models", "'tests/data/nope.onnx' matches no file", "relative to the checkout"]),
            ('[[matrix]]\nkind = "bench"\nmodels = ["tests/data/mlp.onnx"]\nschedules = ["auto"]\ntargets = ["cuda"]\n',
             ["bad.toml", "matrix[0].targets", "use kind = \"compile_run\" for cuda"]),
            ('[[matrix]]\nmodels = ["tests/data/mlp.onnx"]\nschedules = ["auto"]\nthreads = "two"\n',
             ["bad.toml", "matrix[0].threads", "expected a list of ints"]),
            ('[[matrix]\nmodels = 1\n', ["bad.toml", "not valid TOML", "line 1"]),
            ('[sweep]\nname = "x"\n', ["bad.toml", "no [[matrix]] block", "kind, models and schedules"]),
        ]
        path = os.path.join(self.dir, "bad.toml")
        for text, wants in cases:
            with open(path, "w") as f:
                f.write(text)
            rc, out, err = sweep("run", path, "--store", os.path.join(self.dir, "bad.jsonl"), "--dry-run")
            self.assertEqual(rc, 1, text)
            for w in wants:
                self.assertIn(w, err, f"{text!r}: {err}")
        rc, out, err = sweep("run", os.path.join(self.dir, "missing.yaml"), "--dry-run")
        self.assertIn("no such sweep file", err)
        # the same sweep in YAML plans the same jobs
        y = os.path.join(self.dir, "tiny.yaml")
        with open(y, "w") as f:
            f.write(textwrap.dedent("""\
                sweep: {budget_ms: 20}
                matrix:
                  - kind: bench
                    models: [tests/data/sigmoid_affine.onnx, tests/data/softmax_rows.onnx]
                    schedules: [eager, auto]
                    threads: [1]
                """))
        rc, out, err = sweep("run", y, "--store", os.path.join(self.dir, "y.jsonl"), "--dry-run", "--workers", "2")
        self.assertEqual(rc, 0, err)
        self.assertEqual(len([l for l in out.splitlines() if l.startswith("run ")]), 4)

    def test_4_torn_last_line(self):
        # a crash mid-append leaves half a line: readers skip it, the next record starts a new line
        path = os.path.join(self.dir, "torn.jsonl")
        st = Store(path)
        st.append({"key": "a", "status": "ok"})
        with open(path, "a") as f:
            f.write('{"key": "b", "stat')
        self.assertEqual([r["key"] for r in st.read()], ["a"])
        self.assertEqual(st.skipped_lines, 1)
        st.append({"key": "c", "status": "failed"})
        self.assertEqual([r["key"] for r in st.read()], ["a", "c"])
        st.append({"key": "c", "status": "ok"})
        st.append({"key": "c", "status": "failed"})
        self.assertEqual(st.latest()["c"]["status"], "ok")  # an ok record stands over a later failure


if __name__ == "__main__":
    if len(sys.argv) < 2 or not os.path.exists(sys.argv[1]):
        sys.exit("usage: tests/test_sweep.py path/to/loom")
    LOOM = sys.argv.pop(1)
    unittest.main(verbosity=2)
