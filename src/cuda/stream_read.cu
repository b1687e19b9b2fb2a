// src/cuda/stream_read.cu — the streaming-read probe (see stream_read.cuh): float4 __ldg,
// grid-stride, 256 threads, 8 blocks per SM (the shape that reached 4.6 TB/s on the H200; 4
// blocks per SM reached 4.0).
#include "cuda/common.cuh"
#include "cuda/stream_read.cuh"
#include "cuda/launch.cuh"

namespace memra::cuda {

namespace {

// --- kernels

__global__ void __launch_bounds__(256) stream_read_kernel(const float4* p, size_t n, float* sink) {
  pdl_wait();
  pdl_release();
  float acc = 0.0f;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const float4 v = __ldg(p + i);
    acc += v.x + v.y + v.z + v.w;
  }
  acc = warp_sum_xor(acc);
  if ((threadIdx.x & 31) == 0 && acc == 1234.5f) sink[blockIdx.x] = acc;  // practically never taken
}

}  // namespace

// --- launchers

void stream_read_run(const void* buf, size_t bytes, float* sink, int sm_count, cudaStream_t s) {
  launch_kernel("stream_read_kernel", stream_read_kernel, 8 * sm_count, 256, 0, s, static_cast<const float4*>(buf), bytes / 16, sink);
}

}  // namespace memra::cuda
