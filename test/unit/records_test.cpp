// Records and rules behind the gate verdicts, on hand-made rows with hand-worked answers.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <random>
#include <vector>

#include "memra/error.h"
#include "memra/testing/bank.h"
#include "memra/testing/errors.h"
#include "memra/testing/matchers.h"
#include "memra/testing/records.h"

namespace {

namespace mt = memra::testing;
using memra::testing::error_message;
using ::testing::HasSubstr;
using ::testing::Not;

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

// CPU adjudication: a pick beyond the banked top-k is judged by the oracle's whole row, which
// must be the bank's own reference; the exact margin then decides, in either direction.
TEST(TeacherForced, AdjudicationResolvesAPickBeyondTheTopK) {
  // the whole row the bank {7, 9, 4} was cut from (top-3), with id 99 at 9.0 and id 50 at 1.0
  std::vector<float> row(100, 0.0f);
  row[7] = 10.0f, row[9] = 9.5f, row[4] = 8.0f, row[99] = 7.0f, row[50] = 1.0f;
  const auto band = mt::absolute_band(3.5);  // wider than top1 - top3 = 2: the bank cannot tell
  EXPECT_EQ(mt::classify_tf_row(4, 99, bank(), band).cls, mt::TfClass::unresolved);
  const auto near = mt::classify_tf_row(4, 99, bank(), band, row);
  EXPECT_EQ(near.cls, mt::TfClass::in_band);
  EXPECT_EQ(near.margin, 3.0);
  EXPECT_TRUE(near.adjudicated);
  EXPECT_FALSE(near.margin_is_lower_bound);
  const auto far = mt::classify_tf_row(4, 50, bank(), band, row);  // margin 9 > 3.5: the band can fail
  EXPECT_EQ(far.cls, mt::TfClass::out_of_band);
  EXPECT_EQ(far.margin, 9.0);
  EXPECT_TRUE(far.adjudicated);
  const auto s = mt::summarize(std::vector<mt::TfRow>{near, far});
  EXPECT_EQ(s.in_band, 1u);
  EXPECT_EQ(s.out_of_band, 1u);
  EXPECT_EQ(s.adjudicated, 2u);
  EXPECT_EQ(s.unresolved, 0u);
  // rows the bank resolves itself never consult the oracle's row
  EXPECT_FALSE(mt::classify_tf_row(1, 9, bank(), band, row).adjudicated);
}

TEST(TeacherForced, AdjudicationRefusesARowThatIsNotTheBanksReference) {
  std::vector<float> row(100, 0.0f);
  row[7] = 10.0f, row[9] = 9.5f, row[4] = 8.0f, row[99] = 7.0f;
  const auto band = mt::absolute_band(3.5);
  std::vector<float> moved = row;
  moved[9] = std::nextafter(9.5f, 0.0f);  // one ulp: another reference
  EXPECT_THAT(error_message([&] { mt::classify_tf_row(6, 99, bank(), band, moved); }),
              HasSubstr("CPU adjudication, step 6: the oracle's row does not reproduce the bank at rank 1"));
  std::vector<float> reordered = row;
  reordered[3] = 8.0f;  // ties id 4 at rank 2 with a lower id: top_k would bank id 3
  EXPECT_THAT(error_message([&] { mt::classify_tf_row(6, 99, bank(), band, reordered); }),
              HasSubstr("at rank 2 (oracle id 3"));
  EXPECT_THAT(error_message([&] { mt::classify_tf_row(6, 120, bank(), band, row); }),
              HasSubstr("CPU adjudication, step 6: pick 120 is outside the oracle's row of 100 logits"));
}

TEST(TeacherForced, AdjudicateUnresolvedAttachesRowsOnlyWhenOwed) {
  std::vector<float> row(100, 0.0f);
  row[7] = 10.0f, row[9] = 9.5f, row[4] = 8.0f, row[99] = 7.0f;
  std::vector<mt::TfStep> steps = {{0, 7, bank()}, {1, 99, bank()}, {2, 9, bank()}};
  int calls = 0;
  const auto rows = [&] {
    ++calls;
    return std::vector<std::vector<float>>(3, row);
  };
  EXPECT_EQ(mt::adjudicate_unresolved(steps, mt::absolute_band(1.0), rows), 0u);  // 99: lower bound 2 > 1
  EXPECT_EQ(calls, 0);
  EXPECT_EQ(mt::adjudicate_unresolved(steps, mt::absolute_band(3.5), rows), 1u);
  EXPECT_EQ(calls, 1);
  EXPECT_TRUE(steps[0].oracle_row.empty());
  EXPECT_EQ(steps[1].oracle_row.size(), 100u);
  EXPECT_THAT(steps, mt::InBand(mt::absolute_band(3.5)));
  EXPECT_THAT(steps, Not(mt::InBand(mt::absolute_band(2.5))));  // margin 3 > 2.5, now decidable
  // a subset of the steps takes each step's own row; a step past the rows is an error
  std::vector<mt::TfStep> some = {{2, 99, bank()}};
  std::vector<std::vector<float>> three(3, std::vector<float>(100, -1.0f));
  three[2] = row;
  EXPECT_EQ(mt::adjudicate_unresolved(some, mt::absolute_band(3.5), [&] { return three; }), 1u);
  EXPECT_EQ(some[0].oracle_row, row);
  std::vector<mt::TfStep> late = {{5, 99, bank()}};
  EXPECT_THAT(error_message([&] { mt::adjudicate_unresolved(late, mt::absolute_band(3.5), rows); }),
              HasSubstr("CPU adjudication: step 5 is owed a row but the oracle gave 3"));
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

// ---- the ArgmaxMargin window ----------------------------------------------------------------

using Rows = std::vector<std::vector<float>>;

TEST(MarginWindow, StableWhenNoFlipAndTheSpreadCannotReachTheMargin) {
  const Rows a = {{3, 1, 0}, {0, 2, 0.5f}, {1, 0, 4}};
  const Rows b = {{3.125f, 1, 0}, {0, 2, 0.625f}, {1, 0.125f, 4}};
  const auto w = mt::classify_margin_window(a, b, 10);
  ASSERT_EQ(w.positions.size(), 3u);
  EXPECT_EQ(w.positions[0].position, 10u);
  EXPECT_EQ(w.positions[2].position, 12u);
  EXPECT_EQ(w.positions[0].a.margin(), 2.0f);
  EXPECT_EQ(w.positions[0].b.margin(), 2.125f);
  EXPECT_EQ(w.positions[0].delta_at_ids, 0.125f);  // |3.125 - 3| at id 0
  EXPECT_EQ(w.positions[1].delta_at_ids, 0.125f);  // |0.625 - 0.5| at id 2 (b's and a's runner-up)
  // Only the contending ids count: the 0.125 at id 1 of the last row is in neither top-2.
  EXPECT_EQ(w.positions[2].delta_at_ids, 0.0f);
  EXPECT_EQ(w.flips, 0u);
  EXPECT_EQ(w.decision, 2u);                           // no flip: the window's last position (the gate's)
  EXPECT_FALSE(w.exposed);                             // 0 > min(3, 3) is false
  EXPECT_DOUBLE_EQ(w.decision_percentile, 2.0 / 3.0);  // 2 and 1.5 are below 3
  EXPECT_EQ(w.margins_a.n, 3u);
  EXPECT_EQ(w.margins_a.min, 1.5f);
  EXPECT_EQ(w.margins_a.p50, 2.0f);
  EXPECT_EQ(w.margins_a.max, 3.0f);
  EXPECT_EQ(w.margins_b.min, 1.375f);
  EXPECT_EQ(w.margins_b.max, 3.0f);
  EXPECT_EQ(w.cls, mt::MarginClass::stable);
  EXPECT_TRUE(w.passes());
  EXPECT_EQ(mt::to_string(w.cls), "STABLE");
}

TEST(MarginWindow, NearTieExposedWhenTheDecisionMarginIsInsideTheSpreadButNothingFlipped) {
  const Rows a = {{3, 1, 0}, {0, 5, 4.875f}};
  const Rows b = {{3, 1, 0}, {0, 5.25f, 4.875f}};
  const auto w = mt::classify_margin_window(a, b, 0);
  EXPECT_EQ(w.flips, 0u);
  EXPECT_EQ(w.decision, 1u);
  EXPECT_EQ(w.at_decision().a.margin(), 0.125f);
  EXPECT_EQ(w.at_decision().b.margin(), 0.375f);
  EXPECT_EQ(w.at_decision().delta_at_ids, 0.25f);
  EXPECT_TRUE(w.exposed);                        // 0.25 > min(0.125, 0.375)
  EXPECT_DOUBLE_EQ(w.decision_percentile, 0.0);  // the lowest margin of the window
  EXPECT_EQ(w.cls, mt::MarginClass::near_tie_exposed);
  EXPECT_TRUE(w.passes());
  EXPECT_EQ(mt::to_string(w.cls), "NEAR-TIE-EXPOSED");
}

TEST(MarginWindow, NearTieIsASingleFlipAtACoveredDecision) {
  // The flip is at the decision position (the window's last), whose margin the spread covers.
  const Rows a = {{3, 1, 0}, {0, 0, 4}, {2, 2.125f, 0}};
  const Rows b = {{3, 1, 0}, {0, 0, 4}, {2.25f, 2.125f, 0}};
  const auto w = mt::classify_margin_window(a, b, 20);
  EXPECT_EQ(w.flips, 1u);
  EXPECT_FALSE(w.positions[2].agree);
  EXPECT_EQ(w.decision, 2u);
  EXPECT_EQ(w.at_decision().position, 22u);
  EXPECT_EQ(w.at_decision().a.margin(), 0.125f);
  EXPECT_EQ(w.at_decision().delta_at_ids, 0.25f);  // |2.25 - 2| at id 0
  EXPECT_TRUE(w.exposed);
  EXPECT_DOUBLE_EQ(w.decision_percentile, 0.0);
  EXPECT_EQ(w.cls, mt::MarginClass::near_tie);
  EXPECT_TRUE(w.passes());
  EXPECT_EQ(mt::to_string(w.cls), "NEAR-TIE");
}

TEST(MarginWindow, ASingleFlipAwayFromASafeDecisionIsUnexplained) {
  // The seed's code: the flip at 21 is mid-window and the decision position 22 is safe, so the
  // spread at the decision cannot explain the window: UNEXPLAINED.
  const Rows a = {{3, 1, 0}, {2, 2.125f, 0}, {0, 0, 4}};
  const Rows b = {{3, 1, 0}, {2.25f, 2.125f, 0}, {0, 0, 4}};
  const auto w = mt::classify_margin_window(a, b, 20);
  EXPECT_EQ(w.flips, 1u);
  EXPECT_EQ(w.at_decision().position, 22u);
  EXPECT_FALSE(w.exposed);
  EXPECT_EQ(w.cls, mt::MarginClass::unexplained);
  EXPECT_FALSE(w.passes());
}

TEST(MarginWindow, UnexplainedIsASingleFlipTheSpreadDoesNotCover) {
  // At a flip x = a.id1, y = b.id1: margin_a <= A[x] - A[y] and margin_b <= B[y] - B[x], whose sum
  // is at most |A[x] - B[x]| + |B[y] - A[y]| <= 2 * delta, so the delta always reaches the
  // smaller margin. A flip at the decision position is unexplained only where it reaches it
  // exactly: a clean swap, here at the window's last position 7.
  const Rows a = {{3, 1, 0}, {0, 0, 4}, {1, 0, -1}};
  const Rows b = {{3, 1, 0}, {0, 0, 4}, {0, 1, -1}};
  const auto w = mt::classify_margin_window(a, b, 5);
  EXPECT_EQ(w.flips, 1u);
  EXPECT_FALSE(w.positions[2].agree);
  EXPECT_EQ(w.at_decision().position, 7u);
  EXPECT_EQ(w.at_decision().a.margin(), 1.0f);
  EXPECT_EQ(w.at_decision().b.margin(), 1.0f);
  EXPECT_EQ(w.at_decision().delta_at_ids, 1.0f);
  EXPECT_FALSE(w.exposed);                       // 1 > 1 is false
  EXPECT_DOUBLE_EQ(w.decision_percentile, 0.0);  // margins 2, 4, 1: none below 1
  EXPECT_EQ(w.cls, mt::MarginClass::unexplained);
  EXPECT_FALSE(w.passes());
  EXPECT_EQ(mt::to_string(w.cls), "UNEXPLAINED");
}

TEST(MarginWindow, AtAFlipTheDeltaAlwaysReachesTheSmallerMargin) {
  // The bound the header cites (records.h, classify_margin_window), on random rows: float
  // rounding is monotone, so it holds for the computed values too. A flip judged at its own
  // position always looks covered, which is why the class is judged at the window's last: a
  // single flip there is NEAR-TIE unless the delta equals the margin.
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> logit(-4, 4), noise(-1, 1);
  size_t flips = 0;
  for (int trial = 0; trial < 2000; ++trial) {
    std::vector<float> a(8), b(8);
    for (size_t i = 0; i < a.size(); ++i) {
      a[i] = logit(rng);
      b[i] = a[i] + noise(rng);
    }
    const auto w = mt::classify_margin_window(Rows{a}, Rows{b}, 0);
    if (w.flips == 0) continue;
    ++flips;
    const auto& p = w.positions[0];
    EXPECT_GE(p.delta_at_ids, std::min(p.a.margin(), p.b.margin())) << "trial " << trial;
  }
  EXPECT_GT(flips, 100u);  // the property was exercised
}

TEST(MarginWindow, SystematicIsMoreThanOneFlip) {
  // Two near-tie flips, each exposed on its own: still not one coin.
  const Rows a = {{2, 2.125f, 0}, {3, 1, 0}, {0, 2, 2.125f}};
  const Rows b = {{2.25f, 2.125f, 0}, {3, 1, 0}, {0, 2.25f, 2.125f}};
  const auto w = mt::classify_margin_window(a, b, 0);
  EXPECT_EQ(w.flips, 2u);
  EXPECT_EQ(w.decision, 2u);  // the window's last, as the gate decides
  EXPECT_TRUE(w.exposed);
  EXPECT_EQ(w.cls, mt::MarginClass::systematic);
  EXPECT_FALSE(w.passes());
  EXPECT_EQ(mt::to_string(w.cls), "SYSTEMATIC");
}

TEST(MarginWindow, TiesBreakToTheLowestIndexInBothConfigs) {
  // An exact tie that both configs see is no flip: both pick the lower id. Margin 0, delta 0,
  // and 0 > 0 is false, so it is STABLE (the coin did not move).
  const Rows tie = {{3, 1, 0}, {0, 5, 5}};
  const auto same = mt::classify_margin_window(tie, tie, 0);
  EXPECT_EQ(same.positions[1].a.id1, 1);
  EXPECT_EQ(same.positions[1].b.id1, 1);
  EXPECT_EQ(same.positions[1].a.id2, 2);
  EXPECT_EQ(same.at_decision().a.margin(), 0.0f);
  EXPECT_EQ(same.flips, 0u);
  EXPECT_EQ(same.cls, mt::MarginClass::stable);
  // The prefill config lifts the higher id a hair: that is a flip at a margin of 0, exposed.
  const Rows lifted = {{3, 1, 0}, {0, 5, 5.0625f}};
  const auto w = mt::classify_margin_window(tie, lifted, 0);
  EXPECT_EQ(w.positions[1].a.id1, 1);
  EXPECT_EQ(w.positions[1].b.id1, 2);
  EXPECT_EQ(w.flips, 1u);
  EXPECT_EQ(w.at_decision().delta_at_ids, 0.0625f);
  EXPECT_TRUE(w.exposed);  // 0.0625 > min(0, 0.0625)
  EXPECT_EQ(w.cls, mt::MarginClass::near_tie);
}

// The GPU canary's construction: a decode arm with one id's logit biased at every position.
Rows biased(Rows rows, size_t id, float bias) {
  for (auto& r : rows) r[id] += bias;
  return rows;
}

TEST(MarginWindow, ABiasedDecodeLogitIsSystematic) {
  const Rows prefill = {{4, 1, 0, 2, -1, 0.5f}, {0, 3, 1, 2.5f, -2, 0},   {1, 0, 6, 2, -1, 0.25f},
                        {2, 5, 1, 0, -3, 1},    {3.5f, 1, 2, 0, 3, 0.5f}, {0, 1, 2, 3, -1, 4}};
  const auto unbiased = mt::classify_margin_window(prefill, prefill, 100);
  EXPECT_EQ(unbiased.flips, 0u);
  EXPECT_EQ(unbiased.cls, mt::MarginClass::stable);
  // +10 at id 4 takes the top-1 at every position.
  const auto w = mt::classify_margin_window(biased(prefill, 4, 10), prefill, 100);
  EXPECT_EQ(w.flips, 6u);
  for (const auto& p : w.positions) EXPECT_EQ(p.a.id1, 4) << "position " << p.position;
  EXPECT_EQ(w.cls, mt::MarginClass::systematic);
  EXPECT_FALSE(w.passes());
  // A bias that reaches across one position's margin only (id 4 is the runner-up at position
  // 104, 0.5 below) flips 104 alone while the decision position 105 is safe (id 4 stays 4.25
  // below its top-1): UNEXPLAINED, which fails. A single flip at the decision position would be
  // NEAR-TIE and pass, so the canary's bias must flip a position before the decision, or two.
  const auto one = mt::classify_margin_window(biased(prefill, 4, 0.75f), prefill, 100);
  EXPECT_EQ(one.flips, 1u);
  EXPECT_FALSE(one.positions[4].agree);
  EXPECT_EQ(one.positions[4].delta_at_ids, 0.75f);
  EXPECT_EQ(one.at_decision().position, 105u);
  EXPECT_EQ(one.at_decision().delta_at_ids, 0.0f);  // id 4 is in neither top-2 there
  EXPECT_FALSE(one.exposed);
  EXPECT_EQ(one.cls, mt::MarginClass::unexplained);
  EXPECT_FALSE(one.passes());
}

TEST(MarginWindow, MalformedWindowsAreErrors) {
  const Rows none;
  EXPECT_THAT(error_message([&] { mt::classify_margin_window(none, none, 0); }), HasSubstr("empty window"));
  const Rows two = {{1, 0}, {0, 1}}, one = {{1, 0}};
  EXPECT_THAT(error_message([&] { mt::classify_margin_window(two, one, 0); }),
              HasSubstr("config A (decode) has 2 rows, config B (prefill) 1"));
  const Rows ragged = {{1, 0}, {0, 1, 2}};
  EXPECT_THAT(error_message([&] { mt::classify_margin_window(two, ragged, 7); }),
              HasSubstr("rows at position 8 differ in width: config A (decode) 2, config B (prefill) 3"));
  const Rows nan_b = {{1, 0}, {0, NAN}};
  EXPECT_THAT(error_message([&] { mt::classify_margin_window(two, nan_b, 7); }),
              HasSubstr("config B (prefill) row at position 8: top2: NaN at index 1 of a 2-wide row"));
  const Rows nan_a = {{NAN, 0}, {0, 1}};
  EXPECT_THAT(error_message([&] { mt::classify_margin_window(nan_a, two, 7); }),
              HasSubstr("config A (decode) row at position 7: top2: NaN at index 0"));
  const Rows narrow = {{1}, {0}};
  EXPECT_THAT(error_message([&] { mt::classify_margin_window(narrow, narrow, 0); }),
              HasSubstr("row at position 0: top2: row has 1 elements, need at least 2"));
}

TEST(MarginWindow, PrintsOneLine) {
  const Rows a = {{3, 1, 0}, {1, 0, -1}, {0, 0, 4}};
  const Rows b = {{3, 1, 0}, {0, 1, -1}, {0, 0, 4}};
  EXPECT_EQ(::testing::PrintToString(mt::classify_margin_window(a, b, 5)),
            "MarginWindow{positions 5..7, 1 flip, decision position 7, UNEXPLAINED}");
  EXPECT_EQ(::testing::PrintToString(mt::classify_margin_window(a, a, 5)),
            "MarginWindow{positions 5..7, 0 flips, decision position 7, STABLE}");
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
