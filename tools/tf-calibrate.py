#!/usr/bin/env python3
"""Write the TeacherForced gate's C_gpu calibration (test/exactness/tf_calibration.json) from a run
of the TfCalibration cases.

    ctest --test-dir build -R TfCalibration --output-on-failure -V > calib.log
    tools/tf-calibrate.py calib.log --arch h100 --measured "H200 sm_90, commit abc1234, 2026-12-02"

Each case prints "[tf-calibration] <fixture>/<arm class>: C_gpu measured <v>, committed ...". The
committed value is the measured one rounded UP to two significant digits (the gate's 3*sqrt(2)
factor is the headroom; TfCalibration fails when a later build measures more). Other arches'
entries, and this arch's keys the log does not measure (e.g. a run of only the realistic
fixtures' cases), are kept; "measured" then lists both runs. Review the diff before committing: a calibration that grew is a
GPU that got noisier, and the reason belongs in the commit message.
"""
import argparse
import json
import math
import re
import sys

LINE = re.compile(r"\[tf-calibration\] (\S+): C_gpu measured ([0-9.eE+-]+)")


def round_up_2sig(v: float) -> float:
    if v <= 0:
        return 0.0
    e = math.floor(math.log10(v)) - 1
    return float(f"{math.ceil(v / 10**e - 1e-9) * 10**e:.2g}")  # 1e-9: 3.0e-3 stays 3.0e-3


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("log")
    ap.add_argument("--arch", required=True)
    ap.add_argument("--measured", required=True, help="GPU, commit and date of the run")
    ap.add_argument("--out", default="test/exactness/tf_calibration.json")
    a = ap.parse_args()
    found = {}
    with open(a.log, encoding="utf-8", errors="replace") as f:
        for line in f:
            m = LINE.search(line)
            if m:
                found[m.group(1)] = max(found.get(m.group(1), 0.0), float(m.group(2)))
    if not found:
        print(f"tf-calibrate: no '[tf-calibration]' lines in {a.log}", file=sys.stderr)
        return 1
    with open(a.out, encoding="utf-8") as f:
        cal = json.load(f)
    old = cal.get(a.arch, {})
    table = dict(old.get("c_gpu", {}))
    kept = [k for k in table if k not in found]
    table.update({k: round_up_2sig(v) for k, v in found.items()})
    measured = a.measured
    if kept:  # the earlier runs' provenance, then this run's (each already names what it measured)
        measured = f"{old.get('measured', '?')}; {a.measured}"
    cal[a.arch] = {"measured": measured, "c_gpu": dict(sorted(table.items()))}
    with open(a.out, "w", encoding="utf-8") as f:
        json.dump(cal, f, indent=2)
        f.write("\n")
    print(f"tf-calibrate: {len(found)} calibrations for {a.arch} -> {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
