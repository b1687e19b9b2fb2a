#!/usr/bin/env python3
"""bench/timeline_report.py — where a replayed decode step goes, from the in-graph timeline.

Input: the CSV that `MEMRA_BENCH_TIMELINE=<shape> bench_decode` prints in a `-DMEMRA_TIMELINE=ON`
build (one row per launch and replay: replay, launch, name, blocks, sms, max_per_sm, ready_ns,
go_ns, last_go_ns; times from the replay's first go), or its prefill mode's
(`MEMRA_BENCH_TIMELINE_PREFILL`: eager runs in place of replays, column `run`, and host_ns). A
launch's share of the step is the go of the launch after it minus its own go (when its
dependencies resolved to when the next kernel's did); medians over the replays.

Packed grids: where the file has sms and max_per_sm, a launch of no more blocks than the SMs the
widest launch covered (the card's count, as far as the file shows) that put two or more blocks on
one SM in some replay ran packed onto few SMs (src/cuda/launch.cuh spread_smem); the report counts
them and their share.

  timeline_report.py STEPS.csv                 per kernel: launches, total and mean share
  timeline_report.py STEPS.csv --launches 0:14 and those launches one by one (share, lead =
                                               go - ready: how long its first block waited)
  timeline_report.py A.csv B.csv               per kernel: A and B totals and B - A; with the
                                               same launch sequence, the launches that moved most
  --json                                       the same as one JSON object (for scripts)

Exit status 2 with a message on a file that is not such a CSV (missing columns, replays with
different launch counts, a launch whose go is missing).
"""
import argparse
import csv
import json
import statistics
import sys
from collections import OrderedDict

COLUMNS = ("replay", "launch", "name", "blocks", "ready_ns", "go_ns")
PLACEMENT = ("sms", "max_per_sm")  # optional: files from before these columns have none


class TimelineError(Exception):
    pass


def load(path):
    """Returns (names, blocks, share_ns, lead_ns, step_ns, packed): per launch, medians over replays;
    packed[k] is None where the file has no placement columns."""
    try:
        with open(path, newline="") as f:
            rows = list(csv.DictReader(f))
    except OSError as e:
        raise TimelineError(f"{path}: {e.strerror}")
    if not rows:
        raise TimelineError(f"{path}: no rows (is it bench_decode's MEMRA_BENCH_TIMELINE output?)")
    rep_col = "run" if "run" in rows[0] and "replay" not in rows[0] else "replay"  # the prefill mode's runs
    missing = [c for c in COLUMNS if c not in rows[0] and not (c == "replay" and rep_col == "run")]
    if missing:
        raise TimelineError(f"{path}: missing column(s) {', '.join(missing)}")
    placed = all(c in rows[0] for c in PLACEMENT)
    go, ready, names, blocks, sms, most = {}, {}, {}, {}, {}, {}
    for i, r in enumerate(rows, start=2):
        try:
            rep, k = int(r[rep_col]), int(r["launch"])
            go[rep, k], ready[rep, k] = int(r["go_ns"]), int(r["ready_ns"])
            blocks[k] = int(r["blocks"])
            if placed:
                sms[rep, k], most[rep, k] = int(r["sms"]), int(r["max_per_sm"])
        except (TypeError, ValueError):
            raise TimelineError(f"{path}:{i}: not a number in {rep_col}/launch/blocks/ready_ns/go_ns/sms/max_per_sm")
        if names.setdefault(k, r["name"]) != r["name"]:
            raise TimelineError(f"{path}:{i}: launch {k} is {r['name']} here, {names[k]} in another {rep_col}")
    replays = sorted({rep for rep, _ in go})
    n = max(names) + 1
    for rep in replays:
        for k in range(n):
            if (rep, k) not in go:
                raise TimelineError(f"{path}: {rep_col} {rep} has no launch {k} (every {rep_col} runs the same launches)")
    share = [statistics.median(go[rep, k + 1] - go[rep, k] for rep in replays) for k in range(n - 1)] + [0]
    lead = [statistics.median(go[rep, k] - ready[rep, k] for rep in replays) for k in range(n)]
    step = statistics.median(go[rep, n - 1] - go[rep, 0] for rep in replays)
    packed = [None] * n
    if placed:
        card = max(sms.values())
        packed = [blocks[k] <= card and max(most[rep, k] for rep in replays) > 1 for k in range(n)]
    return [names[k] for k in range(n)], [blocks[k] for k in range(n)], share, lead, step, packed


def by_kernel(names, blocks, share, packed=None):
    """name[blocks] -> (launches, total ns, packed launches), in order of first appearance."""
    out = OrderedDict()
    for i, (name, b, s) in enumerate(zip(names, blocks, share)):
        key = f"{name}[{b}]"
        n, t, p = out.get(key, (0, 0.0, 0))
        out[key] = (n + 1, t + s, p + bool(packed and packed[i]))
    return out


