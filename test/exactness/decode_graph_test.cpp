// Gate: DecodeGraph (GATES.md §5; seed glm5_decode_graph_gate.rs) — does replaying the captured
// decode graph change anything a user or a router sees?
//
// DESIGN.md law 3: the graph launches the same kernels on the same operands in the same order as
// eager decode. On every tiny fixture (4 Qwen families x F32/BF16/Q8_0/NVFP4 GGUF, GLM-5 in the
// four types as HF and Q8_0 as GGUF, in memory: gpu_fixture.h; GLM-5's 76 positions run past
// its DSA top-k of 16)
// the same prompt is primed and decoded greedily for 64 steps twice, eager and graph, each with
// a selection ledger attached (memra/selection_ledger.h: per token and MoE layer the experts the
// route kernel chose and the bits of their weights). The gate holds iff
//   - the token streams are the same,
//   - every step's logits are BitIdentical (the first differing step is named),
//   - the ledgers are the same row for row (MoE fixtures; the first differing row is named:
//     position, layer, both arms' experts and weight bits).
// Non-vacuity: the graph served every decode step (replays), was captured (captures), and each
// MoE ledger holds (prompt + 64) x MoE layers rows, so the comparison covered every decision.
// Canary (DecodeGraphCanary): the graph arm with layer 0's output scaled by 0.25
// (Break::scale_layer) must FAIL, and on the MoE fixtures through the ledger too (a residual
// scaled early moves the routers of later layers).
// Same gate, harder runs (each its own suite, one case per fixture):
//   DecodeGraphReseat  forced re-seat of a cache's K/V and recurrent state mid-run (Cache::reseat):
//                      re-captured (graph_recapture on, Counters::recaptures) or latched to eager
//                      (off), bit-identical either way; canary: a graph that skips the
//                      re-capture (Break::graph_ignore_reseat) must FAIL.
//   DecodeGraphLong    past every capture size: 660 keys (attention splits of 256), the cache
//                      grown mid-run (Cache::grow) after the graph was captured.
//   GraphInvalidation  a scratch reallocation: re-captured or latched, bits unchanged.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>

#include "exactness/gpu_fixture.h"
#include "memra/engine.h"
#include "memra/model.h"
#include "memra/selection_ledger.h"
#include "memra/testing/gate.h"
#include "memra/testing/gpu.h"
#include "memra/testing/matchers.h"
#include "memra/testing/records.h"
#include "memra/testing/report.h"

