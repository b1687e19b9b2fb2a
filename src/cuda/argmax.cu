// src/cuda/argmax.cu — one block of 1024 threads: strided per-thread best, then a tree over
// (value, index) pairs; the comparison (greater value, or equal value and lower index) is a
// total order, so the result does not depend on the reduction shape.
#include "cuda/argmax.cuh"
#include "cuda/common.cuh"
#include "cuda/launch.cuh"

namespace memra::cuda {

namespace {

constexpr int kThreads = 1024;

__device__ __forceinline__ bool better(float v, int i, float bv, int bi) {
  return v > bv || (v == bv && i < bi);
}

// --- kernels

__global__ void __launch_bounds__(kThreads) argmax_kernel(const float* x, int64_t n, int32_t* out) {
  pdl_wait();
  pdl_release();
  __shared__ float sv[kThreads / 32];
  __shared__ int si[kThreads / 32];
  float bv = -INFINITY;
  int bi = 0x7fffffff;
  for (int64_t i = threadIdx.x; i < n; i += kThreads)
    if (better(x[i], static_cast<int>(i), bv, bi)) { bv = x[i]; bi = static_cast<int>(i); }
  for (int off = 16; off > 0; off >>= 1) {
    const float ov = __shfl_xor_sync(0xffffffffu, bv, off);
    const int oi = __shfl_xor_sync(0xffffffffu, bi, off);
    if (better(ov, oi, bv, bi)) { bv = ov; bi = oi; }
  }
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) { sv[warp] = bv; si[warp] = bi; }
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < kThreads / 32; ++w)
      if (better(sv[w], si[w], bv, bi)) { bv = sv[w]; bi = si[w]; }
    out[0] = bi == 0x7fffffff ? 0 : bi;
  }
}

}  // namespace

// --- launchers / dispatch

void argmax_run(const float* x, int64_t n, int32_t* out, cudaStream_t s) {
  launch_kernel("argmax_kernel", argmax_kernel, 1, kThreads, 0, s, x, n, out);
}

}  // namespace memra::cuda
