// src/cuda/quantize.cuh — host entry points of the quantize family (kernels in quantize.cu).
//
// Contracts (bitwise, checked by test/ops/quantize_test.cpp):
//   dequantize_row_cuda == memra::dequantize_row   for F16, BF16, Q8_0, NVFP4 (no tensor scale)
//   quantize_row_q8_1_cuda == memra::quantize_row_q8_1   (finite input whose scale fits fp16)
//   quantize_rows_fp4act_cuda == memra::quantize_row_fp4act, decoded (A4: dmat.h), finite input
// Host-only declarations: includable from plain C++.
//
// provides: dequantize_row_cuda, quantize_row_q8_1_cuda, quantize_rows_fp4act_cuda
#pragma once

#include <cstdint>

#include "cuda/dmat.h"
#include "memra/dtype.h"
#include "memra/quant.h"

struct CUstream_st;

namespace memra::cuda {

// n elements (a multiple of the type's block size) of `type` at device `src` to f32 at device
// `dst`, on `stream`. Throws memra::Error for an unsupported type or a bad n.
void dequantize_row_cuda(DType type, const void* src, float* dst, int64_t n, CUstream_st* stream);

// n f32 (a multiple of 32) at device `x` to n/32 q8_1 blocks at device `y`.
void quantize_row_q8_1_cuda(const float* x, BlockQ8_1* y, int64_t n, CUstream_st* stream);

// W4A4 activations: `rows` rows of n f32 (n a multiple of 64) at device `x`, row r at x + r * ld,
// to rows * n / 32 A4 blocks at device `y` (row r at y + r * n / 32). Per 16 values, the
// quant.h rule: code = f32_to_ue4m3(amax / 6), S = ue4m3_to_f32(code), q = S == 0 ? 0 :
// f32_to_e2m1(x / S); stored as d = S / 2 and e2m1_doubled(q). A sub-block holding a NaN or an
// infinity gets d = NaN. drop_block_scale: a canary's defect (memra/model.h
// Break::w4a4_drop_block_scale): code = f32_to_ue4m3(1) for every sub-block (S = 1, q = e2m1(x)).
void quantize_rows_fp4act_cuda(const float* x, int64_t ld, int64_t rows, int64_t n, A4* y, CUstream_st* stream,
                               bool drop_block_scale = false);

}  // namespace memra::cuda
