// src/cuda/gdn.cu — GDN conv and recurrence (see gdn.cuh).
// v1: gdn_conv_kernel a thread per channel walking the tokens; gdn_recurrent_kernel a block per
//     value head holding S in shared memory, a thread per state column j (of d_v), tokens in
//     order, state loaded once and stored once per call.
#include "cuda/common.cuh"
#include "cuda/gdn.cuh"

namespace memra::cuda {

namespace {

constexpr int kMaxK = 8;
constexpr int kThreads = 128;  // >= d_v and >= d_k (checked)

__device__ __forceinline__ float silu_f(float x) { return __fdiv_rn(x, __fadd_rn(1.0f, expf(-x))); }

// --- kernels

__global__ void gdn_conv_kernel(GdnConvParams p) {
  const int64_t ch = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (ch >= p.cd) return;
  const int K = p.K;
  float win[kMaxK];  // win[0..K-2]: previous inputs, oldest first
  float tap[kMaxK];
  for (int j = 0; j < K; ++j) tap[j] = p.taps[ch * K + j];
  for (int j = 0; j < K - 1; ++j) win[j] = p.state[j * p.cd + ch];
  for (int64_t t = 0; t < p.T; ++t) {
    const float xt = p.x[t * p.cd + ch];
    float s = 0.0f;
    for (int j = 0; j < K - 1; ++j) s = fmaf(tap[j], win[j], s);
    s = fmaf(tap[K - 1], xt, s);
    p.y[t * p.cd + ch] = silu_f(s);
    for (int j = 0; j + 1 < K - 1; ++j) win[j] = win[j + 1];
    if (K > 1) win[K - 2] = xt;
  }
  for (int j = 0; j < K - 1; ++j) p.state[j * p.cd + ch] = win[j];
}

__device__ float block_sum(float v, float* red) {  // fixed order: warps in index order
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  v = warp_sum_xor(v);
  __syncthreads();
  if (lane == 0) red[warp] = v;
  __syncthreads();
  float tot = 0.0f;
  for (int w = 0; w < kThreads / 32; ++w) tot = __fadd_rn(tot, red[w]);
  return tot;
}

__global__ void __launch_bounds__(kThreads) gdn_recurrent_kernel(GdnParams p) {
  extern __shared__ float S[];  // [dk, dv]
  __shared__ float qs[kThreads], ks[kThreads], red[kThreads / 32];
  const int h = blockIdx.x, tid = threadIdx.x;
  const int dk = p.dk, dv = p.dv, nv = p.nv, kd = p.nk * dk;
  const int key = p.tiled ? h % p.nk : h / (nv / p.nk);
  const int64_t cd = 2 * kd + static_cast<int64_t>(nv) * dv;
  float* Sg = p.state + static_cast<int64_t>(h) * dk * dv;
  for (int i = tid; i < dk * dv; i += kThreads) S[i] = Sg[i];
  const float qscale = rsqrtf(static_cast<float>(dk));
  for (int64_t t = 0; t < p.T; ++t) {
    const float* row = p.qkv + t * cd;
    const float qv = tid < dk ? row[key * dk + tid] : 0.0f;
    const float kv = tid < dk ? row[kd + key * dk + tid] : 0.0f;
    const float qn = block_sum(__fmul_rn(qv, qv), red);
    const float kn = block_sum(__fmul_rn(kv, kv), red);
    if (tid < dk) {
      qs[tid] = __fmul_rn(__fmul_rn(qv, rsqrtf(__fadd_rn(qn, 1e-6f))), qscale);
      ks[tid] = __fmul_rn(kv, rsqrtf(__fadd_rn(kn, 1e-6f)));
    }
    const float bl = p.b[t * nv + h];
    const float beta = __fdiv_rn(1.0f, __fadd_rn(1.0f, expf(-bl)));
    const float ax = __fadd_rn(p.a[t * nv + h], p.dt_bias[h]);
    const float sp = ax > 20.0f ? ax : log1pf(expf(ax));
    const float decay = expf(__fmul_rn(p.ssm_a[h], sp));
    __syncthreads();
    if (tid < dv) {
      const int j = tid;
      float sk = 0.0f;
      for (int i = 0; i < dk; ++i) {
        const float sij = __fmul_rn(S[i * dv + j], decay);  // S <- decay S
        S[i * dv + j] = sij;
        sk = fmaf(sij, ks[i], sk);                           // Sᵀk
      }
      const float u = __fmul_rn(beta, __fsub_rn(row[2 * kd + h * dv + j], sk));  // u = beta (v - Sᵀk)
      float o = 0.0f;
      for (int i = 0; i < dk; ++i) {
        const float sij = fmaf(ks[i], u, S[i * dv + j]);     // S <- S + k uᵀ
        S[i * dv + j] = sij;
        o = fmaf(sij, qs[i], o);                              // o = Sᵀq
      }
      p.o[t * nv * dv + h * dv + j] = o;
    }
    __syncthreads();
  }
  for (int i = tid; i < dk * dv; i += kThreads) Sg[i] = S[i];
}

}  // namespace

// --- launchers / dispatch

void gdn_conv_run(const GdnConvParams& p, cudaStream_t s) {
  if (p.T == 0) return;
  if (p.K < 1 || p.K > kMaxK) fail("gdn conv: kernel size ", p.K, " unsupported (1..", kMaxK, ")");
  gdn_conv_kernel<<<static_cast<unsigned>(ceil_div(p.cd, 128)), 128, 0, s>>>(p);
  MEMRA_CUDA_CHECK_LAUNCH("gdn_conv_kernel");
}

void gdn_recurrent_run(const GdnParams& p, cudaStream_t s) {
  if (p.T == 0) return;
  if (p.dk > kThreads || p.dv > kThreads) fail("gdn: d_k ", p.dk, " / d_v ", p.dv, " unsupported (<= ", kThreads, ")");
  const size_t smem = static_cast<size_t>(p.dk) * p.dv * sizeof(float);
  if (smem > 48 * 1024)
    MEMRA_CUDA_CHECK(cudaFuncSetAttribute(gdn_recurrent_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
  gdn_recurrent_kernel<<<static_cast<unsigned>(p.nv), kThreads, smem, s>>>(p);
  MEMRA_CUDA_CHECK_LAUNCH("gdn_recurrent_kernel");
}

}  // namespace memra::cuda
