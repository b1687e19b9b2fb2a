// memra/selection_ledger.h — the MoE selection ledger: which experts a model routed each token
// to, in every MoE layer, and with which weights (GATES.md §5: the DecodeGraph gate compares the
// ledgers of two arms row for row; the TeacherForced investigation compares the oracle's with a
// perturbed oracle's).
//
//   SelectionLedger ledger;
//   oracle.attach_ledger(&ledger);          // every later call appends its rows
//   oracle.prime(prompt, cache);
//   oracle.attach_ledger(nullptr);
//   if (auto i = first_ledger_difference(a, b)) std::puts(describe_ledger_difference(a, b, *i).c_str());
//
// A row is one routing decision: the token's position in its sequence, the layer, the selected
// experts in selection order (highest weight first, ties to the lowest expert) and each weight as
// the bits of an f32. Rows are appended in execution order (a multi-token call records layer by
// layer, a decode step token by token); the comparison below orders both ledgers by (position,
// layer) first, so a prefill and the same tokens decoded one by one compare row for row.
// The oracle computes weights in f64 and records them rounded to f32: bit-comparable with another
// oracle, not with the GPU's f32 weights (compare ids there).
//
// provides: Selection, SelectionLedger, ordered, first_ledger_difference, describe_ledger_difference
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace memra {

struct Selection {
  int64_t pos = 0;
  int32_t layer = 0;
  std::vector<int32_t> experts;       // selection order
  std::vector<uint32_t> weight_bits;  // f32 bits of each selected expert's weight
  bool operator==(const Selection&) const = default;
};

struct SelectionLedger {
  std::vector<Selection> rows;
};

// Both ledgers' rows in (position, layer) order (stable).
SelectionLedger ordered(const SelectionLedger& l);
// Index, in (position, layer) order, of the first row where a and b differ (in position, layer,
// experts or weight bits), or the shorter length when one is a prefix of the other; nullopt when
// identical.
std::optional<size_t> first_ledger_difference(const SelectionLedger& a, const SelectionLedger& b);
// "row 17 (position 5, layer 2): experts {3, 1} vs {3, 6}; weights 0x3f0a.. vs ..." (`row` as
// first_ledger_difference returns it) or a length mismatch, for a failure message.
std::string describe_ledger_difference(const SelectionLedger& a, const SelectionLedger& b, size_t row);

}  // namespace memra
