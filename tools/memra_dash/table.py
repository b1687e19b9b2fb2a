"""The text tables the verbs print: Markdown (for docs/PERF.md) or aligned plain text."""
from __future__ import annotations

import sys


def print_table(cols: list[str], cells: list[list[str]], markdown: bool, out=sys.stdout, left: int | None = None):
    """cols and each row of cells as a table; plain text aligns the first `left` columns to the left
    and the rest to the right (None: all to the left)."""
    if markdown:
        print("| " + " | ".join(cols) + " |", file=out)
        print("|" + "---|" * len(cols), file=out)
        for c in cells:
            print("| " + " | ".join(c) + " |", file=out)
        return
    w = [max(len(cols[i]), *(len(c[i]) for c in cells)) for i in range(len(cols))]
    n_left = len(cols) if left is None else left

    def line(c):
        return "  ".join(x.ljust(w[i]) if i < n_left else x.rjust(w[i]) for i, x in enumerate(c)).rstrip()

    print(line(cols), file=out)
    print("-" * len(line(cols)), file=out)
    for c in cells:
        print(line(c), file=out)
