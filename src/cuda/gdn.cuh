// src/cuda/gdn.cuh — Gated DeltaNet (Qwen3-Next / Qwen3.5 linear attention) on the device.
//
//   conv:   c_t = silu(Σ_j taps[ch, j] * xin[t + j, ch]), xin = [K-1 cached inputs | T new ones];
//           the cache is a ring of K inputs per channel, slot p % K holding the input of position
//           p (the K-1 a token reads are never the slot it writes: a decode step's blocks can read
//           their windows while other blocks of the same grid store theirs).
//   gates:  beta = sigmoid(b), g = ssm_a * softplus(a + dt_bias), decay = exp(g)
//   q, k:   x / sqrt(Σx² + 1e-6) per key head; q additionally * 1/sqrt(d_k);
//           value head h reads key head  tiled ? h % n_k : h / (n_v/n_k)   (raw_weights.h)
//   state S [d_k, d_v] per value head, f32 (the oracle keeps f64):
//           S <- decay S;  u = beta (v - Sᵀk);  S <- S + k uᵀ;  o = Sᵀ q
// Prefill runs either the same recurrence token by token (Arms::gdn_prefill = recurrent) or the
// chunked WY form over 64-token chunks (chunked), which leaves the same final state up to
// f32 rounding (gdn_chunked_run). Decode steps are always recurrent.
//
// provides: GdnSeq, GdnConvParams, gdn_conv_run, GdnParams, gdn_recurrent_run, gdn_chunked_run, GdnOutNorm,
//           gdn_step_norm_run, gdn_chunked_workspace_floats, KdaParams, kda_recurrent_run, kda_chunked_run
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/dmat.h"

