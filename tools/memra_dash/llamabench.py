"""llama-bench output -> a peer run in Google Benchmark JSON form (docs/dashboard.md, "Peer runs").

llama-bench (-o json: an array; -o jsonl: one object per line) writes one record per test with
n_prompt, n_gen, n_depth, avg_ts, stddev_ts, samples_ts (tokens/s of each repetition), and the
build and machine (build_commit, gpu_info, model_type, ...). A test pp<N> (n_gen = 0) becomes

    Prefill<N>/<shape>/<dtype>/llamacpp_pp<N>      one iteration = one prefill of N tokens

and tg<N> (n_prompt = 0) becomes

    Decode/<shape>/<dtype>/llamacpp_tg<N>          one iteration = one token

(a depth n_depth > 0 adds _d<depth>); pp+tg tests are left out. llama-batched-bench
(--output-format jsonl) writes one record per (pp, tg, pl) with t_tg and speed_tg (tokens/s of the
pl sequences' tg steps, one measurement); a record becomes

    DecodeBatch/<shape>/<dtype>/llamacpp/B<pl>     one iteration = one step of pl sequences

(the context's peer_batched names pp and tg; records of another pp or tg than the first are left
out: one curve per run). Each sample is a repetition entry
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
        recs = read_lines(s)
    return [r for r in recs if isinstance(r, dict) and ("samples_ts" in r or "avg_ts" in r or is_batched(r))]


def is_batched(r: dict) -> bool:
    """A llama-batched-bench record (speed_tg over pl sequences)."""
    return "pl" in r and "speed_tg" in r


def read_lines(text: str) -> list[dict]:
    """jsonl, among other lines (llama-batched-bench logs to the same stream): the JSON objects."""
    recs = []
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("{"):
            try:
                recs.append(json.loads(line))
            except json.JSONDecodeError:
                continue
    return recs


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


def convert(records: list[dict], shape: str, dtype: str, label: str | None, build_commit: str | None = None) -> dict:
    benchmarks = []
    skipped = []
    batched = [r for r in records if is_batched(r)]
    records = [r for r in records if not is_batched(r)]
    first_bb = batched[0] if batched else {}
    for r in batched:
        pp, tg, pl = int(r["pp"]), int(r["tg"]), int(r["pl"])
        if (pp, tg) != (int(first_bb["pp"]), int(first_bb["tg"])):
            skipped.append(f"batched pp{pp}_tg{tg} B{pl}")
            continue
        benchmarks += entries(f"DecodeBatch/{shape}/{dtype}/llamacpp/B{pl}", pl, [float(r["speed_tg"])], "us")
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
    first = dict(records[0]) if records else {}
    if first_bb:
        for k in ("flash_attn", "n_batch", "n_ubatch"):
            first.setdefault(k, first_bb.get(k, ""))
    ctx = {"peer": "llama.cpp", "date": first.get("test_time", ""), "gpu": first.get("gpu_info", ""),
           "peer_build_commit": first.get("build_commit", ""), "peer_build_number": first.get("build_number", ""),
           "peer_model_type": first.get("model_type", ""), "peer_model_filename": first.get("model_filename", ""),
           "peer_backends": first.get("backends", ""), "peer_flash_attn": first.get("flash_attn", ""),
           "peer_n_batch": first.get("n_batch", ""), "peer_n_ubatch": first.get("n_ubatch", ""),
           "source": "llama-bench JSON converted by tools/memra-dash import-llama-bench"}
    if build_commit:  # llama.cpp's own build info is wrong for a tree without its git metadata
        ctx["peer_build_commit"] = build_commit
        ctx.pop("peer_build_number", None)
    if label:
        ctx["peer_label"] = label
    if first_bb:
        ctx["peer_batched"] = f"llama-batched-bench pp{first_bb['pp']} tg{first_bb['tg']}, prompts not shared" + (
            "" if not first_bb.get("is_pp_shared") else " (shared)")
    ctx = {k: (v if isinstance(v, str) else json.dumps(v)) for k, v in ctx.items() if v not in ("", None)}
    return {"context": ctx, "benchmarks": benchmarks}, skipped


def main(args) -> int:
    recs = []
    for path in args.input:
        try:
            got = read_records(path)
        except (OSError, json.JSONDecodeError) as ex:
            print(f"memra-dash import-llama-bench: {path}: {ex}", file=sys.stderr)
            return 2
        if not got:
            print(f"memra-dash import-llama-bench: {path}: no llama-bench records (avg_ts / samples_ts) and no "
                  "llama-batched-bench records (pl, speed_tg)", file=sys.stderr)
            return 2
        recs += got
    doc, skipped = convert(recs, args.shape, args.dtype, args.label, args.build_commit)
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    n = len({e["run_name"] for e in doc["benchmarks"]})
    print(f"memra-dash: wrote {args.out} ({n} benchmarks" + (f"; left out {', '.join(skipped)}" if skipped else "")
          + ")", file=sys.stderr)
    return 0
