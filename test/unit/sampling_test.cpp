// Sampling: Philox4x32-10 against Random123's published known-answer vectors, greedy ties,
// Gumbel-max frequencies against softmax worked out here, and the invariances the GPU sampler
// must share (draws keyed by (seed, counter, index) only).
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <limits>
#include <vector>

#include "memra/error.h"
#include "memra/sampling.h"

namespace memra {
namespace {

TEST(Philox, KnownAnswers) {
  // Random123 kat_vectors, philox4x32_10.
  using A4 = std::array<uint32_t, 4>;
  EXPECT_EQ(philox4x32_10({0, 0, 0, 0}, {0, 0}), (A4{0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}));
  EXPECT_EQ(philox4x32_10({~0u, ~0u, ~0u, ~0u}, {~0u, ~0u}),
            (A4{0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}));
  EXPECT_EQ(philox4x32_10({0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u}, {0xa4093822u, 0x299f31d0u}),
            (A4{0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}));
}

// sampling.h: u takes Philox's output for ctr = {lo(index), hi(index), lo(counter), hi(counter)},
// key = {lo(seed), hi(seed)}: 32 bits of word 0 above 21 bits of word 1, plus one half, times
// 2^-53. Pinned on two of the known-answer blocks above, so that a change of the words, their
// order or the offset (all of which leave the draws' statistics as they are) fails here, where
// the device sampler's copy of the rule is defined.
TEST(Philox, UniformTakesTheDocumentedBitsOfTheBlock) {
  const auto u_of = [](uint32_t w0, uint32_t w1) {
    return (static_cast<double>((uint64_t{w0} << 21) | (w1 >> 11)) + 0.5) * 0x1p-53;
  };
  EXPECT_EQ(philox_uniform(0, 0, 0), u_of(0x6627e8d5u, 0xe169c58du));
  EXPECT_EQ(philox_uniform(0x299f31d0a4093822u, 0x0370734413198a2eu, 0x85a308d3243f6a88u),
            u_of(0xd16cfe09u, 0x94fdccebu));
}

// The 53-bit map's edges: the smallest input is 2^-54, not 0; the largest rounds to 1 unless
// capped (a draw of 1 makes -log(-log(u)) +inf: that index would win with any finite logit);
// below 2^52 the half is exact, above it rounds to even, and the cap moves nothing else.
TEST(Philox, UniformFrom53BitsStaysInsideTheOpenInterval) {
  constexpr uint64_t kTop = (uint64_t{1} << 53) - 1;
  EXPECT_EQ(uniform_from_53_bits(0), 0x1p-54);
  EXPECT_EQ(uniform_from_53_bits(kTop), 1.0 - 0x1p-53);
  EXPECT_LT(uniform_from_53_bits(kTop), 1.0);
  EXPECT_TRUE(std::isfinite(-std::log(-std::log(uniform_from_53_bits(kTop)))));
  EXPECT_EQ(uniform_from_53_bits(kTop - 1), 1.0 - 0x1p-52);                 // 2^53 - 1.5 rounds to even: 2^53 - 2
  EXPECT_EQ(uniform_from_53_bits((uint64_t{1} << 52) - 1), 0.5 - 0x1p-54);  // exact
  EXPECT_EQ(uniform_from_53_bits(uint64_t{1} << 52), 0.5);                  // 2^52 + 0.5 ties to even: 2^52
}

TEST(Philox, UniformIsInsideTheOpenInterval) {
  double lo = 1, hi = 0, sum = 0;
  const int n = 100000;
  for (int i = 0; i < n; ++i) {
    const double u = philox_uniform(42, 7, static_cast<uint64_t>(i));
    lo = std::min(lo, u), hi = std::max(hi, u), sum += u;
  }
  EXPECT_GT(lo, 0.0);
  EXPECT_LT(hi, 1.0);
  EXPECT_NEAR(sum / n, 0.5, 4.5 * std::sqrt(1.0 / 12 / n));
}

TEST(Greedy, LowestIndexWinsTies) {
  EXPECT_EQ(argmax_lowest(std::vector<float>{1, 3, 3, 2}), 1);
  EXPECT_EQ(argmax_lowest(std::vector<float>{-1, -1}), 0);
  EXPECT_EQ(sample_token(std::vector<float>{0, 5, 5}, SampleSpec{0, 1, 2}), 1);
}

TEST(Greedy, RejectsNanAndEmpty) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_THROW(argmax_lowest(std::vector<float>{1, nan}), Error);
  EXPECT_THROW(argmax_lowest(std::vector<float>{}), Error);
  EXPECT_THROW(sample_token(std::vector<float>{1, 2}, SampleSpec{-1, 0, 0}), Error);
  EXPECT_THROW(sample_token(std::vector<float>{1, 2}, SampleSpec{std::numeric_limits<float>::infinity(), 0, 0}), Error);
  EXPECT_THROW(sample_token(std::vector<float>{nan, 2}, SampleSpec{1, 0, 0}), Error);
}

TEST(Gumbel, FrequenciesFollowSoftmax) {
  const std::vector<float> logits{0.0f, 1.0f, 2.0f, -1.0f};
  const float t = 0.7f;
  // softmax(logits / t), worked out here.
  std::vector<double> p(logits.size());
  double z = 0;
  for (size_t i = 0; i < p.size(); ++i) z += p[i] = std::exp(logits[i] / static_cast<double>(t));
  for (double& x : p) x /= z;
  const int n = 40000;
  std::vector<int> count(logits.size(), 0);
  for (int c = 0; c < n; ++c) ++count[static_cast<size_t>(sample_token(logits, SampleSpec{t, 123, static_cast<uint64_t>(c)}))];
  for (size_t i = 0; i < p.size(); ++i) {
    const double sigma = std::sqrt(p[i] * (1 - p[i]) / n);
    EXPECT_NEAR(static_cast<double>(count[i]) / n, p[i], 4.5 * sigma) << "token " << i;
  }
}

TEST(Gumbel, DrawDependsOnlyOnSeedCounterAndIndex) {
  const std::vector<float> row{0.5f, 0.1f, 0.4f, 0.2f};
  std::vector<float> padded = row;  // extra tokens that can never win leave the draw alone
  padded.insert(padded.end(), 5, -std::numeric_limits<float>::infinity());
  int differ = 0;
  for (uint64_t c = 0; c < 200; ++c) {
    const int32_t a = sample_token(row, SampleSpec{1, 9, c});
    EXPECT_EQ(a, sample_token(padded, SampleSpec{1, 9, c}));
    EXPECT_EQ(a, sample_token(row, SampleSpec{1, 9, c}));  // repeatable
    differ += a != sample_token(row, SampleSpec{1, 10, c});
  }
  EXPECT_GT(differ, 20) << "another seed should change many draws";
}

TEST(Gumbel, TemperatureScalesLogits) {
  // logits / T: {0, 2} at T = 2 is {0, 1} at T = 1 exactly, so every draw agrees.
  for (uint64_t c = 0; c < 300; ++c)
    EXPECT_EQ(sample_token(std::vector<float>{0, 2}, SampleSpec{2, 5, c}),
              sample_token(std::vector<float>{0, 1}, SampleSpec{1, 5, c}));
}

}  // namespace
}  // namespace memra
