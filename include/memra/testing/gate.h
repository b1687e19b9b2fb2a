// memra/testing/gate.h — what every gate fixture shares.
//
//   class ArmForkGate : public memra::testing::GateTest<MyModel> {
//    protected:
//     std::unique_ptr<MyModel> load_model(const std::string& id) override { ... }
//   };
//   TEST_P(ArmForkGate, ServingStreamWithinEntryNoise) {
//     auto& m = model();                                   // loaded once per suite
//     GreedyStream ref, test, noise;
//     { ScopedArms arm(m, reference_arms()); ref = ...; noise = ...; }
//     { ScopedArms arm(m, test_arms());      test = ...; }
//     const Divergence d = first_divergence(ref, test, noise);
//     report()["first_divergence"] = to_json(d);
//     EXPECT_THAT(d, WithinEntryNoise());
//   }
//   INSTANTIATE_TEST_SUITE_P(Tiny, ArmForkGate,
//       ::testing::ValuesIn(gate_cases({"real-qwen3-0.6b-nvfp4"}, {"w4a4"}, {"essay"})), CaseName());
//
// - Cases are values (model fixture x arms x prompt) whose name() is the GTest parameter name,
//   so `--gtest_filter='*tiny_nvfp4_w4a4_essay*'` reruns exactly one.
// - The model is generic: anything with arms()/set_arms() works with ScopedArms, and the
//   fixture only needs load_model(); nothing here depends on the oracle or the GPU model.
// - A TEST_F case that walks several fixture models derives from GateFixture<Model> and asks
//   for each by id (model(id)); it shares the cache, the report and the canary helper.
// - Every case writes its JSON report on TearDown (report(); verdict = the test's result, with
//   the first failure or skip message as "why"), also a case that stopped in SetUp().
// - Canaries: expect_gate_fails(...) runs the gate body against a broken arm with its
//   failures intercepted and fails unless the body reached a FAIL verdict; the fixture's
//   member of that name records the canary in the case's report.
//
// provides: GateCase, gate_cases, CaseName, sanitize_test_name, ModelCache, GateFixture,
//           GateTest, RequiresTestGpu, GpuGateTest, GpuGateFixture, ScopedArms, CanaryOutcome,
//           run_intercepted, expect_gate_fails
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "memra/error.h"
#include "memra/testing/gpu.h"
#include "memra/testing/report.h"

namespace memra::testing {

// [A-Za-z0-9_] only (GTest parameter names), runs of anything else become one '_', no leading
// or trailing '_'; never empty.
std::string sanitize_test_name(std::string_view s);

// A gate case: fixture model x arms x prompt. A gate without one of the dimensions (its arms
// are fixed by the test, its prompt drawn from a seed) leaves that field empty, and the name
// and the printed value leave it out.
struct GateCase {
  std::string model;   // fixture model id, e.g. "qwen3-tiny-q8_0"
  std::string arms;    // the arm (pair) under test, e.g. "w4a4"; empty: the test's own arms
  std::string prompt;  // prompt id, e.g. "essay"; empty: the test's own prompt
  // model_arms_prompt, sanitised: "qwen3_tiny_q8_0_w4a4_essay", "qwen3_tiny_q8_0".
  std::string name() const;
};
void PrintTo(const GateCase& c, std::ostream* os);

// The product models x arms x prompts, in that nesting order.
std::vector<GateCase> gate_cases(const std::vector<std::string>& models,
                                 const std::vector<std::string>& arms = {""},
                                 const std::vector<std::string>& prompts = {""});

// For INSTANTIATE_TEST_SUITE_P: a case's name() as the parameter name.
struct CaseName {
  template <class P>
  std::string operator()(const ::testing::TestParamInfo<P>& info) const {
    return sanitize_test_name(info.param.name());
  }
};

// Models loaded once per suite, keyed by fixture id (gates load real weights: seconds to
// minutes, so one load serves every arm and prompt of a suite).
template <class Model>
class ModelCache {
 public:
  using Loader = std::function<std::unique_ptr<Model>(const std::string& id)>;
  Model& get(const std::string& id, const Loader& load) {
    auto it = models_.find(id);
    if (it == models_.end()) {
      auto m = load(id);
      if (!m) ::memra::fail("gate fixture: loading model '", id, "' returned nothing");
      ++loads_;
      it = models_.emplace(id, std::move(m)).first;
    }
    return *it->second;
  }
  void clear() { models_.clear(); }
  size_t loads() const { return loads_; }
  size_t size() const { return models_.size(); }

