// src/cuda/quantize.cuh — host entry points of the quantize family (kernels in quantize.cu).
//
// Contracts (bitwise, checked by test/ops/quantize_test.cpp):
//   dequantize_row_cuda == memra::dequantize_row   for F16, BF16, Q8_0, NVFP4 (no tensor scale)
//   quantize_row_q8_1_cuda == memra::quantize_row_q8_1   (finite input whose scale fits fp16)
// Host-only declarations: includable from plain C++.
//
// provides: dequantize_row_cuda, quantize_row_q8_1_cuda
#pragma once

#include <cstdint>

#include "memra/dtype.h"
#include "memra/quant.h"

struct CUstream_st;

namespace memra::cuda {

// n elements (a multiple of the type's block size) of `type` at device `src` to f32 at device
// `dst`, on `stream`. Throws memra::Error for an unsupported type or a bad n.
void dequantize_row_cuda(DType type, const void* src, float* dst, int64_t n, CUstream_st* stream);

// n f32 (a multiple of 32) at device `x` to n/32 q8_1 blocks at device `y`.
void quantize_row_q8_1_cuda(const float* x, BlockQ8_1* y, int64_t n, CUstream_st* stream);

}  // namespace memra::cuda
