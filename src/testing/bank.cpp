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

}  // namespace memra::testing
