// Op tests: src/cuda/quantize.cu against memra/quant.h, bitwise.
// Contract: dequantize_row (F16, BF16, Q8_0, NVFP4), quantize_row_q8_1 and quantize_row_fp4act
// (W4A4 activations, compared decoded: the device stores A4 blocks) — the kernels use
// the same roundings in the same places, so any difference is a bug (no tolerance).
// Sizes come from the kernels' constants: 256 threads per CTA (dequantize), 8 warps = 8 blocks
// per CTA (q8_1), and a grid capped at 65535 CTAs (the grid-stride tail).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "cuda/quantize.cuh"
#include "memra/engine.h"
#include "memra/quant.h"
#include "memra/testing/matchers.h"
#include "op_harness.h"

namespace {

namespace mo = memra::ops;
using memra::DType;
using memra::testing::BitIdentical;
using memra::testing::Half16;

// Input bytes: `bits` = every byte random (every encoding, NaN payloads included, except
// Q8_0 scales forced finite: a NaN scale makes the product's NaN payload hardware-defined, so
// no bitwise contract exists there); `quantized` = random normal floats through quantize_row,
// the blocks a real model holds.
enum class Source { bits, quantized };

struct DequantCase : mo::OpCase {
  DType type;
  int64_t n;
  Source src;
  DequantCase(DType t, int64_t n_, Source s) : type(t), n(n_), src(s) {}
  std::string vars() const override {
    return mo::Vars()("type", memra::dtype_name(type))("n", n)("src", src == Source::bits ? "bits" : "quantized").str();
  }
};
void PrintTo(const DequantCase& c, std::ostream* os) { *os << c.vars(); }

std::vector<DequantCase> dequant_cases() {
  std::vector<DequantCase> cs;
  constexpr int64_t kCta = 256, kGridCap = 65535;
  for (DType t : {DType::F16, DType::BF16, DType::Q8_0, DType::NVFP4}) {
    const int64_t b = memra::type_traits(t).block_elems;
    for (Source s : {Source::bits, Source::quantized}) {
      for (int64_t n : {b, kCta - (kCta % b == 0 ? b : 0), kCta + b, int64_t(4096) * 3 + b})
        cs.emplace_back(t, n, s);
    }
    // Past the grid cap: the grid-stride loop's second lap.
    cs.emplace_back(t, (kCta * kGridCap / b + 2) * b, Source::bits);
  }
  return cs;
}

std::vector<uint8_t> make_input(const DequantCase& c, uint64_t seed) {
  std::mt19937_64 rng(seed);
  const auto bytes = size_t(memra::row_bytes(c.type, c.n));
  std::vector<uint8_t> in(bytes);
  if (c.src == Source::bits) {
    for (auto& v : in) v = uint8_t(rng());
    if (c.type == DType::Q8_0)
      for (size_t off = 0; off < bytes; off += sizeof(memra::BlockQ8_0)) {
        uint16_t d;
        std::memcpy(&d, &in[off], 2);
        if ((d & 0x7c00u) == 0x7c00u) d &= 0xbfffu;  // exponent all-ones -> finite
        std::memcpy(&in[off], &d, 2);
      }
  } else {
    std::normal_distribution<float> dist(0.0f, 1.0f);
    std::vector<float> x(size_t(c.n));
    for (auto& v : x) v = dist(rng);
    memra::quantize_row(c.type, x.data(), in.data(), c.n);
  }
  return in;
}

class Dequantize : public mo::OpTest<DequantCase> {
 protected:
  static memra::Engine& engine() {
    static memra::Engine e = memra::Engine::open(memra::testing::test_device());
    return e;
  }
};

TEST_P(Dequantize, MatchesDequantizeRowBitwise) {
  for_each_seed([&](uint64_t seed) {
    const DequantCase& c = GetParam();
    const std::vector<uint8_t> in = make_input(c, seed);
    std::vector<float> ref(size_t(c.n));
    memra::dequantize_row(c.type, in.data(), ref.data(), c.n);

    memra::Engine& e = engine();
    memra::DeviceBuffer<uint8_t> d_in(e, in.size());
    memra::DeviceBuffer<float> d_out(e, size_t(c.n));
    d_in.upload(in);
    d_out.fill_bytes(0xff);  // poison: an unwritten element stays NaN
    memra::cuda::dequantize_row_cuda(c.type, d_in.data(), d_out.data(), c.n, e.stream());
    const std::vector<float> got = d_out.download();
    EXPECT_TRUE(mo::compare_to_contract(got, ref, tolerance()));
  });
}

INSTANTIATE_TEST_SUITE_P(Eval, Dequantize, ::testing::ValuesIn(dequant_cases()), mo::OpCaseName());

// ---- q8_1 activation quantization ----------------------------------------------------------

// `normal`: N(0, scale); `zero_block`: block 0 all zeros (d = 0: every q must be 0);
// `outlier`: one value per block 100x the rest (most q round to small integers).
struct Q81Case : mo::OpCase {
  int64_t n;
  float scale;
  const char* pattern;
  Q81Case(int64_t n_, float s, const char* p) : n(n_), scale(s), pattern(p) {}
  std::string vars() const override { return mo::Vars()("n", n)("scale", scale)("pattern", pattern).str(); }
};
void PrintTo(const Q81Case& c, std::ostream* os) { *os << c.vars(); }

std::vector<Q81Case> q81_cases() {
  constexpr int64_t kBlocksPerCta = 8;
  std::vector<Q81Case> cs;
  for (int64_t nb : {int64_t(1), kBlocksPerCta - 1, kBlocksPerCta, kBlocksPerCta + 1, int64_t(8 * 1000 + 3)})
    cs.emplace_back(nb * 32, 1.0f, "normal");
  cs.emplace_back(32 * 64, 1e-3f, "normal");
  cs.emplace_back(32 * 64, 300.0f, "normal");
  cs.emplace_back(32 * 9, 1.0f, "zero_block");
  cs.emplace_back(32 * 64, 1.0f, "outlier");
  return cs;
}

class QuantizeQ81 : public mo::OpTest<Q81Case> {
 protected:
  static memra::Engine& engine() {
    static memra::Engine e = memra::Engine::open(memra::testing::test_device());
    return e;
  }
};

TEST_P(QuantizeQ81, MatchesQuantizeRowQ81Bitwise) {
  for_each_seed([&](uint64_t seed) {
    const Q81Case& c = GetParam();
    std::mt19937_64 rng(seed);
    std::normal_distribution<float> dist(0.0f, c.scale);
    std::vector<float> x(size_t(c.n));
    for (auto& v : x) v = dist(rng);
    if (std::string_view(c.pattern) == "zero_block") std::fill(x.begin(), x.begin() + 32, 0.0f);
    if (std::string_view(c.pattern) == "outlier")
      for (size_t b = 0; b < x.size() / 32; ++b) x[b * 32 + (b % 32)] = 100.0f * c.scale;
    const size_t nb = size_t(c.n / 32);
    std::vector<memra::BlockQ8_1> ref(nb);
    memra::quantize_row_q8_1(x.data(), ref.data(), c.n);

    memra::Engine& e = engine();
    memra::DeviceBuffer<float> d_x(e, x.size());
    memra::DeviceBuffer<memra::BlockQ8_1> d_y(e, nb);
    d_x.upload(x);
    d_y.fill_bytes(0xff);  // poison: d = s = NaN, q = -1
    memra::cuda::quantize_row_q8_1_cuda(d_x.data(), d_y.data(), c.n, e.stream());
    const std::vector<memra::BlockQ8_1> got = d_y.download();

    // Compare field by field so a failure names the block (d, s) or the flat value index (qs).
    std::vector<uint16_t> rd, gd, rs, gs;
    std::vector<int32_t> rq, gq;
    for (size_t b = 0; b < nb; ++b) {
      rd.push_back(ref[b].d);
      gd.push_back(got[b].d);
      rs.push_back(ref[b].s);
      gs.push_back(got[b].s);
      for (int j = 0; j < 32; ++j) {
        rq.push_back(ref[b].qs[j]);
        gq.push_back(got[b].qs[j]);
      }
    }
    EXPECT_THAT(gd, BitIdentical(rd, Half16::f16)) << "block scales d";
    EXPECT_THAT(gs, BitIdentical(rs, Half16::f16)) << "block sums s";
    EXPECT_THAT(gq, BitIdentical(rq)) << "quants qs (index = 32*block + j)";
  });
}

INSTANTIATE_TEST_SUITE_P(Eval, QuantizeQ81, ::testing::ValuesIn(q81_cases()), mo::OpCaseName());

// ---- W4A4 (fp4) activation quantization ----------------------------------------------------

// Rows of n values at a row stride ld >= n. Patterns: `normal` N(0, scale); `spread`: sub-block
// magnitudes from 1e-6 (scale code 0: all q = 0) to 1e4 (scale saturating at 448, codes at 6);
// `ties`: sub-blocks whose scale is exact (amax = 6 S) and whose values sit on every e2m1
// rounding boundary x / S in {0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5} (each tie to the even code)
// with both signs and -0.0.
struct Fp4Case : mo::OpCase {
  int64_t rows, n, ld;
  float scale;
  const char* pattern;
  Fp4Case(int64_t r, int64_t n_, int64_t l, float s, const char* p) : rows(r), n(n_), ld(l), scale(s), pattern(p) {}
  std::string vars() const override {
    return mo::Vars()("rows", rows)("n", n)("ld", ld)("scale", scale)("pattern", pattern).str();
  }
};
void PrintTo(const Fp4Case& c, std::ostream* os) { *os << c.vars(); }

std::vector<Fp4Case> fp4_cases() {
  constexpr int64_t kThreads = 256;  // sub-blocks per CTA
  return {Fp4Case(1, 64, 64, 1.0f, "normal"),
          Fp4Case(3, 16 * kThreads + 64, 16 * kThreads + 64 + 16, 1.0f, "normal"),
          Fp4Case(5, 1024, 1024 + 64, 1e-2f, "normal"),
          Fp4Case(7, 4096, 4096, 1.0f, "spread"),
          Fp4Case(2, 512, 512, 1.0f, "ties")};
}

std::vector<float> fp4_input(const Fp4Case& c, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> dist(0.0f, c.scale);
  std::vector<float> x(size_t(c.rows * c.ld), std::numeric_limits<float>::quiet_NaN());  // gaps: never read
  const std::string_view pat(c.pattern);
  for (int64_t r = 0; r < c.rows; ++r)
    for (int64_t i = 0; i < c.n; ++i) {
      const int64_t sb = i / 16, j = i % 16;
      float v = dist(rng);
      if (pat == "spread") v *= std::pow(10.0f, static_cast<float>((r * 131 + sb * 7) % 11) - 6.0f);
      if (pat == "ties") {
        // S = e4m3 value of code (sb * 5 + r * 3) % 120 + 1 (normal and subnormal codes); value 0
        // carries amax = 6 S, the rest the boundaries, signs alternating, one -0.0
        constexpr float kTie[7] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f};
        const float S = memra::ue4m3_to_f32(static_cast<uint8_t>((sb * 5 + r * 3) % 120 + 1));
        v = j == 0 ? 6.0f * S : j == 15 ? -0.0f : ((j % 2) ? -1.0f : 1.0f) * kTie[(j - 1) % 7] * S;
      }
      x[size_t(r * c.ld + i)] = v;
    }
  return x;
}

