// src/cuda/argmax.cuh — greedy token on the device: the largest logit, ties to the lowest index
// (the same rule as oracle::top_k and host sampling). A NaN or infinite logit anywhere makes
// the token -1 instead: the host turns that into an error naming the step, as decode_step's
// logits check does (a model that produced NaN has no greedy token).
//
// The comparison `argmax_better` is a total order on (value, index) pairs over the non-NaN
// values, so any reduction shape gives the same winner: a full scan of the logits, or the
// per-warp bests that the streamed lm_head mat-vec leaves (mmvq.cuh matvec_run_best) reduced
// here, pick the same token.
//
// provides: RowBest, argmax_better, argmax_run, GreedyStep, argmax_step_run, RowSelect, select_rows_run
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace memra::cuda {

// The best (value, row) one warp saw; i == kNoRow when it saw none (or only NaN). bad: it saw a
// NaN or infinite value.
struct RowBest {
  float v;
  int32_t i;
  int32_t bad;
};
inline constexpr int32_t kNoRow = 0x7fffffff;

__device__ __forceinline__ bool argmax_better(float v, int32_t i, float bv, int32_t bi) {
  return v > bv || (v == bv && i < bi);
}

// out[0] = argmax(x[0..n)), or -1 when some x is NaN or infinite.
void argmax_run(const float* x, int64_t n, int32_t* out, cudaStream_t s);

// The end of a greedy decode step, in one launch: the token (-1: a non-finite logit; then 0 goes
// to next_tok, so that a following step's embedding stays in range), then (each optional)
//   next_tok[0] = token  — the next step's embedding input, so a following step needs no copy
//                          from the host (Model::decode_greedy_n);
//   hist[*pos + advance - 1] = token, *pos += advance — the cache's device position advanced
//                          past the step's `advance` tokens (the non-greedy step's advance_pos
//                          launch) and the token recorded at the position it followed.
// The token is argmax(x[0..n)) when best is nullptr, else the best of best[0..n_best).
struct GreedyStep {
  int32_t* out = nullptr;
  int32_t* next_tok = nullptr;
  int32_t* hist = nullptr;
  int64_t* pos = nullptr;
  int64_t advance = 1;
};
void argmax_step_run(const float* x, int64_t n, const RowBest* best, int n_best, const GreedyStep& o, cudaStream_t s);

// The end of a batched decode step, one block per row r of x (n logits at x + r * n):
//   select: temperature 0 takes argmax (ties to the lowest index), temperature > 0 the Gumbel-max
//           draw of memra/sampling.h (Philox4x32-10 of (seed, counter, i), scores in double,
//           ties to the lowest index); a non-finite logit makes the token -1; out[r] = token, or
//           -1 when the row has no spec;
//   pos:    *pos += 1 (the row's cache position; optional).
// Rows are jobs in device memory (uploaded per step).
struct RowSelect {
  int64_t* pos = nullptr;
  uint64_t seed = 0, counter = 0;
  float temperature = 0;
  int32_t has_spec = 0;
};
void select_rows_run(const float* x, int64_t n, const RowSelect* rows, int n_rows, int32_t* out, cudaStream_t s);

}  // namespace memra::cuda
