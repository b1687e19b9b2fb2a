#!/usr/bin/env bash
# llamacpp-bench.sh — llama.cpp's llama-bench on the shapes bench_decode times, on this machine,
# so docs/PERF.md's memra : llama.cpp ratios come from one machine and one day.
#
#   bench/llamacpp-bench.sh [--dry-run] LLAMA_CPP_SRC MEMRA_BUILD [OUT_DIR]
#
# LLAMA_CPP_SRC  a llama.cpp source tree the user provides (memra never vendors or downloads it).
# MEMRA_BUILD    a memra build directory with memra-mkfixture built (tools/memra-mkfixture).
# OUT_DIR        scratch and results (default: MEMRA_BUILD/llamacpp-bench): the llama.cpp build,
#                the GGUFs, llama-bench's JSON, and one peer run per shape in Google Benchmark
#                form (tools/memra-dash import-llama-bench), ready to copy into bench/results/.
#
# Steps:
#   1. the GPU's compute capability from nvidia-smi (CUDA_ARCH overrides, e.g. 90a), then
#      llama-bench built from LLAMA_CPP_SRC with GGML_CUDA=ON for that architecture only;
#   2. per shape, memra-mkfixture writes a GGUF of the preset bench_decode's shape of that name
#      uses (the same configuration at full depth: fixture_config of the preset; weights are the
#      fixture's random ones, in llama.cpp's names and block layouts; only bytes and shapes
#      matter to a timing);
#   3. llama-bench -m FILE $LLAMA_BENCH_ARGS -o json per shape, and llama-batched-bench -m FILE
#      $LLAMA_BATCHED_ARGS --output-format jsonl (tokens/s of B sequences decoding together, the
#      peer of DecodeBatch), then import-llama-bench of each into one peer run per shape.
# --dry-run: checks the arguments, prints every command, and runs memra-mkfixture --dry-run for
# each shape (the configuration and the file size it would write); builds, writes and runs
# nothing (test/fixtures: tool_llamacpp_bench_*).
#
# Environment:
#   SHAPES            "shape/dtype ..." in bench_decode's names (default: qwen35-9b/q8_0
#                     qwen35-35b-a3b/q8_0 qwen3-0.6b/q8_0, the reference table's three).
#   LLAMA_BENCH_ARGS  default "-p 512 -n 128 -fa 1 -r 5" (pp512 and tg128, flash attention on).
#   LLAMA_BATCHED_ARGS default "-npp 16 -ntg 32 -npl 1,4,8,16,32,64 -c 4096 -b 2048 -ub 512
#                     -ngl 99 -fa on": B sequences, each with its own 16-token prompt, then 32
#                     steps of all B (DecodeBatch primes 16 tokens per sequence and times steps
#                     16..31); "none" skips it (trees older than llama-batched-bench's jsonl).
#   LLAMA_CPP_COMMIT  the tree's commit when it is not a git checkout (default: git rev-parse).
#   CUDA_ARCH         the CUDA architecture to build for (default: from nvidia-smi).
#   JOBS              build parallelism (default: nproc).
# The files are large at full depth (9B Q8_0 ~9.5 GB, 35B-A3B Q8_0 ~37 GB): OUT_DIR needs the
# room; a GGUF already there is reused.
set -euo pipefail

usage() {
  sed -n '2,39p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
}

dry=0
if [ "${1:-}" = "--dry-run" ]; then
  dry=1
  shift
fi
[ $# -ge 2 ] && [ $# -le 3 ] || usage
src=$1
build=$(cd "$2" 2>/dev/null && pwd) || { echo "llamacpp-bench: MEMRA_BUILD '$2' is not a directory" >&2; exit 2; }
out=${3:-$build/llamacpp-bench}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
mkfixture=$build/tools/memra-mkfixture
shapes=${SHAPES:-"qwen35-9b/q8_0 qwen35-35b-a3b/q8_0 qwen3-0.6b/q8_0"}
bench_args=${LLAMA_BENCH_ARGS:-"-p 512 -n 128 -fa 1 -r 5"}
batched_args=${LLAMA_BATCHED_ARGS:-"-npp 16 -ntg 32 -npl 1,4,8,16,32,64 -c 4096 -b 2048 -ub 512 -ngl 99 -fa on"}
jobs=${JOBS:-$(nproc)}

[ -f "$src/CMakeLists.txt" ] && [ -d "$src/tools/llama-bench" -o -d "$src/examples/llama-bench" ] ||
  { echo "llamacpp-bench: LLAMA_CPP_SRC '$src' is not a llama.cpp source tree (no CMakeLists.txt and tools/llama-bench)" >&2; exit 2; }
[ -x "$mkfixture" ] || { echo "llamacpp-bench: $mkfixture not built (cmake --build $build --target memra-mkfixture)" >&2; exit 2; }

# bench_decode's shape name -> memra-mkfixture's family and preset
family_of() {
  case $1 in
    qwen35-9b) echo "qwen35 qwen35-9b" ;;
    qwen35-35b-a3b) echo "qwen35moe qwen35-35b-a3b" ;;
    qwen3-0.6b) echo "qwen3 qwen3-0.6b" ;;
    *) return 1 ;;
  esac
}
for sd in $shapes; do
  shape=${sd%/*} dtype=${sd#*/}
  [ "$shape" != "$sd" ] || { echo "llamacpp-bench: SHAPES entry '$sd' is not shape/dtype" >&2; exit 2; }
  family_of "$shape" > /dev/null || { echo "llamacpp-bench: unknown shape '$shape' (qwen35-9b, qwen35-35b-a3b, qwen3-0.6b)" >&2; exit 2; }
  case $dtype in f32 | bf16 | q8_0 | nvfp4) ;; *) echo "llamacpp-bench: unknown dtype '$dtype' in '$sd'" >&2; exit 2 ;; esac
