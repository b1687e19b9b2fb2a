// src/cuda/moe.cuh — MoE routing and combination on the device (no host round trip):
//   route:   p = softmax(router logits) over E experts; top-k by logit (ties: lowest expert
//            index, as the oracle's stable sort of p); weights p_sel, renormalised to sum 1 when
//            norm_topk. Writes slab ids [T*k] for the expert mat-vecs and weights [T*k].
//   combine: x[t] += Σ_j w[t,j] y[t*k+j] + sigmoid(sg[t]) ysh[t]   (j in selection order; the
//            shared expert when present), one rounding for the sum, one for the residual add.
//
// provides: MoeRouteParams, moe_route_run, MoeCombineParams, moe_combine_run
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace memra::cuda {

struct MoeRouteParams {
  const float* logits = nullptr;  // [T, E]
  int32_t* ids = nullptr;         // [T*k]
  float* weights = nullptr;       // [T*k]
  int64_t T = 0;
  int E = 0, k = 0;
  bool renorm = true;
};
void moe_route_run(const MoeRouteParams& p, cudaStream_t s);

struct MoeCombineParams {
  const float* y = nullptr;         // [T*k, D] expert outputs
  const float* weights = nullptr;   // [T*k]
  const float* y_shared = nullptr;  // [T, D] or nullptr
  const float* sg = nullptr;        // [T] shared-gate logits (with y_shared)
  float* x = nullptr;               // [T, D] residual, updated in place
  int64_t T = 0, D = 0;
  int k = 0;
};
void moe_combine_run(const MoeCombineParams& p, cudaStream_t s);

}  // namespace memra::cuda
