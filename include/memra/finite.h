// memra/finite.h — the one finite check: a NaN or Inf in a hidden state or a logit row is an
// error with one message naming where (call, layer, sequence, position, element), on the CPU
// oracle and the GPU model alike.
//
//   check_finite(logits, n_vocab, {.call = "decode_step_batch", .layer = "lm_head", .pos0 = p, .sequence = b});
//   -> "decode_step_batch: non-finite value (nan) in lm_head, sequence 3, position 17, element 4051"
//
// provides: FiniteSite, check_finite, fail_non_finite
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>

namespace memra {

struct FiniteSite {
  std::string call;       // the API call that produced the values ("" when not known)
  std::string layer;      // "layer 3 (attention)", "the token embedding", "lm_head"
  int64_t pos0 = 0;       // position of the first row
  int64_t sequence = -1;  // sequence of a batched call (-1: a single-sequence call)
};

// Throws memra::Error at the first non-finite value of x, a run of rows of `row` values each
// (row r is position pos0 + r).
void check_finite(std::span<const float> x, int64_t row, const FiniteSite& site);

// The same message where the check happened elsewhere (a device kernel that reports only that
// some value of the row was non-finite: element and value unknown).
[[noreturn]] void fail_non_finite(const FiniteSite& site, int64_t position, std::optional<int64_t> element = {},
                                  std::optional<float> value = {});

}  // namespace memra