done

run() {  # prints the command; runs it unless --dry-run
  echo "+ $*" >&2
  [ $dry -eq 1 ] || "$@"
}

arch=${CUDA_ARCH:-}
if [ -z "$arch" ]; then
  if command -v nvidia-smi > /dev/null && cap=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2> /dev/null | head -1); then
    arch=${cap//./}
  elif [ $dry -eq 1 ]; then
    arch="<compute capability>"
  else
    echo "llamacpp-bench: no GPU seen by nvidia-smi; set CUDA_ARCH" >&2
    exit 2
  fi
fi

[ $dry -eq 1 ] || mkdir -p "$out/gguf"
lbuild=$out/llama-build
# Only the two benchmark programs: no server (its web UI), examples or tests (LLAMA_BUILD_APP is
# unknown to older trees, which warn and go on).
run cmake -S "$src" -B "$lbuild" -DCMAKE_BUILD_TYPE=Release -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES="$arch" \
  -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_APP=OFF
targets="llama-bench"
[ "$batched_args" = none ] || targets="$targets llama-batched-bench"
# shellcheck disable=SC2086 # a word list
run cmake --build "$lbuild" --target $targets -j "$jobs"
llama_bench=$lbuild/bin/llama-bench
commit=${LLAMA_CPP_COMMIT:-$(git -C "$src" rev-parse --short HEAD 2> /dev/null || echo unknown)}
commit=${commit:0:9}
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2> /dev/null | head -1 | tr 'A-Z ' 'a-z-' | sed 's/^nvidia-//' || true)
gpu=${gpu:-gpu}

for sd in $shapes; do
  shape=${sd%/*} dtype=${sd#*/}
  read -r family preset <<< "$(family_of "$shape")"
  gguf=$out/gguf/$shape-$dtype.gguf
  if [ $dry -eq 1 ]; then
    "$mkfixture" --family "$family" --preset "$preset" --type "$dtype" --tokenizer auto --repo "$root" --dry-run
  elif [ ! -s "$gguf" ]; then
    run "$mkfixture" --family "$family" --preset "$preset" --type "$dtype" --tokenizer auto --repo "$root" --gguf "$gguf"
  fi
  lb=$out/llama-bench-$shape-$dtype.json
  echo "+ $llama_bench -m $gguf $bench_args -o json > $lb" >&2
  # shellcheck disable=SC2086 # LLAMA_BENCH_ARGS is a word list
  [ $dry -eq 1 ] || "$llama_bench" -m "$gguf" $bench_args -o json > "$lb"
  inputs=("$lb")
  if [ "$batched_args" != none ]; then
    bb=$out/llama-batched-bench-$shape-$dtype.jsonl
    echo "+ $lbuild/bin/llama-batched-bench -m $gguf $batched_args --output-format jsonl > $bb" >&2
    # shellcheck disable=SC2086 # LLAMA_BATCHED_ARGS is a word list
    [ $dry -eq 1 ] || "$lbuild/bin/llama-batched-bench" -m "$gguf" $batched_args --output-format jsonl > "$bb"
    inputs+=("$bb")
  fi
  run python3 "$root/tools/memra-dash" import-llama-bench "${inputs[@]}" --shape "$shape" --dtype "$dtype" \
    --label "llama.cpp $commit" --build-commit "$commit" --out "$out/llamacpp-$gpu-$commit-$shape-$dtype.json"
done
[ $dry -eq 1 ] || echo "llamacpp-bench: peer runs in $out/llamacpp-$gpu-$commit-*.json (copy into bench/results/;" \
  "tools/memra-dash versus MEMRA_RUN.json $out/llamacpp-$gpu-$commit-*.json compares a bench_decode run of this machine)"
