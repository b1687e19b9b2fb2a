// Row quantize/dequantize of memra/quant.h: block layouts and hand-worked vectors, rounding
// rules checked against brute-force nearest-grid searches written here, error bounds derived
// from each format's grid, and the bad-input errors.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <vector>

#include "memra/error.h"
#include "memra/quant.h"
#include "memra/testing/errors.h"

namespace memra {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

// Hand tables, independent of the library's.
constexpr float kE2m1[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};

float fp16(uint16_t h) {  // normal/subnormal positive and negative fp16, by formula
  const int e = (h >> 10) & 31, m = h & 1023;
  const float mag = e == 0 ? std::ldexp(static_cast<float>(m), -24)
                           : std::ldexp(static_cast<float>(1024 + m), e - 25);
  return (h & 0x8000) ? -mag : mag;
}

float ue4m3(uint8_t c) {  // by formula, for codes 0..0x7e
  const int e = (c >> 3) & 15, m = c & 7;
  return e == 0 ? std::ldexp(static_cast<float>(m), -9)
                : std::ldexp(static_cast<float>(8 + m), e - 10);
}

// Nibble k (0..63) of an NVFP4/Fp4Act block in value order, by the layout rule written
// independently: sub-block k/16, byte 8*(k/16) + k%8, high nibble for the second 8.
int nvfp4_code(const uint8_t* qs, int k) {
  const uint8_t byte = qs[8 * (k / 16) + k % 8];
  return (k % 16) < 8 ? (byte & 15) : (byte >> 4);
}

float e2m1_value(int code) { return (code & 8) ? -kE2m1[code & 7] : kE2m1[code & 7]; }

// Nearest e2m1 magnitude by brute force, ties to the even code, saturating at 6.
int nearest_e2m1(float t) {
  const float a = std::fabs(t);
  int best = 0;
  for (int c = 1; c < 8; ++c) {
    const float dc = std::fabs(a - kE2m1[c]), db = std::fabs(a - kE2m1[best]);
    if (dc < db || (dc == db && c % 2 == 0)) best = c;
  }
  return std::signbit(t) ? best | 8 : best;
}

// Half the distance between the e2m1 grid points around |t| (the worst rounding error there).
float e2m1_half_gap(float t) {
  const float a = std::fabs(t);
  return a <= 2.0f ? 0.25f : a <= 4.0f ? 0.5f : 1.0f;
}

std::vector<float> random_row(uint32_t seed, int64_t n, float spread_decades = 3.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::uniform_real_distribution<float> dec(-spread_decades, spread_decades);
  std::vector<float> x(static_cast<size_t>(n));
  float scale = 1.0f;
  for (int64_t i = 0; i < n; ++i) {
    if (i % 16 == 0) scale = std::pow(10.0f, dec(rng));  // blocks of very different ranges
    x[i] = nd(rng) * scale;
  }
  return x;
}

// ---------------------------------------------------------------------------------------------
// layouts

TEST(QuantLayout, BlockStructsMatchTheTypeTraits) {
  EXPECT_EQ(type_traits(DType::Q8_0).block_bytes, int64_t{sizeof(BlockQ8_0)});
  EXPECT_EQ(type_traits(DType::Q8_1).block_bytes, int64_t{sizeof(BlockQ8_1)});
  EXPECT_EQ(type_traits(DType::NVFP4).block_bytes, int64_t{sizeof(BlockNvfp4)});
  EXPECT_EQ(type_traits(DType::MXFP4).block_bytes, int64_t{sizeof(BlockMxfp4)});
  EXPECT_EQ(type_traits(DType::Q8_0).block_elems, kQ8BlockSize);
  EXPECT_EQ(type_traits(DType::NVFP4).block_elems, kNvfp4BlockSize);
  EXPECT_EQ(type_traits(DType::MXFP4).block_elems, kMxfp4BlockSize);
  EXPECT_EQ(offsetof(BlockQ8_1, qs), 4u);
  EXPECT_EQ(offsetof(BlockNvfp4, qs), 4u);
  EXPECT_EQ(offsetof(BlockMxfp4, qs), 1u);
}

// ---------------------------------------------------------------------------------------------
// Q8_0 / Q8_1

TEST(Q8_0, Amax127GivesUnitScaleAndRoundHalfAwayFromZero) {
  float x[32] = {127.0f, -127.0f, 0.0f, 1.0f, -1.0f, 2.4f, 2.5f, -2.5f, 63.5f, -63.5f, 0.49f,
                 -0.5f, 3.5f, 100.25f, -99.75f, 126.5f};
  for (int j = 16; j < 32; ++j) x[j] = static_cast<float>(j - 24);  // -8 .. 7
  const int8_t expect[32] = {127, -127, 0, 1, -1, 2, 3, -3, 64, -64, 0, -1, 4, 100, -100, 127,
                             -8, -7, -6, -5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7};
  BlockQ8_0 b;
  quantize_row(DType::Q8_0, x, &b, 32);
  EXPECT_EQ(b.d, 0x3c00);  // fp16 1.0
  for (int j = 0; j < 32; ++j) EXPECT_EQ(b.qs[j], expect[j]) << j;
  float y[32];
  dequantize_row(DType::Q8_0, &b, y, 32);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(y[j], static_cast<float>(expect[j])) << j;
}

TEST(Q8_0, Amax254GivesScaleTwo) {
  float x[32] = {};
  x[0] = -254.0f;
  x[1] = 3.0f;   // 1.5 -> 2
  x[2] = -1.0f;  // -0.5 -> -1
  x[3] = 0.9f;   // 0.45 -> 0
  x[4] = 253.0f; // 126.5 -> 127
  BlockQ8_0 b;
  quantize_row_q8_0(x, &b, 32);
  EXPECT_EQ(b.d, 0x4000);  // fp16 2.0
  EXPECT_EQ(b.qs[0], -127);
  EXPECT_EQ(b.qs[1], 2);
  EXPECT_EQ(b.qs[2], -1);
  EXPECT_EQ(b.qs[3], 0);
  EXPECT_EQ(b.qs[4], 127);
  for (int j = 5; j < 32; ++j) EXPECT_EQ(b.qs[j], 0);
}

TEST(Q8_0, ZeroBlockHasZeroScaleAndCodes) {
  const float x[32] = {};
  BlockQ8_0 b;
  std::memset(&b, 0x55, sizeof b);
  quantize_row_q8_0(x, &b, 32);
  EXPECT_EQ(b.d, 0);
  for (int8_t q : b.qs) EXPECT_EQ(q, 0);
}

// |x - d*q| <= d/2 for every element when d is an fp16 normal (quant.h; plus d*2^-17 for the
// f32 rounding of x/d, |x/d| < 128, which can push a near-tie over), and the block's
// largest element lands on ±127 (amax/d is within 2^-11 of 127).
TEST(Q8_0, RoundTripErrorIsAtMostHalfTheStoredScale) {
  const int64_t n = 32 * 64;
  const std::vector<float> x = random_row(7, n, 2.0f);
  std::vector<BlockQ8_0> b(n / 32);
  quantize_row(DType::Q8_0, x.data(), b.data(), n);
  std::vector<float> y(n);
  dequantize_row(DType::Q8_0, b.data(), y.data(), n);
  for (int64_t i = 0; i < n / 32; ++i) {
    const float d = fp16(b[i].d);
    ASSERT_GE(d, 0x1p-14f) << "test data must keep d an fp16 normal";
    int64_t arg = i * 32;
    for (int64_t j = i * 32; j < i * 32 + 32; ++j) {
      ASSERT_LE(std::fabs(double{x[j]} - double{y[j]}), double{d} * (0.5 + 0x1p-17))
          << "element " << j;
      if (std::fabs(x[j]) > std::fabs(x[arg])) arg = j;
    }
    EXPECT_EQ(std::abs(b[i].qs[arg - i * 32]), 127) << "block " << i;
  }
}

// Where d is an fp16 subnormal its relative error exceeds 2^-11 and the clamp at ±127 can
// engage; the bound becomes max(d/2, amax - 127*d) (docs/quant.md).
TEST(Q8_0, SubnormalScaleBlocksStayWithinTheClampBound) {
  const int64_t n = 32 * 32;
  std::vector<float> x = random_row(8, n, 0.0f);
  for (int64_t i = 0; i < n; ++i) x[i] *= std::ldexp(1.0f, -12 - static_cast<int>(i / 32) % 8);
  std::vector<BlockQ8_0> b(n / 32);
  quantize_row_q8_0(x.data(), b.data(), n);
  int subnormal_blocks = 0;
  for (int64_t i = 0; i < n / 32; ++i) {
    const float d = fp16(b[i].d);
    subnormal_blocks += d < 0x1p-14f;
    double amax = 0;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(double{x[i * 32 + j]}));
    const double bound = std::max(double{d} * (0.5 + 0x1p-17), amax - 127.0 * d);
    for (int j = 0; j < 32; ++j)
      ASSERT_LE(std::fabs(x[i * 32 + j] - double{d} * b[i].qs[j]), bound) << i << "," << j;
  }
  EXPECT_GT(subnormal_blocks, 0) << "the case this test is for must occur";
}

