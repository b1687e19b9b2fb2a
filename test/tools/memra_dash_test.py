#!/usr/bin/env python3
"""Host tests of tools/memra-dash (docs/dashboard.md): parsing, aggregation, statistics, compare.

    memra_dash_test.py <repository root>

- parsing: benchmark names and keys, repetitions vs aggregates, old runs without run_type /
  run_name / context, the context keys memra adds (memra_arm_*, memra_commit, memra_build_type,
  model_*) shown when present, the file name's commit authoritative;
- aggregation: median / min / max per benchmark per run, from repetitions or from aggregates,
  the roofline fraction (hbm_fraction, else bytes/token x tok/s over the run's StreamRead);
- statistics: the Mann-Whitney U test against values computed with scipy 1.10.1
  (scipy.stats.mannwhitneyu(x, y, alternative="two-sided"), default and asymptotic methods);
- compare: a "re-run" of a committed run (its aggregates expanded to 9 repetitions, then a small
  deterministic jitter) is not flagged; a 5 % slowdown with 9 repetitions is (exit 1, named);
  runs without repetitions never are; the threshold, --filter, bad input (exit 2); runs of
  different cards refused (exit 2) or, with --cross-card, tabled without a verdict;
- versus: memra's committed same-machine run over llama.cpp's (the ratios docs/PERF.md quotes),
  the arms it pairs, the peer benchmarks it cannot pair listed, cards, bad input (exit 2);
- targets: bench/targets.json on the committed same-machine runs (every value against the
  medians read from the JSON here), every key of the file a benchmark of a committed run; on
  synthetic runs met / not met / not measured and the exit codes, a target at its minimum, the
  peer pairing (arms from the key, "peer", two peers of one shape refused), malformed targets
  files (the entry named), cards;
- render: the plots built from the committed runs (an H200's and an H100's: a line, band, bar
  group and curve per card; memra over each peer run) and from synthetic ones (batch and prefill
  length curves, llama.cpp reference lines), the page self-contained, a clear failure without
  Chart.js; import-llama-bench.
"""
import copy
import io
import json
import math
import os
import random
import re
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.abspath(sys.argv.pop(1) if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", ".."))
TOOL = os.path.join(ROOT, "tools", "memra-dash")
RESULTS = os.path.join(ROOT, "bench", "results")
sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(ROOT, "tools"))
from memra_dash import compare, gbench, render, stats, targets  # noqa: E402

BATCH_RUN = os.path.join(RESULTS, "h200-d9b5cec-decode-batch.json")


def run_tool(*args, env=None, cwd=None):
    e = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    if env:
        e.update(env)
    r = subprocess.run([sys.executable, TOOL, *args], capture_output=True, text=True, env=e, cwd=cwd)
    return r.returncode, r.stdout, r.stderr


def load(path):
    with open(path) as f:
        return json.load(f)


def write(d, name, doc):
    p = os.path.join(d, name)
    with open(p, "w") as f:
        json.dump(doc, f)
    return p


def entry(name, real_time, unit="us", rep=None, agg=None, **counters):
    """A Google Benchmark entry: a repetition (rep = its index) or an aggregate (agg = its name)."""
    e = {"name": name + (f"_{agg}" if agg else ""), "run_name": name, "run_type": "aggregate" if agg else "iteration",
         "repetitions": 9, "threads": 1, "iterations": 64, "real_time": real_time, "cpu_time": real_time,
         "time_unit": unit}
    if agg:
        e["aggregate_name"] = agg
    else:
        e["repetition_index"] = rep
    e.update(counters)
    return e


def expand(doc, n=9):
    """The run with every aggregate-only benchmark expanded into n repetitions: the median, spread
    by the stddev over deterministic normal quantiles (a run as DisplayAggregatesOnly writes it)."""
    from statistics import NormalDist
    out = {"context": copy.deepcopy(doc.get("context", {})), "benchmarks": []}
    by = {}
    for e in doc["benchmarks"]:
        by.setdefault(e["run_name"], []).append(e)
    z = [NormalDist().inv_cdf((i + 0.5) / n) for i in range(n)]
    rnd = random.Random(7)
    for name, es in by.items():
        reps = [e for e in es if e["run_type"] == "iteration"]
        aggs = {e["aggregate_name"]: e for e in es if e["run_type"] == "aggregate"}
        if len(reps) >= 2 or "median" not in aggs:
            out["benchmarks"] += es
            continue
        med, sd = aggs["median"], aggs.get("stddev", {})
        order = list(range(n))
        rnd.shuffle(order)
        for i, k in enumerate(order):
            t = med["real_time"] + z[k] * sd.get("real_time", 0.0)
            e = {kk: v for kk, v in med.items() if kk not in ("aggregate_name", "aggregate_unit")}
            e.update(name=name, run_type="iteration", repetition_index=i, repetitions=n, real_time=t, cpu_time=t)
            for c in ("items_per_second", "tok_per_s"):
                if c in med:
                    e[c] = med[c] * med["real_time"] / t
            out["benchmarks"].append(e)
        out["benchmarks"] += [dict(a, repetitions=n) for a in aggs.values()]
    return out


def scaled(doc, factor_of, seed=11, jitter=0.0):
    """Every repetition's time multiplied by factor_of(run_name) * (1 + jitter * u), u in [-1, 1]
    from a seeded generator (deterministic); rates divided accordingly; aggregates dropped and
    the median re-written so both forms agree."""
    rnd = random.Random(seed)
    out = {"context": copy.deepcopy(doc["context"]), "benchmarks": []}
    for e in doc["benchmarks"]:
        if e["run_type"] != "iteration":
            continue
        f = factor_of(e["run_name"]) * (1 + jitter * (2 * rnd.random() - 1))
        e = dict(e, real_time=e["real_time"] * f, cpu_time=e["cpu_time"] * f)
        for c in ("items_per_second", "tok_per_s", "bytes_per_second", "read_bw_GBps"):
            if c in e:
                e[c] = e[c] / f
        out["benchmarks"].append(e)
    return out


class Names(unittest.TestCase):
    def test_normalize(self):
        n = gbench.normalize_name
        self.assertEqual(n("Decode/qwen35-9b/q8_0/graph_stream/iterations:64/repeats:9/manual_time"),
                         "Decode/qwen35-9b/q8_0/graph_stream")
        self.assertEqual(n("DecodeBatch/qwen3-0.6b/q8_0/B16/iterations:16/repeats:3/manual_time"),
                         "DecodeBatch/qwen3-0.6b/q8_0/B16")
        self.assertEqual(n("StreamRead/4GiB/iterations:20/repeats:3/manual_time"), "StreamRead/4GiB")
        self.assertEqual(n("BM_Foo/8/min_time:0.500/threads:4/real_time"), "BM_Foo/8")

    def test_keys(self):
        p = gbench.parse_key
        d = p("Decode/qwen35-9b/nvfp4/graph_stream")
        self.assertEqual((d["kind"], d["shape"], d["dtype"], d["arm"]), ("decode", "qwen35-9b", "nvfp4", "graph_stream"))
        b = p("DecodeBatch/qwen35-35b-a3b/nvfp4/B32")
        self.assertEqual((b["kind"], b["shape"], b["batch"], b["arm"]), ("batch", "qwen35-35b-a3b", 32, "eager"))
        b2 = p("DecodeBatch/qwen35-9b/q8_0/graph/B4")
        self.assertEqual((b2["batch"], b2["arm"]), (4, "graph"))
        f = p("Prefill2048/qwen3-0.6b/q8_0/gemm")
        self.assertEqual((f["kind"], f["prompt_len"], f["arm"]), ("prefill", 2048, "gemm"))
        self.assertEqual(p("StreamRead/4GiB")["kind"], "stream")
        o = p("BM_Foo/8")
        self.assertEqual((o["kind"], o["family"]), ("other", "BM_Foo"))


