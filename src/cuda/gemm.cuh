// src/cuda/gemm.cuh — prefill GEMM on int8 tensor cores for Q8_0 and NVFP4 weights against q8_1
// activations (the W8A8 / W4A8 reference arm): y[t, r] = scale * Σ_u p_u(r, t), with
//   isum_u = the unit's int8 dot, exact on the tensor core (mma.sync m16n8k32 for a 32-value
//            Q8_0 block, m16n8k16 for a 16-value NVFP4 sub-block, each from a zero accumulator);
//   p_u    = f32(f32(scale_w * scale_a) * f32(isum_u))   (quant.h step 3);
//   Σ      = sequential over u from +0.0f                 (quant.h DotOrder::sequential).
// So every output equals memra::dot_q8_0_q8_1 / dot_nvfp4_q8_1(..., DotOrder::sequential) bit
// for bit (test/ops/gemm_op_test.cpp). It differs from the m=1 mat-vec (warp32 order) by
// floating-point composition only.
//
// Tiles: a block of 4 warps covers 64 weight rows x 128 tokens; a warp owns 16 rows and keeps
// 16 n-tiles of 8 tokens (64 f32 accumulators per thread); A fragments come straight from the
// weight rows (each weight byte is read once per 128 tokens), B fragments from the q8_1 rows.
//
// provides: GemmParams, gemm_run, gemm_supported
#pragma once

#include <cuda_runtime.h>

#include "cuda/dmat.h"

namespace memra::cuda {

struct GemmParams {
  DMat w;                 // Q8_0 or NVFP4, one slab
  const Q81* xq = nullptr;  // [T, cols/32]
  int64_t T = 0;
  float* y = nullptr;     // y[t * ld_y + r]
  int64_t ld_y = 0;
  bool add_to_y = false;
};

inline bool gemm_supported(DType t) { return t == DType::Q8_0 || t == DType::NVFP4; }
void gemm_run(const GemmParams& p, cudaStream_t s);

}  // namespace memra::cuda