namespace memra::cuda {

// Shape bounds of the GDN kernels, checked by Model::load (check_kernel_limits): the conv kernel
// size (its taps live in registers) and d_k, d_v (a block of kGdnMaxHeadDim threads walks a
// head; the chunked form also needs multiples of 4, checked when that arm runs).
inline constexpr int kGdnMaxConvKernel = 8;
inline constexpr int kGdnMaxHeadDim = 128;

// One sequence of a batched decode step (gdn_step_norm_run and gdn_recurrent_run with
// GdnParams::seqs, gdn_conv_run and kda_recurrent_run with their seqs): its state, conv ring and
// position; its rows are row `sequence` of every [T, ...] operand.
struct GdnSeq {
  float* state = nullptr;         // [nv, dk, dv]
  float* ring = nullptr;          // [K, cd]
  const int64_t* pos0 = nullptr;  // device
};

struct GdnConvParams {
  const float* x = nullptr;       // [T, cd] projections (wqkv x)
  const float* taps = nullptr;    // [cd, K]
  float* state = nullptr;         // [K, cd] ring in/out: slot p % K = the input of position p
  const int64_t* pos0 = nullptr;  // device: the position of token 0 (a cache's pos_dev)
  float* y = nullptr;             // [T, cd] silu(conv)
  int64_t T = 0, cd = 0;
  int K = 0;
  // n_seq sequences of one decode token each (T == 1) in one launch: sequence i reads seqs[i]
  // (device) for its ring and position (state and pos0 unused) and row i of x and y, each
  // exactly as its own launch would compute it.
  const GdnSeq* seqs = nullptr;
  int n_seq = 1;
};
void gdn_conv_run(const GdnConvParams& p, cudaStream_t s);

struct GdnParams {
  const float* qkv = nullptr;   // [T, 2*nk*dk + nv*dv] conv output
  const float* b = nullptr;     // [T, nv] beta logits
  const float* a = nullptr;     // [T, nv] decay input
  const float* ssm_a = nullptr; // [nv]
  const float* dt_bias = nullptr;
  float* state = nullptr;       // [nv, dk, dv] in/out
  float* o = nullptr;           // [T, nv*dv]
  int64_t T = 0;
  int nk = 0, nv = 0, dk = 0, dv = 0;
  bool tiled = false;
  // n_seq sequences of one decode token each (T == 1) in one launch, sequence i reading seqs[i]
  // (device) for its state (gdn_step_norm_run: and its ring and position; state, conv.state and
  // conv.pos0 unused) and row i of qkv, b, a, o (z, y and q), each exactly as its own launch.
  const GdnSeq* seqs = nullptr;
  int n_seq = 1;
};
void gdn_recurrent_run(const GdnParams& p, cudaStream_t s);

// The decode token's conv, recurrence and gated output norm in one launch:
//   y[h, j] = w[j] * o[h, j] * rsqrt(mean_j(o[h, :]²) + eps) * silu(z[h, j])  (norm.cuh RmsNormGated)
// with o the recurrence's output (not stored), y in f32 and, when q is set, as q8_1 blocks
// (d_v % 32 == 0). With conv set (its T == 1, y == p.qkv) each block takes the conv of the
// channels it reads itself (K = 4; other K: gdn_conv_run first) and conv.y is not written; the
// ring and everything else bitwise as gdn_conv_run, gdn_recurrent_run, then
// rowop_run(RmsNormGated). False (nothing launched) when T != 1 or the head shape has no kernel
// (d_k x d_v: 128 x 128, 8 x 16). With p.seqs: n_seq sequences, each exactly as its own launch
// would compute it (the conv fused, K = 4, required).
struct GdnOutNorm {
  const float* z = nullptr;  // [nv * dv]
  const float* w = nullptr;  // [dv]
  float eps = 0;
  float* y = nullptr;        // [nv * dv]
  Q81* q = nullptr;          // [nv * dv / 32] or nullptr
};
bool gdn_step_norm_run(const GdnParams& p, const GdnOutNorm& n, cudaStream_t s, const GdnConvParams* conv = nullptr);

// Kimi delta attention (GLM-5's hybrid; the oracle's ops::kda), T tokens in order over one
// sequence's state: q, k, v of H heads of d each ([q | k | v] rows after gdn_conv_run); the
// decay per key channel g = bound * sigmoid(exp(a_log) (f + dt_bias)) (bound 0: -exp(a_log)
// softplus(f + dt_bias)), beta = sigmoid(b); GDN's recurrence otherwise (q, k unit-normed, q by
// 1/sqrt(d)), state row i decaying by exp(g[i]). The output norm gated by sigmoid is a row op
// (RowOp::RmsNormGatedSigmoid). d <= kGdnMaxHeadDim (a block walks a head; its state in shared
// memory). A one-token call of d in {8, 16, 32, 64, 128} runs GDN's decode step kernel (a block per
// head and 32 state columns) with the same bits.
struct KdaParams {
  const float* qkv = nullptr;      // [T, 3*H*d] conv output
  const float* f = nullptr;        // [T, H*d]   forget-gate input f_b f_a x
  const float* b = nullptr;        // [T, H]     beta logits
  const float* dt_bias = nullptr;  // [H*d]
  const float* a_log = nullptr;    // [H]
  float bound = 0;                 // the safe gate's lower bound (< 0), or 0
  float* state = nullptr;          // [H, d, d] in/out
  float* o = nullptr;              // [T, H*d]
  int64_t T = 0;
  int H = 0, d = 0;
  // kda_recurrent_run only: n_seq sequences of one decode token each (T == 1) in one launch,
  // sequence i reading seqs[i].state (device; state unused) and row i of qkv, f, b and o, its
  // blocks computing what its own launch would (the batch-invariance law).
  const GdnSeq* seqs = nullptr;
  int n_seq = 1;
};
void kda_recurrent_run(const KdaParams& p, cudaStream_t s);

// Prefill in the chunked (WY) form, 64-token chunks: per segment of up to 1024 tokens, one launch
// for every chunk's S-independent part (into the workspace) and one walking the chunks in order, a
// block per (32 state columns, value head). d_k, d_v: multiples of 4, at most 128. The workspace
// (floats, device) holds a segment: gdn_chunked_workspace_floats(T, nv, dk, dv) or more.
int64_t gdn_chunked_workspace_floats(int64_t T, int nv, int dk, int dv);
void gdn_chunked_run(const GdnParams& p, float* work, int64_t work_floats, cudaStream_t s);
// KDA's prefill in the same chunked form (the oracle's kda_delta_rule_chunked, in f32): every decay
// per key channel, inside the chunk's dot products pair by pair. d: a multiple of 4, at most 128;
// the workspace: gdn_chunked_workspace_floats(T, H, d, d) or more. Its own order, held to the
// recurrent form by the op test and the model gates (ChunkedGdn, ArgmaxMargin's chunked arm).
void kda_chunked_run(const KdaParams& p, float* work, int64_t work_floats, cudaStream_t s);

}  // namespace memra::cuda