class Parsing(unittest.TestCase):
    def test_committed_runs_all_parse(self):
        runs = gbench.load_runs([RESULTS])
        memra = [r for r in runs if not r.peer]
        self.assertGreaterEqual(len(memra), 22)
        self.assertEqual([r.date for r in memra], sorted(r.date for r in memra), "runs in date order")
        self.assertEqual(len({r.label for r in runs}), len(runs), "labels unique")
        for r in memra:
            self.assertTrue(r.benches, r.file)
            for b in r.benches.values():
                self.assertIsNotNone(b.median("time"), f"{r.file} {b.key}")
        peers = [r for r in runs if r.peer]
        self.assertEqual(sorted(p.file for p in peers),
                         ["llamacpp-h200-1425386fd-qwen3-0.6b-q8_0.json", "llamacpp-h200-1425386fd-qwen35-35b-a3b-nvfp4.json",
                          "llamacpp-h200-1425386fd-qwen35-9b-nvfp4.json", "llamacpp-h200-1425386fd-qwen35-9b-q8_0.json",
                          "llamacpp-reference.json"])
        # one llama.cpp build run on four shapes: one label, made unique by each run's shape
        self.assertIn("llama.cpp 1425386fd·qwen35-9b nvfp4", [p.label for p in peers])

    def test_repetitions_and_aggregates(self):
        r = gbench.load_run(BATCH_RUN)
        self.assertEqual(len(r.benches), 21)  # StreamRead + 4 shapes x (graph_stream + B1/4/16/32)
        s = r.benches["StreamRead/4GiB"]
        self.assertEqual((len(s.reps), sorted(s.aggs)), (3, ["cv", "mean", "median", "stddev"]))
        self.assertEqual(s.summary("throughput")["band"], "range")
        self.assertAlmostEqual(s.median("throughput"), 4450.48503555831)
        self.assertAlmostEqual(s.spread("throughput")[0], 4439.591538884162)
        self.assertAlmostEqual(s.spread("throughput")[1], 4456.69183166922)
        self.assertAlmostEqual(r.stream_bandwidth(), 4456.69183166922e9)
        d = r.benches["Decode/qwen35-9b/q8_0/graph_stream"]
        self.assertEqual((len(d.reps), d.repetitions()), (0, 9))
        self.assertAlmostEqual(d.median("throughput"), 370.4262158321708)
        self.assertAlmostEqual(d.median("time"), 2699.5929479598994e3)  # us -> ns
        lo, hi, how = d.spread("throughput")
        self.assertEqual(how, "stddev")
        self.assertAlmostEqual(hi - d.median("throughput"), 0.10796326723557893)
        self.assertEqual(d.rep_values("time"), [])
        self.assertAlmostEqual(d.median("fraction"), 0.7008084178196258)  # hbm_fraction as reported

    def test_file_name_commit_is_authoritative(self):
        r = gbench.load_run(os.path.join(RESULTS, "h200-270d1e9-decode.json"))
        self.assertEqual((r.commit, r.context_commit), ("270d1e9", "377e4e9"))
        html = render.context_table([r])
        self.assertIn("377e4e9", html)

    def test_old_run_without_context_and_run_type(self):
        # an older Google Benchmark: no run_type, no run_name, aggregates named by suffix; no context
        doc = {"benchmarks": [
            {"name": "Decode/qwen35-9b/q8_0/graph/iterations:64/manual_time", "real_time": 2.0, "time_unit": "ms",
             "items_per_second": 500.0},
            {"name": "Decode/qwen35-9b/q8_0/graph/iterations:64/manual_time", "real_time": 2.2, "time_unit": "ms",
             "items_per_second": 454.5},
            {"name": "Decode/qwen35-9b/q8_0/graph/iterations:64/manual_time", "real_time": 2.1, "time_unit": "ms",
             "items_per_second": 476.2},
            {"name": "Decode/qwen35-9b/q8_0/graph/iterations:64/manual_time_median", "real_time": 2.1,
             "time_unit": "ms", "items_per_second": 476.2},
        ]}
        with tempfile.TemporaryDirectory() as d:
            r = gbench.load_run(write(d, "old.json", doc))
        self.assertEqual(list(r.benches), ["Decode/qwen35-9b/q8_0/graph"])
        b = r.benches["Decode/qwen35-9b/q8_0/graph"]
        self.assertEqual((len(b.reps), list(b.aggs)), (3, ["median"]))
        self.assertEqual(b.summary("throughput")["median"], 476.2)
        self.assertEqual((b.spread("throughput")[0], b.spread("throughput")[1]), (454.5, 500.0))
        self.assertEqual(b.median("time"), 2.1e6)
        self.assertEqual((r.commit, r.date, r.arms(), r.models(), r.build_type()), ("unknown", None, {}, {}, None))
        self.assertIsNone(b.median("fraction"))
        html = render.context_table([r])
        self.assertNotIn("<th>arms</th>", html, "no arms column when no run has arms")

    def test_new_context_keys_shown(self):
        old = load(BATCH_RUN)
        new = copy.deepcopy(old)
        # bench_decode's keys (arm.<field>, commit from git describe, memra_build_type, model_source,
        # clocks, runtime) and the memra_arm_ / memra_commit / model_<shape> spellings
        new["context"].update({"commit": "abc1234-dirty", "memra_build_type": "Release",
                               "arm.prefill_act": "w4a8", "arm.decode_graph": "off", "memra_arm_launch_overlap": "on",
                               "model_source": "Model::synthetic", "model_qwen35-9b_q8_0_bytes": "8431603968",
                               "sm_clock_max": "1980 MHz", "memory_clock_max": "3201 MHz", "cuda_runtime": "13000"})
        for e in new["benchmarks"]:
            e["label"] = "qwen35-9b/q8_0 prefill_act=w4a8 decode_matvec=mmvq"
        with tempfile.TemporaryDirectory() as d:
            a = gbench.load_run(write(d, "h200-d9b5cec-decode-batch.json", old))
            b = gbench.load_run(write(d, "run.json", new))
            c = gbench.load_run(write(d, "h200-abc1234-decode.json", new))
            d2 = gbench.load_run(write(d, "h200-fff0000-decode.json", dict(new, context=dict(new["context"], commit="",
                                                                                               memra_commit="abc1234"))))
        self.assertEqual(b.commit, "abc1234-dirty", "the context's commit when the file name carries none")
        self.assertEqual((c.commit, d2.commit, d2.context_commit), ("abc1234", "fff0000", "abc1234"))
        self.assertEqual(b.arms(), {"decode_graph": "off", "launch_overlap": "on", "prefill_act": "w4a8"})
        self.assertEqual(b.build_type(), "Release")
        self.assertEqual(b.models(), {"source": "Model::synthetic", "qwen35-9b_q8_0_bytes": "8431603968"})
        html = render.context_table([a, b, c])
        self.assertIn("<th>arms</th>", html)
        self.assertIn("prefill_act=w4a8", html)
        self.assertIn("launch_overlap=on", html)
        self.assertIn("Release", html)
        self.assertIn("model_qwen35-9b_q8_0_bytes", html)
        self.assertIn("1980 MHz", html)
        self.assertIn("runtime 13000", html)
        self.assertIn("<td>—</td>", html, "the older run's arms cell")
        self.assertNotIn("context: abc1234-dirty", html, "a -dirty suffix is the same commit")
        tip = render._point_tip(b, b.benches["Decode/qwen35-9b/q8_0/graph_stream"], "throughput")
        self.assertIn("prefill_act=w4a8", tip, "the benchmark's label in its tooltip")

    def test_errors_and_bad_files(self):
        with tempfile.TemporaryDirectory() as d:
            doc = {"context": {}, "benchmarks": [
                {"name": "Decode/x/q8_0/graph", "run_name": "Decode/x/q8_0/graph", "run_type": "iteration",
                 "error_occurred": True, "error_message": "out of memory"}]}
            r = gbench.load_run(write(d, "e.json", doc))
            self.assertEqual((r.benches, len(r.errors)), ({}, 1))
            with open(os.path.join(d, "bad.json"), "w") as f:
                f.write("{not json")
            with self.assertRaises(gbench.ParseError):
                gbench.load_run(os.path.join(d, "bad.json"))
            with self.assertRaises(gbench.ParseError):
                gbench.load_run(write(d, "list.json", [1, 2]))
            with self.assertRaises(gbench.ParseError):
                gbench.load_run(write(d, "nobench.json", {"context": {}}))

    def test_same_commit_labels(self):
        doc = load(BATCH_RUN)
        with tempfile.TemporaryDirectory() as d:
            write(d, "h200-abc1234-decode.json", doc)
            write(d, "h200-abc1234-prefill.json", doc)
            labels = sorted(r.label for r in gbench.load_runs([d]))
        self.assertEqual(labels, ["abc1234·decode", "abc1234·prefill"])


class Aggregation(unittest.TestCase):
    def run_with(self, benchmarks, context=None):
        with tempfile.TemporaryDirectory() as d:
            return gbench.load_run(write(d, "r.json", {"context": context or {}, "benchmarks": benchmarks}))

    def test_median_min_max_of_repetitions(self):
        times = [1000.0, 1040.0, 980.0, 1010.0, 1100.0]
        name = "Decode/s/q8_0/graph/iterations:64/repeats:5/manual_time"
        es = [entry(name, t, rep=i, items_per_second=1e6 / t, bytes_per_token=8e9, hbm_fraction=0.0)
              for i, t in enumerate(times)]
        es.append(entry(name, 1010.0, agg="median", items_per_second=1e6 / 1010.0))
        sr = "StreamRead/4GiB/iterations:20/repeats:3/manual_time"
        es += [entry(sr, 1.0, unit="ms", rep=i, read_bw_GBps=bw) for i, bw in enumerate([4400.0, 4450.0, 4420.0])]
        r = self.run_with(es)
        b = r.benches["Decode/s/q8_0/graph"]
        s = b.summary("time")
        self.assertEqual((s["median"], s["min"], s["max"], s["band"], s["n"]), (1010e3, 980e3, 1100e3, "range", 5))
        t = b.summary("throughput")
        self.assertAlmostEqual(t["median"], 1e6 / 1010.0)
        self.assertAlmostEqual(t["min"], 1e6 / 1100.0)
        self.assertAlmostEqual(t["max"], 1e6 / 980.0)
        # hbm_fraction 0 (no probe in that process): bytes/token x tok/s over this run's best StreamRead
        self.assertAlmostEqual(b.median("fraction"), 8e9 * (1e6 / 1010.0) / 4450e9)

    def test_no_fraction_without_probe(self):
        r = gbench.load_run(os.path.join(RESULTS, "h200-d617128-prefill-decode.json"))
        b = r.benches["Decode/qwen35-9b/q8_0/graph_stream"]
        self.assertIsNone(r.stream_bandwidth())
        self.assertIsNone(b.median("fraction"), "hbm_fraction 0 and no StreamRead: no fraction")
        self.assertAlmostEqual(b.median("throughput"), 373.3469784107551)


