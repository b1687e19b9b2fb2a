// src/cuda/attention.cuh — causal GQA softmax attention over the KV cache, for prefill and
// decode alike, as fixed-size KV splits plus a combine (flash-decoding's form):
//
//   query t (position pos0+t) attends keys 0..pos0+t; query head h reads kv head h / (H/KV);
//   split s covers keys [s*kSplit, (s+1)*kSplit): m_s = max score, l_s = Σ e^(score - m_s),
//   acc_s = Σ e^(score - m_s) v   (scores = q.k * 1/sqrt(hd), keys in index order);
//   combine: M = max m_s; o = Σ_s e^(m_s - M) acc_s / Σ_s e^(m_s - M) l_s, splits in order;
//   gated (Next/3.5): o *= sigmoid(gate).
// The combine also quantises o to q8_1 when asked (the wo mat-vec's input; hd % 32 == 0, so the
// blocks lie inside a head): the same values as a separate Identity row op, one launch fewer.
// The split size is a constant, never derived from the batch or the context, so a query's
// result depends only on its own keys (DESIGN.md law 2).
//
// The flash form (flash_attention_run; the arm prefill_attn = flash, for calls of more than one
// token): a block of kFlashQueries queries of one head walks the keys in tiles of kFlashKeys
// (tile k: keys [k * kFlashKeys, (k + 1) * kFlashKeys)), each tile's K and V read once into shared
// memory for all the block's queries, with an online softmax:
//   s_j = f32(q.k_j) * scale (the dot an fma chain over dims in order; keys past the query's
//   position are -inf); per tile, per query: m' = max(m, max_j s_j), a = e^(m - m'),
//   p_j = e^(s_j - m'); O = O a + Σ_j p_j v_j (each dim an fma chain over the tile's keys in
//   order); l: sixteen partials per query (keys j ≡ c mod 16 of each tile), each l a + its p_j,
//   summed at the end by the butterfly; o = O / l, then the gate and the q8_1 quantisation
//   exactly as the combine does them.
// Its reduction orders are not the split kernel's (the score is one chain over all dims, not 32
// lanes and a butterfly; no splits), so its prefill is not bit-identical to decode: a separate
// arm, judged by the exactness gates. Law 2 holds within it: a tile that is all past a query's
// position changes nothing (p = 0, a = 1 exactly), so a query's bits depend only on its own keys,
// not on the other queries of its block or call (op test: a prefill in one call equals it in
// chunks, bitwise).
//
// A decode token (T = 1) can run as ONE launch (AttnParams::prep): the split kernel then also
// prepares the token's q and k (rope.cuh's norm_rope_head: q / k norms, RoPE) and stores its K / V,
// and finishes the heads itself (a one-split context in the split block, a longer one in the
// head's last split block to arrive, counted in AttnParams::arrivals): the same bits as
// qk_prep_run, then this attention in its three-launch form.
//
// provides: kAttnSplit, AttnParams, attention_run, attention_workspace_floats, kFlashQueries, kFlashKeys,
//           flash_attention_supports, flash_attention_run
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/dmat.h"
#include "cuda/rope.cuh"

namespace memra::cuda {

inline constexpr int kAttnSplit = 256;
// head_dim bound of every attention kernel (register and shared-memory tiles are sized for it);
// Model::load checks it (check_kernel_limits).
inline constexpr int kAttnMaxHeadDim = 256;

// One sequence of a batched decode step (AttnParams::seqs): its K / V cache and position; its
// rows are row `sequence` of q, k, v, gate, out and out_q.
struct AttnSeq {
  float* k_cache = nullptr;  // [max_ctx, KV*hd]
  float* v_cache = nullptr;
  const int64_t* pos0 = nullptr;  // device
};

struct AttnParams {
  const float* q = nullptr;        // [T, H*hd] normed, rotated
  const float* k_cache = nullptr;  // [max_ctx, KV*hd]
  const float* v_cache = nullptr;
  const float* gate = nullptr;     // [T, H*hd] or nullptr (ungated)
  float* out = nullptr;            // [T, H*hd]
  Q81* out_q = nullptr;            // [T, H*hd/32] q8_1 of out as well (hd % 32 == 0), or nullptr
  float* work = nullptr;           // attention_workspace_floats(...)
  const int64_t* pos0 = nullptr;  // device: position of query 0
  int64_t ctx_bound = 0;          // host: >= pos0 + T; sizes the grid and the workspace layout
                                  // only (splits past a query's keys exit), never the values
  int64_t T = 0;
  int H = 0, KV = 0, hd = 0;
  float scale = 0;                 // f32(1 / sqrt(hd))
  // T = 1 only, or prep.q == nullptr: the token's q / k / v projections and norms for the one-
  // launch form (prep.q raw and not written; prep's pos0, T, H, KV, hd and cache as above), and
  // [H] arrival counters, zero before the launch and left zero after it.
  QkPrepParams prep;
  unsigned* arrivals = nullptr;
  // The one-launch form only: T sequences of one decode token each in one launch (a batched decode
  // step), sequence i reading seqs[i] (device) for its cache and position (k_cache, v_cache, pos0
  // and prep's unused) and row i of every [T, ...] operand; ctx_bound bounds every sequence's
  // context, arrivals holds [T, H] counters. Each sequence's bits are its own launch's.
  const AttnSeq* seqs = nullptr;
};

int64_t attention_workspace_floats(int64_t T, int64_t n_ctx, int H, int hd);
void attention_run(const AttnParams& p, cudaStream_t s);

inline constexpr int kFlashQueries = 64;  // queries per block of the flash form
inline constexpr int kFlashKeys = 32;     // keys per tile
// Head dims the flash form takes (its instantiations: 16, 32, 64, 128, 256); the caller runs
// attention_run for the others.
bool flash_attention_supports(int hd);
// The flash form over p (T >= 1 queries, no prep, no seqs; p.work unused); fails naming the
// parameter for a head dim it does not take or a decode-only field that is set.
void flash_attention_run(const AttnParams& p, cudaStream_t s);

}  // namespace memra::cuda
