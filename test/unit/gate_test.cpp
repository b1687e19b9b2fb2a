// The gate fixture base, driven with a toy model: case names, the shared model, ScopedArms,
// canaries, and the GPU skip/strict decision.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <gtest/gtest-spi.h>

#include <memory>
#include <string>
#include <vector>

#include "memra/arms.h"
#include "memra/testing/gate.h"
#include "memra/testing/matchers.h"

namespace {

namespace mt = memra::testing;
using ::testing::HasSubstr;

// A stand-in for a real model: its "logits" depend on the arms, and a broken arm can be
// injected. Only arms()/set_arms() matter to ScopedArms.
struct ToyModel {
  memra::Arms arms_;
  bool broken = false;
  static inline int constructed = 0;
  ToyModel() { ++constructed; }
  const memra::Arms& arms() const { return arms_; }
  void set_arms(const memra::Arms& a) { arms_ = a; }
  std::vector<float> logits(int step) const {
    std::vector<float> row = {0.25f * float(step), 1.0f, 0.5f};
    // The equalised composition is bit-identical by construction; a broken dp4a arm is not.
    if (broken && arms_.decode_matvec == memra::DecodeMatvec::dp4a && step == 1) row[1] += 0x1p-20f;
    return row;
  }
};

TEST(SanitizeTestName, KeepsAlnumCollapsesTheRest) {
  EXPECT_EQ(mt::sanitize_test_name("qwen3-tiny/q8_0 w4a4"), "qwen3_tiny_q8_0_w4a4");
  EXPECT_EQ(mt::sanitize_test_name("--a--b--"), "a_b");
  EXPECT_EQ(mt::sanitize_test_name("///"), "unnamed");
}

TEST(GateCases, ProductInOrderWithReadableNames) {
  const auto cs = mt::gate_cases({"tiny-q8", "tiny-nvfp4"}, {"w4a4"}, {"essay", "code"});
  ASSERT_EQ(cs.size(), 4u);
  EXPECT_EQ(cs[0].name(), "tiny_q8_w4a4_essay");
  EXPECT_EQ(cs[3].name(), "tiny_nvfp4_w4a4_code");
  EXPECT_EQ(::testing::PrintToString(cs[1]), "{model=tiny-q8, arms=w4a4, prompt=code}");
}

TEST(GateCases, EmptyDimensionsAreLeftOut) {
  // A gate whose arms and prompt are the test's own: the case is its fixture model.
  const auto cs = mt::gate_cases({"qwen3-q8_0-gguf", "qwen35-nvfp4-hf"});
  ASSERT_EQ(cs.size(), 2u);
  EXPECT_EQ(cs[0].name(), "qwen3_q8_0_gguf");
  EXPECT_EQ(::testing::PrintToString(cs[1]), "{model=qwen35-nvfp4-hf}");
  const auto arm_only = mt::gate_cases({"qwen3-q8_0-gguf"}, {"mma"});
  EXPECT_EQ(arm_only[0].name(), "qwen3_q8_0_gguf_mma");
  EXPECT_EQ(::testing::PrintToString(arm_only[0]), "{model=qwen3-q8_0-gguf, arms=mma}");
}

TEST(ScopedArms, SetsAndRestoresEvenOnEarlyReturn) {
  ToyModel m;
  const memra::Arms before = m.arms();
  {
    mt::ScopedArms arm(m, memra::Arms::equalised());
    EXPECT_EQ(m.arms(), memra::Arms::equalised());
  }
  EXPECT_EQ(m.arms(), before);
  auto body = [&] {
    mt::ScopedArms arm(m, memra::Arms::equalised());
    ASSERT_TRUE(false) << "early return";
  };
  const auto out = mt::run_intercepted(body);
  EXPECT_EQ(out.failures, 1);
  EXPECT_EQ(m.arms(), before);
}

TEST(ModelCache, LoadsOncePerIdAndReportsEmptyLoads) {
  mt::ModelCache<ToyModel> cache;
  int loads = 0;
  auto loader = [&](const std::string&) { ++loads; return std::make_unique<ToyModel>(); };
  ToyModel& a = cache.get("x", loader);
  ToyModel& b = cache.get("x", loader);
  cache.get("y", loader);
  EXPECT_EQ(&a, &b);
  EXPECT_EQ(loads, 2);
  EXPECT_EQ(cache.loads(), 2u);
  try {
    cache.get("z", [](const std::string&) { return std::unique_ptr<ToyModel>(); });
    FAIL() << "no error";
  } catch (const memra::Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("loading model 'z' returned nothing"));
  }
}

// A toy gate: the same decode under two arms must be bit-identical (the DecodeBatch shape).
void toy_gate_body(ToyModel& m) {
  std::vector<float> ref, test;
  {
    mt::ScopedArms arm(m, memra::Arms{});
    for (int s = 0; s < 3; ++s) for (float v : m.logits(s)) ref.push_back(v);
  }
  {
    mt::ScopedArms arm(m, memra::Arms::equalised());
    for (int s = 0; s < 3; ++s) for (float v : m.logits(s)) test.push_back(v);
  }
  EXPECT_THAT(test, mt::BitIdentical(ref));
}

