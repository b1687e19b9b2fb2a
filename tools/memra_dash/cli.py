"""memra-dash: render | compare | versus | targets | import-llama-bench (docs/dashboard.md)."""
from __future__ import annotations

import argparse
import os
import sys

from . import compare, llamabench, render, targets, versus

# the checkout's bench/targets.json (tools/memra_dash/ -> the repository root)
TARGETS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                       "bench", "targets.json")


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="memra-dash",
        description="Dashboards and A/B comparisons of Google Benchmark JSON runs (bench/results/). "
                    "docs/dashboard.md has the details.")
    sub = p.add_subparsers(dest="verb", required=True)

    r = sub.add_parser("render", help="one static, self-contained HTML dashboard from runs",
                       description="Turn Google Benchmark JSON runs (files, or folders of *.json) into one "
                                   "self-contained HTML page (Chart.js inlined: it opens offline).")
    r.add_argument("inputs", nargs="+", metavar="DIR_OR_FILE")
    r.add_argument("--out", required=True, metavar="OUT.html")
    r.add_argument("--chart-js", metavar="PATH",
                   help="Chart.js UMD build (chart.umd.min.js) or its folder; default: the npm cache of "
                        "tools/fetch-tokenizers.sh ($MEMRA_CACHE_DIR, else ~/.cache/memra, else .cache/memra)")
    r.add_argument("--title", default="memra benchmarks")
    r.set_defaults(func=render.main)

    c = sub.add_parser("compare", help="per-benchmark change and Mann-Whitney U p-value; exit 1 on a regression",
                       description="Compare two runs benchmark by benchmark: median time per iteration, relative "
                                   "change, two-sided Mann-Whitney U p-value over the repetitions. Exit 1 when a "
                                   "benchmark is slower by more than --threshold with p < --alpha, 2 on bad input.")
    c.add_argument("base", metavar="BASE.json")
    c.add_argument("contender", metavar="CONTENDER.json")
    c.add_argument("--threshold", type=float, default=0.05,
                   help="relative slowdown that counts as a regression (default 0.05 = 5%%)")
    c.add_argument("--alpha", type=float, default=0.05, help="significance level of the U test (default 0.05)")
    c.add_argument("--filter", metavar="REGEX", help="only benchmarks whose key matches (re.search)")
    c.add_argument("--json", metavar="OUT.json", help="also write the table as JSON (for scripts)")
    c.add_argument("--cross-card", action="store_true",
                   help="compare runs of different cards (context gpu) anyway: the table, no verdict, exit 0")
    c.set_defaults(func=compare.main)

    v = sub.add_parser("versus", help="memra's tokens/s over a peer's (llama.cpp) on the benchmarks both ran",
                       description="Pair a memra run with peer runs (import-llama-bench) benchmark by benchmark: "
                                   "decode (tg), prefill (pp) and batched decode (llama-batched-bench), memra's "
                                   "median tokens/s over the peer's. Exit 2 on bad input, runs of different cards "
                                   "(unless --cross-card) or when nothing pairs up.")
    v.add_argument("memra", metavar="MEMRA.json")
    v.add_argument("peers", metavar="PEER.json", nargs="+")
    v.add_argument("--decode-arm", default="graph_stream", help="memra's Decode arm against tg<N> (default graph_stream)")
    v.add_argument("--prefill-arm", default="gemm", help="memra's Prefill<N> arm against pp<N> (default gemm)")
    v.add_argument("--batch-arm", default="eager",
                   help="memra's DecodeBatch arm against llama-batched-bench (default eager; graph)")
    v.add_argument("--markdown", action="store_true", help="the table in Markdown (for docs/PERF.md)")
    v.add_argument("--json", metavar="OUT.json", help="also write the rows as JSON (for scripts)")
    v.add_argument("--cross-card", action="store_true",
                   help="pair runs of different cards (context gpu) anyway: the table, said so")
    v.set_defaults(func=versus.main)

    t = sub.add_parser("targets", help="the serving targets (bench/targets.json) checked against a run; exit 1 "
                                       "when a measured one is not met",
                       description="Check the project's serving targets (bench/targets.json: ratios of a memra "
                                   "run's benchmarks, a counter's median, memra over a peer run) against a memra "
                                   "run and its peer runs. A target the runs cannot measure is reported, neither "
                                   "met nor failed. Exit 0 when every measured target is met, 1 when one is not, "
                                   "2 on bad input, runs of different cards (unless --cross-card) or when no "
                                   "target can be measured.")
    t.add_argument("memra", metavar="MEMRA.json")
    t.add_argument("peers", metavar="PEER.json", nargs="*")
    t.add_argument("--targets", default=TARGETS, metavar="TARGETS.json",
                   help="the targets file (default: the checkout's bench/targets.json)")
    t.add_argument("--markdown", action="store_true", help="the table in Markdown (for docs/PERF.md)")
    t.add_argument("--json", metavar="OUT.json", help="also write the rows as JSON (for scripts)")
    t.add_argument("--cross-card", action="store_true",
                   help="check against peer runs of another card (context gpu) anyway, said so")
    t.set_defaults(func=targets.main)

    i = sub.add_parser("import-llama-bench", help="llama-bench JSON (-o json / jsonl) -> a peer run",
                       description="Convert llama-bench output (and llama-batched-bench jsonl) of one model into a "
                                   "Google Benchmark JSON peer run that render draws as reference lines (and "
                                   "compare.py reads).")
    i.add_argument("input", metavar="LLAMA_BENCH.json", nargs="+",
                   help="llama-bench -o json / jsonl output, llama-batched-bench --output-format jsonl output")
    i.add_argument("--shape", required=True, help="memra shape the model stands for, e.g. qwen35-9b")
    i.add_argument("--dtype", required=True, help="its weight type in memra's spelling, e.g. q8_0")
    i.add_argument("--out", required=True, metavar="OUT.json")
    i.add_argument("--label", help="the peer run's label in the dashboard (default: the file's stem)")
    i.add_argument("--build-commit", metavar="COMMIT",
                   help="llama.cpp's commit, replacing the build_commit its records carry (a tree without its "
                        "own git metadata reports an enclosing repository's commit, or unknown)")
    i.set_defaults(func=llamabench.main)
    return p


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
