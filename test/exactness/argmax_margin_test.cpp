// Gate: ArgmaxMargin (GATES.md §4; seed argmax_margin_probe.rs) — does an arm whose reduction
// order differs from tokenwise decode flip greedy decisions only at near-ties?
//
// For the last W positions of a real text prompt (the tiny fixtures carry the Qwen3 tokenizer):
//   config A: tokenwise decode_step over the whole prompt, the row at each of those positions
//             (m = 1: never the arm under test);
//   config B: forward_last on each truncation, under the arm under test.
// classify_margin_window (memra/testing/records.h) takes the top-2 margins under both configs,
// the config delta at the contending ids and the flips, and classifies the window as the seed
// does: STABLE / NEAR-TIE-EXPOSED / NEAR-TIE pass, UNEXPLAINED / SYSTEMATIC fail
// (MarginClassPasses). Each case runs two prompts (two windows) and reports each window's class,
// margin distributions and the decision's percentile, plus the class counts.
// Arms (every one whose reduction order differs from decode), on every fixture they apply to:
//   gemm     prefill_matmul = mma: the int8 / split-bf16 tensor-core GEMM for calls >= 32 tokens
//            (BF16, Q8_0, NVFP4 fixtures);
//   chunked  gdn_prefill = chunked: the WY form over 64-token chunks (the hybrid families, GDN's
//            and GLM-5's hybrid's KDA layers);
//   w4a4     prefill_act = w4a4: e2m1 activations for NVFP4 mat-muls (NVFP4 fixtures);
//   latent   mla_decode = latent: MLA's absorbed latent form (GLM-5 and its hybrid). A decode arm:
//            its config B is tokenwise decode_step over the prompt under the arm, not forward_last.
//   flash    prefill_attn = flash: the key-tiled online-softmax attention for calls of more than
//            one token (the Qwen families' attention layers).
//   pair32   nvfp4_dot = pair32: NVFP4 x q8_1 mat-vec dots per q8_1 block (quant.h
//            dot_nvfp4_q8_1_pair32; NVFP4 fixtures). A decode arm, as latent.
// Fixtures: every tiny one the arm applies to, and the realistic ones (file_fixture.h "real-*").
// The gate DECIDES whether an arm is servable; none of these arms is the default (the default is
// the decode-identical form), so a case reports the verdict it finds — class counts, windows,
// "verdict" in the report and as a test property — and asserts what makes that verdict valid
// (the arm engaged; the windows classified). An arm listed in kServable is one the project
// serves: its cases assert PASS. A user checkpoint's cases assert PASS for every arm (the
// question a user asks: may I serve this arm on my model?).
// Measured on the H200 (docs/testing.md "ArgmaxMargin"): on the tiny fixtures gemm and chunked are
// STABLE (at D = 64 their sums come out in the same order: delta 0 or ~1e-5) and w4a4 SYSTEMATIC;
// on realistic widths gemm flips 2 positions in 24 (SYSTEMATIC) on Qwen3-0.6B Q8_0 / NVFP4 and
// Qwen3.5-9B-layer Q8_0: the GEMM prefill is not servable there by the seed's rule.
// Non-vacuity: the arm's launch counter moved. Canary (MarginCanary): config A with
// a biased logit (Break::bias_id, +64 on one id, on the decode path only) must be SYSTEMATIC.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "exactness/file_fixture.h"
#include "memra/model.h"
#include "memra/testing/gate.h"
#include "memra/testing/matchers.h"
#include "memra/testing/records.h"
#include "memra/testing/report.h"

