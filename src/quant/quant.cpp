// Row quantize / dequantize: the reference rounding rules of memra/quant.h.
// The rules are stated in quant.h and derived in docs/quant.md; this file implements them
// plainly, one block at a time, so that a kernel port can be read against it line by line.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "memra/error.h"
#include "memra/quant.h"

namespace memra {
namespace {

// n must be a non-negative multiple of the block size; the message names the call, the type
// and n so that a caller's wrong row length is visible without a debugger.
int64_t checked_blocks(const char* what, DType type, int64_t n, int64_t block) {
  if (n < 0 || n % block != 0)
    fail(what, "(", dtype_name(type), "): n = ", n, " is not a multiple of the block size ",
         block);
  return n / block;
}

// Block formats have no encoding for NaN/inf: reject them rather than emit a scale that
// silently poisons (or zeroes) the block.
void check_finite(const char* what, DType type, const float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    if (!std::isfinite(x[i]))
      fail(what, "(", dtype_name(type), "): non-finite value ", x[i], " at element ", i);
}

float block_amax(const float* x, int64_t n) {
  float amax = 0.0f;
  for (int64_t j = 0; j < n; ++j) amax = std::max(amax, std::fabs(x[j]));
  return amax;
}

template <class T>
T load(const void* base, int64_t i) {
  T v;
  std::memcpy(&v, static_cast<const unsigned char*>(base) + i * int64_t{sizeof(T)}, sizeof(T));
  return v;
}

template <class T>
void store(void* base, int64_t i, T v) {
  std::memcpy(static_cast<unsigned char*>(base) + i * int64_t{sizeof(T)}, &v, sizeof(T));
}

// The shared Q8 rule: returns the fp16 scale and writes q. Fails on a scale fp16 cannot hold.
uint16_t quantize_q8_block(const float* x, int8_t* q, DType type, int64_t block_index) {
  const float amax = block_amax(x, kQ8BlockSize);
  const uint16_t dh = f32_to_fp16(amax / 127.0f);
  if ((dh & 0x7c00u) == 0x7c00u)
    fail("quantize_row(", dtype_name(type), "): block ", block_index, " amax ", amax,
         " needs a scale beyond fp16 (max 65504 * 127)");
  const float d = fp16_to_f32(dh);
  for (int64_t j = 0; j < kQ8BlockSize; ++j) {
    const float r = d == 0.0f ? 0.0f : std::round(x[j] / d);
    q[j] = static_cast<int8_t>(std::clamp(r, -127.0f, 127.0f));
  }
  return dh;
}

// The shared NVFP4 / Fp4Act sub-block encoder: scale code chosen by the caller, D the f32
// divisor (decoded scale times any per-tensor scale).
void encode_e2m1_sub(const float* x, float D, uint8_t* qs) {
  for (int j = 0; j < 8; ++j) {
    const uint8_t lo = D == 0.0f ? 0 : f32_to_e2m1(x[j] / D);
    const uint8_t hi = D == 0.0f ? 0 : f32_to_e2m1(x[j + 8] / D);
    qs[j] = static_cast<uint8_t>(lo | (hi << 4));
  }
}

void decode_e2m1_sub(const uint8_t* qs, float half_scale, float* y) {
  for (int j = 0; j < 8; ++j) {
    y[j] = static_cast<float>(e2m1_doubled(qs[j] & 0xfu)) * half_scale;
    y[j + 8] = static_cast<float>(e2m1_doubled(qs[j] >> 4)) * half_scale;
  }
}

}  // namespace

// --- quantize -----------------------------------------------------------------------------

void quantize_row_q8_0(const float* x, BlockQ8_0* y, int64_t n) {
  const int64_t nb = checked_blocks("quantize_row", DType::Q8_0, n, kQ8BlockSize);
  check_finite("quantize_row", DType::Q8_0, x, n);
  for (int64_t i = 0; i < nb; ++i)
    y[i].d = quantize_q8_block(x + i * kQ8BlockSize, y[i].qs, DType::Q8_0, i);
}

void quantize_row_q8_1(const float* x, BlockQ8_1* y, int64_t n) {
  const int64_t nb = checked_blocks("quantize_row", DType::Q8_1, n, kQ8BlockSize);
  check_finite("quantize_row", DType::Q8_1, x, n);
  for (int64_t i = 0; i < nb; ++i) {
    y[i].d = quantize_q8_block(x + i * kQ8BlockSize, y[i].qs, DType::Q8_1, i);
    int32_t sum = 0;
    for (int8_t q : y[i].qs) sum += q;
    // d * Σq of the stored values (|Σq| <= 4064: exact in f32), one rounding to fp16.
    y[i].s = f32_to_fp16(fp16_to_f32(y[i].d) * static_cast<float>(sum));
  }
}

float nvfp4_tensor_scale(float amax) {
  const float s = amax / (6.0f * 448.0f);
  return s > 0.0f ? s : 1.0f;
}

void quantize_row_nvfp4(const float* x, BlockNvfp4* y, int64_t n, float tensor_scale) {
  const int64_t nb = checked_blocks("quantize_row", DType::NVFP4, n, kNvfp4BlockSize);
  if (!(tensor_scale > 0.0f) || !std::isfinite(tensor_scale))
    fail("quantize_row(nvfp4): tensor scale ", tensor_scale, " is not finite and > 0");
  check_finite("quantize_row", DType::NVFP4, x, n);
  const float six_s2 = 6.0f * tensor_scale;
  for (int64_t i = 0; i < nb; ++i) {
    for (int s = 0; s < 4; ++s) {
      const float* xs = x + i * kNvfp4BlockSize + s * kNvfp4SubBlock;
      const uint8_t code = f32_to_ue4m3(block_amax(xs, kNvfp4SubBlock) / six_s2);
      y[i].d[s] = code;
      encode_e2m1_sub(xs, ue4m3_to_f32(code) * tensor_scale, y[i].qs + 8 * s);
    }
  }
}

float quantize_nvfp4_tensor(const float* src, void* dst, int64_t nrows, int64_t ncols) {
  if (nrows < 0) fail("quantize_nvfp4_tensor: nrows = ", nrows);
  if (ncols < 0 || ncols % kNvfp4BlockSize != 0)
    fail("quantize_nvfp4_tensor(nvfp4): ncols = ", ncols,
         " is not a multiple of the block size ", kNvfp4BlockSize);
  const int64_t total = nrows * ncols;
  check_finite("quantize_nvfp4_tensor", DType::NVFP4, src, total);
  const float s2 = nvfp4_tensor_scale(block_amax(src, total));
  auto* blocks = static_cast<BlockNvfp4*>(dst);
  const int64_t row_blocks = ncols / kNvfp4BlockSize;
  for (int64_t r = 0; r < nrows; ++r)
    quantize_row_nvfp4(src + r * ncols, blocks + r * row_blocks, ncols, s2);
  return s2;
}

void quantize_row_mxfp4(const float* x, BlockMxfp4* y, int64_t n) {
  const int64_t nb = checked_blocks("quantize_row", DType::MXFP4, n, kMxfp4BlockSize);
  check_finite("quantize_row", DType::MXFP4, x, n);
  for (int64_t i = 0; i < nb; ++i) {
    const float* xb = x + i * kMxfp4BlockSize;
    const float amax = block_amax(xb, kMxfp4BlockSize);
    int e = 0;
    if (amax > 0.0f) {
      int k = 0;
      std::frexp(amax, &k);  // amax = f * 2^k, f in [0.5, 1): floor(log2 amax) = k - 1
      e = std::clamp(k - 1 - 2 + 127, 0, 254);
    }
    y[i].e = static_cast<uint8_t>(e);
    const float X = e8m0_to_f32(static_cast<uint8_t>(e));  // a power of two: x / X is exact
    for (int j = 0; j < 16; ++j) {
      const uint8_t lo = amax > 0.0f ? f32_to_e2m1(xb[j] / X) : 0;
      const uint8_t hi = amax > 0.0f ? f32_to_e2m1(xb[j + 16] / X) : 0;
      y[i].qs[j] = static_cast<uint8_t>(lo | (hi << 4));
    }
  }
}

void quantize_row_fp4act(const float* x, BlockFp4Act* y, int64_t n) {
  const int64_t nb = checked_blocks("quantize_row_fp4act", DType::NVFP4, n, kNvfp4BlockSize);
  check_finite("quantize_row_fp4act", DType::NVFP4, x, n);
  for (int64_t i = 0; i < nb; ++i) {
    for (int s = 0; s < 4; ++s) {
      const float* xs = x + i * kNvfp4BlockSize + s * kNvfp4SubBlock;
      const uint8_t code = f32_to_ue4m3(block_amax(xs, kNvfp4SubBlock) / 6.0f);
      y[i].d[s] = code;
      encode_e2m1_sub(xs, ue4m3_to_f32(code), y[i].qs + 8 * s);
    }
  }
}

void dequantize_row_fp4act(const BlockFp4Act* x, float* y, int64_t n) {
  const int64_t nb = checked_blocks("dequantize_row_fp4act", DType::NVFP4, n, kNvfp4BlockSize);
  for (int64_t i = 0; i < nb; ++i)
    for (int s = 0; s < 4; ++s)
      decode_e2m1_sub(x[i].qs + 8 * s, ue4m3_to_f32_half(x[i].d[s]),
                      y + i * kNvfp4BlockSize + s * kNvfp4SubBlock);
}

void quantize_row(DType type, const float* src, void* dst, int64_t n) {
  const int64_t nb = checked_blocks("quantize_row", type, n, type_traits(type).block_elems);
  switch (type) {
    case DType::F32: if (n > 0) std::memcpy(dst, src, static_cast<size_t>(n) * 4); return;
    case DType::F16:
      for (int64_t i = 0; i < n; ++i) store<uint16_t>(dst, i, f32_to_fp16(src[i]));
      return;
    case DType::BF16:
      for (int64_t i = 0; i < n; ++i) store<uint16_t>(dst, i, f32_to_bf16(src[i]));
      return;
    case DType::F8_E4M3:
      for (int64_t i = 0; i < n; ++i) store<uint8_t>(dst, i, f32_to_e4m3(src[i]));
      return;
    case DType::Q8_0: return quantize_row_q8_0(src, static_cast<BlockQ8_0*>(dst), n);
    case DType::Q8_1: return quantize_row_q8_1(src, static_cast<BlockQ8_1*>(dst), n);
    case DType::NVFP4: return quantize_row_nvfp4(src, static_cast<BlockNvfp4*>(dst), n, 1.0f);
    case DType::MXFP4: return quantize_row_mxfp4(src, static_cast<BlockMxfp4*>(dst), n);
    default: break;
  }
  (void)nb;
  fail("quantize_row: type ", dtype_name(type), " (n = ", n, ") has no quantizer");
}

// --- dequantize ---------------------------------------------------------------------------

void dequantize_row(DType type, const void* src, float* dst, int64_t n) {
  const TypeTraits& tr = type_traits(type);
  const int64_t nb = checked_blocks("dequantize_row", type, n, tr.block_elems);
  switch (type) {
    case DType::F32: if (n > 0) std::memcpy(dst, src, static_cast<size_t>(n) * 4); return;
    case DType::F16:
      for (int64_t i = 0; i < n; ++i) dst[i] = fp16_to_f32(load<uint16_t>(src, i));
      return;
    case DType::BF16:
      for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(load<uint16_t>(src, i));
      return;
    case DType::F8_E4M3:
      for (int64_t i = 0; i < n; ++i) dst[i] = e4m3_to_f32(load<uint8_t>(src, i));
      return;
    case DType::F8_E8M0:
      for (int64_t i = 0; i < n; ++i) dst[i] = e8m0_to_f32(load<uint8_t>(src, i));
      return;
    case DType::F64:
      for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<float>(load<double>(src, i));
      return;
    case DType::I8:
      for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<float>(load<int8_t>(src, i));
      return;
    case DType::U8:
      for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<float>(load<uint8_t>(src, i));
      return;
    case DType::I16:
      for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<float>(load<int16_t>(src, i));
      return;
    case DType::I32:
      for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<float>(load<int32_t>(src, i));
      return;
    case DType::I64:
      for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<float>(load<int64_t>(src, i));
      return;
    case DType::Q8_0: {
      const auto* b = static_cast<const BlockQ8_0*>(src);
      for (int64_t i = 0; i < nb; ++i) {
        const float d = fp16_to_f32(b[i].d);
        for (int j = 0; j < 32; ++j) dst[i * 32 + j] = static_cast<float>(b[i].qs[j]) * d;
      }
      return;
    }
    case DType::Q8_1: {
      const auto* b = static_cast<const BlockQ8_1*>(src);
      for (int64_t i = 0; i < nb; ++i) {
        const float d = fp16_to_f32(b[i].d);
        for (int j = 0; j < 32; ++j) dst[i * 32 + j] = static_cast<float>(b[i].qs[j]) * d;
      }
      return;
    }
    case DType::NVFP4: {
      const auto* b = static_cast<const BlockNvfp4*>(src);
      for (int64_t i = 0; i < nb; ++i)
        for (int s = 0; s < 4; ++s)
          decode_e2m1_sub(b[i].qs + 8 * s, ue4m3_to_f32_half(b[i].d[s]),
                          dst + i * kNvfp4BlockSize + s * kNvfp4SubBlock);
      return;
    }
    case DType::MXFP4: {
      const auto* b = static_cast<const BlockMxfp4*>(src);
      for (int64_t i = 0; i < nb; ++i) {
        const float d = e8m0_to_f32_half(b[i].e);
        float* y = dst + i * kMxfp4BlockSize;
        for (int j = 0; j < 16; ++j) {
          y[j] = static_cast<float>(e2m1_doubled(b[i].qs[j] & 0xfu)) * d;
          y[j + 16] = static_cast<float>(e2m1_doubled(b[i].qs[j] >> 4)) * d;
        }
      }
      return;
    }
    default: break;
  }
  fail("dequantize_row: type ", tr.name, " (n = ", n, ") is not supported");
}

}  // namespace memra
