"""Reading Google Benchmark JSON runs (--benchmark_out_format=json) as memra writes them.

A run is one file: its `context` (machine, date, and what memra adds: the commit, the build type,
the arms, the model shapes — every key optional, older runs have fewer) and its `benchmarks`.
Each benchmark instance appears as per-repetition entries (run_type "iteration") and/or as
aggregates (run_type "aggregate": _mean, _median, _stddev, _cv, ...), depending on how the
program was told to report (ReportAggregatesOnly drops the repetitions from the file,
DisplayAggregatesOnly keeps them). This module groups both under one key per benchmark and
answers median / min / max / repetition values for a metric, whichever form is present.

Benchmark names: "<Family>/<part>/.../<arg>:<value>/.../manual_time". The key drops the
Google Benchmark suffixes (iterations:N, repeats:N, threads:N, min_time:..., manual_time,
real_time, process_time) so the same benchmark run with another repetition count stays the same
series. memra's families:

    Decode/<shape>/<dtype>/<arm>          batch-1 decode
    DecodeBatch/<shape>/<dtype>/B<n>      n sequences per step (an arm part may precede B<n>)
    Prefill<N>/<shape>/<dtype>/<arm>      one prefill of N tokens
    StreamRead/<size>                     the read-bandwidth probe

Anything else is kept as a generic benchmark (family = first part).
"""
from __future__ import annotations

import datetime as _dt
import json
import math
import os
import re
import statistics

TIME_UNIT_NS = {"ns": 1.0, "us": 1e3, "ms": 1e6, "s": 1e9}
_GB_ARG = re.compile(r"^(iterations|repeats|threads|min_time|min_warmup_time|real_time|process_time)(:.*)?$")
_GB_FLAG = {"manual_time", "real_time", "process_time", "use_real_time", "use_manual_time"}
_AGG_SUFFIX = re.compile(r"_(mean|median|stddev|cv|min|max|BigO|RMS)$")
_FILE_NAME = re.compile(r"^(?P<gpu>[A-Za-z0-9]+)-(?P<commit>[0-9a-f]{7,40})-(?P<what>.+)\.json$")
_PREFILL = re.compile(r"^Prefill(\d+)$")
_BATCH = re.compile(r"^B(\d+)$")

# metric names: "time" (real_time per iteration, in ns), "throughput" (the family's rate, higher
# is better), "fraction" (of the run's measured read roofline), or any counter's name
THROUGHPUT_COUNTERS = ("items_per_second", "tok_per_s")
ARM_PREFIXES = ("arm.", "memra_arm_")  # context keys naming one arm each


class ParseError(Exception):
    pass


def normalize_name(run_name: str) -> str:
    """The benchmark's key: its name without Google Benchmark's argument and timing parts."""
    parts = [p for p in run_name.split("/") if p and not _GB_ARG.match(p) and p not in _GB_FLAG]
    return "/".join(parts)


def parse_key(key: str) -> dict:
    """family, kind (decode|batch|prefill|stream|other), shape, dtype, arm, batch, prompt_len."""
    parts = key.split("/")
    fam = parts[0]
    info = {"key": key, "family": fam, "kind": "other", "shape": None, "dtype": None, "arm": None,
            "batch": None, "prompt_len": None, "rest": "/".join(parts[1:])}
    m = _PREFILL.match(fam)
    if fam in ("Decode", "DecodeBatch") or m:
        info["kind"] = {"Decode": "decode", "DecodeBatch": "batch"}.get(fam, "prefill")
        if m:
            info["prompt_len"] = int(m.group(1))
        if len(parts) >= 3:
            info["shape"], info["dtype"] = parts[1], parts[2]
        rest = parts[3:]
        if info["kind"] == "batch":
            bs = [p for p in rest if _BATCH.match(p)]
            if bs:
                info["batch"] = int(_BATCH.match(bs[-1]).group(1))
            rest = [p for p in rest if not _BATCH.match(p)]
        info["arm"] = "/".join(rest) if rest else ("eager" if info["kind"] == "batch" else "")
    elif fam == "StreamRead":
        info["kind"] = "stream"
        info["arm"] = "/".join(parts[1:])
    return info


