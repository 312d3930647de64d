"""One deterministic table of a store: the record standing for each key (store.latest), rows
sorted by machine kind, job kind, model, target, threads, schedule; markdown (bench/RESULTS.md's
style), JSON and CSV. Ratios compare rows of one machine kind only (`vs eager`: the eager row's
median over this row's, same machine, model, target and threads)."""
import csv
import io
import json
import math

COLUMNS = ["machine", "hosts", "kind", "model", "target", "threads", "schedule", "status", "median_ms", "min_ms",
           "vs_eager", "rel_error", "compile_s", "attempts", "reason", "commit", "key"]


def rows_of(latest):
    hosts = {}
    for r in latest.values():
        hosts.setdefault(r["machine"].get("id") or "?", set()).add(r["machine"].get("host") or "?")
    rows = []
    for r in latest.values():
        j, s, m = r["job"], r.get("summary") or {}, r["machine"]
        mid = m.get("id") or "?"
        rows.append({
            "machine": mid, "hosts": ",".join(sorted(h for h in hosts[mid] if h != "?")) or "?",
            "kind": j["kind"], "model": j["model_name"], "target": j["target"],
            "threads": j["threads"] or (s.get("threads") or 0), "schedule": j["schedule"], "status": r["status"],
            "median_ms": s.get("median_ms"), "min_ms": s.get("min_ms"), "vs_eager": None,
            "rel_error": s.get("rel_error"), "compile_s": s.get("compile_s"), "attempts": r.get("attempts"),
            "reason": r.get("reason") or "", "commit": r.get("commit") or "", "key": r["key"]})
    rows.sort(key=lambda x: (x["machine"], x["kind"], x["model"], x["target"], x["threads"], x["schedule"], x["key"]))
    eager = {(x["machine"], x["kind"], x["model"], x["target"], x["threads"]): x["median_ms"]
             for x in rows if x["schedule"] == "eager" and x["status"] == "ok" and x["median_ms"]}
    for x in rows:
        e = eager.get((x["machine"], x["kind"], x["model"], x["target"], x["threads"]))
        if e and x["status"] == "ok" and x["median_ms"]:
            x["vs_eager"] = round(e / x["median_ms"], 4)
    return rows


def _f(v, p=4):
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "–"
    if isinstance(v, float):
        return f"{v:.{p}f}" if abs(v) >= 1e-3 or v == 0 else f"{v:.2e}"
    return str(v)


def markdown(rows, store_path):
    kinds = sorted({r["machine"] for r in rows})
    ok = sum(r["status"] == "ok" for r in rows)
    out = [f"## Sweep results ({len(rows)} jobs, {ok} ok, {len(rows) - ok} failed; "
           f"{len(kinds)} machine kind{'s' if len(kinds) != 1 else ''})", "",
           f"From `{store_path}` by `bench/sweep merge`. Each machine kind has its own table; ratios "
           f"compare rows of one kind only. `vs eager`: the eager row's median over this row's "
           f"(same model, target and threads; > 1 is faster). Failed jobs keep their reason.", ""]
    for k in kinds:
        mine = [r for r in rows if r["machine"] == k]
        out += [f"### {k} (hosts: {mine[0]['hosts']})", "",
                "| kind | model | target | threads | schedule | median ms | min ms | vs eager | rel err | "
                "status | commit |", "| --- | --- | --- | ---: | --- | ---: | ---: | ---: | ---: | --- | --- |"]
        for r in mine:
            st = r["status"] if r["status"] == "ok" else f"FAILED: {r['reason']}".replace("|", "/")
            ve = f"{r['vs_eager']:.2f}×" if r["vs_eager"] else "–"
            out.append(f"| {r['kind']} | {r['model']} | {r['target']} | {r['threads'] or 'all'} | {r['schedule']} | "
                       f"{_f(r['median_ms'])} | {_f(r['min_ms'])} | {ve} | {_f(r['rel_error'], 2)} | {st} | "
                       f"{r['commit']} |")
        out.append("")
    return "\n".join(out)


def to_json(rows, store_path):
    kinds = sorted({r["machine"] for r in rows})
    doc = {"store": store_path, "machines": [{"id": k, "hosts": next(r["hosts"] for r in rows if r["machine"] == k),
                                              "rows": [r for r in rows if r["machine"] == k]} for k in kinds]}
    return json.dumps(doc, indent=1, sort_keys=True) + "\n"


def to_csv(rows):
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=COLUMNS, lineterminator="\n")
    w.writeheader()
    for r in rows:
        w.writerow(r)
    return buf.getvalue()


def compare(a, b):
    """Medians of the keys two stores share (both ok): B / A per job, and their spread."""
    lines, ratios = [], []
    for k in sorted(set(a) & set(b)):
        ra, rb = a[k], b[k]
        ma, mb = (ra.get("summary") or {}).get("median_ms"), (rb.get("summary") or {}).get("median_ms")
        if ra["status"] != "ok" or rb["status"] != "ok" or not ma or not mb:
            continue
        ratios.append(mb / ma)
        j = ra["job"]
        lines.append(f"{j['model_name']:<16} {j['schedule']:<24} {j['target']:<6} {j['threads']:>2}t "
                     f"{ma:10.4f} {mb:10.4f}  {mb / ma:6.3f}")
    if not ratios:
        return "no job is ok in both stores", None
    g = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
    head = f"{'model':<16} {'schedule':<24} {'target':<6} thr {'A ms':>10} {'B ms':>10}  B / A"
    tail = (f"{len(ratios)} jobs ok in both (of {len(set(a) | set(b))} keys); B / A geomean {g:.3f}, "
            f"min {min(ratios):.3f}, max {max(ratios):.3f}")
    return "\n".join([head] + lines + [tail]), {"n": len(ratios), "geomean": g, "min": min(ratios), "max": max(ratios)}
