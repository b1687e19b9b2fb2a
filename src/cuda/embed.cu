// src/cuda/embed.cu — the embedding gather (see embed.cuh). v1: a block per token, a thread per
// element; dequantisation by dmat_elem, so every storage type shares one kernel.
#include "cuda/common.cuh"
#include "cuda/embed.cuh"
#include "cuda/launch.cuh"

namespace memra::cuda {

namespace {

// --- kernels

__global__ void embed_kernel(EmbedParams p) {
  pdl_wait();
  pdl_release();
  const int64_t t = blockIdx.x;
  const int64_t D = p.table.cols;
  const uint8_t* row = p.table.data + static_cast<int64_t>(p.tokens[t]) * p.table.row_bytes;
  const float scale = p.table.slab_scale[0];
  for (int64_t j = threadIdx.x; j < D; j += blockDim.x)
    p.x[t * D + j] = __fmul_rn(dmat_elem(p.table, row, j), scale);
}

}  // namespace

// --- launchers / dispatch

void embed_run(const EmbedParams& p, cudaStream_t s) {
  if (p.T == 0) return;
  launch_kernel("embed_kernel", embed_kernel, static_cast<unsigned>(p.T), 256, 0, s, p);
}

}  // namespace memra::cuda
