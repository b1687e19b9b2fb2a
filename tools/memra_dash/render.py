"""memra-dash render: Google Benchmark JSON runs -> one static, self-contained HTML dashboard.

The page is built here as a list of plot specifications (plain JSON: labels, series, bands,
reference lines) and drawn in the browser by dashboard.js with Chart.js, both inlined, so the
file opens offline. After drawing, the page records what it drew in window.__memraDash =
{plots, rendered, errors} and in the element #memra-dash-status (the browser test reads it).

Sections: every benchmark over the runs (median, min/max band), arms side by side, the fraction
of the read roofline, batch scaling, prefill length curves (when several Prefill<N> lengths
exist), and a context table per run. Peer runs (context "peer", e.g. llama.cpp) are drawn as
reference lines, never as points of memra's history.
"""
from __future__ import annotations

import datetime as _dt
import html
import json
import math
import os
import sys

from . import gbench
from . import versus as versus_mod

HERE = os.path.dirname(os.path.abspath(__file__))
KIND_ORDER = {"decode": 0, "batch": 1, "prefill": 2, "stream": 3, "other": 4}
KIND_TITLE = {"decode": "Decode (batch 1)", "batch": "Batched decode", "prefill": "Prefill",
              "stream": "Read bandwidth", "other": "Other benchmarks"}
CHART_JS_REL = os.path.join("npm", "node_modules", "chart.js", "dist")
CHART_JS_FILES = ("chart.umd.min.js", "chart.umd.js")


class MissingLibrary(Exception):
    pass


# -- finding Chart.js -------------------------------------------------------------------------------
def cache_dirs() -> list[str]:
    """Where tools/fetch-tokenizers.sh puts the npm cache: $MEMRA_CACHE_DIR, else ~/.cache/memra,
    and the repository's carried .cache/memra."""
    dirs = []
    if os.environ.get("MEMRA_CACHE_DIR"):
        dirs.append(os.environ["MEMRA_CACHE_DIR"])
    dirs.append(os.path.join(os.path.expanduser("~"), ".cache", "memra"))
    dirs.append(os.path.normpath(os.path.join(HERE, "..", "..", ".cache", "memra")))
    return dirs


def find_chart_js(option: str | None) -> str:
    if option:
        if os.path.isdir(option):
            for f in CHART_JS_FILES:
                p = os.path.join(option, f)
                if os.path.isfile(p):
                    return p
            raise MissingLibrary(f"--chart-js {option}: no {' or '.join(CHART_JS_FILES)} in that folder")
        if not os.path.isfile(option):
            raise MissingLibrary(f"--chart-js {option}: no such file")
        return option
    tried = []
    for d in cache_dirs():
        for f in CHART_JS_FILES:
            p = os.path.join(d, CHART_JS_REL, f)
            tried.append(p)
            if os.path.isfile(p):
                return p
    raise MissingLibrary(
        "Chart.js not found (looked for " + ", ".join(dict.fromkeys(tried)) + ").\n"
        "  Fetch it with ./dev setup (or tools/fetch-tokenizers.sh: npm into $MEMRA_CACHE_DIR, default\n"
        "  ~/.cache/memra), or pass --chart-js PATH/TO/chart.umd.min.js.")


# -- building the plots -----------------------------------------------------------------------------
def _fmt(v, unit=""):
    if v is None:
        return "-"
    a = abs(v)
    s = f"{v:.4g}" if a < 1e4 else f"{v:,.0f}"
    return f"{s} {unit}".strip()


def _time_str(ns):
    if ns is None:
        return "-"
    for unit, f in (("s", 1e9), ("ms", 1e6), ("µs", 1e3)):
        if ns >= f:
            return f"{ns / f:.4g} {unit}"
    return f"{ns:.4g} ns"


def _sort_key(info):
    return (KIND_ORDER.get(info["kind"], 9), info["family"] if info["kind"] == "other" else "",
            info["shape"] or "", info["dtype"] or "", info["prompt_len"] or 0, info["arm"] or "",
            info["batch"] or 0, info["key"])