namespace memra {
namespace {

using gpu_test::FixtureModel;

constexpr int kPrompt = 12;  // prompt tokens
constexpr int kSteps = 64;   // greedy decode steps per arm

// The gate fixtures' ModelCache holds each model: one load per suite.
using Loaded = gpu_test::GpuFixture;
std::unique_ptr<Loaded> load_fixture(const std::string& id) { return gpu_test::load_gpu_fixture(id); }

int64_t moe_layers(const ModelConfig& c) { return std::count(c.ffn_kind.begin(), c.ffn_kind.end(), FfnKind::Moe); }

struct Stream {
  std::vector<int32_t> tokens;           // the greedy pick of each row
  std::vector<std::vector<float>> rows;  // the prime's row, then each decode step's
  SelectionLedger ledger;                // ordered()
  Counters delta;                        // the counters this stream moved
};

// One arm's run: prime(prompt) into a cache of `ctx` positions, then `steps` greedy decode_step
// calls, with `before_step(i, cache)` called before step i (re-seat, growth) when set.
struct ArmRun {
  std::optional<Arms> arms;  // none: the model's
  Break brk;
  int64_t steps = kSteps;
  int64_t ctx = 0;  // 0: prompt + steps (the eager reference's always)
  std::function<void(int64_t, Cache&)> before_step;
};

Counters counters_delta(const Counters& a, const Counters& b) {
  Counters d;
  d.captures = b.captures - a.captures;
  d.recaptures = b.recaptures - a.recaptures;
  d.replays = b.replays - a.replays;
  d.latched = b.latched - a.latched;
  return d;
}

Stream greedy_stream(Model& m, const ArmRun& run, const std::vector<int32_t>& prompt) {
  testing::ScopedArms<Model> scoped(m, run.arms.value_or(m.arms()));
  m.set_break(run.brk);
  SelectionLedger l;
  m.attach_ledger(&l);
  struct Restore {
    Model& m;
    ~Restore() {
      m.attach_ledger(nullptr);
      m.set_break(Break{});
    }
  } restore{m};
  const Counters c0 = m.counters();
  Stream s;
  Cache c = m.new_cache(run.ctx > 0 ? run.ctx : static_cast<int64_t>(prompt.size()) + run.steps);
  std::vector<float> row = m.prime_cache(prompt, c).logits;
  for (int64_t i = 0; i <= run.steps; ++i) {
    s.tokens.push_back(testing::argmax(row));
    s.rows.push_back(std::move(row));
    if (i == run.steps) break;
    if (run.before_step) run.before_step(i, c);
    row = m.decode_step(s.tokens.back(), c).logits;
  }
  s.delta = counters_delta(c0, m.counters());
  s.ledger = ordered(l);
  return s;
}

struct GraphVerdict {
  bool tokens_same = false, rows_same = false, ledger_same = false;
  Counters graph;  // what the graph arm's run moved
};

// The gate on one fixture: an eager run against a graph run (`graph`: its arms get decode_graph
// on; the canaries' breaks, re-seats and growth come with it).
GraphVerdict decode_graph_gate(Loaded& m, testing::Report& rep, ArmRun graph = {}) {
  Model& gpu = *m.gpu;
  ArmRun eager;
  eager.arms = graph.arms.value_or(gpu.arms());
  eager.arms->decode_graph = false;
  eager.steps = graph.steps;
  if (!graph.arms) graph.arms = gpu.arms();
  graph.arms->decode_graph = true;
  const std::vector<int32_t> prompt = testing_fixtures::prompt(kPrompt, m.fx.config.n_vocab, 17);
  const Stream e = greedy_stream(gpu, eager, prompt);
  const Stream g = greedy_stream(gpu, graph, prompt);
  const int64_t L = moe_layers(m.fx.config), want_rows = (kPrompt + graph.steps) * L;
  GraphVerdict v;
  v.graph = g.delta;
  v.tokens_same = e.tokens == g.tokens;
  EXPECT_EQ(g.tokens, e.tokens) << m.fx.id << ": the graph arm's greedy stream differs";
  std::optional<size_t> first_row;
  for (size_t i = 0; i < e.rows.size() && !first_row; ++i)
    if (!::testing::Matches(testing::BitIdentical(e.rows[i]))(g.rows[i])) first_row = i;
  v.rows_same = !first_row;
  if (first_row) {
    EXPECT_THAT(g.rows[*first_row], testing::BitIdentical(e.rows[*first_row]))
        << m.fx.id << ": logits of row " << *first_row << " (0 = the prime's) differ between graph and eager";
  }
  const std::optional<size_t> first_sel = first_ledger_difference(e.ledger, g.ledger);
  v.ledger_same = !first_sel;
  EXPECT_FALSE(first_sel.has_value()) << m.fx.id << ": MoE selections differ (eager vs graph): "
                                      << (first_sel ? describe_ledger_difference(e.ledger, g.ledger, *first_sel) : "");
  // non-vacuity: the graph served every decode step (until the cache latched to eager)
  if (g.delta.latched == 0) {
    EXPECT_GE(g.delta.replays, graph.steps) << m.fx.id << ": the graph arm did not serve every decode step";
  } else {
    EXPECT_GE(g.delta.replays, 1) << m.fx.id << ": the graph arm latched before any replay";
  }
  EXPECT_GE(g.delta.captures, 1) << m.fx.id << ": no graph was captured";
  EXPECT_EQ(e.delta.replays, 0) << m.fx.id << ": the eager arm replayed a graph";
  EXPECT_EQ(static_cast<int64_t>(e.ledger.rows.size()), want_rows)
      << m.fx.id << ": eager ledger rows (want (prompt + steps) x MoE layers)";
  EXPECT_EQ(static_cast<int64_t>(g.ledger.rows.size()), want_rows)
      << m.fx.id << ": graph ledger rows (want (prompt + steps) x MoE layers)";
  rep["fixture"] = m.fx.id;
  rep["first_differing_row"] = first_row ? nlohmann::json(*first_row) : nlohmann::json(nullptr);
  rep["first_ledger_difference"] =
      first_sel ? nlohmann::json(describe_ledger_difference(e.ledger, g.ledger, *first_sel)) : nlohmann::json(nullptr);
  rep["tokens"] = {{"eager", e.tokens}, {"graph", g.tokens}};
  rep.figure("steps", graph.steps);
  rep.figure("replays", g.delta.replays);
  rep.figure("captures", g.delta.captures);
  rep.figure("recaptures", g.delta.recaptures);
  rep.figure("latched", g.delta.latched);
  rep.figure("ledger_rows", static_cast<int64_t>(g.ledger.rows.size()));
  rep.figure("moe_layers", L);
  return v;
}

// The layers the re-seat runs move, and the steps at which they move: the first attention or MLA
// layer (K/V, and an MLA layer's indexer keys and pools) or DeepSeek-V4's first CSA layer at step
// 20, the first Gated-DeltaNet or Kimi-delta-attention layer (conv ring + recurrent state, the
// seed's re-seat) at step 40 where the family has one.
struct Reseat {
  int64_t step;
  int64_t layer;
};
std::vector<Reseat> reseats(const ModelConfig& c) {
  std::vector<Reseat> r;
  const auto first = [&](LayerKind k) {
    return std::find(c.layer_kind.begin(), c.layer_kind.end(), k) - c.layer_kind.begin();
  };
  if (const int64_t a = std::min(first(LayerKind::Attention), first(LayerKind::Mla)); a < c.n_layer)
    r.push_back({20, a});
  if (const int64_t g = std::min(first(LayerKind::Linear), first(LayerKind::Kda)); g < c.n_layer) r.push_back({40, g});
  // DeepSeek-V4: its first CSA layer (raw keys, both compressors' projections and rows)
  if (const int64_t d = std::find(c.dsv4_attn.begin(), c.dsv4_attn.end(), Dsv4Attn::Csa) - c.dsv4_attn.begin();
      d < static_cast<int64_t>(c.dsv4_attn.size()))
    r.push_back({20, d});
  return r;
}

// A graph arm that re-seats the layers above mid-run, with graph_recapture `recapture`.
ArmRun reseat_run(const Model& gpu, const ModelConfig& c, bool recapture, const Break& brk = {}) {
  ArmRun run;
  run.arms = gpu.arms();
  run.arms->graph_recapture = recapture;
  run.brk = brk;
  run.before_step = [moves = reseats(c)](int64_t step, Cache& cache) {
    for (const Reseat& r : moves)
      if (r.step == step) cache.reseat(r.layer);
  };
  return run;
}

class DecodeGraphGate : public testing::GpuGateTest<Loaded> {
 protected:
  std::unique_ptr<Loaded> load_model(const std::string& id) override { return load_fixture(id); }
};

std::vector<std::string> tiny_fixture_ids() {
  std::vector<std::string> v;
  for (Family f : {Family::Qwen3, Family::Qwen3Next, Family::Qwen35, Family::Qwen35Moe})
    for (DType t : {DType::F32, DType::BF16, DType::Q8_0, DType::NVFP4}) v.push_back(gpu_test::fixture_id(f, t, false));
  for (DType t : {DType::F32, DType::BF16, DType::Q8_0, DType::NVFP4})
    v.push_back(gpu_test::fixture_id(Family::GlmDsa, t, true));
  v.push_back(gpu_test::fixture_id(Family::GlmDsa, DType::Q8_0, false));  // GGUF: kv_b split in the file
  for (DType t : {DType::F32, DType::BF16, DType::Q8_0, DType::NVFP4})
    v.push_back(gpu_test::fixture_id(Family::DeepseekV4, t, false));
  // GLM-5's hybrid, the seed's own model: KDA layers between MLA layers with the pooled indexer
  for (DType t : {DType::F32, DType::BF16, DType::Q8_0}) v.push_back(gpu_test::fixture_id(Family::Glm5Next, t, true));
  return v;
}

TEST_P(DecodeGraphGate, GraphEqualsEagerWithLedger) { decode_graph_gate(model(), report()); }
INSTANTIATE_TEST_SUITE_P(Tiny, DecodeGraphGate, ::testing::ValuesIn(testing::gate_cases(tiny_fixture_ids())),
                         testing::CaseName());

// Forced re-seat (the seed's re-capture arm): mid-run, the graph arm's cache moves its first
// attention layer's K/V (step 20) and its first Gated-DeltaNet layer's state (step 40) to fresh
// allocations holding the same bytes (Cache::reseat). The captured graph baked the old pointers
// in: with graph_recapture on it must notice (pointer signature) and re-capture once per
// re-seat, Counters::recaptures; with it off the cache latches to eager once. Either way the
// run stays bit-identical to plain eager decode, ledger included.
class DecodeGraphReseat : public DecodeGraphGate {};
TEST_P(DecodeGraphReseat, RecapturesOrLatchesBitIdentically) {
  Loaded& m = model();
  const bool recapture = GetParam().arms == "recapture";
  const auto moves = reseats(m.fx.config);
  ASSERT_FALSE(moves.empty()) << m.fx.id << ": no layer to re-seat";
  const GraphVerdict v = decode_graph_gate(m, report(), reseat_run(*m.gpu, m.fx.config, recapture));
  if (recapture) {
    EXPECT_EQ(v.graph.recaptures, static_cast<int64_t>(moves.size())) << m.fx.id << ": one re-capture per re-seat";
    EXPECT_EQ(v.graph.latched, 0) << m.fx.id;
  } else {
    EXPECT_EQ(v.graph.latched, 1) << m.fx.id << ": the first re-seat latches the cache to eager";
    EXPECT_EQ(v.graph.recaptures, 0) << m.fx.id;
  }
  report().figure("reseats", static_cast<int64_t>(moves.size()));
}
INSTANTIATE_TEST_SUITE_P(Tiny, DecodeGraphReseat,
                         ::testing::ValuesIn(testing::gate_cases(tiny_fixture_ids(), {"recapture", "latch"})),
                         testing::CaseName());

// Capture sizes: launch shapes change with the context (attention splits of kAttnSplit = 256
// keys, the split-KV scratch), so a graph must stay exact past every such size after it was
// captured. The graph arm's cache starts at 320 positions (captured with a 2-split grid), the
// run crosses 256 keys, grows the cache to 704 positions at 300 keys (Cache::grow: K/V move,
// max_ctx changes, a re-capture with a 3-split grid and more scratch), and decodes past 512 to
// 660 keys; the eager reference has 660 positions from the start. Tokens, every row's logits
// and the ledger: bit-identical.
class DecodeGraphLong : public DecodeGraphGate {};
TEST_P(DecodeGraphLong, CrossesCaptureSizesAndGrowth) {
  Loaded& m = model();
  constexpr int64_t kKeys = 660, kFirstCtx = 320, kGrowAt = 300, kGrownCtx = 704;
  ArmRun run;
  run.steps = kKeys - kPrompt;
  run.ctx = kFirstCtx;
  run.before_step = [](int64_t step, Cache& c) {
    if (step + kPrompt == kGrowAt) c.grow(kGrownCtx);
  };
  const GraphVerdict v = decode_graph_gate(m, report(), run);
  EXPECT_GE(v.graph.recaptures, 1) << m.fx.id << ": growing the cache did not re-capture";
  EXPECT_EQ(v.graph.latched, 0) << m.fx.id;
  report().figure("keys", kKeys);
}
INSTANTIATE_TEST_SUITE_P(Tiny, DecodeGraphLong, ::testing::ValuesIn(testing::gate_cases(tiny_fixture_ids())),
                         testing::CaseName());

// A scratch reallocation (a longer prompt on the same model) invalidates a captured graph:
// re-captured with graph_recapture on, latched to eager with it off; bits unchanged either way.
class GraphInvalidation : public testing::GpuGateFixture<Loaded> {
 protected:
  std::unique_ptr<Loaded> load_model(const std::string& id) override { return load_fixture(id); }
};
TEST_F(GraphInvalidation, RecapturesOrLatches) {
  Loaded& m = model(gpu_test::fixture_id(Family::Qwen35, DType::NVFP4, false));
  const int64_t V = m.fx.config.n_vocab;
  for (bool recapture : {true, false}) {
    Arms a = m.gpu->arms();
    a.decode_graph = true;
    a.graph_recapture = recapture;
    testing::ScopedArms<Model> arm(*m.gpu, a);
    const auto p = testing_fixtures::prompt(kPrompt, V, 19);
    Cache c = m.gpu->new_cache(kPrompt + 8);
    m.gpu->prime_cache(p, c);
    const Counters s0 = m.gpu->counters();
    const std::vector<float> l1 = m.gpu->decode_step(p[0], c).logits;
    // grow the scratch: a prompt longer than any before on this model
    const auto big = testing_fixtures::prompt(recapture ? 400 : 600, V, 23);
    (void)m.gpu->forward_last(big);
    const std::vector<float> l2 = m.gpu->decode_step(p[1], c).logits;
    const Counters s1 = m.gpu->counters();
    // the eager reference of the same three calls
    Arms ea = a;
    ea.decode_graph = false;
    testing::ScopedArms<Model> eager(*m.gpu, ea);
    Cache r = m.gpu->new_cache(kPrompt + 8);
    m.gpu->prime_cache(p, r);
    const std::vector<float> r1 = m.gpu->decode_step(p[0], r).logits;
    const std::vector<float> r2 = m.gpu->decode_step(p[1], r).logits;
    testing::ReportPart out(report(), recapture ? "recapture" : "latch");
    out.figure("captures", s1.captures - s0.captures);
    out.figure("latched", s1.latched - s0.latched);
    EXPECT_THAT(l1, testing::BitIdentical(r1)) << "recapture=" << recapture << ": the step before the reallocation";
    EXPECT_THAT(l2, testing::BitIdentical(r2)) << "recapture=" << recapture << ": the step after it";
    // a split model captures one graph per stage (its counters sum the stages')
    const int64_t stages = static_cast<int64_t>(m.gpu->stages().size());
    if (recapture) {
      EXPECT_EQ(s1.captures - s0.captures, 2 * stages) << "expected a capture, then a re-capture (per stage)";
    } else {
      EXPECT_EQ(s1.latched - s0.latched, 1) << "expected the cache to latch to eager";
    }
  }
}

// --- canaries (their suites end in Canary: label canary, --gtest_filter='*Canary.*') ---------------

// The graph arm with layer 0's output scaled by 0.25: the gate must FAIL; on MoE fixtures the
// ledger comparison must be among the failures (it can see a routing change by itself).
class DecodeGraphCanary : public DecodeGraphGate {};
TEST_P(DecodeGraphCanary, BrokenGraphArmFails) {
  Break brk;
  brk.scale_layer = 0;
  brk.scale_factor = 0.25f;
  GraphVerdict v;
  ArmRun run;
  run.brk = brk;
  expect_gate_fails("the graph arm with layer 0's output scaled by 0.25",
                    [&] { v = decode_graph_gate(model(), report(), run); });
  if (moe_layers(model().fx.config) > 0) {
    EXPECT_FALSE(v.ledger_same) << "the broken graph arm routed every token as eager did: the ledger saw nothing";
  }
}
INSTANTIATE_TEST_SUITE_P(
    Tiny, DecodeGraphCanary,
    ::testing::ValuesIn(testing::gate_cases({gpu_test::fixture_id(Family::Qwen3, DType::Q8_0, false),
                                             gpu_test::fixture_id(Family::Qwen3Next, DType::BF16, false),
                                             gpu_test::fixture_id(Family::Qwen35Moe, DType::NVFP4, false),
                                             gpu_test::fixture_id(Family::GlmDsa, DType::BF16, true),
                                             gpu_test::fixture_id(Family::Glm5Next, DType::BF16, true)})),
    testing::CaseName());

// The re-seat run with a graph arm that skips the re-capture (Break::graph_ignore_reseat: it
// replays on the retired, zeroed allocations): the gate must FAIL, and no re-capture happened.
class DecodeGraphReseatCanary : public DecodeGraphGate {};
TEST_P(DecodeGraphReseatCanary, SkippedRecaptureFails) {
  Loaded& m = model();
  Break brk;
  brk.graph_ignore_reseat = true;
  GraphVerdict v;
  expect_gate_fails("a graph arm that replays its stale graph after a re-seat",
                    [&] { v = decode_graph_gate(m, report(), reseat_run(*m.gpu, m.fx.config, true, brk)); });
  EXPECT_EQ(v.graph.recaptures, 0) << "the canary's graph re-captured: it did not skip the re-capture";
}
INSTANTIATE_TEST_SUITE_P(
    Tiny, DecodeGraphReseatCanary,
    ::testing::ValuesIn(testing::gate_cases({gpu_test::fixture_id(Family::Qwen3, DType::Q8_0, false),
                                             gpu_test::fixture_id(Family::Qwen35, DType::BF16, false),
                                             gpu_test::fixture_id(Family::Qwen35Moe, DType::NVFP4, false),
                                             gpu_test::fixture_id(Family::GlmDsa, DType::BF16, true),
                                             gpu_test::fixture_id(Family::DeepseekV4, DType::BF16, false),
                                             gpu_test::fixture_id(Family::Glm5Next, DType::BF16, true)},
                                            {"recapture"})),
    testing::CaseName());

}  // namespace
}  // namespace memra
