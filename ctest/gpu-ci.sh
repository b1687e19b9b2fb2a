#!/usr/bin/env bash
# ctest/gpu-ci.sh — what a GPU CI box runs: detect the GPU, build for it, run its arch's tests in
# strict mode, collect the reports, print one summary line per case.
#
#   ctest/gpu-ci.sh                 # from the repository root (or anywhere inside it)
#
# Steps:
#   1. nvidia-smi: the first visible GPU's compute capability major -> arch label and CUDA arch,
#      from the arch table cmake/archs.txt (e.g. 9.x -> h100 / 90a; the same table CMake and the
#      tests use) (no GPU, or a family without a label: exit 2 with the reason — a CI box that
#      cannot run its suite must not report green).
#   2. configure (Release, MEMRA_CUDA=ON, CMAKE_CUDA_ARCHITECTURES=<arch>, MEMRA_GPU_COUNT=<GPUs>,
#      MEMRA_CACHE_DIR=<the npm tokenizer cache>) every run, also over an existing build directory
#      (a cached arch or GPU count from another box or another CUDA_VISIBLE_DEVICES must not
#      survive; configuring is cheap and idempotent), build.
#   3. ctest -L '^<label>$' --no-tests=error with MEMRA_REQUIRE_GPU=1 (a skipped GPU test is a
#      failure), the resource spec of this machine's GPUs, -j <GPUs x tests per GPU>, JUnit output.
#   4. collect: <results>/junit.xml, <results>/gtest/*.xml (per case, RecordProperty figures),
#      <results>/reports/*.json (gate reports), <results>/summary.txt; print the summary. The
#      previous run's files are removed before the tests start, so only this run's are collected.
#   Exit status: ctest's, or the build's when the build failed and ctest passed.
#
# Environment (all optional):
#   MEMRA_CI_BUILD     build directory            (default: build-gpu-ci)
#   MEMRA_CI_RESULTS   results directory          (default: <build>/test-results)
#   MEMRA_CI_TARGETS   build only these targets   (default: all)
#   MEMRA_CI_LABEL     override the arch label    (e.g. to run only '^h100$' and 'op': see -L below)
#   MEMRA_CI_JOBS      build parallelism          (default: nproc)
#   MEMRA_CI_KEEP_GOING=1  build what builds, run the tests anyway, exit non-zero if the build failed
#   MEMRA_CI_CTEST_ARGS extra ctest arguments     (e.g. "-LE slow")
#   MEMRA_CI_TESTS_PER_GPU  tests sharing one card at once (default 1). The gates' verdicts are
#                      bitwise or noise bounds, not timings, so a big card (an H200 running the
#                      tiny fixtures) can hold several; `bench` tests still run alone (RUN_SERIAL)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
[ -f .device/setup.sh ] && [ -z "${MEMRA_DEVICE_SETUP:-}" ] && { source .device/setup.sh; export MEMRA_DEVICE_SETUP=1; }

say() { printf '[gpu-ci] %s\n' "$*"; }

# --- 1. the GPU ---------------------------------------------------------------------------------
if ! command -v nvidia-smi >/dev/null 2>&1; then
  say "no nvidia-smi: this machine has no NVIDIA driver; nothing to run"; exit 2
fi
gpu_line=$(nvidia-smi --query-gpu=name,compute_cap --format=csv,noheader 2>/dev/null | head -n1 || true)
if [ -z "$gpu_line" ]; then
  say "nvidia-smi lists no GPU"; exit 2
fi
gpu_name=${gpu_line%,*}
cc=$(echo "${gpu_line##*,}" | tr -d ' ')
cc_major=${cc%%.*}
label=""
cuda_arch=""
# cmake/archs.txt: label cc_major sm cuda_arch parts...
while read -r t_label t_major _ t_arch _; do
  case "$t_label" in ''|'#'*) continue ;; esac
  if [ "$t_major" = "$cc_major" ]; then label=$t_label; cuda_arch=$t_arch; fi
done < "$root/cmake/archs.txt"
if [ -z "$label" ]; then
  say "GPU '$gpu_name' (compute capability $cc) belongs to no arch family memra labels (cmake/archs.txt)"; exit 2
fi
label=${MEMRA_CI_LABEL:-$label}
n_gpus=$(nvidia-smi --query-gpu=index --format=csv,noheader | grep -c .)
say "GPU: $gpu_name, sm_${cc/./}, $n_gpus visible -> label '$label', CUDA arch $cuda_arch"

