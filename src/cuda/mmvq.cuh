// src/cuda/mmvq.cuh — quantised (and float) mat-vec: y[a, r] = scale[slab] * dot(W[slab, r], x[a / x_div])
// for n_out output vectors a, the decode workhorse (m = 1) that also serves prefill (NT tokens
// share one pass over a weight row) and MoE experts (slab = expert id read on the device).
//
// Activations: q8_1 blocks for Q8_0 / NVFP4 weights (quant.h's dot contract, reproduced
// bitwise: a lane per unit strided by the threads of a row, then the butterfly); for NVFP4
// weights alternatively W4A4 fp4 activations (A4, quant.h's dot_nvfp4_fp4act: the prefill arm
// prefill_act = w4a4); f32 for F32 / F16 / BF16 weights (unit = 8 consecutive values, an fma
// chain, then the same reduction). NVFP4 x q8_1 follows W4A8's contract or its pair32 variant
// (Arms::nvfp4_dot, MatvecParams::nvfp4_dot; quant.h dot_nvfp4_q8_1_pair32), in every form.
//
// Two reduction families (Arms::decode_matvec):
//   mmvq  — warp per row: 32 lanes stride the units, warp butterfly (quant.h DotOrder::warp32);
//   dp4a  — block per row: 128 threads stride the units, warp butterflies, then the 4 warp
//           partials summed in warp order (a two-level block reduce).
// The per-output-vector order never depends on n_out, NT or the batch: every a is computed by
// the same sequence of operations (batch invariance, DESIGN.md law 2). How rows are scheduled
// does vary: a dense m = 1 launch of the mmvq family (n_out == 1, no expert ids, one activation
// row for all its matrices) runs as a stream of resident warps taking rows in turn
// (mmvq.cu matvec_stream_kernel); everything else runs a grid of row blocks. A row is one warp either way.
//
// Weights are planar device rows (planar.cuh); q8_1 activations are the GGUF block layout.
//
// provides: MatvecParams, matvec_run, matvec_run_multi, matvec_run_best
#pragma once

#include <cuda_runtime.h>

#include "cuda/argmax.cuh"
#include "cuda/dmat.h"
#include "memra/arms.h"

namespace memra::cuda {

struct MatvecParams {
  DMat w;
  const Q81* xq = nullptr;      // [n_x, cols/32] when uses_q8_1(w.type) (and x4 is not set)
  const A4* x4 = nullptr;       // [n_x, cols/32] W4A4 activations: NVFP4 weights only, instead of xq
  const float* xf = nullptr;    // [n_x, ld_xf] otherwise
  int64_t ld_xf = 0;
  int64_t n_out = 0;            // output vectors
  int x_div = 1;                // output vector a reads activation row a / x_div
  const int32_t* slab_of = nullptr;  // [n_out] device: slab of each output vector; nullptr: 0
  float* y = nullptr;           // y[a * ld_y + r], r < w.slab_rows
  int64_t ld_y = 0;
  bool add_to_y = false;        // y = y + result (the residual add, same two roundings)
  Nvfp4Dot nvfp4_dot = Nvfp4Dot::sub16;  // NVFP4 x q8_1: quant.h dot_nvfp4_q8_1 or its pair32 variant
};

// Returns whether the bulk-fed tensor-core tiles took the launch (Counters::bulk_tile_launches).
// bulk_tile_reorder: Break::bulk_tile_reorder, a canary's defect (those tiles' other instantiation).
bool matvec_run(const MatvecParams& p, DecodeMatvec family, cudaStream_t s, bool bulk_tile_reorder = false);

// Up to kMatvecMulti mat-vecs of one weight type over the same n_out, x_div and slab ids (q, k,
// v, gate of one layer; an FFN's gate and up) in ONE launch: the grid is the concatenation of
// their row blocks. Each row is computed exactly as by matvec_run (same kernel body).
inline constexpr int kMatvecMulti = 4;
bool matvec_run_multi(const MatvecParams* p, int n, DecodeMatvec family, cudaStream_t s,
                      bool bulk_tile_reorder = false);

// matvec_run, and where the launch is the streamed form (mmvq family, Q8_0 / NVFP4, one output
// vector, no residual add) each of its warps also leaves the best (value, row) of the rows it
// stored in best[0..n) (argmax.cuh's order; n <= max_best): returns n, or 0 when no bests were
// written (another form ran, or its grid has more than max_best warps). The greedy step's
// lm_head: argmax_step_run then reduces n pairs instead of scanning the vocabulary. y is the
// same either way (same kernel body).
int matvec_run_best(const MatvecParams& p, DecodeMatvec family, RowBest* best, int max_best, cudaStream_t s);

}  // namespace memra::cuda
