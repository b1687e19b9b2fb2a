"""memra-dash: dashboards and A/B comparisons of Google Benchmark JSON runs (docs/dashboard.md).

Standard library only. Modules: gbench (reading runs: names, repetitions vs aggregates, context),
stats (the Mann-Whitney U test), compare (the `compare` verb), render (the `render` verb: one
self-contained HTML page), llamabench (llama-bench JSON -> a peer run), cli (the entry point).
"""
