// src/cuda/rope.cuh — attention input preparation: per-head RMSNorm of q and k (q_norm,
// k_norm over head_dim), partial NEOX RoPE on the first n_rot dims, and the K/V store into the
// cache at positions pos0 + t.
//
//   pair (x_i, x_{i+n_rot/2}), i < n_rot/2, rotated by angle pos * theta^(-2i/n_rot);
//   angle, cos, sin and the rotation in f64 and rounded once to f32, as the oracle does.
//
// provides: QkPrepParams, qk_prep_run
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace memra::cuda {

struct QkPrepParams {
  float* q = nullptr;        // [T, H*hd] in place: normed + rotated
  const float* k = nullptr;  // [T, KV*hd] projections
  const float* v = nullptr;  // [T, KV*hd]
  const float* q_norm = nullptr;  // [hd]
  const float* k_norm = nullptr;  // [hd]
  float* k_cache = nullptr;  // [max_ctx, KV*hd]
  float* v_cache = nullptr;
  const int64_t* pos0 = nullptr;  // device: position of token 0 (read on the device, so a captured
                                  // decode graph replays at the cache's current position)
  int64_t T = 0;
  int H = 0, KV = 0, hd = 0, n_rot = 0;
  float eps = 0;
  double theta = 10000;
};

void qk_prep_run(const QkPrepParams& p, cudaStream_t s);

}  // namespace memra::cuda
