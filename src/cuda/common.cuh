// src/cuda/common.cuh — device code every memra kernel family shares (types in dmat.h): block
// decoders that mirror memra/dtype.h and memra/quant.h bit for bit, warp
// reductions in the fixed order of the dot contract, and the launch check.
//
// Checks: memra/cuda_check.h (MEMRA_CUDA_CHECK); launches: cuda/launch.cuh (launch_kernel).
//
// provides: dmat_elem, dev_fp16, dev_bf16, dev_ue4m3_half, ue4m3_x2p8, prmt, e2m1x2_seq8, e2m1x2_seq4,
//           dev_e2m1x2, warp_sum_xor, warp_max, cp_async4, cp_async16, cp_async_commit,
//           cp_async_wait_group, cp_async_wait_all, MEMRA_SM90_ONLY, mbar_init, mbar_init_fence, mbar_expect_tx,
//           mbar_arrive_expect_tx, mbar_arrive, mbar_wait, bulk_copy, quantize_block_q8_1, silu_f,
//           mma_k32, mma_k16, kMmaMagic, mma_isum
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/dmat.h"
#include "memra/cuda_check.h"
#include "memra/dtype.h"
#include "memra/error.h"

namespace memra::cuda {

// --- decoders (device twins of memra/dtype.h) ---------------------------------------------

__device__ __forceinline__ float dev_fp16(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 0x1f) return __uint_as_float(sign | 0x7f800000u | (m << 13));
  if (e == 0) {
    const float mag = __fmul_rn(static_cast<float>(m), 0x1p-24f);
    return sign ? -mag : mag;
  }
  return __uint_as_float(sign | ((e + 112u) << 23) | (m << 13));
}
// The hardware conversion (one instruction) for scales on the mat-vec path: fp16 -> f32 is exact,
// so it equals dev_fp16 on every non-NaN input (dev_fp16 keeps NaN payloads bit for bit, which
// the dequantisation op test checks; a NaN scale makes the dot NaN either way).
__device__ __forceinline__ float dev_fp16_fast(uint16_t h) { return __half2float(__ushort_as_half(h)); }
__device__ __forceinline__ float dev_bf16(uint16_t b) { return __uint_as_float(static_cast<uint32_t>(b) << 16); }

// ue4m3_to_f32_half: half of the unsigned E4M3 scale (code 0x7F decodes to 0).
__device__ __forceinline__ float dev_ue4m3_half(uint8_t b) {
  const uint32_t c = b & 0x7fu;
  // normal (e > 0): ((e + 120) << 23 | m << 20) halved = (c << 20) + (119 << 23), exactly;
  // e == 0: m * 2^-9 / 2 = m * 2^-10 (exact in f32); 0x7F: 0.
  const float normal = __uint_as_float((c << 20) + (119u << 23));
  const float sub = __fmul_rn(static_cast<float>(c & 7u), 0x1p-10f);
  return c == 0x7fu ? 0.0f : (c < 8u ? sub : normal);
}

// e2m1_doubled: {0,1,2,3,4,6,8,12} with the sign of bit 3.
__device__ __forceinline__ int dev_e2m1x2(uint32_t code) {
  const int mag = (0xC8643210u >> (4 * (code & 7u))) & 0xf;  // nibble table 0,1,2,3,4,6,8,12
  return (code & 8u) ? -mag : mag;
}

// PTX prmt (default mode) as one instruction: byte n of the result is byte sel[4n+2:4n] of
// {b, a}, or the sign of that byte replicated when sel[4n+3] is set. __byte_perm documents 3-bit
// selectors, so nvcc masks every selector it cannot prove clean (an extra AND per permute on the
// mat-vec's hottest path); here bit 3 is the caller's: clear, or set on purpose (mmvq.cu's sign
// split of NVFP4 codes).
__device__ __forceinline__ uint32_t prmt(uint32_t a, uint32_t b, uint32_t sel) {
  uint32_t d;
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(sel));
  return d;
}