def _metric_for(b: gbench.Bench) -> str:
    return "throughput" if b.median("throughput") is not None else "time"


def _unit_for(b: gbench.Bench, metric: str) -> str:
    return b.throughput_unit() if metric == "throughput" else "ns"


def _point_tip(run: gbench.Run, b: gbench.Bench, metric: str) -> str:
    s = b.summary(metric)
    unit = _unit_for(b, metric)
    lines = [f"{run.file}", f"{run.date_str()}"]
    t = b.median("time")
    if t is not None:
        lines.append(f"time/iteration {_time_str(t)}")
    lab = next((e.get("label") for e in b.entries() if e.get("label")), None)
    if lab:  # bench_decode: the shape and the arms this benchmark ran with
        words, line = lab.split(), ""
        for w in words:
            if line and len(line) + len(w) > 60:
                lines.append(line)
                line = ""
            line = f"{line} {w}".strip()
        lines.append(line)
    if s["band"] == "range":
        lines.append(f"min {_fmt(s['min'], unit)} max {_fmt(s['max'], unit)} ({s['n']} repetitions)")
    elif s["band"] == "stddev":
        lines.append(f"± stddev {_fmt(s['max'] - s['median'], unit)} ({s['repetitions']} repetitions, "
                     f"aggregates only)")
    return "\n".join(lines)


def _peer_batch_lines(peers, shape, dtype, with_card=False):
    """Peer runs' batched-decode curves of a shape (tokens/s against B, and the same over the
    peer's own B = 1) as dashed reference lines. The dtype may differ: the label says the peer's."""
    lines, scaled = [], []
    for p in peers:
        by_dtype: dict[str, list] = {}
        for pb in p.benches.values():
            pi = pb.info
            if pi["kind"] == "batch" and pi["shape"] == shape and pi["batch"] is not None:
                v = pb.median("throughput")
                if v is not None:
                    by_dtype.setdefault(pi["dtype"], []).append({"x": pi["batch"], "y": v})
        for d, pts in sorted(by_dtype.items(), key=lambda kv: kv[0] != dtype):
            pts.sort(key=lambda pt: pt["x"])
            label = p.label + ("" if d == dtype or p.label.endswith(f" {d}") else f" ({d})")
            if with_card:
                label += f" on {gbench.card_label(p.card)}"
            lines.append({"label": label, "data": pts})
            one = next((pt["y"] for pt in pts if pt["x"] == 1), None)
            if one:
                scaled.append({"label": label, "data": [{"x": pt["x"], "y": pt["y"] / one} for pt in pts]})
    return lines, scaled


def _peer_refs(peers, info, metric="throughput", with_card=False):
    """Reference values of peer runs for a memra benchmark: same kind and shape (and prompt length
    for prefill). The dtype may differ: the label says the peer's; with_card: and its card."""
    refs = []
    if info["kind"] not in ("decode", "prefill"):
        return refs
    for p in peers:
        for pb in p.benches.values():
            pi = pb.info
            if pi["kind"] != info["kind"] or pi["shape"] != info["shape"]:
                continue
            if info["kind"] == "prefill" and pi["prompt_len"] != info["prompt_len"]:
                continue
            v = pb.median(metric)
            if v is None:
                continue
            same = pi["dtype"] == info["dtype"]
            what = pi["arm"] or pi["family"]
            if what.startswith("llamacpp_"):
                what = what[len("llamacpp_"):]
            label = f"{p.label}: {what} {_fmt(v, 'tok/s')}"
            if not same and not p.label.endswith(f" {pi['dtype']}"):  # the label may name it already
                label += f" ({pi['dtype']})"
            if with_card:
                label += f" on {gbench.card_label(p.card)}"
            refs.append({"label": label, "value": v, "sameDtype": same})
    return refs


