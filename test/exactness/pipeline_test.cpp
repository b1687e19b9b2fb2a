// Gate: Pipeline (GATES.md §3 "Multi-GPU") — does splitting the model into pipeline stages change
// anything a user or a router sees?
//
// A split model (memra/model.h LoadOptions; src/cuda/pipeline.cu) runs each stage's layers by the
// unsplit model's launches on the same values and hands the residual stream over by copies, so
// every result must be the unsplit model's bit for bit. This target is built twice: with both
// stages on the test's one GPU (each on its own stream: the same code path minus peer access;
// labels h100 ...) and over the two GPUs CTest gives a GPUS 2 target (label multi_gpu). On one
// fixture per layer kind (attention, Gated DeltaNet hybrid, MoE, GLM-5's MLA/DSA, DeepSeek-V4's
// hyper-connections), the model split at its automatic point against the same source loaded
// whole on the first device, each with a selection ledger attached:
//   - prime_cache (logits, hidden), 24 decode_step rows eager and 24 replayed from graphs (one per
//     stage), decode_greedy_n, forward_last,
//   - decode_step_batch over 3 sequences at different positions, and decode_step_batch_sampled
//     lean (tokens and the parked device logits),
//   - the MoE ledger (ordered), row for row;
// all BitIdentical. Non-vacuity: the split model has two stages on the devices asked, and
// counted a hand-over in every call. PipelineEverySplit: prime + decode at every split point
// (every boundary between layers: a hand-over right after any layer kind, GLM-5's shared
// indexer selection included). PipelineOptions: explicit splits land where asked, the automatic
// one balances the weight bytes, bad options are errors that name the option.
// Canary (PipelineCanary): the split model with Break::pipeline_drop_wait — the next stage does
// not wait for the hand-over copy, which lands late — must FAIL the bit-identity.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>

#include "exactness/gpu_fixture.h"
#include "memra/engine.h"
#include "memra/error.h"
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

using gpu_test::two_stages;

struct Pair {
  FixtureModel fx;
  std::unique_ptr<Model> whole, split;
};

std::unique_ptr<Pair> load_pair(const std::string& id) {
  auto p = std::make_unique<Pair>();
  p->fx = gpu_test::make_fixture(id);
  Engine& e = gpu_test::gpu_fixture_engine();
  p->whole = std::make_unique<Model>(Model::load(e, *p->fx.source));
  p->split = std::make_unique<Model>(Model::load(e, *p->fx.source, two_stages()));
  return p;
}

// Everything one model gives for the battery of calls below.
struct Results {
  std::vector<std::vector<float>> rows;  // logits / hidden rows, in call order
  std::vector<int32_t> tokens;           // greedy / sampled tokens, in call order
  SelectionLedger ledger;                // ordered
  Counters delta;
};

void add(Results& r, std::vector<float> row) { r.rows.push_back(std::move(row)); }