TEST(Q8_1, SumIsScaleTimesSumOfCodes) {
  float x[32] = {};
  x[0] = 127.0f; x[1] = -127.0f; x[2] = 5.0f; x[3] = 3.0f;  // d = 1, Σq = 8
  BlockQ8_1 b;
  quantize_row_q8_1(x, &b, 32);
  EXPECT_EQ(b.d, 0x3c00);
  EXPECT_EQ(b.s, 0x4800);  // fp16 8.0

  float z[32] = {};
  z[0] = 254.0f; z[1] = 7.0f; z[2] = -3.0f;  // d = 2; q = 127, 4 (3.5), -2 (-1.5); Σq = 129
  quantize_row(DType::Q8_1, z, &b, 32);
  EXPECT_EQ(b.d, 0x4000);
  EXPECT_EQ(b.qs[1], 4);
  EXPECT_EQ(b.qs[2], -2);
  EXPECT_EQ(b.s, 0x5c08);  // fp16 258 = 1.0078125 * 2^8
}

TEST(Q8_1, CodesAndScaleEqualQ8_0AndSumFollowsTheRule) {
  const int64_t n = 32 * 40;
  const std::vector<float> x = random_row(9, n);
  std::vector<BlockQ8_0> b0(n / 32);
  std::vector<BlockQ8_1> b1(n / 32);
  quantize_row_q8_0(x.data(), b0.data(), n);
  quantize_row_q8_1(x.data(), b1.data(), n);
  for (int64_t i = 0; i < n / 32; ++i) {
    ASSERT_EQ(b0[i].d, b1[i].d);
    ASSERT_EQ(std::memcmp(b0[i].qs, b1[i].qs, 32), 0);
    int sum = 0;
    for (int8_t q : b1[i].qs) sum += q;
    const double s_exact = double{fp16(b1[i].d)} * sum;
    // s is the fp16 nearest to d*Σq: within half an fp16 ulp (relative 2^-11).
    EXPECT_LE(std::fabs(fp16(b1[i].s) - s_exact), std::fabs(s_exact) * 0x1p-11 + 0x1p-25) << i;
  }
  // The dequantized Q8_1 ignores s.
  std::vector<float> y0(n), y1(n);
  dequantize_row(DType::Q8_0, b0.data(), y0.data(), n);
  dequantize_row(DType::Q8_1, b1.data(), y1.data(), n);
  EXPECT_EQ(y0, y1);
}

// The nearest fp16 code of a positive normal-range q, by bisection over the codes' values (fp16()
// above), ties to the even code.
uint16_t nearest_fp16(float q) {
  uint16_t lo = 0x0400, hi = 0x7bff;  // fp16(lo) <= q < fp16(hi) for the q used here
  while (hi - lo > 1) {
    const uint16_t m = static_cast<uint16_t>((lo + hi) / 2);
    (fp16(m) <= q ? lo : hi) = m;
  }
  const double dl = double{q} - fp16(lo), dh = double{fp16(hi)} - q;
  return dl < dh || (dl == dh && lo % 2 == 0) ? lo : hi;
}

