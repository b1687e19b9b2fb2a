#!/usr/bin/env python3
"""Compare memra-logits JSON (the reference: memra's CPU oracle) with llamacpp-logits JSON.

Not part of the memra build; used by tools/llamacpp-crosscheck.sh (docs/interop.md).

  compare.py MEMRA.json LLAMACPP.json --tol-rel R [--typical] --label TEXT

Prints one table row:
  label | positions | max|diff| | median position diff | logit range | max|diff|/range |
  argmax agree | verdict

R is fixed per storage type by tools/llamacpp-crosscheck.sh (docs/interop.md says how it was
chosen). Let tol = R * range, range = the largest (max - min) of a memra row, and d_p the
largest |diff| at position p. The check fails when the token lists or shapes differ, and:
  strict (f32 weights: the same function up to f32 rounding)
    - max_p d_p > tol, or
    - the argmaxes differ at a position where memra's own margin between its top-1 and
      llama.cpp's top-1 exceeds 2*tol (rows within tol of each other can only swap their
      top-1 when that margin is at most 2*tol; this catches a swap the tol check would let
      through only when tol is exceeded elsewhere, so it is reported separately).
  --typical (bf16/q8_0/nvfp4 weights: llama.cpp rounds activations, memra does not)
    - the median of d_p over the positions > tol. Isolated positions may differ by more: an
      MoE router near a tie picks other experts after any perturbation (memra's own f32 and
      bf16 files differ there as much), while a misread weight or convention moves every
      position. A single-position row gets no verdict ("info").
Exit status 0 pass, 1 fail, 2 bad input.
"""
import argparse
import json
import sys


def load(path):
    with open(path) as f:
        return json.load(f)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("memra")
    ap.add_argument("llamacpp")
    ap.add_argument("--tol-rel", type=float, required=True)
    ap.add_argument("--typical", action="store_true")
    ap.add_argument("--label", default="")
    a = ap.parse_args()
    try:
        m = load(a.memra)
        l = load(a.llamacpp)
    except (OSError, ValueError) as e:
        print(f"compare.py: {e}", file=sys.stderr)
        return 2
    problems = []
    if m["tokens"] != l["tokens"]:
        problems.append(f"token lists differ: memra {m['tokens'][:8]}... llama.cpp {l['tokens'][:8]}...")
    if m["positions"] != l["positions"]:
        problems.append(f"positions differ: memra {m['positions']} llama.cpp {l['positions']}")
    rows_m, rows_l = m["logits"], l["logits"]
    if len(rows_m) != len(rows_l) or any(len(x) != len(y) for x, y in zip(rows_m, rows_l)):
        problems.append(
            f"shapes differ: memra {len(rows_m)}x{len(rows_m[0]) if rows_m else 0}, "
            f"llama.cpp {len(rows_l)}x{len(rows_l[0]) if rows_l else 0}")
        print(f"{a.label} | - | - | - | - | - | - | FAIL: {'; '.join(problems)}")
        return 1

    rng = 0.0
    per_pos = []
    for x, y in zip(rows_m, rows_l):
        rng = max(rng, max(x) - min(x))
        per_pos.append(max(abs(p - q) for p, q in zip(x, y)))
    max_diff = max(per_pos)
    med = sorted(per_pos)[len(per_pos) // 2]
    tol = a.tol_rel * rng
    agree = 0
    worst_margin = None  # largest memra margin among argmax disagreements
    for pos, (x, y) in zip(m["positions"], zip(rows_m, rows_l)):
        im = max(range(len(x)), key=x.__getitem__)
        il = max(range(len(y)), key=y.__getitem__)
        if im == il:
            agree += 1
            continue
        margin = x[im] - x[il]
        worst_margin = margin if worst_margin is None else max(worst_margin, margin)
        if not a.typical and margin > 2 * tol:
            problems.append(f"position {pos}: argmax memra {im} vs llama.cpp {il}, memra margin {margin:.3g} > 2*tol")
    n = len(rows_m)
    info = False
    if not a.typical:
        if max_diff > tol:
            problems.append(f"max|diff| {max_diff:.3g} > tol {tol:.3g} ({a.tol_rel:g} x range)")
    elif n == 1:
        info = True
    elif med > tol:
        problems.append(f"median position diff {med:.3g} > tol {tol:.3g} ({a.tol_rel:g} x range)")
    rel = max_diff / rng if rng > 0 else float("inf")
    swap = "" if worst_margin is None else f" (swaps, largest memra margin {worst_margin:.3g})"
    if problems:
        verdict = "FAIL: " + "; ".join(problems)
    else:
        verdict = "info (1 position)" if info and not problems else "ok"
    print(f"{a.label} | {n} | {max_diff:.3g} | {med:.3g} | {rng:.4g} | {rel:.2e} | {agree}/{n}{swap} | {verdict}")
    return 0 if not problems else 1


if __name__ == "__main__":
    sys.exit(main())