class Builder:
    def __init__(self, runs: list[gbench.Run]):
        self.runs = [r for r in runs if not r.peer]
        self.peers = [r for r in runs if r.peer]
        self.plots: list[dict] = []
        self.notes: dict[str, list[str]] = {}
        # runs on several cards: every plot keeps them apart (a line, bar group or curve per card)
        self.multi_card = len({r.card for r in self.runs}) > 1

    def _cards(self, runs) -> list[str]:
        """The cards of these runs, in the order they first ran."""
        out = []
        for r in runs:
            if r.card not in out:
                out.append(r.card)
        return out

    def add(self, section, spec):
        spec["id"] = f"p{len(self.plots)}"
        spec["section"] = section
        self.plots.append(spec)

    def note(self, section, text):
        self.notes.setdefault(section, []).append(text)

    def keys(self):
        infos = {}
        for r in self.runs:
            for k, b in r.benches.items():
                infos.setdefault(k, b.info)
        return sorted(infos.values(), key=_sort_key)

    # every benchmark over the runs
    def history(self):
        for info in self.keys():
            key = info["key"]
            pts = [(r, r.benches[key]) for r in self.runs if key in r.benches]
            metric = _metric_for(pts[-1][1])
            pts = [(r, b) for r, b in pts if b.median(metric) is not None]
            if not pts:
                continue
            unit = _unit_for(pts[-1][1], metric)
            med, lo, hi, tips, how = [], [], [], [], set()
            for r, b in pts:
                s = b.summary(metric)
                med.append(s["median"])
                lo.append(s["min"])
                hi.append(s["max"])
                if s["band"]:
                    how.add(s["band"])
                tips.append(_point_tip(r, b, metric))
            band_label = {frozenset(["range"]): "min–max of repetitions",
                          frozenset(["stddev"]): "± stddev (aggregates only)",
                          frozenset(["range", "stddev"]): "min–max (± stddev where aggregates only)"}.get(frozenset(how))
            cards = self._cards(r for r, _ in pts)
            if len(cards) == 1:
                series = [{"label": "median", "data": med, "tips": tips}]
            else:  # a line per card over the shared run axis (gaps where another card ran)
                series = [{"label": f"median, {gbench.card_label(cd)}",
                           "data": [v if r.card == cd else None for (r, _), v in zip(pts, med)],
                           "tips": [t if r.card == cd else "" for (r, _), t in zip(pts, tips)]} for cd in cards]
            spec = {"type": "line", "title": key, "labels": [r.label for r, _ in pts],
                    "yTitle": ("tokens/s" if unit == "tok/s" else unit) if metric == "throughput" else "time/iteration (ns)",
                    "unit": unit, "series": series,
                    "refs": _peer_refs(self.peers, info, with_card=self.multi_card) if metric == "throughput" else []}
            if len(cards) > 1:
                spec["subtitle"] = "one line per GPU: runs on different cards are different machines, not a change"
                if band_label and any(v is not None for v in lo):
                    spec["bands"] = [{"label": f"{band_label}, {gbench.card_label(cd)}", "series": i,
                                      "lo": [v if r.card == cd else None for (r, _), v in zip(pts, lo)],
                                      "hi": [v if r.card == cd else None for (r, _), v in zip(pts, hi)]}
                                     for i, cd in enumerate(cards)]
            elif band_label and any(v is not None for v in lo):
                spec["band"] = {"label": band_label, "lo": lo, "hi": hi}
            self.add("history", spec)

    def _latest(self, key, card=None):
        """The latest run of a benchmark (on that card, when given)."""
        for r in reversed(self.runs):
            if key in r.benches and (card is None or r.card == card):
                return r, r.benches[key]
        return None, None

    def _card_suffix(self, card) -> str:
        return f" on {gbench.card_label(card)}" if self.multi_card else ""

    # arms of one shape side by side (per card: bars of different cards are not compared)
    def arms(self):
        groups: dict[tuple, list[dict]] = {}
        for info in self.keys():
            if info["kind"] in ("decode", "prefill") and info["shape"]:
                groups.setdefault((info["family"], info["shape"], info["dtype"]), []).append(info)
        for (fam, shape, dtype), infos in groups.items():
            for card in self._cards(r for r in self.runs if any(i["key"] in r.benches for i in infos)):
                self._arms_of(fam, shape, dtype, infos, card)

    def _arms_of(self, fam, shape, dtype, infos, card):
        if len(infos) < 2:
            return
        labels, vals, tips = [], [], []
        for info in infos:
            r, b = self._latest(info["key"], card)
            if b is None:
                continue
            v = b.median("throughput")
            if v is None:
                continue
            labels.append(f"{info['arm']} @{r.label}")
            vals.append(v)
            tips.append(_point_tip(r, b, "throughput"))
        if len(vals) < 2:
            return
        self.add("arms", {"type": "bar",
                          "title": f"{fam} {gbench.shape_label(shape, dtype)}: arms, latest run of each{self._card_suffix(card)}",
                          "labels": labels, "yTitle": "tokens/s", "unit": "tok/s",
                          "series": [{"label": "median tok/s", "data": vals, "tips": tips}],
                          "refs": _peer_refs(self.peers, infos[0], with_card=self.multi_card)})

    # fraction of the measured read roofline
    def roofline(self):
        groups: dict[tuple, list[dict]] = {}
        for info in self.keys():
            if info["kind"] == "decode":
                groups.setdefault((info["shape"], info["dtype"]), []).append(info)
        for (shape, dtype), infos in groups.items():
            runs = []
            missing = []
            for r in self.runs:
                has = [i for i in infos if i["key"] in r.benches]
                if not has:
                    continue
                if any(r.benches[i["key"]].median("fraction") is not None for i in has):
                    runs.append(r)
                else:
                    missing.append(r.label)
            if not runs:
                continue
            series = []
            cards = self._cards(runs)
            for info in infos:
                for card in cards:  # a line per arm, and per card where several ran it
                    data, tips = [], []
                    for r in runs:
                        b = r.benches.get(info["key"]) if r.card == card else None
                        v = b.median("fraction") if b else None
                        data.append(v)
                        tips.append(_point_tip(r, b, "fraction") if b and v is not None else "")
                    if any(v is not None for v in data):
                        label = info["arm"] + (f", {gbench.card_label(card)}" if len(cards) > 1 else "")
                        series.append({"label": label, "data": data, "tips": tips})
            spec = {"type": "line", "title": f"Decode {gbench.shape_label(shape, dtype)}: fraction of the read roofline",
                    "labels": [r.label for r in runs], "yTitle": "fraction of StreamRead", "unit": "",
                    "yZero": True, "series": series, "refs": []}
            if missing:
                spec["subtitle"] = "no fraction for " + ", ".join(missing) + " (no hbm_fraction and no StreamRead in the run)"
            self.add("roofline", spec)

    # tokens/s against B
    def batch(self):
        groups: dict[tuple, list[dict]] = {}
        for info in self.keys():
            if info["kind"] == "batch" and info["batch"] is not None:
                groups.setdefault((info["shape"], info["dtype"], info["arm"]), []).append(info)
        for (shape, dtype, arm), infos in groups.items():
            series, cards, scaling = [], [], []
            for r in self.runs:
                pts, tips = [], []
                for info in sorted(infos, key=lambda i: i["batch"]):
                    b = r.benches.get(info["key"])
                    v = b.median("throughput") if b else None
                    if v is not None:
                        pts.append({"x": info["batch"], "y": v})
                        tips.append(_point_tip(r, b, "throughput"))
                if len(pts) >= 2:
                    series.append({"label": r.label, "data": pts, "tips": tips})
                    cards.append(r.card)
                    # the same run's tokens/s over its own B = 1: how far a step of B rows is from
                    # costing what one row's step does (every weight byte read once either way)
                    one = next((pt["y"] for pt in pts if pt["x"] == 1), None)
                    scaling.append({"label": r.label, "data": [{"x": pt["x"], "y": pt["y"] / one} for pt in pts],
                                    "tips": tips} if one else None)
            if len(set(cards)) > 1:  # curves of several cards: each says its own
                for sr, card in zip(series, cards):
                    sr["label"] += f" ({gbench.card_label(card)})"
            if not series:
                continue
            # the peer's curve (llama-batched-bench) beside memra's eager arm, the form it measures
            peer_lines, peer_scaled = (_peer_batch_lines(self.peers, shape, dtype, with_card=self.multi_card)
                                       if arm == "eager" else ([], []))
            ticks = sorted({i["batch"] for i in infos} | {pt["x"] for ln in peer_lines for pt in ln["data"]})
            title = f"DecodeBatch {gbench.shape_label(shape, dtype)}" + (f" {arm}" if arm and arm != "eager" else "")
            self.add("batch", {"type": "xy", "title": title + ": tokens/s vs batch", "xTitle": "B (sequences per step, log scale)",
                               "xLog": True, "xTicks": ticks,
                               "yTitle": "tokens/s (all sequences)", "unit": "tok/s", "series": series, "refs": [],
                               "refLines": peer_lines})
            runs_scaled = [sc for sc in scaling if sc]
            if runs_scaled:
                for sc, sr in zip(scaling, series):
                    if sc:
                        sc["label"] = sr["label"]  # with its card where several ran
                ideal = {"label": "B× (a step of B rows costs one row's step)",
                         "data": [{"x": b, "y": float(b)} for b in ticks]}
                self.add("batch", {"type": "xy", "title": title + ": tokens/s over the same run's B = 1",
                                   "xTitle": "B (sequences per step, log scale)", "xLog": True, "xTicks": ticks,
                                   "yTitle": "speed-up over B = 1", "unit": "×", "series": runs_scaled,
                                   "refs": [], "refLines": [ideal] + peer_scaled})
        if not any(p["section"] == "batch" for p in self.plots):
            self.note("batch", "No run has DecodeBatch benchmarks of two or more batch sizes.")

    # tokens/s against the prompt length
    def prefill(self):
        groups: dict[tuple, list[dict]] = {}
        for info in self.keys():
            if info["kind"] == "prefill" and info["prompt_len"]:
                groups.setdefault((info["shape"], info["dtype"]), []).append(info)
        single = set()
        for (shape, dtype), infos in groups.items():
            lengths = sorted({i["prompt_len"] for i in infos})
            if len(lengths) < 2:
                single.update(lengths)
                continue
            series = []
            cards = self._cards(r for r in self.runs if any(i["key"] in r.benches for i in infos))
            for arm in sorted({i["arm"] for i in infos}):
                for card in cards:  # the latest point of each length on each card
                    pts, tips = [], []
                    for n in lengths:
                        k = next((i["key"] for i in infos if i["arm"] == arm and i["prompt_len"] == n), None)
                        if not k:
                            continue
                        r, b = self._latest(k, card)
                        v = b.median("throughput") if b else None
                        if v is not None:
                            pts.append({"x": n, "y": v})
                            tips.append(_point_tip(r, b, "throughput"))
                    if pts:
                        label = arm + (f", {gbench.card_label(card)}" if len(cards) > 1 else "")
                        series.append({"label": label, "data": pts, "tips": tips})
            refs = []
            for n in lengths:
                for ref in _peer_refs(self.peers, {"kind": "prefill", "shape": shape, "dtype": dtype, "prompt_len": n},
                                      with_card=self.multi_card):
                    refs.append({"label": ref["label"], "x": n, "value": ref["value"]})
            if series:
                self.add("prefill", {"type": "xy", "title": f"Prefill {gbench.shape_label(shape, dtype)}: tokens/s vs prompt length",
                                     "xTitle": "prompt length (tokens, log scale)", "xLog": True, "xTicks": lengths,
                                     "yTitle": "tokens/s", "unit": "tok/s",
                                     "series": series, "pointRefs": refs, "refs": []})
        if not any(p["section"] == "prefill" for p in self.plots):
            what = ", ".join(f"Prefill{n}" for n in sorted(single)) or "no Prefill<N> benchmark"
            self.note("prefill", f"Only one prompt length recorded ({what}): the length curves appear once "
                                 f"Prefill<N> benchmarks of several N are in the runs. The Prefill512 history is "
                                 f"under 'Every benchmark over the runs'.")

    # memra over each peer run, on the benchmarks both ran (memra-dash versus)
    def versus(self):
        for p in self.peers:
            best = None  # the memra run of the peer's card with the most pairs, the latest among equals
            for r in self.runs:
                if r.card != p.card:
                    continue
                res = versus_mod.pair_runs(r, [p])
                if res["rows"] and (best is None or len(res["rows"]) >= len(best[1]["rows"])):
                    best = (r, res)
            if best is None:
                continue
            r, res = best
            rows = res["rows"]
            several = len({row["shape"] for row in rows}) > 1
            tips = [f"memra {_fmt(row['memra'], 'tok/s')} ({row['arm']}, {r.file})\n"
                    f"{p.label} {_fmt(row['peer_rate'], 'tok/s')} ({row['peer_key'].split('/')[-1]}, {p.file})"
                    for row in rows]
            title = f"{r.label} over {p.label}"
            if not several and rows[0]["shape"] not in p.label:  # one shape: the title names it
                title += f", {rows[0]['shape']}"
            self.add("versus", {"type": "bar", "title": title + self._card_suffix(p.card),
                                "labels": [(f"{row['shape']} " if several else "") + row["what"] for row in rows],
                                "yTitle": "memra tok/s ÷ peer tok/s", "unit": "×",
                                "series": [{"label": "memra / peer", "data": [row["ratio"] for row in rows],
                                            "tips": tips}],
                                "refs": [{"label": "1× (as fast as the peer)", "value": 1.0, "sameDtype": True}]})
        if self.peers and not any(p["section"] == "versus" for p in self.plots):
            self.note("versus", "No peer run pairs with a memra run of its card.")

    def build(self):
        self.history()
        self.arms()
        self.roofline()
        self.batch()
        self.prefill()
        self.versus()
        return self.plots


