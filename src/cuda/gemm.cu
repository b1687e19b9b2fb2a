// src/cuda/gemm.cu — int8 and bf16 mma.sync prefill GEMM (see gemm.cuh).
// v1.3: BF16 weights (gemm_bf16_kernel): m16n8k16 bf16 mma, activations split into three bf16
//     terms. (Two terms, 16 bits per activation, measured up to 4.4e-5 relative logit noise
//     against the oracle on the tiny bf16 fixtures, over the float-weight ceiling of 1e-5; three
//     carry all 24 bits, and the noise is the f32 path's.)
// v1.2: planar weight rows (planar.cuh): aligned 32-bit A fragments for Q8_0, NVFP4 nibbles in
//     value order (e2m1x2_seq4). Same integers, same bits.
// v1.1: fp16 scales through the hardware conversion (dev_fp16_fast: exact, the same bits for
//     every non-NaN scale; the configuration of the H200 run at 3e092e8, 1.3x faster than the
//     field-by-field decode on the 9B Q8_0 prefill).
// v1: no shared memory; A/B fragments loaded per thread from global (L1/L2-resident), the
//     fragment layouts of PTX's mma.m16n8k32 / m16n8k16 .s8 (row.col):
//       A (16 x K): reg j holds 4 consecutive k of row g (+8 for regs 1, 3), k0 = 4*(lane%4)
//                   (+16 for regs 2, 3 of k32);
//       B (K x 8):  reg j holds 4 consecutive k of column g, k0 = 4*(lane%4) (+16 for reg 1);
//       C (16 x 8): c0, c1 = row g, cols 2*(lane%4) + {0, 1}; c2, c3 = row g + 8, same cols;
//     with g = lane / 4.
#include <cuda_bf16.h>

#include "cuda/common.cuh"
#include "cuda/gemm.cuh"
#include "cuda/launch.cuh"

namespace memra::cuda {

namespace {

constexpr int kWarps = 4;
constexpr int kRowsPerWarp = 16;
constexpr int kNTiles = 16;  // 8 tokens each: 128 tokens per block
constexpr int kTokens = 8 * kNTiles;

__device__ __forceinline__ void mma_k32(int (&c)[4], int a0, int a1, int a2, int a3, int b0, int b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%10,%11,%12,%13};\n"
      : "=r"(c[0]), "=r"(c[1]), "=r"(c[2]), "=r"(c[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1), "r"(0), "r"(0), "r"(0), "r"(0));
}
__device__ __forceinline__ void mma_k16(int (&c)[4], int a0, int a1, int b0) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%7,%8,%9,%10};\n"
      : "=r"(c[0]), "=r"(c[1]), "=r"(c[2]), "=r"(c[3])
      : "r"(a0), "r"(a1), "r"(b0), "r"(0), "r"(0), "r"(0), "r"(0));
}

