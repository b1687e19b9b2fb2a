#include "memra/testing/bank.h"

#include "memra/error.h"

namespace memra::testing {

std::vector<TfStep> tf_steps(const Bank& b, std::span<const int32_t> picks) {
  if (picks.size() != b.rows.size())
    fail("teacher-forced pass: ", picks.size(), " picks for ", b.rows.size(), " banked steps");
  std::vector<TfStep> out;
  out.reserve(picks.size());
  for (size_t i = 0; i < picks.size(); ++i) out.push_back({i, picks[i], b.rows[i]});
  return out;
}

size_t adjudicate_unresolved(std::vector<TfStep>& steps, const BandRule& rule,
                             const std::function<std::vector<std::vector<float>>()>& oracle_rows) {
  std::vector<size_t> owed;
  for (size_t i = 0; i < steps.size(); ++i)
    if (classify_tf_row(steps[i].step, steps[i].pick, steps[i].bank, rule).cls == TfClass::unresolved)
      owed.push_back(i);
  if (owed.empty()) return 0;
  const std::vector<std::vector<float>> rows = oracle_rows();
  for (size_t i : owed) {
    const size_t s = steps[i].step;
    if (s >= rows.size()) fail("CPU adjudication: step ", s, " is owed a row but the oracle gave ", rows.size());
    steps[i].oracle_row = rows[s];
  }
  return owed.size();
}

}  // namespace memra::testing