# -- the context table ------------------------------------------------------------------------------
_KNOWN_CTX = {"date", "host_name", "executable", "num_cpus", "mhz_per_cpu", "cpu_scaling_enabled", "caches",
              "load_avg", "library_build_type", "commit", "memra_commit", "memra_build_type", "driver", "gpu", "sm",
              "sm_count", "peer", "peer_label", "sm_clock_max", "memory_clock_max", "cuda_runtime"}


def _e(s) -> str:
    return html.escape("" if s is None else str(s))


def context_table(runs: list[gbench.Run]) -> str:
    any_arms = any(r.arms() for r in runs)
    head = ["run", "commit", "date", "GPU", "SMs", "driver", "build type", "benchmarks"]
    if any_arms:
        head.append("arms")
    head.append("more")
    rows = []
    for r in runs:
        c = r.context
        commit = _e(r.commit)
        if r.context_commit and r.context_commit != r.commit and not r.context_commit.startswith(r.commit):
            commit += f' <span class="warn" title="the file name is authoritative (bench/results/README.md)">(context: {_e(c.get("memra_commit") or c.get("commit"))})</span>'
        elif not r.context_commit and r.name_commit and (c.get("commit") or c.get("memra_commit")):
            commit += f' <span class="warn">(context: {_e(c.get("memra_commit") or c.get("commit"))})</span>'
        bt = r.build_type()
        build = _e(bt) if bt else "—"
        if c.get("library_build_type"):
            build += f' <span class="dim">(benchmark library: {_e(c["library_build_type"])})</span>'
        sms = f"sm_{c['sm']} × {c['sm_count']}" if c.get("sm") and c.get("sm_count") else _e(c.get("sm_count") or "")
        nrep = sum(1 for b in r.benches.values() if b.reps)
        benches = f"{len(r.benches)}" + (f" ({nrep} with repetitions)" if nrep else " (aggregates)")
        name = _e(r.label) + (f' <span class="peer">peer: {_e(r.peer)}</span>' if r.peer else "")
        gpu = _e(c.get("gpu", ""))
        clocks = [f"{what} {c[k]}" for what, k in (("SM", "sm_clock_max"), ("memory", "memory_clock_max")) if c.get(k)]
        if clocks:
            gpu += f'<br><span class="dim">max clocks: {_e(", ".join(clocks))}</span>'
        driver = _e(c.get("driver", ""))
        if c.get("cuda_runtime"):
            driver += f'<br><span class="dim">runtime {_e(c["cuda_runtime"])}</span>'
        cells = [f'{name}<br><span class="dim">{_e(r.file)}</span>', commit, _e(r.date_str()), gpu,
                 sms, driver, build, benches]
        if any_arms:
            arms = r.arms()
            cells.append("<br>".join(f"{_e(k)}={_e(v)}" for k, v in arms.items()) if arms else "—")
        more = {k: v for k, v in c.items() if k not in _KNOWN_CTX and not k.startswith(gbench.ARM_PREFIXES)}
        extra = [("host", c.get("host_name")), ("executable", c.get("executable"))]
        if r.errors:
            extra.append(("errors", "; ".join(r.errors)))
        items = "".join(f"<li><b>{_e(k)}</b>: {_e(v)}</li>" for k, v in extra if v)
        items += "".join(f"<li><b>{_e(k)}</b>: {_e(json.dumps(v) if not isinstance(v, str) else v)}</li>"
                         for k, v in sorted(more.items()))
        cells.append(f"<details><summary>{len(more) + sum(1 for _, v in extra if v)} keys</summary><ul>{items}</ul></details>")
        rows.append("<tr>" + "".join(f"<td>{x}</td>" for x in cells) + "</tr>")
    return ('<table class="ctx"><thead><tr>' + "".join(f"<th>{h}</th>" for h in head) + "</tr></thead><tbody>"
            + "".join(rows) + "</tbody></table>")


