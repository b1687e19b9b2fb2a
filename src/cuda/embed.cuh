// src/cuda/embed.cuh — token embedding gather: x[t, :] = dequant(E[tok[t], :]) * scale, exactly
// dequantize_row's values times the per-tensor scale (one f32 rounding, as the oracle's loader).
//
// provides: EmbedParams, embed_run
#pragma once

#include <cuda_runtime.h>

#include "cuda/dmat.h"

namespace memra::cuda {

struct EmbedParams {
  DMat table;                  // [V, D]
  const int32_t* tokens = nullptr;  // [T] device, validated on the host
  int64_t T = 0;
  float* x = nullptr;          // [T, D]
};

void embed_run(const EmbedParams& p, cudaStream_t s);

}  // namespace memra::cuda
