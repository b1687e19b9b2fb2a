// The GPU model's own laws on every tiny random fixture (4 families x F32/BF16/Q8_0/NVFP4 GGUF +
// BF16 HF, built in memory: gpu_fixture.h): prime_cache + decode_step == forward_last (bitwise),
// run-to-run determinism (sha256 of the logits stream), arm equivalences (fused == unfused,
// launch overlap), the chunked GDN form and the W4A4 arm's reach, bad input as errors. The
// exactness gates against the CPU oracle and between arms have their own files:
// teacher_forced_test.cpp, arm_fork_test.cpp, argmax_margin_test.cpp, decode_batch_test.cpp,
// decode_graph_test.cpp (graph == eager, with the MoE selection ledger).
// Canary (GpuModelCanary): the launch-overlap gate with a broken overlap arm must fail.
//
// Fixtures (memra/testing/gate.h): GpuGate cases are named by fixture model id (gpu_fixture.h
// fixture_id), one fixture per case; the GpuModel cases make their own models. One load per suite (the fixtures'
// ModelCache); every case writes its JSON report.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <map>
#include <span>

#include "exactness/gpu_fixture.h"
#include "memra/engine.h"
#include "memra/error.h"
#include "memra/hash.h"
#include "memra/model.h"
#include "memra/oracle.h"
#include "memra/testing/gate.h"
#include "memra/testing/gpu.h"
#include "memra/testing/matchers.h"
#include "memra/testing/records.h"
#include "memra/testing/report.h"

