// src/cuda/norm.cu — RowOp kernels (see norm.cuh).
//
// Variants: one templated kernel rowop_kernel<RowOp>; v1 (this) keeps the row in shared memory
// so the fused quantisation reads the very f32 values the unfused path would write (fused and
// unfused are bit-identical by construction).
#include "cuda/common.cuh"
#include "cuda/norm.cuh"

namespace memra::cuda {

namespace {

constexpr int kThreads = 256;

__device__ __forceinline__ float silu_f(float x) { return __fdiv_rn(x, __fadd_rn(1.0f, expf(-x))); }

// --- kernels

template <RowOp Op>
__global__ void __launch_bounds__(kThreads) rowop_kernel(RowOpParams p) {
  extern __shared__ float row[];  // [n]
  __shared__ float warp_part[kThreads / 32];
  const int64_t r = blockIdx.x;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const float* x = p.x + r * p.ld_x;
  float scale = 1.0f;
  if constexpr (Op == RowOp::RmsNorm || Op == RowOp::RmsNormGated) {
    float ss = 0.0f;
    for (int64_t i = tid; i < p.n; i += kThreads) ss = fmaf(x[i], x[i], ss);
    ss = warp_sum_xor(ss);
    if (lane == 0) warp_part[warp] = ss;
    __syncthreads();
    float tot = 0.0f;
    for (int w = 0; w < kThreads / 32; ++w) tot = __fadd_rn(tot, warp_part[w]);
    scale = rsqrtf(__fadd_rn(__fdiv_rn(tot, static_cast<float>(p.n)), p.eps));
  }
  for (int64_t i = tid; i < p.n; i += kThreads) {
    float v = x[i];
    if constexpr (Op == RowOp::RmsNorm) v = __fmul_rn(__fmul_rn(v, scale), p.w[i]);
    if constexpr (Op == RowOp::RmsNormGated)
      v = __fmul_rn(__fmul_rn(__fmul_rn(v, scale), p.w[i]), silu_f(p.z[r * p.ld_z + i]));
    if constexpr (Op == RowOp::Swiglu) v = __fmul_rn(silu_f(v), p.z[r * p.ld_z + i]);
    row[i] = v;
  }
  __syncthreads();
  if (p.y)
    for (int64_t i = tid; i < p.n; i += kThreads) p.y[r * p.ld_y + i] = row[i];
  if (p.q) {
    const int64_t nb = p.n / 32;
    for (int64_t b = warp; b < nb; b += kThreads / 32)
      quantize_block_q8_1(row[b * 32 + lane], p.q + r * nb + b, lane);
  }
}

// --- launchers

template <RowOp Op>
void launch(const RowOpParams& p, cudaStream_t s) {
  const size_t smem = static_cast<size_t>(p.n) * sizeof(float);
  if (smem > 48 * 1024)
    MEMRA_CUDA_CHECK(cudaFuncSetAttribute(rowop_kernel<Op>, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
  rowop_kernel<Op><<<static_cast<unsigned>(p.rows), kThreads, smem, s>>>(p);
  MEMRA_CUDA_CHECK_LAUNCH("rowop_kernel");
}

}  // namespace

// --- dispatch

void rowop_run(const RowOpParams& p, cudaStream_t s) {
  if (p.rows == 0) return;
  if (p.q && p.n % 32 != 0) fail("rowop: q8_1 output needs n % 32 == 0, n = ", p.n);
  switch (p.op) {
    case RowOp::RmsNorm: return launch<RowOp::RmsNorm>(p, s);
    case RowOp::RmsNormGated: return launch<RowOp::RmsNormGated>(p, s);
    case RowOp::Swiglu: return launch<RowOp::Swiglu>(p, s);
    case RowOp::Identity: return launch<RowOp::Identity>(p, s);
  }
  fail("rowop: unknown op ", static_cast<int>(p.op));
}

}  // namespace memra::cuda
