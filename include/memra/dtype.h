// memra/dtype.h — tensor element/block types and their storage traits.
//
// Ids are ggml's (llama.cpp `enum ggml_type`) so a GGUF type id converts with a range check and
// no table; types that ggml lacks but safetensors has (F8_E4M3, F8_E8M0, U8) take ids above
// ggml's range.
// The scalar conversions between these encodings and float (fp16, bf16, e4m3, e2m1) live in the
// second half of this header: they are the numeric contracts every kernel reproduces.
//
// provides: DType, TypeTraits, type_traits, dtype_from_ggml, dtype_name, row_bytes
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace memra {

// The ids read as ggml's table.
// clang-format off
enum class DType : uint32_t {
  F32 = 0, F16 = 1, Q4_0 = 2, Q4_1 = 3, Q5_0 = 6, Q5_1 = 7, Q8_0 = 8, Q8_1 = 9,
  Q2_K = 10, Q3_K = 11, Q4_K = 12, Q5_K = 13, Q6_K = 14, Q8_K = 15,
  I8 = 24, I16 = 25, I32 = 26, I64 = 27, F64 = 28, BF16 = 30, MXFP4 = 39, NVFP4 = 40,
  // not ggml types (safetensors only)
  F8_E4M3 = 1000, U8 = 1001,
  F8_E8M0 = 1002,  // a bare power of two 2^(e-127) (block scales of FP8 / FP4 releases)
};
// clang-format on

struct TypeTraits {
  std::string_view name;  // ggml's spelling ("q8_0", "nvfp4") or safetensors' for the extras
  int64_t block_elems;    // elements per block (1 for plain types)
  int64_t block_bytes;    // bytes per block
  bool quantized;         // needs general.quantization_version in GGUF
  bool supported;         // memra can dequantize it (others are readable but not computable)
};

// nullopt for ids that are not ggml types (gaps, removed types, ids >= GGML_TYPE_COUNT = 43).
std::optional<DType> dtype_from_ggml(uint32_t id);
const TypeTraits& type_traits(DType t);
inline std::string_view dtype_name(DType t) { return type_traits(t).name; }

// Bytes of a row of `n` elements; fails (memra::Error) unless n is a multiple of the block size
// or when the result would overflow int64.
int64_t row_bytes(DType t, int64_t n);

}  // namespace memra

// ================================================================================================
// Scalar conversions between the storage encodings and f32.
//
// These are numeric contracts: a GPU kernel that decodes or encodes one of these formats must
// give the same bits as the function here. All are header-only and constexpr so that device
// code can mirror them line by line and tests can evaluate them at compile time. Encoders round
// to nearest, ties to even (RNE) in the target format; the saturation and NaN rules of each are
// stated at the function. docs/quant.md has the maths.
//
// provides: fp16_to_f32, f32_to_fp16, bf16_to_f32, f32_to_bf16, e4m3_to_f32, f32_to_e4m3,
//           ue4m3_to_f32, ue4m3_to_f32_half, f32_to_ue4m3, e2m1_to_f32, e2m1_doubled,
//           f32_to_e2m1, e8m0_to_f32, e8m0_to_f32_half
// ================================================================================================

#include <bit>

namespace memra {

namespace dtype_detail {

// v >> s rounded to nearest, ties to even (0 < s < 32). The rounding step every encoder shares.
constexpr uint32_t shift_rne(uint32_t v, int s) {
  const uint32_t q = v >> s;
  const uint32_t r = v & ((uint32_t{1} << s) - 1);
  const uint32_t half = uint32_t{1} << (s - 1);
  return q + ((r > half || (r == half && (q & 1))) ? 1 : 0);
}

// Encodes a finite, non-negative f32 (bits `a`, sign clear) into an unsigned minifloat with
// `mbits` mantissa bits and exponent bias `bias` (no inf/NaN codes are produced: the caller has
// clamped `a` to the format's largest finite value). The result's bit layout is
// (biased exponent << mbits) | mantissa, so a mantissa carry steps the exponent naturally and
// the largest subnormal rounds up into the smallest normal.
constexpr uint32_t encode_minifloat(uint32_t a, int mbits, int bias) {
  const int e32 = static_cast<int>(a >> 23);
  if (e32 == 0) return 0;  // f32 zero or subnormal: far below every minifloat's quantum
  const int e = e32 - 127;  // unbiased exponent of a
  const uint32_t m = (a & 0x7fffffu) | 0x800000u;
  const int emin = 1 - bias;  // smallest normal exponent of the target
  if (e < emin) {
    // Subnormal target: count quanta of 2^(emin - mbits); m carries 2^(e - 23).
    const int s = 23 - mbits + (emin - e);
    if (s > 24) return 0;  // a < half a quantum (m < 2^24 <= half)
    return shift_rne(m, s);
  }
  // Normal target: drop 23 - mbits mantissa bits of (exponent | mantissa) in one RNE step.
  const uint32_t biased = static_cast<uint32_t>(e + bias);
  return shift_rne((biased << 23) | (m & 0x7fffffu), 23 - mbits);
}

}  // namespace dtype_detail

// --- IEEE binary16 ------------------------------------------------------------------------------

// Exact (every fp16 is an f32). NaN payloads move to the top of the f32 mantissa, so
// f32_to_fp16(fp16_to_f32(h)) == h for all 65536 patterns.
constexpr float fp16_to_f32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t e = (h >> 10) & 0x1fu;
  const uint32_t m = h & 0x3ffu;
  if (e == 0x1f) return std::bit_cast<float>(sign | 0x7f800000u | (m << 13));
  if (e == 0) {
    const float mag = static_cast<float>(m) * 0x1p-24f;  // subnormal: m quanta of 2^-24, exact
    return sign ? -mag : mag;
  }
  return std::bit_cast<float>(sign | ((e + 112u) << 23) | (m << 13));
}