namespace memra {
namespace {

using gpu_test::FixtureModel;

constexpr int kPrompt = 12;  // prompt tokens
Engine& engine() {
  static Engine e = Engine::open(testing::test_device());
  return e;
}

struct Loaded {
  FixtureModel fx;
  std::unique_ptr<oracle::Model> oracle;
  std::unique_ptr<Model> gpu;
  DType type;
};

// Fixture model `id` on both engines (the gate fixtures' ModelCache holds it: one load per suite).
std::unique_ptr<Loaded> load_fixture(const std::string& id) {
  auto m = std::make_unique<Loaded>();
  m->fx = gpu_test::make_fixture(id);
  oracle::Options o;
  o.gdn_prefill = GdnPrefill::recurrent;
  o.q8_1_activations = m->fx.type == DType::Q8_0 || m->fx.type == DType::NVFP4;  // the GPU's contract
  m->oracle = std::make_unique<oracle::Model>(oracle::Model::load(*m->fx.source, o));
  m->gpu = std::make_unique<Model>(Model::load(engine(), *m->fx.source));
  m->type = m->fx.type;
  return m;
}

// The parameterised gates: one fixture model per case (GateCase::model is its id).
class GpuGate : public testing::GpuGateTest<Loaded> {
 protected:
  std::unique_ptr<Loaded> load_model(const std::string& id) override { return load_fixture(id); }
};

// The cases that walk several fixture models, each asked for by family, type and form.
class GpuModel : public testing::GpuGateFixture<Loaded> {
 protected:
  std::unique_ptr<Loaded> load_model(const std::string& id) override { return load_fixture(id); }
  Loaded& loaded(Family f, DType t, bool hf = false) { return model(gpu_test::fixture_id(f, t, hf)); }
};

int32_t argmax(const std::vector<float>& l) { return oracle::top_k(l, 1).at(0).first; }

// max |a - b| over max |b|: how far an arm's logits moved from the reference form's.
double rel_maxdiff(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0, den = 0;
  for (size_t j = 0; j < b.size(); ++j) {
    num = std::max(num, std::abs(double(a[j]) - b[j]));
    den = std::max(den, std::abs(double(b[j])));
  }
  return num / den;
}

// Each Qwen family's GGUF fixtures of `types`, then (with_hf) its BF16 HF one, then (with_hf)
// GLM-5's HF fixtures of `types` and DeepSeek-V4's GGUF ones and BF16 HF: fixture model ids.
[[maybe_unused]] std::vector<std::string> fixture_ids(std::initializer_list<DType> types, bool with_hf) {
  std::vector<std::string> v;
  for (Family f : {Family::Qwen3, Family::Qwen3Next, Family::Qwen35, Family::Qwen35Moe}) {
    for (DType t : types) v.push_back(gpu_test::fixture_id(f, t, false));
    if (with_hf) v.push_back(gpu_test::fixture_id(f, DType::BF16, true));
  }
  if (with_hf)
    for (DType t : types) v.push_back(gpu_test::fixture_id(Family::GlmDsa, t, true));
  if (with_hf) {  // DeepSeek-V4: GGUF in every type, and its BF16 HF form
    for (DType t : types) v.push_back(gpu_test::fixture_id(Family::DeepseekV4, t, false));
    v.push_back(gpu_test::fixture_id(Family::DeepseekV4, DType::BF16, true));
  }
  if (with_hf)  // GLM-5's hybrid: HF only
    for (DType t : types) v.push_back(gpu_test::fixture_id(Family::Glm5Next, t, true));
  return v;
}

// The sha256 of a whole logits stream: prime, then greedy decode steps.
std::string logits_stream_sha(Model& m, const std::vector<int32_t>& prompt, int steps) {
  Sha256 h;
  Cache c = m.new_cache(static_cast<int64_t>(prompt.size()) + steps);
  Prime p = m.prime_cache(prompt, c);
  h.update(p.logits.data(), p.logits.size() * sizeof(float));
  int32_t tok = argmax(p.logits);
  for (int i = 0; i < steps; ++i) {
    Step s = m.decode_step(tok, c);
    h.update(s.logits.data(), s.logits.size() * sizeof(float));
    tok = argmax(s.logits);
  }
  return h.finish_hex();
}

// A logits stream under the given arms (restored afterwards).
std::string stream_with_arms(Loaded& m, const Arms& a, int steps) {
  testing::ScopedArms<Model> arm(*m.gpu, a);
  const auto p = testing_fixtures::prompt(kPrompt, m.fx.config.n_vocab, 17);
  return logits_stream_sha(*m.gpu, p, steps);
}

// launch_overlap (programmatic dependent launch, src/cuda/launch.cuh) changes when a kernel's
// blocks are scheduled, never what they compute: byte-identical logits streams with it off, on,
// and on under the graph arm. A kernel that touched its predecessor's output before pdl_wait()
// would race, and its stream would differ here (or from run to run in the determinism gate).
// `broken` (the canary): the overlap arms also take the chunked GDN prefill and the dp4a
// mat-vec family, other f32 roundings of the same model — the size of difference a race
// leaves — so the body must fail.
// The canary runs it on f32 weights: on a quantised fixture the q8_1 re-rounding of every
// activation absorbed a difference that small (measured: the NVFP4 streams stayed identical).
void launch_overlap_body(Loaded& m, bool broken, testing::ReportPart out) {
  Arms serial = m.gpu->arms();
  serial.launch_overlap = false;
  serial.decode_graph = false;
  Arms overlap = serial, overlap_graph = serial;
  overlap.launch_overlap = overlap_graph.launch_overlap = true;
  overlap_graph.decode_graph = true;
  if (broken) {
    overlap.gdn_prefill = overlap_graph.gdn_prefill = GdnPrefill::chunked;
    overlap.decode_matvec = overlap_graph.decode_matvec = DecodeMatvec::dp4a;
  }
  const std::string s = stream_with_arms(m, serial, 12);
  const std::string so = stream_with_arms(m, overlap, 12);
  EXPECT_EQ(s, so) << m.fx.id << ": launch_overlap changed eager decode";
  const std::string sg = stream_with_arms(m, overlap_graph, 12);
  EXPECT_EQ(s, sg) << m.fx.id << ": launch_overlap changed graph decode";
  out["fixture"] = m.fx.id;
  out["sha256"] = {{"serial", s}, {"overlap", so}, {"overlap_graph", sg}};
  out.figure("streams_differing", static_cast<int>(so != s) + static_cast<int>(sg != s));
}

// prime(p[:n-1]) + decode(p[n-1]) == forward_last(p), bitwise: every kernel computes a token's
// values by the same operations whatever the number of tokens in the call. Under `arms` with the
// decode-identical prefill forms (the law's arms, model.h), whatever the model's defaults.
void prime_decode_equals_forward_last(Loaded& m, Arms a, testing::Report& rep) {
  a.gdn_prefill = GdnPrefill::recurrent;
  a.prefill_matmul = PrefillMatmul::mmvq;
  testing::ScopedArms<Model> arm(*m.gpu, a);
  const auto p = testing_fixtures::prompt(kPrompt, m.fx.config.n_vocab, 5);
  const std::vector<float> full = m.gpu->forward_last(p);
  Cache cache = m.gpu->new_cache(kPrompt);
  m.gpu->prime_cache(std::span(p).first(kPrompt - 1), cache);
  const Step s = m.gpu->decode_step(p.back(), cache);
  ASSERT_EQ(full.size(), s.logits.size());
  int differing = 0;
  for (size_t j = 0; j < full.size(); ++j)
    differing += std::bit_cast<uint32_t>(full[j]) != std::bit_cast<uint32_t>(s.logits[j]);
  rep.set_arms("law", a);
  rep.figure("differing_logits", differing);
  EXPECT_THAT(s.logits, testing::BitIdentical(full)) << "forward_last and prime+decode differ in bits";
  EXPECT_EQ(cache.pos(), kPrompt);
}

TEST_P(GpuGate, PrimeDecodeEqualsForwardLast) {
  prime_decode_equals_forward_last(model(), model().gpu->arms(), report());
}

// Every tiny fixture: 4 families x F32/BF16/Q8_0/NVFP4 GGUF + BF16 HF.
INSTANTIATE_TEST_SUITE_P(
    Tiny, GpuGate,
    ::testing::ValuesIn(testing::gate_cases(fixture_ids({DType::F32, DType::BF16, DType::Q8_0, DType::NVFP4}, true))),
    testing::CaseName());
// The law under nvfp4_dot = pair32 on the NVFP4 fixtures: the arm's prefill (the token tiles) and
// its decode (the streamed rows) follow one contract, so they stay bit-identical; the arm engaged.
class Pair32Law : public GpuGate {};
TEST_P(Pair32Law, PrimeDecodeEqualsForwardLast) {
  Arms a = model().gpu->arms();
  a.nvfp4_dot = Nvfp4Dot::pair32;
  const int64_t before = model().gpu->counters().nvfp4_pair32_launches;
  prime_decode_equals_forward_last(model(), a, report());
  EXPECT_GT(model().gpu->counters().nvfp4_pair32_launches, before) << "vacuous: pair32 never ran";
}
// Every NVFP4 tiny fixture: the 4 Qwen families, GLM-5 (HF), DeepSeek-V4 (GGUF).
INSTANTIATE_TEST_SUITE_P(
    Tiny, Pair32Law,
    ::testing::ValuesIn(testing::gate_cases({gpu_test::fixture_id(Family::Qwen3, DType::NVFP4, false),
                                             gpu_test::fixture_id(Family::Qwen3Next, DType::NVFP4, false),
                                             gpu_test::fixture_id(Family::Qwen35, DType::NVFP4, false),
                                             gpu_test::fixture_id(Family::Qwen35Moe, DType::NVFP4, false),
                                             gpu_test::fixture_id(Family::GlmDsa, DType::NVFP4, true),
                                             gpu_test::fixture_id(Family::DeepseekV4, DType::NVFP4, false)})),
    testing::CaseName());
// The same inputs and arms give the same bits run after run: two logits streams, one sha256.
class Determinism : public GpuGate {};
TEST_P(Determinism, RunToRunSha256) {
  Loaded& m = model();
  const auto p = testing_fixtures::prompt(kPrompt, m.fx.config.n_vocab, 9);
  const std::string a = logits_stream_sha(*m.gpu, p, 16), b = logits_stream_sha(*m.gpu, p, 16);
  EXPECT_EQ(a, b) << m.fx.id;
  report().figure("sha256", a);
}
INSTANTIATE_TEST_SUITE_P(Tiny, Determinism,
                         ::testing::ValuesIn(testing::gate_cases({"qwen3-q8_0-gguf", "qwen35moe-q8_0-gguf",
                                                                  "qwen3next-q8_0-gguf", "glm-dsa-bf16-hf",
                                                                  "deepseek4-q8_0-gguf"})),
                         testing::CaseName());

// decode_greedy's device argmax (lowest index on ties) == the host argmax of decode_step's
// logits, step after step; decode_greedy_n (each step's token fed on the device, one wait) ==
// the same stream in one call, and its cache continues exactly as the chained calls' does. Eager
// and graph; quantized lm_heads (the token from the streamed launch's per-warp bests) and a BF16
// one (the full-vocabulary scan).
class DeviceGreedy : public GpuGate {};
TEST_P(DeviceGreedy, MatchesHostArgmax) {
  constexpr int kN = 8;
  Loaded& m = model();
  const bool graph = GetParam().arms == "graph";
  Arms arms = m.gpu->arms();
  arms.decode_graph = graph;
  testing::ScopedArms<Model> arm(*m.gpu, arms);
  const auto p = testing_fixtures::prompt(kPrompt, m.fx.config.n_vocab, 11);
  Cache a = m.gpu->new_cache(kPrompt + kN + 1), b = m.gpu->new_cache(kPrompt + kN + 1),
        c = m.gpu->new_cache(kPrompt + kN + 1);
  const int32_t first = argmax(m.gpu->prime_cache(p, a).logits);
  m.gpu->prime_cache(p, b);
  m.gpu->prime_cache(p, c);
  std::vector<int32_t> host, chained;
  for (int32_t ta = first, tb = first; static_cast<int>(host.size()) < kN;) {
    host.push_back(ta = argmax(m.gpu->decode_step(ta, a).logits));
    chained.push_back(tb = m.gpu->decode_greedy(tb, b));
  }
  report()["host_argmax"] = host;
  report()["decode_greedy"] = chained;
  EXPECT_EQ(chained, host);
  EXPECT_EQ(m.gpu->decode_greedy_n(first, kN, c), host);
  EXPECT_EQ(c.pos(), b.pos());
  // the last position of the cache: both continue with the same logits bits
  const std::vector<float> lb = m.gpu->decode_step(host.back(), b).logits,
                           lc = m.gpu->decode_step(host.back(), c).logits;
  EXPECT_THAT(lc, testing::BitIdentical(lb)) << "decode_greedy_n's cache continues otherwise than decode_greedy's";
  // bad input: nothing left in the cache, n < 1
  EXPECT_THAT([&] { m.gpu->decode_greedy_n(host.back(), 1, c); },
              ::testing::ThrowsMessage<Error>(::testing::HasSubstr("exceed the cache")));
  EXPECT_THAT([&] { m.gpu->decode_greedy_n(host.back(), 0, b); },
              ::testing::ThrowsMessage<Error>(::testing::HasSubstr("n = 0")));
}
INSTANTIATE_TEST_SUITE_P(Tiny, DeviceGreedy,
                         ::testing::ValuesIn(testing::gate_cases({"qwen35-nvfp4-gguf", "qwen3-q8_0-gguf",
                                                                  "qwen35moe-nvfp4-gguf", "qwen3next-bf16-gguf",
                                                                  "glm-dsa-bf16-hf", "deepseek4-nvfp4-gguf"},
                                                                 {"eager", "graph"})),
                         testing::CaseName());

// A NaN reaching the logits makes a greedy step an error naming the position, as decode_step's
// logits check does, never a token: one lm_head row poisoned (a Q8_0 block scale of NaN: the
// streamed launch's per-warp bests; an F32 weight: the full scan), eager and graph, for
// decode_greedy and decode_greedy_n.
TEST_F(GpuModel, GreedyNonFiniteLogitIsAnError) {
  for (DType t : {DType::Q8_0, DType::F32}) {
    FixtureModel fx = gpu_test::make_fixture(Family::Qwen3, t, false);
    const char* name = fx.source->find("output.weight") ? "output.weight" : "token_embd.weight";
    const TensorView& w = *fx.source->find(name);
    std::vector<std::byte> bytes(w.data.begin(), w.data.end());
    const int64_t rb = row_bytes(t, w.ne[0]), row = 100;
    if (t == DType::Q8_0) {
      const uint16_t nan16 = 0x7E00;  // the row's first block scale
      std::memcpy(bytes.data() + row * rb, &nan16, 2);
    } else {
      const float nan = std::nanf("");
      std::memcpy(bytes.data() + row * rb, &nan, 4);
    }
    fx.source->add(name, t, w.ne, std::move(bytes));
    report()["poisoned"].push_back({{"fixture", fx.id}, {"tensor", name}, {"row", row}});
    Model m = Model::load(engine(), *fx.source);
    for (bool graph : {false, true}) {
      SCOPED_TRACE(std::string(dtype_name(t)) + (graph ? " graph" : " eager"));
      Arms a = m.arms();
      a.decode_graph = graph;
      m.set_arms(a);
      Cache c = m.new_cache(8), d = m.new_cache(8);
      EXPECT_THAT([&] { m.decode_greedy(3, c); }, ::testing::ThrowsMessage<Error>(::testing::AllOf(
                                                      ::testing::HasSubstr("non-finite value (NaN or Inf) in lm_head"),
                                                      ::testing::HasSubstr("position 0"))));
      EXPECT_THAT([&] { m.decode_greedy_n(3, 4, d); },
                  ::testing::ThrowsMessage<Error>(::testing::AllOf(::testing::HasSubstr("decode_greedy_n"),
                                                                   ::testing::HasSubstr("position 0"))));
      // the control: decode_step's own check sees the same logits
      Cache e = m.new_cache(8);
      EXPECT_THAT([&] { m.decode_step(3, e); }, ::testing::ThrowsMessage<Error>(::testing::AllOf(
                                                    ::testing::HasSubstr("decode_step: non-finite value ("),
                                                    ::testing::HasSubstr(") in lm_head, position 0, element "))));
    }
  }
}

// Fused and unfused RMSNorm + q8_1 write the same f32 values and the same blocks (norm.cu):
// the whole stream is bit-identical under fuse_norm_quant on/off.
TEST_F(GpuModel, FusedNormQuantBitIdentical) {
  Loaded& m = loaded(Family::Qwen3, DType::Q8_0, false);
  const auto p = testing_fixtures::prompt(kPrompt, m.fx.config.n_vocab, 13);
  const std::string fused = logits_stream_sha(*m.gpu, p, 6);
  Arms a = m.gpu->arms();
  a.fuse_norm_quant = false;
  testing::ScopedArms<Model> arm(*m.gpu, a);
  const std::string unfused = logits_stream_sha(*m.gpu, p, 6);
  report().figure("fused_sha256", fused);
  report().figure("unfused_sha256", unfused);
  EXPECT_EQ(unfused, fused);
}

class LaunchOverlap : public GpuGate {};
TEST_P(LaunchOverlap, BitIdentical) { launch_overlap_body(model(), false, report()); }
INSTANTIATE_TEST_SUITE_P(Tiny, LaunchOverlap,
                         ::testing::ValuesIn(testing::gate_cases({"qwen3-q8_0-gguf", "qwen35moe-nvfp4-gguf",
                                                                  "qwen3next-bf16-gguf", "qwen35-nvfp4-gguf"})),
                         testing::CaseName());

// gdn_prefill = chunked on the GPU: a prompt crossing the 64-token chunk leaves logits within
// f32 composition of the recurrent form's (float weights: no q8_1 re-rounding to amplify), and
// the chunked kernel engaged: GDN's on the Qwen hybrids, KDA's on GLM-5's hybrid.
class ChunkedGdn : public GpuGate {};
TEST_P(ChunkedGdn, PrefillMatchesRecurrent) {
  Loaded& m = model();
  const auto p = testing_fixtures::prompt(150, m.fx.config.n_vocab, 29);
  const std::vector<float> rec = m.gpu->forward_last(p);
  Arms a = m.gpu->arms();
  a.gdn_prefill = GdnPrefill::chunked;
  testing::ScopedArms<Model> arm(*m.gpu, a);
  const int64_t before = m.gpu->counters().gdn_chunked_launches;
  const std::vector<float> chk = m.gpu->forward_last(p);
  const int64_t chunked = m.gpu->counters().gdn_chunked_launches - before;
  EXPECT_GT(chunked, 0) << m.fx.id << ": chunked form never engaged";
  const double rel = rel_maxdiff(chk, rec);
  std::printf("[chunked] %s: max |chunked - recurrent| / max|logit| = %.3e\n", m.fx.id.c_str(), rel);
  testing::Report& out = report();
  out.figure("chunked_launches", chunked);
  out.figure("rel_maxdiff", rel);
  EXPECT_LT(rel, 1e-4) << m.fx.id;
}
INSTANTIATE_TEST_SUITE_P(Tiny, ChunkedGdn,
                         ::testing::ValuesIn(testing::gate_cases({"qwen35-f32-gguf", "qwen3next-f32-gguf",
                                                                  "qwen35moe-f32-gguf", "glm5-next-f32-hf"})),
                         testing::CaseName());

// prefill_attn = flash on the GPU (attention.cuh's flash form): on every Qwen family the arm
// engages, its prefill logits stay within f32 composition of the split form's (float weights: no
// q8_1 re-rounding to amplify), and within the arm a prompt's logits do not depend on how it is
// cut into calls: prime_cache in two calls (the cut inside the first 64-query block and inside a
// 32-key tile) equals one call bit for bit, under the default mat-mul and GDN arms, which do not
// depend on the call's size either (DESIGN.md law 2). Decode is untouched: a one-token call under
// the arm takes no flash launch.
class FlashPrefill : public GpuGate {};
TEST_P(FlashPrefill, MatchesSplitAndIgnoresTheCut) {
  Loaded& m = model();
  const auto p = testing_fixtures::prompt(150, m.fx.config.n_vocab, 37);
  const std::vector<float> split = m.gpu->forward_last(p);
  Arms a = m.gpu->arms();
  a.prefill_attn = PrefillAttn::flash;
  testing::ScopedArms<Model> arm(*m.gpu, a);
  const int64_t before = m.gpu->counters().flash_attn_launches;
  const std::vector<float> flash = m.gpu->forward_last(p);
  const int64_t launches = m.gpu->counters().flash_attn_launches - before;
  EXPECT_GT(launches, 0) << m.fx.id << ": the flash form never engaged";
  const double rel = rel_maxdiff(flash, split);
  std::printf("[flash] %s: max |flash - split| / max|logit| = %.3e\n", m.fx.id.c_str(), rel);
  testing::Report& out = report();
  out.figure("flash_launches", launches);
  out.figure("rel_maxdiff", rel);
  EXPECT_LT(rel, 1e-4) << m.fx.id;
  EXPECT_THAT(flash, ::testing::Not(testing::BitIdentical(split)))
      << m.fx.id << ": the flash prefill gave the split form's bits: is it running?";

  Cache whole = m.gpu->new_cache(151), cut = m.gpu->new_cache(150);
  const Prime one = m.gpu->prime_cache(p, whole);
  m.gpu->prime_cache(std::span(p).first(45), cut);
  const Prime two = m.gpu->prime_cache(std::span(p).subspan(45), cut);
  EXPECT_THAT(two.logits, testing::BitIdentical(one.logits))
      << m.fx.id << ": the prompt's logits moved with where it was cut";
  EXPECT_THAT(one.logits, testing::BitIdentical(flash))
      << m.fx.id << ": prime_cache and forward_last disagree under the arm";
  const int64_t at_decode = m.gpu->counters().flash_attn_launches;
  m.gpu->decode_step(p[0], whole);
  EXPECT_EQ(m.gpu->counters().flash_attn_launches, at_decode) << m.fx.id << ": a decode step took the flash form";
}
INSTANTIATE_TEST_SUITE_P(Tiny, FlashPrefill,
                         ::testing::ValuesIn(testing::gate_cases({"qwen3-f32-gguf", "qwen3next-f32-gguf",
                                                                  "qwen35-f32-gguf", "qwen35moe-f32-gguf"})),
                         testing::CaseName());

// prefill_act = w4a4 (model.h): the NVFP4 mat-muls of a multi-token call take W4A4 activations
// (their kernels are op-tested bitwise against quant.h's contract: ops_mmvq, ops_quantize).
// Here, on every family's NVFP4 fixture: the arm engages (launch counter) and changes the
// prefill logits (q8_1 and fp4 activations are different numbers), stays finite and
// deterministic (prime_cache and forward_last take the same path: same bits), and never reaches
// what it must not: a one-token call and tokenwise decode give the same bits under both arms,
// with no W4A4 launch (GATES.md's arm-invariant control). How far W4A4 moves the logits is
// recorded, not bounded: that verdict belongs to the ArmFork gate (entry-point noise).
class W4a4Prefill : public GpuGate {};
TEST_P(W4a4Prefill, ArmReach) {
  Loaded& m = model();
  const auto p = testing_fixtures::prompt(40, m.fx.config.n_vocab, 31);
  Arms a8 = m.gpu->arms();
  a8.prefill_act = PrefillAct::w4a8;
  a8.prefill_matmul = PrefillMatmul::mmvq;
  Arms a4 = a8;
  a4.prefill_act = PrefillAct::w4a4;
  auto count = [&] { return m.gpu->counters().w4a4_launches; };
  // tokenwise decode over the first 12 prompt tokens, one hash over every step's logits
  auto decode_sha = [&] {
    Sha256 h;
    Cache c = m.gpu->new_cache(12);
    for (int i = 0; i < 12; ++i) {
      const Step st = m.gpu->decode_step(p[static_cast<size_t>(i)], c);
      h.update(st.logits.data(), st.logits.size() * sizeof(float));
    }
    return h.finish_hex();
  };
  const std::vector<int32_t> one(p.begin(), p.begin() + 1);
  std::vector<float> l8, one8;
  std::string dec8;
  {
    testing::ScopedArms<Model> arm(*m.gpu, a8);
    l8 = m.gpu->forward_last(p);
    one8 = m.gpu->forward_last(one);
    dec8 = decode_sha();
  }
  testing::ScopedArms<Model> arm(*m.gpu, a4);
  const int64_t c0 = count();
  const std::vector<float> l4 = m.gpu->forward_last(p);
  const int64_t c1 = count();
  EXPECT_GT(c1, c0) << m.fx.id << ": the W4A4 arm never engaged";
  Cache cache = m.gpu->new_cache(static_cast<int64_t>(p.size()));
  EXPECT_THAT(m.gpu->prime_cache(p, cache).logits, testing::BitIdentical(l4))
      << m.fx.id << ": prime_cache and forward_last under w4a4";
  const int64_t c2 = count();
  EXPECT_THAT(m.gpu->forward_last(one), testing::BitIdentical(one8))
      << m.fx.id << ": a one-token call is not a prefill";
  EXPECT_EQ(decode_sha(), dec8) << m.fx.id << ": tokenwise decode must not see the prefill arm";
  EXPECT_EQ(count(), c2) << m.fx.id << ": W4A4 launches in a one-token call or in decode";
  double num = 0, den = 0;
  bool finite = true, differs = false;
  for (size_t j = 0; j < l8.size(); ++j) {
    finite = finite && std::isfinite(l4[j]);
    differs = differs || std::bit_cast<uint32_t>(l4[j]) != std::bit_cast<uint32_t>(l8[j]);
    num = std::max(num, std::abs(double(l4[j]) - l8[j]));
    den = std::max(den, std::abs(double(l8[j])));
  }
  EXPECT_TRUE(finite) << m.fx.id;
  EXPECT_TRUE(differs) << m.fx.id << ": w4a4 logits bit-identical to w4a8: the activations were not fp4";
  const bool same_top1 = argmax(l4) == argmax(l8);
  testing::Report& out = report();
  out.figure("w4a4_launches", c1 - c0);
  out.figure("rel_maxdiff", num / den);
  out.figure("same_top1", same_top1 ? 1 : 0);
  std::printf("[w4a4] %s: launches %lld, max |w4a4 - w4a8| / max|logit| = %.3e, top-1 %s\n", m.fx.id.c_str(),
              static_cast<long long>(c1 - c0), num / den, same_top1 ? "same" : "differs");
}
INSTANTIATE_TEST_SUITE_P(Tiny, W4a4Prefill,
                         ::testing::ValuesIn(testing::gate_cases({"qwen3-nvfp4-gguf", "qwen3next-nvfp4-gguf",
                                                                  "qwen35-nvfp4-gguf", "qwen35moe-nvfp4-gguf"})),
                         testing::CaseName());

TEST_F(GpuModel, BadInputIsAnError) {
  Loaded& m = loaded(Family::Qwen3, DType::Q8_0, false);
  const int64_t V = m.fx.config.n_vocab;
  Cache c = m.gpu->new_cache(4);
  const std::vector<int32_t> bad = {1, static_cast<int32_t>(V)};
  EXPECT_THAT([&] { m.gpu->prime_cache(bad, c); },
              ::testing::ThrowsMessage<Error>(::testing::HasSubstr("out of range")));
  EXPECT_EQ(c.pos(), 0) << "a rejected prompt must not advance the cache";
  const std::vector<int32_t> neg = {-1};
  EXPECT_THAT([&] { m.gpu->decode_step(-1, c); }, ::testing::ThrowsMessage<Error>(::testing::HasSubstr("token id -1")));
  const std::vector<int32_t> longp = {1, 2, 3, 4, 5};
  EXPECT_THAT([&] { m.gpu->prime_cache(longp, c); }, ::testing::ThrowsMessage<Error>(::testing::HasSubstr("max_ctx")));
  EXPECT_THAT([&] { m.gpu->forward_last({}); }, ::testing::ThrowsMessage<Error>(::testing::HasSubstr("empty prompt")));
  Loaded& other = loaded(Family::Qwen35, DType::Q8_0, false);
  Cache oc = other.gpu->new_cache(4);
  EXPECT_THAT([&] { m.gpu->decode_step(1, oc); }, ::testing::ThrowsMessage<Error>(::testing::HasSubstr("another model")));
  Arms a = m.gpu->arms();
  a.prefill_act = PrefillAct::w4a4;
  a.prefill_matmul = PrefillMatmul::mma;  // an arm pair no kernel honours: an error, never a fallback
  {
    testing::ScopedArms<Model> arm(*m.gpu, a);
    EXPECT_THAT([&] { m.gpu->forward_last(longp); },
                ::testing::ThrowsMessage<Error>(::testing::AllOf(::testing::HasSubstr("w4a4"), ::testing::HasSubstr("mma"))));
  }
  // A matrix type the GPU cannot stream: named with the tensor.
  FixtureModel fx = gpu_test::make_fixture(Family::Qwen3, DType::F32, false);
  const TensorView& t = *fx.source->find("blk.0.attn_k.weight");
  std::vector<std::byte> q40(static_cast<size_t>(row_bytes(DType::Q4_0, t.ne[0]) * (t.nelements() / t.ne[0])));
  fx.source->add("blk.0.attn_k.weight", DType::Q4_0, t.ne, std::move(q40));
  EXPECT_THAT([&] { Model::load(engine(), *fx.source); },
              ::testing::ThrowsMessage<Error>(::testing::AllOf(::testing::HasSubstr("blk.0.attn_k.weight"),
                                                               ::testing::HasSubstr("q4_0"))));
}

// Re-seating a layer that is not one, and "growing" a cache to fewer positions than it holds,
// are errors naming the call and the value; neither touches the cache (it decodes on after).
TEST_F(GpuModel, CacheReseatAndGrowRejectBadArguments) {
  Loaded& m = loaded(Family::Qwen35, DType::Q8_0, false);
  const int64_t L = m.fx.config.n_layer;
  Cache c = m.gpu->new_cache(16);
  m.gpu->prime_cache(std::vector<int32_t>{1, 2, 3}, c);
  EXPECT_THAT([&] { c.reseat(L); }, ::testing::ThrowsMessage<Error>(::testing::HasSubstr(
                                        "Cache::reseat: layer " + std::to_string(L) + " is not a layer")));
  EXPECT_THAT([&] { c.reseat(-1); }, ::testing::ThrowsMessage<Error>(::testing::HasSubstr("layer -1 is not a layer")));
  EXPECT_THAT([&] { c.grow(8); },
              ::testing::ThrowsMessage<Error>(::testing::HasSubstr("Cache::grow: max_ctx 8 is below the cache's 16")));
  EXPECT_EQ(c.pos(), 3);
  Cache ref = m.gpu->new_cache(16);
  m.gpu->prime_cache(std::vector<int32_t>{1, 2, 3}, ref);
  EXPECT_THAT(m.gpu->decode_step(4, c).logits, testing::BitIdentical(m.gpu->decode_step(4, ref).logits));
}

// GLM-5 (MLA, the DSA indexer's top-k, sigmoid-grouped MoE) and DeepSeek-V4 (hyper-connections,
// sliding / CSA / HCA attention, hash and score routing) against the CPU oracle, teacher-forced
// on one prompt of kGlmTokens: the oracle's forward_all rows against the GPU's prime of the first
// half and decode_step over the rest (prefill and decode kernels both judged). The prompt runs
// past the indexer's top-16, so most rows attend to a selection that drops tokens. Every row within
// the bound of the oracle row's logit range, and the same top-1 wherever the oracle's top-2 margin
// exceeds twice that row's deviation.
//   - Float weights (F32, BF16): kGlmBound. Measured on the H200: 1.5e-7 (the GPU's f32 arithmetic
//     against the oracle's f64, the same selections); the bound is ~13x that. The oracle itself,
//     its embeddings moved by 1e-6 relative, moves by 8e-7: float rows are not chaotic.
//   - Quantised weights (Q8_0, NVFP4; the oracle under the q8_1 contract): the contract is
//     chaotic at this width. An activation within the GPU's f32 noise of a q8_1 rounding edge
//     tips to the neighbouring value (a step of amax/127), and the row moves by percents: the
//     oracle itself, its embeddings moved by 1e-6 relative, moves by 5e-3 to 3e-2 of the range on
//     every row (by 0 at 1e-7: nothing tips). Whether the GPU's noise tips a value is chance (the
//     HF Q8_0 fixture measured 6.4e-8, the GGUF one 3.9e-3 in 2 of 25 rows), so the bound is
//     twice that tip scale, measured here on the oracle alone (glm_tip_scale: the GPU cannot move
//     it). The canary (layer 0's residual x 0.999) moves rows by 0.15 and fails either way.
constexpr int kGlmTokens = 48;
constexpr double kGlmBound = 2e-6;

// max over the judged rows of max_j |oracle - oracle'|/range, oracle' with every token embedding
// moved by 1e-6 relative (alternating signs): the deviation one tipped q8_1 value gives.
double glm_tip_scale(const Loaded& m, const std::vector<int32_t>& p, const std::vector<std::vector<float>>& ref) {
  ModelWeights w = m.oracle->weights();
  uint64_t x = 99;
  for (float& v : w.embed.data) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    v *= (x >> 40) % 2 ? 1.0f + 1e-6f : 1.0f - 1e-6f;
  }
  const oracle::Model moved = oracle::Model::from_weights(m.fx.config, std::move(w), m.oracle->options());
  const std::vector<std::vector<float>> alt = moved.forward_all(p);
  double worst = 0;
  for (size_t r = kGlmTokens / 2 - 1; r < ref.size(); ++r) {
    const auto [lo, hi] = std::minmax_element(ref[r].begin(), ref[r].end());
    double dev = 0;
    for (size_t j = 0; j < ref[r].size(); ++j) dev = std::max(dev, std::fabs(double(alt[r][j]) - double(ref[r][j])));
    worst = std::max(worst, dev / (double(*hi) - double(*lo)));
  }
  return worst;
}

// form = latent: the GPU decodes under mla_decode = latent, and the decode rows' reference is the
// oracle's own decode steps in that form (ops::mla_attend_latent), not forward_all's expanded rows
// (under the q8_1 contract the two forms differ by the expanded form's rounded latent).
void glm_follows_oracle(Loaded& m, const Break& brk, testing::ReportPart out, MlaDecode form = MlaDecode::expanded) {
  const auto p = testing_fixtures::prompt(kGlmTokens, m.fx.config.n_vocab, 23);
  // the prompt runs past the selection: GLM-5's top-k positions, DeepSeek-V4's top-k CSA rows
  const int64_t per_key = m.fx.config.family == Family::DeepseekV4 ? m.fx.config.csa_ratio : 1;
  ASSERT_GT(kGlmTokens, m.fx.config.dsa_topk * per_key) << "the prompt must run past the selection";
  std::vector<std::vector<float>> ref = m.oracle->forward_all(p);
  const bool quantised = m.fx.type == DType::Q8_0 || m.fx.type == DType::NVFP4;
  const double tip = quantised ? glm_tip_scale(m, p, ref) : 0;
  const double bound = std::max(kGlmBound, 2 * tip);
  const int half = kGlmTokens / 2;
  if (form == MlaDecode::latent) {
    oracle::Options lo = m.oracle->options();
    lo.mla_decode = MlaDecode::latent;
    const oracle::Model latent = oracle::Model::from_weights(m.fx.config, m.oracle->weights(), lo);
    oracle::Cache oc = latent.new_cache(kGlmTokens);
    latent.prime(std::span(p).first(half), oc);
    for (int i = half; i < kGlmTokens; ++i)
      ref[static_cast<size_t>(i)] = latent.decode_step(p[static_cast<size_t>(i)], oc).logits;
  }
  Arms arms = m.gpu->arms();
  arms.mla_decode = form;
  testing::ScopedArms<Model> arm(*m.gpu, arms);
  const int64_t latent_before = m.gpu->counters().mla_latent_launches;
  m.gpu->set_break(brk);
  struct Restore {
    Model& g;
    ~Restore() { g.set_break(Break{}); }
  } restore{*m.gpu};
  Cache c = m.gpu->new_cache(kGlmTokens);
  std::vector<std::vector<float>> rows;
  rows.push_back(m.gpu->prime_cache(std::span(p).first(half), c).logits);
  for (int i = half; i < kGlmTokens; ++i) rows.push_back(m.gpu->decode_step(p[static_cast<size_t>(i)], c).logits);
  double worst = 0;
  int over = 0, over_float = 0, top1_differs = 0;
  for (size_t r = 0; r < rows.size(); ++r) {
    const std::vector<float>& o = ref[static_cast<size_t>(half - 1) + r];
    const auto [lo, hi] = std::minmax_element(o.begin(), o.end());
    double dev = 0;
    for (size_t j = 0; j < o.size(); ++j) dev = std::max(dev, std::fabs(double(rows[r][j]) - double(o[j])));
    const double rel = dev / (double(*hi) - double(*lo));
    worst = std::max(worst, rel);
    over += rel > bound;
    over_float += rel > kGlmBound;
    const auto top2 = oracle::top_k(o, 2);
    if (top2[0].second - top2[1].second > 2 * dev && argmax(rows[r]) != top2[0].first) ++top1_differs;
    EXPECT_LE(rel, bound) << m.fx.id << ": row " << (half - 1 + static_cast<int>(r)) << " deviates by " << dev;
  }
  EXPECT_EQ(top1_differs, 0) << m.fx.id << ": clear top-1 picks differ from the oracle's";
  const int64_t latent_launches = m.gpu->counters().mla_latent_launches - latent_before;
  if (form == MlaDecode::latent) {
    EXPECT_GT(latent_launches, 0) << m.fx.id << ": vacuous: the latent form never engaged";
    out.figure("mla_latent_launches", latent_launches);
  } else {
    EXPECT_EQ(latent_launches, 0) << m.fx.id << ": the expanded arm took the latent form";
  }
  out["fixture"] = m.fx.id;
  out.figure("rows", static_cast<int64_t>(rows.size()));
  out.figure("max_dev_over_range", worst);
  out.figure("bound", bound);
  if (quantised) out.figure("tip_scale", tip);
  out.figure("rows_over_bound", over);
  out.figure("rows_over_float_bound", over_float);
  out.figure("clear_top1_differing", top1_differs);
}

// HF in every type, and GGUF as llama.cpp's converter writes it: kv_b split into attn_k_b
// (transposed) and attn_v_b, joined back on load (F32 where the halves are block-quantised).
TEST_F(GpuModel, GlmDsaFollowsTheOracle) {
  for (DType t : {DType::F32, DType::BF16, DType::Q8_0, DType::NVFP4, DType::F8_E4M3})
    glm_follows_oracle(loaded(Family::GlmDsa, t, true), Break{},
                       testing::ReportPart(report(), std::string(dtype_name(t))));
  for (DType t : {DType::F32, DType::Q8_0, DType::NVFP4})
    glm_follows_oracle(loaded(Family::GlmDsa, t, false), Break{},
                       testing::ReportPart(report(), std::string(dtype_name(t)) + "_gguf"));
}

// DeepSeek-V4 from GGUF in every type (llama.cpp's deepseek4 names), from HF (transformers'
// names) and as DeepSeek releases it (FP8 projections with E8M0 block scales and FP4 experts,
// held on the device as the BF16 values they decode to): 48 tokens close 12 CSA rows (the
// indexer keeps 4) and 6 HCA rows, and run past the window of 8 raw keys.
TEST_F(GpuModel, Dsv4FollowsTheOracle) {
  for (DType t : {DType::F32, DType::BF16, DType::Q8_0, DType::NVFP4})
    glm_follows_oracle(loaded(Family::DeepseekV4, t, false), Break{},
                       testing::ReportPart(report(), std::string(dtype_name(t)) + "_gguf"));
  for (DType t : {DType::F32, DType::Q8_0})
    glm_follows_oracle(loaded(Family::DeepseekV4, t, true), Break{},
                       testing::ReportPart(report(), std::string(dtype_name(t)) + "_hf"));
  glm_follows_oracle(loaded(Family::DeepseekV4, DType::F8_E4M3, true), Break{},
                     testing::ReportPart(report(), "release"));
}

// GLM-5's hybrid (glm5_next: KDA, KDA, MLA with the pooled indexer, MLA reusing its selection,
// under hyper-connections; HF names): 48 tokens close 12 pools, of which each query keeps 4 and its
// open tail, so the attention drops tokens from position 19 on.
TEST_F(GpuModel, Glm5NextFollowsTheOracle) {
  for (DType t : {DType::F32, DType::BF16, DType::Q8_0, DType::NVFP4})
    glm_follows_oracle(loaded(Family::Glm5Next, t, true), Break{},
                       testing::ReportPart(report(), std::string(dtype_name(t))));
}

// MLA's absorbed latent form (mla_decode = latent; mla.cuh): GLM-5's decode rows against the
// oracle's decode steps in the same form, every type, and GLM-5's hybrid's (n_rot 0, pooled
// selection). The bounds are the expanded check's: the forms differ from their contracts by the
// GPU's f32 arithmetic alone.
TEST_F(GpuModel, MlaLatentDecodeFollowsTheOracle) {
  for (DType t : {DType::F32, DType::BF16, DType::Q8_0, DType::NVFP4})
    glm_follows_oracle(loaded(Family::GlmDsa, t, true), Break{},
                       testing::ReportPart(report(), "glm_dsa_" + std::string(dtype_name(t))), MlaDecode::latent);
  for (DType t : {DType::F32, DType::Q8_0})
    glm_follows_oracle(loaded(Family::Glm5Next, t, true), Break{},
                       testing::ReportPart(report(), "glm5_next_" + std::string(dtype_name(t))), MlaDecode::latent);
}

// The latent form under the step laws: a captured graph replays the eager steps bit for bit
// (switching the arm re-captures: the graph's arms are part of its staleness), and under the
// equalised composition decode_step_batch over two caches gives each sequence's decode_step rows.
TEST_F(GpuModel, MlaLatentGraphAndBatchEqualEager) {
  for (Family f : {Family::GlmDsa, Family::Glm5Next}) {
    Loaded& m = loaded(f, DType::Q8_0, true);
    Arms a = Arms::equalised();
    a.mla_decode = MlaDecode::latent;
    testing::ScopedArms<Model> arm(*m.gpu, a);
    const auto p = testing_fixtures::prompt(40, m.fx.config.n_vocab, 29),
               p2 = testing_fixtures::prompt(40, m.fx.config.n_vocab, 31);
    Cache eager = m.gpu->new_cache(40), e2 = m.gpu->new_cache(40);
    m.gpu->prime_cache(std::span(p).first(20), eager);
    m.gpu->prime_cache(std::span(p2).first(20), e2);
    std::vector<std::vector<float>> rows, rows2;
    for (size_t i = 20; i < 40; ++i) {
      rows.push_back(m.gpu->decode_step(p[i], eager).logits);
      rows2.push_back(m.gpu->decode_step(p2[i], e2).logits);
    }
    // graph: expanded captures first, then the latent arm must re-capture, not replay them
    Cache g = m.gpu->new_cache(40);
    m.gpu->prime_cache(std::span(p).first(20), g);
    Arms ag = a;
    ag.decode_graph = true;
    ag.mla_decode = MlaDecode::expanded;
    m.gpu->set_arms(ag);
    Cache warm = m.gpu->new_cache(40);
    m.gpu->prime_cache(std::span(p).first(20), warm);
    m.gpu->decode_step(p[20], warm);
    ag.mla_decode = MlaDecode::latent;
    m.gpu->set_arms(ag);
    const Counters c0 = m.gpu->counters();
    const std::vector<float> warm_latent = m.gpu->decode_step(p[21], warm).logits;
    EXPECT_GT(m.gpu->counters().recaptures, c0.recaptures) << m.fx.id << ": the arm switch replayed a stale graph";
    for (size_t i = 20; i < 40; ++i)
      EXPECT_THAT(m.gpu->decode_step(p[i], g).logits, testing::BitIdentical(rows[i - 20]))
          << m.fx.id << ": graph step " << i;
    EXPECT_GT(m.gpu->counters().replays, c0.replays) << m.fx.id;
    // batch: both sequences in one decode_step_batch per step
    m.gpu->set_arms(a);
    Cache b1 = m.gpu->new_cache(40), b2 = m.gpu->new_cache(40);
    m.gpu->prime_cache(std::span(p).first(20), b1);
    m.gpu->prime_cache(std::span(p2).first(20), b2);
    const int64_t steps0 = m.gpu->counters().batch_steps;
    for (size_t i = 20; i < 40; ++i) {
      const int32_t toks[2] = {p[i], p2[i]};
      Cache* cs[2] = {&b1, &b2};
      const std::vector<std::vector<float>> r = m.gpu->decode_step_batch(toks, cs);
      EXPECT_THAT(r[0], testing::BitIdentical(rows[i - 20])) << m.fx.id << ": batched step " << i << ", sequence 0";
      EXPECT_THAT(r[1], testing::BitIdentical(rows2[i - 20])) << m.fx.id << ": batched step " << i << ", sequence 1";
    }
    EXPECT_EQ(m.gpu->counters().batch_steps - steps0, 20) << m.fx.id << ": the batched body did not serve the steps";
  }
}

// A long prompt p of n tokens under the law's arms (PrimeDecodeEqualsForwardLast): prime(p[:primed]),
// decode p[primed..n-1) token by token, then the step of p[n-1] == forward_last(p), bitwise.
void expect_long_prefill_equals_decode(Loaded& m, int n, int primed, uint32_t seed, const char* what) {
  Arms a = m.gpu->arms();
  a.prefill_matmul = PrefillMatmul::mmvq;
  testing::ScopedArms<Model> arm(*m.gpu, a);
  const auto p = testing_fixtures::prompt(n, m.fx.config.n_vocab, seed);
  const std::vector<float> full = m.gpu->forward_last(p);
  Cache cache = m.gpu->new_cache(n);
  m.gpu->prime_cache(std::span(p).first(static_cast<size_t>(primed)), cache);
  for (int i = primed; i < n - 1; ++i) m.gpu->decode_step(p[static_cast<size_t>(i)], cache);
  EXPECT_THAT(m.gpu->decode_step(p.back(), cache).logits, testing::BitIdentical(full)) << m.fx.id << ": " << what;
}

// GLM-5's hybrid over a long prompt (200 tokens, 50 pools): prime(p[:100]) + the rest decoded
// token by token == forward_last(p), bitwise — KDA's recurrence and conv ring, and pools closed by a prefill's
// tokens, are exactly a one-token step's.
TEST_F(GpuModel, Glm5NextLongPrefillEqualsDecode) {
  for (DType t : {DType::F32, DType::Q8_0})
    expect_long_prefill_equals_decode(loaded(Family::Glm5Next, t, true), 200, 100, 41,
                                      "a long prefill and its token-by-token decode differ");
}

// DeepSeek-V4 over a long prompt (200 tokens: 50 CSA rows for the indexer's 4, 25 HCA rows, the
// 8-key window slid 192 times): prime(p[:100]) + the rest decoded == forward_last(p), bitwise —
// the compressors close windows whose tokens span calls, the indexer scores a prefill's queries
// each over its own visible rows, exactly as one-token steps do.
TEST_F(GpuModel, Dsv4LongPrefillEqualsDecode) {
  for (DType t : {DType::F32, DType::Q8_0})
    expect_long_prefill_equals_decode(loaded(Family::DeepseekV4, t, false), 200, 100, 37,
                                      "a long prefill and its token-by-token decode differ");
}

// GLM-5's indexer scores a long prompt a chunk of queries at a time (Workspace::mla_score_rows,
// at most 1024 rows): prime(p[:n-1]) + decode(p[n-1]) == forward_last(p), bitwise, at n = 1100,
// so a chunk's queries (positions offset by the chunk's first row) score and select exactly as
// a one-token step does; the last row's logits depend on every earlier row through the later
// layers' keys and values.
TEST_F(GpuModel, GlmDsaChunkedIndexerPrefillEqualsDecode) {
  for (DType t : {DType::F32, DType::Q8_0})
    expect_long_prefill_equals_decode(loaded(Family::GlmDsa, t, true), 1100, 1099, 31,
                                      "the chunked indexer prefill and the decode step differ");
}

// --- canaries (their suites end in Canary: label canary, --gtest_filter='*Canary.*') ---------------

class GpuModelCanary : public GpuModel {};
// GLM-5's check with the residual after layer 0 scaled by 0.999 on the GPU: must FAIL. (Not the
// last layer: the final RMSNorm would undo a scale of the whole residual there.)
// The quantised band must reject it too (its bound is the oracle's tip scale, not the float one).
TEST_F(GpuModelCanary, GlmDsaScaledLayerFails) {
  Break brk;
  brk.scale_layer = 0;
  brk.scale_factor = 0.999f;
  for (auto [t, hf] : {std::pair{DType::F32, true}, std::pair{DType::Q8_0, false}}) {
    Loaded& m = loaded(Family::GlmDsa, t, hf);
    expect_gate_fails("the GPU's residual after GLM-5 layer 0 scaled by 0.999 (" + m.fx.id + ")", [&] {
      glm_follows_oracle(m, brk, testing::ReportPart(report(), "broken_" + std::string(dtype_name(t))));
    });
  }
}

// DeepSeek-V4's check with every stream after layer 0 scaled by 0.9 on the GPU: must FAIL. The
// hyper-connections absorb most of a uniform scale (the mix reads X / rms(X), the block its
// RMSNormed collapse; only the mix of scaled streams with unscaled block outputs moves), so 0.999
// moved the F32 rows by 3.9e-4 of the range and the Q8_0 ones by less than their tip-scale bound
// (measured on the H200): the defect is ten times GLM-5's.
TEST_F(GpuModelCanary, Dsv4ScaledLayerFails) {
  Break brk;
  brk.scale_layer = 0;
  brk.scale_factor = 0.9f;
  for (auto [t, hf] : {std::pair{DType::F32, false}, std::pair{DType::Q8_0, false}}) {
    Loaded& m = loaded(Family::DeepseekV4, t, hf);
    expect_gate_fails("the GPU's streams after DeepSeek-V4 layer 0 scaled by 0.9 (" + m.fx.id + ")", [&] {
      glm_follows_oracle(m, brk, testing::ReportPart(report(), "broken_" + std::string(dtype_name(t))));
    });
  }
}

// GLM-5's hybrid's check with every stream after layer 0 (a KDA layer) scaled by 0.9 on the GPU:
// must FAIL (the hyper-connections absorb most of a uniform scale, as in DeepSeek-V4's canary).
TEST_F(GpuModelCanary, Glm5NextScaledLayerFails) {
  Break brk;
  brk.scale_layer = 0;
  brk.scale_factor = 0.9f;
  for (DType t : {DType::F32, DType::Q8_0}) {
    Loaded& m = loaded(Family::Glm5Next, t, true);
    expect_gate_fails("the GPU's streams after GLM-5 hybrid layer 0 scaled by 0.9 (" + m.fx.id + ")", [&] {
      glm_follows_oracle(m, brk, testing::ReportPart(report(), "broken_" + std::string(dtype_name(t))));
    });
  }
}

// The latent form's check with head h's query absorbed through head h+1's W_UK
// (Break::mla_latent_wrong_head): must FAIL, on GLM-5 and on its hybrid.
TEST_F(GpuModelCanary, MlaLatentWrongHeadFails) {
  Break brk;
  brk.mla_latent_wrong_head = true;
  for (Family f : {Family::GlmDsa, Family::Glm5Next}) {
    Loaded& m = loaded(f, DType::F32, true);
    expect_gate_fails("the latent form's queries absorbed through the next head's W_UK (" + m.fx.id + ")", [&] {
      glm_follows_oracle(m, brk, testing::ReportPart(report(), "broken_latent_" + m.fx.id), MlaDecode::latent);
    });
  }
}

TEST_F(GpuModelCanary, BrokenLaunchOverlapFails) {
  expect_gate_fails("overlap arms on other f32 roundings (chunked GDN prefill, dp4a mat-vec): a stand-in for a race",
                    [&] { launch_overlap_body(loaded(Family::Qwen35, DType::F32, false), true, report()); });
}

}  // namespace
}  // namespace memra