// quant.h: d = fp16(amax / 127) and q = round(x / d), half away from zero: each one f32 division,
// as the GPU's q8_1 quantizer must compute them. ggml's form (x times 1 / d) and amax times
// 1 / 127 differ only within an ulp of a rounding bound, which random blocks never reach; these
// probes sit there: amaxes around fp16 midpoints times 127, values around (k + 1/2) d.
TEST(Q8_0, ScaleAndCodesAreOneF32DivisionAtTheirRoundingBounds) {
  int scale_reciprocal_differs = 0, code_reciprocal_differs = 0, code_probes = 0;
  for (uint16_t h = 0x1c00; h < 0x5000; h = static_cast<uint16_t>(h + 97)) {
    const double mid = (double{fp16(h)} + fp16(static_cast<uint16_t>(h + 1))) / 2;
    float amax = static_cast<float>(mid * 127.0);
    for (int k = 0; k < 2; ++k) amax = std::nextafter(amax, 0.0f);
    for (int k = 0; k < 5; ++k, amax = std::nextafter(amax, 1e30f)) {
      // value 0 sets the scale; values 1..31 straddle the code bounds (k + 1/2) d, k = 0..126
      float x[32] = {};
      x[0] = amax;
      BlockQ8_0 b;
      quantize_row_q8_0(x, &b, 32);
      const uint16_t want_d = nearest_fp16(amax / 127.0f);
      ASSERT_EQ(b.d, want_d) << "amax " << amax;
      scale_reciprocal_differs += nearest_fp16(amax * (1.0f / 127.0f)) != want_d;
      const float d = fp16(b.d);
      for (int j = 1; j < 32; ++j) {
        const int kb = (j * 41 + h + k) % 127;  // a spread of bounds per block
        float v = (static_cast<float>(kb) + 0.5f) * d;
        v = j % 3 == 0 ? std::nextafter(v, 0.0f) : j % 3 == 1 ? v : std::nextafter(v, 1e30f);
        x[j] = j % 2 ? -v : v;
      }
      quantize_row_q8_0(x, &b, 32);
      ASSERT_EQ(b.d, want_d);
      const auto round_away = [](float t) {
        const double r = std::floor(std::fabs(double{t}) + 0.5);  // exact in double
        return static_cast<int>(std::copysign(std::min(r, 127.0), double{t}));
      };
      for (int j = 1; j < 32; ++j) {
        ASSERT_EQ(b.qs[j], round_away(x[j] / d)) << "x " << x[j] << " d " << d;
        code_reciprocal_differs += b.qs[j] != round_away(x[j] * (1.0f / d));
        ++code_probes;
      }
    }
  }
  EXPECT_GT(code_probes, 10000);
  EXPECT_GT(scale_reciprocal_differs, 0);  // the probes discriminate
  EXPECT_GT(code_reciprocal_differs, 0);
}

TEST(Q8, ScaleBeyondFp16IsAnError) {
  float x[32] = {};
  x[5] = 1e10f;
  BlockQ8_0 b;
  EXPECT_THROW(
      {
        try {
          quantize_row_q8_0(x, &b, 32);
        } catch (const Error& e) {
          EXPECT_THAT(e.what(), AllOf(HasSubstr("q8_0"), HasSubstr("block 0")));
          throw;
        }
      },
      Error);
  // The largest amax that fits: d = 65504 exactly.
  x[5] = 65504.0f * 127.0f;
  quantize_row_q8_0(x, &b, 32);
  EXPECT_EQ(b.d, 0x7bff);
  EXPECT_EQ(b.qs[5], 127);
}

// ---------------------------------------------------------------------------------------------
// NVFP4

// Every value is e2m1 times a sub-block scale whose amax/6 is an exact e4m3: the block must
// carry exactly those codes and dequantize to exactly x.
TEST(Nvfp4, ExactlyRepresentableBlockByHand) {
  const float base[16] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6, -0.5f, -1, -1.5f, -2, -3, -4, -6, 0};
  const float sub_scale[4] = {1.0f, 2.0f, 0.25f, 0.0f};
  float x[64];
  for (int s = 0; s < 4; ++s)
    for (int j = 0; j < 16; ++j) x[16 * s + j] = base[j] * sub_scale[s];
  BlockNvfp4 b;
  quantize_row(DType::NVFP4, x, &b, 64);
  EXPECT_EQ(b.d[0], 0x38);  // 1.0: exponent 7
  EXPECT_EQ(b.d[1], 0x40);  // 2.0: exponent 8
  EXPECT_EQ(b.d[2], 0x28);  // 0.25: exponent 5
  EXPECT_EQ(b.d[3], 0x00);  // all-zero sub-block
  // codes 0..7 then 9..14, 0: byte j = code[j] | code[j+8] << 4
  const uint8_t qs_expect[8] = {0x90, 0xa1, 0xb2, 0xc3, 0xd4, 0xe5, 0xf6, 0x07};
  for (int s = 0; s < 3; ++s)
    for (int j = 0; j < 8; ++j) EXPECT_EQ(b.qs[8 * s + j], qs_expect[j]) << s << "," << j;
  for (int j = 24; j < 32; ++j) EXPECT_EQ(b.qs[j], 0);
  float y[64];
  dequantize_row(DType::NVFP4, &b, y, 64);
  for (int k = 0; k < 64; ++k) EXPECT_EQ(y[k], x[k]) << k;
}

TEST(Nvfp4, FractionalScaleByHand) {
  // amax 4.5 -> scale 0.75 = 1.5 * 2^-1: ue4m3 exponent 6, mantissa 4 -> 0x34.
  float x[64] = {};
  x[0] = 4.5f;       // 6 * 0.75 -> code 7
  x[1] = -0.375f;    // -0.5 * 0.75 -> code 9
  x[8] = 1.125f;     // 1.5 * 0.75 -> code 3 (high nibble of byte 0)
  x[15] = -2.25f;    // -3 * 0.75 -> code 13 (high nibble of byte 7)
  BlockNvfp4 b;
  quantize_row_nvfp4(x, &b, 64, 1.0f);
  EXPECT_EQ(b.d[0], 0x34);
  EXPECT_EQ(b.qs[0], 0x37);
  EXPECT_EQ(b.qs[1], 0x09);
  EXPECT_EQ(b.qs[7], 0xd0);
  float y[64];
  dequantize_row(DType::NVFP4, &b, y, 64);
  for (int k = 0; k < 64; ++k) EXPECT_EQ(y[k], x[k]) << k;
}

