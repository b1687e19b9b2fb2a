// src/cuda/argmax.cuh — greedy token on the device: the largest logit, ties to the lowest index
// (the same rule as oracle::top_k and host sampling). NaN logits never win.
//
// provides: argmax_run
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace memra::cuda {

// out[0] = argmax(x[0..n)).
void argmax_run(const float* x, int64_t n, int32_t* out, cudaStream_t s);

}  // namespace memra::cuda
