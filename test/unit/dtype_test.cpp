// The scalar conversions of memra/dtype.h, checked exhaustively where the domain is small
// (every byte of the 8-bit formats, every fp16/bf16 pattern, every rounding midpoint between
// adjacent codes) against values computed a different way: hand tables, std::ldexp formulas
// and, for fp16, the compiler's own _Float16 conversions.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>

#include "memra/dtype.h"

namespace memra {
namespace {

uint32_t bits(float x) { return std::bit_cast<uint32_t>(x); }
float from_bits(uint32_t u) { return std::bit_cast<float>(u); }

// Bitwise equality that treats every NaN as equal to every NaN (the payload is checked where it
// is part of the contract).
bool same(float a, float b) { return (std::isnan(a) && std::isnan(b)) || bits(a) == bits(b); }

// ---------------------------------------------------------------------------------------------
// E2M1

// By hand: sign | exponent (2 bits, bias 1) | mantissa (1 bit).
constexpr float kE2m1[16] = {0.0f,  0.5f,  1.0f,  1.5f,  2.0f,  3.0f,  4.0f,  6.0f,
                             -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};
constexpr int kE2m1Doubled[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

TEST(E2m1, DecodesAllSixteenCodesToTheHandTable) {
  for (int c = 0; c < 16; ++c) {
    SCOPED_TRACE(c);
    EXPECT_EQ(bits(e2m1_to_f32(static_cast<uint8_t>(c))), bits(kE2m1[c]));
    EXPECT_EQ(e2m1_doubled(static_cast<uint8_t>(c)), kE2m1Doubled[c]);
    // Only the low nibble is a code.
    EXPECT_EQ(bits(e2m1_to_f32(static_cast<uint8_t>(c | 0xf0))), bits(kE2m1[c]));
  }
}

TEST(E2m1, EncodeOfDecodeIsIdentityForAllSixteenCodes) {
  for (int c = 0; c < 16; ++c) EXPECT_EQ(f32_to_e2m1(kE2m1[c]), c) << "code " << c;
}

TEST(E2m1, RoundsAtModelOptBoundsWithTiesToEvenCode) {
  struct Case { float x; uint8_t code; };
  const float up = std::numeric_limits<float>::infinity();
  const Case cases[] = {
      {0.25f, 0}, {std::nextafter(0.25f, up), 1}, {0.5f, 1},
      {std::nextafter(0.75f, 0.0f), 1}, {0.75f, 2}, {1.25f, 2},
      {std::nextafter(1.25f, up), 3}, {std::nextafter(1.75f, 0.0f), 3}, {1.75f, 4},
      {2.5f, 4}, {std::nextafter(2.5f, up), 5}, {std::nextafter(3.5f, 0.0f), 5},
      {3.5f, 6}, {5.0f, 6}, {std::nextafter(5.0f, up), 7}, {6.0f, 7}, {1e30f, 7}, {up, 7},
      {-0.1f, 8}, {-0.0f, 8}, {-0.3f, 9}, {-5.0f, 14}, {-6.5f, 15}, {-up, 15},
      {std::numeric_limits<float>::quiet_NaN(), 7}, {-std::numeric_limits<float>::quiet_NaN(), 7},
  };
  for (const Case& c : cases) EXPECT_EQ(f32_to_e2m1(c.x), c.code) << "x = " << c.x;
}

// Nearest by brute force over the 8 magnitudes, ties to the even code: written without the
// bounds, so a wrong bound in f32_to_e2m1 shows up here.
TEST(E2m1, EncodeIsNearestGridPointOnADenseSweep) {
  for (int k = -9000; k <= 9000; ++k) {
    const float x = static_cast<float>(k) / 1024.0f;
    const float a = std::fabs(x);
    int best = 0;
    for (int c = 1; c < 8; ++c) {
      const float dc = std::fabs(a - kE2m1[c]), db = std::fabs(a - kE2m1[best]);
      if (dc < db || (dc == db && c % 2 == 0)) best = c;
    }
    const int expect = std::signbit(x) ? best | 8 : best;
    ASSERT_EQ(f32_to_e2m1(x), expect) << "x = " << x;
  }
}

// ---------------------------------------------------------------------------------------------
// E4M3 (FN) and UE4M3

float e4m3_formula(int b) {
  const int e = (b >> 3) & 15, m = b & 7;
  const float mag = e == 0 ? std::ldexp(static_cast<float>(m), -9)
                           : std::ldexp(static_cast<float>(8 + m), e - 10);
  return (b & 0x80) ? -mag : mag;
}

TEST(E4m3, DecodesAll256BytesLikeTheLdexpFormula) {
  int nans = 0;
  for (int b = 0; b < 256; ++b) {
    const float v = e4m3_to_f32(static_cast<uint8_t>(b));
    if ((b & 0x7f) == 0x7f) {
      EXPECT_TRUE(std::isnan(v)) << b;
      EXPECT_EQ(std::signbit(v), b >= 0x80) << b;
      ++nans;
      continue;
    }
    EXPECT_EQ(bits(v), bits(e4m3_formula(b))) << "byte " << b;
  }
  EXPECT_EQ(nans, 2);
  EXPECT_EQ(e4m3_to_f32(0x7e), 448.0f);
  EXPECT_EQ(e4m3_to_f32(0x08), 0x1p-6f);  // smallest normal
  EXPECT_EQ(e4m3_to_f32(0x01), 0x1p-9f);  // smallest subnormal
}

TEST(E4m3, EncodeOfDecodeIsIdentityForAllNonNanBytes) {
  for (int b = 0; b < 256; ++b) {
    if ((b & 0x7f) == 0x7f) continue;
    EXPECT_EQ(f32_to_e4m3(e4m3_to_f32(static_cast<uint8_t>(b))), b) << "byte " << b;
  }
}

// Every midpoint between adjacent positive codes goes to the even code; one ulp either side
// goes to the nearer code. Covers subnormals, the subnormal/normal seam and every binade.
TEST(E4m3, RoundsEveryMidpointToEvenAndNeighboursToNearest) {
  const float up = std::numeric_limits<float>::infinity();
  for (int b = 0; b < 0x7e; ++b) {
    const float lo = e4m3_formula(b), hi = e4m3_formula(b + 1);
    const float mid = (lo + hi) / 2;  // exact: 5 significant bits
    SCOPED_TRACE(b);
    EXPECT_EQ(f32_to_e4m3(mid), b % 2 == 0 ? b : b + 1);
    EXPECT_EQ(f32_to_e4m3(std::nextafter(mid, up)), b + 1);
    EXPECT_EQ(f32_to_e4m3(std::nextafter(mid, 0.0f)), b);
    EXPECT_EQ(f32_to_e4m3(-mid), (b % 2 == 0 ? b : b + 1) | 0x80);
  }
}

TEST(E4m3, SaturatesToPlusMinus448AndKeepsNan) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(f32_to_e4m3(448.0f), 0x7e);
  EXPECT_EQ(f32_to_e4m3(463.99f), 0x7e);
  EXPECT_EQ(f32_to_e4m3(464.0f), 0x7e);  // would tie to 480 = the NaN code's slot
  EXPECT_EQ(f32_to_e4m3(1e30f), 0x7e);
  EXPECT_EQ(f32_to_e4m3(inf), 0x7e);
  EXPECT_EQ(f32_to_e4m3(-inf), 0xfe);
  EXPECT_EQ(f32_to_e4m3(-1000.0f), 0xfe);
  EXPECT_EQ(f32_to_e4m3(std::numeric_limits<float>::quiet_NaN()), 0x7f);
  EXPECT_EQ(f32_to_e4m3(-std::numeric_limits<float>::quiet_NaN()), 0x7f);  // CUDA drops the sign
  EXPECT_EQ(f32_to_e4m3(0x1p-10f), 0x00);  // half the smallest subnormal: tie to 0
  EXPECT_EQ(f32_to_e4m3(std::nextafter(0x1p-10f, 1.0f)), 0x01);
  EXPECT_EQ(f32_to_e4m3(1e-30f), 0x00);
  EXPECT_EQ(f32_to_e4m3(-1e-30f), 0x80);
  EXPECT_EQ(f32_to_e4m3(from_bits(1)), 0x00);  // f32 subnormal
}

TEST(Ue4m3, DecodesAll256BytesIgnoringBit7With7FAsZero) {
  for (int b = 0; b < 256; ++b) {
    const int c = b & 0x7f;
    const float expect = c == 0x7f ? 0.0f : e4m3_formula(c);
    SCOPED_TRACE(b);
    EXPECT_EQ(bits(ue4m3_to_f32(static_cast<uint8_t>(b))), bits(expect));
    EXPECT_EQ(bits(ue4m3_to_f32_half(static_cast<uint8_t>(b))), bits(expect / 2));
    EXPECT_GE(ue4m3_to_f32(static_cast<uint8_t>(b)), 0.0f);
  }
  EXPECT_EQ(ue4m3_to_f32(0x38), 1.0f);
  EXPECT_EQ(ue4m3_to_f32_half(0x38), 0.5f);
  EXPECT_EQ(ue4m3_to_f32_half(0x01), 0x1p-10f);
}

TEST(Ue4m3, EncodeRoundTripsEveryCodeAndClampsTheRest) {
  for (int c = 0; c < 0x7f; ++c)
    EXPECT_EQ(f32_to_ue4m3(ue4m3_to_f32(static_cast<uint8_t>(c))), c) << c;
  EXPECT_EQ(f32_to_ue4m3(-1.0f), 0);
  EXPECT_EQ(f32_to_ue4m3(-0.0f), 0);
  EXPECT_EQ(f32_to_ue4m3(std::numeric_limits<float>::quiet_NaN()), 0);
  EXPECT_EQ(f32_to_ue4m3(1e6f), 0x7e);
  EXPECT_EQ(f32_to_ue4m3(std::numeric_limits<float>::infinity()), 0x7e);
  EXPECT_EQ(f32_to_ue4m3(0.75f), 0x34);  // 1.5 * 2^-1: exponent 6, mantissa 4
  EXPECT_EQ(f32_to_ue4m3(1.0625f), 0x38);  // midpoint of 1 and 1.125: even code 0x38
  EXPECT_EQ(f32_to_ue4m3(1.1875f), 0x3a);  // midpoint of 1.125 and 1.25: even code 0x3a
}

// ---------------------------------------------------------------------------------------------
// E8M0

TEST(E8m0, DecodesAll256BytesAsPowersOfTwoAndNan) {
  for (int e = 0; e < 255; ++e) {
    SCOPED_TRACE(e);
    EXPECT_EQ(bits(e8m0_to_f32(static_cast<uint8_t>(e))), bits(std::ldexp(1.0f, e - 127)));
    EXPECT_EQ(bits(e8m0_to_f32_half(static_cast<uint8_t>(e))), bits(std::ldexp(1.0f, e - 128)));
  }
  EXPECT_TRUE(std::isnan(e8m0_to_f32(0xff)));
  EXPECT_TRUE(std::isnan(e8m0_to_f32_half(0xff)));
  EXPECT_EQ(e8m0_to_f32(127), 1.0f);
  EXPECT_EQ(e8m0_to_f32_half(0), 0x1p-128f);  // a subnormal, exactly
  EXPECT_EQ(e8m0_to_f32_half(254), 0x1p126f);
}

// ---------------------------------------------------------------------------------------------
// fp16

float fp16_formula(int h) {
  const int e = (h >> 10) & 31, m = h & 1023;
  float mag;
  if (e == 31) mag = m ? std::numeric_limits<float>::quiet_NaN() : std::numeric_limits<float>::infinity();
  else if (e == 0) mag = std::ldexp(static_cast<float>(m), -24);
  else mag = std::ldexp(static_cast<float>(1024 + m), e - 25);
  return (h & 0x8000) ? -mag : mag;
}

TEST(Fp16, DecodesAll65536PatternsLikeTheLdexpFormula) {
  for (int h = 0; h < 65536; ++h) {
    const float v = fp16_to_f32(static_cast<uint16_t>(h));
    ASSERT_TRUE(same(v, fp16_formula(h))) << "fp16 " << std::hex << h;
    if (std::isnan(v)) {
      // The payload sits at the top of the f32 mantissa, with the sign.
      ASSERT_EQ(bits(v), (static_cast<uint32_t>(h & 0x8000) << 16) | 0x7f800000u |
                             (static_cast<uint32_t>(h & 0x3ff) << 13));
    }
  }
}

TEST(Fp16, RoundTripsAll65536PatternsIncludingNanPayloads) {
  for (int h = 0; h < 65536; ++h)
    ASSERT_EQ(f32_to_fp16(fp16_to_f32(static_cast<uint16_t>(h))), h) << std::hex << h;
}

TEST(Fp16, RoundsEveryMidpointToEvenAndNeighboursToNearest) {
  const float up = std::numeric_limits<float>::infinity();
  for (int h = 0; h < 0x7bff; ++h) {
    const float lo = fp16_formula(h), hi = fp16_formula(h + 1);
    const float mid = (lo + hi) / 2;  // exact: 12 significant bits
    const int even = h % 2 == 0 ? h : h + 1;
    ASSERT_EQ(f32_to_fp16(mid), even) << h;
    ASSERT_EQ(f32_to_fp16(-mid), even | 0x8000) << h;
    ASSERT_EQ(f32_to_fp16(std::nextafter(mid, up)), h + 1) << h;
    ASSERT_EQ(f32_to_fp16(std::nextafter(mid, 0.0f)), h) << h;
  }
}

TEST(Fp16, OverflowUnderflowInfAndNan) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(f32_to_fp16(65504.0f), 0x7bff);
  EXPECT_EQ(f32_to_fp16(std::nextafter(65520.0f, 0.0f)), 0x7bff);
  EXPECT_EQ(f32_to_fp16(65520.0f), 0x7c00);  // tie with 65536 goes to the even code: inf
  EXPECT_EQ(f32_to_fp16(1e10f), 0x7c00);
  EXPECT_EQ(f32_to_fp16(-1e10f), 0xfc00);
  EXPECT_EQ(f32_to_fp16(inf), 0x7c00);
  EXPECT_EQ(f32_to_fp16(-inf), 0xfc00);
  EXPECT_EQ(f32_to_fp16(0x1p-25f), 0x0000);  // half the smallest subnormal: tie to 0
  EXPECT_EQ(f32_to_fp16(std::nextafter(0x1p-25f, 1.0f)), 0x0001);
  EXPECT_EQ(f32_to_fp16(-0.0f), 0x8000);
  EXPECT_EQ(f32_to_fp16(from_bits(0x7fc00000u)), 0x7e00);
  EXPECT_EQ(f32_to_fp16(from_bits(0xffc00000u)), 0xfe00);
  // A NaN whose payload lives only in the low 13 bits must stay NaN, not become inf.
  const uint16_t h = f32_to_fp16(from_bits(0x7f800001u));
  EXPECT_EQ(h & 0x7c00, 0x7c00);
  EXPECT_NE(h & 0x3ff, 0);
  EXPECT_EQ(f32_to_fp16(from_bits(0xff800001u)) & 0x8000, 0x8000);
}

#if defined(__FLT16_MAX__)
// An independent implementation: the compiler's _Float16 (F16C or libgcc soft-float).
TEST(Fp16, AgreesWithCompilerFloat16OnRandomAndBoundaryFloats) {
  std::mt19937 rng(1234);
  std::uniform_int_distribution<uint32_t> any;
  for (int i = 0; i < 200000; ++i) {
    uint32_t u = any(rng);
    // Concentrate on the fp16 range (exponents 100..145) half of the time.
    if (i % 2) u = (u & 0x807fffffu) | ((100u + u % 46u) << 23);
    const float x = from_bits(u);
    if (std::isnan(x)) continue;
    const volatile float vx = x;
    const _Float16 ref = static_cast<_Float16>(vx);
    ASSERT_EQ(f32_to_fp16(x), std::bit_cast<uint16_t>(ref)) << std::hex << u;
  }
  for (int h = 0; h < 65536; ++h) {
    const _Float16 v = std::bit_cast<_Float16>(static_cast<uint16_t>(h));
    ASSERT_TRUE(same(fp16_to_f32(static_cast<uint16_t>(h)), static_cast<float>(v))) << h;
  }
}
#endif

// ---------------------------------------------------------------------------------------------
// bf16

TEST(Bf16, RoundsToNearestEvenByHand) {
  struct Case { uint32_t in; uint16_t out; };
  const Case cases[] = {
      {0x3f800000u, 0x3f80},  // 1.0
      {0x3f808000u, 0x3f80},  // tie, kept LSB 0: stays (even)
      {0x3f818000u, 0x3f82},  // tie, kept LSB 1: rounds up to even
      {0x3f808001u, 0x3f81},  // just above the tie
      {0x3f807fffu, 0x3f80},  // just below the tie
      {0xbf818000u, 0xbf82},  // negative tie rounds away in magnitude to even
      {0x7f7fffffu, 0x7f80},  // FLT_MAX overflows to inf
      {0x7f7f7fffu, 0x7f7f},  // just below the overflow tie
      {0x7f7f8000u, 0x7f80},  // tie at the top: LSB 1, rounds to inf
      {0x7f800000u, 0x7f80},  // inf
      {0xff800000u, 0xff80},  // -inf
      {0x00000001u, 0x0000},  // smallest subnormal rounds to 0
      {0x00008000u, 0x0000},  // subnormal tie to even 0
      {0x00018000u, 0x0002},  // subnormal tie to even 2
      {0x80000000u, 0x8000},  // -0
  };
  for (const Case& c : cases) EXPECT_EQ(f32_to_bf16(from_bits(c.in)), c.out) << std::hex << c.in;
}

TEST(Bf16, NanBecomesQuietNanKeepingSign) {
  EXPECT_EQ(f32_to_bf16(from_bits(0x7fc00000u)), 0x7fc0);
  EXPECT_EQ(f32_to_bf16(from_bits(0x7f800001u)), 0x7fc0);  // signalling, low payload only
  EXPECT_EQ(f32_to_bf16(from_bits(0xff800001u)), 0xffc0);
  EXPECT_EQ(f32_to_bf16(from_bits(0x7fffffffu)), 0x7fff);  // rounding must not carry into sign
  EXPECT_EQ(f32_to_bf16(from_bits(0x7fa00000u)), 0x7fe0);  // payload kept, quiet bit set
}

TEST(Bf16, DecodeIsTheUpperHalfAndRoundTripsAllPatterns) {
  for (int b = 0; b < 65536; ++b) {
    const float v = bf16_to_f32(static_cast<uint16_t>(b));
    ASSERT_EQ(bits(v), static_cast<uint32_t>(b) << 16);
    const uint16_t back = f32_to_bf16(v);
    if (std::isnan(v)) ASSERT_EQ(back, b | 0x40) << b;
    else ASSERT_EQ(back, b) << b;
  }
}

// The conversions are constexpr so that they can be evaluated where a kernel's constants are.
TEST(Conversions, AreConstantExpressions) {
  constexpr uint16_t h = f32_to_fp16(0.1f);
  constexpr uint8_t e = f32_to_e4m3(0.1f);
  static_assert(h == 0x2e66);  // 0.1 in fp16, by hand: 1.6 * 2^-4, mantissa 0.6*1024 = 614.4
  static_assert(e == 0x1d);    // 0.1 in e4m3: 1.6 * 2^-4 -> exponent 3, mantissa 0.6*8 = 4.8 -> 5
  EXPECT_EQ(fp16_to_f32(h), 0.0999755859375f);
  EXPECT_EQ(e4m3_to_f32(e), 0.1015625f);
}

}  // namespace
}  // namespace memra