// prime + 24 eager decode steps + 24 graph steps + greedy_n + forward_last + a batch of 3 +
// a lean sampled batch of 3.
Results battery(Model& m, const ModelConfig& c) {
  SelectionLedger l;
  m.attach_ledger(&l);
  struct Detach {
    Model& m;
    ~Detach() { m.attach_ledger(nullptr); }
  } detach{m};
  const Counters c0 = m.counters();
  Results r;
  const int64_t V = c.n_vocab;
  const std::vector<int32_t> prompt = testing_fixtures::prompt(12, V, 31);
  for (bool graph : {false, true}) {
    Arms a = m.arms();
    a.decode_graph = graph;
    testing::ScopedArms<Model> arm(m, a);
    Cache cache = m.new_cache(64);
    Prime p = m.prime_cache(prompt, cache);
    add(r, p.hidden);
    std::vector<float> row = std::move(p.logits);
    for (int i = 0; i < 24; ++i) {
      const int32_t t = testing::argmax(row);
      r.tokens.push_back(t);
      add(r, std::move(row));
      row = m.decode_step(t, cache).logits;
    }
    add(r, row);
    const std::vector<int32_t> g = m.decode_greedy_n(testing::argmax(row), 8, cache);
    r.tokens.insert(r.tokens.end(), g.begin(), g.end());
  }
  add(r, m.forward_last(prompt));
  // three sequences at positions 12, 5 and 9
  std::vector<Cache> caches;
  for (int64_t n : {12, 5, 9}) {
    caches.push_back(m.new_cache(32));
    m.prime_cache(std::span(prompt).first(static_cast<size_t>(n)), caches.back());
  }
  std::vector<Cache*> cp;
  for (Cache& k : caches) cp.push_back(&k);
  const std::vector<int32_t> toks = {prompt[0], prompt[1], prompt[2]};
  for (std::vector<float>& row : m.decode_step_batch(toks, cp)) add(r, std::move(row));
  const std::vector<std::optional<SampleSpec>> specs = {SampleSpec{0.0f, 1, 0}, std::nullopt, SampleSpec{0.8f, 7, 3}};
  Sampled s = m.decode_step_batch_sampled(toks, cp, specs, /*lean=*/true);
  r.tokens.insert(r.tokens.end(), s.tokens.begin(), s.tokens.end());
  for (std::vector<float>& row : s.logits) add(r, std::move(row));
  add(r, caches[0].last_logits());
  add(r, caches[2].last_logits());
  const Counters c1 = m.counters();
  r.delta.handovers = c1.handovers - c0.handovers;
  r.delta.replays = c1.replays - c0.replays;
  r.ledger = ordered(l);
  return r;
}

struct Verdict {
  bool rows_same = false, tokens_same = false, ledger_same = false;
};

// The gate: the split model's results against the whole model's.
Verdict compare(const Pair& p, const Results& whole, const Results& split, testing::Report& rep) {
  Verdict v;
  std::optional<size_t> first;
  EXPECT_EQ(split.rows.size(), whole.rows.size());
  for (size_t i = 0; i < std::min(whole.rows.size(), split.rows.size()) && !first; ++i)
    if (!::testing::Matches(testing::BitIdentical(whole.rows[i]))(split.rows[i])) first = i;
  v.rows_same = !first && split.rows.size() == whole.rows.size();
  if (first) {
    EXPECT_THAT(split.rows[*first], testing::BitIdentical(whole.rows[*first]))
        << p.fx.id << ": row " << *first << " of the battery differs between the split and the whole model";
  }
  v.tokens_same = split.tokens == whole.tokens;
  EXPECT_EQ(split.tokens, whole.tokens) << p.fx.id << ": tokens differ";
  const std::optional<size_t> sel = first_ledger_difference(whole.ledger, split.ledger);
  v.ledger_same = !sel;
  EXPECT_FALSE(sel.has_value()) << p.fx.id << ": MoE selections differ (whole vs split): "
                                << (sel ? describe_ledger_difference(whole.ledger, split.ledger, *sel) : "");
  rep["fixture"] = p.fx.id;
  rep["first_differing_row"] = first ? nlohmann::json(*first) : nlohmann::json(nullptr);
  rep.figure("rows", static_cast<int64_t>(whole.rows.size()));
  rep.figure("ledger_rows", static_cast<int64_t>(whole.ledger.rows.size()));
  rep.figure("handovers", split.delta.handovers);
  return v;
}

class PipelineGate : public testing::GpuGateTest<Pair> {
 protected:
  int min_devices() const override { return MEMRA_TEST_GPUS; }
  std::unique_ptr<Pair> load_model(const std::string& id) override { return load_pair(id); }
};

std::vector<std::string> pipeline_fixture_ids() {
  return {gpu_test::fixture_id(Family::Qwen3, DType::Q8_0, false),
          gpu_test::fixture_id(Family::Qwen35, DType::BF16, false),
          gpu_test::fixture_id(Family::Qwen35Moe, DType::NVFP4, false),
          gpu_test::fixture_id(Family::GlmDsa, DType::BF16, true),
          gpu_test::fixture_id(Family::DeepseekV4, DType::Q8_0, false)};
}

