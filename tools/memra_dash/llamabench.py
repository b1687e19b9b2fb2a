"""llama-bench output -> a peer run in Google Benchmark JSON form (docs/dashboard.md, "Peer runs").

llama-bench (-o json: an array; -o jsonl: one object per line) writes one record per test with
n_prompt, n_gen, n_depth, avg_ts, stddev_ts, samples_ts (tokens/s of each repetition), and the
build and machine (build_commit, gpu_info, model_type, ...). A test pp<N> (n_gen = 0) becomes

    Prefill<N>/<shape>/<dtype>/llamacpp_pp<N>      one iteration = one prefill of N tokens

and tg<N> (n_prompt = 0) becomes

    Decode/<shape>/<dtype>/llamacpp_tg<N>          one iteration = one token

(a depth n_depth > 0 adds _d<depth>); pp+tg tests are left out. Each sample is a repetition entry
(real_time = the iteration's time, items_per_second = tokens/s) followed by mean / median /
stddev aggregates, as Google Benchmark writes them, so render, compare and Google Benchmark's
compare.py all read the file. The context says "peer": "llama.cpp".
"""
from __future__ import annotations

import json
import os
import statistics
import sys


def read_records(path: str) -> list[dict]:
    with open(path, encoding="utf-8") as f:
        text = f.read()
    s = text.strip()
    if s.startswith("["):
        recs = json.loads(s)
    else:
        recs = [json.loads(l) for l in s.splitlines() if l.strip().startswith("{")]
    return [r for r in recs if isinstance(r, dict) and ("samples_ts" in r or "avg_ts" in r)]


def entries(name: str, tokens_per_iter: int, samples_ts: list[float], time_unit: str) -> list[dict]:
    """Repetition entries and aggregates of a benchmark measured as tokens/s samples."""
    scale = {"us": 1e6, "ms": 1e3, "s": 1.0}[time_unit]
    n = len(samples_ts)
    out = []

    def entry(ts, **kw):
        t = tokens_per_iter / ts * scale
        e = {"name": name, "run_name": name, "repetitions": n, "threads": 1, "iterations": 1,
             "real_time": t, "cpu_time": t, "time_unit": time_unit, "items_per_second": ts, "tok_per_s": ts}
        e.update(kw)
        return e

    for i, ts in enumerate(samples_ts):
        out.append(entry(ts, run_type="iteration", repetition_index=i))
    if n >= 1:
        med = statistics.median(samples_ts)
        mean = statistics.fmean(samples_ts)
        for agg, v in (("mean", mean), ("median", med)):
            e = entry(v, run_type="aggregate", aggregate_name=agg, aggregate_unit="time")
            e["name"] = f"{name}_{agg}"
            e["iterations"] = n
            out.append(e)
        if n >= 2:
            times = [tokens_per_iter / ts * scale for ts in samples_ts]
            sd_ts = statistics.stdev(samples_ts)
            sd_t = statistics.stdev(times)
            out.append({"name": f"{name}_stddev", "run_name": name, "run_type": "aggregate", "repetitions": n,
                        "threads": 1, "aggregate_name": "stddev", "aggregate_unit": "time", "iterations": n,
                        "real_time": sd_t, "cpu_time": sd_t, "time_unit": time_unit,
                        "items_per_second": sd_ts, "tok_per_s": sd_ts})
    return out


def convert(records: list[dict], shape: str, dtype: str, label: str | None) -> dict:
    benchmarks = []
    skipped = []
    for r in records:
        pp, tg, depth = int(r.get("n_prompt", 0)), int(r.get("n_gen", 0)), int(r.get("n_depth", 0) or 0)
        samples = [float(x) for x in (r.get("samples_ts") or [r["avg_ts"]])]
        d = f"_d{depth}" if depth else ""
        if pp and not tg:
            benchmarks += entries(f"Prefill{pp}/{shape}/{dtype}/llamacpp_pp{pp}{d}", pp, samples, "ms")
        elif tg and not pp:
            benchmarks += entries(f"Decode/{shape}/{dtype}/llamacpp_tg{tg}{d}", 1, samples, "us")
        else:
            skipped.append(f"pp{pp}+tg{tg}")
    first = records[0] if records else {}
    ctx = {"peer": "llama.cpp", "date": first.get("test_time", ""), "gpu": first.get("gpu_info", ""),
           "peer_build_commit": first.get("build_commit", ""), "peer_build_number": first.get("build_number", ""),
           "peer_model_type": first.get("model_type", ""), "peer_model_filename": first.get("model_filename", ""),
           "peer_backends": first.get("backends", ""), "peer_flash_attn": first.get("flash_attn", ""),
           "peer_n_batch": first.get("n_batch", ""), "peer_n_ubatch": first.get("n_ubatch", ""),
           "source": "llama-bench JSON converted by tools/memra-dash import-llama-bench"}
    if label:
        ctx["peer_label"] = label
    ctx = {k: (v if isinstance(v, str) else json.dumps(v)) for k, v in ctx.items() if v not in ("", None)}
    return {"context": ctx, "benchmarks": benchmarks}, skipped


def main(args) -> int:
    try:
        recs = read_records(args.input)
    except (OSError, json.JSONDecodeError) as ex:
        print(f"memra-dash import-llama-bench: {args.input}: {ex}", file=sys.stderr)
        return 2
    if not recs:
        print(f"memra-dash import-llama-bench: {args.input}: no llama-bench records (avg_ts / samples_ts)",
              file=sys.stderr)
        return 2
    doc, skipped = convert(recs, args.shape, args.dtype, args.label)
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    n = len({e["run_name"] for e in doc["benchmarks"]})
    print(f"memra-dash: wrote {args.out} ({n} benchmarks" + (f"; left out {', '.join(skipped)}" if skipped else "")
          + ")", file=sys.stderr)
    return 0