def shape_label(shape: str | None, dtype: str | None) -> str:
    if not shape:
        return ""
    return f"{shape} {dtype}" if dtype else shape


def card_label(card: str) -> str:
    """A card's short name in plot labels ("NVIDIA H100 80GB HBM3" -> "H100 80GB HBM3")."""
    return card[len("NVIDIA "):] if card.startswith("NVIDIA ") else card


class Bench:
    """One benchmark of one run: its repetitions and its aggregates."""

    def __init__(self, key: str, run_name: str):
        self.key = key
        self.run_name = run_name
        self.info = parse_key(key)
        self.reps: list[dict] = []        # run_type "iteration", in repetition order
        self.aggs: dict[str, dict] = {}   # aggregate_name -> entry
        self.run = None                   # the Run it belongs to

    # -- values ------------------------------------------------------------------------------
    def _value(self, e: dict, metric: str) -> float | None:
        if metric == "time":
            t = e.get("real_time")
            if t is None:
                return None
            return float(t) * TIME_UNIT_NS.get(e.get("time_unit", "ns"), 1.0)
        if metric == "throughput":
            for c in self.throughput_counters():
                if e.get(c) is not None:
                    return float(e[c])
            return None
        if metric == "fraction":
            return self.run.fraction_of(self, e) if self.run is not None else None
        v = e.get(metric)
        return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None

    def throughput_counters(self) -> tuple:
        if self.info["kind"] == "stream":
            return ("read_bw_GBps", "bytes_per_second")
        return THROUGHPUT_COUNTERS + ("bytes_per_second",)

    def throughput_unit(self) -> str:
        if self.info["kind"] == "stream":
            for c in ("read_bw_GBps", "bytes_per_second"):
                if any(c in e for e in self.entries()):
                    return "GB/s" if c == "read_bw_GBps" else "B/s"
            return ""
        for c in self.throughput_counters():
            if any(c in e for e in self.entries()):
                return "B/s" if c == "bytes_per_second" else "tok/s"
        return ""

    def entries(self):
        yield from self.reps
        yield from self.aggs.values()

    def rep_values(self, metric: str) -> list[float]:
        vals = [self._value(e, metric) for e in self.reps]
        return [v for v in vals if v is not None and math.isfinite(v)]

    def has_reps(self) -> bool:
        return len(self.reps) >= 1

    def median(self, metric: str) -> float | None:
        vals = self.rep_values(metric)
        if vals:
            return statistics.median(vals)
        for a in ("median", "mean"):
            if a in self.aggs:
                v = self._value(self.aggs[a], metric)
                if v is not None and math.isfinite(v):
                    return v
        return None

    def spread(self, metric: str):
        """(low, high, how): min/max over the repetitions, else median -/+ the stddev aggregate
        (how = "range" or "stddev"), else (None, None, None)."""
        vals = self.rep_values(metric)
        if len(vals) >= 2:
            return min(vals), max(vals), "range"
        med = self.median(metric)
        sd = self.aggs.get("stddev")
        if med is not None and sd is not None:
            if metric == "fraction":
                # the counter's stddev scales with the throughput's: use its relative spread
                tp = self.median("throughput")
                sdt = self._value(sd, "throughput")
                if tp and sdt is not None:
                    return med * (1 - sdt / tp), med * (1 + sdt / tp), "stddev"
                return None, None, None
            s = self._value(sd, metric)
            if s is not None and math.isfinite(s):
                return med - s, med + s, "stddev"
        return None, None, None

    def repetitions(self) -> int:
        if self.reps:
            return len(self.reps)
        for e in self.aggs.values():
            if e.get("repetitions"):
                return int(e["repetitions"])
        return 0

    def summary(self, metric: str) -> dict:
        lo, hi, how = self.spread(metric)
        return {"median": self.median(metric), "min": lo, "max": hi, "band": how,
                "n": len(self.rep_values(metric)), "repetitions": self.repetitions()}