# --- 2. build -----------------------------------------------------------------------------------
build=${MEMRA_CI_BUILD:-$root/build-gpu-ci}
results=${MEMRA_CI_RESULTS:-$build/test-results}
jobs=${MEMRA_CI_JOBS:-$(nproc)}
generator=()
# A generator can only be chosen for a new build directory (CMake refuses a change).
[ ! -f "$build/CMakeCache.txt" ] && command -v ninja >/dev/null 2>&1 && generator=(-G Ninja)
# The benchmarks are built: their smoke run (bench_decode_smoke, label bench) is one of the arch's
# tests. MEMRA_CI_BENCH=OFF leaves them (and that test) out.
# The tokenizer cache as tools/fetch-tokenizers.sh resolves it (the GPU machine's is carried in
# the checkout, .cache/memra): the default model's rule needs it (tools/CMakeLists.txt).
cmake -S "$root" -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release -DMEMRA_CUDA=ON \
      -DCMAKE_CUDA_ARCHITECTURES="$cuda_arch" -DMEMRA_GPU_COUNT="$n_gpus" \
      -DMEMRA_CACHE_DIR="$("$root/tools/fetch-tokenizers.sh" --cache-dir)" \
      -DMEMRA_BUILD_BENCH="${MEMRA_CI_BENCH:-ON}"
targets=()
# shellcheck disable=SC2206
[ -n "${MEMRA_CI_TARGETS:-}" ] && targets=(--target $MEMRA_CI_TARGETS)
keep=()
if [ "${MEMRA_CI_KEEP_GOING:-0}" = 1 ]; then
  # Build what builds: a broken target shows up as a NOT_BUILT test, the rest still runs.
  if grep -q '^CMAKE_GENERATOR:INTERNAL=Ninja' "$build/CMakeCache.txt"; then keep=(-- -k 0); else keep=(-- -k); fi
fi
build_rc=0
cmake --build "$build" -j "$jobs" "${targets[@]}" "${keep[@]}" || build_rc=$?
if [ $build_rc -ne 0 ]; then
  say "build failed (exit $build_rc)"
  [ "${MEMRA_CI_KEEP_GOING:-0}" = 1 ] || exit $build_rc
fi

# --- 3. run -------------------------------------------------------------------------------------
# Only this run's results: the GTest XML that the tests write into the build tree (gtest_discover_
# tests XML_OUTPUT_DIR) and everything collected last time. Named files only: MEMRA_CI_RESULTS may
# point at a directory that holds other things.
rm -rf "$build/test-results/gtest" "$results/gtest" "$results/reports"
rm -f "$results/junit.xml" "$results/summary.txt" "$results/gpu-resources.json"
mkdir -p "$results/reports"
spec=$results/gpu-resources.json
per_gpu=${MEMRA_CI_TESTS_PER_GPU:-1}
"$root/ctest/resource-spec.sh" "$spec" "$per_gpu" >/dev/null
commit=${MEMRA_COMMIT:-$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)}
# "+dirty" only where git can tell: a copy without .git (MEMRA_COMMIT given) is not dirty.
if git -C "$root" rev-parse --git-dir >/dev/null 2>&1 && ! git -C "$root" diff --quiet; then
  commit="$commit+dirty"
fi
say "ctest -L '^$label\$' (strict: MEMRA_REQUIRE_GPU=1), results in $results"
# With the resource spec, CTest never starts a test that needs more cards than the box has: it
# reports it "Not Run" (a failure), so the test could not even skip with its reason. On a
# one-GPU box the multi-GPU tests are deselected instead, and the summary says so.
exclude=()
if [ "$n_gpus" -lt 2 ]; then
  exclude=(-LE '^multi_gpu$')
  say "one GPU: multi_gpu tests deselected (-LE '^multi_gpu\$'); run them on a box with 2 or more"
fi
rc=0
# shellcheck disable=SC2086
MEMRA_REQUIRE_GPU=1 MEMRA_TEST_RESULTS="$results/reports" MEMRA_COMMIT="$commit" \
  ctest --test-dir "$build" -L "^${label}\$" "${exclude[@]}" --no-tests=error \
        --resource-spec-file "$spec" -j "$((n_gpus * per_gpu))" --output-on-failure \
        --output-junit "$results/junit.xml" ${MEMRA_CI_CTEST_ARGS:-} || rc=$?

# --- 4. collect and summarise -------------------------------------------------------------------
if [ -d "$build/test-results/gtest" ] && [ "$build/test-results" != "$results" ]; then
  cp -r "$build/test-results/gtest" "$results/"
fi
{
  echo "memra gpu-ci: $gpu_name (sm_${cc/./}, label $label), commit $commit, $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  [ "${#exclude[@]}" -gt 0 ] && echo "($n_gpus GPU: multi_gpu tests deselected)"
  if command -v python3 >/dev/null 2>&1; then
    python3 "$root/ctest/summary.py" "$results"
  else
    echo "(python3 missing: counts only)"
    grep -o 'tests="[0-9]*" failures="[0-9]*"[^>]*' "$results/junit.xml" || true
  fi
  if [ "$build_rc" -ne 0 ]; then
    echo "ctest exit status: $rc; build FAILED (exit status $build_rc): tests of the targets that did not build are missing"
  else
    echo "ctest exit status: $rc; build exit status: 0"
  fi
} | tee "$results/summary.txt"
if [ "$build_rc" -ne 0 ] && [ "$rc" -eq 0 ]; then rc=$build_rc; fi
exit "$rc"
