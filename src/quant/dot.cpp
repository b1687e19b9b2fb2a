// The dot-product contracts of memra/quant.h: integer sums per unit, one f32 scaling per unit,
// partials combined in a fixed order. A GPU kernel reproduces these bit for bit (test/ops).
#include <cmath>
#include <vector>

#include "memra/error.h"
#include "memra/quant.h"

namespace memra {
namespace {

int64_t checked_units(const char* what, int64_t n, int64_t block) {
  if (n < 0 || n % block != 0)
    fail(what, ": n = ", n, " is not a multiple of the block size ", block);
  return n / block;
}

// Step 3 of the contract: c is exact for every scale pair used here, the product with the
// integer sum (|isum| < 2^24, exact as f32) is the unit's one rounding.
inline float unit_partial(float scale_w, float scale_a, int32_t isum) {
  const float c = scale_w * scale_a;
  return c * static_cast<float>(isum);
}

// Σ over 16 values of e2m1_doubled(nibbles of qs[0..7], low nibble first then high) * a[0..15].
inline int32_t isum_e2m1_x_int8(const uint8_t* qs, const int8_t* a) {
  int32_t s = 0;
  for (int j = 0; j < 8; ++j) {
    s += int32_t{e2m1_doubled(qs[j] & 0xfu)} * a[j];
    s += int32_t{e2m1_doubled(qs[j] >> 4)} * a[j + 8];
  }
  return s;
}

inline int32_t isum_e2m1_x_e2m1(const uint8_t* qw, const uint8_t* qa) {
  int32_t s = 0;
  for (int j = 0; j < 8; ++j) {
    s += int32_t{e2m1_doubled(qw[j] & 0xfu)} * e2m1_doubled(qa[j] & 0xfu);
    s += int32_t{e2m1_doubled(qw[j] >> 4)} * e2m1_doubled(qa[j] >> 4);
  }
  return s;
}

}  // namespace

float accumulate_partials(const float* p, int64_t count, DotOrder order) {
  if (order == DotOrder::sequential) {
    float acc = 0.0f;
    for (int64_t u = 0; u < count; ++u) acc += p[u];
    return acc;
  }
  // warp32: lane l owns units l, l+32, l+64, ... in order; then the xor butterfly, written as
  // the halving tree it equals (lane l and l^off hold the same sum since f32 + commutes).
  float lane[32] = {};
  for (int64_t u = 0; u < count; ++u) lane[u % 32] += p[u];
  for (int off = 16; off >= 1; off /= 2)
    for (int l = 0; l < off; ++l) lane[l] = lane[l] + lane[l + off];
  return lane[0];
}

float dot_q8_0_q8_1(const BlockQ8_0* w, const BlockQ8_1* a, int64_t n, DotOrder order) {
  const int64_t nb = checked_units("dot_q8_0_q8_1(q8_0 x q8_1)", n, kQ8BlockSize);
  std::vector<float> p(static_cast<size_t>(nb));
  for (int64_t i = 0; i < nb; ++i) {
    int32_t isum = 0;
    for (int j = 0; j < 32; ++j) isum += int32_t{w[i].qs[j]} * a[i].qs[j];
    p[i] = unit_partial(fp16_to_f32(w[i].d), fp16_to_f32(a[i].d), isum);
  }
  return accumulate_partials(p.data(), nb, order);
}

float dot_nvfp4_q8_1(const BlockNvfp4* w, const BlockQ8_1* a, int64_t n, DotOrder order) {
  const int64_t nb = checked_units("dot_nvfp4_q8_1(nvfp4 x q8_1)", n, kNvfp4BlockSize);
  std::vector<float> p(static_cast<size_t>(nb * 4));
  for (int64_t i = 0; i < nb; ++i) {
    for (int s = 0; s < 4; ++s) {
      const BlockQ8_1& ab = a[2 * i + s / 2];
      const int32_t isum = isum_e2m1_x_int8(w[i].qs + 8 * s, ab.qs + (s % 2) * 16);
      p[i * 4 + s] = unit_partial(ue4m3_to_f32_half(w[i].d[s]), fp16_to_f32(ab.d), isum);
    }
  }
  return accumulate_partials(p.data(), nb * 4, order);
}

float dot_nvfp4_q8_1_pair32(const BlockNvfp4* w, const BlockQ8_1* a, int64_t n, DotOrder order) {
  const int64_t nb = checked_units("dot_nvfp4_q8_1_pair32(nvfp4 x q8_1, pair32)", n, kNvfp4BlockSize);
  std::vector<float> p(static_cast<size_t>(nb * 2));
  for (int64_t b = 0; b < nb * 2; ++b) {
    const BlockNvfp4& wb = w[b / 2];
    const int s = 2 * static_cast<int>(b % 2);  // the unit's first sub-block
    const int32_t i0 = isum_e2m1_x_int8(wb.qs + 8 * s, a[b].qs);
    const int32_t i1 = isum_e2m1_x_int8(wb.qs + 8 * (s + 1), a[b].qs + 16);
    const float e0 = ue4m3_to_f32_half(wb.d[s]) * static_cast<float>(i0);  // exact
    const float t = std::fma(ue4m3_to_f32_half(wb.d[s + 1]), static_cast<float>(i1), e0);
    p[static_cast<size_t>(b)] = t * fp16_to_f32(a[b].d);
  }
  return accumulate_partials(p.data(), nb * 2, order);
}

float dot_nvfp4_fp4act(const BlockNvfp4* w, const BlockFp4Act* a, int64_t n, DotOrder order) {
  const int64_t nb = checked_units("dot_nvfp4_fp4act(nvfp4 x fp4act)", n, kNvfp4BlockSize);
  std::vector<float> p(static_cast<size_t>(nb * 4));
  for (int64_t i = 0; i < nb; ++i) {
    for (int s = 0; s < 4; ++s) {
      const int32_t isum = isum_e2m1_x_e2m1(w[i].qs + 8 * s, a[i].qs + 8 * s);
      p[i * 4 + s] =
          unit_partial(ue4m3_to_f32_half(w[i].d[s]), ue4m3_to_f32_half(a[i].d[s]), isum);
    }
  }
  return accumulate_partials(p.data(), nb * 4, order);
}

float dot_mxfp4_q8_1(const BlockMxfp4* w, const BlockQ8_1* a, int64_t n, DotOrder order) {
  const int64_t nb = checked_units("dot_mxfp4_q8_1(mxfp4 x q8_1)", n, kMxfp4BlockSize);
  std::vector<float> p(static_cast<size_t>(nb));
  for (int64_t i = 0; i < nb; ++i) {
    int32_t isum = 0;
    for (int j = 0; j < 16; ++j) {
      isum += int32_t{e2m1_doubled(w[i].qs[j] & 0xfu)} * a[i].qs[j];
      isum += int32_t{e2m1_doubled(w[i].qs[j] >> 4)} * a[i].qs[j + 16];
    }
    p[i] = unit_partial(e8m0_to_f32_half(w[i].e), fp16_to_f32(a[i].d), isum);
  }
  return accumulate_partials(p.data(), nb, order);
}

double dot_ref(const float* w, const float* a, int64_t n) {
  double acc = 0.0;
  for (int64_t i = 0; i < n; ++i) acc += static_cast<double>(w[i]) * static_cast<double>(a[i]);
  return acc;
}

}  // namespace memra