class QuantizeFp4 : public mo::OpTest<Fp4Case> {};

TEST_P(QuantizeFp4, MatchesQuantizeRowFp4actBitwise) {
  for_each_seed([&](uint64_t seed) {
    const Fp4Case& c = GetParam();
    const std::vector<float> x = fp4_input(c, seed);
    // the reference: quant.h's blocks, decoded to what an A4 block holds
    std::vector<float> rd, gd;
    std::vector<int32_t> rq, gq;
    std::vector<memra::BlockFp4Act> blk(size_t(c.n / 64));
    for (int64_t r = 0; r < c.rows; ++r) {
      memra::quantize_row_fp4act(x.data() + r * c.ld, blk.data(), c.n);
      for (const auto& b : blk)
        for (int s = 0; s < 4; ++s) {
          rd.push_back(memra::ue4m3_to_f32_half(b.d[s]));
          for (int j = 0; j < 16; ++j) {
            const uint8_t byte = b.qs[8 * s + j % 8];
            rq.push_back(memra::e2m1_doubled(j < 8 ? (byte & 0xf) : (byte >> 4)));
          }
        }
    }
    memra::Engine e = memra::Engine::open(memra::testing::test_device());
    memra::DeviceBuffer<float> d_x(e, x.size());
    const size_t nb = size_t(c.rows * c.n / 32);
    memra::DeviceBuffer<memra::cuda::A4> d_y(e, nb);
    d_x.upload(x);
    d_y.fill_bytes(0xff);
    memra::cuda::quantize_rows_fp4act_cuda(d_x.data(), c.ld, c.rows, c.n, d_y.data(), e.stream());
    for (const memra::cuda::A4& b : d_y.download()) {
      gd.push_back(b.d[0]);
      for (int j = 0; j < 16; ++j) gq.push_back(b.qs[j]);
      gd.push_back(b.d[1]);
      for (int j = 16; j < 32; ++j) gq.push_back(b.qs[j]);
    }
    int nonzero = 0;
    for (int32_t q : rq) nonzero += q != 0;
    ASSERT_GT(nonzero, 0) << "vacuous case: every code 0";
    EXPECT_THAT(gd, BitIdentical(rd)) << "sub-block scales (index = row * n/16 + sub-block)";
    EXPECT_THAT(gq, BitIdentical(rq)) << "doubled e2m1 codes (index = row * n + value)";
  });
}

