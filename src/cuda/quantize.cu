// src/cuda/quantize.cu — dequantize rows to f32, quantize activations to q8_1.
//
// The maths is memra/quant.h's, through the device twins of its decoders in common.cuh:
//   F16/BF16  x[i] = fp16(h[i]) / bf16(h[i])
//   Q8_0      x[32b+j] = f32(qs[j]) * fp16(d)                          (one rounding)
//   NVFP4     x[64b+16s+k] = f32(2*e2m1(nibble)) * (ue4m3(d[s]) / 2)   (exact halving, one rounding)
//             nibble: byte qs[8s + k%8], low for k < 8, high for k >= 8
//   Q8_1      per 32: d = fp16(amax/127), q = clamp(round(x/f32(d))), s = fp16(f32(d)*Σq)
// Products use __fmul_rn so the compiler cannot contract them with anything.
//
// Variants: dequantize — one thread per element, grid-stride (v1). q8_1 — one warp per block,
// amax and Σq by xor butterflies (exact: max and integer sums do not depend on order) (v1).
#include <cuda_fp16.h>  // common.cuh's fp16 rounding intrinsics
#include <cuda_runtime.h>

#include <algorithm>

#include "cuda/common.cuh"
#include "cuda/quantize.cuh"
#include "cuda/launch.cuh"
#include "memra/cuda_check.h"
#include "memra/error.h"

namespace memra::cuda {
namespace {

// --- kernels ----------------------------------------------------------------------------------

// One element decode per storage type: the only thing that varies between the dequantizers.
struct DecodeF16 {
  __device__ static float at(const uint8_t* src, int64_t i) {
    return dev_fp16(reinterpret_cast<const uint16_t*>(src)[i]);
  }
};
struct DecodeBf16 {
  __device__ static float at(const uint8_t* src, int64_t i) {
    return dev_bf16(reinterpret_cast<const uint16_t*>(src)[i]);
  }
};
struct DecodeQ8_0 {
  __device__ static float at(const uint8_t* src, int64_t i) {
    const auto* b = reinterpret_cast<const BlockQ8_0*>(src) + i / 32;
    return __fmul_rn(static_cast<float>(b->qs[i % 32]), dev_fp16(b->d));
  }
};
struct DecodeNvfp4 {
  __device__ static float at(const uint8_t* src, int64_t i) {
    const auto* b = reinterpret_cast<const BlockNvfp4*>(src) + i / 64;
    const int j = static_cast<int>(i % 64), s = j / 16, k = j % 16;
    const uint8_t byte = b->qs[8 * s + (k % 8)];
    const uint32_t nibble = k < 8 ? (byte & 0xfu) : (byte >> 4);
    return __fmul_rn(static_cast<float>(dev_e2m1x2(nibble)), dev_ue4m3_half(b->d[s]));
  }
};

template <class Decode>
__global__ void dequantize_kernel(const uint8_t* __restrict__ src, float* __restrict__ dst, int64_t n) {
  pdl_wait();
  pdl_release();
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    dst[i] = Decode::at(src, i);
}

constexpr int kQ81WarpsPerCta = 8;

__global__ void quantize_q8_1_kernel(const float* __restrict__ x, Q81* __restrict__ y, int64_t nb) {
  pdl_wait();
  pdl_release();
  const int lane = threadIdx.x % 32;
  const int64_t b = int64_t(blockIdx.x) * kQ81WarpsPerCta + threadIdx.x / 32;
  if (b >= nb) return;  // whole warps leave together: the shuffles below stay full-warp
  quantize_block_q8_1(x[b * 32 + lane], &y[b], lane);
}

// --- launchers --------------------------------------------------------------------------------

constexpr int kThreads = 256;
constexpr int64_t kMaxCtas = 65535;

template <class Decode>
void launch_dequantize(const void* src, float* dst, int64_t n, cudaStream_t s) {
  if (n == 0) return;
  const int64_t ctas = std::min<int64_t>(ceil_div(n, kThreads), kMaxCtas);
  launch_kernel("dequantize_kernel", dequantize_kernel<Decode>, unsigned(ctas), kThreads, 0, s, static_cast<const uint8_t*>(src), dst, n);
}

}  // namespace

// --- dispatch ---------------------------------------------------------------------------------

void dequantize_row_cuda(DType type, const void* src, float* dst, int64_t n, CUstream_st* stream) {
  const int64_t block = type_traits(type).block_elems;
  if (n < 0 || n % block != 0)
    fail("dequantize_row_cuda(", dtype_name(type), "): n = ", n,
         " is not a multiple of the block size ", block);
  switch (type) {
    case DType::F16: return launch_dequantize<DecodeF16>(src, dst, n, stream);
    case DType::BF16: return launch_dequantize<DecodeBf16>(src, dst, n, stream);
    case DType::Q8_0: return launch_dequantize<DecodeQ8_0>(src, dst, n, stream);
    case DType::NVFP4: return launch_dequantize<DecodeNvfp4>(src, dst, n, stream);
    default:
      fail("dequantize_row_cuda: type ", dtype_name(type),
           " has no kernel (supported: f16, bf16, q8_0, nvfp4)");
  }
}

void quantize_row_q8_1_cuda(const float* x, BlockQ8_1* y, int64_t n, CUstream_st* stream) {
  if (n < 0 || n % 32 != 0)
    fail("quantize_row_q8_1_cuda: n = ", n, " is not a multiple of the block size 32");
  const int64_t nb = n / 32;
  if (nb == 0) return;
  static_assert(sizeof(Q81) == sizeof(BlockQ8_1));
  const int64_t ctas = ceil_div(nb, kQ81WarpsPerCta);
  if (ctas > int64_t(0x7fffffff)) fail("quantize_row_q8_1_cuda: n = ", n, " is too large for one launch");
  launch_kernel("quantize_q8_1_kernel", quantize_q8_1_kernel, unsigned(ctas), 32 * kQ81WarpsPerCta, 0, stream, x, reinterpret_cast<Q81*>(y), nb);
}

}  // namespace memra::cuda
