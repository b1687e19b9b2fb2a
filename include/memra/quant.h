// memra/quant.h — block formats as numeric contracts: quantize, dequantize, and the exact dot
// products the GPU kernels must reproduce bit for bit.
//
// Everything here is scalar C++ and deliberately plain: it is the specification a kernel is
// tested against (test/ops compares kernels with these functions, bitwise for the dots). The
// maths, the choices where memra differs from ggml, and why, are in docs/quant.md.
//
// Block layouts are ggml's (GGUF files carry them unchanged):
//   Q8_0   32 values, 34 B: fp16 d, int8 qs[32];               x[j] = d * qs[j]
//   Q8_1   32 values, 36 B: fp16 d, fp16 s, int8 qs[32];        x[j] = d * qs[j], s = fp16(d*Σqs)
//   NVFP4  64 values, 36 B: ue4m3 d[4] (one per 16), qs[32];   sub-block s, j in 0..7:
//            x[16s+j] = e2m1(qs[8s+j] & 15) * ue4m3(d[s]),  x[16s+j+8] = e2m1(qs[8s+j] >> 4) * ...
//          (no per-tensor scale inside; the tensor's f32 "<name>.scale" multiplies outside)
//   MXFP4  32 values, 17 B: e8m0 e, qs[16];                     j in 0..15:
//            x[j] = e2m1(qs[j] & 15) * 2^(e-127),  x[j+16] = e2m1(qs[j] >> 4) * 2^(e-127)
//   Fp4Act 64 values, 36 B: NVFP4's layout, for W4A4 activations (per-16 ue4m3 scales chosen
//          dynamically, no per-tensor scale).
//
// THE DOT CONTRACT (every dot_* below):
//   1. The row splits into units: a 32-value block for Q8_0 x Q8_1 and MXFP4 x Q8_1, a 16-value
//      sub-block for NVFP4 (whose scale changes every 16 values).
//   2. Per unit u: isum_u = Σ int8 x int8 in int32, exact (order irrelevant). E2M1 operands
//      enter as e2m1_doubled() (2*e2m1, an exact int8), their scales as the *_half() decodes.
//   3. Per unit: c_u = f32(scale_w * scale_a) — exact for every pair used here (at most 11+11
//      significant bits) — then p_u = f32(c_u * f32(isum_u)): one rounding per unit.
//   4. The partials combine in DotOrder (accumulate_partials):
//        warp32:     lane[l] = +0.0f for l in 0..31; for u = 0, 1, ...: lane[u % 32] += p_u;
//                    then for off = 16, 8, 4, 2, 1: lane[l] = lane[l] + lane[l + off], l < off;
//                    result lane[0]. One warp per row, a lane per unit strided by 32, then a
//                    shuffle-xor butterfly (f32 + is commutative, so xor and this tree agree).
//        sequential: acc = +0.0f; acc += p_u for u = 0, 1, ...  (a GEMM's K loop).
//   The per-tensor NVFP4 scale is not applied (the caller multiplies, as ggml does).
//
// THE PAIR32 VARIANT (dot_nvfp4_q8_1_pair32; the arm nvfp4_dot = pair32): steps 1 and 3 differ.
//   1'. Unit b = q8_1 block b: 32 values, NVFP4 sub-blocks 2b and 2b + 1 (b/2's s = 2(b%2), +1).
//   3'. e_0 = f32(sw_0 * f32(isum_0)), exact (4 x 15 significant bits, no underflow);
//       t_b = fma(sw_1, f32(isum_1), e_0), one rounding; p_b = f32(t_b * fp16(a.d)), one rounding.
//   Two roundings per 32 values where W4A8 has one per 16, and one activation-scale product
//   instead of two: fewer f32 operations per unit (docs/quant.md says where that pays).
//
// provides: BlockQ8_0, BlockQ8_1, BlockNvfp4, BlockMxfp4, BlockFp4Act, dequantize_row,
//           quantize_row, quantize_row_{q8_0,q8_1,nvfp4,mxfp4,fp4act}, nvfp4_tensor_scale,
//           quantize_nvfp4_tensor, DotOrder, accumulate_partials, dot_q8_0_q8_1,
//           dot_nvfp4_q8_1, dot_nvfp4_q8_1_pair32, dot_nvfp4_fp4act, dot_mxfp4_q8_1, dot_ref
#pragma once