TEST(Nvfp4, NibbleOrderPlacesEachValueWhereTheLayoutSays) {
  for (int p = 0; p < 64; ++p) {
    float x[64] = {};
    x[p] = 6.0f;
    BlockNvfp4 b;
    quantize_row_nvfp4(x, &b, 64, 1.0f);
    const int byte = 8 * (p / 16) + p % 8;
    for (int k = 0; k < 32; ++k) {
      const uint8_t expect = k != byte ? 0 : ((p % 16) < 8 ? 0x07 : 0x70);
      ASSERT_EQ(b.qs[k], expect) << "value " << p << " byte " << k;
    }
  }
}

// Each code is the nearest e2m1 point (ties to even) of x / D, D = ue4m3(code_s) * s2, where the
// scale code is within e4m3's relative precision of amax / (6 s2); the error against x is then
// bounded by the grid's half gap (or the saturation excess above 6).
TEST(Nvfp4, RandomRowsRoundToNearestAndStayWithinTheGridBound) {
  const int64_t n = 64 * 48;
  const std::vector<float> x = random_row(11, n);
  int saturated = 0;  // the saturation branch below must be exercised
  for (float s2 : {1.0f, 0.0371f, 3.5f}) {
    SCOPED_TRACE(s2);
    std::vector<BlockNvfp4> b(n / 64);
    quantize_row_nvfp4(x.data(), b.data(), n, s2);
    std::vector<float> y(n);
    dequantize_row(DType::NVFP4, b.data(), y.data(), n);
    for (int64_t i = 0; i < n / 64; ++i) {
      for (int s = 0; s < 4; ++s) {
        const float* xs = x.data() + i * 64 + s * 16;
        double amax = 0;
        for (int j = 0; j < 16; ++j) amax = std::max(amax, std::fabs(double{xs[j]}));
        const double want = amax / (6.0 * s2);
        const float sc = ue4m3(b[i].d[s]);
        if (want >= 0x1p-6 && want <= 448) {
          ASSERT_LE(std::fabs(sc - want), want * 0x1p-4) << "scale of " << i << "," << s;
        }
        const float D = sc * s2;
        for (int j = 0; j < 16; ++j) {
          const int code = nvfp4_code(b[i].qs, s * 16 + j);
          if (D == 0) {  // scale underflow: amax/(6 s2) rounded to code 0, values to 0
            ASSERT_EQ(code, 0);
            ASSERT_LE(want, 0x1p-10) << i << "," << s;
            continue;
          }
          const float t = xs[j] / D;
          ASSERT_EQ(code, nearest_e2m1(t)) << i << "," << s << "," << j;
          const double deq = double{y[i * 64 + s * 16 + j]} * s2;
          ASSERT_EQ(deq, double{e2m1_value(code)} * sc * s2);
          const double bound = std::fabs(t) <= 6 ? e2m1_half_gap(t) * double{D}
                                                 : std::fabs(double{xs[j]}) - 6.0 * D;
          // Saturation only comes from the scale rounding down (<= 2^-4 relative in e4m3's
          // normal range): |x|/D <= 6/(1 - 2^-4) = 6.4 (docs/quant.md).
          if (want >= 0x1p-6 && want <= 448) { ASSERT_LE(std::fabs(t), 6.4f) << i << "," << s; }
          saturated += std::fabs(t) > 6;
          // D*t = x up to one f32 rounding of x/D and of sc*s2: 2^-22 relative slack.
          ASSERT_LE(std::fabs(xs[j] - deq), bound + std::fabs(double{xs[j]}) * 0x1p-22)
              << i << "," << s << "," << j;
        }
      }
    }
  }
  EXPECT_GT(saturated, 0);
}

// The nearest ue4m3 code of q > 0 by brute force over codes 0..0x7e, ties to the even code,
// saturating at 0x7e (448) as f32_to_ue4m3 does.
uint8_t nearest_ue4m3(float q) {
  if (q > 448.0f) return 0x7e;
  uint8_t best = 0;
  for (int c = 1; c <= 0x7e; ++c) {
    const float dc = std::fabs(q - ue4m3(static_cast<uint8_t>(c))), db = std::fabs(q - ue4m3(best));
    if (dc < db || (dc == db && c % 2 == 0)) best = static_cast<uint8_t>(c);
  }
  return best;
}

// quant.h: code = f32_to_ue4m3(amax / (6 * s2)), one f32 division by the rounded 6 * s2. Random
// rows almost never come within an ulp of a midpoint between two codes, the only place where
// another order (amax / 6 / s2, or amax times the reciprocal) rounds to the neighbouring code and
// a GPU quantizer written that way would differ; these amaxes straddle every normal midpoint.
TEST(Nvfp4, ScaleCodeIsOneF32QuotientAtEveryUe4m3Midpoint) {
  int other_order_differs = 0, reciprocal_differs = 0;
  for (float s2 : {1.0f, 1.0f / 3.0f, 0.0371f, 3.5f, 5000.0f / 2688.0f}) {
    const float six_s2 = 6.0f * s2;
    for (int c = 0x08; c < 0x7e; ++c) {
      const double mid = (double{ue4m3(static_cast<uint8_t>(c))} + ue4m3(static_cast<uint8_t>(c + 1))) / 2;
      float amax = static_cast<float>(mid * double{six_s2});
      for (int k = 0; k < 3; ++k) amax = std::nextafter(amax, 0.0f);
      for (int k = 0; k < 7; ++k, amax = std::nextafter(amax, 1e30f)) {
        float x[64] = {};
        x[5] = -amax;  // the sign does not enter the scale
        x[6] = amax / 3.0f;
        BlockNvfp4 b;
        quantize_row_nvfp4(x, &b, 64, s2);
        const uint8_t want = nearest_ue4m3(amax / six_s2);
        ASSERT_EQ(b.d[0], want) << "s2 " << s2 << " amax " << amax << " near the midpoint above code " << c;
        other_order_differs += nearest_ue4m3(amax / 6.0f / s2) != want;
        reciprocal_differs += nearest_ue4m3(amax * (1.0f / six_s2)) != want;
      }
    }
  }
  // the probes discriminate: both other forms round differently somewhere among them
  EXPECT_GT(other_order_differs, 0);
  EXPECT_GT(reciprocal_differs, 0);
}