# -- the page ---------------------------------------------------------------------------------------
SECTIONS = [
    ("history", "Every benchmark over the runs",
     "Median of each run (line) and the spread of its repetitions (band: min–max where the JSON has the "
     "repetitions, median ± stddev where it has only aggregates), runs in date order. Rates: tokens/s, GB/s for "
     "StreamRead. Dashed lines: peer runs (llama.cpp) of the same shape; a dtype in parentheses means the peer "
     "ran another weight type."),
    ("arms", "Arms side by side", "Each arm of one shape at the latest run that measured it (the bar's label "
     "names the run)."),
    ("roofline", "Fraction of the read roofline",
     "hbm_fraction as the program reported it, else bytes_per_token × tokens/s ÷ the highest StreamRead "
     "repetition of the same run (docs/PERF.md, Method)."),
    ("batch", "Batch scaling", "DecodeBatch: tokens/s over all sequences against B, one line per run; dashed: "
     "peer runs' llama-batched-bench of the same shape (a dtype in parentheses: the peer's)."),
    ("prefill", "Prefill length", "tokens/s against the prompt length (Prefill<N>), latest run of each point."),
    ("versus", "Against the peers", "memra's median tokens/s over a peer run's (llama.cpp) on each benchmark both "
     "ran: Decode graph_stream against tg, Prefill gemm against pp, DecodeBatch eager against "
     "llama-batched-bench (tools/memra-dash versus prints the same pairs). The memra run is the one of the peer's "
     "card with the most pairs, the latest among equals; above the dashed line at 1× memra is faster."),
]


