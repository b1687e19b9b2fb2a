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
// Tiles (int8): a block of 16 warps covers 128 weight rows x 128 tokens (routed launches, calls
// of <= 32 tokens and grids too small to fill the card: x 32 vectors; gemm_token_tile); a warp
// owns 16 rows and half the tokens, in n-tiles of 8 (32 f32 accumulators per thread at 128
// tokens; NVFP4's 32-vector tile may run as 8 warps owning all of them: gemm_halves); K goes in 256-value chunks staged in shared memory by cp.async with the rows' scales,
// two stages (each weight byte is read once per token tile, each activation byte once per 128
// rows). BF16: 4 warps x 64 rows x 128 tokens, fragments straight from global memory.
//
// BF16 weights against f32 activations (mma.sync m16n8k16 bf16 -> f32): each activation is split
// into three bf16 terms, t0 = bf16_rn(x), t1 = bf16_rn(x - t0), t2 = bf16_rn(x - t0 - t1) (the
// differences exact in f32), and every 16-value k-step accumulates W·t0, W·t1, W·t2 into the f32
// accumulator: the activation's 24 bits reach the tensor core (|x - t0 - t1 - t2| <= 2^-24 |x|),
// as f32 activations do on the m = 1 path and in the oracle. The products are exact; the order
// and rounding of the tensor core's f32 accumulation within a k-step are not specified by PTX,
// so the contract is a bound, not bits: |y/scale - Σ w x| <= ((3 cols/16 + 1) 2^-22 + 2^-24) Σ|w x|
// (test/ops/gemm_op_test.cpp, which also shows the bound rejects bf16_rn(x) alone).
// Deterministic: the same shapes, the same instruction order.
//
// provides: GemmParams, gemm_run, gemm_run_multi, gemm_multi, gemm_supported, gemm_token_tile
#pragma once

#include <cuda_runtime.h>

#include "cuda/dmat.h"

namespace memra::cuda {

struct GemmParams {
  DMat w;                   // Q8_0, NVFP4 or BF16, one slab
  const Q81* xq = nullptr;  // [T, cols/32]: Q8_0 / NVFP4
  const float* xf = nullptr;  // [T, ld_xf]: BF16 (ld_xf even)
  int64_t ld_xf = 0;
  int64_t T = 0;
  float* y = nullptr;     // y[t * ld_y + r]
  int64_t ld_y = 0;
  bool add_to_y = false;
  // Routed (MoE experts; Q8_0 / NVFP4): T output vectors grouped by slab (moe_group_run, tiles of
  // gemm_routed_tile vectors): vector a = order[j], j in [group_start[e], group_start[e+1]), is
  // W_e x[a / x_div] into y row a. The grid covers max_tiles tiles (moe_group_tile_bound); blocks
  // past *n_tiles leave at once.
  const int32_t* order = nullptr;        // [T]
  const int32_t* group_start = nullptr;  // [n_slab + 1]
  const int32_t* tile_slab = nullptr;    // [max_tiles]
  const int32_t* tile_start = nullptr;   // [max_tiles]
  const int32_t* n_tiles = nullptr;      // [1]
  int64_t max_tiles = 0;
  int n_slab = 1, x_div = 1;
  // Dense int8 launches: 0 takes gemm_token_tile's choice; 32 or 128 forces that tile (op tests
  // run every case under both: the bits must not depend on it).
  int token_tile = 0;
  // NVFP4 launches of the 32-token tile: 0 takes gemm_halves' choice; 1 or 2 forces that many
  // token halves (op tests run each case under both: the bits must not depend on it).
  int halves = 0;
};
inline constexpr int gemm_routed_tile = 32;  // vectors per routed tile (a group averages T k / E)

// The token tile of a dense int8 launch of `rows` weight rows over T tokens on a card of `sms`
// SMs. Calls of at most 32 tokens (a batched decode step's rows) take the 32-token tile. Larger
// ones take the 128-token tile, whose blocks reuse each weight fragment over 8 n-tiles, where
// its grid (one block per SM) covers at least half the SMs; else the 32-token tile, 4x the
// blocks at a quarter of the work each and two per SM: a 1024-row matrix over 512 tokens is 32
// blocks of 128 tokens, a quarter of an H200, and 128 of 32.
int gemm_token_tile(int64_t rows, int64_t T, int sms);

// The token halves of a 32-token tile (gemm.cu): warps of two halves decode each unit's weights
// twice, once per half; one half has every n-tile of the tile in each warp and half the warps.
// NVFP4 (whose per-unit decode of nibbles and scales is the dear part) takes one half for routed
// launches (~16 vectors a tile, 1536-block grids: 35B-A3B gate / up 271 -> 212 us) and grids of
// no more blocks than SMs (the 35B-A3B shared expert's gate + up, 128 blocks: 45.6 -> 36.5 us),
// two halves for larger dense grids (its 256-block output projections: 93.5 us with two, 103
// with one); Q8_0 always two (its tile's shared memory allows 2 blocks per SM, 8 warps each with
// one half).
int gemm_halves(DType t, bool routed, int64_t blocks, int sms);

// The weight types and row lengths the GEMM takes (BF16 k-steps are 16 values).
inline bool gemm_supported(DType t, int64_t cols) {
  return t == DType::Q8_0 || t == DType::NVFP4 || (t == DType::BF16 && cols % 16 == 0);
}
void gemm_run(const GemmParams& p, cudaStream_t s);

// Up to gemm_multi dense Q8_0 / NVFP4 GEMMs over the same activations (xq, T, cols, type; a
// layer's q, k and v) in one launch: their row tiles share the grid, so a model whose matrices
// are each less than a wave of blocks (Qwen3-0.6B over 512 tokens: 8 to 24 row tiles per matrix)
// fills the card. Or routed ones over the same grouping as well (order, group and tile lists,
// slabs, x_div: an MoE layer's expert gate and up), whose launch then has no tail of its own
// between them. Each output is the bits of its matrix's own gemm_run.
inline constexpr int gemm_multi = 4;
void gemm_run_multi(const GemmParams* ps, int n, cudaStream_t s);

}  // namespace memra::cuda
