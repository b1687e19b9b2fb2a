// Gate: ArmFork (GATES.md §1; seed w4a4_gate.rs) — does switching the quantised prefill arm fork
// greedy decode anywhere the reference arm itself could not resolve?
//
// Reference arm: W4A8 (q8_1 activations) through the tensor-core GEMM prime (prefill_matmul =
// mma, the batched serving path). Its entry-point noise — |GEMM prime − tokenwise decode| at the
// contending ids — is non-zero by construction (another summation order), and the case checks it
// is: a floor of 0 would make WithinEntryNoise mean "no fork at all".
// Fixtures: the realistic ones (file_fixture.h "real-*": Qwen3-0.6B, Qwen3.5-9B layers; Q8_0 and
// NVFP4). On the tiny fixtures (D = 64) a row is two q8 blocks, which the GEMM and the mat-vec
// sum in the same order: the reference's entry noise is exactly 0 there (measured on the H200)
// and the gate would be vacuous, so it does not run on them.
// Per arm, on one loaded model, three passes over a real text prompt (>= 32 tokens, the GEMM's
// minimum; the reference's GEMM launches are checked, else the case FAILS as vacuous):
//   1. forward_last → the prefill row and argmax;
//   2. tokenwise decode_step over the prompt → the decode row (the arm-invariant control: m = 1
//      never reaches a prefill arm, so both arms' decode rows must be the same bits), the self
//      maxdiff |prefill − decode|, and a greedy continuation off that cache: the noise stream;
//   3. prime_cache + greedy continuation: the serving stream.
// Verdict (WithinEntryNoise): the serving streams agree, or at their first fork p the reference
// arm's margin between the two candidates is within its own entry noise there (|serving −
// noise| of its deciding rows at both ids): a coin flip no arm resolves.
// Test arms:
//   w4a4     prefill_act = w4a4 (e2m1 activations, per-16 ue4m3 scales) on the token-tiled path.
//            Not a servable arm: its case reports the gate's verdict per fixture (report
//            "w4a4_verdict", the run's output) and asserts only what makes the verdict valid (the
//            arm engaged, the floor is non-zero, decode never saw the arm). A user checkpoint's
//            w4a4 case asserts the verdict: that is the question a user asks.
//   control  W4A8 on the token-tiled mat-vec (prefill_matmul = mmvq): differs from the reference
//            only by summation order — the positive control, which must PASS on every fixture.
// Canary (ArmForkCanary): the W4A4 arm with its activation quantiser dropping the block
// scale (Break::w4a4_drop_block_scale) must FAIL.
// Report: both arms' prefill and decode argmaxes, floors (where each arm's own two streams part),
// the first divergence with both arms' logits at both ids, self and cross maxdiffs, every pass's
// token stream and its decoded text.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "exactness/file_fixture.h"
#include "memra/model.h"
#include "memra/testing/gate.h"
#include "memra/testing/matchers.h"
#include "memra/testing/records.h"
#include "memra/testing/report.h"

