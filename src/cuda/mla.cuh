// src/cuda/mla.cuh — multi-head latent attention's per-token preparation (GLM-5; the oracle's
// contract in src/oracle/mla.cpp), for token t at position *pos0 + t (a block per token and head,
// and one per token for the indexer):
//   queries:  the last n_rot dims of each head of q rotated in place;
//   key/value: the shared rope key (kva's last n_rot values) rotated, then the expanded rows
//             stored at the position: key head h = [k_nope_h | rope key], value head h = v_h,
//             from kvb's per-head [k_nope | v];
//   indexer:  the first n_rot dims of each indexer query head rotated in place, the per-head
//             weights times w_scale (f32), and the indexer key LayerNorm'd (weight, bias, eps)
//             and rotated into the cache's index_k row.
//   latent:   the position's latent row [c | rotated rope key] (c: kv_a's normed latent), what
//             the absorbed form (mla_absorb_*) attends over.
// GLM-5's hybrid rotates nothing (n_rot 0) and pools the indexer keys (mla_kpool_run).
// RoPE is the interleaved form: pair (x_2i, x_2i+1) by angle pos · theta^(-2i/n_rot), the angle,
// cos, sin and rotation in f64 and rounded once to f32 (the oracle's rope_pairs). The LayerNorm
// is f64 with the oracle's sums in the oracle's order ((x - mean) · r · w + b, r = 1/sqrt(var/n
// + eps)), so its f32 results are the oracle's.
//
// The absorbed latent form (mla_decode = latent; the oracle's contract ops::mla_attend_latent),
// three launches per one-token call:
//   mla_absorb_q_run   ql_h = [f32(s · W_UK_h^T q_nope_h) | q_rope_h]   (W = wkv_b, s its tensor scale)
//   sparse_attention_run over the latent rows: one kv head, key = the row, value = its first
//                      kv_rank values, scale 1/sqrt(dn + n_rot)
//   mla_absorb_o_run   o_h = f32(s · W_UV_h ol_h)
// W's values read in their stored type (dmat_elem), the activations f32 (no q8_1).
//
// provides: kMlaMaxRot, MlaPrepParams, mla_prep_run, MlaKpoolParams, mla_kpool_run, MlaAbsorbParams,
//           mla_absorb_q_run, mla_absorb_o_run
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/dmat.h"
#include "cuda/dsa.cuh"

namespace memra::cuda {

// Rotated dims (the angles sit in shared memory) and indexer key width (its LayerNorm row too).
inline constexpr int kMlaMaxRot = 256;
inline constexpr int kMlaMaxIndexDim = 256;

struct MlaPrepParams {
  float* q = nullptr;             // [T, H, hd] in place: rope part ([dn, hd)) rotated
  const float* kva = nullptr;     // [T, kv_rank + n_rot] wkv_a's rows; the last n_rot are the rope key
  const float* kvb = nullptr;     // [T, H, dn + dv] wkv_b's rows
  float* k_cache = nullptr;       // [max_ctx, H * hd]
  float* v_cache = nullptr;       // [max_ctx, H * dv]
  const float* lat = nullptr;     // [T, kv_rank] the normed latents
  float* lat_cache = nullptr;     // [max_ctx, kv_rank + n_rot] out: [latent | rotated rope key]
  const int64_t* pos0 = nullptr;  // device: position of token 0 (a cache's pos_dev)
  int64_t T = 0;
  int H = 0, dn = 0, n_rot = 0, dv = 0, kv_rank = 0;
  double theta = 10000;
  // the indexer (iq == nullptr: a layer that reuses the previous selection)
  float* iq = nullptr;            // [T, ni, hi] in place: first n_rot dims rotated
  float* iw = nullptr;            // [T, ni] in place: times w_scale
  const float* ik = nullptr;      // [T, hi] wk's rows
  const float* k_norm = nullptr;  // [hi] LayerNorm weight
  const float* k_bias = nullptr;  // [hi] LayerNorm bias
  float* index_k = nullptr;       // [max_ctx, hi]
  int ni = 0, hi = 0;
  float w_scale = 1.0f;  // f32(1 / sqrt(ni))
  double eps = 1e-6;
  // GLM-5's hybrid (pooled indexer, kpool > 0): each token's pool-gate logits plus the bias of its
  // slot in its pool stored at its position, f32(ig + ape[pos % kpool]) (the oracle's sum)
  const float* ig = nullptr;    // [T, hi] index_kpool_compress_gate x
  const float* ape = nullptr;   // [kpool, hi]
  float* index_gate = nullptr;  // [max_ctx, hi]
  int kpool = 0;
  // a batched step: token t is sequence t's, at its position, into its caches (k_cache, v_cache,
  // lat_cache, index_k, index_gate and pos0 unused)
  const MlaSeq* seqs = nullptr;
};
void mla_prep_run(const MlaPrepParams& p, cudaStream_t s);

// The pools this call's tokens close (GLM-5's hybrid): the token at position p with
// (p + 1) % kpool == 0 closes pool j = (p + 1) / kpool - 1, whose key is, per channel c,
//   rows[j][c] = sum_s softmax_s(gate[jP + s][c]) index_k[jP + s][c]
// in f64 (the oracle's pool_window: the max, then exp(g - max), the two sums in slot order),
// rounded once to f32. Runs after mla_prep_run (the keys and gates of the call stored).
struct MlaKpoolParams {
  const float* index_k = nullptr;     // [max_ctx, hi]
  const float* index_gate = nullptr;  // [max_ctx, hi]
  float* rows = nullptr;              // [max_ctx / kpool, hi] out
  const int64_t* pos0 = nullptr;      // device: position of token 0
  int64_t T = 0;
  int hi = 0, kpool = 0;
  const MlaSeq* seqs = nullptr;  // a batched step: token t is sequence t's (index_k .. pos0 unused)
};
void mla_kpool_run(const MlaKpoolParams& p, cudaStream_t s);

// Bound of the absorbed form's per-head vectors in shared memory (kv_rank, dn).
inline constexpr int kMlaMaxLatent = 4096;

struct MlaAbsorbParams {
  DMat wkv_b;                 // [H (dn + dv), kv_rank]: head h's W_UK rows, then its W_UV rows
  const float* q = nullptr;   // [T, H, dn + n_rot] (rope part rotated)
  float* ql = nullptr;        // [T, H, kv_rank + n_rot] out of absorb_q: the latent queries
  const float* ol = nullptr;  // [T, H, kv_rank] the attention's output over the latent rows
  float* o = nullptr;         // [T, H, dv] out of absorb_o
  int64_t T = 0;
  int H = 0, dn = 0, n_rot = 0, dv = 0, kv_rank = 0;
  int head_shift = 0;  // absorb_q reads head (h + head_shift) mod H's W_UK: 0, or 1 under Break::mla_latent_wrong_head
};
// Block per (head, token); thread j < kv_rank: ql[j] = sum_i q[i] W[h(dn+dv) + i][j] in i order
// (fmaf), times s once.
void mla_absorb_q_run(const MlaAbsorbParams& p, cudaStream_t s);
// Block per (head, token), a warp per output: lane l sums W[row][j] ol[j] over j = l mod 32 in
// order, the warp's butterfly adds the 32, times s once.
void mla_absorb_o_run(const MlaAbsorbParams& p, cudaStream_t s);

}  // namespace memra::cuda