// m16n8k16 bf16 x bf16 -> f32, accumulating into c. Fragments as the int8 k16 form, with a
// register holding two bf16 (the lower k in the low half): A a0 = row g, k 2q..2q+1; a1 = row
// g + 8; a2, a3 the same at k + 8. B b0 = k 2q..2q+1 of column g; b1 at k + 8.
__device__ __forceinline__ void mma_bf16(float (&c)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0,
                                         uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// Two f32 activations as three bf16 pairs: t0 = bf16_rn(x), t1 = bf16_rn(x - t0),
// t2 = bf16_rn(x - t0 - t1) (each difference exact in f32).
__device__ __forceinline__ void split_bf16x2(float2 x, uint32_t (&t)[3]) {
#pragma unroll
  for (int i = 0; i < 3; ++i) {
    const __nv_bfloat162 h = __floats2bfloat162_rn(x.x, x.y);
    t[i] = *reinterpret_cast<const uint32_t*>(&h);
    x.x = __fsub_rn(x.x, __low2float(h));
    x.y = __fsub_rn(x.y, __high2float(h));
  }
}

__device__ __forceinline__ int64_t imin(int64_t a, int64_t b) { return a < b ? a : b; }

// --- kernels

// W: 3 = Q8_0 (unit = 32-value block, k32 mma), 4 = NVFP4 (unit = 16-value sub-block, k16 mma).
template <int W>
__global__ void __launch_bounds__(32 * kWarps) gemm_kernel(GemmParams p) {
  pdl_wait();
  pdl_release();
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, q = lane & 3;
  const int64_t rows = p.w.slab_rows;
  const int64_t r0 = (static_cast<int64_t>(blockIdx.x) * kWarps + warp) * kRowsPerWarp;
  const int64_t t0 = static_cast<int64_t>(blockIdx.y) * kTokens;
  if (r0 >= rows) return;
  const int64_t ra = imin(r0 + g, rows - 1), rb = imin(r0 + g + 8, rows - 1);  // clamped loads
  const uint8_t* wa = p.w.data + ra * p.w.row_bytes;
  const uint8_t* wb = p.w.data + rb * p.w.row_bytes;
  const int64_t nqb = p.w.cols / 32;  // q8_1 blocks per token row
  // Per n-tile: this thread's B column (token g of the tile) and its two C columns (2q, 2q+1),
  // clamped to the last token for loads; results past T are never stored.
  const int64_t tl = p.T - 1;
  float acc[kNTiles][4];
#pragma unroll
  for (int n = 0; n < kNTiles; ++n) acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.0f;

  if constexpr (W == 3) {
    for (int64_t b = 0; b < nqb; ++b) {
      // planar rows (planar.cuh): qs of block b at 32b, its fp16 d at cols + 2b
      const int* qa = reinterpret_cast<const int*>(wa + 32 * b);
      const int* qb = reinterpret_cast<const int*>(wb + 32 * b);
      const int a0 = qa[q], a2 = qa[4 + q];
      const int a1 = qb[q], a3 = qb[4 + q];
      const float dwa = dev_fp16_fast(reinterpret_cast<const uint16_t*>(wa + p.w.cols)[b]);
      const float dwb = dev_fp16_fast(reinterpret_cast<const uint16_t*>(wb + p.w.cols)[b]);
#pragma unroll
      for (int n = 0; n < kNTiles; ++n) {
        if (t0 + 8 * n >= p.T) break;  // warp-uniform
        const int64_t tb = imin(t0 + 8 * n + g, tl), tc0 = imin(t0 + 8 * n + 2 * q, tl), tc1 = imin(t0 + 8 * n + 2 * q + 1, tl);
        const Q81* xb = p.xq + tb * nqb + b;
        const int* xi = reinterpret_cast<const int*>(xb->qs);
        int c[4];
        mma_k32(c, a0, a1, a2, a3, xi[q], xi[4 + q]);
        const float dx0 = dev_fp16_fast(p.xq[tc0 * nqb + b].d), dx1 = dev_fp16_fast(p.xq[tc1 * nqb + b].d);
        acc[n][0] = __fadd_rn(acc[n][0], __fmul_rn(__fmul_rn(dwa, dx0), static_cast<float>(c[0])));
        acc[n][1] = __fadd_rn(acc[n][1], __fmul_rn(__fmul_rn(dwa, dx1), static_cast<float>(c[1])));
        acc[n][2] = __fadd_rn(acc[n][2], __fmul_rn(__fmul_rn(dwb, dx0), static_cast<float>(c[2])));
        acc[n][3] = __fadd_rn(acc[n][3], __fmul_rn(__fmul_rn(dwb, dx1), static_cast<float>(c[3])));
      }
    }
  } else {
    const int64_t nu = p.w.cols / 16;
    for (int64_t u = 0; u < nu; ++u) {
      // planar rows (planar.cuh): values 4q..4q+3 of sub-block u are the 2 bytes at 8u + 2q, its
      // (canonical) scale byte at cols/2 + u
      const int a0 = e2m1x2_seq4(reinterpret_cast<const uint16_t*>(wa)[4 * u + q]);
      const int a1 = e2m1x2_seq4(reinterpret_cast<const uint16_t*>(wb)[4 * u + q]);
      const float dwa = dev_ue4m3_half(wa[p.w.cols / 2 + u]), dwb = dev_ue4m3_half(wb[p.w.cols / 2 + u]);
      const int64_t xblk = u >> 1;
      const int xoff = static_cast<int>(u & 1) * 16;
#pragma unroll
      for (int n = 0; n < kNTiles; ++n) {
        if (t0 + 8 * n >= p.T) break;
        const int64_t tb = imin(t0 + 8 * n + g, tl), tc0 = imin(t0 + 8 * n + 2 * q, tl), tc1 = imin(t0 + 8 * n + 2 * q + 1, tl);
        const Q81* xb = p.xq + tb * nqb + xblk;
        const int b0 = *reinterpret_cast<const int*>(xb->qs + xoff + 4 * q);
        int c[4];
        mma_k16(c, a0, a1, b0);
        const float dx0 = dev_fp16_fast(p.xq[tc0 * nqb + xblk].d), dx1 = dev_fp16_fast(p.xq[tc1 * nqb + xblk].d);
        acc[n][0] = __fadd_rn(acc[n][0], __fmul_rn(__fmul_rn(dwa, dx0), static_cast<float>(c[0])));
        acc[n][1] = __fadd_rn(acc[n][1], __fmul_rn(__fmul_rn(dwa, dx1), static_cast<float>(c[1])));
        acc[n][2] = __fadd_rn(acc[n][2], __fmul_rn(__fmul_rn(dwb, dx0), static_cast<float>(c[2])));
        acc[n][3] = __fadd_rn(acc[n][3], __fmul_rn(__fmul_rn(dwb, dx1), static_cast<float>(c[3])));
      }
    }
  }

  const float scale = p.w.slab_scale[0];
#pragma unroll
  for (int n = 0; n < kNTiles; ++n) {
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int64_t r = r0 + g + (j >= 2 ? 8 : 0);
      const int64_t t = t0 + 8 * n + 2 * q + (j & 1);
      if (r >= rows || t >= p.T) continue;
      const float v = __fmul_rn(acc[n][j], scale);
      float* out = p.y + t * p.ld_y + r;
      *out = p.add_to_y ? __fadd_rn(*out, v) : v;
    }
  }
}

