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
    (*report)["canary"] = {{"broken", std::string(broken)},
                           {"gate_failures", out.failures},
                           {"gate_skipped", out.skipped},
                           {"first_message", out.messages.empty() ? "" : out.messages.front()}};
    report->figure("canary_gate_verdict", std::string(out.failures > 0 ? "FAIL" : "PASS"));
  }
  if (out.skipped)
    ADD_FAILURE() << "canary (" << broken << "): the gate body skipped; a canary must run its gate";
  else if (out.failures == 0)
    ADD_FAILURE() << "canary (" << broken
                  << "): the gate PASSED against the broken arm; a gate that cannot fail is a defect";
  return out;
}

}  // namespace memra::testing