// Planar NVFP4 (cuda/planar.cuh): the eight nibbles of w are values 0..7 in order. lo = values
// 0..3, hi = values 4..7, as packed int8x4 of 2*e2m1. Per four nibbles: a positive and a negative
// 8-entry table lookup on the magnitude code (selectors masked to 3 bits), then a third permute
// picks each byte from the negative lookup where the code's sign bit is set.
__device__ __forceinline__ void e2m1x2_seq8(uint32_t w, int& lo, int& hi) {
  const uint32_t idx = w & 0x77777777u, idx_hi = idx >> 16;
  const uint32_t pick = ((w >> 1) & 0x44444444u) | 0x32103210u;  // byte j: j, or 4 + j if negative
  lo = static_cast<int>(prmt(prmt(0x03020100u, 0x0C080604u, idx), prmt(0xFDFEFF00u, 0xF4F8FAFCu, idx), pick));
  hi = static_cast<int>(prmt(prmt(0x03020100u, 0x0C080604u, idx_hi), prmt(0xFDFEFF00u, 0xF4F8FAFCu, idx_hi), pick >> 16));
}
// The four nibbles in the low 16 bits of w (values in order), as above.
__device__ __forceinline__ int e2m1x2_seq4(uint32_t w) {
  const uint32_t idx = w & 0x7777u;
  const uint32_t pick = ((w >> 1) & 0x4444u) | 0x3210u;
  return static_cast<int>(prmt(prmt(0x03020100u, 0x0C080604u, idx), prmt(0xFDFEFF00u, 0xF4F8FAFCu, idx), pick));
}

// A canonical UE4M3 scale (bit 7 clear, no 0x7F: planar.cuh) times 2^-8, exactly: its 7 bits
// placed as the top of an f32's exponent and mantissa fields read 2^(e-127) (1 + m/8) (normal) or
// m 2^-129 (e = 0: an f32 subnormal), both 2^-112 times the wanted value, so one multiply by
// 2^112 finishes (exact: a power of two, normal result; this code is never built with
// flush-to-zero). Two full-rate instructions, where an fp16 route takes a quarter-rate conversion.
__device__ __forceinline__ float ue4m3_x2p8(uint32_t c) { return __fmul_rn(__uint_as_float(c << 20), 0x1p112f); }


// --- reductions in the contract's order -------------------------------------------------------

// quant.h DotOrder::warp32 step 4: for off = 16..1, lane l adds lane l^off. f32 + is
// commutative, so every lane ends with the same bits as the tree in quant.h.
__device__ __forceinline__ float warp_sum_xor(float v) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) v = __fadd_rn(v, __shfl_xor_sync(0xffffffffu, v, off));
  return v;
}
__device__ __forceinline__ int warp_isum(int v) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
  return v;
}
__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, off));
  return v;
}

// The block's maximum / sum of one value per thread: warp trees, then the warps' results in warp
// order (a fixed order: the same bits every run, whatever the block size). `red` is 32 floats of
// shared scratch; every thread gets the result, and the barriers inside also order the block's
// earlier shared-memory writes before its later reads.
__device__ __forceinline__ float block_max_ordered(float v, float* red) {
  v = warp_max(v);
  if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = v;
  __syncthreads();
  float m = -INFINITY;
  for (int w = 0; w < static_cast<int>(blockDim.x >> 5); ++w) m = fmaxf(m, red[w]);
  __syncthreads();
  return m;
}
__device__ __forceinline__ float block_sum_ordered(float v, float* red) {
  v = warp_sum_xor(v);
  if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = v;
  __syncthreads();
  float t = 0.0f;
  for (int w = 0; w < static_cast<int>(blockDim.x >> 5); ++w) t = __fadd_rn(t, red[w]);
  __syncthreads();
  return t;
}

// fp16 RNE of a finite f32 (quant.h's f32_to_fp16 for the values q8_1 produces).
__device__ __forceinline__ uint16_t dev_f32_to_fp16(float x) { return __half_as_ushort(__float2half_rn(x)); }

// --- asynchronous copies ---------------------------------------------------------------------