# scipy 1.10.1: scipy.stats.mannwhitneyu(x, y, alternative="two-sided") -> (U1, p default, p asymptotic)
SCIPY = {
    "docs example": ([19, 22, 16, 29, 24], [20, 11, 17, 12], 17.0, 0.1111111111111111, 0.11134688653314041),
    "separated 5/5": ([1, 2, 3, 4, 5], [6, 7, 8, 9, 10], 0.0, 0.007936507936507936, 0.012185780355344813),
    "separated 9/9": (list(range(1, 10)), list(range(10, 19)), 0.0, 0.00041229480206169127, 0.00041229480206169127),
    "ties 9/9": ([1, 2, 2, 3, 3, 3, 4, 5, 5], [2, 3, 4, 4, 5, 6, 6, 7, 8], 17.5, 0.04434596235912805, 0.04434596235912805),
    "ties 3/3": ([1.0, 2.0, 2.0], [2.0, 3.0, 4.0], 1.0, 0.16415972847851523, 0.16415972847851523),
    "interleaved 9/9": ([10.1, 10.3, 10.2, 10.5, 10.0, 10.4, 10.6, 10.35, 10.25],
                        [10.15, 10.45, 10.22, 10.55, 10.05, 10.42, 10.62, 10.33, 10.7], 30.0,
                        0.37722461666745344, 0.37722461666745344),
    "all tied": ([1, 1, 1], [1, 1, 1], 4.5, 1.0, 1.0),
    "separated 3/3": ([1.0, 2.0, 3.0], [4.0, 5.0, 6.0], 0.0, 0.1, 0.08085559837005224),
    "separated 2/2": ([1.0, 2.0], [3.0, 4.0], 0.0, 0.3333333333333333, 0.2452781168067728),
    "11/10": ([3.1, 2.2, 5.5, 4.8, 1.9, 6.0, 7.2, 3.3, 2.8, 4.1, 5.0], [6.1, 7.4, 8.8, 5.9, 6.6, 9.1, 7.7, 8.0, 6.9, 7.1],
              6.0, 0.0006371948724634316, 0.0006371948724634316),
    "4/6 exact": ([1.5, 3.5, 2.5, 6.0], [2.0, 4.0, 5.0, 7.0, 8.0, 0.5], 9.0, 0.6095238095238095, 0.5940323405990415),
}


class Statistics(unittest.TestCase):
    def test_against_scipy(self):
        for what, (x, y, u, p, p_asym) in SCIPY.items():
            with self.subTest(what):
                u1, p1, _ = stats.mannwhitneyu(x, y)
                self.assertEqual(u1, u)
                self.assertTrue(math.isclose(p1, p, rel_tol=1e-12), f"{p1} vs {p}")
                self.assertTrue(math.isclose(stats.mannwhitneyu(x, y, "asymptotic")[1], p_asym, rel_tol=1e-12))
                # symmetric: swapping the samples keeps p, U becomes n1*n2 - U
                u2, p2, _ = stats.mannwhitneyu(y, x)
                self.assertEqual(u2, len(x) * len(y) - u)
                self.assertTrue(math.isclose(p2, p1, rel_tol=1e-12))

    def test_method_choice(self):
        self.assertEqual(stats.mannwhitneyu([1, 2, 3], [4, 5, 6])[2], "exact")
        self.assertEqual(stats.mannwhitneyu([1, 2, 2], [4, 5, 6])[2], "asymptotic", "ties: asymptotic")
        self.assertEqual(stats.mannwhitneyu(list(range(9)), list(range(9, 18)))[2], "asymptotic")
        self.assertEqual(stats.mannwhitneyu(list(range(9)), list(range(9, 17)))[2], "exact", "one sample of 8")

    def test_ranks_and_exact_distribution(self):
        self.assertEqual(stats.ranks([3, 1, 3, 2]), [3.5, 1.0, 3.5, 2.0])
        for n1, n2 in ((1, 1), (3, 4), (8, 8), (5, 12)):
            self.assertEqual(sum(stats._count_u(n1, n2)), math.comb(n1 + n2, n1))
        # U of 0 for 3 vs 3: one arrangement in 20, two-sided 2/20
        self.assertEqual(stats.exact_p(0, 3, 3), 0.1)