TEST_P(PipelineGate, SplitIsBitIdenticalToWhole) {
  Pair& p = model();
  const std::vector<StageInfo> st = p.split->stages();
  ASSERT_EQ(st.size(), 2u) << p.fx.id;
  const std::vector<int> want = two_stages().devices;
  EXPECT_EQ(st[0].device, want[0]);
  EXPECT_EQ(st[1].device, want[1]);
  EXPECT_EQ(st[0].first_layer, 0);
  EXPECT_EQ(st[0].end_layer, st[1].first_layer);
  EXPECT_EQ(st[1].end_layer, p.fx.config.n_layer);
  EXPECT_EQ(p.split->weight_bytes(), st[0].weight_bytes + st[1].weight_bytes);
  const Results w = battery(*p.whole, p.fx.config);
  const Results s = battery(*p.split, p.fx.config);
  compare(p, w, s, report());
  EXPECT_EQ(w.delta.handovers, 0) << "the whole model handed over";
  // every call hands over once: 2 primes + 48 decode steps + 2 x 8 greedy + forward_last + 3
  // primes + 2 batched steps
  EXPECT_EQ(s.delta.handovers, 2 + 48 + 16 + 1 + 3 + 2) << p.fx.id << ": a call ran without its hand-over";
  EXPECT_EQ(s.delta.replays, 2 * w.delta.replays) << p.fx.id << ": one graph per stage per graph step";
  report().figure("split_at", st[1].first_layer);
}
INSTANTIATE_TEST_SUITE_P(Tiny, PipelineGate, ::testing::ValuesIn(testing::gate_cases(pipeline_fixture_ids())),
                         testing::CaseName());

// Every split point: prime + 6 decode steps (eager and graph) of the model split after layer
// b - 1, for every b in [1, n_layer), against the whole model.
class PipelineEverySplit : public PipelineGate {};
TEST_P(PipelineEverySplit, EveryBoundaryBitIdentical) {
  Pair& p = model();
  const ModelConfig& c = p.fx.config;
  const std::vector<int32_t> prompt = testing_fixtures::prompt(10, c.n_vocab, 5);
  auto run = [&](Model& m) {
    std::vector<std::vector<float>> rows;
    for (bool graph : {false, true}) {
      Arms a = m.arms();
      a.decode_graph = graph;
      testing::ScopedArms<Model> arm(m, a);
      Cache cache = m.new_cache(32);
      std::vector<float> row = m.prime_cache(prompt, cache).logits;
      for (int i = 0; i < 6; ++i) {
        const int32_t t = testing::argmax(row);
        rows.push_back(std::move(row));
        row = m.decode_step(t, cache).logits;
      }
      rows.push_back(std::move(row));
    }
    return rows;
  };
  const auto whole = run(*p.whole);
  for (int64_t b = 1; b < c.n_layer; ++b) {
    Model split = Model::load(gpu_test::gpu_fixture_engine(), *p.fx.source, two_stages({b}));
    const auto rows = run(split);
    ASSERT_EQ(rows.size(), whole.size());
    for (size_t i = 0; i < rows.size(); ++i) {
      ASSERT_THAT(rows[i], testing::BitIdentical(whole[i])) << p.fx.id << ": split at layer " << b << ", row " << i;
    }
  }
  report().figure("split_points", c.n_layer - 1);
}
INSTANTIATE_TEST_SUITE_P(Tiny, PipelineEverySplit, ::testing::ValuesIn(testing::gate_cases(pipeline_fixture_ids())),
                         testing::CaseName());