// 4 or 16 bytes global -> shared without a register (the copy is in flight while the thread goes
// on; 16: both addresses 16-byte aligned); cp_async_commit closes the thread's group of copies,
// cp_async_wait_group<N> waits for all but the newest N groups, cp_async_wait_all for all (then a
// __syncthreads() makes every thread's copies visible to the block).
__device__ __forceinline__ void cp_async4(void* smem, const void* gmem) {
  const unsigned sa = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" ::"r"(sa), "l"(gmem) : "memory");
}
__device__ __forceinline__ void cp_async16(void* smem, const void* gmem) {
  const unsigned sa = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(sa), "l"(gmem) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int N>
__device__ __forceinline__ void cp_async_wait_group() {
  asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
}
__device__ __forceinline__ void cp_async_wait_all() { asm volatile("cp.async.wait_group 0;" ::: "memory"); }

// --- bulk copies completing on an mbarrier (sm_90: the copy engine, no thread per 16 bytes) ----
//
// A stage of shared memory is filled by bulk_copy (one instruction per contiguous run: 16-byte
// aligned addresses, a size a multiple of 16) and each copy's bytes count down the transaction
// count of the stage's mbarrier; a phase of the barrier completes when its expected arrivals have
// arrived AND every expected byte has landed. mbar_expect_tx adds bytes to the current phase
// without arriving (copies issued before their phase's arrival), mbar_arrive_expect_tx arrives and
// adds them; mbar_wait(bar, parity) returns once the phase of that parity has completed (the k-th
// use of a barrier waits for parity k & 1). After the barriers' init, mbar_init_fence and a
// __syncthreads() make them visible to the copy engine. Compiled for an older architecture the
// sm_90 forms trap (MEMRA_SM90_ONLY): a launcher checks the kernel's binary version first.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define MEMRA_SM90_ONLY(...) __VA_ARGS__
#else
#define MEMRA_SM90_ONLY(...) __trap()
#endif
__device__ __forceinline__ unsigned smem_addr(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void mbar_init(uint64_t* bar, unsigned arrivals) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_addr(bar)), "r"(arrivals) : "memory");
}
__device__ __forceinline__ void mbar_init_fence() {
  MEMRA_SM90_ONLY(asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory"));
}
__device__ __forceinline__ void mbar_expect_tx(uint64_t* bar, unsigned bytes) {
  MEMRA_SM90_ONLY(
      asm volatile("mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [%0], %1;" ::"r"(smem_addr(bar)), "r"(bytes)
                   : "memory"));
}
__device__ __forceinline__ void mbar_arrive_expect_tx(uint64_t* bar, unsigned bytes) {
  MEMRA_SM90_ONLY(
      asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_addr(bar)), "r"(bytes)
                   : "memory"));
}
__device__ __forceinline__ void mbar_arrive(uint64_t* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(smem_addr(bar)) : "memory");
}
__device__ __forceinline__ void mbar_wait(uint64_t* bar, unsigned parity) {
  unsigned done = 0;
  do {
    MEMRA_SM90_ONLY(
        asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
                     : "=r"(done)
                     : "r"(smem_addr(bar)), "r"(parity)
                     : "memory"));
  } while (!done);
}
__device__ __forceinline__ void bulk_copy(void* smem, const void* gmem, unsigned bytes, uint64_t* bar) {
  MEMRA_SM90_ONLY(asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(smem_addr(smem)),
      "l"(gmem), "r"(bytes), "r"(smem_addr(bar))
      : "memory"));
}