 private:
  std::map<std::string, std::unique_ptr<Model>> models_;
  size_t loads_ = 0;
};

// What a gate body did when run with its failures intercepted.
struct CanaryOutcome {
  int failures = 0;       // fatal + non-fatal assertion failures
  bool skipped = false;   // the body called GTEST_SKIP (a canary must run, never skip)
  std::vector<std::string> messages;  // the intercepted failure messages
};
CanaryOutcome run_intercepted(const std::function<void()>& gate_body);

// The canary: runs `gate_body` (which drives the gate against a deliberately broken arm) with
// its assertion failures intercepted, and adds a failure to the current test unless the body
// failed. `broken` says what was broken, for the message and the report ("canary" section).
// Exceptions are not caught: a canary must reach the gate's verdict, not crash before it.
CanaryOutcome expect_gate_fails(std::string_view broken, const std::function<void()>& gate_body,
                                Report* report = nullptr);

// Report + shared models for any gate fixture; Base is ::testing::Test (TEST_F: a case that
// names its fixture models itself) or ::testing::TestWithParam<P> (GateTest below).
template <class Model, class Base = ::testing::Test>
class GateFixture : public Base {
 public:
  static void TearDownTestSuite() { cache().clear(); }

 protected:
  virtual std::unique_ptr<Model> load_model(const std::string& id) = 0;

  // Fixture model `id`, loaded once per suite; the case's report lists every model it used.
  Model& model(const std::string& id) {
    auto& used = report()["models"];
    if (std::find(used.begin(), used.end(), id) == used.end()) used.push_back(id);
    return cache().get(id, [this](const std::string& i) { return load_model(i); });
  }

  Report& report() {
    if (!report_) {
      report_.emplace(Report::for_current_test());
      describe_case(*report_);
    }
    return *report_;
  }

  // The canary of this case, recorded in its report (see the free function below).
  CanaryOutcome expect_gate_fails(std::string_view broken, const std::function<void()>& gate_body) {
    return ::memra::testing::expect_gate_fails(broken, gate_body, &report());
  }

  // Every case leaves a report, also one that never touched report() or stopped in SetUp():
  // its verdict, why, and context are what a dashboard lists.
  void TearDown() override {
    const auto p = report().write();
    ::testing::Test::RecordProperty("report", p.string());
  }

  // What a new report says about the case before the gate adds anything.
  virtual void describe_case(Report&) {}

  static ModelCache<Model>& cache() {
    static ModelCache<Model> c;
    return c;
  }

 private:
  std::optional<Report> report_;
};

// Value-parameterised gate. Param needs a `model` member (the fixture id) and a name(); Model
// is any type.
template <class Model, class Param = GateCase>
class GateTest : public GateFixture<Model, ::testing::TestWithParam<Param>> {
 protected:
  using GateFixture<Model, ::testing::TestWithParam<Param>>::model;
  // The case's own fixture model.
  Model& model() { return model(this->GetParam().model); }

  void describe_case(Report& r) override {
    const Param& p = this->GetParam();
    r["gate_case"]["model"] = p.model;
    if constexpr (requires(const Param& q) { q.arms; }) r["gate_case"]["arms"] = p.arms;
    if constexpr (requires(const Param& q) { q.prompt; }) r["gate_case"]["prompt"] = p.prompt;
  }
};

// A gate that needs a GPU of the arch families its target was registered with (memra_add_gate
// ARCHS): skips elsewhere, fails there in strict mode, before any model is loaded; its report
// then says why (section "setup").
#ifdef MEMRA_TEST_ARCHS
template <class Fixture>
class RequiresTestGpu : public Fixture {
 protected:
  virtual int min_devices() const { return 1; }
  void SetUp() override {
    if (const auto why = gpu_unavailable(MEMRA_TEST_ARCHS, min_devices()))
      this->report()["setup"] = {{"gpu_unavailable", *why}, {"strict", strict_gpu_mode()}};
    MEMRA_REQUIRE_TEST_GPU(min_devices());
  }
};
template <class Model, class Param = GateCase>
using GpuGateTest = RequiresTestGpu<GateTest<Model, Param>>;
template <class Model>
using GpuGateFixture = RequiresTestGpu<GateFixture<Model>>;
#endif

// RAII arm switch on one loaded model: sets `arms` now, restores the previous arms on scope
// exit (also when an assertion returns early), so arms never leak between passes or cases.
template <class Model>
class ScopedArms {
 public:
  using ArmsType = std::remove_cvref_t<decltype(std::declval<Model&>().arms())>;
  ScopedArms(Model& m, const ArmsType& arms) : model_(m), saved_(m.arms()) { model_.set_arms(arms); }
  ~ScopedArms() { model_.set_arms(saved_); }
  ScopedArms(const ScopedArms&) = delete;
  ScopedArms& operator=(const ScopedArms&) = delete;

 private:
  Model& model_;
  ArmsType saved_;
};

}  // namespace memra::testing
