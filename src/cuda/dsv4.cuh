// src/cuda/dsv4.cuh — DeepSeek-V4's own kernels (the equations: docs/deepseek-v4.md; the CPU
// contract: src/oracle/dsv4.cpp). The mat-vecs, norms, the indexer's scores and top-k
// (dsa.cuh with a compress ratio) and the MoE's experts and combine (moe.cuh) are the shared
// families; what is DeepSeek-V4's alone is here:
//   hc mix:     per token, the hyper-connection weights from z = fn·(X / rms(X)) — pre, post and
//               the Sinkhorn-normalised comb, in f64 as the oracle computes them (a thread per
//               weight, every row / column sum in index order) — and the
//               collapse c[d] = f32(Σ_n pre[n] X[n][d]) (f64 sum); the final hc_head form takes
//               pre alone (sigmoid(z·scale + base) + eps).
//   hc expand:  X'[k][d] = f32(post[k] y[d] + Σ_j comb[j][k] X[j][d]) (f64, j in order), or the
//               embedding broadcast into every stream.
//   rope:       the interleaved rotation of each head's trailing n_rot dims by pos·inv_freq[i]
//               (a table: plain or YaRN), in f64 rounded once, forward or back; optionally the
//               rotated row stored at its position (the raw key cache).
//   compress:   a compressor's tokens stored at their positions, and every window a token closes
//               pooled (softmax over the slots per channel of gate + ape, f64), RMSNormed (f64)
//               and rotated at the window's first position into its row.
//   attention:  a query head over its sliding window of raw keys plus compressed rows (every
//               visible row, or the indexer's selection), K = V, with a sink logit per head in
//               the softmax's denominator; f32 scores a warp per key (lane-strided fma chains,
//               the butterfly), the max / sum in a fixed order, no atomics.
//   route:      s = sqrt(softplus(logit)) (f64); the top-k of s + bias (ties to the lower expert)
//               or the hash layer's table row; weights s / (Σ s + 1e-20) · scale; ids and
//               weights in the selection ledger's order (highest weight first, ties to the lower
//               expert), which is also the order the combine adds them in.
// Every kernel reads the step's position from the cache's device copy (pos_dev + row0 + t), so a
// captured decode step replays at the cache's current position.
//
// provides: kHcMaxStreams, HcMixParams, hc_mix_run, HcExpandParams, hc_expand_run,
//           Dsv4RopeParams, dsv4_rope_run, Dsv4CompressParams, dsv4_compress_run,
//           Dsv4AttnParams, dsv4_attention_run, Dsv4RouteParams, dsv4_route_run
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace memra::cuda {

// Residual streams a token carries (hc_mult; the mix's N·N comb sits in shared memory).
inline constexpr int kHcMaxStreams = 8;

struct HcMixParams {
  const float* z = nullptr;      // [T, M]: fn · (X / rms(X)); M = (2 + N) N, or N for the head
  const float* base = nullptr;   // [M]
  const float* scale = nullptr;  // [3] (the head: [1])
  const float* X = nullptr;      // [T, N, D] the streams
  double* mix = nullptr;         // [T, M] out: pre N | post N | comb N·N (row-major, source first); may be null
  float* out = nullptr;          // [T, D] out: the collapse
  int64_t T = 0, D = 0;
  int N = 0, iters = 0;
  double eps = 0;     // hc_eps
  bool head = false;  // the final hc_head (pre only)
  bool mean = false;  // with head: GLM-5's hybrid's final collapse, pre = 1/N (z, base, scale unused)
};
void hc_mix_run(const HcMixParams& p, cudaStream_t s);

struct HcExpandParams {
  const double* mix = nullptr;  // [T, (2 + N) N] (hc_mix_run's); null: X[t][n] = y[t] for every n
  const float* y = nullptr;     // [T, D] the block's output (or the embedding)
  float* X = nullptr;           // [T, N, D] in place
  int64_t T = 0, D = 0;
  int N = 0;
};
void hc_expand_run(const HcExpandParams& p, cudaStream_t s);

struct Dsv4RopeParams {
  float* x = nullptr;  // [T, heads, width]: each head's last n_rot dims rotated in place
  int64_t T = 0;
  int heads = 0, width = 0, n_rot = 0;
  const double* inv_freq = nullptr;  // [n_rot / 2] device
  const int64_t* pos_dev = nullptr;  // row t sits at *pos_dev + row0 + t
  int64_t row0 = 0;
  bool inverse = false;    // rotate back (the attention output)
  float* store = nullptr;  // [positions, width] (heads == 1): the rotated row also here
};
void dsv4_rope_run(const Dsv4RopeParams& p, cudaStream_t s);

struct Dsv4CompressParams {
  const float* kv = nullptr;    // [T, cw] this call's projections (cw = 2w with overlap, else w)
  const float* gate = nullptr;  // [T, cw] (without the position bias)
  float* hist_kv = nullptr;     // [positions, cw]: every token's, stored at its position here
  float* hist_gate = nullptr;
  const float* ape = nullptr;        // [m, cw]
  const float* norm = nullptr;       // [w]
  float* rows = nullptr;             // [positions / m, w] out: the rows this call's tokens close
  const double* inv_freq = nullptr;  // [n_rot / 2] (the compressed layers' table)
  int n_rot = 0;
  const int64_t* pos_dev = nullptr;
  int64_t row0 = 0;
  int64_t T = 0;
  int m = 0, w = 0;
  bool overlap = false;  // CSA: the previous window's first halves, then this window's second halves
  double eps = 0;
};
void dsv4_compress_run(const Dsv4CompressParams& p, cudaStream_t s);

struct Dsv4AttnParams {
  const float* q = nullptr;        // [T, H, hd] normed and rotated queries
  const float* k_cache = nullptr;  // [positions, hd] raw keys (= values)
  const float* rows = nullptr;     // [.., hd] compressed rows; null: a sliding layer
  const int32_t* sel = nullptr;    // [T, topk] the indexer's rows (CSA); null: every visible row (HCA)
  const int32_t* n_sel = nullptr;  // [T]
  int topk = 0;
  const float* sinks = nullptr;  // [H]
  float* out = nullptr;          // [T, H, hd]
  const int64_t* pos_dev = nullptr;
  int64_t row0 = 0, T = 0;
  int H = 0, hd = 0, window = 0, ratio = 0;
  int max_keys = 0;  // window + the most compressed rows a query of this call reads (sizes shared memory)
  float scale = 0;   // f32(1 / sqrt(hd))
};
void dsv4_attention_run(const Dsv4AttnParams& p, cudaStream_t s);

struct Dsv4RouteParams {
  const float* logits = nullptr;    // [T, E]
  const float* bias = nullptr;      // [E] score layers' selection bias; null with tid2eid
  const float* tid2eid = nullptr;   // [V, k] a hash layer's table (integers in f32); null: score routing
  const int32_t* tokens = nullptr;  // [T] the step's tokens (hash layers)
  int32_t* ids = nullptr;           // [T, k] out, highest weight first
  float* weights = nullptr;         // [T, k] out
  int64_t T = 0;
  int E = 0, k = 0;
  double scale = 1;  // routed_scaling_factor
};
void dsv4_route_run(const Dsv4RouteParams& p, cudaStream_t s);

}  // namespace memra::cuda
