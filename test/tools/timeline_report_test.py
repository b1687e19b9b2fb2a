#!/usr/bin/env python3
"""Host test of bench/timeline_report.py on timelines written here with known answers.

Two replays of four launches (a norm, a mat-vec, a norm, a mat-vec): shares are the next go minus
this go, medians over the replays; kernel totals group by name and block count; an A/B with
the same sequence names the launch that moved; malformed files exit 2 with the reason; a file
with placement columns (the prefill mode's layout) counts the grids packed onto few SMs.
"""
import json
import os
import subprocess
import sys
import tempfile

SCRIPT = sys.argv[1]
HEADER = "replay,launch,name,blocks,ready_ns,go_ns,last_go_ns\n"
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print(f"FAIL: {what}")


def write(d, name, rows):
    p = os.path.join(d, name)
    with open(p, "w") as f:
        f.write(HEADER + "".join(",".join(str(x) for x in r) + "\n" for r in rows))
    return p


def run(*args):
    r = subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True)
    return r.returncode, r.stdout, r.stderr


def timeline(gos):
    """rows for replays of launches named norm/mv alternately, go times given per replay."""
    rows = []
    for rep, g in enumerate(gos):
        for k, t in enumerate(g):
            name, blocks = ("rowop", 16) if k % 2 == 0 else ("matvec", 660)
            rows.append((rep, k, name, blocks, t - 500, t, t + 100))
    return rows


with tempfile.TemporaryDirectory() as d:
    # replay 0: shares 3000, 10000, 3000; replay 1: 3200, 10400, 2800 -> medians 3100, 10200, 2900
    a = write(d, "a.csv", timeline([[0, 3000, 13000, 16000], [0, 3200, 13600, 16400]]))
    rc, out, err = run(a, "--json", "--launches", "0:4")
    check(rc == 0, f"one file: exit 0 (got {rc}, {err.strip()})")
    doc = json.loads(out) if rc == 0 else {}
    k = doc.get("kernels", {})
    check(k.get("rowop[16]", {}).get("launches") == 2, "two norm launches")
    check(abs(k.get("rowop[16]", {}).get("total_us", 0) - 6.0) < 1e-9, "norm total: 3.1 + 2.9 us")
    check(abs(k.get("matvec[660]", {}).get("total_us", 0) - 10.2) < 1e-9, "mat-vec total: 10.2 us + the last launch's 0")
    check(abs(doc.get("step_us", 0) - 16.2) < 1e-9, "step: median of 16.0 and 16.4 us")
    per = doc.get("per_launch", [])
    check(len(per) == 4 and abs(per[1]["share_us"] - 10.2) < 1e-9 and abs(per[1]["lead_us"] - 0.5) < 1e-9,
          "launch 1: share 10.2 us, lead 0.5 us")

    # B: launch 1 (the first mat-vec) 2 us faster in both replays
    b = write(d, "b.csv", timeline([[0, 3000, 11000, 14000], [0, 3200, 11600, 14400]]))
    rc, out, err = run(a, b, "--json", "--top", "1")
    check(rc == 0, f"A/B: exit 0 (got {rc}, {err.strip()})")
    doc = json.loads(out) if rc == 0 else {}
    check(doc.get("same_sequence") is True, "A/B: same launch sequence")
    moved = doc.get("moved", [])
    check(len(moved) == 1 and moved[0]["launch"] == 1 and abs(moved[0]["share_us"][1] - 8.2) < 1e-9,
          "A/B: the launch that moved is 1, now 8.2 us")
    rc, out, _ = run(a, b)
    check(rc == 0 and "B - A -2.0 us" in out, "A/B text: the step difference")

    # malformed: a missing column, a replay short of a launch, not a CSV of numbers
    bad1 = os.path.join(d, "bad1.csv")
    with open(bad1, "w") as f:
        f.write("replay,launch,name\n0,0,x\n")
    rc, _, err = run(bad1)
    check(rc == 2 and "missing column" in err and "go_ns" in err, f"missing column named (got {rc}: {err.strip()})")
    rows = timeline([[0, 3000, 13000, 16000], [0, 3200, 13600, 16400]])[:-1]
    bad2 = write(d, "bad2.csv", rows)
    rc, _, err = run(bad2)
    check(rc == 2 and "replay 1 has no launch 3" in err, f"short replay named (got {rc}: {err.strip()})")
    bad3 = write(d, "bad3.csv", [(0, 0, "x", 1, "soon", 0, 0)])
    rc, _, err = run(bad3)
    check(rc == 2 and "bad3.csv:2" in err, f"the bad line named (got {rc}: {err.strip()})")
    rc, _, err = run(os.path.join(d, "absent.csv"))
    check(rc == 2 and "absent.csv" in err, "a missing file named")

    # placement columns, the prefill mode's layout (runs, host_ns): the widest launch covers 132
    # SMs; a 16-block launch with 3 blocks on one SM in one run is packed, a 660-block one with 5
    # per SM is not (more blocks than SMs), nor is a 16-block one spread over 16
    placed = os.path.join(d, "placed.csv")
    with open(placed, "w") as f:
        f.write("run,launch,name,blocks,sms,max_per_sm,host_ns,ready_ns,go_ns,last_go_ns\n")
        for rep, most in ((0, 3), (1, 1)):
            f.write(f"{rep},0,attn,16,6,{most},0,-100,0,10\n")
            f.write(f"{rep},1,matvec,660,132,5,10,2000,3000,3100\n")
            f.write(f"{rep},2,attn,16,16,1,20,9000,9500,9600\n")
            f.write(f"{rep},3,matvec,660,132,5,30,10000,11000,11100\n")
    rc, out, err = run(placed, "--json", "--launches", "0:4")
    check(rc == 0, f"placement: exit 0 (got {rc}, {err.strip()})")
    doc = json.loads(out) if rc == 0 else {}
    check(doc.get("packed", {}).get("launches") == 1, "placement: one packed launch")
    check(abs(doc.get("packed", {}).get("share_us", 0) - 3.0) < 1e-9, "placement: its share, 3 us")
    check(doc.get("kernels", {}).get("attn[16]", {}).get("packed") == 1, "placement: counted under attn[16]")
    check([p.get("packed") for p in doc.get("per_launch", [])] == [True, False, False, False],
          "placement: launch 0 only")
    rc, out, _ = run(placed)
    check(rc == 0 and "packed grids: 1 launches, 3.0 us" in out, "placement text: the packed line")
    rc, out, _ = run(a, "--json")
    check(rc == 0 and "packed" not in json.loads(out), "no placement columns: no packed figures")

print("timeline_report: %d failure(s)" % len(failures))
sys.exit(1 if failures else 0)