def _finite(x):
    """The plot data with NaN / infinity as null (JSON has neither)."""
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    if isinstance(x, dict):
        return {k: _finite(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_finite(v) for v in x]
    return x


def page(runs: list[gbench.Run], plots: list[dict], notes: dict, chart_js: str, title: str) -> str:
    with open(chart_js, encoding="utf-8") as f:
        lib = f.read()
    lib = "\n".join(l for l in lib.splitlines() if not l.startswith("//# sourceMappingURL="))
    with open(os.path.join(HERE, "dashboard.js"), encoding="utf-8") as f:
        app = f.read()
    with open(os.path.join(HERE, "dashboard.css"), encoding="utf-8") as f:
        css = f.read()
    lib_version = ""
    for line in lib.splitlines()[:5]:
        if "Chart.js v" in line:
            lib_version = line.strip(" */!")
    data = {"plots": _finite(plots)}

    def script(s):
        return s.replace("</script", "<\\/script").replace("</SCRIPT", "<\\/SCRIPT")

    memra = [r for r in runs if not r.peer]
    peers = [r for r in runs if r.peer]
    body = []
    nav = " · ".join(f'<a href="#sec-{sid}">{_e(t)}</a>' for sid, t, _ in SECTIONS) + ' · <a href="#sec-context">Runs</a>'
    span = ""
    if memra:
        ds = [r.date for r in memra if r.date]
        if ds:
            span = f", {min(ds):%Y-%m-%d} to {max(ds):%Y-%m-%d}"
    body.append(f"<header><h1>{_e(title)}</h1><p>{len(memra)} runs{span}; {len(peers)} peer run(s); "
                f"{len(plots)} plots. Generated {_dt.datetime.now(_dt.timezone.utc):%Y-%m-%d %H:%M} UTC by "
                f"tools/memra-dash with {_e(lib_version or 'Chart.js')}.</p>"
                f'<nav>{nav}</nav><p><label>filter plots: <input id="filter" type="search" '
                f'placeholder="regex, e.g. 9b.*graph_stream"></label></p></header>')
    for sid, t, desc in SECTIONS:
        body.append(f'<section id="sec-{sid}"><h2>{_e(t)}</h2><p class="desc">{_e(desc)}</p>')
        for n in notes.get(sid, []):
            body.append(f'<p class="note">{_e(n)}</p>')
        body.append(f'<div class="grid" id="grid-{sid}"></div></section>')
    body.append(f'<section id="sec-context"><h2>Runs</h2><p class="desc">The context block of each JSON file '
                f'(keys a run lacks show as —; arm.* / memra_arm_* keys as the arms column, model_* and other keys '
                f'under "more"). The commit is the one in the file name where it has one '
                f'(bench/results/README.md).</p>{context_table(runs)}</section>')
    body.append('<footer><pre id="memra-dash-status" data-state="pending">rendering…</pre></footer>')
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{_e(title)}</title><style>{css}</style>"
            # first: collect every script error, including the library's
            "<script>window.__memraErrors=[];window.addEventListener('error',function(e){"
            "window.__memraErrors.push(String(e.message||e.type)+(e.filename?' @'+e.filename+':'+e.lineno:''));});"
            "window.addEventListener('unhandledrejection',function(e){window.__memraErrors.push('unhandled rejection: '+String(e.reason));});"
            "</script>"
            f"<script>{script(lib)}</script>"
            "</head><body>" + "\n".join(body)
            + f'<script id="memra-data" type="application/json">{script(json.dumps(data, allow_nan=False))}</script>'
            + f"<script>{script(app)}</script></body></html>\n")


def main(args) -> int:
    try:
        chart_js = find_chart_js(args.chart_js)
        runs = gbench.load_runs(args.inputs)
    except (MissingLibrary, gbench.ParseError) as ex:
        print(f"memra-dash render: {ex}", file=sys.stderr)
        return 2
    if not [r for r in runs if not r.peer]:
        print("memra-dash render: no benchmark runs in " + " ".join(args.inputs), file=sys.stderr)
        return 2
    b = Builder(runs)
    plots = b.build()
    doc = page(runs, plots, b.notes, chart_js, args.title)
    out_dir = os.path.dirname(os.path.abspath(args.out))
    os.makedirs(out_dir, exist_ok=True)
    with open(args.out, "w", encoding="utf-8") as f:
        f.write(doc)
    print(f"memra-dash: wrote {args.out} ({len([r for r in runs if not r.peer])} runs, "
          f"{len([r for r in runs if r.peer])} peer runs, {len(plots)} plots)", file=sys.stderr)
    return 0
