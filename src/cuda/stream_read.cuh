// src/cuda/stream_read.cuh — the read-bandwidth probe benchmarks divide by: a read-only
// streaming kernel (16-byte __ldg loads, grid-stride, 8 blocks per SM), the ceiling of a decode
// step, which only reads weights.
//
// provides: stream_read_run
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

namespace memra::cuda {

// Reads `bytes` (a multiple of 16) at `buf`; writes one float per block to `sink` (>= 8 *
// sm_count floats) so the loads cannot be optimised away.
void stream_read_run(const void* buf, size_t bytes, float* sink, int sm_count, cudaStream_t s);

}  // namespace memra::cuda
