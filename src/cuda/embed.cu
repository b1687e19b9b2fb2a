// src/cuda/embed.cu — the embedding gather (see embed.cuh): a (token, 256 elements) grid, a
// thread per element (one block per token looping over the row took ~3x as long at 4096 values);
// dequantisation by dmat_elem, so every storage type shares one kernel.
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
  const int64_t j = static_cast<int64_t>(blockIdx.y) * blockDim.x + threadIdx.x;
  if (j >= D) return;
  const uint8_t* row = p.table.data + static_cast<int64_t>(p.tokens[t]) * p.table.row_bytes;
  p.x[t * D + j] = __fmul_rn(dmat_elem(p.table, row, j), p.table.slab_scale[0]);
}

}  // namespace

// --- launchers / dispatch

void embed_run(const EmbedParams& p, cudaStream_t s) {
  if (p.T == 0) return;
  if (p.T > 0x7fffffff) fail("embed: ", p.T, " tokens exceed the grid");
  const dim3 grid(static_cast<unsigned>(p.T), static_cast<unsigned>(ceil_div(p.table.cols, 256)));
  launch_kernel("embed_kernel", embed_kernel, grid, 256, 0, s, p);
}

}  // namespace memra::cuda
