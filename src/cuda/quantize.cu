// src/cuda/quantize.cu — dequantize rows to f32, quantize activations to q8_1 and to W4A4's fp4.
//
// The maths is memra/quant.h's, through the device twins of its decoders in common.cuh:
//   F16/BF16  x[i] = fp16(h[i]) / bf16(h[i])
//   Q8_0      x[32b+j] = f32(qs[j]) * fp16(d)                          (one rounding)
//   NVFP4     x[64b+16s+k] = f32(2*e2m1(nibble)) * (ue4m3(d[s]) / 2)   (exact halving, one rounding)
//             nibble: byte qs[8s + k%8], low for k < 8, high for k >= 8
//   Q8_1      per 32: d = fp16(amax/127), q = clamp(round(x/f32(d))), s = fp16(f32(d)*Σq)
//   Fp4Act    per 16: code = ue4m3(amax/6) (RNE, saturating), S = ue4m3(code),
//             q = S == 0 ? 0 : e2m1(x/S) (RNE onto the e2m1 grid, saturating at 6); stored
//             decoded (A4, dmat.h): d = S/2, e2m1_doubled(q)
// Products use __fmul_rn so the compiler cannot contract them with anything.
//
// Variants: dequantize — one thread per element, grid-stride (v1). q8_1 — one warp per block,
// amax and Σq by xor butterflies (exact: max and integer sums do not depend on order) (v1).
// fp4act — one thread per 16-value sub-block, grid-stride (v1).
#include <cuda_fp16.h>  // common.cuh's fp16 rounding intrinsics
#include <cuda_fp8.h>   // the e4m3 encoder: bit-identical to memra::f32_to_e4m3 (memra/dtype.h)
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

// f32_to_ue4m3 (memra/dtype.h): x <= 0 and NaN give 0, else the E4M3 encoding (RNE,
// saturating at 448) without its sign bit. dtype.h's f32_to_e4m3 is CUDA's SATFINITE
// conversion bit for bit (checked there over 2^28 inputs).
__device__ __forceinline__ uint32_t dev_f32_to_ue4m3(float x) {
  if (!(x > 0.0f)) return 0;
  return static_cast<uint32_t>(__nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3)) & 0x7fu;
}

// f32_to_e2m1 (memra/dtype.h): the same bounds in the same order, ties to the even code; the
// code's sign is x's sign bit; NaN gives 7.
__device__ __forceinline__ uint32_t dev_f32_to_e2m1(float x) {
  const uint32_t u = __float_as_uint(x);
  if ((u & 0x7fffffffu) > 0x7f800000u) return 7;
  const float a = __uint_as_float(u & 0x7fffffffu);
  uint32_t c;
  if (a <= 0.25f) c = 0;
  else if (a < 0.75f) c = 1;
  else if (a <= 1.25f) c = 2;
  else if (a < 1.75f) c = 3;
  else if (a <= 2.5f) c = 4;
  else if (a < 3.5f) c = 5;
  else if (a <= 5.0f) c = 6;
  else c = 7;
  return (u >> 31) ? (c | 8u) : c;
}

// Sub-block i of the rows (n / 16 per row): its 16 values in order, amax by fmaxf (order-free for
// finite values), the scale, then each value's code. DropScale: a canary's defect (memra/model.h
// Break::w4a4_drop_block_scale): every sub-block's code is the one for amax = 6 (S = 1).
template <bool DropScale>
__global__ void quantize_fp4act_kernel(const float* __restrict__ x, int64_t ld, int64_t rows, int64_t n,
                                       A4* __restrict__ y) {
  pdl_wait();
  pdl_release();
  const int64_t per_row = n / 16, total = rows * per_row;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += stride) {
    const int64_t r = i / per_row, sb = i % per_row;
    const float* xs = x + r * ld + 16 * sb;
    float v[16];
    float amax = 0.0f;
    bool finite = true;
#pragma unroll
    for (int j = 0; j < 16; ++j) {
      v[j] = xs[j];
      finite = finite && isfinite(v[j]);
      amax = fmaxf(amax, fabsf(v[j]));
    }
    const uint32_t code = dev_f32_to_ue4m3(DropScale ? 1.0f : __fdiv_rn(amax, 6.0f));
    const float half = dev_ue4m3_half(static_cast<uint8_t>(code));
    const float S = __fmul_rn(half, 2.0f);  // ue4m3_to_f32(code), exactly
    A4& b = y[r * (n / 32) + sb / 2];
    const int h = static_cast<int>(sb & 1);
    b.d[h] = finite ? half : __uint_as_float(0x7fc00000u);
#pragma unroll
    for (int j = 0; j < 16; ++j)
      b.qs[16 * h + j] = static_cast<int8_t>(S == 0.0f ? 0 : dev_e2m1x2(dev_f32_to_e2m1(__fdiv_rn(v[j], S))));
  }
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

void quantize_rows_fp4act_cuda(const float* x, int64_t ld, int64_t rows, int64_t n, A4* y, CUstream_st* stream,
                               bool drop_block_scale) {
  if (n < 0 || n % 64 != 0) fail("quantize_rows_fp4act_cuda: n = ", n, " is not a multiple of the block size 64");
  if (rows < 0 || ld < n) fail("quantize_rows_fp4act_cuda: rows = ", rows, ", ld = ", ld, " (must be >= n = ", n, ")");
  const int64_t total = rows * (n / 16);
  if (total == 0) return;
  const int64_t ctas = std::min<int64_t>(ceil_div(total, kThreads), kMaxCtas);
  if (drop_block_scale)
    return launch_kernel("quantize_fp4act_kernel_drop_scale", quantize_fp4act_kernel<true>, unsigned(ctas), kThreads, 0,
                         stream, x, ld, rows, n, y);
  launch_kernel("quantize_fp4act_kernel", quantize_fp4act_kernel<false>, unsigned(ctas), kThreads, 0, stream, x, ld,
                rows, n, y);
}

}  // namespace memra::cuda