class Compare(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        d = cls.tmp.name
        cls.base_doc = expand(load(BATCH_RUN))
        cls.base = write(d, "base.json", cls.base_doc)
        # the same binary run again: every repetition moved by at most 0.02 %, order shuffled
        cls.rerun = write(d, "rerun.json", scaled(cls.base_doc, lambda n: 1.0, jitter=2e-4))
        cls.slow = write(d, "slow.json", scaled(cls.base_doc, lambda n: 1.05 if n.startswith("Decode/") else 1.0))
        cls.slow3 = write(d, "slow3.json", scaled(cls.base_doc, lambda n: 1.03 if n.startswith("Decode/") else 1.0))
        cls.fast = write(d, "fast.json", scaled(cls.base_doc, lambda n: 0.95))

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_expanded_run_has_repetitions(self):
        r = gbench.load_run(self.base)
        b = r.benches["Decode/qwen35-9b/q8_0/graph_stream"]
        self.assertEqual(len(b.rep_values("time")), 9)
        self.assertAlmostEqual(b.median("time"), 2699.5929479598994e3, delta=1.0)

    def test_rerun_of_the_same_binary_is_not_significant(self):
        res = compare.compare_runs(gbench.load_run(self.base), gbench.load_run(self.rerun))
        self.assertEqual(len(res["rows"]), 21)
        for r in res["rows"]:
            self.assertIsNotNone(r["p"], r["key"])
            self.assertGreaterEqual(r["p"], 0.05, f"{r['key']}: p {r['p']}")
            self.assertLess(abs(r["change"]), 0.001)
        rc, out, err = run_tool("compare", self.base, self.rerun)
        self.assertEqual(rc, 0, out + err)
        self.assertIn("no significant regression", out)

    def test_five_percent_slowdown_is_flagged(self):
        rc, out, err = run_tool("compare", self.base, self.slow)
        self.assertEqual(rc, 1, out + err)
        flagged = re.findall(r"^(\S+)\s.*REGRESSION$", out, re.M)
        self.assertEqual(sorted(flagged), sorted(k for k in gbench.load_run(self.base).benches if k.startswith("Decode/")))
        self.assertIn("REGRESSION: 4 benchmark(s)", out)
        self.assertIn("Decode/qwen35-9b/q8_0/graph_stream (+5.00%", out)
        res = compare.compare_runs(gbench.load_run(self.base), gbench.load_run(self.slow))
        row = next(r for r in res["rows"] if r["key"] == "Decode/qwen35-9b/q8_0/graph_stream")
        self.assertEqual(row["method"], "asymptotic")
        self.assertAlmostEqual(row["p"], SCIPY["separated 9/9"][3], places=12)  # fully separated 9 vs 9
        others = [r for r in res["rows"] if not r["key"].startswith("Decode/")]
        self.assertTrue(all(r["verdict"] == "same" for r in others))

    def test_threshold_and_filter(self):
        rc, out, _ = run_tool("compare", self.base, self.slow3)
        self.assertEqual(rc, 0, "3 % is under the default 5 % threshold: " + out)
        self.assertEqual(run_tool("compare", self.base, self.slow3, "--threshold", "0.02")[0], 1)
        rc, out, _ = run_tool("compare", self.base, self.slow, "--filter", "^DecodeBatch/")
        self.assertEqual(rc, 0, out)
        self.assertNotIn("Decode/qwen35", out.replace("DecodeBatch/qwen35", ""))
        rc, out, _ = run_tool("compare", self.base, self.slow, "--filter", "qwen3-0.6b")
        self.assertEqual(rc, 1)
        self.assertIn("REGRESSION: 1 benchmark(s)", out)

    def test_faster_is_not_a_regression(self):
        rc, out, _ = run_tool("compare", self.base, self.fast)
        self.assertEqual(rc, 0, out)
        self.assertIn("faster", out)

    def test_runs_without_repetitions_are_never_flagged(self):
        agg = load(BATCH_RUN)
        slow = copy.deepcopy(agg)
        for e in slow["benchmarks"]:
            if e["run_name"].startswith("Decode/") and e.get("aggregate_name") in ("mean", "median"):
                e["real_time"] *= 1.10
                e["items_per_second"] /= 1.10
        with tempfile.TemporaryDirectory() as d:
            a, b = write(d, "a.json", agg), write(d, "b.json", slow)
            rc, out, _ = run_tool("compare", a, b)
        self.assertEqual(rc, 0, out)
        self.assertIn("no p-value: aggregates only", out)
        self.assertIn("+10.00%", out)
        self.assertIn("slower?", out)

    def test_committed_runs(self):
        # two committed runs (aggregates, and 3 StreamRead repetitions: an exact test can't reach
        # p < 0.1 with 3 vs 3, so it is never significant)
        rc, out, _ = run_tool("compare", BATCH_RUN, os.path.join(RESULTS, "h200-fab1bbd-decode-batch.json"))
        self.assertEqual(rc, 0, out)
        line = next(l for l in out.splitlines() if l.startswith("StreamRead/4GiB"))
        self.assertRegex(line, r"\s1\.0000|\s0\.\d{4}\s")
        self.assertIn("3 vs 3 repetitions cannot reach p < 0.05", line)

    def test_runs_of_different_cards_are_not_compared(self):
        # the 5 % slower run, as if measured on another card: refused, or with --cross-card the
        # table without a verdict (exit 0)
        other = copy.deepcopy(load(self.slow))
        other["context"]["gpu"] = "NVIDIA H100 80GB HBM3"
        with tempfile.TemporaryDirectory() as d:
            o = write(d, "other.json", other)
            rc, out, err = run_tool("compare", self.base, o)
            self.assertEqual(rc, 2, out + err)
            self.assertIn("ran on NVIDIA H200", err)
            self.assertIn("on NVIDIA H100 80GB HBM3", err)
            self.assertIn("--cross-card", err)
            rc, out, err = run_tool("compare", self.base, o, "--cross-card", "--json", os.path.join(d, "t.json"))
            self.assertEqual(rc, 0, out + err)
            self.assertIn("CARDS DIFFER: NVIDIA H200 vs NVIDIA H100 80GB HBM3", out)
            self.assertIn("no verdict across cards", out)
            self.assertNotIn("REGRESSION", out)
            self.assertIsNone(re.search(r"\s(same|faster\??|slower\?)$", out, re.M), "no verdict column")
            self.assertEqual(load(os.path.join(d, "t.json"))["cards"], ["NVIDIA H200", "NVIDIA H100 80GB HBM3"])

    def test_bad_input(self):
        rc, _, err = run_tool("compare", BATCH_RUN, os.path.join(RESULTS, "nope.json"))
        self.assertEqual(rc, 2)
        self.assertIn("nope.json", err)
        rc, _, err = run_tool("compare", BATCH_RUN, BATCH_RUN, "--filter", "(")
        self.assertEqual(rc, 2)


class Versus(unittest.TestCase):
    """memra-dash versus: memra's tok/s over a peer's on the benchmarks both ran."""
    BESIDE = os.path.join(RESULTS, "h200-07b535e-beside-llamacpp.json")
    PEER9 = os.path.join(RESULTS, "llamacpp-h200-1425386fd-qwen35-9b-q8_0.json")

    @staticmethod
    def runs(d, memra_benches, peer_benches, peer_gpu="NVIDIA H200"):
        m = write(d, "h200-abc1234-x.json", {"context": {"gpu": "NVIDIA H200", "date": "2026-12-05T10:00:00Z"},
                                             "benchmarks": memra_benches})
        p = write(d, "llamacpp-h200-x.json", {"context": {"gpu": peer_gpu, "peer": "llama.cpp",
                                                          "date": "2026-12-05T10:00:00Z"},
                                              "benchmarks": peer_benches})
        return m, p

    def test_committed_runs_of_one_machine(self):
        # the same-machine pair docs/PERF.md quotes: every llama.cpp benchmark of the 9B Q8_0 pairs
        with tempfile.TemporaryDirectory() as d:
            rc, out, err = run_tool("versus", self.BESIDE, self.PEER9, "--json", os.path.join(d, "v.json"))
            self.assertEqual(rc, 0, out + err)
            res = load(os.path.join(d, "v.json"))
        rows = {r["what"]: r for r in res["rows"]}
        self.assertEqual(list(rows), ["decode", "prefill512"] + [f"B={b}" for b in (1, 4, 8, 16, 32, 64)])
        self.assertEqual(res["unpaired"], [])
        self.assertEqual(rows["decode"]["memra_key"], "Decode/qwen35-9b/q8_0/graph_stream")
        self.assertAlmostEqual(rows["decode"]["ratio"], 1.70, delta=0.005)
        self.assertAlmostEqual(rows["prefill512"]["ratio"], 0.68, delta=0.005)
        self.assertAlmostEqual(rows["B=64"]["ratio"], 1.27, delta=0.005)
        self.assertRegex(out, r"qwen35-9b q8_0\s+B=64\s+eager\s+2,939\s+2,305\s+1\.27x")
        rc, out, _ = run_tool("versus", self.BESIDE, self.PEER9, "--markdown", "--prefill-arm", "mmvq")
        self.assertEqual(rc, 0)
        self.assertIn("| qwen35-9b q8_0 | prefill512 | mmvq | 2,326 | 9,434 | 0.25x |", out)

    def test_pairs_arms_and_lists_the_unpaired(self):
        memra = [entry("Decode/s/q8_0/graph_stream", 1000.0, agg="median", items_per_second=1000.0),
                 entry("DecodeBatch/s/q8_0/graph/B8", 2000.0, agg="median", items_per_second=4000.0)]
        peer = [entry("Decode/s/q8_0/llamacpp_tg128", 2000.0, rep=0, items_per_second=500.0),
                entry("Decode/s/q8_0/llamacpp_tg128_d4096", 4000.0, rep=0, items_per_second=250.0),
                entry("Prefill512/s/q8_0/llamacpp_pp512", 100.0, rep=0, items_per_second=5120.0),
                entry("DecodeBatch/s/q8_0/llamacpp/B8", 4000.0, rep=0, items_per_second=2000.0)]
        with tempfile.TemporaryDirectory() as d:
            m, p = self.runs(d, memra, peer)
            rc, out, err = run_tool("versus", m, p, "--batch-arm", "graph", "--json", os.path.join(d, "v.json"))
            self.assertEqual(rc, 0, out + err)
            res = load(os.path.join(d, "v.json"))
            self.assertEqual([(r["what"], r["ratio"]) for r in res["rows"]], [("decode", 2.0), ("B=8", 2.0)])
            self.assertEqual(res["rows"][1]["memra_key"], "DecodeBatch/s/q8_0/graph/B8")
            why = {u["key"]: u["why"] for u in res["unpaired"]}
            self.assertEqual(why["Decode/s/q8_0/llamacpp_tg128_d4096"], "no memra arm pairs with it")
            self.assertIn("Prefill512/s/q8_0/gemm not in", why["Prefill512/s/q8_0/llamacpp_pp512"])
            self.assertIn("llamacpp_tg128_d4096: not paired", out)
            # the eager arm has no B = 8 here: only the decode pairs; with a decode arm memra did not
            # run, only the graph arm's B = 8; with neither, nothing pairs: exit 2
            rc, out, _ = run_tool("versus", m, p, "--json", os.path.join(d, "v.json"))
            self.assertEqual([r["what"] for r in load(os.path.join(d, "v.json"))["rows"]], ["decode"])
            rc, _, err = run_tool("versus", m, p, "--decode-arm", "graph", "--batch-arm", "graph",
                                  "--json", os.path.join(d, "v.json"))
            self.assertEqual(rc, 0, err)
            self.assertEqual([r["what"] for r in load(os.path.join(d, "v.json"))["rows"]], ["B=8"])
            rc, _, err = run_tool("versus", m, p, "--decode-arm", "graph")
            self.assertEqual(rc, 2)
            self.assertIn("no benchmark of llamacpp-h200-x.json pairs", err)

    def test_cards_and_bad_input(self):
        memra = [entry("Decode/s/q8_0/graph_stream", 1000.0, agg="median", items_per_second=1000.0)]
        peer = [entry("Decode/s/q8_0/llamacpp_tg128", 2000.0, rep=0, items_per_second=500.0)]
        with tempfile.TemporaryDirectory() as d:
            m, p = self.runs(d, memra, peer, peer_gpu="NVIDIA H100 80GB HBM3")
            rc, out, err = run_tool("versus", m, p)
            self.assertEqual(rc, 2, out + err)
            self.assertIn("on NVIDIA H100 80GB HBM3", err)
            self.assertIn("--cross-card", err)
            rc, out, err = run_tool("versus", m, p, "--cross-card")
            self.assertEqual(rc, 0, out + err)
            self.assertIn("CARDS DIFFER", out)
        for args in ([self.PEER9, self.PEER9], [self.BESIDE, BATCH_RUN]):  # no memra run; no peer run
            rc, _, err = run_tool("versus", *args)
            self.assertEqual(rc, 2)
            self.assertIn("wants one memra run and one or more peer runs", err)
        rc, _, err = run_tool("versus", self.BESIDE, os.path.join(RESULTS, "nope.json"))
        self.assertEqual(rc, 2)
        self.assertIn("nope.json", err)


def json_median(path, key, counter="items_per_second"):
    """The median aggregate's counter of the benchmark whose run_name, without Google Benchmark's
    /iterations:.../repeats:.../manual_time parts, is key: read from the file as written."""
    vals = [e[counter] for e in load(path)["benchmarks"]
            if e.get("aggregate_name") == "median" and re.sub(r"/(iterations|repeats):\d+|/manual_time", "",
                                                              e["run_name"]) == key]
    assert len(vals) == 1, (path, key, vals)
    return vals[0]


class Targets(unittest.TestCase):
    """memra-dash targets: bench/targets.json (issue 23) checked against runs."""
    BESIDE = Versus.BESIDE
    PEERS = [os.path.join(RESULTS, f"llamacpp-h200-1425386fd-{s}.json")
             for s in ("qwen3-0.6b-q8_0", "qwen35-9b-q8_0", "qwen35-9b-nvfp4", "qwen35-35b-a3b-nvfp4")]
    ALL = os.path.join(RESULTS, "h200-28195c8-all.json")
    FILE = os.path.join(ROOT, "bench", "targets.json")

    def peer_of(self, key):
        """The same-machine peer run of the key's shape, and its pp<N> key."""
        info = gbench.parse_key(key)
        path = os.path.join(RESULTS, f"llamacpp-h200-1425386fd-{info['shape']}-{info['dtype']}.json")
        n = info["prompt_len"]
        return path, f"Prefill{n}/{info['shape']}/{info['dtype']}/llamacpp_pp{n}"

    def test_the_committed_file(self):
        ts = targets.load_targets(self.FILE)
        kinds = [t["kind"] for t in ts]
        self.assertEqual((kinds.count("ratio"), kinds.count("versus"), kinds.count("counter")), (7, 4, 1))
        self.assertTrue(all(t.get("issue") == 23 for t in ts))
        # every benchmark a target reads is one a committed run has (a typo would never be measured)
        keys = set()
        for f in os.listdir(RESULTS):
            if f.endswith(".json"):
                keys |= set(gbench.load_run(os.path.join(RESULTS, f)).benches)
        for t in ts:
            for k in ("num", "den", "benchmark"):
                for key in ([] if k not in t else t[k] if isinstance(t[k], list) else [t[k]]):
                    self.assertIn(key, keys, t["name"])

    def test_committed_runs_of_one_machine(self):
        with tempfile.TemporaryDirectory() as d:
            out_json = os.path.join(d, "t.json")
            rc, out, err = run_tool("targets", self.BESIDE, *self.PEERS, "--json", out_json)
            res = load(out_json)
        self.assertEqual(rc, 1, out + err)  # measured targets are not met
        rows = res["rows"]
        self.assertEqual(len(rows), len(targets.load_targets(self.FILE)))
        checked = 0
        for r in rows:
            t = r["target"]
            if t["kind"] == "ratio" and t["num"] in gbench.load_run(self.BESIDE).benches:
                want = json_median(self.BESIDE, t["num"]) / json_median(self.BESIDE, t["den"])
            elif t["kind"] == "counter":
                want = json_median(self.BESIDE, t["benchmark"], t["counter"])
            elif t["kind"] == "versus":
                gemm = targets.benchmarks_of(t)[0]  # the run has the gemm arm, not flash
                self.assertEqual(r["benchmark"], gemm)
                peer, pkey = self.peer_of(gemm)
                want = json_median(self.BESIDE, gemm) / json_median(peer, pkey)
                self.assertEqual(r["peer_key"], pkey)
            else:
                self.assertIsNone(r["met"], r)
                self.assertIn(f"not in {os.path.basename(self.BESIDE)}", r["not_measured"])
                continue
            self.assertAlmostEqual(r["value"], want, delta=want * 1e-9, msg=r["name"])
            self.assertEqual(r["met"], want >= t["min"], r["name"])
            checked += 1
        self.assertEqual(checked, 11)
        self.assertEqual(res["summary"], {"met": 0, "not_met": 11, "not_measured": 1})
        self.assertIn("0 met, 11 not met, 1 not measured", out)
        by = {(r["target"].get("num") or targets.benchmarks_of(r["target"])[0]): r for r in rows}
        # the 0.6B prefill: 17630 over llama.cpp's 47773 tok/s, and 9B Q8_0 B = 8 over B = 1
        pre = by["Prefill512/qwen3-0.6b/q8_0/gemm"]
        self.assertAlmostEqual(pre["value"], 17630.0 / 47773.1, delta=0.0005)
        self.assertFalse(pre["met"])
        b8 = by["DecodeBatch/qwen35-9b/q8_0/B8"]
        self.assertAlmostEqual(b8["value"], 1334.557 / 361.534, delta=0.001)
        rc, out, _ = run_tool("targets", self.BESIDE, *self.PEERS, "--markdown")
        self.assertEqual(rc, 1)
        self.assertIn("| prefill512 / llama.cpp pp512, qwen3-0.6b q8_0 | 0.37x | >= 1.5x | not met "
                      "| gemm: 17,630 / 47,773 tok/s |", out)
        self.assertIn("| batch B=8 / B=1, qwen35-9b q8_0 | 3.69x | >= 6x | not met | 1,335 / 361.5 tok/s |", out)
        self.assertIn("| decode hbm_fraction, qwen35-9b nvfp4 graph_stream | 0.547 | >= 0.75 | not met |", out)

    def test_committed_run_without_peers(self):
        # graph over eager on the 0.6B is measured where the run has both arms; the targets against
        # llama.cpp are not measured without a peer run; the default targets file is the checkout's
        with tempfile.TemporaryDirectory() as d:
            out_json = os.path.join(d, "t.json")
            rc, out, err = run_tool("targets", self.ALL, "--json", out_json, cwd=d)
            self.assertEqual(rc, 1, out + err)
            rows = {r["name"]: r for r in load(out_json)["rows"]}
        g = rows["decode graph / eager (mmvq), qwen3-0.6b q8_0"]
        want = (json_median(self.ALL, "Decode/qwen3-0.6b/q8_0/graph")
                / json_median(self.ALL, "Decode/qwen3-0.6b/q8_0/mmvq"))
        self.assertAlmostEqual(g["value"], want, delta=1e-9)
        self.assertFalse(g["met"])
        # each alternative arm's reason, once: no peer run for gemm, no flash benchmark in that run
        self.assertEqual(rows["prefill512 / llama.cpp pp512, qwen35-9b q8_0"]["not_measured"],
                         "no peer run given; Prefill512/qwen35-9b/q8_0/flash not in h200-28195c8-all.json")
        self.assertIn("not measured: no peer run given", out)

    @staticmethod
    def write_targets(d, doc, name="t.json"):
        p = os.path.join(d, name)
        with open(p, "w") as f:
            f.write(doc if isinstance(doc, str) else json.dumps(doc))
        return p

    def synthetic(self, d, peer_gpu="NVIDIA H200"):
        memra = [entry("DecodeBatch/s/q8_0/B1/iterations:16/repeats:9/manual_time", 1000.0, agg="median",
                       items_per_second=100.0),
                 entry("DecodeBatch/s/q8_0/B8/iterations:16/repeats:9/manual_time", 1000.0, agg="median",
                       items_per_second=700.0),
                 entry("DecodeBatch/s/q8_0/B4", 1000.0, agg="median", items_per_second=599.9),
                 entry("DecodeBatch/s/q8_0/graph/B8", 1000.0, agg="median", items_per_second=900.0),
                 entry("Prefill512/s/q8_0/gemm", 100.0, agg="median", items_per_second=6000.0),
                 entry("Decode/s/q8_0/graph_stream", 1000.0, agg="median", items_per_second=600.0)]
        memra += [entry("Decode/s/q8_0/graph_stream", 1000.0, rep=i, items_per_second=600.0,
                        hbm_fraction=f) for i, f in enumerate((0.70, 0.80, 0.76))]
        peer = [entry("Prefill512/s/q8_0/llamacpp_pp512", 100.0, rep=0, items_per_second=4000.0),
                entry("Decode/s/q8_0/llamacpp_tg128", 2000.0, rep=0, items_per_second=500.0),
                entry("Decode/s/q8_0/llamacpp_tg256", 2000.0, rep=0, items_per_second=400.0),
                entry("DecodeBatch/s/q8_0/llamacpp/B8", 4000.0, rep=0, items_per_second=450.0)]
        return Versus.runs(d, memra, peer, peer_gpu=peer_gpu)

    def check(self, d, tlist, *runs, want_rc):
        t = self.write_targets(d, tlist)
        out_json = os.path.join(d, "out.json")
        rc, out, err = run_tool("targets", *runs, "--targets", t, "--json", out_json)
        self.assertEqual(rc, want_rc, out + err)
        return load(out_json) if os.path.exists(out_json) else None, out, err

    def test_met_not_met_not_measured(self):
        ratio = {"name": "B8", "kind": "ratio", "num": "DecodeBatch/s/q8_0/B8", "den": "DecodeBatch/s/q8_0/B1",
                 "min": 6}
        hbm = {"name": "hbm", "kind": "counter", "benchmark": "Decode/s/q8_0/graph_stream",
               "counter": "hbm_fraction", "min": 0.75, "why": "roofline", "issue": "23"}
        pre = {"name": "pp", "kind": "versus", "benchmark": "Prefill512/s/q8_0/gemm", "min": 1.5}
        absent = {"name": "absent", "kind": "ratio", "num": "DecodeBatch/s/q8_0/B32",
                  "den": "DecodeBatch/s/q8_0/B1", "min": 16}
        with tempfile.TemporaryDirectory() as d:
            m, p = self.synthetic(d)
            res, out, _ = self.check(d, [ratio, hbm, pre, absent], m, p, want_rc=0)
            rows = {r["name"]: r for r in res["rows"]}
            self.assertEqual(rows["B8"]["value"], 7.0)
            self.assertEqual(rows["hbm"]["value"], 0.76)  # the median of the repetitions' counter
            self.assertEqual(rows["pp"]["value"], 1.5)    # exactly the minimum: met
            self.assertEqual([rows[n]["met"] for n in ("B8", "hbm", "pp", "absent")], [True, True, True, None])
            self.assertEqual(rows["absent"]["not_measured"], "DecodeBatch/s/q8_0/B32 not in h200-abc1234-x.json")
            self.assertIn("3 met, 0 not met, 1 not measured", out)
            # one target above what the run reached: exit 1, named in the table
            res, out, _ = self.check(d, [ratio, dict(hbm, min=0.77), pre], m, p, want_rc=1)
            self.assertEqual(res["summary"], {"met": 2, "not_met": 1, "not_measured": 0})
            self.assertRegex(out, r"hbm\s+0\.760\s+>= 0\.77\s+not met")
            # without the peer run the versus target is not measured, the others still count
            res, out, _ = self.check(d, [ratio, pre], m, want_rc=0)
            self.assertIn("not measured: no peer run given", out)
            # just under the minimum never reads as the minimum
            res, out, _ = self.check(d, [dict(ratio, num="DecodeBatch/s/q8_0/B4")], m, want_rc=1)
            self.assertRegex(out, r"B8\s+5\.999x\s+>= 6x\s+not met")
            # nothing measurable: a mistaken file, exit 2
            _, _, err = self.check(d, [absent], m, want_rc=2)
            self.assertIn("no target of", err)

    def test_versus_pairs_as_versus_does(self):
        with tempfile.TemporaryDirectory() as d:
            m, p = self.synthetic(d)
            graph_b8 = {"name": "g8", "kind": "versus", "benchmark": "DecodeBatch/s/q8_0/graph/B8", "min": 2}
            eager_b8 = {"name": "e8", "kind": "versus", "benchmark": "DecodeBatch/s/q8_0/B8", "min": 1}
            tg128 = {"name": "tg128", "kind": "versus", "benchmark": "Decode/s/q8_0/graph_stream",
                     "peer": "Decode/s/q8_0/llamacpp_tg128/repeats:5", "min": 1}
            res, out, _ = self.check(d, [graph_b8, eager_b8, tg128], m, p, want_rc=0)
            rows = {r["name"]: r for r in res["rows"]}
            self.assertEqual((rows["g8"]["value"], rows["g8"]["met"]), (2.0, True))  # the arm from the key
            self.assertAlmostEqual(rows["e8"]["value"], 700.0 / 450.0)
            self.assertEqual((rows["tg128"]["value"], rows["tg128"]["peer_key"]), (1.2, "Decode/s/q8_0/llamacpp_tg128"))
            # a decode arm pairs with tg128 and tg256: the target must say which
            _, _, err = self.check(d, [dict(tg128, peer=None)], m, p, want_rc=2)
            self.assertIn("2 peer benchmarks pair with Decode/s/q8_0/graph_stream", err)
            self.assertIn("\"peer\"", err)
            # a peer key nothing pairs with: not measured
            _, out, _ = self.check(d, [dict(tg128, peer="Decode/s/q8_0/llamacpp_tg64"), eager_b8], m, p, want_rc=0)
            self.assertIn("not measured: no benchmark of the peer runs pairs with it as Decode/s/q8_0/llamacpp_tg64",
                          out)
            # two peer runs of one shape: refused, both named
            p2 = write(d, "llamacpp-h200-y.json", load(p))
            _, _, err = self.check(d, [eager_b8], m, p, p2, want_rc=2)
            self.assertIn("llamacpp-h200-y.json", err)
            self.assertIn("give one peer run of that shape", err)

    def test_versus_alternative_arms(self):
        # a target listing arms of one measure takes the best that measures and names it
        alt = {"name": "pp", "kind": "versus", "min": 1.5,
               "benchmark": ["Prefill512/s/q8_0/gemm", "Prefill512/s/q8_0/flash"]}
        with tempfile.TemporaryDirectory() as d:
            m, p = self.synthetic(d)
            res, out, _ = self.check(d, [alt], m, p, want_rc=0)  # flash not in the run: gemm's 1.5
            row = res["rows"][0]
            self.assertEqual((row["value"], row["benchmark"]), (1.5, "Prefill512/s/q8_0/gemm"))
            self.assertIn("gemm: 6,000 / 4,000 tok/s", out)
            doc = load(m)
            doc["benchmarks"].append(entry("Prefill512/s/q8_0/flash", 80.0, agg="median", items_per_second=7000.0))
            m2 = write(d, "h200-abc1234-y.json", doc)
            res, out, _ = self.check(d, [alt], m2, p, want_rc=0)
            row = res["rows"][0]
            self.assertEqual((row["value"], row["benchmark"]), (1.75, "Prefill512/s/q8_0/flash"))
            self.assertIn("flash: 7,000 / 4,000 tok/s", out)
            # neither measured: one reason per distinct cause
            res, out, _ = self.check(d, [alt, {"name": "B8", "kind": "ratio", "num": "DecodeBatch/s/q8_0/B8",
                                               "den": "DecodeBatch/s/q8_0/B1", "min": 6}], m2, want_rc=0)
            self.assertEqual(res["rows"][0]["not_measured"], "no peer run given")

    def test_malformed_targets_file(self):
        good = {"name": "B8", "kind": "ratio", "num": "DecodeBatch/s/q8_0/B8", "den": "DecodeBatch/s/q8_0/B1",
                "min": 6}
        cases = [
            ("[", "not JSON"),
            ({"targets": []}, "wants a non-empty JSON list"),
            ([], "wants a non-empty JSON list"),
            ([good, 3], "entry 2: not an object"),
            ([{k: v for k, v in good.items() if k != "name"}], "entry 1: no \"name\""),
            ([good, good], "entry 2 ('B8'): a second target of that name"),
            ([dict(good, kind="speed")], "entry 1 ('B8'): \"kind\" is 'speed'"),
            ([dict(good, min="6")], "entry 1 ('B8'): \"min\" is '6'"),
            ([dict(good, min=True)], "\"min\" is True"),
            ([{k: v for k, v in good.items() if k != "den"}], "entry 1 ('B8'): kind ratio wants \"den\""),
            ([dict(good, mni=6)], "entry 1 ('B8'): unknown key(s) mni"),
            ([dict(good, kind="counter")], "unknown key(s) den, num for kind counter"),
            ([{"name": "bw", "kind": "versus", "benchmark": "StreamRead/4GiB", "min": 1}],
             "entry 1 ('bw'): versus pairs Decode, Prefill<N> and DecodeBatch benchmarks"),
            ([dict(good, why=3)], "\"why\" wants a string"),
            ([{"name": "pp", "kind": "versus", "benchmark": [], "min": 1}], "\"benchmark\" wants a non-empty string"),
            ([{"name": "pp", "kind": "versus", "benchmark": ["Prefill512/s/q8_0/gemm", 3], "min": 1}],
             "or a non-empty list of them"),
            ([{"name": "pp", "kind": "versus", "benchmark": ["Prefill512/s/q8_0/gemm", "StreamRead/4GiB"], "min": 1}],
             "versus pairs Decode, Prefill<N> and DecodeBatch benchmarks, not StreamRead/4GiB"),
        ]
        with tempfile.TemporaryDirectory() as d:
            m, p = self.synthetic(d)
            for doc, want in cases:
                t = self.write_targets(d, doc)
                rc, out, err = run_tool("targets", m, p, "--targets", t)
                self.assertEqual(rc, 2, (doc, out, err))
                self.assertIn(want, err, doc)
                self.assertIn("t.json", err)
                self.assertEqual(out, "")
            rc, _, err = run_tool("targets", m, "--targets", os.path.join(d, "none.json"))
            self.assertEqual(rc, 2)
            self.assertIn("none.json", err)

    def test_cards_and_bad_input(self):
        pp = [{"name": "pp", "kind": "versus", "benchmark": "Prefill512/s/q8_0/gemm", "min": 1.5}]
        with tempfile.TemporaryDirectory() as d:
            m, p = self.synthetic(d, peer_gpu="NVIDIA H100 80GB HBM3")
            _, out, err = self.check(d, pp, m, p, want_rc=2)
            self.assertIn("on NVIDIA H100 80GB HBM3", err)
            self.assertIn("--cross-card", err)
            t = self.write_targets(d, pp)
            rc, out, err = run_tool("targets", m, p, "--targets", t, "--cross-card")
            self.assertEqual(rc, 0, out + err)
            self.assertIn("CARDS DIFFER", out)
            self.assertIn("1 met, 0 not met, 0 not measured", out)
            for args in ([p], [m, BATCH_RUN], [m, os.path.join(d, "nope.json")]):  # no memra run; two; no file
                rc, _, err = run_tool("targets", *args, "--targets", t)
                self.assertEqual(rc, 2, err)
            self.assertIn("nope.json", err)


class Render(unittest.TestCase):
    def test_plots_from_committed_runs(self):
        runs = gbench.load_runs([RESULTS])
        plots = render.Builder(runs).build()
        by = {}
        for p in plots:
            by.setdefault(p["section"], []).append(p)
        # prefill: the committed runs hold Prefill128/512/2048 of both arms (h200-57e3002-prefill-lengths)
        # and Prefill8192 of the gemm arm (h200-2db8ab4-prefill-lengths) on an H200, and 512/2048/8192 of
        # gemm and flash on an H100 (h100-e61d3b2-flash-prefill), and 128/512/2048 of flash on an H100
        # (h100-33c75f0-prefill-staging): one curve per arm and card, never a curve that mixes the
        # cards' points
        self.assertEqual(set(by), {"history", "arms", "roofline", "batch", "prefill", "versus"})
        pre = {p["title"]: p for p in by["prefill"]}
        curve = {s["label"]: [pt["x"] for pt in s["data"]]
                 for s in pre["Prefill qwen35-9b q8_0: tokens/s vs prompt length"]["series"]}
        self.assertEqual(curve["gemm, H200"], [128, 512, 2048, 8192])
        self.assertEqual(curve["mmvq, H200"], [128, 512, 2048])
        self.assertEqual(curve["gemm, H100 80GB HBM3"], [512, 2048, 8192])
        self.assertEqual(curve["flash, H100 80GB HBM3"], [128, 512, 2048, 8192])
        hist = {p["title"]: p for p in by["history"]}
        g = hist["Decode/qwen35-9b/q8_0/graph_stream"]
        i = g["labels"].index("d617128")
        self.assertAlmostEqual(g["series"][0]["data"][i], 373.3469784107551)
        # llama.cpp tg128 for the 9B: the same-machine run of each 9B dtype, then PERF.md's reference
        self.assertEqual([r["value"] for r in g["refs"]], [219.378, 244.592, 218], "llama.cpp tg128 for the 9B")
        self.assertEqual([r["sameDtype"] for r in g["refs"]], [True, False, True])
        self.assertEqual(g["refs"][1]["label"], "llama.cpp 1425386fd·qwen35-9b nvfp4: tg128 244.6 tok/s on H200",
                         "the label names the other dtype once")
        r35 = hist["Decode/qwen35-35b-a3b/nvfp4/graph"]["refs"]
        self.assertEqual([r["sameDtype"] for r in r35], [True, False])
        self.assertIn("(q8_0)", r35[1]["label"], "other dtype said")
        self.assertEqual([r["value"] for r in hist["Prefill512/qwen3-0.6b/q8_0/gemm"]["refs"]], [47773.1, 42000])
        self.assertIn("on H200", g["refs"][0]["label"], "the peer's card said: the page holds two")
        self.assertEqual(hist["StreamRead/4GiB"]["unit"], "GB/s")
        # the committed runs come from an H200 and an H100: a line and a band per card, never one
        # line through both (the H100's 3.1 TB/s is not a regression of the H200's 4.5)
        sr = hist["StreamRead/4GiB"]
        self.assertEqual([x["label"] for x in sr["series"]], ["median, H200", "median, H100 80GB HBM3"])
        self.assertNotIn("band", sr)
        self.assertEqual([b["label"] for b in sr["bands"]],
                         ["min–max of repetitions, H200", "min–max of repetitions, H100 80GB HBM3"])
        h100 = sr["labels"].index("3480dad")
        self.assertIsNone(sr["series"][0]["data"][h100])
        self.assertAlmostEqual(sr["series"][1]["data"][h100] / 1e3, 3.10, delta=0.02)
        self.assertIsNone(sr["bands"][0]["lo"][h100])
        self.assertIn("one line per GPU", sr["subtitle"])
        self.assertEqual([x["label"] for x in g["series"]], ["median, H200", "median, H100 80GB HBM3"],
                         "graph_stream ran on both cards (the H100 at de1a4f8): a line per card")
        self.assertEqual(len(g["bands"]), 2)
        self.assertAlmostEqual(g["series"][1]["data"][g["labels"].index("de1a4f8")], 1e6 / 3417.4, delta=0.5)
        gs6 = hist["Decode/qwen3-0.6b/q8_0/graph"]
        self.assertEqual(len(gs6["series"]), 2)
        arms = {p["title"] for p in by["arms"]}
        self.assertIn("Decode qwen35-9b q8_0: arms, latest run of each on H200", arms)
        self.assertIn("Decode qwen35-9b q8_0: arms, latest run of each on H100 80GB HBM3", arms,
                      "graph, graph_stream and mmvq there (de1a4f8)")
        for p in plots:
            pts = [v for s in p["series"] for v in s["data"] if v is not None]
            self.assertTrue(pts, p["title"])
        batch = {p["title"]: p for p in by["batch"]}
        b = batch["DecodeBatch qwen35-9b q8_0: tokens/s vs batch"]
        d9 = next(s for s in b["series"] if s["label"] == "d9b5cec (H200)")
        self.assertIn("3480dad (H100 80GB HBM3)", [s["label"] for s in b["series"]])
        self.assertEqual([pt["x"] for pt in d9["data"]], [1, 4, 16, 32])
        self.assertAlmostEqual(d9["data"][3]["y"], 876.1394035934178)
        # llama-batched-bench on the same H200: the peer's curve of each 9B dtype as a dashed line
        peer = next(s for s in b["refLines"] if s["label"] == "llama.cpp 1425386fd·qwen35-9b q8_0 on H200")
        self.assertEqual([pt["x"] for pt in peer["data"]], [1, 4, 8, 16, 32, 64])
        self.assertAlmostEqual(peer["data"][5]["y"], 2305.4, delta=0.05)
        up = batch["DecodeBatch qwen35-9b q8_0: tokens/s over the same run's B = 1"]
        ring = next(s for s in up["series"] if s["label"] == "060ffd8 (H200)")
        self.assertEqual([pt["x"] for pt in ring["data"]], [1, 8, 16, 32])
        self.assertAlmostEqual(ring["data"][3]["y"], 6.93, delta=0.01)
        self.assertIn("DecodeBatch qwen35-9b q8_0 graph: tokens/s vs batch", batch)
        self.assertNotIn("DecodeBatch qwen35-9b q8_0 graph: tokens/s over the same run's B = 1", batch,
                         "the graph arm has no B = 1 of its own: no speed-up curve")
        # memra over each peer run: the same-machine run of the day pairs with llama.cpp's (every
        # benchmark of the peer's), the reference figures with the run of the most pairs on their card
        vs = {p["title"]: p for p in by["versus"]}
        self.assertEqual(len(vs), 5)
        v9 = vs["07b535e over llama.cpp 1425386fd·qwen35-9b q8_0 on H200"]
        self.assertEqual(v9["labels"], ["decode", "prefill512"] + [f"B={b}" for b in (1, 4, 8, 16, 32, 64)])
        self.assertAlmostEqual(v9["series"][0]["data"][0], 1.70, delta=0.005)
        self.assertAlmostEqual(v9["series"][0]["data"][-1], 1.27, delta=0.005)
        self.assertEqual([r["value"] for r in v9["refs"]], [1.0])
        self.assertIn("graph_stream, h200-07b535e-beside-llamacpp.json", v9["series"][0]["tips"][0])
        ref = next(p for t, p in vs.items() if "(PERF.md reference)" in t)
        self.assertIn("qwen35-9b q8_0 decode", ref["labels"], "a peer of several shapes: each bar names its shape")
        roof = {p["title"]: p for p in by["roofline"]}
        r9 = roof["Decode qwen35-9b q8_0: fraction of the read roofline"]
        self.assertNotIn("d617128", r9["labels"])
        self.assertIn("d617128", r9["subtitle"])

    def synthetic_runs(self, d):
        def run(commit, date, values):
            bs = []
            for name, t_ms, n_tok in values:
                for i in range(3):
                    t = t_ms * (1 + 0.01 * (i - 1))
                    bs.append(entry(name, t, unit="ms", rep=i, items_per_second=n_tok / (t / 1e3)))
            write(d, f"h200-{commit}-prefill.json", {"context": {"date": date, "gpu": "NVIDIA H200"}, "benchmarks": bs})
        vals = [(f"Prefill{n}/qwen3-0.6b/q8_0/{arm}/iterations:1/repeats:3/manual_time", n / k * 1e3, n)
                for n in (128, 512, 2048) for arm, k in (("gemm", 16000.0), ("mmvq", 7000.0))]
        run("aaaaaaa", "2026-12-01T00:00:00+00:00", vals)
        run("bbbbbbb", "2026-12-02T00:00:00+00:00", vals)
        bvals = [(f"DecodeBatch/qwen3-0.6b/q8_0/B{b}/iterations:16/repeats:3/manual_time", 1.0 + b / 10, b)
                 for b in (1, 4, 16)]
        run("ccccccc", "2026-12-03T00:00:00+00:00", bvals)
        llama = [{"build_commit": "abc", "gpu_info": "NVIDIA H200", "model_type": "qwen3 0.6B Q8_0", "n_prompt": n,
                  "n_gen": 0, "n_depth": 0, "avg_ts": 40000.0, "samples_ts": [39000.0, 40000.0, 41000.0]}
                 for n in (512, 2048)]
        llama.append({"build_commit": "abc", "n_prompt": 0, "n_gen": 128, "avg_ts": 725.0, "samples_ts": [720.0, 725.0, 730.0]})
        llama.append({"build_commit": "abc", "n_prompt": 512, "n_gen": 128, "avg_ts": 1.0, "samples_ts": [1.0]})
        with open(os.path.join(d, "llama-bench.out"), "w") as f:
            json.dump(llama, f)
        # llama-batched-bench --output-format jsonl, with the log lines it writes to the same stream
        with open(os.path.join(d, "batched.out"), "w") as f:
            f.write("main: n_kv_max = 4096, n_batch = 2048\n{ not json\n")
            for pl, ts in ((1, 700.0), (4, 2400.0), (16, 8000.0)):
                f.write(json.dumps({"n_kv_max": 4096, "n_batch": 2048, "n_ubatch": 512, "flash_attn": 1,
                                    "is_pp_shared": 0, "pp": 16, "tg": 32, "pl": pl, "n_kv": pl * 48,
                                    "t_pp": 0.01, "speed_pp": 1.0, "t_tg": pl * 32 / ts, "speed_tg": ts,
                                    "t": 1.0, "speed": 1.0}) + "\n")
            f.write(json.dumps({"pp": 16, "tg": 64, "pl": 1, "t_tg": 0.1, "speed_tg": 640.0}) + "\n")

    def test_prefill_length_and_batch_curves_and_peer_import(self):
        with tempfile.TemporaryDirectory() as d:
            self.synthetic_runs(d)
            rc, _, err = run_tool("import-llama-bench", os.path.join(d, "llama-bench.out"), os.path.join(d, "batched.out"),
                                  "--shape", "qwen3-0.6b", "--dtype", "q8_0", "--out", os.path.join(d, "llamacpp-h200.json"))
            self.assertEqual(rc, 0, err)
            self.assertIn("left out batched pp16_tg64 B1, pp512+tg128", err)
            peer = gbench.load_run(os.path.join(d, "llamacpp-h200.json"))
            self.assertEqual((peer.peer, peer.commit), ("llama.cpp", "abc"))
            self.assertEqual(peer.context["peer_batched"], "llama-batched-bench pp16 tg32, prompts not shared")
            rc, _, err = run_tool("import-llama-bench", os.path.join(d, "llama-bench.out"), "--shape", "qwen3-0.6b",
                                  "--dtype", "q8_0", "--build-commit", "1425386fd", "--out", os.path.join(d, "other.json"))
            self.assertEqual(rc, 0, err)
            other = gbench.load_run(os.path.join(d, "other.json"))
            self.assertEqual(other.commit, "1425386fd")
            self.assertNotIn("peer_build_number", other.context)
            os.remove(os.path.join(d, "other.json"))
            b4 = peer.benches["DecodeBatch/qwen3-0.6b/q8_0/llamacpp/B4"]
            self.assertEqual((len(b4.reps), b4.median("throughput")), (1, 2400.0))
            self.assertAlmostEqual(b4.median("time"), 4 / 2400.0 * 1e9, delta=1.0)  # one step of 4 sequences
            tg = peer.benches["Decode/qwen3-0.6b/q8_0/llamacpp_tg128"]
            self.assertEqual((len(tg.reps), tg.median("throughput")), (3, 725.0))
            self.assertAlmostEqual(tg.median("time"), 1e9 / 725.0)
            pp = peer.benches["Prefill2048/qwen3-0.6b/q8_0/llamacpp_pp2048"]
            self.assertAlmostEqual(pp.median("time"), 2048 / 40000.0 * 1e9)
            plots = render.Builder(gbench.load_runs([d])).build()
        pre = [p for p in plots if p["section"] == "prefill"]
        self.assertEqual(len(pre), 1)
        p = pre[0]
        self.assertEqual(p["xTicks"], [128, 512, 2048])
        self.assertEqual([s["label"] for s in p["series"]], ["gemm", "mmvq"])
        self.assertEqual([pt["x"] for pt in p["series"][0]["data"]], [128, 512, 2048])
        self.assertAlmostEqual(p["series"][0]["data"][0]["y"], 16000.0, delta=1.0)
        self.assertEqual(sorted(r["x"] for r in p["pointRefs"]), [512, 2048])
        batch = {p["title"]: p for p in plots if p["section"] == "batch"}
        self.assertEqual(len(batch), 2)
        tps = batch["DecodeBatch qwen3-0.6b q8_0: tokens/s vs batch"]
        self.assertEqual([pt["x"] for pt in tps["series"][0]["data"]], [1, 4, 16])
        # the speed-up over the same run's B = 1 (B tokens in 1 + B/10 ms), against B× as a reference
        up = batch["DecodeBatch qwen3-0.6b q8_0: tokens/s over the same run's B = 1"]
        self.assertEqual([s["label"] for s in up["series"]], ["ccccccc"])
        got = [pt["y"] for pt in up["series"][0]["data"]]
        for y, b in zip(got, (1, 4, 16)):
            self.assertAlmostEqual(y, (b / (1 + b / 10)) / (1 / 1.1), places=6)
        self.assertEqual(up["refLines"][0]["data"], [{"x": 1, "y": 1.0}, {"x": 4, "y": 4.0}, {"x": 16, "y": 16.0}])
        # the peer's batched curve beside memra's, and its own speed-up over its B = 1
        self.assertEqual([(r["label"], [(pt["x"], pt["y"]) for pt in r["data"]]) for r in tps["refLines"]],
                         [("llamacpp-h200", [(1, 700.0), (4, 2400.0), (16, 8000.0)])])
        self.assertEqual([round(pt["y"], 6) for pt in up["refLines"][1]["data"]], [1.0, round(2400 / 700, 6), round(8000 / 700, 6)])
        self.assertEqual(up["refLines"][1]["label"], tps["refLines"][0]["label"])
        hist = {p["title"]: p for p in plots if p["section"] == "history"}
        self.assertEqual(hist["Prefill2048/qwen3-0.6b/q8_0/gemm"]["refs"][0]["value"], 40000.0)
        self.assertNotIn("Prefill128/qwen3-0.6b/q8_0/gemm", [r["label"] for r in hist["Prefill128/qwen3-0.6b/q8_0/gemm"]["refs"]])
        self.assertEqual(hist["Prefill128/qwen3-0.6b/q8_0/gemm"]["refs"], [], "no pp128 peer")
        self.assertEqual(hist["Prefill512/qwen3-0.6b/q8_0/gemm"]["labels"], ["aaaaaaa", "bbbbbbb"], "peers not in history")
        # memra over the peer: the run of its card with the most pairs (ccccccc: B = 1, 4, 16), one
        # shape, which the title names since the peer's label does not
        vs = [p for p in plots if p["section"] == "versus"]
        self.assertEqual([p["title"] for p in vs], ["ccccccc over llamacpp-h200, qwen3-0.6b q8_0"])
        self.assertEqual(vs[0]["labels"][-3:], ["B=1", "B=4", "B=16"])
        self.assertAlmostEqual(vs[0]["series"][0]["data"][-3], (1 / 1.1e-3) / 700.0, places=6)

    def test_other_families(self):
        # a family memra-dash has no plan for (TeacherForcedStep) is still drawn over the runs, by
        # its rate; one without a rate by its time per iteration
        with tempfile.TemporaryDirectory() as d:
            es = []
            for i, t in enumerate([5000.0, 5100.0, 4900.0]):
                es.append(entry("TeacherForcedStep/qwen35-9b/q8_0/iterations:32/repeats:3/manual_time", t, rep=i,
                                tok_per_s=1e6 / t, items_per_second=1e6 / t))
                es.append(entry("BM_NoRate/8", t, unit="ns", rep=i))
            write(d, "h200-1234567-x.json", {"context": {"date": "2026-12-03T00:00:00Z"}, "benchmarks": es})
            plots = {p["title"]: p for p in render.Builder(gbench.load_runs([d])).build()}
        self.assertEqual(set(plots), {"TeacherForcedStep/qwen35-9b/q8_0", "BM_NoRate/8"})
        self.assertEqual(plots["TeacherForcedStep/qwen35-9b/q8_0"]["series"][0]["data"], [200.0])
        self.assertEqual(plots["BM_NoRate/8"]["series"][0]["data"], [5000.0])
        self.assertIn("time", plots["BM_NoRate/8"]["yTitle"])

    def test_page_is_self_contained(self):
        with tempfile.TemporaryDirectory() as d:
            lib = os.path.join(d, "chart.umd.min.js")
            with open(lib, "w") as f:
                f.write("/*!\n * Chart.js v0.0-test\n */\nwindow.Chart=function(){};\n//# sourceMappingURL=chart.umd.min.js.map\n")
            out = os.path.join(d, "out", "dash.html")
            rc, _, err = run_tool("render", RESULTS, "--out", out, "--chart-js", lib)
            self.assertEqual(rc, 0, err)
            self.assertRegex(err, r"\(\d+ runs, 5 peer runs, \d+ plots\)")
            with open(out) as f:
                page = f.read()
        self.assertNotRegex(page, r"<script[^>]*\ssrc=", "no external script")
        self.assertNotRegex(page, r"<link[^>]*\shref=", "no external stylesheet")
        self.assertNotIn("sourceMappingURL", page)
        self.assertIn("Chart.js v0.0-test", page)
        self.assertIn('id="memra-dash-status"', page)
        self.assertIn("llamacpp-reference.json", page)
        m = re.search(r'<script id="memra-data" type="application/json">(.*?)</script>', page, re.S)
        self.assertTrue(json.loads(m.group(1))["plots"])

    def test_missing_chart_js_fails_clearly(self):
        with tempfile.TemporaryDirectory() as d:
            rc, _, err = run_tool("render", RESULTS, "--out", os.path.join(d, "x.html"), "--chart-js",
                                  os.path.join(d, "none.js"))
            self.assertEqual(rc, 2)
            self.assertIn("no such file", err)
            saved = render.cache_dirs
            render.cache_dirs = lambda: [d]
            try:
                with self.assertRaises(render.MissingLibrary) as cm:
                    render.find_chart_js(None)
            finally:
                render.cache_dirs = saved
            self.assertIn("./dev setup", str(cm.exception))
            self.assertFalse(os.path.exists(os.path.join(d, "x.html")))


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0], "-v"] + sys.argv[1:])
