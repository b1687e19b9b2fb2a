// The matchers' verdicts and the text a person reads when they fail (golden strings: the
// message is part of the contract). Expected values are worked out by hand in the comments.
#include <gmock/gmock.h>
#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include <bit>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "memra/testing/matchers.h"

namespace {

using memra::testing::BitIdentical;
using memra::testing::Half16;
using memra::testing::InBand;
using memra::testing::MarginClassPasses;
using memra::testing::WithinEntryNoise;
using ::testing::Not;

float from_bits(uint32_t b) { return std::bit_cast<float>(b); }

template <class M, class T>
std::string explain(const M& m, const T& value) {
  ::testing::StringMatchResultListener l;
  ::testing::ExplainMatchResult(m, value, &l);
  return l.str();
}

template <class T, class M>
std::string describe(const M& m, bool negation = false) {
  return ::testing::DescribeMatcher<T>(m, negation);
}

// ---- BitIdentical ---------------------------------------------------------------------------

TEST(BitIdentical, EqualFloatsMatchAndDescribe) {
  const std::vector<float> ref = {1.0f, -2.5f, 0.0f};
  EXPECT_THAT(std::vector<float>(ref), BitIdentical(ref));
  EXPECT_EQ(describe<std::vector<float>>(BitIdentical(ref)),
            "is bit-identical to the reference (3 float32 values)");
  EXPECT_EQ(describe<std::vector<float>>(BitIdentical(ref), true),
            "differs in at least one bit from the reference (3 float32 values)");
}

TEST(BitIdentical, ExplainsCountFirstIndexHexUlpAndAbsDiff) {
  const std::vector<float> ref = {1.0f, 2.0f, 3.0f, 4.0f};
  // [2]: 3.0 = 0x40400000 -> one ulp up 0x40400001 = 3 + 2^-22 = 3.000000238...
  // [3]: 4.0 = 0x40800000 -> two ulps up 0x40800002 = 4 + 2^-20 = 4.00000095...
  const std::vector<float> got = {1.0f, 2.0f, from_bits(0x40400001), from_bits(0x40800002)};
  EXPECT_THAT(got, Not(BitIdentical(ref)));
  EXPECT_EQ(explain(BitIdentical(ref), got),
            "which differs in 2 of 4 elements; first at [2]: 0x40400001 vs 0x40400000 "
            "(3.00000024 vs 3); max 2 ulp, max |diff| 9.53674316e-07");
}

TEST(BitIdentical, BrokenComparisonFailureNamesTheFirstBadElement) {
  std::vector<float> ref(100, 0.5f);
  std::vector<float> got = ref;
  got[37] = 0.25f;  // 0x3e800000 vs 0x3f000000: 2^23 ulps apart (one binade)
  got[80] = 0.75f;
  EXPECT_NONFATAL_FAILURE(EXPECT_THAT(got, BitIdentical(ref)),
                          "which differs in 2 of 100 elements; first at [37]: 0x3e800000 vs "
                          "0x3f000000 (0.25 vs 0.5); max 8388608 ulp, max |diff| 0.25");
  EXPECT_NONFATAL_FAILURE(EXPECT_THAT(got, BitIdentical(ref)),
                          "Expected: is bit-identical to the reference (100 float32 values)");
}

TEST(BitIdentical, LengthMismatchIsNamed) {
  const std::vector<float> ref = {1, 2, 3, 4};
  EXPECT_EQ(explain(BitIdentical(ref), std::vector<float>{1, 2, 3}),
            "which has 3 elements, the reference 4");
}

TEST(BitIdentical, SignedZeroIsADifferenceOfZeroUlp) {
  // -0 == +0 numerically, but the bits differ: a batch-dependent sign of zero is a real fork.
  const std::vector<float> ref = {0.0f};
  EXPECT_EQ(explain(BitIdentical(ref), std::vector<float>{-0.0f}),
            "which differs in 1 of 1 element; first at [0]: 0x80000000 vs 0x00000000 (-0 vs 0); "
            "max 0 ulp, max |diff| 0");
}

TEST(BitIdentical, NanIsReportedAndExcludedFromUlp) {
  const std::vector<float> ref = {1.0f, 2.0f};
  const std::vector<float> got = {from_bits(0x7fc00000), 2.0f};
  EXPECT_EQ(explain(BitIdentical(ref), got),
            "which differs in 1 of 2 elements; first at [0]: 0x7fc00000 vs 0x3f800000 (nan vs 1); "
            "max 0 ulp, max |diff| 0; NaN among the differing: 1 in the value, 0 in the reference "
            "(excluded from ulp and |diff|)");
  // Identical NaN bits are bit-identical: this is a bitwise matcher, not a numeric one.
  EXPECT_THAT(got, BitIdentical(got));
}

TEST(BitIdentical, Bf16AndF16InterpretTheSameBitsDifferently) {
  const std::vector<uint16_t> ref = {0x3f80, 0x4000};  // bf16 1.0, 2.0
  const std::vector<uint16_t> got = {0x3f80, 0x4001};  // bf16 2 + 2^-6
  EXPECT_EQ(explain(BitIdentical(ref, Half16::bf16), got),
            "which differs in 1 of 2 elements; first at [1]: 0x4001 vs 0x4000 (2.015625 vs 2); "
            "max 1 ulp, max |diff| 0.015625");
  const std::vector<uint16_t> h_ref = {0x3c00};  // f16 1.0
  const std::vector<uint16_t> h_got = {0x3c01};  // f16 1 + 2^-10
  EXPECT_EQ(explain(BitIdentical(h_ref, Half16::f16), h_got),
            "which differs in 1 of 1 element; first at [0]: 0x3c01 vs 0x3c00 (1.00097656 vs 1); "
            "max 1 ulp, max |diff| 0.0009765625");
  EXPECT_EQ(describe<std::vector<uint16_t>>(BitIdentical(h_ref, Half16::f16)),
            "is bit-identical to the reference (1 float16 value)");
  EXPECT_EQ(describe<std::vector<int32_t>>(BitIdentical(std::vector<int32_t>{4})),
            "is bit-identical to the reference (1 token)");
}

TEST(BitIdentical, TokenStreams) {
  const std::vector<int32_t> ref = {1, 2, 3, 4, 5};
  EXPECT_THAT((std::vector<int32_t>{1, 2, 3, 4, 5}), BitIdentical(ref));
  EXPECT_EQ(explain(BitIdentical(ref), std::vector<int32_t>{1, 2, 3, 7, 9}),
            "which differs in 2 of 5 tokens; first at [3]: 7 vs 4");
  EXPECT_EQ(describe<std::vector<int32_t>>(BitIdentical(ref)),
            "is bit-identical to the reference (5 tokens)");
  const std::vector<uint32_t> uref = {7, 8};
  EXPECT_THAT((std::vector<uint32_t>{7, 8}), BitIdentical(uref));
  EXPECT_THAT((std::vector<uint32_t>{7, 9}), Not(BitIdentical(uref)));
}

TEST(BitIdentical, ElementTypeMismatchNeverMatches) {
  const std::vector<float> ref = {1.0f};
  EXPECT_EQ(explain(BitIdentical(ref), std::vector<int32_t>{1}),
            "which holds token values, the reference float32");
}

// ---- WithinEntryNoise -----------------------------------------------------------------------

// Three-token streams over a 4-wide vocab that fork at position 2 (ids 2 vs 3).
struct Fork {
  memra::testing::GreedyStream ref, test, noise;
};
Fork make_fork(float ref2, float ref3, float noise2, float noise3,
               std::vector<int32_t> noise_tokens = {0, 1, 2}) {
  Fork f;
  const std::vector<float> pick0 = {1, 0, 0, 0}, pick1 = {0, 1, 0, 0};
  f.ref = {{0, 1, 2}, {pick0, pick1, {0, 0, ref2, ref3}}};
  f.test = {{0, 1, 3}, {pick0, pick1, {0, 0, 3.2f, 3.4f}}};
  f.noise = {noise_tokens, {pick0, pick1, {0, 0, noise2, noise3}}};
  return f;
}

TEST(WithinEntryNoise, StructuralForkFailsWithBothArmsLogits) {
  // ref margin 3.5 - 3.25 = 0.25; noise |3.5-3.46875| + |3.25-3.28125| = 0.0625.
  const Fork f = make_fork(3.5f, 3.25f, 3.46875f, 3.28125f);
  const auto d = memra::testing::first_divergence(f.ref, f.test, f.noise);
  EXPECT_THAT(d, Not(WithinEntryNoise()));
  // The noise stream's row at both ids, which entry_noise sums the distances to.
  EXPECT_EQ(d.noise_logit_ref_id, 3.46875f);
  EXPECT_EQ(d.noise_logit_test_id, 3.28125f);
  EXPECT_EQ(explain(WithinEntryNoise(), d),
            "which diverges at position 2: reference token 2 vs test token 3; reference row "
            "[2]=3.5 [3]=3.25, test row [2]=3.2 [3]=3.4, noise row [2]=3.46875 [3]=3.28125; "
            "reference margin 0.25 > entry noise 0.0625: a structural fork, not a near tie");
}

TEST(WithinEntryNoise, NearTieWithinNoisePasses) {
  // ref margin 3.5 - 3.46875 = 0.03125; noise |3.5-3.46875| + |3.46875-3.5| = 0.0625.
  const Fork f = make_fork(3.5f, 3.46875f, 3.46875f, 3.5f);
  const auto d = memra::testing::first_divergence(f.ref, f.test, f.noise);
  EXPECT_THAT(d, WithinEntryNoise());
  EXPECT_EQ(explain(WithinEntryNoise(), d),
            "which diverges at position 2: reference token 2 vs test token 3; reference row "
            "[2]=3.5 [3]=3.46875, test row [2]=3.2 [3]=3.4, noise row [2]=3.46875 [3]=3.5; "
            "reference margin 0.03125 <= entry noise 0.0625: a near tie the engine cannot resolve "
            "in any arm");
}

TEST(WithinEntryNoise, NoiseFromAnEarlierSeparatedStreamCannotExcuseAFork) {
  // The tokenwise stream left the reference at position 1, so its row at 2 decided another
  // prefix: even a huge apparent noise proves nothing.
  const Fork f = make_fork(3.5f, 3.46875f, -100.0f, 100.0f, {0, 3, 2});
  const auto d = memra::testing::first_divergence(f.ref, f.test, f.noise);
  EXPECT_THAT(d, Not(WithinEntryNoise()));
  EXPECT_EQ(explain(WithinEntryNoise(), d),
            "which diverges at position 2: reference token 2 vs test token 3; reference row "
            "[2]=3.5 [3]=3.46875, test row [2]=3.2 [3]=3.4; reference margin 0.03125, entry noise "
            "not measurable (the reference arm's own streams separate at position 1, before the "
            "fork): cannot be shown to be a near tie");
}

TEST(WithinEntryNoise, AgreementMatchesAndDescribes) {
  const Fork f = make_fork(3.5f, 3.25f, 3.5f, 3.25f);
  const auto d = memra::testing::first_divergence(f.ref, f.ref, f.noise);
  EXPECT_THAT(d, WithinEntryNoise());
  EXPECT_EQ(explain(WithinEntryNoise(), d), "which agrees over all 3 tokens");
  EXPECT_EQ(describe<memra::testing::Divergence>(WithinEntryNoise()),
            "does not diverge, or diverges where the reference margin is within the reference "
            "arm's entry-point noise");
  EXPECT_EQ(describe<memra::testing::Divergence>(WithinEntryNoise(), true),
            "diverges where the reference margin exceeds the reference arm's entry-point noise");
}

// ---- InBand ---------------------------------------------------------------------------------

memra::testing::TfStep step(size_t i, int32_t pick) {
  // Oracle picked 7 (logit 10); runners-up 9 (9.5) and 4 (8). Top-3 bank.
  return {i, pick, {7, {7, 9, 4}, {10.0f, 9.5f, 8.0f}}};
}

TEST(InBand, AgreeAndInBandPass) {
  const auto rule = memra::testing::absolute_band(0.5);
  EXPECT_THAT(step(4, 7), InBand(rule));
  EXPECT_EQ(explain(InBand(rule), step(4, 7)), "which is step 4: GPU pick 7 vs banked 7 -> agree");
  EXPECT_THAT(step(4, 9), InBand(rule));  // margin 10 - 9.5 = 0.5 <= 0.5
  EXPECT_EQ(explain(InBand(rule), step(4, 9)),
            "which is step 4: GPU pick 9 vs banked 7; oracle margin 0.5 <= band 0.5 -> in band");
}

TEST(InBand, OutOfBandFailsWithMarginAndBand) {
  const auto rule = memra::testing::absolute_band(0.25);
  EXPECT_THAT(step(4, 9), Not(InBand(rule)));
  EXPECT_EQ(explain(InBand(rule), step(4, 9)),
            "which is step 4: GPU pick 9 vs banked 7; oracle margin 0.5 > band 0.25 -> out of band");
}

TEST(InBand, PickBeyondTopKIsBoundedBelow) {
  // Lower bound 10 - 8 = 2: above a band of 0.25 it is out of band for certain...
  EXPECT_EQ(explain(InBand(memra::testing::absolute_band(0.25)), step(4, 123)),
            "which is step 4: GPU pick 123 vs banked 7; oracle margin >= 2 > band 0.25 (pick "
            "beyond the banked top-k) -> out of band");
  // ...within a band of 3 the bank cannot tell: unresolved, which fails, never passes.
  EXPECT_THAT(step(4, 123), Not(InBand(memra::testing::absolute_band(3))));
  EXPECT_EQ(explain(InBand(memra::testing::absolute_band(3)), step(4, 123)),
            "which is step 4: GPU pick 123 vs banked 7; oracle margin >= 2 <= band 3 (pick beyond "
            "the banked top-k) -> unresolved");
}

TEST(InBand, RelativeBandScalesWithTop1) {
  // band = 0.06 * |10| = 0.6 >= margin 0.5
  EXPECT_THAT(step(0, 9), InBand(memra::testing::relative_band(0.06)));
  EXPECT_THAT(step(0, 9), Not(InBand(memra::testing::relative_band(0.04))));  // band 0.4
  EXPECT_EQ(describe<memra::testing::TfStep>(InBand(memra::testing::relative_band(0.06))),
            "agrees with the banked token, or picks one within the band (0.06*|top1|) of the "
            "oracle top-1");
  EXPECT_EQ(describe<memra::testing::TfStep>(InBand(memra::testing::absolute_band(0.5)), true),
            "picks a token outside the band (0.5) of the oracle top-1, or one the bank cannot "
            "resolve");
}

TEST(InBand, AllRowsCountsClassesAndListsFailures) {
  const auto rule = memra::testing::absolute_band(0.5);
  const std::vector<memra::testing::TfStep> rows = {step(0, 7), step(1, 9), step(2, 4),
                                                    step(3, 7), step(4, 123)};
  EXPECT_THAT(rows, Not(InBand(rule)));
  EXPECT_EQ(explain(InBand(rule), rows),
            "which has 2 of 5 rows failing (agree 2, in band 1, out of band 2, unresolved 0); "
            "step 2: GPU pick 4 vs banked 7; oracle margin 2 > band 0.5 -> out of band; step 4: "
            "GPU pick 123 vs banked 7; oracle margin >= 2 > band 0.5 (pick beyond the banked "
            "top-k) -> out of band");
  const std::vector<memra::testing::TfStep> good = {step(0, 7), step(1, 9)};
  EXPECT_THAT(good, InBand(rule));
}

// ---- MarginClassPasses ----------------------------------------------------------------------

using Rows = std::vector<std::vector<float>>;

// One flip at position 6, mid-window, while the decision position 7 (the window's last) is safe:
// nothing differs there, the delta 0 stays below the margins (4).
memra::testing::MarginWindow unexplained_window() {
  const Rows a = {{3, 1, 0}, {1, 0, -1}, {0, 0, 4}};
  const Rows b = {{3, 1, 0}, {0, 1, -1}, {0, 0, 4}};
  return memra::testing::classify_margin_window(a, b, 5);
}

TEST(MarginClassPasses, StableAndNearTieExposedPass) {
  const Rows rows = {{3, 1, 0}, {0, 2, 0.5f}};
  const auto stable = memra::testing::classify_margin_window(rows, rows, 0);
  EXPECT_THAT(stable, MarginClassPasses());
  EXPECT_EQ(explain(MarginClassPasses(), stable),
            "which is STABLE: 0 flips in 2 positions; decision position 1: decode top-1 1 margin 1.5, "
            "prefill top-1 1 margin 1.5; delta at the ids 0 <= min margin 1.5 (not exposed); 0 of 2 "
            "decode margins below the decision's (percentile 0); decode margins min 1.5 p10 1.5 p50 2 "
            "p90 2 max 2, prefill margins min 1.5 p50 2 max 2: the config spread cannot reach across "
            "the decision margin");
  const Rows exposed = {{3, 1, 0}, {0, 2, 1.875f}};
  EXPECT_THAT(memra::testing::classify_margin_window(rows, exposed, 0), MarginClassPasses());
}

TEST(MarginClassPasses, ASingleCoveredFlipIsANearTieAndPasses) {
  // The flip is at the decision position 22 (the window's last), whose margin the spread covers.
  const Rows a = {{3, 1, 0}, {0, 0, 4}, {2, 2.125f, 0}};
  const Rows b = {{3, 1, 0}, {0, 0, 4}, {2.25f, 2.125f, 0}};
  const auto w = memra::testing::classify_margin_window(a, b, 20);
  EXPECT_THAT(w, MarginClassPasses());
  EXPECT_EQ(explain(MarginClassPasses(), w),
            "which is NEAR-TIE: 1 flip in 3 positions (at 22); decision position 22: decode top-1 1 "
            "margin 0.125, prefill top-1 0 margin 0.125; delta at the ids 0.25 > min margin 0.125 "
            "(exposed); 0 of 3 decode margins below the decision's (percentile 0); decode margins min "
            "0.125 p10 0.125 p50 2 p90 4 max 4, prefill margins min 0.125 p50 2 max 4: cross-config "
            "drift at a near tie, not a numeric defect");
}

TEST(MarginClassPasses, UnexplainedFlipFails) {
  const auto w = unexplained_window();
  EXPECT_THAT(w, Not(MarginClassPasses()));
  EXPECT_EQ(explain(MarginClassPasses(), w),
            "which is UNEXPLAINED: 1 flip in 3 positions (at 6); decision position 7: decode top-1 2 "
            "margin 4, prefill top-1 2 margin 4; delta at the ids 0 <= min margin 4 (not exposed); 2 "
            "of 3 decode margins below the decision's (percentile 0.666667); decode margins min 1 p10 1 "
            "p50 2 p90 4 max 4, prefill margins min 1 p50 2 max 4: a flip the config spread at the "
            "decision position does not cover, a real defect");
}

TEST(MarginClassPasses, SystematicFailsAndListsTheFlips) {
  const Rows a(7, std::vector<float>{1, 0}), b(7, std::vector<float>{0, 1});
  const auto w = memra::testing::classify_margin_window(a, b, 0);
  EXPECT_THAT(w, Not(MarginClassPasses()));
  EXPECT_EQ(explain(MarginClassPasses(), w),
            "which is SYSTEMATIC: 7 flips in 7 positions (at 0, 1, 2, 3, 4, and 2 more); decision "
            "position 6: decode top-1 0 margin 1, prefill top-1 1 margin 1; delta at the ids 1 <= min "
            "margin 1 (not exposed); 0 of 7 decode margins below the decision's (percentile 0); decode "
            "margins min 1 p10 1 p50 1 p90 1 max 1, prefill margins min 1 p50 1 max 1: several "
            "positions disagree, not a near-tie coin");
}

TEST(MarginClassPasses, Describes) {
  EXPECT_EQ(describe<memra::testing::MarginWindow>(MarginClassPasses()),
            "classifies as STABLE, NEAR-TIE-EXPOSED or NEAR-TIE (no flip, or a single flip with the "
            "decision position exposed)");
  EXPECT_EQ(describe<memra::testing::MarginWindow>(MarginClassPasses(), true),
            "classifies as UNEXPLAINED or SYSTEMATIC (a single flip with the decision position not "
            "exposed, or more than one flip)");
}

// ---- the whole failure text ------------------------------------------------------------------

// What a person reads when EXPECT_THAT fails, from "Value of:" to the end. gtest prints the value
// before the explanation; a record or a span without a printer prints there as a byte dump
// ("40-byte object <00-00 ...>", uninitialised padding included), which hides the explanation.

TEST(FailureText, BitIdenticalOnASpanListsItsElements) {
  const std::vector<float> ref = {1.0f, 2.0f, 3.0f, 4.0f};
  const std::vector<float> v = {1.0f, 2.0f, from_bits(0x40400001), 4.0f};
  const std::span<const float> got(v);
  EXPECT_NONFATAL_FAILURE(EXPECT_THAT(got, BitIdentical(ref)),
                          "Value of: got\n"
                          "Expected: is bit-identical to the reference (4 float32 values)\n"
                          "  Actual: { 1, 2, 3.00000024, 4 }, which differs in 1 of 4 elements; "
                          "first at [2]: 0x40400001 vs 0x40400000 (3.00000024 vs 3); max 1 ulp, max "
                          "|diff| 2.38418579e-07");
}

TEST(FailureText, WithinEntryNoiseSummarisesTheDivergence) {
  const Fork f = make_fork(3.5f, 3.25f, 3.46875f, 3.28125f);
  const auto d = memra::testing::first_divergence(f.ref, f.test, f.noise);
  EXPECT_NONFATAL_FAILURE(
      EXPECT_THAT(d, WithinEntryNoise()),
      "Value of: d\n"
      "Expected: does not diverge, or diverges where the reference margin is within the reference "
      "arm's entry-point noise\n"
      "  Actual: Divergence{position 2, reference token 2, test token 3, reference margin 0.25, "
      "entry noise 0.0625} (of type memra::testing::Divergence), which diverges at position 2: "
      "reference token 2 vs test token 3; reference row [2]=3.5 [3]=3.25, test row [2]=3.2 "
      "[3]=3.4, noise row [2]=3.46875 [3]=3.28125; reference margin 0.25 > entry noise 0.0625: a "
      "structural fork, not a near tie");
}

TEST(FailureText, InBandSummarisesTheSteps) {
  const std::vector<memra::testing::TfStep> rows = {step(0, 7), step(1, 4)};
  EXPECT_NONFATAL_FAILURE(
      EXPECT_THAT(rows, InBand(memra::testing::absolute_band(0.5))),
      "Value of: rows\n"
      "Expected: agrees with the banked token, or picks one within the band (0.5) of the oracle "
      "top-1\n"
      "  Actual: { TfStep{step 0, pick 7, BankRow{token 7, top-3 from logit 10 to 8}}, TfStep{step "
      "1, pick 4, BankRow{token 7, top-3 from logit 10 to 8}} }, which has 1 of 2 rows failing "
      "(agree 1, in band 0, out of band 1, unresolved 0); step 1: GPU pick 4 vs banked 7; oracle "
      "margin 2 > band 0.5 -> out of band");
}

TEST(FailureText, MarginClassPassesSummarisesTheWindow) {
  const auto w = unexplained_window();
  EXPECT_NONFATAL_FAILURE(
      EXPECT_THAT(w, MarginClassPasses()),
      "Value of: w\n"
      "Expected: classifies as STABLE, NEAR-TIE-EXPOSED or NEAR-TIE (no flip, or a single flip with "
      "the decision position exposed)\n"
      "  Actual: MarginWindow{positions 5..7, 1 flip, decision position 7, UNEXPLAINED} (of type "
      "memra::testing::MarginWindow), which is UNEXPLAINED: 1 flip in 3 positions (at 6); decision "
      "position 7:");
}

TEST(FailureText, SpansOfHalfBitsAndTokensPrintTheirElements) {
  const std::vector<uint16_t> h = {0x3f80, 0x4000};
  EXPECT_EQ(::testing::PrintToString(std::span<const uint16_t>(h)), "{ 0x3f80, 0x4000 }");
  const std::vector<int32_t> t = {5, -1};
  EXPECT_EQ(::testing::PrintToString(std::span<const int32_t>(t)), "{ 5, -1 }");
  const std::vector<float> many(40, 0.5f);
  EXPECT_THAT(::testing::PrintToString(std::span<const float>(many)), ::testing::EndsWith("0.5, ... }"));
  EXPECT_EQ(::testing::PrintToString(std::span<const float>()), "{}");
}

TEST(FailureText, RecordsPrintOneLine) {
  const Fork f = make_fork(3.5f, 3.46875f, -100.0f, 100.0f, {0, 3, 2});
  EXPECT_EQ(::testing::PrintToString(memra::testing::first_divergence(f.ref, f.test, f.noise)),
            "Divergence{position 2, reference token 2, test token 3, reference margin 0.03125, "
            "entry noise not measurable}");
  EXPECT_EQ(::testing::PrintToString(memra::testing::first_divergence(f.ref, f.ref, f.ref)),
            "Divergence{none over 3 tokens}");
  const auto row = memra::testing::classify_tf_row(3, 9, step(3, 9).bank, memra::testing::absolute_band(1));
  EXPECT_EQ(::testing::PrintToString(row), "TfRow{step 3, pick 9, banked 7, in band}");
}

}  // namespace