#include <cstdint>

#include "memra/dtype.h"

namespace memra {

inline constexpr int64_t kQ8BlockSize = 32;     // Q8_0, Q8_1
inline constexpr int64_t kNvfp4BlockSize = 64;  // NVFP4 and Fp4Act blocks
inline constexpr int64_t kNvfp4SubBlock = 16;   // values per ue4m3 scale
inline constexpr int64_t kMxfp4BlockSize = 32;

struct BlockQ8_0 {
  uint16_t d;  // fp16 scale
  int8_t qs[32];
};
struct BlockQ8_1 {
  uint16_t d;  // fp16 scale
  uint16_t s;  // fp16(d * Σqs): memra's rule (docs/quant.md "q8_1 s"), not ggml-cuda's Σx
  int8_t qs[32];
};
struct BlockNvfp4 {
  uint8_t d[4];    // ue4m3 scale of values 16s..16s+15
  uint8_t qs[32];  // sub-block s in qs[8s..8s+7]: low nibble value j, high nibble value j+8
};
struct BlockMxfp4 {
  uint8_t e;       // e8m0 scale 2^(e-127)
  uint8_t qs[16];  // low nibble value j, high nibble value j+16
};
// W4A4 activations: NVFP4's layout so that weight block b pairs with activation block b.
struct BlockFp4Act {
  uint8_t d[4];    // ue4m3(amax_16 / 6)
  uint8_t qs[32];  // as BlockNvfp4::qs
};
static_assert(sizeof(BlockQ8_0) == 34 && alignof(BlockQ8_0) == 2);
static_assert(sizeof(BlockQ8_1) == 36 && alignof(BlockQ8_1) == 2);
static_assert(sizeof(BlockNvfp4) == 36 && sizeof(BlockMxfp4) == 17 && sizeof(BlockFp4Act) == 36);

// --- whole rows -----------------------------------------------------------------------------

// n elements (a multiple of the type's block size) of storage type `type` to f32. Supported:
// F32, F16, BF16, Q8_0, Q8_1, NVFP4 (without the per-tensor scale), MXFP4, F8_E4M3, F8_E8M0 (NaN
// for 0xFF), I8, U8, I16, I32, I64 (integers as values, rounded to nearest f32 above 2^24), F64
// (rounded to nearest f32). Fails with memra::Error naming the type and n for a bad n or an unsupported
// type.
void dequantize_row(DType type, const void* src, float* dst, int64_t n);

// f32 to storage type with the reference rounding rules below. Supported: F32 (copy), F16,
// BF16, F8_E4M3 (RNE, saturating), Q8_0, Q8_1, NVFP4 (per-tensor scale 1), MXFP4. The block
// formats reject non-finite input (memra::Error naming the element); F16/BF16/F32 carry it.
void quantize_row(DType type, const float* src, void* dst, int64_t n);

// Per block of 32: amax = max|x|; d = fp16(amax / 127); q = d == 0 ? 0
// : clamp(roundf(x / f32(d)), -127, 127) (roundf: half away from zero). Dividing by the stored,
// rounded d (ggml divides by the unrounded one) bounds |x - d*q| by d*(1/2 + 2^-17) wherever d
// is an fp16 normal (2^-17: the f32 rounding of x/d). Fails if amax / 127 rounds to fp16 inf.
void quantize_row_q8_0(const float* x, BlockQ8_0* y, int64_t n);
// As Q8_0, plus s = fp16(f32(d) * f32(Σq)) (the product is exact in f32; s is inf when
// |d*Σq| > 65504 — no memra dot reads s, it exists for ggml's offset formats).
void quantize_row_q8_1(const float* x, BlockQ8_1* y, int64_t n);

// NVFP4 against a per-tensor scale s2 (finite, > 0). Per 16 values: amax = max|x|;
// code = f32_to_ue4m3(amax / (6 * s2)); D = f32(ue4m3_to_f32(code) * s2);
// q = D == 0 ? 0 : f32_to_e2m1(x / D). Then x ≈ e2m1(q) * ue4m3(code) * s2.
void quantize_row_nvfp4(const float* x, BlockNvfp4* y, int64_t n, float tensor_scale);
// ModelOpt's per-tensor scale: amax / (6 * 448), or 1 when that is not > 0.
float nvfp4_tensor_scale(float amax);
// A [nrows, ncols] row-major tensor: s2 = nvfp4_tensor_scale(max|x|), every row quantized
// against it into dst (nrows * ncols/64 blocks), and s2 returned (GGUF "<name>.scale").
float quantize_nvfp4_tensor(const float* src, void* dst, int64_t nrows, int64_t ncols);

// MXFP4 (OCP MX rule): amax == 0 -> e = 0, all codes 0; else e = floor(log2 amax) - 2 + 127
// (floor from the exponent, not log2f), clamped to [0, 254]; q = f32_to_e2m1(x / 2^(e-127)).
void quantize_row_mxfp4(const float* x, BlockMxfp4* y, int64_t n);

// W4A4 activations, the dynamic per-16 rule (no per-tensor activation scale):
// code = f32_to_ue4m3(amax / 6); S = ue4m3_to_f32(code); q = S == 0 ? 0 : f32_to_e2m1(x / S).
// Range: sub-blocks with amax > 6*448 = 2688 saturate; amax <= 6 * 2^-10 quantizes to zeros.
void quantize_row_fp4act(const float* x, BlockFp4Act* y, int64_t n);
void dequantize_row_fp4act(const BlockFp4Act* x, float* y, int64_t n);

// --- dot products: the contract above -------------------------------------------------------

enum class DotOrder { warp32, sequential };

// Step 4 of the contract over p[0..count).
float accumulate_partials(const float* p, int64_t count, DotOrder order);

// n values each; n a multiple of 32 (Q8_0 x Q8_1, MXFP4 x Q8_1) or 64 (NVFP4 ones).
// W8A8: unit = block i; c = fp16(w.d) * fp16(a.d).
float dot_q8_0_q8_1(const BlockQ8_0* w, const BlockQ8_1* a, int64_t n,
                    DotOrder order = DotOrder::warp32);
// W4A8: unit = sub-block s of weight block i, against q8_1 block 2i + s/2, values
// (s%2)*16 .. +15; isum = Σ e2m1_doubled(w) * a.qs; c = ue4m3_to_f32_half(w.d[s]) * fp16(a.d).
float dot_nvfp4_q8_1(const BlockNvfp4* w, const BlockQ8_1* a, int64_t n,
                     DotOrder order = DotOrder::warp32);
// W4A8 under the pair32 variant (above): unit = q8_1 block b, the weight's sub-blocks 2b, 2b + 1
// (scales sw_k = ue4m3_to_f32_half); p_b = fp16(a.d) * fma(sw_1, isum_1, sw_0 * isum_0).
float dot_nvfp4_q8_1_pair32(const BlockNvfp4* w, const BlockQ8_1* a, int64_t n, DotOrder order = DotOrder::warp32);
// W4A4: unit = sub-block s of block i of both; isum = Σ e2m1_doubled(w) * e2m1_doubled(a)
// (|isum| <= 16*144); c = ue4m3_to_f32_half(w.d[s]) * ue4m3_to_f32_half(a.d[s]).
float dot_nvfp4_fp4act(const BlockNvfp4* w, const BlockFp4Act* a, int64_t n,
                       DotOrder order = DotOrder::warp32);
// MXFP4 x Q8_1: unit = block i; isum = Σ e2m1_doubled(w) * a.qs; c = e8m0_to_f32_half(w.e) *
// fp16(a.d).
float dot_mxfp4_q8_1(const BlockMxfp4* w, const BlockQ8_1* a, int64_t n,
                     DotOrder order = DotOrder::warp32);

// Σ w[i]*a[i] with products and sum in f64, sequentially: the reference the contracts are
// measured against in tests (on dequantized operands the products are exact).
double dot_ref(const float* w, const float* a, int64_t n);

}  // namespace memra
