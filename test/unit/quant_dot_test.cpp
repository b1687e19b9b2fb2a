// The dot-product contracts of memra/quant.h: hand-worked blocks, bitwise equality with an
// independent recomputation written here (own nibble/scale decoding, own xor-butterfly), the
// accuracy bound against the f64 reference derived from the contract's rounding count, the
// exactness of the scale products the contract relies on, and a canary showing the two
// accumulation orders are distinguishable (so the equality tests cannot pass vacuously).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <vector>

#include "memra/error.h"
#include "memra/quant.h"
#include "memra/testing/errors.h"

namespace memra {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

constexpr int kDoubled[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

float fp16(uint16_t h) {  // finite fp16 by formula
  const int e = (h >> 10) & 31, m = h & 1023;
  const float mag = e == 0 ? std::ldexp(static_cast<float>(m), -24)
                           : std::ldexp(static_cast<float>(1024 + m), e - 25);
  return (h & 0x8000) ? -mag : mag;
}

float ue4m3_half(uint8_t b) {  // bit 7 ignored, 0x7f -> 0, then halved
  const int c = b & 0x7f;
  if (c == 0x7f) return 0.0f;
  const int e = c >> 3, m = c & 7;
  return e == 0 ? std::ldexp(static_cast<float>(m), -10)
                : std::ldexp(static_cast<float>(8 + m), e - 11);
}

int nib(const uint8_t* qs, int k) {  // value k of a 16-value sub-block's 8 bytes
  return k < 8 ? (qs[k] & 15) : (qs[k - 8] >> 4);
}

uint32_t bits(float x) { return std::bit_cast<uint32_t>(x); }

// The warp32 order as a shuffle-xor butterfly over 32 lanes, the form a kernel writes.
float butterfly32(const std::vector<float>& p) {
  float lane[32] = {};
  for (size_t u = 0; u < p.size(); ++u) lane[u % 32] = lane[u % 32] + p[u];
  for (int off = 16; off >= 1; off >>= 1) {
    float next[32];
    for (int l = 0; l < 32; ++l) next[l] = lane[l] + lane[l ^ off];
    std::memcpy(lane, next, sizeof lane);
  }
  return lane[0];
}

float in_order(const std::vector<float>& p) {
  float acc = 0.0f;
  for (float v : p) acc = acc + v;
  return acc;
}

float combine(const std::vector<float>& p, DotOrder o) {
  return o == DotOrder::warp32 ? butterfly32(p) : in_order(p);
}

// Independent partials (contract steps 2 and 3) and Σ|c*isum| for the error bound.
struct Partials {
  std::vector<float> p;
  double abs_sum = 0;
  void add(float c, int32_t isum) {
    p.push_back(c * static_cast<float>(isum));
    abs_sum += std::fabs(double{c} * isum);
  }
};

Partials partials_q8(const std::vector<BlockQ8_0>& w, const std::vector<BlockQ8_1>& a) {
  Partials r;
  for (size_t i = 0; i < w.size(); ++i) {
    int32_t isum = 0;
    for (int j = 0; j < 32; ++j) isum += w[i].qs[j] * a[i].qs[j];
    r.add(fp16(w[i].d) * fp16(a[i].d), isum);
  }
  return r;
}

Partials partials_w4a8(const std::vector<BlockNvfp4>& w, const std::vector<BlockQ8_1>& a) {
  Partials r;
  for (size_t i = 0; i < w.size(); ++i)
    for (int s = 0; s < 4; ++s) {
      const BlockQ8_1& ab = a[2 * i + s / 2];
      int32_t isum = 0;
      for (int k = 0; k < 16; ++k) isum += kDoubled[nib(w[i].qs + 8 * s, k)] * ab.qs[(s % 2) * 16 + k];
      r.add(ue4m3_half(w[i].d[s]) * fp16(ab.d), isum);
    }
  return r;
}

// The pair32 variant (unit = q8_1 block, two sub-blocks): e_k = sw_k * isum_k are exact in
// double and their sum too (multiples of 2^-10 below 2^23), so t = fma(sw_1, isum_1, e_0) is
// f32(e_0 + e_1) taken from the double sum, and p = f32(t * dx) from the exact double product.
Partials partials_w4a8_pair32(const std::vector<BlockNvfp4>& w, const std::vector<BlockQ8_1>& a) {
  Partials r;
  for (size_t b = 0; b < 2 * w.size(); ++b) {
    const BlockNvfp4& wb = w[b / 2];
    double e[2];
    for (int h = 0; h < 2; ++h) {
      const int s = 2 * static_cast<int>(b % 2) + h;
      int32_t isum = 0;
      for (int k = 0; k < 16; ++k) isum += kDoubled[nib(wb.qs + 8 * s, k)] * a[b].qs[16 * h + k];
      e[h] = double{ue4m3_half(wb.d[s])} * isum;
    }
    const float t = static_cast<float>(e[0] + e[1]);
    const double dx = fp16(a[b].d);
    r.p.push_back(static_cast<float>(double{t} * dx));
    r.abs_sum += (std::fabs(e[0]) + std::fabs(e[1])) * std::fabs(dx);
  }
  return r;
}

Partials partials_w4a4(const std::vector<BlockNvfp4>& w, const std::vector<BlockFp4Act>& a) {
  Partials r;
  for (size_t i = 0; i < w.size(); ++i)
    for (int s = 0; s < 4; ++s) {
      int32_t isum = 0;
      for (int k = 0; k < 16; ++k)
        isum += kDoubled[nib(w[i].qs + 8 * s, k)] * kDoubled[nib(a[i].qs + 8 * s, k)];
      r.add(ue4m3_half(w[i].d[s]) * ue4m3_half(a[i].d[s]), isum);
    }
  return r;
}

Partials partials_mxfp4(const std::vector<BlockMxfp4>& w, const std::vector<BlockQ8_1>& a) {
  Partials r;
  for (size_t i = 0; i < w.size(); ++i) {
    int32_t isum = 0;
    for (int k = 0; k < 32; ++k) {
      const int code = k < 16 ? (w[i].qs[k] & 15) : (w[i].qs[k - 16] >> 4);
      isum += kDoubled[code] * a[i].qs[k];
    }
    r.add(std::ldexp(1.0f, w[i].e - 128) * fp16(a[i].d), isum);
  }
  return r;
}

std::vector<float> random_row(uint32_t seed, int64_t n) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::uniform_real_distribution<float> dec(-2.0f, 2.0f);
  std::vector<float> x(static_cast<size_t>(n));
  float scale = 1.0f;
  for (int64_t i = 0; i < n; ++i) {
    if (i % 16 == 0) scale = std::pow(10.0f, dec(rng));
    x[i] = nd(rng) * scale;
  }
  return x;
}

// Operands of every kind for one row of n values, from random floats through the quantizers.
struct Operands {
  int64_t n;
  std::vector<BlockQ8_0> w8;
  std::vector<BlockNvfp4> w4;
  std::vector<BlockMxfp4> wmx;
  std::vector<BlockQ8_1> a8;
  std::vector<BlockFp4Act> a4;
  explicit Operands(int64_t n_, uint32_t seed) : n(n_), w8(n_ / 32), w4(n_ / 64), wmx(n_ / 32),
                                                 a8(n_ / 32), a4(n_ / 64) {
    const std::vector<float> w = random_row(seed, n), a = random_row(seed + 1000, n);
    quantize_row_q8_0(w.data(), w8.data(), n);
    quantize_row_mxfp4(w.data(), wmx.data(), n);
    quantize_row_q8_1(a.data(), a8.data(), n);
    if (n % 64 == 0) {
      quantize_row_nvfp4(w.data(), w4.data(), n, 0.01f);
      quantize_row_fp4act(a.data(), a4.data(), n);
    }
  }
};

const DotOrder kOrders[] = {DotOrder::warp32, DotOrder::sequential};

// ---------------------------------------------------------------------------------------------
// hand-worked

TEST(DotQ8, TwoBlocksByHand) {
  std::vector<BlockQ8_0> w(2);
  std::vector<BlockQ8_1> a(2);
  w[0].d = 0x3c00;  // 1
  w[1].d = 0x3400;  // 0.25
  a[0].d = 0x3800;  // 0.5
  a[1].d = 0x4000;  // 2
  for (int j = 0; j < 32; ++j) {
    w[0].qs[j] = 1;
    a[0].qs[j] = static_cast<int8_t>(j);  // Σj = 496 -> 496 * 0.5 = 248
    w[1].qs[j] = -2;
    a[1].qs[j] = 10;  // -640 * 0.5 = -320
  }
  for (DotOrder o : kOrders) {
    EXPECT_EQ(dot_q8_0_q8_1(w.data(), a.data(), 64, o), -72.0f);
    EXPECT_EQ(dot_q8_0_q8_1(w.data(), a.data(), 32, o), 248.0f);
  }
}

// One NVFP4 block (scales 1, 2, 0.5 and the 0x7F "zero" code) against q8_1 blocks (d 1 and
// 0.25) and against Fp4Act blocks: each sub-block's value worked out in real numbers.
struct HandW4 {
  BlockNvfp4 w{};
  HandW4() {
    w.d[0] = 0x38; w.d[1] = 0x40; w.d[2] = 0x30; w.d[3] = 0x7f;
    std::memset(w.qs + 0, 0x22, 8);   // sub 0: all 1.0
    std::memset(w.qs + 8, 0x07, 8);   // sub 1: values 0..7 are 6.0, 8..15 are 0
    std::memset(w.qs + 16, 0x99, 8);  // sub 2: all -0.5
    std::memset(w.qs + 24, 0x77, 8);  // sub 3: all 6.0, but the scale decodes to 0
  }
};

TEST(DotNvfp4Q8_1, OneBlockByHand) {
  HandW4 h;
  BlockQ8_1 a[2];
  a[0].d = 0x3c00; a[0].s = 0;
  a[1].d = 0x3400; a[1].s = 0;
  std::memset(a[0].qs, 1, 32);  // activations 1.0
  std::memset(a[1].qs, 4, 32);  // activations 4 * 0.25 = 1.0
  // sub 0: 16 * 1.0*1 = 16; sub 1: 8 * (6*2)*1 = 96; sub 2: 16 * (-0.5*0.5)*1 = -4; sub 3: 0
  for (DotOrder o : kOrders) EXPECT_EQ(dot_nvfp4_q8_1(&h.w, a, 64, o), 108.0f);
  // pair32: unit 0 = fma(1 * 96, 1, 0.5 * 32) * 1 = 112; unit 1 = (0 + 0.25 * -64) * 0.25 = -4
  for (DotOrder o : kOrders) EXPECT_EQ(dot_nvfp4_q8_1_pair32(&h.w, a, 64, o), 108.0f);
}

TEST(DotNvfp4Fp4Act, OneBlockByHand) {
  HandW4 h;
  BlockFp4Act a{};
  std::memset(a.d, 0x38, 4);     // scale 1
  std::memset(a.qs, 0x22, 32);   // every activation 1.0
  for (DotOrder o : kOrders) EXPECT_EQ(dot_nvfp4_fp4act(&h.w, &a, 64, o), 108.0f);
  a.d[1] = 0x30;                 // sub 1 activations now 0.5: 96 -> 48
  a.qs[3] = 0x2c;                // sub 0 value 3 now -2 (code 12) * 1.0: 16 -> 13
  for (DotOrder o : kOrders) EXPECT_EQ(dot_nvfp4_fp4act(&h.w, &a, 64, o), 57.0f);
}

TEST(DotMxfp4Q8_1, OneBlockByHand) {
  BlockMxfp4 w{};
  w.e = 128;                    // scale 2
  std::memset(w.qs, 0x33, 16);  // all 1.5 -> 3.0
  w.qs[0] = 0xf3;               // value 16 now -6 -> -12
  BlockQ8_1 a{};
  a.d = 0x3c00;
  std::memset(a.qs, 1, 32);
  // 31 * 3 - 12 = 81
  for (DotOrder o : kOrders) EXPECT_EQ(dot_mxfp4_q8_1(&w, &a, 32, o), 81.0f);
}

// The two orders on partials chosen so that each rounds differently (worked by hand):
//   lanes: 0 <- 2^24 then +2 (unit 32) = 2^24+2; 1 <- 1; 2 <- 1.
//   warp32: off 2: lane0 = 2^24+2 + 1 = 2^24+3 -> 2^24+4 (tie, even); off 1: + 1 -> tie -> 2^24+4.
//   sequential: 2^24 + 1 -> 2^24 (tie, even); + 1 -> 2^24; ...; + 2 -> 2^24+2.
TEST(AccumulatePartials, OrdersByHand) {
  std::vector<float> p(33, 0.0f);
  p[0] = 0x1p24f;
  p[1] = 1.0f;
  p[2] = 1.0f;
  p[32] = 2.0f;
  EXPECT_EQ(accumulate_partials(p.data(), 33, DotOrder::warp32), 16777220.0f);
  EXPECT_EQ(accumulate_partials(p.data(), 33, DotOrder::sequential), 16777218.0f);
  EXPECT_EQ(accumulate_partials(p.data(), 0, DotOrder::warp32), 0.0f);
  const float negzero = -0.0f;  // starts from +0.0f: -0 partials sum to +0
  EXPECT_EQ(bits(accumulate_partials(&negzero, 1, DotOrder::warp32)), 0u);
  EXPECT_EQ(bits(accumulate_partials(&negzero, 1, DotOrder::sequential)), 0u);
}

// ---------------------------------------------------------------------------------------------
// bitwise equality with the independent recomputation

class DotContract : public ::testing::TestWithParam<int64_t> {};

TEST_P(DotContract, EqualsIndependentRecomputationBitForBit) {
  const int64_t n = GetParam();
  for (uint32_t seed : {1u, 2u, 3u}) {
    Operands op(n, seed * 7919u + static_cast<uint32_t>(n));
    for (DotOrder o : kOrders) {
      SCOPED_TRACE(::testing::Message() << "seed " << seed << " order " << static_cast<int>(o));
      ASSERT_EQ(bits(dot_q8_0_q8_1(op.w8.data(), op.a8.data(), n, o)),
                bits(combine(partials_q8(op.w8, op.a8).p, o)));
      ASSERT_EQ(bits(dot_mxfp4_q8_1(op.wmx.data(), op.a8.data(), n, o)),
                bits(combine(partials_mxfp4(op.wmx, op.a8).p, o)));
      if (n % 64) continue;
      ASSERT_EQ(bits(dot_nvfp4_q8_1(op.w4.data(), op.a8.data(), n, o)),
                bits(combine(partials_w4a8(op.w4, op.a8).p, o)));
      ASSERT_EQ(bits(dot_nvfp4_q8_1_pair32(op.w4.data(), op.a8.data(), n, o)),
                bits(combine(partials_w4a8_pair32(op.w4, op.a8).p, o)));
      ASSERT_EQ(bits(dot_nvfp4_fp4act(op.w4.data(), op.a4.data(), n, o)),
                bits(combine(partials_w4a4(op.w4, op.a4).p, o)));
    }
  }
}

// The contract's rounding count: one rounding per partial plus, per path through the sum,
// ceil(U/32) lane additions and 5 butterfly levels (warp32) or U additions (sequential).
// So |dot - exact| <= (k + 1) * 2^-24 * Σ|c_u isum_u| * (1 + tiny) with k that depth; the exact
// value is dot_ref over the dequantized rows (every product exact in f64).
double depth(int64_t units, DotOrder o) {
  return o == DotOrder::warp32 ? static_cast<double>((units + 31) / 32 + 5)
                               : static_cast<double>(units);
}

// rounds_per_unit: 1, or 2 for pair32 (the fma, then the activation scale).
void expect_within_bound(float got, const Partials& p, double exact, DotOrder o, int rounds_per_unit = 1) {
  const double k = depth(static_cast<int64_t>(p.p.size()), o) + rounds_per_unit;
  const double bound = k * 0x1p-24 * p.abs_sum * 1.0001;
  EXPECT_LE(std::fabs(double{got} - exact), bound) << "units " << p.p.size();
}

TEST_P(DotContract, WithinTheDerivedBoundOfTheF64Reference) {
  const int64_t n = GetParam();
  Operands op(n, 99u + static_cast<uint32_t>(n));
  std::vector<float> w(n), a(n), a4(n);
  dequantize_row(DType::Q8_1, op.a8.data(), a.data(), n);
  for (DotOrder o : kOrders) {
    dequantize_row(DType::Q8_0, op.w8.data(), w.data(), n);
    expect_within_bound(dot_q8_0_q8_1(op.w8.data(), op.a8.data(), n, o),
                        partials_q8(op.w8, op.a8), dot_ref(w.data(), a.data(), n), o);
    dequantize_row(DType::MXFP4, op.wmx.data(), w.data(), n);
    expect_within_bound(dot_mxfp4_q8_1(op.wmx.data(), op.a8.data(), n, o),
                        partials_mxfp4(op.wmx, op.a8), dot_ref(w.data(), a.data(), n), o);
    if (n % 64) continue;
    dequantize_row(DType::NVFP4, op.w4.data(), w.data(), n);
    dequantize_row_fp4act(op.a4.data(), a4.data(), n);
    expect_within_bound(dot_nvfp4_q8_1(op.w4.data(), op.a8.data(), n, o),
                        partials_w4a8(op.w4, op.a8), dot_ref(w.data(), a.data(), n), o);
    expect_within_bound(dot_nvfp4_q8_1_pair32(op.w4.data(), op.a8.data(), n, o), partials_w4a8_pair32(op.w4, op.a8),
                        dot_ref(w.data(), a.data(), n), o, 2);
    expect_within_bound(dot_nvfp4_fp4act(op.w4.data(), op.a4.data(), n, o),
                        partials_w4a4(op.w4, op.a4), dot_ref(w.data(), a4.data(), n), o);
  }
}

// Row lengths around the lane count: 1 unit, a partial warp, one full warp of units, one past
// it, and several wraps (units are 32-value blocks or 16-value sub-blocks).
INSTANTIATE_TEST_SUITE_P(RowLengths, DotContract,
                         ::testing::Values(32, 64, 128, 64 * 8, 32 * 31, 32 * 32, 32 * 33, 64 * 17,
                                           64 * 100, 64 * 257),
                         [](const auto& info) { return "n" + std::to_string(info.param); });

// Canary: the orders disagree on ordinary data, so a kernel (or this file's recomputation)
// using the wrong one fails the equality above rather than passing by luck.
TEST(DotContractCanary, OrdersAreDistinguishableOnRandomRows) {
  int differ_q8 = 0, differ_w4 = 0;
  for (uint32_t seed = 0; seed < 10; ++seed) {
    Operands op(64 * 128, 500 + seed);
    differ_q8 += dot_q8_0_q8_1(op.w8.data(), op.a8.data(), op.n, DotOrder::warp32) !=
                 dot_q8_0_q8_1(op.w8.data(), op.a8.data(), op.n, DotOrder::sequential);
    differ_w4 += bits(dot_nvfp4_q8_1(op.w4.data(), op.a8.data(), op.n, DotOrder::warp32)) !=
                 bits(combine(partials_w4a8(op.w4, op.a8).p, DotOrder::sequential));
  }
  EXPECT_GT(differ_q8, 0);
  EXPECT_GT(differ_w4, 0);
}

// Canary: pair32 is another contract, not W4A8 by another name: on ordinary rows the two differ
// in the last bits, so an arm that ran one under the other's name fails the op tests.
TEST(DotContractCanary, Pair32DiffersFromW4A8OnRandomRows) {
  int differ = 0;
  for (uint32_t seed = 0; seed < 10; ++seed) {
    Operands op(64 * 128, 700 + seed);
    differ += bits(dot_nvfp4_q8_1(op.w4.data(), op.a8.data(), op.n)) !=
              bits(dot_nvfp4_q8_1_pair32(op.w4.data(), op.a8.data(), op.n));
  }
  EXPECT_GT(differ, 0);
}

// ---------------------------------------------------------------------------------------------
// the exactness the contract relies on (step 3: c = scale_w * scale_a has no rounding)

TEST(DotScales, Ue4m3HalfTimesEveryFp16IsExact) {
  std::vector<float> h16(0x7c00);
  for (int h = 0; h < 0x7c00; ++h) h16[h] = fp16(static_cast<uint16_t>(h));
  for (int c = 0; c < 128; ++c) {
    const float sc = ue4m3_half(static_cast<uint8_t>(c));
    for (int h = 0; h < 0x7c00; ++h)
      ASSERT_EQ(double{sc * h16[h]}, double{sc} * double{h16[h]}) << c << "," << h;
  }
}

TEST(DotScales, Ue4m3HalfPairsAndFp16PairsAreExact) {
  for (int c = 0; c < 128; ++c)
    for (int e = 0; e < 128; ++e) {
      const float x = ue4m3_half(static_cast<uint8_t>(c)), y = ue4m3_half(static_cast<uint8_t>(e));
      ASSERT_EQ(double{x * y}, double{x} * double{y});
    }
  std::mt19937 rng(5);
  std::uniform_int_distribution<int> any(0, 0x7bff);
  for (int i = 0; i < 200000; ++i) {
    const float x = fp16(static_cast<uint16_t>(any(rng))), y = fp16(static_cast<uint16_t>(any(rng)));
    ASSERT_EQ(double{x * y}, double{x} * double{y}) << x << " * " << y;
  }
}

// ---------------------------------------------------------------------------------------------
// bad input

using memra::testing::error_message;

TEST(DotErrors, RowLengthNotAMultipleNamesTypesAndN) {
  Operands op(128, 1);
  EXPECT_THAT(error_message([&] { dot_nvfp4_q8_1(op.w4.data(), op.a8.data(), 96); }),
              AllOf(HasSubstr("nvfp4"), HasSubstr("q8_1"), HasSubstr("96")));
  EXPECT_THAT(error_message([&] { dot_nvfp4_q8_1_pair32(op.w4.data(), op.a8.data(), 32); }),
              AllOf(HasSubstr("pair32"), HasSubstr("32")));
  EXPECT_THAT(error_message([&] { dot_nvfp4_fp4act(op.w4.data(), op.a4.data(), 32); }),
              AllOf(HasSubstr("fp4act"), HasSubstr("32")));
  EXPECT_THAT(error_message([&] { dot_q8_0_q8_1(op.w8.data(), op.a8.data(), 48); }),
              AllOf(HasSubstr("q8_0"), HasSubstr("48")));
  EXPECT_THAT(error_message([&] { dot_mxfp4_q8_1(op.wmx.data(), op.a8.data(), -32); }),
              AllOf(HasSubstr("mxfp4"), HasSubstr("-32")));
}

}  // namespace
}  // namespace memra
