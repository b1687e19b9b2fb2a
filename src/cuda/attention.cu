// src/cuda/attention.cu — split-KV attention + combine (see attention.cuh).
// v1: attn_split_kernel grid (splits, H, T), 128 threads: a warp per key for the scores (lanes
//     over head dims, butterfly), block max / fixed-order sum, then a thread per output dim
//     accumulating keys in index order. attn_combine_kernel grid (H, T).
// v3 (same bits): K and V of the split prefetched into L2 before the dependency wait; the value
//     pass's first batch loaded before the score pass.
// v2 (same bits): the combine quantises its output for the next mat-vec (out_q); the loads of several keys in flight before their arithmetic, in both passes.
//     v1 waited a memory latency per key: an in-graph timeline (cuda/timeline.h) of a 9B decode
//     step put the split kernel at 13.9 us for ~30 keys, the slowest launch of the step.
// Tried and dropped (bit-identical, op- and gate-tested on the H200, slower): the decode
//     token's combine done by each head's last split block (an arrival counter per head) instead
//     of the combine launch: 9B NVFP4 graph decode 1884 vs 1879 us, 0.6B 831 vs 817 (docs/PERF.md,
//     session 7). The decode token's q / k norm + RoPE and K / V store done by the split blocks
//     instead of the qk_prep launch (branch attn-prep): 9B NVFP4 1866 vs 1854 us, 0.6B 854 vs 808
//     (session 8: every block redoes the f64 rotation on the critical path).
#include "cuda/attention.cuh"
#include "cuda/common.cuh"
#include "cuda/launch.cuh"

