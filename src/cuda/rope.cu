// src/cuda/rope.cu — q/k norm + partial NEOX RoPE + K/V store (see rope.cuh).
// v1: grid (T, H + 2*KV): blocks [0, H) queries, [H, H+KV) keys, [H+KV, H+2KV) values (copy).
#include "cuda/common.cuh"
#include "cuda/rope.cuh"
#include "cuda/launch.cuh"

namespace memra::cuda {

namespace {

constexpr int kThreads = 256;  // >= head_dim (checked)

// --- kernels

__global__ void __launch_bounds__(kThreads) qk_prep_kernel(QkPrepParams p) {
  pdl_wait();
  pdl_release();
  __shared__ float h[kThreads];
  __shared__ float part[kThreads / 32];
  const int64_t t = blockIdx.x;
  const int hb = blockIdx.y, tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int hd = p.hd, kvd = p.KV * hd;
  const int64_t pos = *p.pos0 + t;
  if (hb >= p.H + p.KV) {  // V: straight copy into the cache
    const int kvh = hb - p.H - p.KV;
    if (tid < hd) p.v_cache[pos * kvd + kvh * hd + tid] = p.v[t * kvd + kvh * hd + tid];
    return;
  }
  const bool is_q = hb < p.H;
  const float* src = is_q ? p.q + t * p.H * hd + hb * hd : p.k + t * kvd + (hb - p.H) * hd;
  const float* w = is_q ? p.q_norm : p.k_norm;
  const float x = tid < hd ? src[tid] : 0.0f;
  float ss = warp_sum_xor(__fmul_rn(x, x));
  if (lane == 0) part[warp] = ss;
  __syncthreads();
  float tot = 0.0f;
  for (int i = 0; i < kThreads / 32; ++i) tot = __fadd_rn(tot, part[i]);
  const float r = rsqrtf(__fadd_rn(__fdiv_rn(tot, static_cast<float>(hd)), p.eps));
  if (tid < hd) h[tid] = __fmul_rn(__fmul_rn(x, r), w[tid]);
  __syncthreads();
  float y = tid < hd ? h[tid] : 0.0f;
  const int half = p.n_rot / 2;
  if (tid < p.n_rot) {
    const int i = tid < half ? tid : tid - half;
    const double inv_freq = pow(p.theta, -2.0 * i / static_cast<double>(p.n_rot));
    double sn, cs;
    sincos(static_cast<double>(pos) * inv_freq, &sn, &cs);
    const double a = h[i], b = h[i + half];
    y = tid < half ? static_cast<float>(a * cs - b * sn) : static_cast<float>(b * cs + a * sn);
  }
  if (tid < hd) {
    if (is_q) p.q[t * p.H * hd + hb * hd + tid] = y;
    else p.k_cache[pos * kvd + (hb - p.H) * hd + tid] = y;
  }
}

}  // namespace

// --- launchers / dispatch

void qk_prep_run(const QkPrepParams& p, cudaStream_t s) {
  if (p.T == 0) return;
  if (p.hd > kThreads || p.n_rot > p.hd || p.n_rot % 2) fail("qk_prep: head_dim ", p.hd, " / n_rot ", p.n_rot, " unsupported (head_dim <= 256)");
  const dim3 grid(static_cast<unsigned>(p.T), static_cast<unsigned>(p.H + 2 * p.KV));
  launch_kernel("qk_prep_kernel", qk_prep_kernel, grid, kThreads, 0, s, p);
}

}  // namespace memra::cuda