// RNE; |x| >= 65520 (the midpoint above 65504, which ties to the even code = inf) gives ±inf;
// subnormals are rounded, not flushed; NaN keeps its sign and the top 10 payload bits (the
// quiet bit is set when those are all zero, so a NaN never becomes inf).
constexpr uint16_t f32_to_fp16(float x) {
  const uint32_t u = std::bit_cast<uint32_t>(x);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) {
    uint16_t pay = static_cast<uint16_t>((a >> 13) & 0x3ffu);
    if (pay == 0) pay = 0x200;
    return static_cast<uint16_t>(sign | 0x7c00u | pay);
  }
  if (a >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow and inf
  return static_cast<uint16_t>(sign | dtype_detail::encode_minifloat(a, 10, 15));
}

// --- bfloat16 -----------------------------------------------------------------------------------

constexpr float bf16_to_f32(uint16_t b) { return std::bit_cast<float>(static_cast<uint32_t>(b) << 16); }

// RNE on the upper 16 bits: (u + 0x7fff + ((u >> 16) & 1)) >> 16, which overflows to inf the way
// IEEE does. NaN: keeps sign and top payload bits and sets the quiet bit (0x40), as ggml does.
constexpr uint16_t f32_to_bf16(float x) {
  const uint32_t u = std::bit_cast<uint32_t>(x);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);
  return static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

// --- FP8 E4M3 (OCP "E4M3FN": bias 7, no inf, S.1111.111 is NaN, max ±448) -----------------------

constexpr float e4m3_to_f32(uint8_t b) {
  const uint32_t sign = static_cast<uint32_t>(b & 0x80u) << 24;
  const uint32_t e = (b >> 3) & 0xfu;
  const uint32_t m = b & 0x7u;
  if (e == 0xf && m == 0x7) return std::bit_cast<float>(sign | 0x7fc00000u);
  if (e == 0) {
    const float mag = static_cast<float>(m) * 0x1p-9f;  // subnormal quantum 2^-9
    return sign ? -mag : mag;
  }
  return std::bit_cast<float>(sign | ((e + 120u) << 23) | (m << 20));
}

// RNE with saturation, bit-identical to CUDA's __nv_cvt_float_to_fp8(x, __NV_SATFINITE,
// __NV_E4M3) for every f32 (checked on sm_90 over 2^28 inputs): |x| > 448, including ±inf, gives
// ±448 (0x7E / 0xFE); every NaN gives 0x7F (sign dropped, as CUDA does); -0.0 gives 0x80, so
// encode(decode(b)) == b for every non-NaN byte.
constexpr uint8_t f32_to_e4m3(float x) {
  const uint32_t u = std::bit_cast<uint32_t>(x);
  const uint8_t sign = static_cast<uint8_t>((u >> 24) & 0x80u);
  const uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return 0x7f;
  if (a > 0x43e00000u) return static_cast<uint8_t>(sign | 0x7eu);  // > 448
  return static_cast<uint8_t>(sign | dtype_detail::encode_minifloat(a, 3, 7));
}

// --- UE4M3: unsigned E4M3, the NVFP4 block scale ------------------------------------------------
// Bit 7 is not part of the code (the GGUF converter strips the E4M3 sign; memra ignores it rather
// than reading a stray bit as a negative or 480-valued scale). Code 0x7F (E4M3's NaN) decodes
// to 0, as ggml does, so a block carrying it contributes nothing.