class ToyGate : public mt::GateTest<ToyModel> {
 protected:
  std::unique_ptr<ToyModel> load_model(const std::string& id) override {
    ++loads_seen;
    return std::make_unique<ToyModel>();
  }
  static inline int loads_seen = 0;
};

TEST_P(ToyGate, ArmsAgreeBitwise) {
  toy_gate_body(model());
  report().figure("steps", 3);
  // Both cases of this suite name the same fixture model: it is loaded once for the suite.
  EXPECT_EQ(loads_seen, 1);
  EXPECT_EQ(cache().size(), 1u);
  // The report names the case's dimensions and the models it used.
  EXPECT_EQ(report().json()["gate_case"]["model"], "toy");
  EXPECT_EQ(report().json()["gate_case"]["arms"], "equalised");
  EXPECT_EQ(report().json()["models"], nlohmann::json::array({"toy"}));
}

TEST_P(ToyGate, CanaryBrokenModelMakesTheGateFail) {
  ToyModel& m = model();
  m.broken = true;
  // The fixture's expect_gate_fails records the canary in the case's report.
  const auto out = expect_gate_fails("dp4a arm: logit 1 perturbed by 2^-20 at step 1", [&] {
    report().set_verdict(false, "the gate's own verdict");
    toy_gate_body(m);
  });
  m.broken = false;
  ASSERT_EQ(out.failures, 1);
  // The intercepted verdict names the first bad element: step 1, id 1 -> flat index 4.
  EXPECT_THAT(out.messages[0], HasSubstr("first at [4]"));
  const nlohmann::json& c = report().json()["canary"];
  EXPECT_EQ(c["broken"], "dp4a arm: logit 1 perturbed by 2^-20 at step 1");
  EXPECT_EQ(c["expected_verdict"], "FAIL");
  EXPECT_EQ(c["observed_verdict"], "FAIL");
  EXPECT_EQ(c["caught"], true);
  EXPECT_EQ(c["gate_failures"], 1);
  EXPECT_THAT(c["first_message"].get<std::string>(), HasSubstr("first at [4]"));
  // The verdict the body set is the gate's, not the canary case's: it moved into the section.
  EXPECT_EQ(c["gate_report_verdict"]["verdict"], "FAIL");
  EXPECT_EQ(c["gate_report_verdict"]["why"], "the gate's own verdict");
  EXPECT_FALSE(report().json().contains("verdict"));
  EXPECT_EQ(report().json()["figures"]["canary_gate_verdict"], "FAIL");
}

INSTANTIATE_TEST_SUITE_P(Toy, ToyGate,
                         ::testing::ValuesIn(mt::gate_cases({"toy"}, {"equalised"}, {"p1", "p2"})),
                         mt::CaseName());

// A case that walks several fixture models by id: the same cache, report and canary helper.
class ToyFixture : public mt::GateFixture<ToyModel> {
 protected:
  std::unique_ptr<ToyModel> load_model(const std::string& id) override {
    loaded_ids.push_back(id);
    return std::make_unique<ToyModel>();
  }
  static inline std::vector<std::string> loaded_ids;
};

