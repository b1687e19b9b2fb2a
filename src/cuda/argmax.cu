// src/cuda/argmax.cu — one block of 1024 threads: strided per-thread best, then a tree over
// (value, index) pairs; the comparison (greater value, or equal value and lower index) is a
// total order, so the result does not depend on the reduction shape. Over a 248k vocabulary the
// full scan is one SM pulling 1 MB from L2 (ncu: 18 us per step); the greedy step reduces the
// lm_head launch's per-warp bests instead (a few thousand pairs).
#include "cuda/argmax.cuh"
#include "cuda/common.cuh"
#include "cuda/launch.cuh"

namespace memra::cuda {

namespace {

constexpr int kThreads = 1024;

// The block's best of its threads' (bv, bi), valid in thread 0.
__device__ RowBest block_best(float bv, int32_t bi) {
  __shared__ float sv[kThreads / 32];
  __shared__ int32_t si[kThreads / 32];
  for (int off = 16; off > 0; off >>= 1) {
    const float ov = __shfl_xor_sync(0xffffffffu, bv, off);
    const int32_t oi = __shfl_xor_sync(0xffffffffu, bi, off);
    if (argmax_better(ov, oi, bv, bi)) { bv = ov; bi = oi; }
  }
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) { sv[warp] = bv; si[warp] = bi; }
  __syncthreads();
  if (threadIdx.x == 0)
    for (int w = 1; w < kThreads / 32; ++w)
      if (argmax_better(sv[w], si[w], bv, bi)) { bv = sv[w]; bi = si[w]; }
  return {bv, bi, 0};
}

// --- kernels

__global__ void __launch_bounds__(kThreads)
    argmax_step_kernel(const float* x, int64_t n, const RowBest* best, int n_best, GreedyStep o) {
  pdl_wait();
  pdl_release();
  float bv = -INFINITY;
  int32_t bi = kNoRow;
  int bad = 0;
  if (best) {
    for (int k = threadIdx.x; k < n_best; k += kThreads) {
      bad |= best[k].bad;
      if (argmax_better(best[k].v, best[k].i, bv, bi)) { bv = best[k].v; bi = best[k].i; }
    }
  } else {
    for (int64_t i = threadIdx.x; i < n; i += kThreads) {
      bad |= !isfinite(x[i]);
      if (argmax_better(x[i], static_cast<int32_t>(i), bv, bi)) { bv = x[i]; bi = static_cast<int32_t>(i); }
    }
  }
  bad = __syncthreads_or(bad);
  const RowBest b = block_best(bv, bi);
  if (threadIdx.x == 0) {
    const int32_t t = bad ? -1 : b.i == kNoRow ? 0 : b.i;
    o.out[0] = t;
    if (o.next_tok) o.next_tok[0] = t < 0 ? 0 : t;
    if (o.pos) {
      const int64_t p = *o.pos + o.advance;
      if (o.hist) o.hist[p - 1] = t;
      *o.pos = p;
    }
  }
}

// memra/sampling.h's philox4x32_10 and philox_uniform, on the device: the same integers, the
// same u (uniform_from_53_bits: the same double rounding, the same cap below 1).
__device__ double philox_uniform_dev(uint64_t seed, uint64_t counter, uint64_t index) {
  constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u, kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
  uint32_t c0 = static_cast<uint32_t>(index), c1 = static_cast<uint32_t>(index >> 32);
  uint32_t c2 = static_cast<uint32_t>(counter), c3 = static_cast<uint32_t>(counter >> 32);
  uint32_t k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
#pragma unroll
  for (int r = 0; r < 10; ++r) {
    const uint32_t hi0 = __umulhi(kM0, c0), lo0 = kM0 * c0, hi1 = __umulhi(kM1, c2), lo1 = kM1 * c2;
    const uint32_t n0 = hi1 ^ c1 ^ k0, n2 = hi0 ^ c3 ^ k1;
    c0 = n0;
    c1 = lo1;
    c2 = n2;
    c3 = lo0;
    k0 += kW0;
    k1 += kW1;
  }
  const uint64_t bits = (static_cast<uint64_t>(c0) << 21) ^ (c1 >> 11);
  const double u = (static_cast<double>(bits) + 0.5) * 0x1p-53;
  return u < 1.0 ? u : 0x1.fffffffffffffp-1;
}

// Block r: row r. Greedy compares the f32 logits (argmax_better, block_best); sampling compares
// double scores with the same total order (greater, then lower index), reduced the same way.
__global__ void __launch_bounds__(kThreads)
    select_rows_kernel(const float* x, int64_t n, const RowSelect* rows, int32_t* out) {
  pdl_wait();
  pdl_release();
  const RowSelect job = rows[blockIdx.x];
  const float* row = x + static_cast<int64_t>(blockIdx.x) * n;
  if (job.has_spec) {
    int bad = 0;
    int32_t bi = kNoRow;
    if (job.temperature == 0.0f) {
      float bv = -INFINITY;
      for (int64_t i = threadIdx.x; i < n; i += kThreads) {
        bad |= !isfinite(row[i]);
        if (argmax_better(row[i], static_cast<int32_t>(i), bv, bi)) { bv = row[i]; bi = static_cast<int32_t>(i); }
      }
      bad = __syncthreads_or(bad);
      bi = block_best(bv, bi).i;
    } else {
      const double inv_t = 1.0 / static_cast<double>(job.temperature);
      double bv = -INFINITY;
      for (int64_t i = threadIdx.x; i < n; i += kThreads) {
        bad |= !isfinite(row[i]);
        const double u = philox_uniform_dev(job.seed, job.counter, static_cast<uint64_t>(i));
        const double score = static_cast<double>(row[i]) * inv_t - log(-log(u));
        if (score > bv || (score == bv && i < bi)) { bv = score; bi = static_cast<int32_t>(i); }
      }
      bad = __syncthreads_or(bad);
      // the block's best (score, index), the same total order as argmax_better
      __shared__ double sv[kThreads / 32];
      __shared__ int32_t si[kThreads / 32];
      for (int off = 16; off > 0; off >>= 1) {
        const double ov = __shfl_xor_sync(0xffffffffu, bv, off);
        const int32_t oi = __shfl_xor_sync(0xffffffffu, bi, off);
        if (ov > bv || (ov == bv && oi < bi)) { bv = ov; bi = oi; }
      }
      const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
      if (lane == 0) { sv[warp] = bv; si[warp] = bi; }
      __syncthreads();
      if (threadIdx.x == 0)
        for (int w = 1; w < kThreads / 32; ++w)
          if (sv[w] > bv || (sv[w] == bv && si[w] < bi)) { bv = sv[w]; bi = si[w]; }
    }
    if (threadIdx.x == 0) out[blockIdx.x] = bad || bi == kNoRow ? -1 : bi;
  } else if (threadIdx.x == 0) {
    out[blockIdx.x] = -1;
  }
  if (threadIdx.x == 0 && job.pos) *job.pos += 1;
}

}  // namespace

// --- launchers / dispatch

void argmax_run(const float* x, int64_t n, int32_t* out, cudaStream_t s) {
  GreedyStep o;
  o.out = out;
  argmax_step_run(x, n, nullptr, 0, o, s);
}

void argmax_step_run(const float* x, int64_t n, const RowBest* best, int n_best, const GreedyStep& o, cudaStream_t s) {
  launch_kernel("argmax_step_kernel", argmax_step_kernel, 1, kThreads, 0, s, x, n, best, n_best, o);
}

}  // namespace memra::cuda

namespace memra::cuda {
void select_rows_run(const float* x, int64_t n, const RowSelect* rows, int n_rows, int32_t* out, cudaStream_t s) {
  if (n_rows < 1) return;
  launch_kernel("select_rows_kernel", select_rows_kernel, static_cast<unsigned>(n_rows), kThreads, 0, s, x, n, rows, out);
}
}  // namespace memra::cuda
