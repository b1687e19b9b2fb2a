"""memra-dash targets MEMRA.json [PEER.json...]: the project's serving targets (bench/targets.json,
issue 23) checked against a memra run and, for the targets against llama.cpp, its peer runs: the
numbers of docs/PERF.md's "Serving targets" table, from the data.

The targets are data, a JSON list of objects, each with a "name", a "kind", the benchmark keys the
kind reads and a "min" (the target is met when the measured value >= min); "why" (text) and
"issue" (a number or text) are notes, shown in --json only. Kinds:

    ratio    "num", "den"          median tokens/s of num over den's, both in the memra run
                                   (batched-decode scaling: DecodeBatch/.../B8 over .../B1)
    counter  "benchmark", "counter" the benchmark's median of that counter (hbm_fraction; any
                                   key of its JSON entries, or gbench's metric "fraction")
    versus   "benchmark" [, "peer"] memra's benchmark over the peer benchmark versus pairs with it
                                   (versus.pair_runs, the arm taken from the key), e.g.
                                   Prefill512/<shape>/<dtype>/gemm over llama.cpp's pp512; "peer"
                                   picks one peer key where several would pair (tg128 and tg256).
                                   "benchmark" may list alternative arms of one measure (the gemm
                                   and flash prefill arms): the best ratio measured counts, and
                                   the row names its key

Keys are gbench keys (gbench.normalize_name: a name's iterations:/repeats:/manual_time parts are
dropped, so either form may be written). A target the runs cannot measure (its benchmark is not in
the run, has no tokens/s or no such counter, no peer run is given or none pairs) is reported as
"not measured: <why>", counted neither as met nor as not met.

Exit status: 0 when every measured target is met, 1 when one is not, 2 on bad input: unreadable
runs, a malformed targets file (the offending entry named), not exactly one memra run, runs of
different cards (unless --cross-card: the ratios against the peer are then the machines' as much
as the engines', and said so), two peer benchmarks pairing with one target, or no target measured
at all (a mistaken file is likelier than a run that measures none of them).
"""
from __future__ import annotations

import json
import math
import os
import sys

from . import gbench, table, versus

KINDS = {"ratio": ("num", "den"), "counter": ("benchmark", "counter"), "versus": ("benchmark",)}
OPTIONAL = {"versus": ("peer",)}
NOTES = ("why", "issue")


class TargetsError(Exception):
    pass


def load_targets(path: str) -> list[dict]:
    """The targets of the file, validated: each entry as written, its benchmark keys normalized."""
    doc = gbench.read_json(path, TargetsError)
    if not isinstance(doc, list) or not doc:
        raise TargetsError(f"{path}: wants a non-empty JSON list of targets (objects with name, kind, min)")
    out, names = [], set()
    for i, t in enumerate(doc):
        name = t.get("name") if isinstance(t, dict) else None
        where = f"{path}: entry {i + 1}" + (f" ({name!r})" if isinstance(name, str) and name else "")
        if not isinstance(t, dict):
            raise TargetsError(f"{where}: not an object")
        if not isinstance(name, str) or not name.strip():
            raise TargetsError(f"{where}: no \"name\" (a non-empty string)")
        if name in names:
            raise TargetsError(f"{where}: a second target of that name")
        names.add(name)
        kind = t.get("kind")
        if kind not in KINDS:
            raise TargetsError(f"{where}: \"kind\" is {kind!r}; wants one of {', '.join(KINDS)}")
        lo = t.get("min")
        if isinstance(lo, bool) or not isinstance(lo, (int, float)) or not math.isfinite(lo):
            raise TargetsError(f"{where}: \"min\" is {lo!r}; wants a number (met when the value >= min)")
        allowed = {"name", "kind", "min", *NOTES, *KINDS[kind], *OPTIONAL.get(kind, ())}
        extra = sorted(set(t) - allowed)
        if extra:
            raise TargetsError(f"{where}: unknown key(s) {', '.join(extra)} for kind {kind} "
                               f"(it takes {', '.join(KINDS[kind] + OPTIONAL.get(kind, ()))}, min, name, why, issue)")
        t = dict(t)
        for k in KINDS[kind] + OPTIONAL.get(kind, ()):
            v = t.get(k)
            if v is None and k in OPTIONAL.get(kind, ()):
                continue
            if kind == "versus" and k == "benchmark" and isinstance(v, list):
                if not v or not all(isinstance(x, str) and x.strip() for x in v):
                    raise TargetsError(f"{where}: \"benchmark\" wants a non-empty string, or a non-empty list "
                                       "of them (alternative arms)")
                t[k] = [gbench.normalize_name(x.strip()) for x in v]
                continue
            if not isinstance(v, str) or not v.strip():
                raise TargetsError(f"{where}: kind {kind} wants \"{k}\" (a non-empty string)")
            t[k] = v.strip() if k == "counter" else gbench.normalize_name(v.strip())
        for b in (benchmarks_of(t) if kind == "versus" else ()):
            if gbench.parse_key(b)["kind"] not in ("decode", "prefill", "batch"):
                raise TargetsError(f"{where}: versus pairs Decode, Prefill<N> and DecodeBatch benchmarks, not {b}")
        if not isinstance(t.get("why", ""), str):
            raise TargetsError(f"{where}: \"why\" wants a string")
        if isinstance(t.get("issue"), bool) or not isinstance(t.get("issue", ""), (str, int)):
            raise TargetsError(f"{where}: \"issue\" wants a number or a string")
        out.append(t)
    return out