TEST_F(ToyFixture, ModelsByIdLoadOnceAndAreReported) {
  ToyModel& a = model("a");
  model("b");
  EXPECT_EQ(&model("a"), &a);
  EXPECT_EQ(loaded_ids, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(report().json()["models"], nlohmann::json::array({"a", "b"}));
  EXPECT_FALSE(report().json().contains("gate_case"));  // not a parameterised case
}

TEST(ReportPart, NamedPartNestsSectionsAndPrefixesFigures) {
  mt::Report r("Suite", "case");
  mt::ReportPart top(r), fx(r, "qwen3-q8_0-gguf");
  top["fixture"] = "all";
  top.figure("n", 2);
  fx["rows"] = 3;
  fx.figure("max_rel_noise", 0.5);
  fx.set_arms("gpu", memra::Arms::equalised());
  EXPECT_EQ(r.json()["fixture"], "all");
  EXPECT_EQ(r.json()["figures"]["n"], 2);
  EXPECT_EQ(r.json()["qwen3-q8_0-gguf"]["rows"], 3);
  EXPECT_EQ(r.json()["figures"]["qwen3-q8_0-gguf_max_rel_noise"], 0.5);
  EXPECT_EQ(r.json()["qwen3-q8_0-gguf"]["arms"]["gpu"], mt::to_json(memra::Arms::equalised()));
}

TEST(Report, TakeVerdictHandsBackTheExplicitOne) {
  mt::Report r("Suite", "case");
  EXPECT_EQ(r.take_verdict(), std::nullopt);
  r.set_verdict(false, "fork outside the noise");
  const auto v = r.take_verdict();
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ((*v)["verdict"], "FAIL");
  EXPECT_EQ((*v)["why"], "fork outside the noise");
  EXPECT_FALSE(r.json().contains("verdict"));
  EXPECT_FALSE(r.json().contains("why"));
  EXPECT_EQ(r.take_verdict(), std::nullopt);
}

TEST(Canary, AGateThatPassesAgainstTheBrokenArmIsReported) {
  ToyModel healthy;  // not broken: the gate passes, so the canary must complain
  EXPECT_NONFATAL_FAILURE(mt::expect_gate_fails("nothing really broken", [&] { toy_gate_body(healthy); }),
                          "the gate PASSED against the broken arm");
}

TEST(Canary, ASkippingGateIsNotACaughtCanary) {
  EXPECT_NONFATAL_FAILURE(mt::expect_gate_fails("x", [] { GTEST_SKIP() << "no GPU"; }),
                          "the gate body skipped");
}

TEST(Canary, FatalFailuresCountToo) {
  const auto out = mt::run_intercepted([] { ASSERT_EQ(1, 2) << "fatal"; });
  EXPECT_EQ(out.failures, 1);
  EXPECT_FALSE(out.skipped);
}

// ---- the GPU decision ----------------------------------------------------------------------

TEST(GpuDecision, ArchLabelsPerFamily) {
  EXPECT_EQ(mt::arch_label(9), "h100");
  EXPECT_EQ(mt::arch_label(10), "b200");
  EXPECT_EQ(mt::arch_label(12), "rtx5090");
  EXPECT_EQ(mt::arch_label(8), "");
}

TEST(GpuDecision, RunsOnlyOnALabelledArch) {
  const std::vector<mt::GpuInfo> h200 = {{.name = "NVIDIA H200", .cc_major = 9}};
  EXPECT_EQ(mt::gpu_unavailable(h200, 0, "h100", 1), std::nullopt);
  EXPECT_EQ(mt::gpu_unavailable(h200, 0, "b200;h100", 1), std::nullopt);
  EXPECT_EQ(mt::gpu_unavailable(h200, 0, "b200", 1),
            std::optional<std::string>("needs b200, device 0 is NVIDIA H200 (sm_90, h100)"));
  const std::vector<mt::GpuInfo> ada = {{.name = "NVIDIA L4", .cc_major = 8, .cc_minor = 9}};
  EXPECT_EQ(mt::gpu_unavailable(ada, 0, "h100,rtx5090", 1),
            std::optional<std::string>("needs h100/rtx5090, device 0 is NVIDIA L4 (sm_89)"));
  EXPECT_EQ(mt::gpu_unavailable({}, 0, "h100", 1),
            std::optional<std::string>("needs a GPU (h100), none found"));
  EXPECT_EQ(mt::gpu_unavailable(h200, 0, "h100", 2),
            std::optional<std::string>("needs 2 GPU(s) from device 0, have 1"));
  EXPECT_EQ(mt::gpu_unavailable(h200, 0, "", 1), std::optional<std::string>("test declares no GPU arch"));
}

TEST(GpuDecision, StrictModeFailsWhereTheDefaultSkips) {
  const char* old = std::getenv("MEMRA_REQUIRE_GPU");
  const std::string saved = old ? old : "";
  // An arch no machine has: always unavailable, whatever GPU this test runs on.
  auto body = [] { MEMRA_REQUIRE_GPU_ARCH("no_such_arch"); ADD_FAILURE() << "body ran"; };
  ::setenv("MEMRA_REQUIRE_GPU", "1", 1);
  EXPECT_TRUE(mt::strict_gpu_mode());
  const auto strict = mt::run_intercepted(body);
  ASSERT_EQ(strict.failures, 1);  // the FAIL, and "body ran" never reached
  EXPECT_THAT(strict.messages[0], HasSubstr("no_such_arch"));
  EXPECT_THAT(strict.messages[0], HasSubstr("(strict mode: MEMRA_REQUIRE_GPU=1)"));
  EXPECT_FALSE(strict.skipped);
  ::setenv("MEMRA_REQUIRE_GPU", "0", 1);
  const auto out = mt::run_intercepted(body);
  EXPECT_TRUE(out.skipped);
  EXPECT_EQ(out.failures, 0);  // skipped before "body ran"
  ::setenv("MEMRA_REQUIRE_GPU", "yes", 1);
  EXPECT_THROW(mt::strict_gpu_mode(), memra::Error);  // a typo must not turn strict mode off
  if (old) ::setenv("MEMRA_REQUIRE_GPU", saved.c_str(), 1);
  else ::unsetenv("MEMRA_REQUIRE_GPU");
}

TEST(GpuDecision, TestDeviceFromCtestResourceGroup) {
  ::setenv("CTEST_RESOURCE_GROUP_0_GPUS", "id:3,slots:100", 1);
  EXPECT_EQ(mt::test_device(), 3);
  ::unsetenv("CTEST_RESOURCE_GROUP_0_GPUS");
  EXPECT_EQ(mt::test_device(), 0);
}

TEST(GpuDecision, QueryNeverCrashesWithoutADriver) {
  // On the CPU CI machine this is empty; on a GPU box every entry has a name and an sm.
  for (const auto& g : mt::query_gpus()) {
    EXPECT_FALSE(g.name.empty());
    EXPECT_GE(g.cc_major, 1);
  }
}

}  // namespace