class Run:
    """One JSON file."""

    def __init__(self, path: str, doc: dict):
        self.path = path
        self.file = os.path.basename(path)
        self.context = doc.get("context") or {}
        if not isinstance(self.context, dict):
            raise ParseError(f"{path}: 'context' is not an object")
        self.benches: dict[str, Bench] = {}
        self.errors: list[str] = []    # benchmarks that reported an error
        raw = doc.get("benchmarks")
        if not isinstance(raw, list):
            raise ParseError(f"{path}: no 'benchmarks' array (not a Google Benchmark JSON file)")
        for e in raw:
            self._add(e)
        m = _FILE_NAME.match(self.file)
        self.name_commit = m.group("commit") if m else None
        self.what = m.group("what") if m else None
        ctx_commit = self.context.get("memra_commit") or self.context.get("commit")
        if ctx_commit in ("", "unknown"):
            ctx_commit = None
        self.context_commit = ctx_commit
        # bench/results/README.md: the file name is authoritative for the commit
        self.date = _parse_date(self.context.get("date"))
        peer = self.context.get("peer")
        if not peer and self.file.startswith("llamacpp"):
            peer = "llama.cpp"
        self.peer = peer
        if peer:  # a peer's commit is its own build's, when it says
            self.commit = self.context.get("peer_build_commit") or "—"
            self.context_commit = None
        else:
            self.commit = self.name_commit or ctx_commit or "unknown"
        self.label = self.commit  # made unique by load_runs
        # the card that ran it (context "gpu", else the file name's <gpu>): runs on different cards
        # are different machines, never points of one history
        gpu = self.context.get("gpu")
        if isinstance(gpu, str) and gpu.strip():
            self.card = gpu.strip()
        else:
            self.card = m.group("gpu").upper() if m else "unknown card"
        self._stream_bw = None

    def _add(self, e: dict):
        if not isinstance(e, dict) or "name" not in e:
            return
        if e.get("error_occurred"):
            self.errors.append(f"{e['name']}: {e.get('error_message', 'error')}")
            return
        run_type = e.get("run_type")
        agg = e.get("aggregate_name")
        name = e["name"]
        if run_type is None:  # very old Google Benchmark: no run_type; aggregates by suffix
            m = _AGG_SUFFIX.search(name)
            run_type = "aggregate" if m else "iteration"
            agg = agg or (m.group(1) if m else None)
        run_name = e.get("run_name")
        if not run_name:
            run_name = _AGG_SUFFIX.sub("", name) if run_type == "aggregate" else name
        key = normalize_name(run_name)
        b = self.benches.get(key)
        if b is None:
            b = self.benches[key] = Bench(key, run_name)
            b.run = self
        if run_type == "aggregate":
            if agg:
                b.aggs[agg] = e
        else:
            b.reps.append(e)

    # -- the read roofline ----------------------------------------------------------------------
    def stream_bandwidth(self) -> float | None:
        """Bytes/s: the highest StreamRead repetition of this run (what bench_decode divides by)."""
        if self._stream_bw is None:
            best = 0.0
            for b in self.benches.values():
                if b.info["kind"] != "stream":
                    continue
                for e in b.entries():
                    if e.get("aggregate_name") in ("stddev", "cv"):
                        continue
                    if e.get("read_bw_GBps"):
                        best = max(best, float(e["read_bw_GBps"]) * 1e9)
            self._stream_bw = best
        return self._stream_bw or None

    def fraction_of(self, b: Bench, e: dict) -> float | None:
        """hbm_fraction when the program measured it (nonzero), else bytes_per_token × tok/s over
        the run's StreamRead bandwidth when both are present."""
        f = e.get("hbm_fraction")
        if isinstance(f, (int, float)) and f > 0:
            return float(f)
        bpt = e.get("bytes_per_token")
        tps = e.get("tok_per_s", e.get("items_per_second"))
        bw = self.stream_bandwidth()
        if bpt and tps and bw:
            return float(bpt) * float(tps) / bw
        return None

    # -- context -----------------------------------------------------------------------------
    def arms(self) -> dict:
        """The run's arms: context keys arm.<field> (bench_decode's) or memra_arm_<field>."""
        out = {}
        for k, v in sorted(self.context.items()):
            for prefix in ARM_PREFIXES:
                if k.startswith(prefix):
                    out[k[len(prefix):]] = v
        return out

    def models(self) -> dict:
        return {k[len("model_"):]: v for k, v in sorted(self.context.items()) if k.startswith("model_")}

    def build_type(self) -> str | None:
        return self.context.get("memra_build_type")

    def date_str(self) -> str:
        return self.date.strftime("%Y-%m-%d %H:%M") if self.date else (self.context.get("date") or "")