// quant.h: q = f32_to_e2m1(x / D), one f32 division by the decoded scale D. The probes sit within
// two ulps of each decision bound of the e2m1 grid (0.25, 0.75, ... 5 times D), where x times
// 1 / D, an order a kernel might prefer, lands on the other side; random rows never do.
TEST(Nvfp4, CodesDivideByTheDecodedScaleOnceAtTheGridsDecisionBounds) {
  const float kBounds[7] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f};
  int reciprocal_differs = 0, probes = 0;
  for (float s2 : {1.0f, 1.0f / 3.0f, 0.0371f}) {
    for (int c = 0x30; c < 0x48; ++c) {
      const float D = ue4m3(static_cast<uint8_t>(c)) * s2;
      std::vector<float> x;  // sub-blocks of 16: 6 D (the scale) then 15 probes
      for (float bound : kBounds) {
        float v = bound * D;
        for (int k = 0; k < 2; ++k) v = std::nextafter(v, 0.0f);
        for (int k = 0; k < 5; ++k, v = std::nextafter(v, 1e30f)) {
          if (x.size() % 16 == 0) x.push_back(6.0f * D);
          x.push_back(k % 2 ? -v : v);
        }
      }
      x.resize((x.size() + 63) / 64 * 64, 0.0f);
      std::vector<BlockNvfp4> b(x.size() / 64);
      quantize_row_nvfp4(x.data(), b.data(), static_cast<int64_t>(x.size()), s2);
      for (size_t k = 0; k < x.size(); ++k) {
        if (k % 16 == 0 || x[k] == 0.0f) continue;
        const BlockNvfp4& blk = b[k / 64];
        const int s = static_cast<int>(k % 64) / 16;
        ASSERT_EQ(blk.d[s], c) << "s2 " << s2 << ": the sub-block's scale code";
        const int code = nvfp4_code(blk.qs, static_cast<int>(k % 64));
        ASSERT_EQ(code, nearest_e2m1(x[k] / D)) << "s2 " << s2 << " D " << D << " x " << x[k];
        reciprocal_differs += nearest_e2m1(x[k] * (1.0f / D)) != code;
        ++probes;
      }
    }
  }
  EXPECT_EQ(probes, 3 * 24 * 35);
  EXPECT_GT(reciprocal_differs, 0);  // the probes discriminate
}

TEST(Nvfp4, TensorScaleIsModelOptsAmaxOver2688) {
  const int64_t rows = 6, cols = 128;
  std::vector<float> x = random_row(12, rows * cols, 2.0f);  // |x| well below 5000
  x[77] = -5000.0f;  // the tensor amax
  std::vector<BlockNvfp4> b(rows * cols / 64 + 1);
  std::memset(&b.back(), 0xab, sizeof(BlockNvfp4));  // sentinel past the end
  const float s2 = quantize_nvfp4_tensor(x.data(), b.data(), rows, cols);
  EXPECT_EQ(s2, 5000.0f / 2688.0f);
  EXPECT_EQ(nvfp4_tensor_scale(5000.0f), s2);
  // The amax sub-block gets the largest scale code and the value lands on -6 exactly.
  EXPECT_EQ(b[1].d[0], 0x7e);
  float y[64];
  dequantize_row(DType::NVFP4, &b[1], y, 64);
  EXPECT_EQ(y[77 - 64], -12.0f * 224.0f);  // code 15 at the half scale of 448
  EXPECT_NEAR(double{y[77 - 64]} * s2, -5000.0, 5000.0 * 0x1p-22);
  // Rows are quantized independently against the same s2.
  for (int64_t r = 0; r < rows; ++r) {
    std::vector<BlockNvfp4> one(cols / 64);
    quantize_row_nvfp4(x.data() + r * cols, one.data(), cols, s2);
    ASSERT_EQ(std::memcmp(one.data(), b.data() + r * (cols / 64), sizeof(BlockNvfp4) * one.size()),
              0) << "row " << r;
  }
  const uint8_t* tail = reinterpret_cast<const uint8_t*>(&b.back());
  for (size_t k = 0; k < sizeof(BlockNvfp4); ++k) EXPECT_EQ(tail[k], 0xab);
}

TEST(Nvfp4, AllZeroTensorGetsUnitScale) {
  std::vector<float> x(128, 0.0f);
  std::vector<BlockNvfp4> b(2);
  EXPECT_EQ(quantize_nvfp4_tensor(x.data(), b.data(), 1, 128), 1.0f);
  for (const BlockNvfp4& blk : b) {
    for (uint8_t d : blk.d) EXPECT_EQ(d, 0);
    for (uint8_t q : blk.qs) EXPECT_EQ(q, 0);
  }
}

TEST(Nvfp4, NanScaleCodeAndBit7DecodeAsUe4m3Says) {
  BlockNvfp4 b{};
  std::memset(b.qs, 0x77, sizeof b.qs);  // every value code 7 (= 6)
  b.d[0] = 0x7f;  // E4M3's NaN: contributes 0
  b.d[1] = 0xb8;  // bit 7 set: read as 0x38 = 1.0
  b.d[2] = 0xff;  // bit 7 + NaN code: 0
  b.d[3] = 0x01;  // smallest subnormal 2^-9
  float y[64];
  dequantize_row(DType::NVFP4, &b, y, 64);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], 0.0f);
    EXPECT_EQ(y[16 + j], 6.0f);
    EXPECT_EQ(y[32 + j], 0.0f);
    EXPECT_EQ(y[48 + j], 6.0f * 0x1p-9f);
  }
}

TEST(Nvfp4, TensorScaleMustBeFiniteAndPositive) {
  const float x[64] = {};
  BlockNvfp4 b;
  for (float s : {0.0f, -1.0f, std::numeric_limits<float>::infinity(),
                  std::numeric_limits<float>::quiet_NaN()})
    EXPECT_THROW(quantize_row_nvfp4(x, &b, 64, s), Error) << s;
}

// ---------------------------------------------------------------------------------------------
// MXFP4

