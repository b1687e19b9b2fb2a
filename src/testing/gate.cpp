#include "memra/testing/gate.h"

#include <gtest/gtest-spi.h>

#include <cctype>

namespace memra::testing {

std::string sanitize_test_name(std::string_view s) {
  std::string out;
  bool pending_sep = false;
  for (char c : s) {
    if (std::isalnum(static_cast<unsigned char>(c))) {
      if (pending_sep && !out.empty()) out += '_';
      pending_sep = false;
      out += c;
    } else {
      pending_sep = true;
    }
  }
  return out.empty() ? "unnamed" : out;
}

std::string GateCase::name() const {
  std::string joined = model;
  for (const std::string* part : {&arms, &prompt})
    if (!part->empty()) joined += "_" + *part;
  return sanitize_test_name(joined);
}

void PrintTo(const GateCase& c, std::ostream* os) {
  *os << "{model=" << c.model;
  if (!c.arms.empty()) *os << ", arms=" << c.arms;
  if (!c.prompt.empty()) *os << ", prompt=" << c.prompt;
  *os << "}";
}

std::vector<GateCase> gate_cases(const std::vector<std::string>& models,
                                 const std::vector<std::string>& arms,
                                 const std::vector<std::string>& prompts) {
  std::vector<GateCase> out;
  for (const auto& m : models)
    for (const auto& a : arms)
      for (const auto& p : prompts) out.push_back({m, a, p});
  return out;
}

CanaryOutcome run_intercepted(const std::function<void()>& gate_body) {
  CanaryOutcome out;
  ::testing::TestPartResultArray results;
  {
    ::testing::ScopedFakeTestPartResultReporter intercept(
        ::testing::ScopedFakeTestPartResultReporter::INTERCEPT_ONLY_CURRENT_THREAD, &results);
    gate_body();
  }
  for (int i = 0; i < results.size(); ++i) {
    const auto& r = results.GetTestPartResult(i);
    if (r.skipped()) out.skipped = true;
    if (r.failed()) {
      ++out.failures;
      out.messages.emplace_back(r.message());
    }
  }
  return out;
}

CanaryOutcome expect_gate_fails(std::string_view broken, const std::function<void()>& gate_body,
                                Report* report) {
  const CanaryOutcome out = run_intercepted(gate_body);
  if (report) {
    // The canary's observation: what the gate concluded against the broken arm. A verdict the
    // body set on the report is the gate's, not this case's: it moves into this section.
    const std::string observed = out.skipped ? "SKIP" : out.failures > 0 ? "FAIL" : "PASS";
    nlohmann::json c = {{"broken", std::string(broken)},
                        {"expected_verdict", "FAIL"},
                        {"observed_verdict", observed},
                        {"caught", observed == "FAIL"},
                        {"gate_failures", out.failures},
                        {"gate_skipped", out.skipped},
                        {"first_message", out.messages.empty() ? "" : out.messages.front()}};
    if (auto v = report->take_verdict()) c["gate_report_verdict"] = *v;
    (*report)["canary"] = std::move(c);
    report->figure("canary_gate_verdict", observed);
  }
  if (out.skipped)
    ADD_FAILURE() << "canary (" << broken << "): the gate body skipped; a canary must run its gate";
  else if (out.failures == 0)
    ADD_FAILURE() << "canary (" << broken
                  << "): the gate PASSED against the broken arm; a gate that cannot fail is a defect";
  return out;
}

}  // namespace memra::testing