// The split options: where the stages land, and the errors.
class PipelineOptions : public testing::GpuGateFixture<Pair> {
 protected:
  int min_devices() const override { return MEMRA_TEST_GPUS; }
  std::unique_ptr<Pair> load_model(const std::string& id) override { return load_pair(id); }
};
TEST_F(PipelineOptions, SplitsWhereAskedAndBalancesBytes) {
  const FixtureModel fx = gpu_test::make_fixture(gpu_test::fixture_id(Family::Qwen35, DType::Q8_0, false));
  Engine& e = gpu_test::gpu_fixture_engine();
  const int64_t L = fx.config.n_layer;
  ASSERT_GE(L, 3);
  const Model asked = Model::load(e, *fx.source, two_stages({L - 1}));
  EXPECT_EQ(asked.stages()[0].end_layer, L - 1);
  EXPECT_EQ(asked.stages()[1].first_layer, L - 1);
  // automatic: no other boundary has stages closer in bytes (embedding on the first, lm_head on
  // the last: what the stages hold)
  const Model autos = Model::load(e, *fx.source, two_stages());
  const int64_t gap = std::abs(autos.stages()[0].weight_bytes - autos.stages()[1].weight_bytes);
  for (int64_t b = 1; b < L; ++b) {
    const Model m = Model::load(e, *fx.source, two_stages({b}));
    EXPECT_LE(gap, std::abs(m.stages()[0].weight_bytes - m.stages()[1].weight_bytes))
        << "the automatic split (at " << autos.stages()[1].first_layer << ") is less balanced than a split at " << b;
  }
}
TEST_F(PipelineOptions, BadOptionsAreErrors) {
  const FixtureModel fx = gpu_test::make_fixture(gpu_test::fixture_id(Family::Qwen3, DType::Q8_0, false));
  Engine& e = gpu_test::gpu_fixture_engine();
  const int64_t L = fx.config.n_layer;
  const int d = e.device();
  using ::testing::HasSubstr;
  auto ThrowsError = [](auto m) { return ::testing::ThrowsMessage<Error>(m); };
  EXPECT_THAT([&] { Model::load(e, *fx.source, two_stages({0})); }, ThrowsError(HasSubstr("split[0] = 0")));
  EXPECT_THAT([&] { Model::load(e, *fx.source, two_stages({L})); }, ThrowsError(HasSubstr("ascending first layers")));
  EXPECT_THAT([&] { Model::load(e, *fx.source, two_stages({1, 2})); }, ThrowsError(HasSubstr("split has 2 entries")));
  LoadOptions many;
  many.devices.assign(static_cast<size_t>(L + 1), d);
  EXPECT_THAT([&] { Model::load(e, *fx.source, many); },
              ThrowsError(HasSubstr("every stage holds at least one layer")));
  LoadOptions other;
  other.devices = {d + 1, d};
  EXPECT_THAT([&] { Model::load(e, *fx.source, other); }, ThrowsError(HasSubstr("must be the engine's device")));
  LoadOptions missing;
  missing.devices = {d, device_count() + 3};
  EXPECT_THAT([&] { Model::load(e, *fx.source, missing); }, ThrowsError(HasSubstr("does not exist")));
}

// --- canary (suite ends in Canary: label canary) -----------------------------------------------------

// The hand-over without its event wait: the next stage reads its input before the copy lands
// (the handing stage stalls before copying), so the split model's rows must differ.
class PipelineCanary : public PipelineGate {};
TEST_P(PipelineCanary, DroppedHandoverWaitFails) {
  Pair& p = model();
  const Results w = battery(*p.whole, p.fx.config);
  Break brk;
  brk.pipeline_drop_wait = true;
  p.split->set_break(brk);
  struct Restore {
    Model& m;
    ~Restore() { m.set_break(Break{}); }
  } restore{*p.split};
  Verdict v;
  expect_gate_fails("a split model whose next stage does not wait for the hand-over copy", [&] {
    const Results s = battery(*p.split, p.fx.config);
    v = compare(p, w, s, report());
  });
  EXPECT_FALSE(v.rows_same) << "the race did not show in the logits";
}
INSTANTIATE_TEST_SUITE_P(
    Tiny, PipelineCanary,
    ::testing::ValuesIn(testing::gate_cases({gpu_test::fixture_id(Family::Qwen3, DType::Q8_0, false),
                                             gpu_test::fixture_id(Family::Qwen35Moe, DType::NVFP4, false)})),
    testing::CaseName());

}  // namespace
}  // namespace memra
