// src/cuda/dsa.cuh — the DSA lightning indexer's token selection on the device (GLM-5; the
// oracle's contract in src/oracle/mla.cpp):
//   scores:  score[t][s] = Σ_h (w[t][h] · w_scale) · relu(q[t][h] · k[s] · qk_scale) for the
//            s < (pos0 + t + 1) / ratio keys the query sees, h in order, each dot a sequential
//            f32 chain, -0 written as +0 (so equal scores are equal bits). GLM-5: a key per
//            position (ratio 1), w = weights_proj x / sqrt(n_head) (w_scale 1); DeepSeek-V4: a
//            key per closed compressor row (ratio m: rows whose window ended at or before the
//            query), w = weights_proj x, w_scale = 1 / sqrt(n_head).
//   select:  per query, the `topk` best keys by score, in increasing key order; all of its
//            (pos0 + t + 1) / ratio keys while there are at most `topk` (none before the first); ties at the cut go to the lowest
//            positions (the oracle's select_top). One block per query: an exact radix select of
//            the topk-th largest score (4 passes of 8-bit digits over order-preserving keys),
//            then one pass in position order that keeps every score above it and the first of
//            the ones equal to it. Any context length; no sort.
//   sparse attention: o[t][h] = Σ_j p_j v[sel_j] over query t's selected positions, p =
//            softmax(q[t][h] . k[sel_j] * scale) — scores as sequential f32 fma chains, the max
//            and the sum over j in a fixed order, the value sum per output dim over j in
//            selection order: deterministic, no atomics. Query head h reads key/value head
//            h / (H / KVH), and the key and value widths differ, so one kernel serves MLA's
//            expanded form (KVH = H, dk = nope + rope, dv = v_head_dim) and its absorbed latent
//            form (KVH = 1, dk = kv_lora_rank + rope, dv = kv_lora_rank).
//   split sparse attention (SparseAttnParams::split_work; the latent form's decode): the same
//            softmax with the selection cut in chunks of kSparseSplitRows rows and the heads that
//            share a kv head taken G at a time, so each selected row is read once per group and
//            chunk, not once per head, and a query's chunks run in parallel. Per chunk: each
//            score a fixed butterfly over 32 lanes' strided f32 chains, the chunk's max, sum and
//            unnormalised value sums (rows in selection order); then the chunks combined in
//            chunk order. Deterministic, no atomics; a query's bits depend on its own selection
//            only (not on the batch, nor on the context bound of the launch).
//
// provides: MlaSeq, kDsaMaxHeads, kDsaMaxHeadDim, DsaScoreParams, dsa_score_run, DsaSelectParams,
//           dsa_select_run, DsaExpandParams, dsa_expand_pools_run, kSparseAttnMaxTopk, kSparseAttnMaxDim,
//           kSparseSplitRows, SparseAttnParams, sparse_attention_split_floats, sparse_attention_run
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace memra::cuda {

// One sequence of a batched decode step's MLA layer (B sequences, one token each: row i is
// sequence i): its caches of the layer and its device position, uploaded once per step
// (Model::Impl::upload_seq_tables). With a `seqs` table, every kernel below and mla.cuh's prep
// and pool kernels take row i's caches and position from seqs[row0 + i] (their own pointer and
// position fields unused), each row computing exactly what its own launch would.
struct MlaSeq {
  float* k = nullptr;             // [max_ctx, H * hd] expanded keys
  float* v = nullptr;             // [max_ctx, H * dv] expanded values
  float* lat = nullptr;           // [max_ctx, kv_rank + n_rot] latent rows
  float* index_k = nullptr;       // [max_ctx, hi] indexer keys (null: a layer that reuses a selection)
  float* index_gate = nullptr;    // [max_ctx, hi] pool-gate logits (pooled indexer)
  float* pool_rows = nullptr;     // [max_ctx, hi] closed pools' keys (pooled indexer)
  const int64_t* pos0 = nullptr;  // device: the sequence's position
};

// Shape bounds of the score kernel (a query's head weights and one key row stay in registers
// and shared memory): GLM-5 has 32 heads of 128.
inline constexpr int kDsaMaxHeads = 64;
inline constexpr int kDsaMaxHeadDim = 256;
// One query's heads in shared memory: n_head * head_dim floats.
inline constexpr int kDsaMaxQFloats = 12288;

struct DsaScoreParams {
  const float* q = nullptr;  // [T, n_head, head_dim] rotated indexer queries
  const float* w = nullptr;  // [T, n_head] per-head weights (already / sqrt(n_head))
  const float* k = nullptr;  // [>= (pos0 + T) / ratio, head_dim] indexer keys (normed, rotated)
  float* scores = nullptr;   // [T, ld] out: row t holds keys 0..(pos0 + t + 1) / ratio - 1
  int64_t T = 0, pos0 = 0, ld = 0;
  // device position when set (a cache's pos_dev: a captured step replays at the cache's current
  // position): query 0 sits at *pos_dev + row0, and pos0 is a bound on that which sizes the grid
  const int64_t* pos_dev = nullptr;
  int64_t row0 = 0;
  int n_head = 0, head_dim = 0;
  float qk_scale = 1.0f;  // 1 / sqrt(head_dim)
  float w_scale = 1.0f;   // multiplies each head weight (1: w already scaled)
  int ratio = 1;          // positions per key
  // a batched step (MlaSeq): query t is sequence row0 + t's token, its keys that sequence's
  // pool_rows (pooled) or index_k; pos0 + T still bounds every query's position + 1 (the grid)
  const MlaSeq* seqs = nullptr;
  bool pooled = false;
};
void dsa_score_run(const DsaScoreParams& p, cudaStream_t s);

struct DsaSelectParams {
  const float* scores = nullptr;  // [T, ld] (dsa_score_run's)
  int32_t* sel = nullptr;         // [T, topk] out: selected keys, ascending; -1 past n_sel
  int32_t* n_sel = nullptr;       // [T] out: min((pos0 + t + 1) / ratio, topk)
  int64_t T = 0, pos0 = 0, ld = 0;
  const int64_t* pos_dev = nullptr;  // as DsaScoreParams::pos_dev / row0
  int64_t row0 = 0;
  int topk = 0;
  int ratio = 1;                 // positions per key (DsaScoreParams::ratio)
  const MlaSeq* seqs = nullptr;  // a batched step: query t at sequence row0 + t's position
};
void dsa_select_run(const DsaSelectParams& p, cudaStream_t s);

// GLM-5's hybrid: each query's selected pools (dsa_select_run over pooled keys, ratio kpool)
// expanded into the positions its attention reads: every selected pool's kpool tokens in pool
// order, then its open tail ((pos + 1) / kpool) * kpool .. pos; -1 past n_sel.
struct DsaExpandParams {
  const int32_t* psel = nullptr;    // [T, pools]
  const int32_t* n_psel = nullptr;  // [T]
  int pools = 0, kpool = 0;
  int32_t* sel = nullptr;    // [T, width] out, width >= pools * kpool + kpool - 1
  int32_t* n_sel = nullptr;  // [T] out
  int width = 0;
  const int64_t* pos_dev = nullptr;  // device: query 0 sits at *pos_dev + row0
  int64_t row0 = 0;
  int64_t T = 0;
  const MlaSeq* seqs = nullptr;  // a batched step: query t at sequence row0 + t's position
};
void dsa_expand_pools_run(const DsaExpandParams& p, cudaStream_t s);

// Bounds of the sparse attention kernel (a query head's scores and its query in shared memory).
inline constexpr int kSparseAttnMaxTopk = 4096;
inline constexpr int kSparseAttnMaxDim = 1024;
// Selected rows per chunk of the split form (a block's rows; a query has ceil(topk / this) chunks).
inline constexpr int kSparseSplitRows = 128;

struct SparseAttnParams {
  const float* q = nullptr;        // [T, H, dk]
  const float* k_cache = nullptr;  // [positions, KVH * dk]
  const float* v_cache = nullptr;  // [positions, KVH * dv]
  const int32_t* sel = nullptr;    // [T, topk] (dsa_select_run's): the first n_sel[t] are used
  const int32_t* n_sel = nullptr;  // [T]
  float* out = nullptr;            // [T, H, dv]
  int64_t T = 0;
  int topk = 0, H = 0, KVH = 0, dk = 0, dv = 0;
  float scale = 0;  // f32(1 / sqrt(qk width))
  // row strides of the caches (0: KVH * dk, KVH * dv); MLA's latent form reads its keys and its
  // values (their first dv values) from the same [latent | rope key] rows
  int64_t ld_k = 0, ld_v = 0;
  // a batched step: query t reads sequence t's caches, its k / v (or, latent, its lat for both)
  const MlaSeq* seqs = nullptr;
  bool latent = false;
  // the split form (null: a block per query head over all its rows): its chunks' partial
  // results, sparse_attention_split_floats(T, H, topk, dv) floats at least
  float* split_work = nullptr;
  int64_t split_work_floats = 0;
};
void sparse_attention_run(const SparseAttnParams& p, cudaStream_t s);
// The split form's workspace: per query, head and chunk its max, sum and dv value sums.
int64_t sparse_attention_split_floats(int64_t T, int H, int topk, int dv);

}  // namespace memra::cuda
