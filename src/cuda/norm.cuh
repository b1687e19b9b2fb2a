// src/cuda/norm.cuh — row-wise prologues of a mat-vec: RMSNorm (multiplier form), RMSNorm gated
// by SiLU(z) or sigmoid(z), SwiGLU, identity; each writes f32 rows and/or q8_1 rows (the fused activation
// quantisation: Arms::fuse_norm_quant).
//
// provides: RowOp, RowOpParams, rowop_run
#pragma once

#include <cuda_runtime.h>

#include "cuda/dmat.h"

namespace memra::cuda {

enum class RowOp {
  RmsNorm,              // y = x * rsqrt(mean(x^2) + eps) * w          (w: the canonical multiplier, 1+w folded)
  RmsNormGated,         // y = w * x * rsqrt(mean(x^2) + eps) * silu(z) (GDN output norm, per head)
  RmsNormGatedSigmoid,  // y = w * x * rsqrt(mean(x^2) + eps) * sigmoid(z) (KDA output norm, per head)
  Swiglu,               // y = silu(x) * z                               (x: gate rows, z: up rows)
  SwigluClamped,        // y = silu(min(x, limit)) * clamp(z, -limit, limit)   (DeepSeek-V4's experts)
  Identity,             // y = x                                         (quantisation only)
};

struct RowOpParams {
  RowOp op = RowOp::Identity;
  const float* x = nullptr;  // [rows, n], row stride ld_x
  int64_t ld_x = 0;
  const float* z = nullptr;  // [rows, n], row stride ld_z (gated, swiglu)
  int64_t ld_z = 0;
  const float* w = nullptr;  // [n] multiplier shared by every row (norms)
  float eps = 0;
  float limit = 0;           // SwigluClamped's clamp
  float* y = nullptr;        // [rows, n] f32 out, row stride ld_y; may alias x; nullptr: none
  int64_t ld_y = 0;
  Q81* q = nullptr;          // [rows, n/32] q8_1 out (n % 32 == 0); nullptr: none
  int64_t rows = 0, n = 0;
};

// Norms: one block per row (1024 threads for rows of >= 1024 values). SwiGLU (clamped or not) /
// Identity: a warp
// per 32-value group. Sum of squares: per-thread strided partials, warp butterfly, warps in
// index order — a fixed order, so results depend only on (x, n), never on the batch.
void rowop_run(const RowOpParams& p, cudaStream_t s);

}  // namespace memra::cuda
