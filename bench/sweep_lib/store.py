"""The append-only result store: one JSON object per line (default bench/out/sweep/results.jsonl).

A record is appended as one whole line by one write(2) on an O_APPEND descriptor, then fsync'd,
by the driver only (workers return records; they never write here). A crash can leave at most a
torn last line: readers skip a line that does not parse, and the next writer first ends such a
line with a newline so that its own record starts on a line of its own. Records are never
rewritten; the latest record of a key wins (an ok one over a failed one)."""
import json
import os
import sys

from .spec import ROOT

DEFAULT = os.path.join(ROOT, "bench", "out", "sweep", "results.jsonl")


class Store:
    def __init__(self, path=DEFAULT):
        self.path = path
        self.skipped_lines = 0

    def read(self):
        """Every parseable record, in file order."""
        recs, self.skipped_lines = [], 0
        if not os.path.exists(self.path):
            return recs
        with open(self.path, "rb") as f:
            data = f.read()
        lines = data.split(b"\n")
        for i, line in enumerate(lines):
            if not line.strip():
                continue
            try:
                r = json.loads(line)
                if isinstance(r, dict) and "key" in r:
                    recs.append(r)
                    continue
            except ValueError:
                pass
            self.skipped_lines += 1
            if i < len(lines) - 1:  # a torn last line is expected after a crash; one inside is not
                print(f"sweep: {self.path}:{i + 1}: skipped a line that is not a record", file=sys.stderr)
        return recs

    def latest(self):
        """key -> the record that stands for it: the last ok record, else the last failed one."""
        best = {}
        for r in self.read():
            k, cur = r["key"], best.get(r["key"])
            if cur is None or r.get("status") == "ok" or cur.get("status") != "ok":
                best[k] = r
        return best

    def append(self, rec):
        os.makedirs(os.path.dirname(os.path.abspath(self.path)), exist_ok=True)
        line = (json.dumps(rec, sort_keys=True, separators=(",", ":")) + "\n").encode()
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            size = os.fstat(fd).st_size
            if size:
                with open(self.path, "rb") as f:
                    f.seek(size - 1)
                    if f.read(1) != b"\n":
                        line = b"\n" + line  # end a torn line left by a crash
            n = os.write(fd, line)
            if n != len(line):
                raise OSError(f"short write to {self.path} ({n} of {len(line)} bytes)")
            os.fsync(fd)
        finally:
            os.close(fd)
