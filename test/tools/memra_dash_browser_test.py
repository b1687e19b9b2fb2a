#!/usr/bin/env python3
"""The dashboard of the committed runs, loaded in a real headless browser.

    memra_dash_browser_test.py <tools/memra-dash> <bench/results> <work dir>

1. `memra-dash render <bench/results>` writes the page (Chart.js from the npm cache that
   tools/fetch-tokenizers.sh fills; the CTest fixture npm_tokenizers runs it).
2. Chromium loads it headless (--dump-dom after a virtual-time budget) and the test reads the
   status element the page writes once it has drawn: every plot it was given (as many as render
   reported) must have drawn points with finite coordinates and painted its canvas, and no script
   error may have occurred (window errors, unhandled rejections, console.error).
3. The checker itself: the same page with a script error and a plot without data injected must
   be reported as failing (so a page that draws nothing cannot pass).

Chromium is required: without it the test FAILS naming the fix (./dev setup installs the Debian
package chromium). Set MEMRA_CHROMIUM to use another Chromium/Chrome binary.
"""
import html
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

TOOL, RESULTS, WORK = sys.argv[1:4]
NAMES = ("chromium", "chromium-browser", "google-chrome-stable", "google-chrome", "chrome", "headless_shell",
         "chromium-headless-shell")


def fail(msg):
    print(f"FAIL: {msg}")
    sys.exit(1)


def find_chromium():
    env = os.environ.get("MEMRA_CHROMIUM")
    if env:
        p = shutil.which(env) or (env if os.path.isfile(env) else None)
        if not p:
            fail(f"MEMRA_CHROMIUM={env}: not found")
        return p
    for n in NAMES:
        p = shutil.which(n)
        if p:
            return p
    fail("no Chromium found (looked for " + ", ".join(NAMES) + " on PATH): this test loads the dashboard in a "
         "headless browser. Install it with ./dev setup (Debian package chromium: apt-get install chromium), or "
         "set MEMRA_CHROMIUM to a Chromium/Chrome binary.")


def load(browser, page, profile):
    cmd = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
           "--no-default-browser-check", "--disable-extensions", "--mute-audio", f"--user-data-dir={profile}",
           "--window-size=1400,1000", "--virtual-time-budget=20000", "--dump-dom", "file://" + os.path.abspath(page)]
    t0 = time.monotonic()
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=50)
    except subprocess.TimeoutExpired:
        fail(f"{browser} did not finish loading {page} within 50 s")
    dt = time.monotonic() - t0
    if r.returncode != 0 or "<html" not in r.stdout:
        fail(f"{browser} exit {r.returncode}, no DOM dumped; stderr:\n{r.stderr[-3000:]}")
    return r.stdout, dt


def status(dom):
    m = re.search(r'<pre id="memra-dash-status"([^>]*)>(.*?)</pre>', dom, re.S)
    if not m:
        fail("the page has no #memra-dash-status element")
    attrs = dict(re.findall(r'(data-[a-z]+)="([^"]*)"', m.group(1)))
    return attrs, html.unescape(m.group(2))


os.makedirs(WORK, exist_ok=True)
browser = find_chromium()
page = os.path.join(WORK, "dashboard.html")
r = subprocess.run([sys.executable, TOOL, "render", RESULTS, "--out", page], capture_output=True, text=True,
                   env=dict(os.environ, PYTHONDONTWRITEBYTECODE="1"))
print(r.stderr.strip())
if r.returncode != 0:
    fail(f"memra-dash render exit {r.returncode}")
m = re.search(r"(\d+) plots\)", r.stderr)
if not m:
    fail("memra-dash render did not report its plot count")
expected = int(m.group(1))
if expected < 20:
    fail(f"only {expected} plots from {RESULTS}")

with tempfile.TemporaryDirectory() as profile:
    dom, dt = load(browser, page, profile)
    attrs, text = status(dom)
    print(f"{browser}: loaded in {dt:.1f} s: {text.splitlines()[0] if text else ''}")
    if attrs.get("data-state") != "done":
        fail(f"the page's script did not finish (status {attrs}, text {text!r})")
    plots, rendered, errors = (int(attrs.get(k, -1)) for k in ("data-plots", "data-rendered", "data-errors"))
    problems = []
    if plots != expected:
        problems.append(f"the page drew {plots} plots, render built {expected}")
    if rendered != plots:
        problems.append(f"{plots - rendered} plot(s) without drawn data")
    if errors != 0:
        problems.append(f"{errors} script error(s)")
    n_boxes = len(re.findall(r'<div class="plot" id="p\d+"', dom))
    n_ok = len(re.findall(r'<div class="plot" id="p\d+" data-title="[^"]*" data-rendered="[1-9]\d*"', dom))
    if n_boxes != expected or n_ok != expected:
        problems.append(f"{n_boxes} plot boxes, {n_ok} marked rendered, {expected} expected")
    if problems:
        fail("; ".join(problems) + "\n" + text)

    # the checker catches a broken page: a plot without data and a script error
    with open(page, encoding="utf-8") as f:
        doc = f.read()
    m = re.search(r'(<script id="memra-data" type="application/json">)(.*?)(</script>)', doc, re.S)
    data = json.loads(m.group(2))
    data["plots"].append({"id": "pbroken", "section": "history", "type": "line", "title": "broken", "labels": ["a"],
                          "series": [{"label": "median", "data": [None]}], "refs": []})
    broken = doc[:m.start()] + m.group(1) + json.dumps(data) + m.group(3) + "<script>null.boom;</script>" + doc[m.end():]
    bad_page = os.path.join(WORK, "dashboard-broken.html")
    with open(bad_page, "w", encoding="utf-8") as f:
        f.write(broken)
    dom2, _ = load(browser, bad_page, profile)
    a2, t2 = status(dom2)
    if not (int(a2.get("data-plots", 0)) == expected + 1 and int(a2.get("data-rendered", -1)) == expected
            and int(a2.get("data-errors", 0)) >= 1 and "broken" in t2):
        fail(f"the status of a broken page does not show it: {a2} {t2!r}")

print(f"PASS: {rendered} of {plots} plots rendered with data, no script error ({dt:.1f} s in the browser)")
