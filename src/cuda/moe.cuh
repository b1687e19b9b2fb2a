// src/cuda/moe.cuh — MoE routing and combination on the device (no host round trip):
//   route:   softmax gating (Qwen): p = softmax(router logits) over E experts; top-k by logit
//            (ties: lowest expert index, as the oracle's stable sort of p); weights p_sel,
//            renormalised to sum 1 when norm_topk. Sigmoid-grouped gating (GLM-5, DeepSeek-V3;
//            ModelConfig::MoeGating): s = sigmoid(logit), choice = s + bias; the topk_group
//            groups with the largest sum of their two best choices, then top-k choices inside
//            them (ties: lowest group, lowest expert, as the oracle's route_grouped); weights
//            s_sel / (Σ s_sel + 1e-20) when norm_topk, times scale. Writes slab ids [T*k] for the
//            expert mat-vecs and weights [T*k].
//   group:   the T*k (token, expert) vectors grouped by expert for routed GEMM launches
//            (gemm.cuh): group_start [E+1], order [T*k] (vector indices, grouped by slab) and
//            the list of the groups' tiles (slab, first index), slab after slab.
//   combine: x[t] += Σ_j w[t,j] y[t*k+j] + sigmoid(sg[t]) ysh[t]   (j in selection order; the
//            shared expert when present, added as is without sg: GLM-5), one rounding for the
//            sum, one for the residual add.
//   ledger:  a copy of one layer's route results (ids, weight bits) into the selection ledger's
//            device ring (memra/selection_ledger.h; Model::attach_ledger), rows at positions
//            *pos0 + r: the step's own results, read after the step; nothing recomputed.
//
// provides: MoeRouteParams, moe_route_run, MoeGroupParams, moe_group_run, moe_group_tile_bound,
//           MoeCombineParams, moe_combine_run, LedgerRow, LedgerRecordParams, moe_ledger_record_run
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace memra::cuda {

// Router bounds (moe_route_run; checked by Model::load): experts per layer (32 lanes x 32 logits
// each in registers), experts per token, and expert groups of sigmoid-grouped gating (a 64-bit
// mask of the chosen groups).
inline constexpr int kMoeMaxExperts = 1024;
inline constexpr int kMoeMaxUsed = 16;
inline constexpr int kMoeMaxGroups = 64;

struct MoeRouteParams {
  const float* logits = nullptr;  // [T, E]
  int32_t* ids = nullptr;         // [T*k]
  float* weights = nullptr;       // [T*k]
  int64_t T = 0;
  int E = 0, k = 0;
  bool renorm = true;
  // Sigmoid-grouped gating when `bias` is set (else softmax): bias [E] (e_score_correction_bias),
  // E split into n_group equal groups of >= 2, the top-k drawn from the best topk_group of them.
  const float* bias = nullptr;
  int n_group = 1, topk_group = 1;
  float scale = 1.0f;  // routed_scaling_factor
};
void moe_route_run(const MoeRouteParams& p, cudaStream_t s);

struct MoeGroupParams {
  const int32_t* ids = nullptr;    // [n] slab ids in [0, E) (moe_route_run's)
  int64_t n = 0;
  int E = 0;                       // <= 1024
  int32_t* order = nullptr;        // [n] out
  int32_t* group_start = nullptr;  // [E + 1] out
  int tile = 0;                    // vectors per tile of the tile list
  int32_t* tile_slab = nullptr;    // [moe_group_tile_bound] out: tile i's slab
  int32_t* tile_start = nullptr;   // [moe_group_tile_bound] out: tile i's first index into order
  int32_t* n_tiles = nullptr;      // [1] out: tiles listed
};
// Tiles a tile list can hold: every group adds at most one partial tile.
inline int64_t moe_group_tile_bound(int64_t n, int E, int tile) { return (n + tile - 1) / tile + E; }
void moe_group_run(const MoeGroupParams& p, cudaStream_t s);

struct MoeCombineParams {
  const float* y = nullptr;         // [T*k, D] expert outputs
  const float* weights = nullptr;   // [T*k]
  const float* y_shared = nullptr;  // [T, D] or nullptr
  const float* sg = nullptr;        // [T] shared-gate logits (with y_shared); nullptr: ungated
  float* x = nullptr;               // [T, D] residual, updated in place
  int64_t T = 0, D = 0;
  int k = 0;
};
void moe_combine_run(const MoeCombineParams& p, cudaStream_t s);

// One routing decision in the ledger's device ring (memra::Selection on the host).
struct LedgerRow {
  int64_t pos;
  int32_t layer, k;
  int32_t ids[kMoeMaxUsed];
  uint32_t weight_bits[kMoeMaxUsed];
};

struct LedgerRecordParams {
  const int32_t* ids = nullptr;    // [rows*k] moe_route_run's
  const float* weights = nullptr;  // [rows*k]
  int k = 0;
  int64_t rows = 0;
  const int64_t* pos0 = nullptr;  // device: position of row 0 (a cache's pos_dev)
  int32_t layer = 0;
  LedgerRow* ring = nullptr;  // [cap]
  int64_t cap = 0;
  unsigned long long* count = nullptr;  // device: rows written so far; row i goes to ring[i % cap]
};
// Appends `rows` rows at ring[*count ...] and advances *count (the host drains [read, *count)).
void moe_ledger_record_run(const LedgerRecordParams& p, cudaStream_t s);

}  // namespace memra::cuda
