// Records and rules behind the gate verdicts, on hand-made rows with hand-worked answers.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <optional>
#include <vector>

#include "memra/error.h"
#include "memra/testing/errors.h"
#include "memra/testing/records.h"

namespace {

namespace mt = memra::testing;
using ::testing::HasSubstr;
using memra::testing::error_message;

TEST(Top2, TiesBreakToTheLowestIndex) {
  const std::vector<float> row = {1, 5, 3, 5, 4};
  const auto t = mt::top2(row);
  EXPECT_EQ(t.id1, 1);
  EXPECT_EQ(t.id2, 3);  // the second 5, not 4: an exact tie has margin 0
  EXPECT_EQ(t.margin(), 0.0f);
  EXPECT_EQ(mt::argmax(row), 1);
  const std::vector<float> desc = {9, 2, 1};
  EXPECT_EQ(mt::top2(desc).id2, 1);
  EXPECT_EQ(mt::top2(desc).margin(), 7.0f);
}

TEST(Top2, NanOrShortRowIsAnError) {
  const std::vector<float> nan_row = {1, NAN, 0};
  EXPECT_THAT(error_message([&] { mt::top2(nan_row); }), HasSubstr("NaN at index 1"));
  EXPECT_THAT(error_message([&] { mt::argmax(nan_row); }), HasSubstr("NaN at index 1"));
  const std::vector<float> one = {1};
  EXPECT_THAT(error_message([&] { mt::top2(one); }), HasSubstr("need at least 2"));
}

TEST(FirstDivergence, QuotesBothRowsAtBothIdsAndEntryNoise) {
  mt::GreedyStream ref{{5, 1}, {{0, 0, 0, 0, 0, 9}, {0, 4, 1, 3.5f, 0, 0}}};
  mt::GreedyStream test{{5, 3}, {{0, 0, 0, 0, 0, 9}, {0, 3, 1, 3.75f, 0, 0}}};
  mt::GreedyStream noise{{5, 1}, {{0, 0, 0, 0, 0, 9}, {0, 3.75f, 1, 3.25f, 0, 0}}};
  const auto d = mt::first_divergence(ref, test, noise);
  ASSERT_TRUE(d.diverged());
  EXPECT_EQ(*d.position, 1u);
  EXPECT_EQ(d.compared, 2u);
  EXPECT_EQ(d.ref_token, 1);
  EXPECT_EQ(d.test_token, 3);
  EXPECT_EQ(d.ref_logit_ref_id, 4.0f);
  EXPECT_EQ(d.ref_logit_test_id, 3.5f);
  EXPECT_EQ(d.test_logit_ref_id, 3.0f);
  EXPECT_EQ(d.test_logit_test_id, 3.75f);
  EXPECT_EQ(d.ref_margin, 0.5f);
  EXPECT_EQ(d.test_margin, 0.75f);
  EXPECT_EQ(d.row_maxdiff, 1.0f);       // |4 - 3| at id 1
  EXPECT_EQ(d.noise_logit_ref_id, 3.75f);   // the tokenwise row the noise is measured from
  EXPECT_EQ(d.noise_logit_test_id, 3.25f);
  EXPECT_EQ(d.entry_noise, 0.5f);       // |4 - 3.75| + |3.5 - 3.25|
  EXPECT_TRUE(d.noise_measurable);
  EXPECT_FALSE(d.noise_floor.has_value());
  EXPECT_TRUE(d.within_entry_noise());  // 0.5 <= 0.5
}

TEST(FirstDivergence, IdenticalStreamsAndMalformedInput) {
  mt::GreedyStream a{{1, 2}, {{0, 1, 0}, {0, 0, 1}}};
  const auto d = mt::first_divergence(a, a, a);
  EXPECT_FALSE(d.diverged());
  EXPECT_TRUE(d.within_entry_noise());
  mt::GreedyStream no_rows{{1, 2}, {}};
  EXPECT_THAT(error_message([&] { mt::first_divergence(a, no_rows, a); }),
              HasSubstr("test stream has 2 tokens but 0 deciding rows"));
  mt::GreedyStream wide{{1, 7}, {{0, 1, 0}, {0, 0, 1}}};  // token 7 outside a 3-wide row
  EXPECT_THAT(error_message([&] { mt::first_divergence(a, wide, a); }),
              HasSubstr("token id 7 is outside it"));
}

TEST(FloorPosition, FirstDifferenceOverCommonLength) {
  const std::vector<int32_t> a = {1, 2, 3}, b = {1, 2, 4, 5}, c = {1, 2};
  EXPECT_EQ(mt::floor_position(a, b), std::optional<size_t>(2));
  EXPECT_EQ(mt::floor_position(a, c), std::nullopt);
}

mt::BankRow bank() { return {7, {7, 9, 4}, {10.0f, 9.5f, 8.0f}}; }

TEST(TeacherForced, ClassifiesEveryCase) {
  const auto band = mt::absolute_band(0.5);
  EXPECT_EQ(mt::classify_tf_row(0, 7, bank(), band).cls, mt::TfClass::agree);
  const auto in = mt::classify_tf_row(1, 9, bank(), band);
  EXPECT_EQ(in.cls, mt::TfClass::in_band);
  EXPECT_EQ(in.margin, 0.5);
  EXPECT_FALSE(in.margin_is_lower_bound);
  const auto out = mt::classify_tf_row(2, 4, bank(), band);
  EXPECT_EQ(out.cls, mt::TfClass::out_of_band);
  EXPECT_EQ(out.margin, 2.0);
  const auto beyond = mt::classify_tf_row(3, 99, bank(), mt::absolute_band(1.5));
  EXPECT_EQ(beyond.cls, mt::TfClass::out_of_band);  // lower bound 2 > 1.5
  EXPECT_TRUE(beyond.margin_is_lower_bound);
  const auto unresolved = mt::classify_tf_row(4, 99, bank(), mt::absolute_band(2.0));
  EXPECT_EQ(unresolved.cls, mt::TfClass::unresolved);  // lower bound 2 <= 2: cannot tell
  EXPECT_FALSE(unresolved.passes());
  const std::vector<mt::TfRow> rows = {in, out, beyond, unresolved,
                                       mt::classify_tf_row(0, 7, bank(), band)};
  const auto s = mt::summarize(rows);
  EXPECT_EQ(s.agree, 1u);
  EXPECT_EQ(s.in_band, 1u);
  EXPECT_EQ(s.out_of_band, 2u);
  EXPECT_EQ(s.unresolved, 1u);
  EXPECT_FALSE(s.passes());
}

TEST(TeacherForced, BankIntegrityIsCheckedFirst) {
  mt::BankRow wrong_top1{7, {9, 7}, {10, 9}};
  EXPECT_THAT(error_message([&] { mt::check_bank_row(3, wrong_top1); }),
              HasSubstr("bank step 3: oracle top-1 id 9 is not the banked token 7"));
  mt::BankRow unsorted{7, {7, 9, 4}, {10, 8, 9}};
  EXPECT_THAT(error_message([&] { mt::classify_tf_row(5, 7, unsorted, mt::absolute_band(1)); }),
              HasSubstr("bank step 5: top-k logits not sorted at rank 2"));
  mt::BankRow ragged{7, {7, 9}, {10}};
  EXPECT_THAT(error_message([&] { mt::check_bank_row(0, ragged); }), HasSubstr("2 top ids but 1 top logits"));
}

TEST(Margins, DistributionAndPercentileRank) {
  const std::vector<float> m = {5, 1, 4, 2, 3, 9, 7, 6, 8, 10};
  const auto s = mt::margin_stats(m);
  EXPECT_EQ(s.n, 10u);
  EXPECT_EQ(s.min, 1.0f);
  EXPECT_EQ(s.p10, 2.0f);   // sorted[round(9*0.1)=1]
  EXPECT_EQ(s.p50, 6.0f);   // sorted[round(4.5)=5]
  EXPECT_EQ(s.p90, 9.0f);   // sorted[round(8.1)=8]
  EXPECT_EQ(s.max, 10.0f);
  EXPECT_DOUBLE_EQ(mt::percentile_rank(m, 3.0f), 0.2);  // 1 and 2 are below 3
  EXPECT_DOUBLE_EQ(mt::percentile_rank(m, 0.5f), 0.0);
  const std::vector<std::vector<float>> rows = {{1, 4, 2}, {0, 0, 0.5f}};
  EXPECT_THAT(mt::top2_margins(rows), ::testing::ElementsAre(2.0f, 0.5f));
  EXPECT_THAT(error_message([] { mt::margin_stats(std::vector<float>{}); }), HasSubstr("no margins"));
}

TEST(FractionRule, FailsIffKDrawsDivergeEarly) {
  const mt::FractionRule rule{4, 3};
  // Early (< step 3): draws 0, 1, 3, 5 -> 4 of 6: the plumbing class.
  const std::vector<std::optional<size_t>> plumbing = {0, 1, std::nullopt, 2, 5, 1};
  const auto v = mt::apply_fraction_rule(plumbing, rule);
  EXPECT_EQ(v.draws, 6u);
  EXPECT_EQ(v.early, 4u);
  EXPECT_TRUE(v.fail);
  // Step 3 is not early; 3 early draws stay below k.
  const std::vector<std::optional<size_t>> drift = {0, 1, std::nullopt, 3, 5, 2};
  EXPECT_EQ(mt::apply_fraction_rule(drift, rule).early, 3u);
  EXPECT_FALSE(mt::apply_fraction_rule(drift, rule).fail);
}

TEST(FractionRule, ARuleThatCannotFailIsAnError) {
  const std::vector<std::optional<size_t>> three = {0, 0, 0};
  EXPECT_THAT(error_message([&] { mt::apply_fraction_rule(three, {4, 3}); }),
              HasSubstr("3 draws cannot reach k=4"));
  EXPECT_THAT(error_message([&] { mt::apply_fraction_rule(three, {0, 3}); }), HasSubstr("k must be >= 1"));
}

TEST(LogitsStreamSha256, MatchesAnIndependentHashOfLengthFramedLittleEndianFloats) {
  // python3: hashlib.sha256(struct.pack('<Q2fQf', 2, 1.0, -2.5, 1, 0.0)).hexdigest()
  const char* expected = "305315ae86c04659e2dfde3178fec2b13d5be51d0ba1e5cd021358d650e45d09";
  const std::vector<std::vector<float>> rows = {{1.0f, -2.5f}, {0.0f}};
  EXPECT_EQ(mt::logits_stream_sha256(rows), expected);
  // One flipped bit changes the hash.
  const std::vector<std::vector<float>> flipped = {{1.0f, -2.5f}, {-0.0f}};
  EXPECT_NE(mt::logits_stream_sha256(flipped), expected);
}

TEST(LogitsStreamSha256, RowBoundariesAreHashed) {
  // The same floats split into rows differently are different streams: a step that returned
  // one logit too many and the next one too few must not hash like the right pair.
  const std::vector<std::vector<float>> ab_c = {{1.0f, -2.5f}, {0.0f}};
  const std::vector<std::vector<float>> a_bc = {{1.0f}, {-2.5f, 0.0f}};
  const std::vector<std::vector<float>> abc = {{1.0f, -2.5f, 0.0f}};
  EXPECT_NE(mt::logits_stream_sha256(ab_c), mt::logits_stream_sha256(a_bc));
  EXPECT_NE(mt::logits_stream_sha256(ab_c), mt::logits_stream_sha256(abc));
  EXPECT_NE(mt::logits_stream_sha256(a_bc), mt::logits_stream_sha256(abc));
  // An empty row is a row: [] and [[]] differ.
  EXPECT_NE(mt::logits_stream_sha256(std::vector<std::vector<float>>{}),
            mt::logits_stream_sha256(std::vector<std::vector<float>>{{}}));
}

}  // namespace
