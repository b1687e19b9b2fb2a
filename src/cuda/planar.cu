// src/cuda/planar.cu — GGUF blocks to planar device rows (see planar.cuh).
#include "cuda/common.cuh"
#include "cuda/launch.cuh"
#include "cuda/planar.cuh"

namespace memra::cuda {

namespace {

// One thread per block of a row (Q8_0: 32 values, NVFP4: 64 values, other types: 16 bytes).
template <int W>
__global__ void to_planar_kernel(const uint8_t* __restrict__ src, uint8_t* __restrict__ dst, int64_t rows,
                                 int64_t cols, int64_t src_row_bytes, int64_t stride) {
  pdl_wait();
  pdl_release();
  const int64_t per_row = W == 3 ? cols / 32 : W == 4 ? cols / 64 : (src_row_bytes + 15) / 16;
  const int64_t n = rows * per_row;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = i / per_row, b = i % per_row;
    const uint8_t* s = src + r * src_row_bytes;
    uint8_t* d = dst + r * stride;
    if constexpr (W == 3) {
      const uint8_t* blk = s + b * 34;
      d[cols + 2 * b] = blk[0];
      d[cols + 2 * b + 1] = blk[1];
      for (int k = 0; k < 32; ++k) d[32 * b + k] = blk[2 + k];
    } else if constexpr (W == 4) {
      const uint8_t* blk = s + b * 36;
      for (int sb = 0; sb < 4; ++sb) {
        const uint8_t c = blk[sb] & 0x7f;
        d[cols / 2 + 4 * b + sb] = c == 0x7f ? 0 : c;
        // GGUF sub-block: byte k holds value k (low nibble) and value k + 8 (high nibble)
        const uint8_t* q = blk + 4 + 8 * sb;
        for (int k = 0; k < 8; ++k) {
          const int v0 = 2 * k, v1 = 2 * k + 1;
          const uint8_t c0 = v0 < 8 ? (q[v0] & 0xf) : (q[v0 - 8] >> 4);
          const uint8_t c1 = v1 < 8 ? (q[v1] & 0xf) : (q[v1 - 8] >> 4);
          d[32 * b + 8 * sb + k] = static_cast<uint8_t>(c0 | (c1 << 4));
        }
      }
    } else {
      for (int64_t k = 16 * b; k < 16 * b + 16 && k < src_row_bytes; ++k) d[k] = s[k];
    }
  }
}

}  // namespace

int64_t planar_row_stride(DType type, int64_t cols) { return (row_bytes(type, cols) + 15) / 16 * 16; }

void to_planar(DType type, const uint8_t* src, uint8_t* dst, int64_t rows, int64_t cols, int64_t stride,
               cudaStream_t s) {
  if (rows == 0) return;
  const int64_t rb = row_bytes(type, cols);
  if (stride < rb) fail("to_planar: stride ", stride, " below the row size ", rb, " of ", dtype_name(type));
  const dim3 grid(1024), block(256);
  switch (type) {
    case DType::Q8_0: return launch_kernel("to_planar_kernel", to_planar_kernel<3>, grid, block, 0, s, src, dst, rows, cols, rb, stride);
    case DType::NVFP4: return launch_kernel("to_planar_kernel", to_planar_kernel<4>, grid, block, 0, s, src, dst, rows, cols, rb, stride);
    default: return launch_kernel("to_planar_kernel", to_planar_kernel<0>, grid, block, 0, s, src, dst, rows, cols, rb, stride);
  }
}

}  // namespace memra::cuda
