// src/cuda/dmat.h — the host-visible types of the kernel families' Params structs: the device
// view of a weight matrix and the q8_1 block. Plain C++ (no device code), so host tests and the
// model walk include the family headers (*.cuh) that use them.
//
// provides: DMat, Q81, A4, uses_q8_1, ceil_div
#pragma once

#include <cstdint>

#include "memra/dtype.h"

namespace memra::cuda {

// A weight matrix on the device: rows of `cols` values in `type`'s block layout, `n_slab`
// slabs (MoE experts) of slab_rows rows each; every dot product of a row of slab s is
// multiplied by slab_scale[s] (NVFP4's per-tensor scale, 1 otherwise).
struct DMat {
  DType type = DType::F32;
  int64_t rows = 0, cols = 0;
  int64_t row_bytes = 0;
  int64_t slab_rows = 0;
  const uint8_t* data = nullptr;
  const float* slab_scale = nullptr;  // [n_slab], device
};

// The q8_1 block as quant.h's BlockQ8_1 (fp16 bits).
struct Q81 {
  uint16_t d, s;
  int8_t qs[32];
};
static_assert(sizeof(Q81) == 36);

// W4A4 activations (quant.h's Fp4Act contract) as the mat-vec reads them: per 32 values, the
// scales of the two 16-value sub-blocks as ue4m3_to_f32_half(code) in f32 (exact) and the values'
// e2m1 codes as e2m1_doubled integers, in value order. The same numbers as BlockFp4Act, decoded
// once by the quantizer instead of once per weight row. d[h] is NaN where the sub-block's input
// was not finite (quant.h's quantizer rejects such input; the device one marks it, and the NaN
// reaches every dot product that reads the sub-block).
struct A4 {
  float d[2];
  int8_t qs[32];
};
static_assert(sizeof(A4) == 40);

// True when the weight type is streamed against q8_1 activations (else f32 activations).
inline bool uses_q8_1(DType t) { return t == DType::Q8_0 || t == DType::NVFP4; }

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace memra::cuda