namespace memra {
namespace {

using gpu_test::FileFixture;

constexpr size_t kWindow = 24;

// Two prompts of ~100 tokens: windows past 64 tokens, so the chunked GDN form spans two chunks
// and every truncation is a GEMM-sized call.
const std::vector<std::string>& margin_prompts() {
  static const std::vector<std::string> p = {
      "A teacher-forced comparison feeds both engines the same tokens, so every position is an independent "
      "check. When the two disagree, the question is whether the reference was nearly indifferent between "
      "the two candidates or clearly preferred one of them. A near tie is a coin that any change of "
      "summation order can turn; a clear preference that flips is a defect worth a bisect.",
      "The recurrent state of a gated delta rule layer is a small matrix per head. Each token writes a "
      "rank-one correction into it, scaled by a learned step size, after the whole matrix decays by a "
      "learned gate. Reading the state with the query gives the layer's output, which a gated norm and an "
      "output projection return to the residual stream, where the next block picks it up."};
  return p;
}

// The arms the project serves (their cases assert PASS); "gemm", "chunked", "w4a4", "latent",
// "flash", "pair32" are candidates.
const std::set<std::string> kServable = {};

Arms arm_under_test(const Model& gpu, const std::string& arm) {
  Arms a = gpu.arms();
  if (arm == "gemm")
    a.prefill_matmul = PrefillMatmul::mma;
  else if (arm == "chunked")
    a.gdn_prefill = GdnPrefill::chunked;
  else if (arm == "w4a4")
    a.prefill_act = PrefillAct::w4a4;
  else if (arm == "latent")
    a.mla_decode = MlaDecode::latent;
  else if (arm == "flash")
    a.prefill_attn = PrefillAttn::flash;
  else if (arm == "pair32")
    a.nvfp4_dot = Nvfp4Dot::pair32;
  else
    fail("ArgmaxMargin: no arm '", arm, "' (gemm, chunked, w4a4, latent, flash, pair32)");
  return a;
}

int64_t arm_counter(const Counters& c, const std::string& arm) {
  if (arm == "gemm") return c.gemm_launches;
  if (arm == "chunked") return c.gdn_chunked_launches;
  if (arm == "latent") return c.mla_latent_launches;
  if (arm == "flash") return c.flash_attn_launches;
  if (arm == "pair32") return c.nvfp4_pair32_launches;
  return c.w4a4_launches;
}

// The decode arms: config B is tokenwise decode under the arm, not forward_last.
bool decode_arm(const std::string& arm) { return arm == "latent" || arm == "pair32"; }

// One window: config A rows by tokenwise decode, config B by forward_last per truncation (a
// decode arm's config B: tokenwise decode under the arm).
testing::MarginWindow margin_window(Model& gpu, const std::vector<int32_t>& prompt, const std::string& arm,
                                    int64_t& arm_launches) {
  const size_t T = prompt.size();
  if (T < kWindow + 2) fail("ArgmaxMargin: the prompt has ", T, " tokens, the window needs more than ", kWindow + 2);
  std::vector<std::vector<float>> a, b;
  Cache c = gpu.new_cache(static_cast<int64_t>(T));
  for (size_t i = 0; i < T; ++i) {
    std::vector<float> row = gpu.decode_step(prompt[i], c).logits;
    if (i + kWindow >= T) a.push_back(std::move(row));
  }
  testing::ScopedArms<Model> scoped(gpu, arm_under_test(gpu, arm));
  const int64_t before = arm_counter(gpu.counters(), arm);
  if (decode_arm(arm)) {
    Cache cb = gpu.new_cache(static_cast<int64_t>(T));
    for (size_t i = 0; i < T; ++i) {
      std::vector<float> row = gpu.decode_step(prompt[i], cb).logits;
      if (i + kWindow >= T) b.push_back(std::move(row));
    }
  } else {
    for (size_t i = T - kWindow; i < T; ++i) b.push_back(gpu.forward_last(std::span(prompt).first(i + 1)));
  }
  arm_launches += arm_counter(gpu.counters(), arm) - before;
  return testing::classify_margin_window(a, b, T - kWindow);
}

class MarginGate : public testing::GpuGateTest<FileFixture> {
 protected:
  std::unique_ptr<FileFixture> load_model(const std::string& id) override { return gpu_test::load_file_fixture(id); }
  void SetUp() override {
    if (gpu_test::skip_user_case_without_model(GetParam().model)) GTEST_SKIP() << gpu_test::kNoUserModel;
    testing::GpuGateTest<FileFixture>::SetUp();
  }
};

// The gate on one fixture and arm; returns the windows (their verdicts are the EXPECTs').
std::vector<testing::MarginWindow> margin_gate(FileFixture& m, const std::string& arm, testing::Report& rep) {
  std::vector<testing::MarginWindow> ws;
  int64_t launches = 0;
  std::map<std::string, int> counts;
  nlohmann::json windows = nlohmann::json::array();
  const std::vector<std::string> user =
      gpu_test::user_case(m.id) ? gpu_test::user_prompts() : std::vector<std::string>{};
  for (const std::string& text : user.empty() ? margin_prompts() : user) {
    const std::vector<int32_t> prompt = m.tokenizer->encode(text);
    ws.push_back(margin_window(*m.gpu, prompt, arm, launches));
    const testing::MarginWindow& w = ws.back();
    ++counts[std::string(testing::to_string(w.cls))];
    nlohmann::json j = testing::to_json(w);
    j["prompt_tokens"] = prompt.size();
    j["decision_text"] = {{"decode", m.tokenizer->decode(std::vector<int32_t>{w.at_decision().a.id1})},
                          {"prefill", m.tokenizer->decode(std::vector<int32_t>{w.at_decision().b.id1})}};
    windows.push_back(j);
    std::printf("[margin] %s/%s: %s, %zu flips, decision margin %.4g at percentile %.2f, delta %.3g\n", m.id.c_str(),
                arm.c_str(), std::string(testing::to_string(w.cls)).c_str(), w.flips, w.at_decision().a.margin(),
                w.decision_percentile, w.at_decision().delta_at_ids);
  }
  rep["fixture"] = m.id;
  rep.set_arms("config_b", arm_under_test(*m.gpu, arm));
  rep["windows"] = windows;
  rep["class_counts"] = counts;
  rep.figure("arm_launches", launches);
  for (const auto& [cls, n] : counts) rep.figure("class_" + cls, n);
  EXPECT_GT(launches, 0) << m.id << ": vacuous: the " << arm << " arm never engaged";
  return ws;
}

TEST_P(MarginGate, FlipsOnlyAtNearTies) {
  FileFixture& m = model();
  const std::string arm = GetParam().arms;
  const std::vector<testing::MarginWindow> ws = margin_gate(m, arm, report());
  bool all_pass = true;
  for (const testing::MarginWindow& w : ws) all_pass = all_pass && w.passes();
  report()["verdict"] = all_pass ? "PASS" : "FAIL";
  RecordProperty("verdict", all_pass ? "PASS" : "FAIL");
  std::printf("[margin] %s/%s verdict: %s\n", m.id.c_str(), arm.c_str(), all_pass ? "PASS" : "FAIL");
  if (kServable.contains(arm) || gpu_test::user_case(m.id)) {
    for (const testing::MarginWindow& w : ws) EXPECT_THAT(w, testing::MarginClassPasses()) << m.id << "/" << arm;
  }
}

INSTANTIATE_TEST_SUITE_P(TinyGemm, MarginGate,
                         ::testing::ValuesIn(testing::gate_cases(gpu_test::file_fixture_ids({"bf16", "q8_0", "nvfp4"}),
                                                                 {"gemm"})),
                         testing::CaseName());
INSTANTIATE_TEST_SUITE_P(
    TinyChunked, MarginGate,
    ::testing::ValuesIn(testing::gate_cases(gpu_test::file_fixture_ids({"f32", "bf16", "q8_0", "nvfp4"},
                                                                       {"qwen3next", "qwen35", "qwen35moe"}),
                                            {"chunked"})),
    testing::CaseName());
// The flash prefill attention on every Qwen family (the tiny fixtures' head_dim 16).
INSTANTIATE_TEST_SUITE_P(TinyFlash, MarginGate,
                         ::testing::ValuesIn(testing::gate_cases(gpu_test::file_fixture_ids({"f32", "q8_0", "nvfp4"}),
                                                                 {"flash"})),
                         testing::CaseName());
// GLM-5's hybrid (its f32 HF directory): the chunked arm over its KDA layers.
INSTANTIATE_TEST_SUITE_P(TinyGlm5NextChunked, MarginGate,
                         ::testing::ValuesIn(testing::gate_cases({"glm5-next-f32"}, {"chunked"})), testing::CaseName());
// The pair32 NVFP4 dot contract on every NVFP4 fixture (every family's mat-vecs and MoE experts).
INSTANTIATE_TEST_SUITE_P(TinyPair32, MarginGate,
                         ::testing::ValuesIn(testing::gate_cases(gpu_test::file_fixture_ids({"nvfp4"}), {"pair32"})),
                         testing::CaseName());
INSTANTIATE_TEST_SUITE_P(TinyW4a4, MarginGate,
                         ::testing::ValuesIn(testing::gate_cases(gpu_test::file_fixture_ids({"nvfp4"}), {"w4a4"})),
                         testing::CaseName());
// DeepSeek-V4 (the seed's own model; its tiny GGUFs): the GEMM arm over its projections and
// grouped experts, and W4A4 on the NVFP4 file.
INSTANTIATE_TEST_SUITE_P(
    TinyDsv4, MarginGate,
    ::testing::ValuesIn(testing::gate_cases(gpu_test::file_fixture_ids({"q8_0", "nvfp4"}, {"deepseek4"}), {"gemm"})),
    testing::CaseName());
INSTANTIATE_TEST_SUITE_P(TinyDsv4W4a4, MarginGate,
                         ::testing::ValuesIn(testing::gate_cases({"deepseek4-nvfp4"}, {"w4a4"})), testing::CaseName());
// GLM-5 (the seed's DecodeGraph model; its tiny GGUFs, kv_b split as llama.cpp's converter
// writes it): the GEMM arm over its MLA and indexer projections and grouped experts, and W4A4 on
// the NVFP4 file.
INSTANTIATE_TEST_SUITE_P(
    TinyGlm, MarginGate,
    ::testing::ValuesIn(testing::gate_cases(gpu_test::file_fixture_ids({"q8_0", "nvfp4"}, {"glm-dsa"}), {"gemm"})),
    testing::CaseName());
// MLA's absorbed latent decode on GLM-5 (f32 HF, Q8_0 and NVFP4 GGUF) and its hybrid.
INSTANTIATE_TEST_SUITE_P(TinyGlmLatent, MarginGate,
                         ::testing::ValuesIn(testing::gate_cases(
                             {"glm-dsa-f32", "glm-dsa-q8_0", "glm-dsa-nvfp4", "glm5-next-f32"}, {"latent"})),
                         testing::CaseName());
INSTANTIATE_TEST_SUITE_P(TinyGlmW4a4, MarginGate, ::testing::ValuesIn(testing::gate_cases({"glm-dsa-nvfp4"}, {"w4a4"})),
                         testing::CaseName());
INSTANTIATE_TEST_SUITE_P(RealGemm, MarginGate,
                         ::testing::ValuesIn(testing::gate_cases(gpu_test::real_fixture_ids({"q8_0", "nvfp4"}),
                                                                 {"gemm"})),
                         testing::CaseName());
INSTANTIATE_TEST_SUITE_P(RealChunked, MarginGate,
                         ::testing::ValuesIn(testing::gate_cases(
                             gpu_test::real_fixture_ids({"q8_0", "nvfp4"}, {"qwen35-9b", "qwen35-35b-a3b"}),
                             {"chunked"})),
                         testing::CaseName());
INSTANTIATE_TEST_SUITE_P(RealFlash, MarginGate,
                         ::testing::ValuesIn(testing::gate_cases(gpu_test::real_fixture_ids({"q8_0", "nvfp4"}),
                                                                 {"flash"})),
                         testing::CaseName());
INSTANTIATE_TEST_SUITE_P(RealPair32, MarginGate,
                         ::testing::ValuesIn(testing::gate_cases(gpu_test::real_fixture_ids({"nvfp4"}), {"pair32"})),
                         testing::CaseName());
INSTANTIATE_TEST_SUITE_P(RealW4a4, MarginGate,
                         ::testing::ValuesIn(testing::gate_cases(gpu_test::real_fixture_ids({"nvfp4"}), {"w4a4"})),
                         testing::CaseName());
INSTANTIATE_TEST_SUITE_P(User, MarginGate,
                         ::testing::ValuesIn(testing::gate_cases({"user"},
                                                                 {"gemm", "chunked", "w4a4", "flash", "pair32"})),
                         testing::CaseName());

// --- canaries (their suites end in Canary: label canary, --gtest_filter='*Canary.*') ---------------

// Config A with logit `id` raised by 64 (top-1 logits of these fixtures are ~40, margins ~1): the
// biased id wins every decode position, config B never sees the bias: SYSTEMATIC.
class MarginCanary : public MarginGate {};
TEST_P(MarginCanary, BiasedDecodeLogitIsSystematic) {
  FileFixture& m = model();
  Break brk;
  brk.bias_id = 13;
  brk.bias_value = 64.0f;
  m.gpu->set_break(brk);
  std::vector<testing::MarginWindow> ws;
  expect_gate_fails("decode logit 13 biased by +64", [&] {
    ws = margin_gate(m, GetParam().arms, report());
    for (const testing::MarginWindow& w : ws) EXPECT_THAT(w, testing::MarginClassPasses()) << m.id;
  });
  m.gpu->set_break(Break{});
  for (const testing::MarginWindow& w : ws) EXPECT_EQ(w.cls, testing::MarginClass::systematic) << m.id;
}
INSTANTIATE_TEST_SUITE_P(Tiny, MarginCanary,
                         ::testing::ValuesIn(testing::gate_cases({"qwen3-q8_0", "qwen35-nvfp4"}, {"gemm"})),
                         testing::CaseName());
INSTANTIATE_TEST_SUITE_P(TinyChunked, MarginCanary,
                         ::testing::ValuesIn(testing::gate_cases({"qwen3next-f32"}, {"chunked"})), testing::CaseName());

}  // namespace
}  // namespace memra
