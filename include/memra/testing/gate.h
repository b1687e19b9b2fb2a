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
//       ::testing::ValuesIn(gate_cases({"tiny-nvfp4"}, {"w4a4"}, {"essay"})), CaseName());
//
// - Cases are values (model fixture x arms x prompt) whose name() is the GTest parameter name,
//   so `--gtest_filter='*tiny_nvfp4_w4a4_essay*'` reruns exactly one.
// - The model is generic: anything with arms()/set_arms() works with ScopedArms, and the
//   fixture only needs load_model(); nothing here depends on the oracle or the GPU model.
// - Every case writes its JSON report on TearDown (report(); verdict = the test's result).
// - Canaries: expect_gate_fails(...) runs the gate body against a broken arm with its
//   failures intercepted and fails unless the body reached a FAIL verdict.
//
// provides: GateCase, gate_cases, CaseName, sanitize_test_name, ModelCache, GateTest,
//           GpuGateTest, ScopedArms, CanaryOutcome, run_intercepted, expect_gate_fails
#pragma once

#include <gtest/gtest.h>

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

struct GateCase {
  std::string model;   // fixture model id, e.g. "qwen3-tiny-q8_0"
  std::string arms;    // the arm (pair) under test, e.g. "w4a4"
  std::string prompt;  // prompt id, e.g. "essay"
  std::string name() const { return sanitize_test_name(model + "_" + arms + "_" + prompt); }
};
inline void PrintTo(const GateCase& c, std::ostream* os) {
  *os << "{model=" << c.model << ", arms=" << c.arms << ", prompt=" << c.prompt << "}";
}

// The product models x arms x prompts, in that nesting order.
std::vector<GateCase> gate_cases(const std::vector<std::string>& models,
                                 const std::vector<std::string>& arms,
                                 const std::vector<std::string>& prompts);

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

// Fixture base. Param needs a `model` member (the fixture id) and a name(); Model is any type.
template <class Model, class Param = GateCase>
class GateTest : public ::testing::TestWithParam<Param> {
 public:
  static void TearDownTestSuite() { cache().clear(); }

 protected:
  virtual std::unique_ptr<Model> load_model(const std::string& id) = 0;

  Model& model() {
    return cache().get(this->GetParam().model,
                       [this](const std::string& id) { return load_model(id); });
  }

  Report& report() {
    if (!report_) report_.emplace(Report::for_current_test());
    return *report_;
  }

  // Every case leaves a report, also one that never touched report(): its verdict and arms
  // context are what a dashboard lists.
  void TearDown() override {
    const auto p = report().write();
    ::testing::Test::RecordProperty("report", p.string());
  }

  static ModelCache<Model>& cache() {
    static ModelCache<Model> c;
    return c;
  }

 private:
  std::optional<Report> report_;
};

// A gate that needs a GPU of the arch families its target was registered with (memra_add_gate
// ARCHS): skips elsewhere, fails there in strict mode, before any model is loaded.
#ifdef MEMRA_TEST_ARCHS
template <class Model, class Param = GateCase>
class GpuGateTest : public GateTest<Model, Param> {
 protected:
  virtual int min_devices() const { return 1; }
  void SetUp() override { MEMRA_REQUIRE_TEST_GPU(min_devices()); }
};
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

}  // namespace memra::testing
