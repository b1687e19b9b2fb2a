#!/usr/bin/env bash
# ctest/resource-spec.sh OUT.json — CTest resource spec for the GPUs of this machine: one `gpus`
# resource per visible card (nvidia-smi, CUDA_VISIBLE_DEVICES order), 100 slots each, so a test
# declaring RESOURCE_GROUPS "1,gpus:100" gets a whole card and `ctest -j` never oversubscribes.
set -euo pipefail
out=${1:?usage: resource-spec.sh OUT.json}
n=0
if command -v nvidia-smi >/dev/null 2>&1; then
  n=$(nvidia-smi --query-gpu=index --format=csv,noheader 2>/dev/null | grep -c . || true)
fi
if [ -n "${CUDA_VISIBLE_DEVICES:-}" ]; then
  n=$(echo "$CUDA_VISIBLE_DEVICES" | tr ',' '\n' | grep -c .)
fi
entries=""
for ((i = 0; i < n; i++)); do
  entries+="${entries:+, }{\"id\": \"$i\", \"slots\": 100}"
done
printf '{"version": {"major": 1, "minor": 0}, "local": [{"gpus": [%s]}]}\n' "$entries" > "$out"
echo "$n"