def benchmarks_of(t: dict) -> list[str]:
    """A versus target's benchmark keys: the one it names, or its alternative arms."""
    b = t["benchmark"]
    return list(b) if isinstance(b, list) else [b]


def _rate_of(run: gbench.Run, key: str):
    """(median tokens/s, None), or (None, why not)."""
    b = run.benches.get(key)
    if b is None:
        return None, f"{key} not in {run.file}"
    v = b.median("throughput")
    if not v:
        return None, f"{key} has no tokens/s"
    return v, None


def _ratio(t: dict, memra: gbench.Run, peers: list[gbench.Run]) -> dict:
    num, why = _rate_of(memra, t["num"])
    if why:
        return {"why": why}
    den, why = _rate_of(memra, t["den"])
    if why:
        return {"why": why}
    return {"value": num / den, "num_rate": num, "den_rate": den,
            "detail": f"{versus._rate(num)} / {versus._rate(den)} tok/s"}


def _counter(t: dict, memra: gbench.Run, peers: list[gbench.Run]) -> dict:
    b = memra.benches.get(t["benchmark"])
    if b is None:
        return {"why": f"{t['benchmark']} not in {memra.file}"}
    v = b.median(t["counter"])
    if v is None:
        return {"why": f"{t['benchmark']} has no {t['counter']}"}
    n = len(b.rep_values(t["counter"]))
    return {"value": v, "detail": f"{t['counter']}, " + (f"median of {n}" if n else "from the aggregates")}


def _versus(t: dict, memra: gbench.Run, peers: list[gbench.Run]) -> dict:
    """The best ratio over the target's benchmark keys that measure, or why none does."""
    keys = benchmarks_of(t)
    best, whys = None, []
    for key in keys:
        m = _versus_one(t, key, memra, peers)
        if "why" in m:
            whys.append(m["why"])
        elif best is None or m["value"] > best["value"]:
            best = m
    if best is None:
        return {"why": "; ".join(dict.fromkeys(whys))}
    if len(keys) > 1:
        best["detail"] = f"{gbench.parse_key(best['benchmark'])['arm']}: {best['detail']}"
    return best


def _versus_one(t: dict, key: str, memra: gbench.Run, peers: list[gbench.Run]) -> dict:
    _, why = _rate_of(memra, key)
    if why:
        return {"why": why}
    if not peers:
        return {"why": "no peer run given"}
    info = gbench.parse_key(key)
    arms = {"decode_arm": "graph_stream", "prefill_arm": "gemm", "batch_arm": "eager"}
    arms[{"decode": "decode_arm", "prefill": "prefill_arm", "batch": "batch_arm"}[info["kind"]]] = info["arm"]
    rows = [r for r in versus.pair_runs(memra, peers, **arms)["rows"]
            if r["memra_key"] == key and (t.get("peer") is None or r["peer_key"] == t["peer"])]
    if not rows:
        return {"why": "no benchmark of the peer runs pairs with it" + (f" as {t['peer']}" if t.get("peer") else "")}
    if len(rows) > 1:
        files = {p.label: p.file for p in peers}
        raise TargetsError(f"target {t['name']!r}: {len(rows)} peer benchmarks pair with {key}: "
                           + ", ".join(f"{r['peer_key']} ({files.get(r['peer'], r['peer'])})" for r in rows)
                           + (": name one in the target's \"peer\"" if len({r["peer_key"] for r in rows}) == len(rows)
                              else ": give one peer run of that shape"))
    r = rows[0]
    return {"value": r["ratio"], "benchmark": key, "memra_rate": r["memra"], "peer_rate": r["peer_rate"],
            "peer_key": r["peer_key"], "peer": r["peer"],
            "detail": f"{versus._rate(r['memra'])} / {versus._rate(r['peer_rate'])} tok/s"}