def _parse_date(s):
    if not isinstance(s, str) or not s:
        return None
    try:
        d = _dt.datetime.fromisoformat(s.replace("Z", "+00:00"))
    except ValueError:
        return None
    if d.tzinfo is None:
        d = d.replace(tzinfo=_dt.timezone.utc)
    return d


def read_json(path: str, error: type[Exception] = ParseError):
    """The JSON document at path; `error` naming the path when it cannot be read or parsed."""
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except json.JSONDecodeError as ex:
        raise error(f"{path}: not JSON: {ex}") from None
    except OSError as ex:
        raise error(f"{path}: {ex.strerror}") from None


def load_run(path: str) -> Run:
    doc = read_json(path)
    if not isinstance(doc, dict):
        raise ParseError(f"{path}: not a Google Benchmark JSON object")
    return Run(path, doc)


def expand_inputs(inputs: list[str]) -> list[str]:
    """Files as given; folders: their *.json files (not recursive), sorted."""
    out = []
    for p in inputs:
        if os.path.isdir(p):
            out += sorted(os.path.join(p, f) for f in os.listdir(p) if f.endswith(".json"))
        elif os.path.exists(p):
            out.append(p)
        else:
            raise ParseError(f"{p}: no such file or folder")
    return out


def load_runs(inputs: list[str]) -> list[Run]:
    """Runs ordered by their context date (then file name); labels unique (commit, then
    commit·what or #n where one commit has several runs; a peer's label, then label·its shapes
    or #n where one label names several peer runs, as one llama.cpp build run on each shape)."""
    runs = [load_run(p) for p in expand_inputs(inputs)]
    far = _dt.datetime.max.replace(tzinfo=_dt.timezone.utc)
    runs.sort(key=lambda r: (r.peer is not None, r.date or far, r.file))
    seen: dict[str, list[Run]] = {}
    peers: dict[str, list[Run]] = {}
    for r in runs:
        if r.peer:
            r.label = r.context.get("peer_label") or os.path.splitext(r.file)[0]
            peers.setdefault(r.label, []).append(r)
        else:
            seen.setdefault(r.commit, []).append(r)
    for commit, rs in seen.items():
        if len(rs) > 1:
            for i, r in enumerate(rs):
                r.label = f"{commit}·{r.what}" if r.what and len({x.what for x in rs}) == len(rs) else f"{commit}#{i + 1}"
    for label, rs in peers.items():
        if len(rs) > 1:
            shapes = [", ".join(sorted({shape_label(b.info["shape"], b.info["dtype"])
                                        for b in r.benches.values() if b.info["shape"]})) for r in rs]
            unique = all(shapes) and len(set(shapes)) == len(rs)
            for i, r in enumerate(rs):
                r.label = f"{label}·{shapes[i]}" if unique else f"{label}#{i + 1}"
    return runs
