#!/usr/bin/env python3
"""ctest/summary.py RESULTS_DIR — one line per gate/op case: verdict and key figure.

Reads the CTest JUnit file (RESULTS_DIR/junit.xml, every case's status and time), the GTest
XML files (RESULTS_DIR/gtest/*.xml: RecordProperty figures) and the gate JSON reports
(RESULTS_DIR/reports/*.json: verdict and figures). Prints a fixed-width table and the totals;
exits 0 (the verdict is ctest's exit status, not this script's).
"""
import glob
import json
import os
import re
import sys
import xml.etree.ElementTree as ET

# Properties that are not figures.
SKIP_PROPS = {"report", "vars"}

# gtest_discover_tests without NO_PRETTY_VALUES (or a CMake that treats it differently) names a
# value-parameterised case "Inst/Suite.Case/name  # GetParam() = value" (typed ones
# "...  # TypeParam = T"); the GTest XML and the gate reports know it as "Inst/Suite.Case/name".
# Every name is joined in the GTest form, so the suffix never costs a case its figures.
_PARAM_SUFFIX = re.compile(r"\s+#\s*(GetParam\(\)|TypeParam)\s*=.*$", re.S)


def gtest_name(name):
    return _PARAM_SUFFIX.sub("", name or "")


def junit_cases(path):
    cases = {}
    if not os.path.exists(path):
        return cases
    for tc in ET.parse(path).getroot().iter("testcase"):
        name = gtest_name(tc.get("name"))
        status = tc.get("status", "")
        if tc.find("failure") is not None or status == "fail":
            verdict = "FAIL"
        elif tc.find("skipped") is not None or status in ("notrun", "disabled"):
            verdict = "SKIP"
        else:
            verdict = "PASS"
        cases[name] = {"verdict": verdict, "time": float(tc.get("time") or 0), "figures": {}}
    return cases


def gtest_figures(results):
    figs = {}
    for path in glob.glob(os.path.join(results, "gtest", "**", "*.xml"), recursive=True):
        try:
            root = ET.parse(path).getroot()
        except ET.ParseError:
            continue
        for tc in root.iter("testcase"):
            full = gtest_name(f"{tc.get('classname')}.{tc.get('name')}")
            props = {}
            for p in tc.iter("property"):
                if p.get("name") not in SKIP_PROPS:
                    props[p.get("name")] = p.get("value")
            # Older GTest writes RecordProperty as attributes of <testcase>.
            for k, v in tc.attrib.items():
                if k not in ("name", "status", "result", "time", "timestamp", "classname",
                             "value_param", "type_param", "file", "line") and k not in SKIP_PROPS:
                    props[k] = v
            if props:
                figs.setdefault(full, {}).update(props)
    return figs


def report_figures(results):
    figs = {}
    for path in glob.glob(os.path.join(results, "reports", "*.json")):
        try:
            with open(path) as f:
                j = json.load(f)
        except (OSError, ValueError):
            continue
        full = gtest_name(f"{j.get('suite')}.{j.get('case')}")
        entry = dict(j.get("figures", {}))
        entry["_verdict"] = j.get("verdict")
        figs[full] = entry
    return figs


def main():
    results = sys.argv[1] if len(sys.argv) > 1 else "test-results"
    cases = junit_cases(os.path.join(results, "junit.xml"))
    for name, props in gtest_figures(results).items():
        if name in cases:
            cases[name]["figures"].update(props)
    for name, props in report_figures(results).items():
        if name in cases:
            cases[name]["figures"].update({k: v for k, v in props.items() if k != "_verdict"})
    if not cases:
        print("summary: no test cases found in", results)
        return 0
    width = min(max(len(n) for n in cases), 90)
    print(f"{'case':<{width}}  verdict  time(s)  key figures")
    print("-" * (width + 40))
    totals = {"PASS": 0, "FAIL": 0, "SKIP": 0}
    for name in sorted(cases):
        c = cases[name]
        totals[c["verdict"]] += 1
        figs = ", ".join(f"{k}={v}" for k, v in sorted(c["figures"].items()))
        shown = name if len(name) <= width else "..." + name[-(width - 3):]
        print(f"{shown:<{width}}  {c['verdict']:<7}  {c['time']:7.2f}  {figs}")
    print("-" * (width + 40))
    print(f"total {sum(totals.values())}: {totals['PASS']} passed, {totals['FAIL']} failed, "
          f"{totals['SKIP']} skipped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