// Not finite input: quant.h's quantizer refuses it; the device marks the sub-block's scale NaN
// (and only that sub-block's), so every dot product reading it is NaN, never a finite number.
TEST(QuantizeFp4Bad, NonFiniteSubBlockGetsNaNScale) {
  MEMRA_REQUIRE_TEST_GPU();
  std::vector<float> x(128, 0.5f);
  x[17] = std::numeric_limits<float>::quiet_NaN();
  x[70] = -std::numeric_limits<float>::infinity();
  memra::Engine e = memra::Engine::open(memra::testing::test_device());
  memra::DeviceBuffer<float> d_x(e, x.size());
  memra::DeviceBuffer<memra::cuda::A4> d_y(e, 4);
  d_x.upload(x);
  memra::cuda::quantize_rows_fp4act_cuda(d_x.data(), 128, 1, 128, d_y.data(), e.stream());
  const auto y = d_y.download();
  EXPECT_FALSE(std::isnan(y[0].d[0]));
  EXPECT_TRUE(std::isnan(y[0].d[1])) << "values 16..31 hold the NaN";
  EXPECT_FALSE(std::isnan(y[1].d[1]));
  EXPECT_TRUE(std::isnan(y[2].d[0])) << "values 64..79 hold -inf";
  EXPECT_FALSE(std::isnan(y[3].d[0]));
  EXPECT_THROW(memra::cuda::quantize_rows_fp4act_cuda(d_x.data(), 128, 1, 96, d_y.data(), e.stream()), memra::Error);
  EXPECT_THROW(memra::cuda::quantize_rows_fp4act_cuda(d_x.data(), 64, 1, 128, d_y.data(), e.stream()), memra::Error);
}

INSTANTIATE_TEST_SUITE_P(Eval, QuantizeFp4, ::testing::ValuesIn(fp4_cases()), mo::OpCaseName());

}  // namespace
