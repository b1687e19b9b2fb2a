// src/cuda/attention.cu — split-KV attention + combine (see attention.cuh).
// v1: attn_split_kernel grid (splits, H, T), 128 threads: a warp per key for the scores (lanes
//     over head dims, butterfly), block max / fixed-order sum, then a thread per output dim
//     accumulating keys in index order. attn_combine_kernel grid (H, T).
#include "cuda/attention.cuh"
#include "cuda/common.cuh"
#include "cuda/launch.cuh"

namespace memra::cuda {

namespace {

constexpr int kThreads = 128;

int64_t n_splits(int64_t n_ctx) { return ceil_div(n_ctx, kAttnSplit); }
__device__ __forceinline__ int64_t n_splits_dev(int64_t n_ctx) { return (n_ctx + kAttnSplit - 1) / kAttnSplit; }

// --- kernels

__global__ void __launch_bounds__(kThreads) attn_split_kernel(AttnParams p, int64_t max_splits) {
  pdl_wait();
  pdl_release();
  __shared__ float qs[256];
  __shared__ float sc[kAttnSplit];
  __shared__ float red[kThreads / 32];
  const int s = blockIdx.x, h = blockIdx.y;
  const int64_t t = blockIdx.z;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int hd = p.hd, kvd = p.KV * hd, kvh = h / (p.H / p.KV);
  const int64_t n = *p.pos0 + t + 1;
  const int64_t k0 = static_cast<int64_t>(s) * kAttnSplit;
  if (k0 >= n) return;
  const int nk = static_cast<int>(n - k0 < kAttnSplit ? n - k0 : kAttnSplit);
  for (int d = tid; d < hd; d += kThreads) qs[d] = p.q[t * p.H * hd + h * hd + d];
  __syncthreads();
  for (int j = warp; j < nk; j += kThreads / 32) {
    const float* kr = p.k_cache + (k0 + j) * kvd + kvh * hd;
    float acc = 0.0f;
    for (int d = lane; d < hd; d += 32) acc = fmaf(qs[d], kr[d], acc);
    acc = warp_sum_xor(acc);
    if (lane == 0) sc[j] = __fmul_rn(acc, p.scale);
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
  for (int d = tid; d < hd; d += kThreads) {
    float acc = 0.0f;
    for (int j = 0; j < nk; ++j) acc = fmaf(sc[j], p.v_cache[(k0 + j) * kvd + kvh * hd + d], acc);
    out[2 + d] = acc;
  }
}

__global__ void attn_combine_kernel(AttnParams p, int64_t max_splits) {
  pdl_wait();
  pdl_release();
  const int h = blockIdx.x;
  const int64_t t = blockIdx.y;
  const int hd = p.hd;
  const int64_t ns = n_splits_dev(*p.pos0 + t + 1);
  const float* w = p.work + (t * p.H + h) * max_splits * (hd + 2);
  float M = -INFINITY;
  for (int64_t s = 0; s < ns; ++s) M = fmaxf(M, w[s * (hd + 2)]);
  for (int d = threadIdx.x; d < hd; d += blockDim.x) {
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
    p.out[t * p.H * hd + h * hd + d] = o;
  }
}

}  // namespace

int64_t attention_workspace_floats(int64_t T, int64_t n_ctx, int H, int hd) {
  return T * H * n_splits(n_ctx) * (hd + 2);
}

// --- launchers / dispatch

void attention_run(const AttnParams& p, cudaStream_t s) {
  if (p.T == 0) return;
  if (p.hd > 256 || p.H % p.KV) fail("attention: head_dim ", p.hd, " (<= 256) / H ", p.H, " KV ", p.KV, " unsupported");
  const int64_t ms = n_splits(p.ctx_bound);
  const dim3 g1(static_cast<unsigned>(ms), static_cast<unsigned>(p.H), static_cast<unsigned>(p.T));
  launch_kernel("attn_split_kernel", attn_split_kernel, g1, kThreads, 0, s, p, ms);
  const dim3 g2(static_cast<unsigned>(p.H), static_cast<unsigned>(p.T));
  launch_kernel("attn_combine_kernel", attn_combine_kernel, g2, 128, 0, s, p, ms);
}

}  // namespace memra::cuda