namespace memra::cuda {

namespace {

constexpr int kThreads = 128;
constexpr int kMaxHd = 256;        // head_dim bound (checked by attention_run)
// Keys in flight: kKeysPerWarp per warp in the score pass, kVBatch per thread in the value pass.
// Decode (one query) takes wide batches, and the value pass's first batch before the score pass;
// prefill (a block per query, many resident per SM) narrow ones: at decode's 127 registers a
// 512-token 0.6B prefill ran 16.5k instead of 20.2k tokens/s. Same operations either way.

int64_t n_splits(int64_t n_ctx) { return ceil_div(n_ctx, kAttnSplit); }
__device__ __forceinline__ int64_t n_splits_dev(int64_t n_ctx) { return (n_ctx + kAttnSplit - 1) / kAttnSplit; }

// --- kernels

template <int kKeysPerWarp, int kVBatch, bool kDecode>
__global__ void __launch_bounds__(kThreads) attn_split_kernel(AttnParams p, int64_t max_splits) {
  __shared__ float qs[kMaxHd];
  __shared__ float sc[kAttnSplit];
  __shared__ float red[kThreads / 32];
  const int s = blockIdx.x, h = blockIdx.y;
  const int64_t t = blockIdx.z;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int hd = p.hd, kvd = p.KV * hd, kvh = h / (p.H / p.KV);
  const int64_t k0 = static_cast<int64_t>(s) * kAttnSplit;
  // v3: the split's K and V rows asked into L2 while the previous kernel drains (the cache is
  // evicted by every step's weight stream: the key and value passes then waited on HBM). Decode
  // only: in a 512-token prefill every (query, head) block prefetching its split measured the
  // 0.6B prefill at 16.1k instead of 20.2k tokens/s. Only a
  // hint: the range comes from pos0 read before the wait (written long before this kernel, and
  // a stale value would only move the prefetch), and the rows the previous kernel is writing
  // (this token's K / V) are read after the wait as always; L2 is coherent.
  if constexpr (kDecode) {  // in a prefill the keys are mostly this call's, written just before
    const int64_t n_hint = *p.pos0 + t + 1;
    const int nk_hint = static_cast<int>(n_hint - k0 < kAttnSplit ? n_hint - k0 : kAttnSplit);
    const int lines = (hd * 4 + 127) / 128;  // 128-byte lines per key row of one kv head
    for (int idx = tid; idx < 2 * nk_hint * lines; idx += kThreads) {
      const int kv = idx / (nk_hint * lines), rem = idx % (nk_hint * lines), j = rem / lines, c = rem % lines;
      const float* base = (kv ? p.v_cache : p.k_cache) + (k0 + j) * kvd + kvh * hd;
      asm volatile("prefetch.global.L2 [%0];" ::"l"(reinterpret_cast<const char*>(base) + 128 * c));
    }
  }
  pdl_wait();
  pdl_release();
  const int64_t n = *p.pos0 + t + 1;
  if (k0 >= n) return;
  const int nk = static_cast<int>(n - k0 < kAttnSplit ? n - k0 : kAttnSplit);
  for (int d = tid; d < hd; d += kThreads) qs[d] = p.q[t * p.H * hd + h * hd + d];
  __syncthreads();
  // v2: a warp takes kKeysPerWarp keys at a time and issues all their loads (up to 8 x 8 per
  // lane) before the first fma; each key's chain (lanes over dims in order, then the butterfly)
  // is v1's.
  const float* kbase = p.k_cache + k0 * kvd + kvh * hd;
  // v3: the value pass's first batch loaded now, its round trip under the score pass's
  constexpr int kDims = kMaxHd / kThreads;
  const float* vbase = p.v_cache + k0 * kvd + kvh * hd;
  float vv0[kVBatch][kDims];
#pragma unroll
  for (int u = 0; u < kVBatch; ++u)
#pragma unroll
    for (int c = 0; c < kDims; ++c) {
      const int d = tid + c * kThreads;
      vv0[u][c] = kDecode && u < nk && d < hd ? vbase[u * kvd + d] : 0.0f;
    }
  for (int jb = warp * kKeysPerWarp; jb < nk; jb += kThreads / 32 * kKeysPerWarp) {
    float kv[kKeysPerWarp][kMaxHd / 32];
#pragma unroll
    for (int u = 0; u < kKeysPerWarp; ++u)
#pragma unroll
      for (int i = 0; i < kMaxHd / 32; ++i) {
        const int d = lane + 32 * i;
        kv[u][i] = jb + u < nk && d < hd ? kbase[(jb + u) * kvd + d] : 0.0f;
      }
#pragma unroll
    for (int u = 0; u < kKeysPerWarp; ++u) {
      float acc = 0.0f;
#pragma unroll
      for (int i = 0; i < kMaxHd / 32; ++i)
        if (lane + 32 * i < hd) acc = fmaf(qs[lane + 32 * i], kv[u][i], acc);
      acc = warp_sum_xor(acc);
      if (lane == 0 && jb + u < nk) sc[jb + u] = __fmul_rn(acc, p.scale);
    }
  }
  __syncthreads();
  float m = -INFINITY;
  for (int j = tid; j < nk; j += kThreads) m = fmaxf(m, sc[j]);
  m = warp_max(m);
  if (lane == 0) red[warp] = m;
  __syncthreads();
  m = red[0];
  for (int w = 1; w < kThreads / 32; ++w) m = fmaxf(m, red[w]);
  __syncthreads();
  float l = 0.0f;
  for (int j = tid; j < nk; j += kThreads) {
    const float e = expf(sc[j] - m);
    sc[j] = e;
    l = __fadd_rn(l, e);
  }
  l = warp_sum_xor(l);
  if (lane == 0) red[warp] = l;
  __syncthreads();
  float* out = p.work + ((t * p.H + h) * max_splits + s) * (hd + 2);
  if (tid == 0) {
    float tot = 0.0f;
    for (int w = 0; w < kThreads / 32; ++w) tot = __fadd_rn(tot, red[w]);
    out[0] = m;
    out[1] = tot;
  }
  // v2: a thread's (at most kMaxHd / kThreads) output dims together, keys kVBatch at a time with
  // every load issued before the batch's fmas (v1 waited a memory latency per key); each dim's
  // chain over the keys in index order is v1's.
  float acc[kDims];
#pragma unroll
  for (int c = 0; c < kDims; ++c) acc[c] = 0.0f;
  int j = 0;
  for (; j + kVBatch <= nk; j += kVBatch) {
    float vv[kVBatch][kDims];
#pragma unroll
    for (int u = 0; u < kVBatch; ++u)
#pragma unroll
      for (int c = 0; c < kDims; ++c) {
        const int d = tid + c * kThreads;
        vv[u][c] = kDecode && j == 0 ? vv0[u][c] : d < hd ? vbase[(j + u) * kvd + d] : 0.0f;
      }
#pragma unroll
    for (int u = 0; u < kVBatch; ++u)
#pragma unroll
      for (int c = 0; c < kDims; ++c) acc[c] = fmaf(sc[j + u], vv[u][c], acc[c]);
  }
  if (kDecode && j == 0) {  // fewer than kVBatch keys: all of them are in vv0
#pragma unroll
    for (int u = 0; u < kVBatch; ++u)
#pragma unroll
      for (int c = 0; c < kDims; ++c)
        if (u < nk) acc[c] = fmaf(sc[u], vv0[u][c], acc[c]);
    j = nk;
  }
  for (; j < nk; ++j)
#pragma unroll
    for (int c = 0; c < kDims; ++c) {
      const int d = tid + c * kThreads;
      acc[c] = fmaf(sc[j], d < hd ? vbase[j * kvd + d] : 0.0f, acc[c]);
    }
#pragma unroll
  for (int c = 0; c < kDims; ++c) {
    const int d = tid + c * kThreads;
    if (d < hd) out[2 + d] = acc[c];
  }
}

__global__ void __launch_bounds__(kThreads) attn_combine_kernel(AttnParams p, int64_t max_splits) {
  pdl_wait();
  pdl_release();
  const int h = blockIdx.x;
  const int64_t t = blockIdx.y;
  const int hd = p.hd, lane = threadIdx.x & 31;
  const int64_t ns = n_splits_dev(*p.pos0 + t + 1);
  const float* w = p.work + (t * p.H + h) * max_splits * (hd + 2);
  float M = -INFINITY;
  for (int64_t s = 0; s < ns; ++s) M = fmaxf(M, w[s * (hd + 2)]);
  for (int d0 = 0; d0 < hd; d0 += kThreads) {  // warp-uniform bounds when hd % 32 == 0
    const int d = d0 + static_cast<int>(threadIdx.x);
    if (d >= hd) break;
    float num = 0.0f, den = 0.0f;
    for (int64_t s = 0; s < ns; ++s) {
      const float* ws = w + s * (hd + 2);
      const float f = expf(ws[0] - M);
      num = fmaf(f, ws[2 + d], num);
      den = fmaf(f, ws[1], den);
    }
    float o = __fdiv_rn(num, den);
    if (p.gate) {
      const float g = p.gate[t * p.H * hd + h * hd + d];
      o = __fmul_rn(o, __fdiv_rn(1.0f, __fadd_rn(1.0f, expf(-g))));
    }
    const int64_t i = t * p.H * hd + h * hd + d;
    p.out[i] = o;
    // v2: lanes of a warp hold 32 consecutive dims of the head, one q8_1 block
    if (p.out_q) quantize_block_q8_1(o, p.out_q + i / 32, lane);
  }
}

}  // namespace

int64_t attention_workspace_floats(int64_t T, int64_t n_ctx, int H, int hd) {
  return T * H * n_splits(n_ctx) * (hd + 2);
}

// --- launchers / dispatch

void attention_run(const AttnParams& p, cudaStream_t s) {
  if (p.T == 0) return;
  if (p.out_q && p.hd % 32 != 0) fail("attention: q8_1 output needs head_dim % 32 == 0, head_dim = ", p.hd);
  if (p.hd > kMaxHd || p.H % p.KV) fail("attention: head_dim ", p.hd, " (<= 256) / H ", p.H, " KV ", p.KV, " unsupported");
  const int64_t ms = n_splits(p.ctx_bound);
  const dim3 g1(static_cast<unsigned>(ms), static_cast<unsigned>(p.H), static_cast<unsigned>(p.T));
  if (p.T == 1) launch_kernel("attn_split_kernel", attn_split_kernel<8, 16, true>, g1, kThreads, 0, s, p, ms);
  else launch_kernel("attn_split_kernel", attn_split_kernel<2, 4, false>, g1, kThreads, 0, s, p, ms);
  const dim3 g2(static_cast<unsigned>(p.H), static_cast<unsigned>(p.T));
  launch_kernel("attn_combine_kernel", attn_combine_kernel, g2, kThreads, 0, s, p, ms);
}

}  // namespace memra::cuda
