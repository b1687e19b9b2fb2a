// The op-test harness on the host: names, seeds, NMSE and the contract comparison's verdicts.
#include <gmock/gmock.h>
#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "memra/error.h"
#include "op_harness.h"

namespace {

using ::testing::HasSubstr;
namespace mo = memra::ops;

struct ToyCase : mo::OpCase {
  int64_t n;
  const char* type;
  std::string vars() const override { return mo::Vars()("type", type)("n", n).str(); }
};

TEST(OpHarness, VarsIsTheReadableParamName) {
  ToyCase c;
  c.n = 4096;
  c.type = "q8_0";
  EXPECT_EQ(c.vars(), "type=q8_0,n=4096");
  ::testing::TestParamInfo<ToyCase> info(c, 0);
  EXPECT_EQ(mo::OpCaseName()(info), "type_q8_0_n_4096");
}

// A failing op test must be replayable from its XML alone: the case's seed and the run seed
// (MEMRA_SEED) are both recorded as properties, not only printed.
TEST(OpHarness, SeedOfTheCurrentTestIsRecordedForReplay) {
  const uint64_t s = mo::seed_current_test("type=q8_0,n=32");
  EXPECT_EQ(s, mo::case_seed("type=q8_0,n=32"));
  EXPECT_EQ(mo::seed_current_test(), mo::case_seed("OpHarness.SeedOfTheCurrentTestIsRecordedForReplay"));
  const ::testing::TestResult& r = *::testing::UnitTest::GetInstance()->current_test_info()->result();
  std::map<std::string, std::string> props;
  for (int i = 0; i < r.test_property_count(); ++i)
    props[r.GetTestProperty(i).key()] = r.GetTestProperty(i).value();
  char run[32];
  std::snprintf(run, sizeof run, "0x%llx", static_cast<unsigned long long>(mo::run_seed()));
  EXPECT_EQ(props["run_seed"], run);
  EXPECT_THAT(props["seed"], ::testing::StartsWith("0x"));
}

TEST(OpHarness, Fnv1aPublishedVectorsAndSeedParsing) {
  EXPECT_EQ(mo::fnv1a64(""), 0xcbf29ce484222325ull);
  EXPECT_EQ(mo::fnv1a64("a"), 0xaf63dc4c8601ec8cull);
  EXPECT_EQ(mo::parse_seed("0x1f"), 31u);
  EXPECT_EQ(mo::parse_seed("12345"), 12345u);
  EXPECT_THROW(mo::parse_seed("12z"), memra::Error);
  EXPECT_THROW(mo::parse_seed(""), memra::Error);
  // Different cases get different seeds within one run; the same case the same seed.
  EXPECT_NE(mo::case_seed("n=1"), mo::case_seed("n=2"));
  EXPECT_EQ(mo::case_seed("n=1"), mo::case_seed("n=1"));
}

// Coverage must not depend on a run's luck: every case runs the same fixed seeds on every run,
// then its fresh one (the run seed's), in that order.
TEST(OpHarness, FixedSeedsEveryRunThenTheFreshOne) {
  const auto runs = mo::seed_runs("n=1");
  ASSERT_EQ(runs.size(), std::size(mo::kFixedSeeds) + 1);
  for (size_t i = 0; i < std::size(mo::kFixedSeeds); ++i) {
    EXPECT_EQ(runs[i].seed, mo::fnv1a64("n=1") ^ mo::kFixedSeeds[i]);
    EXPECT_FALSE(runs[i].fresh);
    EXPECT_THAT(runs[i].label, ::testing::StartsWith("seed fixed 0x"));
  }
  EXPECT_TRUE(runs.back().fresh);
  EXPECT_EQ(runs.back().seed, mo::case_seed("n=1"));
  EXPECT_THAT(runs.back().label, ::testing::HasSubstr("MEMRA_SEED="));
  std::vector<uint64_t> seen;
  mo::for_each_seed("n=1", [&](uint64_t s) { seen.push_back(s); });
  ASSERT_EQ(seen.size(), runs.size());
  for (size_t i = 0; i < runs.size(); ++i) EXPECT_EQ(seen[i], runs[i].seed);
}

TEST(OpHarness, NmseByHand) {
  const std::vector<float> ref = {3, 4}, got = {3, 5};
  EXPECT_DOUBLE_EQ(mo::nmse(got, ref), 1.0 / 25.0);  // (0 + 1) / (9 + 16)
  EXPECT_EQ(mo::nmse(std::vector<float>{0, 0}, std::vector<float>{0, 0}), 0.0);
  EXPECT_TRUE(std::isinf(mo::nmse(std::vector<float>{1}, std::vector<float>{0})));
}

TEST(OpHarness, BitwiseVerdictNamesTheFirstBadElement) {
  const std::vector<float> ref = {1, 2, 3};
  EXPECT_TRUE(mo::compare_to_contract(ref, ref, mo::Tolerance::exact()));
  const std::vector<float> got = {1, 2, 3.5f};
  const auto r = mo::compare_to_contract(got, ref, mo::Tolerance::exact());
  EXPECT_FALSE(r);
  EXPECT_THAT(r.message(), HasSubstr("first at [2]: 0x40600000 vs 0x40400000"));
}

TEST(OpHarness, PoisonedElementFailsEvenUnderNmse) {
  // A kernel that skipped element 1 leaves the 0xFF poison (NaN) there.
  const std::vector<float> ref = {1, 2, 3, 4};
  std::vector<float> got = ref;
  uint32_t poison = 0xffffffffu;
  std::memcpy(&got[1], &poison, 4);
  const auto r = mo::compare_to_contract(got, ref, mo::Tolerance::nmse(1.0));
  EXPECT_FALSE(r);
  EXPECT_THAT(r.message(), HasSubstr("kernel output [1] is -nan where the contract has 2"));
  EXPECT_FALSE(mo::compare_to_contract(got, ref, mo::Tolerance::exact()));
}

TEST(OpHarness, NmseThreshold) {
  const std::vector<float> ref = {3, 4}, got = {3, 5};  // nmse 0.04
  EXPECT_TRUE(mo::compare_to_contract(got, ref, mo::Tolerance::nmse(0.05)));
  const auto r = mo::compare_to_contract(got, ref, mo::Tolerance::nmse(0.03));
  EXPECT_FALSE(r);
  EXPECT_THAT(r.message(), HasSubstr("nmse 0.04 > 0.03"));
}

// A bound is looked up by the arch it was measured on; an arch without one fails by name (and
// compares at NMSE 0) rather than borrowing another family's bound.
TEST(OpHarness, NmseBoundsArePerMeasuredArch) {
  const mo::Tolerance t = mo::measured_nmse("op=x", "h100", {{"h100", 1e-9}, {"b200", 1e-8}});
  EXPECT_FALSE(t.bitwise);
  EXPECT_EQ(t.max_nmse, 1e-9);
  EXPECT_EQ(mo::measured_nmse("op=x", "b200", {{"h100", 1e-9}, {"b200", 1e-8}}).max_nmse, 1e-8);
  mo::Tolerance unmeasured;
  EXPECT_NONFATAL_FAILURE(unmeasured = mo::measured_nmse("op=gdn_chunked", "rtx5090", {{"h100", 1e-8}}),
                          "op=gdn_chunked: no NMSE bound measured on 'rtx5090' (measured on: h100)");
  EXPECT_EQ(unmeasured.max_nmse, 0.0);
}

}  // namespace