// One q8_1 block from 32 values, one per lane (quant.h quantize_row_q8_1): amax over the block,
// d = fp16(amax / 127), q = d == 0 ? 0 : clamp(roundf(x / f32(d)), -127, 127),
// s = fp16(f32(d) * Σq). Lane 0 writes d and s; every lane writes its q.
__device__ __forceinline__ void quantize_block_q8_1(float x, Q81* out, int lane) {
  const float amax = warp_max(fabsf(x));
  const uint16_t dh = dev_f32_to_fp16(__fdiv_rn(amax, 127.0f));
  const float d = dev_fp16(dh);
  int q = 0;
  if (d != 0.0f) q = static_cast<int>(fminf(fmaxf(roundf(__fdiv_rn(x, d)), -127.0f), 127.0f));
  out->qs[lane] = static_cast<int8_t>(q);
  const int sum = warp_isum(q);
  if (lane == 0) {
    out->d = dh;
    out->s = dev_f32_to_fp16(__fmul_rn(d, static_cast<float>(sum)));
  }
}

// --- int8 tensor-core dots (the GEMM and the mat-vec's token tiles)
//
// mma.sync m16n8k32 / m16n8k16 .s8: one unit's exact integer dot (a Q8_0 block, an NVFP4
// sub-block) for 16 weight rows x 8 activation rows, from a zero accumulator in effect. The mma
// accumulates from C = kMmaMagic (the bits of 1.5 * 2^23) instead of 0, so the int32 result read
// as a float is 1.5 * 2^23 + isum exactly (|isum| < 2^22: Q8_0 at most 32 * 127 * 127, NVFP4
// 16 * 12 * 127), and mma_isum's one f32 subtraction gives f32(isum), the value the
// integer-to-float conversion gives, without that quarter-rate instruction.
// Fragments (g = lane / 4, q = lane % 4): A reg j holds 4 consecutive k of row g (+8 for regs 1,
// 3), k0 = 4q (+16 for regs 2, 3 of k32); B reg j 4 consecutive k of column g, k0 = 4q (+16 for
// reg 1); C c0, c1 = row g, columns 2q + {0, 1}; c2, c3 = row g + 8, the same columns.
constexpr int kMmaMagic = 0x4B400000;
__device__ __forceinline__ void mma_k32(int (&c)[4], int a0, int a1, int a2, int a3, int b0, int b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%10,%10,%10,%10};\n"
      : "=r"(c[0]), "=r"(c[1]), "=r"(c[2]), "=r"(c[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1), "r"(kMmaMagic));
}
__device__ __forceinline__ void mma_k16(int (&c)[4], int a0, int a1, int b0) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%7,%7,%7,%7};\n"
               : "=r"(c[0]), "=r"(c[1]), "=r"(c[2]), "=r"(c[3])
               : "r"(a0), "r"(a1), "r"(b0), "r"(kMmaMagic));
}
__device__ __forceinline__ float mma_isum(int c) { return __fsub_rn(__int_as_float(c), 12582912.0f); }

// SiLU as every memra kernel computes it (the row ops, the GDN conv and output norm): one
// definition, so the same operations everywhere.
__device__ __forceinline__ float silu_f(float x) { return __fdiv_rn(x, __fadd_rn(1.0f, expf(-x))); }

// One element of row `row` of a device matrix (planar rows for Q8_0 / NVFP4, cuda/planar.cuh),
// dequantised (shared with tests and the embedding gather).
__device__ __forceinline__ float dmat_elem(const DMat& m, const uint8_t* row, int64_t j) {
  switch (m.type) {
    case DType::F32: return reinterpret_cast<const float*>(row)[j];
    case DType::F16: return dev_fp16(reinterpret_cast<const uint16_t*>(row)[j]);
    case DType::BF16: return dev_bf16(reinterpret_cast<const uint16_t*>(row)[j]);
    case DType::Q8_0: {
      const uint16_t d = reinterpret_cast<const uint16_t*>(row + m.cols)[j / 32];
      return __fmul_rn(dev_fp16(d), static_cast<float>(static_cast<int8_t>(row[j])));
    }
    case DType::NVFP4: {
      const uint8_t byte = row[j / 2];
      const uint32_t code = (j & 1) ? (byte >> 4) : (byte & 0xfu);
      return __fmul_rn(static_cast<float>(dev_e2m1x2(code)), dev_ue4m3_half(row[m.cols / 2 + j / 16]));
    }
    default: return 0.0f;
  }
}

}  // namespace memra::cuda
