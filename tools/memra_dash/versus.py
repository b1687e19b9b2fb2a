"""memra-dash versus MEMRA.json PEER.json...: memra's rate over a peer's (llama.cpp's) on every
benchmark both ran, the table docs/PERF.md quotes ("Against llama.cpp on the same H200").

A peer run (import-llama-bench) names its benchmarks as memra's, with its own arm:

    Decode/<shape>/<dtype>/llamacpp_tg<N>      -> Decode/<shape>/<dtype>/<decode arm>   (graph_stream)
    Prefill<N>/<shape>/<dtype>/llamacpp_pp<N>  -> Prefill<N>/<shape>/<dtype>/<prefill arm>  (gemm)
    DecodeBatch/<shape>/<dtype>/llamacpp/B<n>  -> DecodeBatch/<shape>/<dtype>/B<n>      (eager; or
                                                  DecodeBatch/.../<batch arm>/B<n>)

Each row is memra's median tokens/s, the peer's, and their ratio (> 1: memra is faster). A peer
benchmark without a memra counterpart (another arm, a depth run `_d<depth>`, a shape memra did
not run) is listed, not paired. Runs of different cards are refused (exit 2) unless --cross-card:
a ratio across machines measures the machines. Exit 0 with a table, 2 on bad input or when no
benchmark pairs up (a mistaken file is likelier than an empty comparison).
"""
from __future__ import annotations

import json
import re
import sys

from . import gbench, table

_PEER_DECODE = re.compile(r"^llamacpp_tg\d+$")
_PEER_PREFILL = re.compile(r"^llamacpp_pp\d+$")


def counterpart(info: dict, decode_arm: str, prefill_arm: str, batch_arm: str) -> str | None:
    """memra's key for a peer benchmark (gbench.parse_key's info), or None where it has none."""
    shape, dtype, arm = info["shape"], info["dtype"], info["arm"] or ""
    if info["kind"] == "decode" and _PEER_DECODE.match(arm):
        return f"Decode/{shape}/{dtype}/{decode_arm}"
    if info["kind"] == "prefill" and _PEER_PREFILL.match(arm):
        return f"Prefill{info['prompt_len']}/{shape}/{dtype}/{prefill_arm}"
    if info["kind"] == "batch" and arm == "llamacpp" and info["batch"] is not None:
        mid = "" if batch_arm == "eager" else f"{batch_arm}/"
        return f"DecodeBatch/{shape}/{dtype}/{mid}B{info['batch']}"
    return None


def pair_runs(memra: gbench.Run, peers: list[gbench.Run], decode_arm: str = "graph_stream",
              prefill_arm: str = "gemm", batch_arm: str = "eager") -> dict:
    rows, unpaired = [], []
    for p in peers:
        for b in p.benches.values():
            info = b.info
            mk = counterpart(info, decode_arm, prefill_arm, batch_arm)
            mb = memra.benches.get(mk) if mk else None
            mine, theirs = (mb.median("throughput") if mb else None), b.median("throughput")
            if mb is None or mine is None or not theirs:
                why = ("no memra arm pairs with it" if mk is None else f"{mk} not in {memra.file}" if mb is None
                       else f"{mk} has no tokens/s" if mine is None else "the peer's benchmark has no tokens/s")
                unpaired.append({"peer": p.file, "key": b.key, "why": why})
                continue
            what = {"decode": "decode", "prefill": f"prefill{info['prompt_len']}",
                    "batch": f"B={info['batch']}"}[info["kind"]]
            arm = {"decode": decode_arm, "prefill": prefill_arm, "batch": batch_arm}[info["kind"]]
            rows.append({"shape": gbench.shape_label(info["shape"], info["dtype"]), "kind": info["kind"],
                         "what": what, "arm": arm, "batch": info["batch"], "memra_key": mk, "peer_key": b.key,
                         "peer": p.label, "memra": mine, "peer_rate": theirs, "ratio": mine / theirs})
    order = {"decode": 0, "prefill": 1, "batch": 2}
    rows.sort(key=lambda r: (r["shape"], order[r["kind"]], r["batch"] or 0, r["what"]))
    return {"rows": rows, "unpaired": unpaired}


def _rate(v: float) -> str:
    return f"{v:,.1f}" if v < 1000 else f"{v:,.0f}"


def print_report(res: dict, memra: gbench.Run, peers: list[gbench.Run], markdown: bool, out=sys.stdout):
    print(f"memra: {memra.file} (commit {memra.commit}, {memra.date_str() or 'no date'}, {memra.card})", file=out)
    for p in peers:
        print(f"peer:  {p.file} ({p.label}, {p.date_str() or 'no date'}, {p.card})", file=out)
    if any(p.card != memra.card for p in peers):
        print("CARDS DIFFER: the ratios below are the machines' as much as the engines'", file=out)
    print("tokens/s, medians over each run's repetitions; ratio = memra / peer (> 1: memra faster)", file=out)
    rows = res["rows"]
    cols = ["shape", "benchmark", "memra arm", "memra tok/s", "peer tok/s", "ratio"]
    cells = [[r["shape"], r["what"], r["arm"], _rate(r["memra"]), _rate(r["peer_rate"]), f"{r['ratio']:.2f}x"]
             for r in rows]
    table.print_table(cols, cells, markdown, out, left=3)
    for u in res["unpaired"]:
        print(f"{u['peer']}: {u['key']}: not paired ({u['why']})", file=out)


def cross_card(memra: gbench.Run, peers: list[gbench.Run]) -> str | None:
    """Why a ratio of memra over these peers would measure the machines (peers of another card), or None."""
    other = [p for p in peers if p.card != memra.card]
    if not other:
        return None
    return (f"{memra.file} ran on {memra.card}, " + ", ".join(f"{p.file} on {p.card}" for p in other)
            + ": a ratio across cards measures the machines")


def main(args) -> int:
    try:
        runs = gbench.load_runs([args.memra] + args.peers)
    except gbench.ParseError as ex:
        print(f"memra-dash versus: {ex}", file=sys.stderr)
        return 2
    memra = [r for r in runs if not r.peer]
    peers = [r for r in runs if r.peer]
    if len(memra) != 1 or not peers:
        print(f"memra-dash versus: wants one memra run and one or more peer runs (context \"peer\"); got "
              f"{len(memra)} memra run(s) ({', '.join(r.file for r in memra) or 'none'}) and {len(peers)} peer run(s)",
              file=sys.stderr)
        return 2
    memra = memra[0]
    why = cross_card(memra, peers)
    if why and not args.cross_card:
        print(f"memra-dash versus: {why} (--cross-card shows the table anyway)", file=sys.stderr)
        return 2
    res = pair_runs(memra, peers, args.decode_arm, args.prefill_arm, args.batch_arm)
    if not res["rows"]:
        print(f"memra-dash versus: no benchmark of {', '.join(p.file for p in peers)} pairs with one of "
              f"{memra.file} (decode arm {args.decode_arm}, prefill arm {args.prefill_arm}, batch arm "
              f"{args.batch_arm})", file=sys.stderr)
        return 2
    print_report(res, memra, peers, args.markdown)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"memra": memra.file, "peers": [p.file for p in peers], **res}, f, indent=1)
            f.write("\n")
    return 0
