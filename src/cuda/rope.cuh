// src/cuda/rope.cuh — attention input preparation: per-head RMSNorm of q and k (q_norm,
// k_norm over head_dim), partial NEOX RoPE on the first n_rot dims, and the K/V store into the
// cache at positions pos0 + t.
//
//   pair (x_i, x_{i+n_rot/2}), i < n_rot/2, rotated by angle pos * theta^(-2i/n_rot);
//   angle, cos, sin and the rotation in f64 and rounded once to f32, as the oracle does.
//
// provides: QkPrepParams, qk_prep_run, kQkMaxHd, HeadValues, head_values, RopeAngles, rope_angles,
//           norm_rope_head
#pragma once

#ifdef __CUDACC__
#include "cuda/common.cuh"
#endif

#include <cuda_runtime.h>

#include <cstdint>

namespace memra::cuda {

struct QkPrepParams {
  float* q = nullptr;        // [T, H*hd] in place: normed + rotated
  const float* k = nullptr;  // [T, KV*hd] projections
  const float* v = nullptr;  // [T, KV*hd]
  const float* q_norm = nullptr;  // [hd]
  const float* k_norm = nullptr;  // [hd]
  float* k_cache = nullptr;  // [max_ctx, KV*hd]
  float* v_cache = nullptr;
  const int64_t* pos0 = nullptr;  // device: position of token 0 (read on the device, so a captured
                                  // decode graph replays at the cache's current position)
  int64_t T = 0;
  int H = 0, KV = 0, hd = 0, n_rot = 0;
  float eps = 0;
  double theta = 10000;
};

void qk_prep_run(const QkPrepParams& p, cudaStream_t s);

#ifdef __CUDACC__
// How every memra kernel prepares one head of q or k (qk_prep_kernel; the decode attention kernel
// that prepares its own token, attention.cu), in parts that a kernel can place around its
// dependency wait: the f64 trigonometry needs only the position and the RoPE base, the norm's
// multiplier is a weight, and only the head's values come from the previous kernel.
//
// A thread of a kBlock-thread block owns dims d = threadIdx.x + c * kBlock (c < kPerThread):
// head_values loads them (0 past hd), rope_angles takes cos and sin of pos * theta^(-2i/n_rot)
// for the rotated ones (pair index i = d mod n_rot/2).
//
// norm_rope_head: RMSNorm over hd values with multiplier w, then the NEOX rotation of the first
// n_rot dims with those angles, into dst. The sum of squares is kQkMaxHd / 32 partials of 32
// consecutive dims (a warp butterfly each; dims past hd add +0) added in order from 0, the same
// partials whatever the block size. The rotation's f64 products and difference are rounded as
// written (no contraction: the oracle's a*cs - b*sn), then once to f32. The whole block calls it
// (barriers inside); h (kQkMaxHd floats) and part (kQkMaxHd / 32) are shared scratch; dst may be
// the head's source (its values are already in registers).
inline constexpr int kQkMaxHd = 256;

template <int kBlock>
struct HeadValues {
  static constexpr int kPerThread = (kQkMaxHd + kBlock - 1) / kBlock;
  float x[kPerThread];
};

template <int kBlock>
__device__ __forceinline__ HeadValues<kBlock> head_values(const float* src, int hd) {
  HeadValues<kBlock> v;
#pragma unroll
  for (int c = 0; c < HeadValues<kBlock>::kPerThread; ++c) {
    const int d = static_cast<int>(threadIdx.x) + c * kBlock;
    v.x[c] = d < hd ? src[d] : 0.0f;
  }
  return v;
}

template <int kBlock>
struct RopeAngles {
  static constexpr int kPerThread = HeadValues<kBlock>::kPerThread;
  double cs[kPerThread], sn[kPerThread];
};

template <int kBlock>
__device__ __forceinline__ RopeAngles<kBlock> rope_angles(int64_t pos, int n_rot, double theta) {
  RopeAngles<kBlock> a;
  const int half = n_rot / 2;
#pragma unroll
  for (int c = 0; c < RopeAngles<kBlock>::kPerThread; ++c) {
    const int d = static_cast<int>(threadIdx.x) + c * kBlock;
    a.cs[c] = 1.0;
    a.sn[c] = 0.0;
    if (d < n_rot) {
      const int i = d < half ? d : d - half;
      const double inv_freq = pow(theta, -2.0 * i / static_cast<double>(n_rot));
      sincos(static_cast<double>(pos) * inv_freq, &a.sn[c], &a.cs[c]);
    }
  }
  return a;
}

template <int kBlock>
__device__ __forceinline__ void norm_rope_head(const HeadValues<kBlock>& x, const HeadValues<kBlock>& w, float* dst,
                                               int hd, int n_rot, float eps, const RopeAngles<kBlock>& ang, float* h,
                                               float* part) {
  constexpr int kPer = HeadValues<kBlock>::kPerThread;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
  for (int c = 0; c < kPer; ++c) {  // dims 32 pw .. 32 pw + 31, pw = warp + c * kBlock / 32
    const int d = static_cast<int>(threadIdx.x) + c * kBlock;
    if (d >= kQkMaxHd) break;  // warp-uniform
    const float ss = warp_sum_xor(__fmul_rn(x.x[c], x.x[c]));
    if (lane == 0) part[warp + c * (kBlock / 32)] = ss;
  }
  __syncthreads();
  float tot = 0.0f;
  for (int i = 0; i < kQkMaxHd / 32; ++i) tot = __fadd_rn(tot, part[i]);
  const float r = rsqrtf(__fadd_rn(__fdiv_rn(tot, static_cast<float>(hd)), eps));
#pragma unroll
  for (int c = 0; c < kPer; ++c) {
    const int d = static_cast<int>(threadIdx.x) + c * kBlock;
    if (d < hd) h[d] = __fmul_rn(__fmul_rn(x.x[c], r), w.x[c]);
  }
  __syncthreads();
  const int half = n_rot / 2;
#pragma unroll
  for (int c = 0; c < kPer; ++c) {
    const int d = static_cast<int>(threadIdx.x) + c * kBlock;
    if (d >= hd) break;
    float y = h[d];
    if (d < n_rot) {
      const int i = d < half ? d : d - half;
      const double a = h[i], b = h[i + half], cs = ang.cs[c], sn = ang.sn[c];
      y = d < half ? static_cast<float>(__dsub_rn(__dmul_rn(a, cs), __dmul_rn(b, sn)))
                   : static_cast<float>(__dadd_rn(__dmul_rn(b, cs), __dmul_rn(a, sn)));
    }
    dst[d] = y;
  }
  __syncthreads();  // h and part are free again, dst complete for the block
}
#endif

}  // namespace memra::cuda