TEST(Mxfp4, PowerOfTwoScaleByHand) {
  float x[32] = {};
  const float vals[8] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6};
  for (int j = 0; j < 8; ++j) {
    x[j] = vals[j];
    x[16 + j] = -vals[j];
  }
  x[8] = 5.5f;  // between 4 and 6 -> 6
  BlockMxfp4 b;
  quantize_row(DType::MXFP4, x, &b, 32);
  EXPECT_EQ(b.e, 127);  // floor(log2 6) = 2: e = 2 - 2 + 127, scale 1
  // value 16 is -0.0: code 8 (the sign bit is kept, as CUDA's e2m1 conversion does)
  const uint8_t expect[16] = {0x80, 0x91, 0xa2, 0xb3, 0xc4, 0xd5, 0xe6, 0xf7, 0x07,
                              0, 0, 0, 0, 0, 0, 0};
  for (int j = 0; j < 16; ++j) EXPECT_EQ(b.qs[j], expect[j]) << j;
  float y[32];
  dequantize_row(DType::MXFP4, &b, y, 32);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(y[j], j == 8 ? 6.0f : x[j]) << j;

  float z[32] = {};
  z[0] = 8.0f;   // floor(log2 8) = 3 -> e = 128, scale 2: 8/2 = 4 -> code 6
  z[1] = 7.0f;   // 3.5 -> tie -> code 6 (4) -> 8
  z[31] = -1.0f; // -0.5 -> code 9
  quantize_row_mxfp4(z, &b, 32);
  EXPECT_EQ(b.e, 128);
  EXPECT_EQ(b.qs[0], 0x06);
  EXPECT_EQ(b.qs[1], 0x06);
  EXPECT_EQ(b.qs[15], 0x90);
  dequantize_row(DType::MXFP4, &b, y, 32);
  EXPECT_EQ(y[0], 8.0f);
  EXPECT_EQ(y[1], 8.0f);
  EXPECT_EQ(y[31], -1.0f);
}

TEST(Mxfp4, NibbleOrderLowIsFirstHalf) {
  for (int p = 0; p < 32; ++p) {
    float x[32] = {};
    x[p] = 1.0f;
    BlockMxfp4 b;
    quantize_row_mxfp4(x, &b, 32);
    EXPECT_EQ(b.e, 125);  // floor(log2 1) - 2 + 127: 1 = 4 * 2^-2 -> code 6
    for (int k = 0; k < 16; ++k) {
      const uint8_t expect = k != p % 16 ? 0 : (p < 16 ? 0x06 : 0x60);
      ASSERT_EQ(b.qs[k], expect) << p << "," << k;
    }
  }
}

TEST(Mxfp4, RandomRowsRoundToNearestWithinTheGridBound) {
  const int64_t n = 32 * 64;
  const std::vector<float> x = random_row(13, n);
  std::vector<BlockMxfp4> b(n / 32);
  quantize_row_mxfp4(x.data(), b.data(), n);
  std::vector<float> y(n);
  dequantize_row(DType::MXFP4, b.data(), y.data(), n);
  for (int64_t i = 0; i < n / 32; ++i) {
    double amax = 0;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(double{x[i * 32 + j]}));
    const float X = std::ldexp(1.0f, b[i].e - 127);
    ASSERT_GE(amax / X, 4.0) << i;  // the OCP exponent puts amax in [4, 8) * X
    ASSERT_LT(amax / X, 8.0) << i;
    for (int j = 0; j < 32; ++j) {
      const float xv = x[i * 32 + j];
      const int code = j < 16 ? (b[i].qs[j] & 15) : (b[i].qs[j - 16] >> 4);
      ASSERT_EQ(code, nearest_e2m1(xv / X)) << i << "," << j;
      const double t = std::fabs(double{xv}) / X;
      const double bound = t <= 6 ? e2m1_half_gap(static_cast<float>(t)) * X : (t - 6) * X;
      ASSERT_LE(std::fabs(xv - double{y[i * 32 + j]}), bound) << i << "," << j;
    }
  }
}

// floor(log2 amax) - 2 + 127 is negative for amax below 2^-125: the exponent clamps at 0 (scale
// 2^-127, itself a subnormal) and the codes are those of x / 2^-127, not of a larger scale.
TEST(Mxfp4, ExponentClampsAtZeroForTinyBlocks) {
  float x[32] = {};
  x[0] = 0x1p-126f;    // the smallest normal: floor(log2) - 2 + 127 = -1 -> 0; 2^-126 / 2^-127 = 2
  x[17] = -0x1p-128f;  // -0.5 -> code 9
  x[3] = 0x1p-140f;    // 2^-13 -> 0
  BlockMxfp4 b;
  quantize_row_mxfp4(x, &b, 32);
  EXPECT_EQ(b.e, 0);
  EXPECT_EQ(b.qs[0], 0x04);  // 2.0: code 4
  EXPECT_EQ(b.qs[1], 0x90);
  EXPECT_EQ(b.qs[3], 0x00);
  float only_subnormal[32] = {};
  only_subnormal[31] = 0x1p-129f;    // amax 2^-129: 0.25 of the scale, a tie that goes to code 0
  only_subnormal[30] = 0x1.8p-128f;  // 0.75: the tie between 0.5 and 1 goes to the even code 2
  quantize_row_mxfp4(only_subnormal, &b, 32);
  EXPECT_EQ(b.e, 0);
  EXPECT_EQ(b.qs[15], 0x00);
  EXPECT_EQ(b.qs[14], 0x20);
}

TEST(Mxfp4, ZeroBlockAndNanScale) {
  const float x[32] = {};
  BlockMxfp4 b;
  std::memset(&b, 0x33, sizeof b);
  quantize_row_mxfp4(x, &b, 32);
  EXPECT_EQ(b.e, 0);
  for (uint8_t q : b.qs) EXPECT_EQ(q, 0);
  b.e = 0xff;  // NaN scale: every value NaN, never a finite number
  float y[32];
  dequantize_row(DType::MXFP4, &b, y, 32);
  for (float v : y) EXPECT_TRUE(std::isnan(v));
}

// ---------------------------------------------------------------------------------------------
// W4A4 activations