MEASURE = {"ratio": _ratio, "counter": _counter, "versus": _versus}


def check(targets: list[dict], memra: gbench.Run, peers: list[gbench.Run]) -> dict:
    """One row per target: value and met (True / False), or met None and why it was not measured."""
    rows = []
    for t in targets:
        m = MEASURE[t["kind"]](t, memra, peers)
        row = {"name": t["name"], "kind": t["kind"], "min": t["min"], "value": m.pop("value", None),
               "met": None, "not_measured": m.pop("why", None), "target": t, **m}
        if row["value"] is not None:
            row["met"] = row["value"] >= t["min"]
        rows.append(row)
    summary = {"met": sum(r["met"] is True for r in rows), "not_met": sum(r["met"] is False for r in rows),
               "not_measured": sum(r["met"] is None for r in rows)}
    return {"rows": rows, "summary": summary}


def _num(v: float, kind: str, lo: float) -> str:
    """The value as the table shows it: x for ratios, 3 places for counters; more places where the
    rounding would make a value just under the target read as the target."""
    places = 3 if kind == "counter" else 2
    while places < 6 and v < lo and round(v, places) >= lo:
        places += 1
    return f"{v:.{places}f}" + ("" if kind == "counter" else "x")


def _min(t: dict) -> str:
    lo = t["min"]
    s = f"{lo:g}"
    return f">= {s}" + ("" if t["kind"] == "counter" else "x")


def print_report(res: dict, memra: gbench.Run, peers: list[gbench.Run], targets_path: str, markdown: bool,
                 out=sys.stdout):
    print(f"memra: {memra.file} (commit {memra.commit}, {memra.date_str() or 'no date'}, {memra.card})", file=out)
    for p in peers:
        print(f"peer:  {p.file} ({p.label}, {p.date_str() or 'no date'}, {p.card})", file=out)
    print(f"targets: {targets_path}", file=out)
    if any(p.card != memra.card for p in peers):
        print("CARDS DIFFER: the ratios against the peer are the machines' as much as the engines'", file=out)
    cols = ["target", "measured", "min", "result", "from"]
    cells = []
    for r in res["rows"]:
        if r["met"] is None:
            cells.append([r["name"], f"not measured: {r['not_measured']}", _min(r["target"]), "—", ""])
        else:
            cells.append([r["name"], _num(r["value"], r["kind"], r["min"]), _min(r["target"]),
                          "met" if r["met"] else "not met", r.get("detail", "")])
    table.print_table(cols, cells, markdown, out)
    s = res["summary"]
    print(f"{s['met']} met, {s['not_met']} not met, {s['not_measured']} not measured", file=out)


def _shown(path: str) -> str:
    """The path relative to the working directory where it lies below it (bench/targets.json)."""
    rel = os.path.relpath(path)
    return path if rel.startswith("..") else rel


def main(args) -> int:
    args.targets = _shown(args.targets)
    try:
        targets = load_targets(args.targets)
        runs = gbench.load_runs([args.memra] + args.peers)
    except (TargetsError, gbench.ParseError) as ex:
        print(f"memra-dash targets: {ex}", file=sys.stderr)
        return 2
    memra = [r for r in runs if not r.peer]
    peers = [r for r in runs if r.peer]
    if len(memra) != 1:
        print(f"memra-dash targets: wants one memra run (and any peer runs, context \"peer\"); got "
              f"{len(memra)} memra run(s) ({', '.join(r.file for r in memra) or 'none'})", file=sys.stderr)
        return 2
    memra = memra[0]
    why = versus.cross_card(memra, peers)
    if why and not args.cross_card:
        print(f"memra-dash targets: {why} (--cross-card checks the targets anyway)", file=sys.stderr)
        return 2
    try:
        res = check(targets, memra, peers)
    except TargetsError as ex:
        print(f"memra-dash targets: {ex}", file=sys.stderr)
        return 2
    print_report(res, memra, peers, args.targets, args.markdown)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"memra": memra.file, "peers": [p.file for p in peers], "targets": args.targets, **res},
                      f, indent=1)
            f.write("\n")
    if not any(r["met"] is not None for r in res["rows"]):
        print(f"memra-dash targets: no target of {args.targets} can be measured from {memra.file}"
              + (f" and {', '.join(p.file for p in peers)}" if peers else "")
              + ": a mistaken file is likelier", file=sys.stderr)
        return 2
    failed = [r["name"] for r in res["rows"] if r["met"] is False]
    return 1 if failed else 0