// BF16 rows (as stored: cols bf16 values) against f32 activation rows; tiles as gemm_kernel.
__global__ void __launch_bounds__(32 * kWarps) gemm_bf16_kernel(GemmParams p) {
  pdl_wait();
  pdl_release();
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, q = lane & 3;
  const int64_t rows = p.w.slab_rows;
  const int64_t r0 = (static_cast<int64_t>(blockIdx.x) * kWarps + warp) * kRowsPerWarp;
  const int64_t t0 = static_cast<int64_t>(blockIdx.y) * kTokens;
  if (r0 >= rows) return;
  const int64_t ra = imin(r0 + g, rows - 1), rb = imin(r0 + g + 8, rows - 1);  // clamped loads
  const uint32_t* wa = reinterpret_cast<const uint32_t*>(p.w.data + ra * p.w.row_bytes);  // bf16 pairs
  const uint32_t* wb = reinterpret_cast<const uint32_t*>(p.w.data + rb * p.w.row_bytes);
  const int64_t tl = p.T - 1;
  float acc[kNTiles][4];
#pragma unroll
  for (int n = 0; n < kNTiles; ++n) acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.0f;
  for (int64_t k0 = 0; k0 < p.w.cols; k0 += 16) {
    const int64_t kp = k0 / 2 + q;  // pair index of k0 + 2q
    const uint32_t a0 = wa[kp], a1 = wb[kp], a2 = wa[kp + 4], a3 = wb[kp + 4];
#pragma unroll
    for (int n = 0; n < kNTiles; ++n) {
      if (t0 + 8 * n >= p.T) break;  // warp-uniform
      const float* xr = p.xf + imin(t0 + 8 * n + g, tl) * p.ld_xf + k0 + 2 * q;
      uint32_t b0[3], b1[3];
      split_bf16x2(*reinterpret_cast<const float2*>(xr), b0);
      split_bf16x2(*reinterpret_cast<const float2*>(xr + 8), b1);
#pragma unroll
      for (int i = 0; i < 3; ++i) mma_bf16(acc[n], a0, a1, a2, a3, b0[i], b1[i]);
    }
  }
  const float scale = p.w.slab_scale ? p.w.slab_scale[0] : 1.0f;
#pragma unroll
  for (int n = 0; n < kNTiles; ++n) {
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int64_t r = r0 + g + (j >= 2 ? 8 : 0);
      const int64_t t = t0 + 8 * n + 2 * q + (j & 1);
      if (r >= rows || t >= p.T) continue;
      const float v = __fmul_rn(acc[n][j], scale);
      float* out = p.y + t * p.ld_y + r;
      *out = p.add_to_y ? __fadd_rn(*out, v) : v;
    }
  }
}

}  // namespace

// --- launchers / dispatch

void gemm_run(const GemmParams& p, cudaStream_t s) {
  if (p.T == 0 || p.w.slab_rows == 0) return;
  const int64_t gy = ceil_div(p.T, kTokens);
  if (gy > 65535) fail("gemm: ", p.T, " tokens exceed the grid");
  const dim3 grid(static_cast<unsigned>(ceil_div(p.w.slab_rows, kWarps * kRowsPerWarp)), static_cast<unsigned>(gy));
  switch (p.w.type) {
    case DType::Q8_0: launch_kernel("gemm_kernel", gemm_kernel<3>, grid, 32 * kWarps, 0, s, p); break;
    case DType::NVFP4: launch_kernel("gemm_kernel", gemm_kernel<4>, grid, 32 * kWarps, 0, s, p); break;
    case DType::BF16:
      if (p.w.cols % 16 != 0 || p.ld_xf % 2 != 0 || p.xf == nullptr)
        fail("gemm: BF16 needs cols a multiple of 16 (", p.w.cols, ") and f32 activations with an even stride (", p.ld_xf, ")");
      launch_kernel("gemm_bf16_kernel", gemm_bf16_kernel, grid, 32 * kWarps, 0, s, p);
      break;
    default: fail("gemm: weight type ", dtype_name(p.w.type), " has no tensor-core kernel (Q8_0, NVFP4, BF16)");
  }
}

}  // namespace memra::cuda