TEST(Fp4Act, DynamicScaleByHandIncludingSaturationAndUnderflow) {
  float x[64] = {};
  x[0] = 6.0f;  x[1] = -3.0f;     // sub-block 0: amax 6 -> code 0x38 (1.0)
  x[16] = 3000.0f; x[17] = 100.0f; // sub-block 1: 500 saturates to 448 (0x7e); 3000/448 -> 6
  x[32] = 1e-4f;                  // sub-block 2: amax/6 < 2^-10 -> code 0, values 0
  x[48] = 0.09375f;               // sub-block 3: 0.015625 = 2^-6 -> 0x08; 0.09375 / 2^-6 = 6
  x[49] = 0.0078125f;             // 2^-7 / 2^-6 = 0.5 -> code 1
  BlockFp4Act a;
  quantize_row_fp4act(x, &a, 64);
  EXPECT_EQ(a.d[0], 0x38);
  EXPECT_EQ(a.d[1], 0x7e);
  EXPECT_EQ(a.d[2], 0x00);
  EXPECT_EQ(a.d[3], 0x08);
  EXPECT_EQ(nvfp4_code(a.qs, 0), 7);
  EXPECT_EQ(nvfp4_code(a.qs, 1), 13);
  EXPECT_EQ(nvfp4_code(a.qs, 16), 7);   // 3000/448 = 6.7 saturates
  EXPECT_EQ(nvfp4_code(a.qs, 17), 0);   // 100/448 = 0.223 <= 0.25 -> 0
  EXPECT_EQ(nvfp4_code(a.qs, 32), 0);
  EXPECT_EQ(nvfp4_code(a.qs, 48), 7);
  EXPECT_EQ(nvfp4_code(a.qs, 49), 1);
  float y[64];
  dequantize_row_fp4act(&a, y, 64);
  EXPECT_EQ(y[0], 6.0f);
  EXPECT_EQ(y[16], 6.0f * 448.0f);
  EXPECT_EQ(y[32], 0.0f);
  EXPECT_EQ(y[49], 0.0078125f);
}

// quantize_row_fp4act's scale code is f32_to_ue4m3(amax / 6), one f32 division, as the GPU's
// activation quantizer must compute it; amaxes straddling every normal midpoint between two codes
// tell it from amax times 1 / 6 (see Nvfp4.ScaleCodeIsOneF32QuotientAtEveryUe4m3Midpoint).
TEST(Fp4Act, ScaleCodeIsAmaxOverSixAtEveryUe4m3Midpoint) {
  int reciprocal_differs = 0;
  for (int c = 0x08; c < 0x7e; ++c) {
    const double mid = (double{ue4m3(static_cast<uint8_t>(c))} + ue4m3(static_cast<uint8_t>(c + 1))) / 2;
    float amax = static_cast<float>(mid * 6.0);
    for (int k = 0; k < 3; ++k) amax = std::nextafter(amax, 0.0f);
    for (int k = 0; k < 7; ++k, amax = std::nextafter(amax, 1e30f)) {
      float x[64] = {};
      x[21] = -amax;  // sub-block 1
      BlockFp4Act a;
      quantize_row_fp4act(x, &a, 64);
      const uint8_t want = nearest_ue4m3(amax / 6.0f);
      ASSERT_EQ(a.d[1], want) << "amax " << amax << " near the midpoint above code " << c;
      reciprocal_differs += nearest_ue4m3(amax * (1.0f / 6.0f)) != want;
    }
  }
  EXPECT_GT(reciprocal_differs, 0);  // the probes discriminate
}

TEST(Fp4Act, CodesAreNearestE2m1OfXOverTheDecodedScale) {
  const int64_t n = 64 * 32;
  const std::vector<float> x = random_row(14, n, 2.0f);
  std::vector<BlockFp4Act> a(n / 64);
  quantize_row_fp4act(x.data(), a.data(), n);
  for (int64_t i = 0; i < n / 64; ++i)
    for (int s = 0; s < 4; ++s) {
      double amax = 0;
      for (int j = 0; j < 16; ++j) amax = std::max(amax, std::fabs(double{x[i * 64 + s * 16 + j]}));
      if (amax / 6 >= 0x1p-6) { ASSERT_LE(std::fabs(ue4m3(a[i].d[s]) - amax / 6), amax / 6 * 0x1p-4) << i << "," << s; }
      for (int j = 0; j < 16; ++j) {
        if (a[i].d[s] == 0) {
          ASSERT_EQ(nvfp4_code(a[i].qs, s * 16 + j), 0);
          continue;
        }
        const float t = x[i * 64 + s * 16 + j] / ue4m3(a[i].d[s]);
        ASSERT_EQ(nvfp4_code(a[i].qs, s * 16 + j), nearest_e2m1(t)) << i << "," << s << "," << j;
      }
    }
}

// ---------------------------------------------------------------------------------------------
// plain types

TEST(PlainTypes, DequantizeEachByHand) {
  float y[3];
  const uint16_t f16[3] = {0x3c00, 0xc000, 0x0001};
  dequantize_row(DType::F16, f16, y, 3);
  EXPECT_EQ(y[0], 1.0f); EXPECT_EQ(y[1], -2.0f); EXPECT_EQ(y[2], 0x1p-24f);
  const uint16_t bf[3] = {0x3f80, 0xc040, 0x7f80};
  dequantize_row(DType::BF16, bf, y, 3);
  EXPECT_EQ(y[0], 1.0f); EXPECT_EQ(y[1], -3.0f); EXPECT_TRUE(std::isinf(y[2]));
  const uint8_t e4[3] = {0x38, 0xfe, 0x01};
  dequantize_row(DType::F8_E4M3, e4, y, 3);
  EXPECT_EQ(y[0], 1.0f); EXPECT_EQ(y[1], -448.0f); EXPECT_EQ(y[2], 0x1p-9f);
  const int8_t i8[3] = {-128, 0, 127};
  dequantize_row(DType::I8, i8, y, 3);
  EXPECT_EQ(y[0], -128.0f); EXPECT_EQ(y[2], 127.0f);
  const uint8_t u8[3] = {0, 200, 255};
  dequantize_row(DType::U8, u8, y, 3);
  EXPECT_EQ(y[1], 200.0f); EXPECT_EQ(y[2], 255.0f);
  const int16_t i16[3] = {-32768, 1, 32767};
  dequantize_row(DType::I16, i16, y, 3);
  EXPECT_EQ(y[0], -32768.0f); EXPECT_EQ(y[2], 32767.0f);
  const int32_t i32[3] = {-5, 16777217, 2147483647};
  dequantize_row(DType::I32, i32, y, 3);
  EXPECT_EQ(y[0], -5.0f); EXPECT_EQ(y[1], 16777216.0f); EXPECT_EQ(y[2], 2147483648.0f);
  const int64_t i64[3] = {-7, int64_t{1} << 40, 3};
  dequantize_row(DType::I64, i64, y, 3);
  EXPECT_EQ(y[0], -7.0f); EXPECT_EQ(y[1], 0x1p40f); EXPECT_EQ(y[2], 3.0f);
  const double f64[3] = {0.1, -1e300, 2.5};
  dequantize_row(DType::F64, f64, y, 3);
  EXPECT_EQ(y[0], 0.1f); EXPECT_TRUE(std::isinf(y[1]) && y[1] < 0); EXPECT_EQ(y[2], 2.5f);
  const float f32[3] = {1.5f, -0.0f, 7.0f};
  dequantize_row(DType::F32, f32, y, 3);
  EXPECT_EQ(std::bit_cast<uint32_t>(y[1]), 0x80000000u); EXPECT_EQ(y[2], 7.0f);
}

