"""memra-dash compare BASE.json CONTENDER.json: per benchmark, the median time of each run, the
relative change, and the two-sided Mann-Whitney U p-value over the per-repetition times (what
Google Benchmark's tools/compare.py tests). Exit 1 when a benchmark is slower by more than the
threshold with p < alpha; 0 otherwise; 2 on a usage or input error.

Benchmarks are matched by key (the name without iterations:/repeats:/manual_time parts), so a
re-run with another repetition count still pairs up. Both runs must come from the same card
(context "gpu"): across cards the difference is the machine, so such a pair is refused (exit 2)
unless --cross-card asks for the table anyway, which then never exits 1. The compared value is real_time per
iteration (for memra's benchmarks the GPU time of one token, step or prefill): time up means
throughput down, so "slower" is one test for both.
"""
from __future__ import annotations

import json
import re
import sys

from . import gbench, stats

UTEST_MIN_REPETITIONS = 2      # compare.py: fewer and it computes no p-value
UTEST_OPTIMAL_REPETITIONS = 9  # compare.py: "lowest reasonable number"


def fmt_time(ns: float | None) -> str:
    if ns is None:
        return "-"
    for unit, f in (("s", 1e9), ("ms", 1e6), ("us", 1e3)):
        if ns >= f:
            return f"{ns / f:#.4g} {unit}"
    return f"{ns:#.4g} ns"


def compare_runs(base: gbench.Run, cont: gbench.Run, threshold: float = 0.05, alpha: float = 0.05,
                 filt: str | None = None) -> dict:
    rx = re.compile(filt) if filt else None
    rows = []
    only_base, only_cont = [], []
    for key in list(base.benches) + [k for k in cont.benches if k not in base.benches]:
        if rx and not rx.search(key):
            continue
        b, c = base.benches.get(key), cont.benches.get(key)
        if b is None:
            only_cont.append(key)
            continue
        if c is None:
            only_base.append(key)
            continue
        mb, mc = b.median("time"), c.median("time")
        row = {"key": key, "base": mb, "contender": mc, "change": None, "p": None, "method": None,
               "u": None, "n_base": len(b.rep_values("time")), "n_contender": len(c.rep_values("time")),
               "verdict": "", "note": ""}
        if mb and mc is not None:
            row["change"] = mc / mb - 1.0
        xb, xc = b.rep_values("time"), c.rep_values("time")
        if len(xb) >= UTEST_MIN_REPETITIONS and len(xc) >= UTEST_MIN_REPETITIONS:
            u, p, method = stats.mannwhitneyu(xb, xc)
            row.update(u=u, p=p, method=method)
            floor = stats.exact_p(0, len(xb), len(xc)) if method == "exact" else 0.0
            if floor >= alpha:
                row["note"] = f"{len(xb)} vs {len(xc)} repetitions cannot reach p < {alpha}"
            elif min(len(xb), len(xc)) < UTEST_OPTIMAL_REPETITIONS:
                row["note"] = f"fewer than {UTEST_OPTIMAL_REPETITIONS} repetitions: weak test"
        else:
            row["note"] = "no p-value: aggregates only, no per-repetition entries" if not (xb and xc) \
                else f"no p-value: fewer than {UTEST_MIN_REPETITIONS} repetitions"
        ch = row["change"]
        significant = row["p"] is not None and row["p"] < alpha
        if ch is not None and abs(ch) > threshold:
            if significant:
                row["verdict"] = "REGRESSION" if ch > 0 else "faster"
            else:
                row["verdict"] = "slower?" if ch > 0 else "faster?"
        elif ch is not None:
            row["verdict"] = "same"
            if significant:
                row["note"] = (row["note"] + "; " if row["note"] else "") + "significant, within the threshold"
        rows.append(row)
    regressions = [r for r in rows if r["verdict"] == "REGRESSION"]
    return {"rows": rows, "regressions": regressions, "only_base": only_base, "only_contender": only_cont,
            "threshold": threshold, "alpha": alpha}


def print_report(res: dict, base: gbench.Run, cont: gbench.Run, out=sys.stdout):
    print(f"base:      {base.file} (commit {base.commit}, {base.date_str() or 'no date'}, {base.card})", file=out)
    print(f"contender: {cont.file} (commit {cont.commit}, {cont.date_str() or 'no date'}, {cont.card})", file=out)
    if base.card != cont.card:
        print(f"CARDS DIFFER: {base.card} vs {cont.card}: the changes below are the machines' as much as the "
              f"code's; nothing is flagged", file=out)
    print(f"time per iteration (real_time), median over repetitions; change = contender/base - 1 "
          f"(+ = slower); p = two-sided Mann-Whitney U over the repetition times; flagged when "
          f"slower by > {res['threshold']:.1%} with p < {res['alpha']}", file=out)
    rows = res["rows"]
    w = max([len("benchmark")] + [len(r["key"]) for r in rows])
    head = f"{'benchmark':<{w}}  {'base':>11}  {'contender':>11}  {'change':>8}  {'p-value':>8}  {'reps':>5}  verdict"
    print(head, file=out)
    print("-" * len(head), file=out)
    for r in rows:
        ch = f"{r['change'] * 100:+.2f}%" if r["change"] is not None else "-"
        p = f"{r['p']:.4f}" if r["p"] is not None else "n/a"
        reps = f"{r['n_base']}/{r['n_contender']}"
        extra = f"  ({r['note']})" if r["note"] else ""
        print(f"{r['key']:<{w}}  {fmt_time(r['base']):>11}  {fmt_time(r['contender']):>11}  {ch:>8}  {p:>8}  "
              f"{reps:>5}  {r['verdict']}{extra}", file=out)
    for k in res["only_base"]:
        print(f"{k}: only in base", file=out)
    for k in res["only_contender"]:
        print(f"{k}: only in contender", file=out)
    if not rows:
        print("no benchmark in common" + (" (after --filter)" if res.get("filtered") else ""), file=out)
    nop = sum(1 for r in rows if r["p"] is None)
    if nop:
        print(f"{nop} benchmark(s) without a p-value (no per-repetition entries in one of the runs): "
              f"never flagged", file=out)
    if base.card != cont.card:
        print("no verdict across cards", file=out)
    elif res["regressions"]:
        print(f"REGRESSION: {len(res['regressions'])} benchmark(s) slower by more than "
              f"{res['threshold']:.1%} with p < {res['alpha']}: "
              + ", ".join(f"{r['key']} ({r['change'] * 100:+.2f}%, p={r['p']:.4f})" for r in res["regressions"]),
              file=out)
    else:
        print("no significant regression", file=out)


def main(args) -> int:
    try:
        base = gbench.load_run(args.base)
        cont = gbench.load_run(args.contender)
        res = compare_runs(base, cont, args.threshold, args.alpha, args.filter)
    except (gbench.ParseError, re.error) as ex:
        print(f"memra-dash compare: {ex}", file=sys.stderr)
        return 2
    cross = base.card != cont.card
    if cross and not getattr(args, "cross_card", False):
        print(f"memra-dash compare: {base.file} ran on {base.card}, {cont.file} on {cont.card}: a comparison "
              f"across cards measures the machines, not the change (--cross-card shows the table anyway)",
              file=sys.stderr)
        return 2
    if cross:  # the table only: a change across cards is no verdict on the code
        for r in res["rows"]:
            r["verdict"] = ""
        res["regressions"] = []
    res["filtered"] = bool(args.filter)
    print_report(res, base, cont)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"base": base.file, "contender": cont.file, "cards": [base.card, cont.card], **res}, f, indent=1)
            f.write("\n")
    return 1 if res["regressions"] else 0