constexpr float ue4m3_to_f32(uint8_t b) {
  const uint8_t c = b & 0x7fu;
  return c == 0x7f ? 0.0f : e4m3_to_f32(c);
}

// Half the scale: the factor that goes with the doubled e2m1 integers of e2m1_doubled(), so
// that e2m1_doubled(q) * ue4m3_to_f32_half(d) == e2m1_to_f32(q) * ue4m3_to_f32(d) exactly
// (halving is exact: the smallest non-zero scale is 2^-9, far above f32's subnormals).
constexpr float ue4m3_to_f32_half(uint8_t b) { return ue4m3_to_f32(b) * 0.5f; }

// RNE to the unsigned code; x <= 0, -0.0 and NaN give 0 (a scale is never negative), x > 448
// (and +inf) saturate to 0x7E. Never returns 0x7F.
constexpr uint8_t f32_to_ue4m3(float x) {
  if (!(x > 0.0f)) return 0;
  return static_cast<uint8_t>(f32_to_e4m3(x) & 0x7fu);
}

// --- E2M1 (FP4): sign | 2 exponent bits (bias 1) | 1 mantissa bit; ±{0,0.5,1,1.5,2,3,4,6} ----

// The e2m1 value times two, an exact small integer: {0,1,2,3,4,6,8,12} and negatives for codes
// 8..15 (code 8 is -0 and gives 0). Integer dot products run on these (ggml's kvalues_mxfp4).
constexpr int8_t e2m1_doubled(uint8_t code) {
  constexpr int8_t kMag[8] = {0, 1, 2, 3, 4, 6, 8, 12};
  const int8_t v = kMag[code & 7u];
  return (code & 8u) ? static_cast<int8_t>(-v) : v;
}

// Only the low nibble is read. Code 8 gives -0.0f.
constexpr float e2m1_to_f32(uint8_t code) {
  const float mag = static_cast<float>(e2m1_doubled(code & 7u)) * 0.5f;
  return (code & 8u) ? -mag : mag;
}

// RNE onto the e2m1 grid with saturation at ±6: |x| <= 0.25 -> 0, < 0.75 -> 0.5, <= 1.25 -> 1,
// < 1.75 -> 1.5, <= 2.5 -> 2, < 3.5 -> 3, <= 5 -> 4, else 6 (ModelOpt's bounds; every tie goes
// to the even code). The code's sign is x's sign bit (-0.1 and -0.0 give code 8); NaN gives
// code 7. Bit-identical to CUDA's __nv_cvt_float_to_fp4(x, __NV_E2M1, cudaRoundNearest) for
// every f32 (checked on sm_90 over 2^28 inputs), so a kernel may use either.
constexpr uint8_t f32_to_e2m1(float x) {
  const uint32_t u = std::bit_cast<uint32_t>(x);
  if ((u & 0x7fffffffu) > 0x7f800000u) return 7;
  const float a = std::bit_cast<float>(u & 0x7fffffffu);
  uint8_t c;
  if (a <= 0.25f) c = 0;
  else if (a < 0.75f) c = 1;
  else if (a <= 1.25f) c = 2;
  else if (a < 1.75f) c = 3;
  else if (a <= 2.5f) c = 4;
  else if (a < 3.5f) c = 5;
  else if (a <= 5.0f) c = 6;
  else c = 7;
  return static_cast<uint8_t>((u >> 31) ? (c | 8u) : c);
}

// --- E8M0: the MXFP4 block scale, a bare biased exponent ----------------------------------------

// 2^(e-127); e = 0xFF is NaN (OCP MX v1.0). e = 0 gives 2^-127, an exact f32 subnormal.
constexpr float e8m0_to_f32(uint8_t e) {
  if (e == 0xff) return std::bit_cast<float>(0x7fc00000u);
  if (e == 0) return std::bit_cast<float>(0x00400000u);
  return std::bit_cast<float>(static_cast<uint32_t>(e) << 23);
}

// 2^(e-128): the scale that goes with e2m1_doubled() (ggml's GGML_E8M0_TO_FP32_HALF), exact for
// every e (e = 0 and 1 are the subnormals 2^-128 and 2^-127). e = 0xFF is NaN here too, where
// ggml would give 2^127: a block with the NaN scale must not decode to finite numbers.
constexpr float e8m0_to_f32_half(uint8_t e) {
  if (e == 0xff) return std::bit_cast<float>(0x7fc00000u);
  if (e < 2) return std::bit_cast<float>(0x00200000u << e);
  return std::bit_cast<float>(static_cast<uint32_t>(e - 1) << 23);
}

}  // namespace memra