namespace memra {
namespace {

using gpu_test::FileFixture;

constexpr int kGen = 32;  // greedy tokens per stream

const std::map<std::string, std::string>& arm_fork_prompts() {
  static const std::map<std::string, std::string> p = {
      {"essay",
       "Quantising the activations of a matrix product to four bits halves the bytes the tensor cores read "
       "again, but every value now carries a rounding error of a few percent. Whether that changes what a "
       "model says is an empirical question, asked one position at a time."},
  };
  return p;
}

Arms reference_arms(const Model& gpu) {
  Arms a = gpu.arms();
  a.prefill_act = PrefillAct::w4a8;
  a.prefill_matmul = PrefillMatmul::mma;
  return a;
}

Arms test_arms(const Model& gpu, const std::string& arm) {
  Arms a = reference_arms(gpu);
  a.prefill_matmul = PrefillMatmul::mmvq;
  if (arm == "w4a4")
    a.prefill_act = PrefillAct::w4a4;
  else if (arm != "control")
    fail("ArmFork: no test arm '", arm, "' (w4a4, control)");
  return a;
}

struct ArmPasses {
  std::vector<float> prefill_row, decode_row;
  testing::GreedyStream serving, noise;
  int64_t gemm_launches = 0, w4a4_launches = 0;
  float self_maxdiff = 0;  // max |prefill row - decode row|
};

// Greedy from `row` for n tokens, each with the row that decided it.
void greedy_from(Model& m, Cache& c, std::vector<float> row, int n, testing::GreedyStream& out) {
  for (int i = 0; i < n; ++i) {
    const int32_t t = testing::argmax(row);
    out.tokens.push_back(t);
    out.rows.push_back(row);
    if (i + 1 < n) row = m.decode_step(t, c).logits;
  }
}

float maxdiff(const std::vector<float>& a, const std::vector<float>& b) {
  float d = 0;
  for (size_t i = 0; i < a.size(); ++i) d = std::max(d, std::fabs(a[i] - b[i]));
  return d;
}

ArmPasses arm_passes(Model& gpu, const Arms& arms, const std::vector<int32_t>& prompt) {
  testing::ScopedArms<Model> scoped(gpu, arms);
  ArmPasses r;
  const Counters c0 = gpu.counters();
  const int64_t ctx = static_cast<int64_t>(prompt.size()) + kGen;
  r.prefill_row = gpu.forward_last(prompt);
  Cache tc = gpu.new_cache(ctx);
  for (int32_t t : prompt) r.decode_row = gpu.decode_step(t, tc).logits;
  greedy_from(gpu, tc, r.decode_row, kGen, r.noise);
  Cache sc = gpu.new_cache(ctx);
  greedy_from(gpu, sc, gpu.prime_cache(prompt, sc).logits, kGen, r.serving);
  r.gemm_launches = gpu.counters().gemm_launches - c0.gemm_launches;
  r.w4a4_launches = gpu.counters().w4a4_launches - c0.w4a4_launches;
  r.self_maxdiff = maxdiff(r.prefill_row, r.decode_row);
  return r;
}

class ArmForkGate : public testing::GpuGateTest<FileFixture> {
 protected:
  std::unique_ptr<FileFixture> load_model(const std::string& id) override { return gpu_test::load_file_fixture(id); }
  void SetUp() override {
    if (gpu_test::skip_user_case_without_model(GetParam().model)) GTEST_SKIP() << gpu_test::kNoUserModel;
    testing::GpuGateTest<FileFixture>::SetUp();
  }
  std::vector<int32_t> prompt() {
    if (gpu_test::user_case(GetParam().model) && !gpu_test::user_prompts().empty())
      return model().tokenizer->encode(gpu_test::user_prompts().front());
    const auto it = arm_fork_prompts().find(GetParam().prompt);
    if (it == arm_fork_prompts().end()) fail("ArmFork: no prompt '", GetParam().prompt, "'");
    return model().tokenizer->encode(it->second);
  }
};

// Both arms' passes, the report and the non-verdict checks; returns the fork.
testing::Divergence arm_fork_run(FileFixture& m, const std::string& arm, const std::vector<int32_t>& prompt,
                                 testing::Report& rep) {
  const Arms ra = reference_arms(*m.gpu), ta = test_arms(*m.gpu, arm);
  const ArmPasses ref = arm_passes(*m.gpu, ra, prompt);
  const ArmPasses test = arm_passes(*m.gpu, ta, prompt);
  const testing::Divergence d = testing::first_divergence(ref.serving, test.serving, ref.noise);
  auto floor_of = [](const ArmPasses& a) {
    const auto f = testing::floor_position(a.serving.tokens, a.noise.tokens);
    return f ? static_cast<int64_t>(*f) : int64_t{-1};
  };
  auto text = [&](const std::vector<int32_t>& ids) { return m.tokenizer->decode(ids); };
  rep["fixture"] = m.id;
  rep.set_arms("reference", ra);
  rep.set_arms("test", ta);
  rep["prompt"] = {{"tokens", prompt.size()}, {"text", text(prompt)}};
  rep["first_divergence"] = testing::to_json(d);
  rep["prefill_argmax"] = {{"reference", testing::argmax(ref.prefill_row)},
                           {"test", testing::argmax(test.prefill_row)}};
  rep["decode_argmax"] = {{"reference", testing::argmax(ref.decode_row)}, {"test", testing::argmax(test.decode_row)}};
  rep["maxdiff"] = {{"self_reference", ref.self_maxdiff},
                    {"self_test", test.self_maxdiff},
                    {"cross_prefill", maxdiff(ref.prefill_row, test.prefill_row)},
                    {"cross_decode", maxdiff(ref.decode_row, test.decode_row)}};
  rep["streams"] = {{"reference_serving", ref.serving.tokens},
                    {"reference_noise", ref.noise.tokens},
                    {"test_serving", test.serving.tokens},
                    {"test_noise", test.noise.tokens}};
  rep["text"] = {{"reference_serving", text(ref.serving.tokens)},
                 {"reference_noise", text(ref.noise.tokens)},
                 {"test_serving", text(test.serving.tokens)},
                 {"test_noise", text(test.noise.tokens)}};
  rep.figure("reference_floor", floor_of(ref));
  rep.figure("test_floor", floor_of(test));
  rep.figure("first_divergence", d.position ? static_cast<int64_t>(*d.position) : int64_t{-1});
  rep.figure("reference_self_maxdiff", ref.self_maxdiff);
  rep.figure("reference_gemm_launches", ref.gemm_launches);
  rep.figure("test_w4a4_launches", test.w4a4_launches);
  std::printf(
      "[armfork] %s/%s: floors ref %lld / test %lld, first divergence %lld (margin %.4g, entry noise %.4g), "
      "self maxdiff ref %.3g, cross %.3g\n",
      m.id.c_str(), arm.c_str(), static_cast<long long>(floor_of(ref)), static_cast<long long>(floor_of(test)),
      d.position ? static_cast<long long>(*d.position) : -1LL, d.ref_margin, d.entry_noise, ref.self_maxdiff,
      maxdiff(ref.prefill_row, test.prefill_row));
  // non-vacuity: the reference primed through the GEMM, the test arm engaged, the floor is real
  EXPECT_GT(ref.gemm_launches, 0) << m.id << ": vacuous: the reference never reached the GEMM (prompt of "
                                  << prompt.size() << " tokens)";
  EXPECT_GT(ref.self_maxdiff, 0.0f) << m.id << ": the reference's entry noise is 0: the floor is vacuous";
  if (arm == "w4a4") { EXPECT_GT(test.w4a4_launches, 0) << m.id << ": vacuous: the W4A4 arm never engaged"; }
  EXPECT_EQ(ref.w4a4_launches, 0) << m.id;
  EXPECT_THAT(test.decode_row, testing::BitIdentical(ref.decode_row))
      << m.id << ": tokenwise decode (m = 1) saw the prefill arm";
  return d;
}

// The gate's verdict on the test arm.
[[maybe_unused]] testing::Divergence arm_fork_gate(FileFixture& m, const std::string& arm,
                                                   const std::vector<int32_t>& prompt, testing::Report& rep) {
  const testing::Divergence d = arm_fork_run(m, arm, prompt, rep);
  EXPECT_THAT(d, testing::WithinEntryNoise()) << m.id << "/" << arm;
  return d;
}

// The positive control: a pure summation-order difference must pass, on every fixture.
TEST_P(ArmForkGate, ControlWithinEntryNoise) { arm_fork_gate(model(), GetParam().arms, prompt(), report()); }
INSTANTIATE_TEST_SUITE_P(Real, ArmForkGate,
                         ::testing::ValuesIn(testing::gate_cases(gpu_test::real_fixture_ids({"q8_0", "nvfp4"}),
                                                                 {"control"}, {"essay"})),
                         testing::CaseName());

// W4A4 against the reference: the verdict found, reported (asserted for a user checkpoint).
class ArmForkW4a4 : public ArmForkGate {};
TEST_P(ArmForkW4a4, VerdictReported) {
  FileFixture& m = model();
  const testing::Divergence d = arm_fork_run(m, "w4a4", prompt(), report());
  const bool passes = d.within_entry_noise();
  report()["w4a4_verdict"] = passes ? "PASS" : "FAIL";
  RecordProperty("w4a4_verdict", passes ? "PASS" : "FAIL");
  std::printf("[armfork] %s/w4a4 verdict: %s\n", m.id.c_str(), passes ? "PASS" : "FAIL");
  if (gpu_test::user_case(m.id)) {
    EXPECT_THAT(d, testing::WithinEntryNoise()) << "your checkpoint: W4A4 forks outside the reference's noise";
  }
}
INSTANTIATE_TEST_SUITE_P(Real, ArmForkW4a4,
                         ::testing::ValuesIn(testing::gate_cases(gpu_test::real_fixture_ids({"nvfp4"}), {"w4a4"},
                                                                 {"essay"})),
                         testing::CaseName());
INSTANTIATE_TEST_SUITE_P(User, ArmForkGate, ::testing::ValuesIn(testing::gate_cases({"user"}, {"control"}, {"essay"})),
                         testing::CaseName());
INSTANTIATE_TEST_SUITE_P(User, ArmForkW4a4, ::testing::ValuesIn(testing::gate_cases({"user"}, {"w4a4"}, {"essay"})),
                         testing::CaseName());

// --- canaries (their suites end in Canary: label canary, --gtest_filter='*Canary.*') ---------------

// W4A4 with the activation quantiser dropping every block scale: the gate must FAIL.
class ArmForkCanary : public ArmForkGate {};
TEST_P(ArmForkCanary, W4a4WithoutBlockScalesFails) {
  FileFixture& m = model();
  Break brk;
  brk.w4a4_drop_block_scale = true;
  m.gpu->set_break(brk);
  expect_gate_fails("the W4A4 activation quantiser drops the block scale",
                    [&] { arm_fork_gate(m, "w4a4", prompt(), report()); });
  m.gpu->set_break(Break{});
}
INSTANTIATE_TEST_SUITE_P(Real, ArmForkCanary,
                         ::testing::ValuesIn(testing::gate_cases(gpu_test::real_fixture_ids({"nvfp4"}), {"w4a4"},
                                                                 {"essay"})),
                         testing::CaseName());

}  // namespace
}  // namespace memra
