// Gate DecodeBatch (../shared/GATES.md §2, seed decode_batch_gate.rs): the batched decode step
// (Model::decode_step_batch) against the one-sequence step, on tiny fixtures of every family
// (GLM-5's prompts run past its DSA top-k, so each sequence's selection is its own; GLM-5's
// hybrid adds KDA state and the pooled selection per sequence).
//
//   gate1 strict  decode_step_batch at B = 1 with b1_fast off (so the batched body runs, not
//                 decode_step) vs decode_step, same cache history: logits BitIdentical at every
//                 step, under the equalised arms (DESIGN.md law 4) and under the default arms
//                 (on this engine the batched body at B = 1 launches decode_step's kernels).
//   gate1 config  default arms, 6 prompt draws, the two greedy streams side by side: FAIL iff
//                 >= 4 draws diverge before step 3. Plumbing bugs (a wrong token fed, K/V at the
//                 wrong position) diverge at steps 0-2 on every draw; floating-point composition
//                 drift between two configs, were there any, shows on few draws and later.
//   gate2         B = 2..8 and the tile edges 15 / 16 / 17 (the mat-vec's 8- and 16-vector tiles),
//                 prompts of uneven lengths, vs isolated runs of the same batched body at B = 1:
//                 every sequence's logits BitIdentical at every step (law 2: batch-mates, row
//                 and B change no bit).
//   gate2 graphed the same with the batched steps replayed from the graph captured per B
//                 (decode_graph arm): every call a replay (batch_replays), the same bits.
//   pair32        gate1 strict and gate2 (eager, graphed) under nvfp4_dot = pair32 on the NVFP4
//                 fixtures (DecodeBatchPair32).
// Non-vacuity: the model's batch_steps counter must have counted every batched call (a gate
// whose batched body never ran fails), and gate2's batched_cores every attention, GDN, KDA and
// MLA layer of every call (each took all its sequences in one launch per kernel). Cases are GateCases named by fixture model id
// (Tiny/DecodeBatch.Gate2BatchMatesChangeNoBit/qwen35_nvfp4_gguf), one load per suite, and every
// case writes its JSON report (memra/testing/gate.h).
//   gate3a        the device's greedy token == the host argmax of the same returned row.
//   gate3b        sampled draws (temperature 0.7, seed = sequence, counter = step) at B = N ==
//                 the same specs' draws at B = 1, and == memra/sampling.h's host draw on the row.
//   gate3c        lean steps: the same tokens as full steps, sampled rows' parked device logits
//                 bit-identical to the full step's host rows, unsampled rows returned in full.
//   wide          gate1 strict and gate2 (eager, graphed; B = 2, 5, 8, 9, 16, 17, 32, 33) on wide
//                 fixtures (the unit preset at 4096 / 2048 hidden, DecodeBatchWide), whose rows
//                 reach the bulk-fed mat-vec tiles; gate2 there must count bulk-tile launches
//                 (Counters::bulk_tile_launches) on a device that has them.
// Canaries (DecodeBatchCanary): config gate1 with the batched lane fed one wrong token at
// step 1 must FAIL; gate2 with two sequences' tokens swapped at one step must FAIL; gate3b with
// the batch drawn at counter + 1 must FAIL. DecodeBatchWideCanary: gate2 on a wide fixture with
// the bulk tiles' tree reordered for a tile's vectors 8 and up (Break::bulk_tile_reorder) must
// FAIL.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "exactness/gpu_fixture.h"
#include "memra/config.h"
#include "memra/engine.h"
#include "memra/error.h"
#include "memra/model.h"
#include "memra/oracle.h"
#include "memra/sampling.h"
#include "memra/testing/gate.h"
#include "memra/testing/gpu.h"
#include "memra/testing/matchers.h"
#include "memra/testing/records.h"
#include "memra/testing/report.h"

