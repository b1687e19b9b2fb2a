// Reports: file name and place, verdict from the test result, figures as GTest properties.
#include <gmock/gmock.h>
#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <unistd.h>

#include "memra/testing/report.h"

namespace {

namespace fs = std::filesystem;
namespace mt = memra::testing;

// Points MEMRA_TEST_RESULTS at a fresh folder for the test and restores it after.
class ReportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("memra-report-test-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    if (const char* old = std::getenv("MEMRA_TEST_RESULTS")) old_ = old;
    ::setenv("MEMRA_TEST_RESULTS", dir_.c_str(), 1);
  }
  void TearDown() override {
    if (old_) ::setenv("MEMRA_TEST_RESULTS", old_->c_str(), 1);
    else ::unsetenv("MEMRA_TEST_RESULTS");
    fs::remove_all(dir_);
  }
  static nlohmann::json read(const fs::path& p) {
    std::ifstream f(p);
    return nlohmann::json::parse(f);
  }
  fs::path dir_;
  std::optional<std::string> old_;
};

TEST_F(ReportTest, WritesSuiteDotCaseJsonUnderResultsDir) {
  mt::Report r = mt::Report::for_current_test();
  r.figure("first_divergence", int64_t(17));
  r.figure("max_ulp", 2.5);
  r.figure("class", std::string("near tie"));
  r["extra"] = {{"k", 1}};
  const fs::path p = r.write();
  EXPECT_EQ(p, dir_ / "ReportTest.WritesSuiteDotCaseJsonUnderResultsDir.json");
  const auto j = read(p);
  EXPECT_EQ(j["suite"], "ReportTest");
  EXPECT_EQ(j["case"], "WritesSuiteDotCaseJsonUnderResultsDir");
  EXPECT_EQ(j["verdict"], "PASS");  // no failure so far in this test
  EXPECT_EQ(j["figures"]["first_divergence"], 17);
  EXPECT_EQ(j["figures"]["max_ulp"], 2.5);
  EXPECT_EQ(j["figures"]["class"], "near tie");
  EXPECT_EQ(j["extra"]["k"], 1);
  EXPECT_TRUE(j.contains("time"));
  EXPECT_TRUE(j.contains("commit"));
  EXPECT_TRUE(j.contains("gpu"));  // null on a machine without one
}

TEST_F(ReportTest, VerdictFollowsTheTestResultUnlessSet) {
  mt::Report r("Suite/Inst", "Case/param_3");
  EXPECT_NONFATAL_FAILURE(ADD_FAILURE() << "x", "x");  // intercepted: the test stays green
  r.set_verdict(false, "ref margin 0.25 > noise 0.0625");
  const auto j = read(r.write());
  EXPECT_EQ(j["verdict"], "FAIL");
  EXPECT_EQ(j["why"], "ref margin 0.25 > noise 0.0625");
  // '/' of parameterised names never reaches the file system.
  EXPECT_EQ(r.path().filename(), "Suite_Inst.Case_param_3.json");
}

// A greedy stream's decoded text can stop half-way through a UTF-8 character (one byte-level
// token of a multi-byte one): the report is still written, the stray bytes as U+FFFD.
TEST_F(ReportTest, TextCutInsideACharacterIsWrittenWithReplacement) {
  mt::Report r("Suite", "Utf8");
  r["text"] = std::string("caf\xc3");  // the first byte of "\xc3\xa9" alone
  const auto j = read(r.write());
  EXPECT_EQ(j["text"], "caf\xef\xbf\xbd");
}

TEST_F(ReportTest, RecordsToJsonOfArmsAndDivergence) {
  mt::Report r("S", "C");
  memra::Arms test_arms;
  test_arms.prefill_act = memra::PrefillAct::w4a4;
  r.set_arms("test", test_arms);
  mt::GreedyStream ref{{1, 2}, {{0, 1, 0}, {0, 0, 1}}};
  mt::GreedyStream tst{{1, 0}, {{0, 1, 0}, {0.5f, 0, 0.25f}}};
  r["first_divergence"] = mt::to_json(mt::first_divergence(ref, tst, ref));
  const auto j = read(r.write());
  EXPECT_EQ(j["arms"]["test"]["prefill_act"], "w4a4");
  EXPECT_EQ(j["arms"]["test"]["b1_fast"], "on");
  EXPECT_EQ(j["first_divergence"]["position"], 1);
  EXPECT_EQ(j["first_divergence"]["ref_token"], 2);
  EXPECT_EQ(j["first_divergence"]["test_token"], 0);
  EXPECT_EQ(j["first_divergence"]["ref_margin"], 1.0);       // 1 - 0
  EXPECT_EQ(j["first_divergence"]["within_entry_noise"], false);  // noise 0 (same stream)
  // the noise row (here the reference's own) at both ids: 1 at the reference's token 2, 0 at 0
  EXPECT_EQ(j["first_divergence"]["noise_logit_ref_id"], 1.0);
  EXPECT_EQ(j["first_divergence"]["noise_logit_test_id"], 0.0);
}

TEST(ReportJson, MarginWindowCarriesClassDecisionDistributionsAndPositions) {
  const std::vector<std::vector<float>> decode = {{3, 1, 0}, {0, 0, 4}, {2, 2.125f, 0}};
  const std::vector<std::vector<float>> prefill = {{3, 1, 0}, {0, 0, 4}, {2.25f, 2.125f, 0}};
  const auto j = mt::to_json(mt::classify_margin_window(decode, prefill, 20));
  EXPECT_EQ(j["class"], "NEAR-TIE");
  EXPECT_EQ(j["passes"], true);
  EXPECT_EQ(j["flips"], 1);
  EXPECT_EQ(j["window"], 3);
  EXPECT_EQ(j["decision_position"], 22);  // the window's last, where the flip is
  EXPECT_EQ(j["decision_percentile"], 0.0);
  EXPECT_EQ(j["exposed"], true);
  EXPECT_EQ(j["margins_decode"]["min"], 0.125);
  EXPECT_EQ(j["margins_decode"]["p50"], 2.0);
  EXPECT_EQ(j["margins_prefill"]["max"], 4.0);
  ASSERT_EQ(j["positions"].size(), 3u);
  EXPECT_EQ(j["positions"][0]["position"], 20);
  const auto& flip = j["positions"][2];
  EXPECT_EQ(flip["decode"]["id1"], 1);
  EXPECT_EQ(flip["decode"]["logit1"], 2.125);
  EXPECT_EQ(flip["decode"]["id2"], 0);
  EXPECT_EQ(flip["decode"]["margin"], 0.125);
  EXPECT_EQ(flip["prefill"]["id1"], 0);
  EXPECT_EQ(flip["delta_at_ids"], 0.25);
  EXPECT_EQ(flip["agree"], false);
}

TEST(ReportDir, DefaultsToTestResultsInTheWorkingDirectory) {
  const char* old = std::getenv("MEMRA_TEST_RESULTS");
  const std::string saved = old ? old : "";
  ::unsetenv("MEMRA_TEST_RESULTS");
  EXPECT_EQ(mt::results_dir(), fs::current_path() / "test-results");
  if (old) ::setenv("MEMRA_TEST_RESULTS", saved.c_str(), 1);
}

}  // namespace