def report_one(path, launches, as_json):
    names, blocks, share, lead, step, packed = load(path)
    kernels = by_kernel(names, blocks, share, packed)
    placed = packed[0] is not None
    packed_ns = sum(s for s, p in zip(share, packed) if p)
    if as_json:
        doc = {"file": path, "launches": len(names), "step_us": step / 1e3,
               "kernels": {k: {"launches": n, "total_us": t / 1e3, **({"packed": p} if placed else {})}
                           for k, (n, t, p) in kernels.items()}}
        if placed:
            doc["packed"] = {"launches": sum(map(bool, packed)), "share_us": packed_ns / 1e3}
        if launches:
            doc["per_launch"] = [{"launch": k, "name": names[k], "blocks": blocks[k], "share_us": share[k] / 1e3,
                                  "lead_us": lead[k] / 1e3, **({"packed": packed[k]} if placed else {})}
                                 for k in launches]
        print(json.dumps(doc, indent=1))
        return
    print(f"{path}: {len(names)} launches, first go to last go {step / 1e3:.1f} us (median over replays)")
    for key, (n, t, p) in sorted(kernels.items(), key=lambda kv: -kv[1][1]):
        note = f"  packed in {p}" if p else ""
        print(f"  {key:40s} {n:4d} launches  total {t / 1e3:8.1f} us  mean {t / n / 1e3:6.2f} us{note}")
    if placed:
        print(f"  packed grids: {sum(map(bool, packed))} launches, {packed_ns / 1e3:.1f} us of shares")
    for k in launches:
        note = "  packed" if packed[k] else ""
        print(f"  {k:4d} {names[k]:28s} {blocks[k]:6d} blocks  share {share[k] / 1e3:6.2f} us  lead {lead[k] / 1e3:6.2f} us{note}")


def report_two(path_a, path_b, as_json, top):
    a, b = load(path_a), load(path_b)
    ka, kb = by_kernel(a[0], a[1], a[2]), by_kernel(b[0], b[1], b[2])
    keys = list(ka) + [k for k in kb if k not in ka]
    rows = [(k, ka.get(k, (0, 0.0, 0)), kb.get(k, (0, 0.0, 0))) for k in keys]
    same_sequence = a[0] == b[0]
    moved = []
    if same_sequence:
        moved = sorted(range(len(a[0])), key=lambda k: -abs(b[2][k] - a[2][k]))[:top]
    if as_json:
        doc = {"a": path_a, "b": path_b, "step_us": [a[4] / 1e3, b[4] / 1e3],
               "kernels": {k: {"launches": [na, nb], "total_us": [ta / 1e3, tb / 1e3]} for k, (na, ta, _), (nb, tb, _) in rows},
               "same_sequence": same_sequence,
               "moved": [{"launch": k, "name": a[0][k], "share_us": [a[2][k] / 1e3, b[2][k] / 1e3]} for k in moved]}
        print(json.dumps(doc, indent=1))
        return
    print(f"A {path_a}: {len(a[0])} launches, {a[4] / 1e3:.1f} us; B {path_b}: {len(b[0])} launches, {b[4] / 1e3:.1f} us;"
          f" B - A {(b[4] - a[4]) / 1e3:+.1f} us")
    for k, (na, ta, _), (nb, tb, _) in sorted(rows, key=lambda r: -abs(r[2][1] - r[1][1])):
        print(f"  {k:40s} A {na:4d} x {ta / 1e3:8.1f} us   B {nb:4d} x {tb / 1e3:8.1f} us   {(tb - ta) / 1e3:+8.1f} us")
    if same_sequence:
        print(f"  the {len(moved)} launches that moved most:")
        for k in moved:
            print(f"  {k:4d} {a[0][k]:28s} {a[2][k] / 1e3:6.2f} -> {b[2][k] / 1e3:6.2f} us")
    else:
        print("  (different launch sequences: per-kernel totals only)")


def parse_range(text):
    lo, _, hi = text.partition(":")
    try:
        return list(range(int(lo), int(hi) if hi else int(lo) + 1))
    except ValueError:
        raise TimelineError(f"--launches {text}: expected FIRST:END (launch indices, END excluded)")


def main(argv):
    ap = argparse.ArgumentParser(description="Summarise bench_decode's in-graph timeline CSV (one file, or A/B).")
    ap.add_argument("csv", nargs="+", help="STEPS.csv, or A.csv B.csv")
    ap.add_argument("--launches", default="", help="FIRST:END: also list these launches one by one")
    ap.add_argument("--top", type=int, default=12, help="A/B: how many of the most-moved launches to list")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    try:
        if len(args.csv) == 1:
            names = load(args.csv[0])[0]
            launches = [k for k in parse_range(args.launches) if k < len(names)] if args.launches else []
            report_one(args.csv[0], launches, args.json)
        elif len(args.csv) == 2:
            report_two(args.csv[0], args.csv[1], args.json, args.top)
        else:
            raise TimelineError("one CSV, or two to compare")
    except TimelineError as e:
        print(f"timeline_report: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