namespace memra {
namespace {

using gpu_test::FixtureModel;

constexpr int kSteps = 8;          // decode steps per stream
constexpr int kDraws = 6;          // config gate1's prompt draws (GATES.md: FAIL iff >= 4 diverge
                                   // before step 3: testing::FractionRule's defaults)
const int kBatchSizes[] = {2, 3, 4, 5, 6, 7, 8, 15, 16, 17};

// The gate fixtures' ModelCache holds each model: one load per suite.
using Loaded = gpu_test::GpuFixture;
std::unique_ptr<Loaded> load_fixture(const std::string& id) { return gpu_test::load_gpu_fixture(id); }

int32_t argmax(const std::vector<float>& l) { return oracle::top_k(l, 1).at(0).first; }
// The gates count differing rows before they assert; a row differs as BitIdentical says.
bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return ::testing::Matches(testing::BitIdentical(b))(a);
}

// Sequence i's prompt: distinct tokens and an uneven length (so positions differ in a batch).
std::vector<int32_t> seq_prompt(const Loaded& m, int i, uint32_t draw = 0) {
  return testing_fixtures::prompt(10 + 3 * i, m.fx.config.n_vocab, 100 + 7 * draw + static_cast<uint32_t>(i));
}

// A cache primed with all of the prompt but its last token (the first one decode feeds).
Cache primed(Model& m, const std::vector<int32_t>& p) {
  Cache c = m.new_cache(static_cast<int64_t>(p.size()) + kSteps + 1);
  m.prime_cache(std::span<const int32_t>(p).first(p.size() - 1), c);
  return c;
}

// Sequences 0..B-1 as one batch: each cache primed with its seq_prompt but the last token, which
// is the sequence's first fed token. Movable, not copyable: `ptrs` point into `caches` (a
// vector's move keeps its elements where they are, a copy would not).
struct PrimedBatch {
  std::vector<Cache> caches;
  std::vector<Cache*> ptrs;   // what decode_step_batch takes
  std::vector<int32_t> toks;  // the tokens the next step feeds
  PrimedBatch() = default;
  PrimedBatch(PrimedBatch&&) = default;
  PrimedBatch(const PrimedBatch&) = delete;
};
PrimedBatch primed_batch(Loaded& m, int B) {
  PrimedBatch b;
  for (int i = 0; i < B; ++i) {
    const std::vector<int32_t> p = seq_prompt(m, i);
    b.caches.push_back(primed(*m.gpu, p));
    b.toks.push_back(p.back());
  }
  for (Cache& c : b.caches) b.ptrs.push_back(&c);
  return b;
}

Arms with_b1_fast_off(Arms a) {
  a.b1_fast = false;
  return a;
}

// --- gate1 ---------------------------------------------------------------------------------------

struct Gate1Draw {
  int diverged_at = -1;  // first step whose greedy tokens differ, -1: none
  int bit_diffs = 0;     // steps whose logits differ in any bit
  int first_bit_diff = -1;
};

// decode_step and decode_step_batch at B = 1 side by side from the same prompt, each fed its own
// greedy token. `wrong_token`: the batched lane is fed token - 1 at step 1 (the canary).
Gate1Draw gate1_draw(Loaded& m, uint32_t draw, bool wrong_token) {
  const std::vector<int32_t> p = seq_prompt(m, 0, draw);
  Cache ref = primed(*m.gpu, p), bat = primed(*m.gpu, p);
  int32_t t_ref = p.back(), t_bat = p.back();
  Gate1Draw d;
  for (int s = 0; s < kSteps; ++s) {
    if (wrong_token && s == 1) t_bat = t_bat == 0 ? 1 : t_bat - 1;
    const std::vector<float> l_ref = m.gpu->decode_step(t_ref, ref).logits;
    Cache* one[1] = {&bat};
    const std::vector<float> l_bat = m.gpu->decode_step_batch(std::span<const int32_t>(&t_bat, 1), one).at(0);
    if (!same_bits(l_ref, l_bat) && d.bit_diffs++ == 0) d.first_bit_diff = s;
    t_ref = argmax(l_ref);
    t_bat = argmax(l_bat);
    if (t_ref != t_bat) {
      d.diverged_at = s;
      break;
    }
  }
  return d;
}

// Strict: one draw, logits bit-identical at every step, under `arms` with b1_fast off.
[[maybe_unused]] void gate1_strict(Loaded& m, const Arms& arms, const char* arms_name, testing::Report& rep) {
  testing::ScopedArms<Model> arm(*m.gpu, with_b1_fast_off(arms));
  const int64_t before = m.gpu->counters().batch_steps;
  const Gate1Draw d = gate1_draw(m, 0, false);
  const int64_t ran = m.gpu->counters().batch_steps - before;
  rep["fixture"] = m.fx.id;
  rep["mode"] = std::string("strict, ") + arms_name;
  rep.set_arms("batched", m.gpu->arms());
  rep.figure("bit_diff_steps", d.bit_diffs);
  rep.figure("first_bit_diff", d.first_bit_diff);
  rep.figure("diverged_at", d.diverged_at);
  rep.figure("batched_calls", ran);
  EXPECT_EQ(ran, kSteps) << m.fx.id << " (" << arms_name << "): the batched body did not serve every step";
  EXPECT_EQ(d.bit_diffs, 0) << m.fx.id << " (" << arms_name << "): B=1 batched logits differ from decode_step, first at step "
                            << d.first_bit_diff;
  EXPECT_EQ(d.diverged_at, -1) << m.fx.id << " (" << arms_name << "): greedy streams diverge at step " << d.diverged_at;
}

// Config: kDraws draws under the default arms (b1_fast off, so the batched body is what runs).
void gate1_config(Loaded& m, bool wrong_token, testing::Report& rep) {
  testing::ScopedArms<Model> arm(*m.gpu, with_b1_fast_off(m.gpu->arms()));
  const testing::FractionRule rule;
  std::vector<std::optional<size_t>> diverged;
  nlohmann::json draws = nlohmann::json::array();
  for (int g = 0; g < kDraws; ++g) {
    const Gate1Draw d = gate1_draw(m, static_cast<uint32_t>(g), wrong_token);
    diverged.push_back(d.diverged_at < 0 ? std::nullopt : std::optional<size_t>(static_cast<size_t>(d.diverged_at)));
    draws.push_back({{"draw", g}, {"diverged_at", d.diverged_at}, {"bit_diff_steps", d.bit_diffs}});
  }
  const testing::FractionVerdict v = testing::apply_fraction_rule(diverged, rule);
  const std::string why = std::to_string(v.early) + " of " + std::to_string(v.draws) + " draws diverge before step " +
                          std::to_string(rule.early_step);
  rep["fixture"] = m.fx.id;
  rep["mode"] = "config";
  rep["draws"] = draws;
  rep["fraction_rule"] = testing::to_json(v);
  rep["fraction_rule"]["early_step"] = rule.early_step;
  rep["fraction_rule"]["says"] = why;
  rep.set_arms("batched", m.gpu->arms());
  rep.figure("early_draws", v.early);
  std::printf("[gate1 config] %s: %s\n", m.fx.id.c_str(), why.c_str());
  EXPECT_FALSE(v.fail) << m.fx.id << ": " << why << " (the plumbing class)";
}

// --- gate2 ---------------------------------------------------------------------------------------

// Each sequence's isolated stream through the batched body at B = 1: logits per step.
using Stream = std::vector<std::vector<float>>;
std::vector<Stream> isolated_streams(Loaded& m, int n) {
  std::vector<Stream> out;
  for (int i = 0; i < n; ++i) {
    const std::vector<int32_t> p = seq_prompt(m, i);
    Cache c = primed(*m.gpu, p);
    Cache* one[1] = {&c};
    int32_t t = p.back();
    Stream s;
    for (int k = 0; k < kSteps; ++k) {
      s.push_back(m.gpu->decode_step_batch(std::span<const int32_t>(&t, 1), one).at(0));
      t = argmax(s.back());
    }
    out.push_back(std::move(s));
  }
  return out;
}

// B sequences in one batch against their isolated streams. `swap_at`: at that step the tokens of
// sequences 0 and 1 are swapped (the canary's plumbing bug). Returns how many (sequence, step)
// rows differ; the first goes to `entry` and through BitIdentical's explanation.
int gate2_batch(Loaded& m, const std::vector<Stream>& ref, int B, int swap_at, nlohmann::json& entry) {
  PrimedBatch b = primed_batch(m, B);
  std::vector<int32_t>& toks = b.toks;
  int bad = 0;
  for (int k = 0; k < kSteps; ++k) {
    if (k == swap_at) std::swap(toks[0], toks[1]);
    const std::vector<std::vector<float>> rows = m.gpu->decode_step_batch(toks, b.ptrs);
    for (int i = 0; i < B; ++i) {
      const std::vector<float>& want = ref[static_cast<size_t>(i)][static_cast<size_t>(k)];
      if (!same_bits(rows[static_cast<size_t>(i)], want)) {
        if (bad++ == 0) {
          entry["first_mismatch"] = {{"sequence", i}, {"step", k}};
          EXPECT_THAT(rows[static_cast<size_t>(i)], testing::BitIdentical(want))
              << m.fx.id << ": B=" << B << " sequence " << i << " step " << k << " (reported once per batch)";
        }
      }
      toks[static_cast<size_t>(i)] = argmax(rows[static_cast<size_t>(i)]);
    }
  }
  return bad;
}

// The model's layers whose core a batched step takes for every sequence in one launch per kernel
// (Counters::batched_cores): all but DeepSeek-V4's.
int64_t one_launch_core_layers(const ModelConfig& c) {
  int64_t n = 0;
  for (LayerKind k : c.layer_kind) n += k != LayerKind::Dsv4;
  return n;
}

// graph: the batched steps (B >= 2) replay the graph captured for B (decode_graph arm); the
// isolated reference runs eager either way (B = 1 has no batch graph). `sizes`: the batch sizes;
// `bulk_tiles`: the run must have reached the bulk-fed mat-vec tiles (the wide fixtures on a
// device that has them), else it would pass without testing them.
void gate2(Loaded& m, bool swap_tokens, testing::Report& rep, bool graph = false,
           std::span<const int> sizes = kBatchSizes, bool bulk_tiles = false) {
  Arms arms = with_b1_fast_off(m.gpu->arms());
  arms.decode_graph = graph;
  testing::ScopedArms<Model> arm(*m.gpu, arms);
  const std::vector<Stream> ref = isolated_streams(m, *std::max_element(sizes.begin(), sizes.end()));
  const Counters c0 = m.gpu->counters();
  const int64_t before = c0.batch_steps, cores_before = c0.batched_cores;
  rep["fixture"] = m.fx.id;
  nlohmann::json per_b = nlohmann::json::array();
  int bad = 0, calls = 0;
  std::string sizes_text;
  for (int B : sizes) {
    sizes_text += (sizes_text.empty() ? "" : ", ") + std::to_string(B);
    nlohmann::json entry = {{"B", B}};
    const int b = gate2_batch(m, ref, B, swap_tokens ? 2 : -1, entry);
    entry["mismatching_rows"] = b;
    per_b.push_back(entry);
    bad += b;
    calls += kSteps;
  }
  const int64_t ran = m.gpu->counters().batch_steps - before;
  const int64_t cores = m.gpu->counters().batched_cores - cores_before;
  const int64_t replays = m.gpu->counters().batch_replays - c0.batch_replays;
  rep["batches"] = per_b;
  rep.set_arms("batched", m.gpu->arms());
  rep.figure("mismatching_rows", bad);
  rep.figure("batched_calls", ran);
  rep.figure("batched_cores", cores);
  rep.figure("batch_replays", replays);
  rep.figure("captures", m.gpu->counters().captures - c0.captures);
  const int64_t bulk = m.gpu->counters().bulk_tile_launches - c0.bulk_tile_launches;
  rep.figure("bulk_tile_launches", bulk);
  std::printf("[gate2] %s: %d batched calls over B in {%s}, %d rows differ, %lld bulk-tile launches\n", m.fx.id.c_str(),
              static_cast<int>(ran), sizes_text.c_str(), bad, static_cast<long long>(bulk));
  if (bulk_tiles) { EXPECT_GT(bulk, 0) << m.fx.id << ": vacuous: no mat-vec took the bulk-fed tiles"; }
  EXPECT_EQ(ran, calls) << m.fx.id << ": the batched body did not serve every call";
  // every call at B >= 2: each attention / GDN / KDA / MLA layer in one launch per kernel for all
  // sequences (else the gate compared the per-sequence path with itself there)
  EXPECT_EQ(cores, one_launch_core_layers(m.gpu->config()) * calls)
      << m.fx.id << ": a batched step took a layer's sequences one launch at a time";
  // the graph arm serves every call of a model whose every layer batches (not DeepSeek-V4's)
  const bool graphable = graph && one_launch_core_layers(m.gpu->config()) == m.gpu->config().n_layer;
  EXPECT_EQ(replays, graphable ? calls : 0) << m.fx.id << ": batched steps served by a graph";
  EXPECT_EQ(bad, 0) << m.fx.id << ": batch-mates changed a sequence's logits";
}

// --- gate3: selection on the device ---------------------------------------------------------------

using Specs = std::vector<std::optional<SampleSpec>>;
constexpr int kSampledB = 5;

// gate3a: the device's greedy token is the host argmax (lowest index on ties) of the same returned
// row, every row, every step (B = kSampledB, full logits back).
[[maybe_unused]] void gate3a(Loaded& m, testing::Report& rep) {
  testing::ScopedArms<Model> arm(*m.gpu, with_b1_fast_off(m.gpu->arms()));
  PrimedBatch b = primed_batch(m, kSampledB);
  std::vector<int32_t>& toks = b.toks;
  const Specs greedy(kSampledB, SampleSpec{});
  int bad = 0;
  for (int k = 0; k < kSteps; ++k) {
    const Sampled o = m.gpu->decode_step_batch_sampled(toks, b.ptrs, greedy, false);
    for (int i = 0; i < kSampledB; ++i) {
      const int32_t host = argmax_lowest(o.logits[static_cast<size_t>(i)]);
      if (o.tokens[static_cast<size_t>(i)] != host && bad++ == 0)
        ADD_FAILURE() << m.fx.id << ": sequence " << i << " step " << k << ": device greedy "
                      << o.tokens[static_cast<size_t>(i)] << ", host argmax " << host;
      toks[static_cast<size_t>(i)] = o.tokens[static_cast<size_t>(i)];
    }
  }
  rep["fixture"] = m.fx.id;
  rep.set_arms("batched", m.gpu->arms());
  rep.figure("rows", kSampledB * kSteps);
  rep.figure("device_vs_host_mismatches", bad);
  EXPECT_EQ(bad, 0);
}

// Sequence i's sampling spec at step k: temperature 0.7, seed i, counter k (GATES.md gate3b).
SampleSpec spec_of(int i, int k) { return SampleSpec{0.7f, static_cast<uint64_t>(i), static_cast<uint64_t>(k)}; }

// gate3b: per-sequence draws at B = N equal the same specs' draws at B = 1, each stream fed its own
// draws; the B = 1 reference also checks the device draw against the host contract
// (memra/sampling.h sample_token) on the returned row. `shift_counter`: the batched run draws
// with counter + 1 (the canary's plumbing bug).
void gate3b(Loaded& m, bool shift_counter, testing::Report& rep) {
  testing::ScopedArms<Model> arm(*m.gpu, with_b1_fast_off(m.gpu->arms()));
  std::vector<std::vector<int32_t>> ref(kSampledB);
  int host_mismatch = 0;
  for (int i = 0; i < kSampledB; ++i) {
    const std::vector<int32_t> p = seq_prompt(m, i);
    Cache c = primed(*m.gpu, p);
    Cache* one[1] = {&c};
    int32_t t = p.back();
    for (int k = 0; k < kSteps; ++k) {
      const Specs sp = {spec_of(i, k)};
      const Sampled o = m.gpu->decode_step_batch_sampled(std::span<const int32_t>(&t, 1), one, sp, false);
      const int32_t host = sample_token(o.logits.at(0), *sp[0]);
      if (host != o.tokens[0]) ++host_mismatch;
      ref[static_cast<size_t>(i)].push_back(t = o.tokens[0]);
    }
  }
  PrimedBatch b = primed_batch(m, kSampledB);
  std::vector<int32_t>& toks = b.toks;
  int bad = 0, distinct = 0;
  for (int k = 0; k < kSteps; ++k) {
    Specs sp;
    for (int i = 0; i < kSampledB; ++i) sp.push_back(spec_of(i, k));
    if (shift_counter)
      for (auto& spec : sp) spec->counter += 1;
    const Sampled o = m.gpu->decode_step_batch_sampled(toks, b.ptrs, sp, true);
    for (int i = 0; i < kSampledB; ++i) {
      const int32_t want = ref[static_cast<size_t>(i)][static_cast<size_t>(k)];
      if (o.tokens[static_cast<size_t>(i)] != want && bad++ == 0)
        ADD_FAILURE() << m.fx.id << ": sequence " << i << " step " << k << ": drew " << o.tokens[static_cast<size_t>(i)]
                      << " in the batch, " << want << " alone";
      toks[static_cast<size_t>(i)] = o.tokens[static_cast<size_t>(i)];
    }
    for (int i = 0; i < kSampledB; ++i)  // the draws are not just greedy ones
      distinct += o.tokens[static_cast<size_t>(i)] != argmax_lowest(b.caches[static_cast<size_t>(i)].last_logits());
  }
  rep["fixture"] = m.fx.id;
  rep.set_arms("batched", m.gpu->arms());
  rep["sampling"] = {{"temperature", spec_of(0, 0).temperature}, {"counter_shift", shift_counter ? 1 : 0}};
  rep.figure("draws", kSampledB * kSteps);
  rep.figure("batch_vs_isolated_mismatches", bad);
  rep.figure("device_vs_host_mismatches", host_mismatch);
  rep.figure("draws_off_argmax", distinct);
  std::printf("[gate3b] %s: %d of %d batched draws differ from the isolated ones; %d device draws differ from the host "
              "contract; %d of them off the row's argmax\n",
              m.fx.id.c_str(), bad, kSampledB * kSteps, host_mismatch, distinct);
  EXPECT_EQ(bad, 0) << m.fx.id << ": batch-mates changed a sequence's draw";
  EXPECT_EQ(host_mismatch, 0) << m.fx.id << ": device draws differ from memra/sampling.h's on the same rows";
  if (!shift_counter) { EXPECT_GT(distinct, 0) << m.fx.id << ": temperature 0.7 never left the argmax (vacuous)"; }
}

// gate3c: a lean step gives the same tokens as the full step; a sampled row's parked device logits
// are bit-identical to the full step's host row; a row without a spec comes back in full, the
// same. Mixed specs: sampled, greedy, none, sampled hotter.
[[maybe_unused]] void gate3c(Loaded& m, testing::Report& rep) {
  testing::ScopedArms<Model> arm(*m.gpu, with_b1_fast_off(m.gpu->arms()));
  constexpr int B = 4;
  PrimedBatch full = primed_batch(m, B), lean = primed_batch(m, B);
  std::vector<Cache>& full_c = full.caches;
  std::vector<Cache>& lean_c = lean.caches;
  std::vector<int32_t>& toks = full.toks;  // both batches feed these
  int token_steps = 0, row_diffs = 0;  // for the report; the EXPECTs below are the verdict
  for (int k = 0; k < kSteps; ++k) {
    const Specs sp = {SampleSpec{0.7f, 5, static_cast<uint64_t>(k)}, SampleSpec{}, std::nullopt,
                      SampleSpec{1.3f, 9, static_cast<uint64_t>(k)}};
    const Sampled f = m.gpu->decode_step_batch_sampled(toks, full.ptrs, sp, false);
    const Sampled l = m.gpu->decode_step_batch_sampled(toks, lean.ptrs, sp, true);
    token_steps += l.tokens != f.tokens;
    EXPECT_EQ(l.tokens, f.tokens) << m.fx.id << " step " << k;
    for (int i = 0; i < B; ++i) {
      const size_t b = static_cast<size_t>(i);
      if (sp[b]) {
        const std::vector<float> parked = lean_c[b].last_logits();
        row_diffs += !same_bits(parked, f.logits[b]);
        EXPECT_TRUE(l.logits[b].empty()) << "a lean sampled row came back to the host";
        EXPECT_THAT(parked, testing::BitIdentical(f.logits[b])) << m.fx.id << " row " << i << " step " << k;
        EXPECT_TRUE(full_c[b].last_logits().empty()) << "a full step left logits parked";
      } else {
        row_diffs += !same_bits(l.logits[b], f.logits[b]);
        EXPECT_EQ(l.tokens[b], -1);
        EXPECT_THAT(l.logits[b], testing::BitIdentical(f.logits[b])) << m.fx.id << " row " << i << " step " << k;
      }
    }
    for (int i = 0; i < B; ++i)
      toks[static_cast<size_t>(i)] = sp[static_cast<size_t>(i)] ? f.tokens[static_cast<size_t>(i)]
                                                                 : argmax_lowest(f.logits[static_cast<size_t>(i)]);
  }
  rep["fixture"] = m.fx.id;
  rep.set_arms("batched", m.gpu->arms());
  rep["specs"] = "row 0 sampled (0.7), row 1 greedy, row 2 none, row 3 sampled (1.3)";
  rep.figure("token_mismatch_steps", token_steps);
  rep.figure("lean_row_mismatches", row_diffs);
  // any other step of the cache drops the parked row
  m.gpu->decode_step(toks[0], lean_c[0]);
  EXPECT_TRUE(lean_c[0].last_logits().empty());
}

// --- cases ---------------------------------------------------------------------------------------

// Every family, attention-only / GDN hybrids / MoE, the quantised and a float lm_head.
const std::vector<std::string> kFixtures = {gpu_test::fixture_id(Family::Qwen3, DType::Q8_0, false),
                                            gpu_test::fixture_id(Family::Qwen3Next, DType::BF16, false),
                                            gpu_test::fixture_id(Family::Qwen35, DType::NVFP4, false),
                                            gpu_test::fixture_id(Family::Qwen35Moe, DType::NVFP4, false),
                                            gpu_test::fixture_id(Family::Qwen35, DType::F32, false),
                                            gpu_test::fixture_id(Family::GlmDsa, DType::BF16, true),
                                            gpu_test::fixture_id(Family::GlmDsa, DType::NVFP4, true),
                                            gpu_test::fixture_id(Family::GlmDsa, DType::Q8_0, false),
                                            gpu_test::fixture_id(Family::DeepseekV4, DType::Q8_0, false),
                                            gpu_test::fixture_id(Family::DeepseekV4, DType::BF16, true),
                                            gpu_test::fixture_id(Family::Glm5Next, DType::Q8_0, true),
                                            gpu_test::fixture_id(Family::Glm5Next, DType::BF16, true)};

// One fixture model per case (GateCase::model is its id).
class DecodeBatch : public testing::GpuGateTest<Loaded> {
 protected:
  std::unique_ptr<Loaded> load_model(const std::string& id) override { return load_fixture(id); }
};

// The API's cases, on fixture models they name.
class DecodeBatchApi : public testing::GpuGateFixture<Loaded> {
 protected:
  std::unique_ptr<Loaded> load_model(const std::string& id) override { return load_fixture(id); }
  Loaded& loaded(Family f, DType t) { return model(gpu_test::fixture_id(f, t, false)); }
};

TEST_P(DecodeBatch, Gate1StrictEqualisedArms) { gate1_strict(model(), Arms::equalised(), "equalised arms", report()); }
TEST_P(DecodeBatch, Gate1StrictDefaultArms) { gate1_strict(model(), Arms{}, "default arms", report()); }
TEST_P(DecodeBatch, Gate1Config) { gate1_config(model(), false, report()); }
TEST_P(DecodeBatch, Gate2BatchMatesChangeNoBit) { gate2(model(), false, report()); }
TEST_P(DecodeBatch, Gate2GraphedStepsChangeNoBit) { gate2(model(), false, report(), true); }
TEST_P(DecodeBatch, Gate3aDeviceGreedyIsHostArgmax) { gate3a(model(), report()); }
TEST_P(DecodeBatch, Gate3bSampledDrawsIgnoreBatchMates) { gate3b(model(), false, report()); }
TEST_P(DecodeBatch, Gate3cLeanStepParksTheSameLogits) { gate3c(model(), report()); }
INSTANTIATE_TEST_SUITE_P(Tiny, DecodeBatch, ::testing::ValuesIn(testing::gate_cases(kFixtures)), testing::CaseName());

// The pair32 NVFP4 dot (Arms::nvfp4_dot) on the NVFP4 fixtures: its chains keep gate1's B = 1
// identity and law 2 (batch-mates change no bit), eager and graphed: the streamed rows (B <= 4)
// and the tensor-core tiles (B >= 5) under the pair32 contract.
class DecodeBatchPair32 : public DecodeBatch {
 protected:
  static Arms pair32(Arms a) {
    a.nvfp4_dot = Nvfp4Dot::pair32;
    return a;
  }
  void gate2_pair32(bool graph) {
    testing::ScopedArms<Model> arm(*model().gpu, pair32(model().gpu->arms()));
    const int64_t before = model().gpu->counters().nvfp4_pair32_launches;
    gate2(model(), false, report(), graph);
    EXPECT_GT(model().gpu->counters().nvfp4_pair32_launches, before) << model().fx.id << ": vacuous: pair32 never ran";
  }
};
TEST_P(DecodeBatchPair32, Gate1Strict) { gate1_strict(model(), pair32(Arms{}), "pair32 arms", report()); }
TEST_P(DecodeBatchPair32, Gate2BatchMatesChangeNoBit) { gate2_pair32(false); }
TEST_P(DecodeBatchPair32, Gate2GraphedStepsChangeNoBit) { gate2_pair32(true); }
INSTANTIATE_TEST_SUITE_P(
    Tiny, DecodeBatchPair32,
    ::testing::ValuesIn(testing::gate_cases({gpu_test::fixture_id(Family::Qwen35, DType::NVFP4, false),
                                             gpu_test::fixture_id(Family::Qwen35Moe, DType::NVFP4, false),
                                             gpu_test::fixture_id(Family::GlmDsa, DType::NVFP4, true)})),
    testing::CaseName());

// Wide fixtures: the unit preset at a benchmark shape's hidden width (gpu_fixture.h fixture_id
// "-d<width>"). The tiny fixtures' rows (64 and 96 values) never reach the bulk-fed mat-vec tiles,
// which take rows of 4 steps or more (4096 Q8_0 values, 2048 NVFP4) in batches of more than 4
// sequences (docs/gpu.md); these fixtures' projections and lm_head do. Their 4096-token
// vocabulary gives the lm_head 256 row tiles, more than a GPU's SMs: the persistent grid walks
// several items per block, its ring running across them. Batch sizes: the 8-, 16- and 32-vector
// bulk tiles and one past each (a second vector group).
const int kWideBatchSizes[] = {2, 5, 8, 9, 16, 17, 32, 33};
const std::vector<std::string> kWideFixtures = {gpu_test::fixture_id(Family::Qwen3, DType::Q8_0, false, 4096),
                                                gpu_test::fixture_id(Family::Qwen35, DType::Q8_0, false, 4096),
                                                gpu_test::fixture_id(Family::Qwen35, DType::NVFP4, false, 2048)};

class DecodeBatchWide : public DecodeBatch {};
TEST_P(DecodeBatchWide, Gate1StrictDefaultArms) { gate1_strict(model(), Arms{}, "default arms", report()); }
TEST_P(DecodeBatchWide, Gate2BatchMatesChangeNoBit) {
  gate2(model(), false, report(), false, kWideBatchSizes, gpu_test::device_has_bulk_tiles());
}
TEST_P(DecodeBatchWide, Gate2GraphedStepsChangeNoBit) {
  gate2(model(), false, report(), true, kWideBatchSizes, gpu_test::device_has_bulk_tiles());
}
INSTANTIATE_TEST_SUITE_P(Wide, DecodeBatchWide, ::testing::ValuesIn(testing::gate_cases(kWideFixtures)),
                         testing::CaseName());

// With b1_fast on (the default), B = 1 is decode_step itself, graph arm included; the batched
// body does not run.
TEST_F(DecodeBatchApi, B1FastRoutesToDecodeStep) {
  Loaded& m = loaded(Family::Qwen35, DType::NVFP4);
  const std::vector<int32_t> p = seq_prompt(m, 1);
  Cache a = primed(*m.gpu, p), b = primed(*m.gpu, p);
  const int64_t before = m.gpu->counters().batch_steps;
  int32_t t = p.back();
  Cache* one[1] = {&b};
  const std::vector<float> fast = m.gpu->decode_step_batch(std::span<const int32_t>(&t, 1), one).at(0);
  report().figure("batched_body_calls", m.gpu->counters().batch_steps - before);
  EXPECT_EQ(m.gpu->counters().batch_steps, before) << "b1_fast on: the batched body must not run at B = 1";
  EXPECT_THAT(fast, testing::BitIdentical(m.gpu->decode_step(t, a).logits));
  EXPECT_EQ(a.pos(), b.pos());
}

// Bad input: an error naming the sequence, and no cache advanced.
TEST_F(DecodeBatchApi, BadInputNamesTheSequence) {
  Loaded& m = loaded(Family::Qwen3, DType::Q8_0);
  Loaded& other = loaded(Family::Qwen35, DType::NVFP4);
  const int32_t V = static_cast<int32_t>(m.fx.config.n_vocab);
  Cache a = m.gpu->new_cache(8), b = m.gpu->new_cache(8), full = m.gpu->new_cache(1), foreign = other.gpu->new_cache(8);
  m.gpu->decode_step(1, full);
  auto expect_error = [&](std::vector<int32_t> toks, std::vector<Cache*> caches, const std::string& what) {
    EXPECT_THAT([&] { m.gpu->decode_step_batch(toks, caches); },
                ::testing::ThrowsMessage<Error>(::testing::HasSubstr(what)));
    EXPECT_EQ(a.pos(), 0);  // checked before anything ran
    EXPECT_EQ(b.pos(), 0);
  };
  expect_error({}, {}, "no sequences");
  expect_error({1, 2}, {&a}, "2 tokens for 1 caches");
  expect_error({1, V}, {&a, &b}, "sequence 1: token id");
  expect_error({-2, 1}, {&a, &b}, "sequence 0: token id -2");
  expect_error({1, 2}, {&a, &a}, "sequences 0 and 1 share one cache");
  expect_error({1, 2}, {&a, nullptr}, "sequence 1: null cache");
  expect_error({1, 2}, {&a, &foreign}, "sequence 1: cache was made by another model");
  expect_error({1, 2}, {&a, &full}, "sequence 1: prompt of 1 tokens at position 1 exceeds");
  auto expect_sampled_error = [&](Specs specs, const std::string& what) {
    std::vector<int32_t> toks = {1, 2};
    std::vector<Cache*> caches = {&a, &b};
    EXPECT_THAT([&] { m.gpu->decode_step_batch_sampled(toks, caches, specs, false); },
                ::testing::ThrowsMessage<Error>(::testing::HasSubstr(what)));
    EXPECT_EQ(a.pos(), 0);
  };
  expect_sampled_error({SampleSpec{}}, "1 specs for 2 sequences");
  expect_sampled_error({std::nullopt, SampleSpec{-1.0f, 0, 0}}, "sequence 1: temperature -1");
  expect_sampled_error({SampleSpec{std::nanf(""), 0, 0}, std::nullopt}, "sequence 0: temperature nan");
}

// --- canaries (their suites end in Canary: label canary, --gtest_filter='*Canary.*') ---------------

class DecodeBatchCanary : public DecodeBatch {};
TEST_P(DecodeBatchCanary, Gate1ConfigWrongTokenFails) {
  expect_gate_fails("the batched lane fed token - 1 at step 1 (plumbing)", [&] { gate1_config(model(), true, report()); });
}
TEST_P(DecodeBatchCanary, Gate3bShiftedCounterFails) {
  expect_gate_fails("the batch drawn with counter + 1", [&] { gate3b(model(), true, report()); });
}
TEST_P(DecodeBatchCanary, Gate2SwappedTokensFail) {
  expect_gate_fails("sequences 0 and 1 fed each other's token at step 2 (rows mixed up)",
                    [&] { gate2(model(), true, report()); });
}
// The bulk tiles' tree in another order for a tile's vectors 8 and up (Break::bulk_tile_reorder):
// a sequence's bits then depend on its place in the batch, which gate2 on a wide fixture must
// see (on the tiny fixtures the defect changes nothing: their rows never reach these tiles).
class DecodeBatchWideCanary : public DecodeBatch {};
TEST_P(DecodeBatchWideCanary, Gate2ReorderedBulkTileFails) {
  if (!gpu_test::device_has_bulk_tiles())
    GTEST_SKIP() << "the test device has no bulk-fed tiles (sm_90 on): nothing to break";
  Break brk;
  brk.bulk_tile_reorder = true;
  model().gpu->set_break(brk);
  struct Restore {
    Model& m;
    ~Restore() { m.set_break(Break{}); }
  } restore{*model().gpu};
  expect_gate_fails("the bulk tiles' epilogue tree reordered for a tile's vectors 8 and up",
                    [&] { gate2(model(), false, report(), false, kWideBatchSizes, true); });
}
INSTANTIATE_TEST_SUITE_P(
    Wide, DecodeBatchWideCanary,
    ::testing::ValuesIn(testing::gate_cases({gpu_test::fixture_id(Family::Qwen3, DType::Q8_0, false, 4096),
                                             gpu_test::fixture_id(Family::Qwen35, DType::NVFP4, false, 2048)})),
    testing::CaseName());

INSTANTIATE_TEST_SUITE_P(
    Tiny, DecodeBatchCanary,
    ::testing::ValuesIn(testing::gate_cases({gpu_test::fixture_id(Family::Qwen3, DType::Q8_0, false),
                                             gpu_test::fixture_id(Family::Qwen35Moe, DType::NVFP4, false),
                                             gpu_test::fixture_id(Family::Glm5Next, DType::BF16, true)})),
    testing::CaseName());

}  // namespace
}  // namespace memra