TEST(PlainTypes, UnalignedSourceIsRead) {
  alignas(8) unsigned char buf[1 + 2 * 4] = {};
  const uint16_t v[2] = {0x4200, 0xbc00};  // 3.0, -1.0
  std::memcpy(buf + 1, v, sizeof v);
  float y[2];
  dequantize_row(DType::F16, buf + 1, y, 2);
  EXPECT_EQ(y[0], 3.0f);
  EXPECT_EQ(y[1], -1.0f);
}

TEST(PlainTypes, QuantizeRowsRoundTripByHand) {
  const float x[4] = {1.0f, -2.5f, 0.1f, 65504.0f};
  uint16_t h[4];
  quantize_row(DType::F16, x, h, 4);
  EXPECT_EQ(h[0], 0x3c00); EXPECT_EQ(h[1], 0xc100); EXPECT_EQ(h[2], 0x2e66); EXPECT_EQ(h[3], 0x7bff);
  uint16_t bf[4];
  quantize_row(DType::BF16, x, bf, 4);
  EXPECT_EQ(bf[0], 0x3f80); EXPECT_EQ(bf[1], 0xc020); EXPECT_EQ(bf[2], 0x3dcd); EXPECT_EQ(bf[3], 0x4780);  // 0x477fe000 rounds up
  uint8_t e4[4];
  quantize_row(DType::F8_E4M3, x, e4, 4);
  EXPECT_EQ(e4[0], 0x38); EXPECT_EQ(e4[1], 0xc2); EXPECT_EQ(e4[2], 0x1d); EXPECT_EQ(e4[3], 0x7e);
  float f[4];
  quantize_row(DType::F32, x, f, 4);
  EXPECT_EQ(std::memcmp(f, x, sizeof x), 0);
}

// ---------------------------------------------------------------------------------------------
// bad input

using memra::testing::error_message;

TEST(QuantErrors, RowLengthNotAMultipleNamesTypeAndN) {
  std::vector<float> y(200);
  std::vector<unsigned char> buf(1000);
  EXPECT_THAT(error_message([&] { dequantize_row(DType::NVFP4, buf.data(), y.data(), 65); }),
              AllOf(HasSubstr("nvfp4"), HasSubstr("65"), HasSubstr("64")));
  EXPECT_THAT(error_message([&] { dequantize_row(DType::Q8_0, buf.data(), y.data(), 33); }),
              AllOf(HasSubstr("q8_0"), HasSubstr("33")));
  EXPECT_THAT(error_message([&] { quantize_row(DType::MXFP4, y.data(), buf.data(), 48); }),
              AllOf(HasSubstr("mxfp4"), HasSubstr("48")));
  EXPECT_THAT(error_message([&] { quantize_row(DType::Q8_1, y.data(), buf.data(), -32); }),
              AllOf(HasSubstr("q8_1"), HasSubstr("-32")));
  EXPECT_THAT(error_message([&] { quantize_nvfp4_tensor(y.data(), buf.data(), 2, 96); }),
              AllOf(HasSubstr("nvfp4"), HasSubstr("96")));
}

TEST(QuantErrors, UnsupportedAndUnknownTypesAreErrors) {
  std::vector<float> y(256);
  std::vector<unsigned char> buf(1024);
  EXPECT_THAT(error_message([&] { dequantize_row(DType::Q4_K, buf.data(), y.data(), 256); }),
              AllOf(HasSubstr("q4_K"), HasSubstr("not supported")));
  EXPECT_THAT(error_message([&] { quantize_row(DType::I32, y.data(), buf.data(), 4); }),
              AllOf(HasSubstr("i32"), HasSubstr("no quantizer")));
  EXPECT_THAT(error_message([&] { quantize_row(DType::Q4_0, y.data(), buf.data(), 32); }),
              HasSubstr("q4_0"));
  EXPECT_THAT(error_message([&] { dequantize_row(static_cast<DType>(5), buf.data(), y.data(), 1); }),
              HasSubstr("5"));
}

TEST(QuantErrors, NonFiniteInputToABlockFormatNamesTheElement) {
  std::vector<float> x(64, 1.0f);
  x[17] = std::numeric_limits<float>::quiet_NaN();
  std::vector<unsigned char> buf(256);
  for (DType t : {DType::Q8_0, DType::Q8_1, DType::NVFP4, DType::MXFP4})
    EXPECT_THAT(error_message([&] { quantize_row(t, x.data(), buf.data(), 64); }),
                AllOf(HasSubstr(std::string(dtype_name(t))), HasSubstr("element 17")));
  x[17] = -std::numeric_limits<float>::infinity();
  EXPECT_THAT(error_message([&] { quantize_nvfp4_tensor(x.data(), buf.data(), 1, 64); }),
              HasSubstr("element 17"));
  std::vector<BlockFp4Act> a(1);
  EXPECT_THAT(error_message([&] { quantize_row_fp4act(x.data(), a.data(), 64); }),
              HasSubstr("element 17"));
  // Formats that can carry inf/NaN do.
  uint16_t h[64];
  quantize_row(DType::F16, x.data(), h, 64);
  EXPECT_EQ(h[17], 0xfc00);
}

}  // namespace
}  // namespace memra
