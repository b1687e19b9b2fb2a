#!/usr/bin/env bash
# format-check.sh — every C++/CUDA line changed since the baseline is formatted as .clang-format
# says (git clang-format: only changed lines are judged, so older code is formatted as it is
# touched rather than in one sweeping commit). Prints the diff that would fix it and exits 1.
#
#   tools/format-check.sh            committed changes: baseline..HEAD (what CI checks)
#   tools/format-check.sh --fix      format the changed lines of the working tree in place
#
# The baseline is the commit at which the check was introduced; CI runs it on a clean clone
# (which has the history). Without git-clang-format it says so and exits 1: CI must not pass a
# check it could not run.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
baseline=36d36d6
exts=c,cc,cpp,h,hpp,cu,cuh
if ! command -v git-clang-format >/dev/null 2>&1; then
  echo "format-check: git-clang-format not found (Debian: apt-get install clang-format)" >&2
  exit 1
fi
if ! git cat-file -e "$baseline^{commit}" 2>/dev/null; then
  echo "format-check: baseline $baseline is not in this clone (a shallow clone? fetch the history)" >&2
  exit 1
fi
if [ "${1:-}" = --fix ]; then
  git clang-format --extensions "$exts" "$baseline" || true
  exit 0
fi
out=$(git clang-format --diff --extensions "$exts" "$baseline" HEAD || true)
if printf '%s' "$out" | grep -q '^diff --git'; then
  printf '%s\n' "$out"
  echo "format-check: the lines above are not formatted as .clang-format says; tools/format-check.sh --fix formats them" >&2
  exit 1
fi
echo "format-check: lines changed since $baseline are formatted"
