// memra/selection_ledger.h: comparing two MoE selection ledgers, and the oracle filling one.
#include <gtest/gtest.h>

#include "memra/oracle.h"
#include "memra/selection_ledger.h"
#include "memra/testing/fixtures.h"

namespace memra {
namespace {

Selection row(int64_t pos, int32_t layer, std::vector<int32_t> e, std::vector<uint32_t> w) {
  return {pos, layer, std::move(e), std::move(w)};
}

TEST(SelectionLedger, IdenticalInAnyExecutionOrder) {
  SelectionLedger a, b;
  // a prefill records layer by layer, decode steps token by token: the same decisions
  a.rows = {row(0, 0, {1, 2}, {1, 2}), row(1, 0, {3, 0}, {3, 4}), row(0, 1, {5, 6}, {5, 6}), row(1, 1, {7, 4}, {7, 8})};
  b.rows = {row(0, 0, {1, 2}, {1, 2}), row(0, 1, {5, 6}, {5, 6}), row(1, 0, {3, 0}, {3, 4}), row(1, 1, {7, 4}, {7, 8})};
  EXPECT_EQ(first_ledger_difference(a, b), std::nullopt);
  EXPECT_EQ(first_ledger_difference(SelectionLedger{}, SelectionLedger{}), std::nullopt);
}

TEST(SelectionLedger, NamesTheFirstDifferingDecision) {
  SelectionLedger a, b;
  a.rows = {row(0, 0, {1, 2}, {0x3f000000, 0x3f000000}), row(1, 0, {3, 1}, {0x3f400000, 0x3e800000})};
  b.rows = a.rows;
  b.rows[1].experts = {3, 6};
  ASSERT_EQ(first_ledger_difference(a, b), 1u);
  EXPECT_EQ(describe_ledger_difference(a, b, 1),
            "row 1 (position 1, layer 0): experts {3, 1} vs {3, 6}; weights {0x3f400000, 0x3e800000} vs "
            "{0x3f400000, 0x3e800000}");
  // the same ids with a weight one bit apart differ too
  b.rows[1] = a.rows[1];
  b.rows[1].weight_bits[1] ^= 1;
  EXPECT_EQ(first_ledger_difference(a, b), 1u);
  // a prefix: the shorter length
  b.rows.pop_back();
  EXPECT_EQ(first_ledger_difference(a, b), 1u);
  EXPECT_EQ(describe_ledger_difference(a, b, 1), "the ledgers have 2 and 1 rows");
}

TEST(SelectionLedger, OracleRecordsEveryTokenInEveryMoeLayer) {
  const ModelConfig c = testing_fixtures::unit_config(Family::Qwen35Moe);
  oracle::Options o;
  o.threads = 1;
  oracle::Model m = oracle::Model::from_weights(c, random_weights(c, 7), o);
  int64_t moe_layers = 0;
  for (const LayerWeights& L : m.weights().layers) moe_layers += L.moe.has_value();
  ASSERT_GT(moe_layers, 0);
  const auto p = testing_fixtures::prompt(9, c.n_vocab);
  // prefill of 9 tokens vs 8 + one decode step: the same decisions, bit for bit (recurrent form)
  SelectionLedger pre, dec;
  m.attach_ledger(&pre);
  oracle::Cache c1 = m.new_cache(9);
  m.prime(p, c1);
  m.attach_ledger(&dec);
  oracle::Cache c2 = m.new_cache(9);
  m.prime(std::span(p).first(8), c2);
  m.decode_step(p.back(), c2);
  m.attach_ledger(nullptr);
  EXPECT_EQ(static_cast<int64_t>(pre.rows.size()), 9 * moe_layers);
  EXPECT_EQ(first_ledger_difference(pre, dec), std::nullopt)
      << describe_ledger_difference(pre, dec, *first_ledger_difference(pre, dec));
  for (const Selection& s : pre.rows) {
    EXPECT_EQ(static_cast<int64_t>(s.experts.size()), c.n_expert_used);
    EXPECT_EQ(s.experts.size(), s.weight_bits.size());
  }
  // detached: nothing more is recorded
  oracle::Cache c3 = m.new_cache(9);
  m.prime(p, c3);
  EXPECT_EQ(static_cast<int64_t>(pre.rows.size()), 9 * moe_layers);
}

}  // namespace
}  // namespace memra
