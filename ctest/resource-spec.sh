#!/usr/bin/env bash
# ctest/resource-spec.sh OUT.json [TESTS_PER_GPU] — CTest resource spec for the GPUs of this
# machine: one `gpus` resource per visible card (nvidia-smi, CUDA_VISIBLE_DEVICES order), 100
# slots per test it may hold at once (default 1: 100 slots), so a test declaring RESOURCE_GROUPS
# "1,gpus:100" gets a whole card (or its share) and `ctest -j` never oversubscribes.
set -euo pipefail
out=${1:?usage: resource-spec.sh OUT.json [TESTS_PER_GPU]}
per_gpu=${2:-1}
case "$per_gpu" in ''|*[!0-9]*|0) echo "resource-spec.sh: TESTS_PER_GPU '$per_gpu' is not a positive integer" >&2; exit 2 ;; esac
n=0
if command -v nvidia-smi >/dev/null 2>&1; then
  n=$(nvidia-smi --query-gpu=index --format=csv,noheader 2>/dev/null | grep -c . || true)
fi
if [ -n "${CUDA_VISIBLE_DEVICES:-}" ]; then
  n=$(echo "$CUDA_VISIBLE_DEVICES" | tr ',' '\n' | grep -c .)
fi
entries=""
for ((i = 0; i < n; i++)); do
  entries+="${entries:+, }{\"id\": \"$i\", \"slots\": $((100 * per_gpu))}"
done
printf '{"version": {"major": 1, "minor": 0}, "local": [{"gpus": [%s]}]}\n' "$entries" > "$out"
echo "$n"
