// The engine's host side on any machine (label cpu): device count without a GPU, and argument
// errors that must be raised before any CUDA call.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "cuda/device_weights.h"
#include "cuda/quantize.cuh"
#include "cuda/timeline.h"
#include "memra/cache.h"
#include "memra/engine.h"
#include "memra/error.h"
#include "memra/fixture.h"
#include "memra/model.h"
#include "memra/testing/errors.h"

namespace {

using ::testing::HasSubstr;
using memra::testing::error_message;

std::string open_error(int device) {
  try {
    memra::Engine::open(device);
  } catch (const memra::Error& e) {
    return e.what();
  }
  return "<no error>";
}

TEST(EngineHost, DeviceCountNeverFailsAndOpenNamesTheRange) {
  const int n = memra::device_count();  // 0 on a machine without driver or GPU, no crash
  ASSERT_GE(n, 0);
  EXPECT_THAT(open_error(n), HasSubstr("device " + std::to_string(n) + " does not exist (" +
                                       std::to_string(n) + " CUDA device(s) visible)"));
  EXPECT_THAT(open_error(-1), HasSubstr("device -1 does not exist"));
}

TEST(EngineHost, KernelArgumentErrorsComeBeforeAnyLaunch) {
  using memra::DType;
  EXPECT_THAT(error_message([] { memra::cuda::dequantize_row_cuda(DType::Q8_0, nullptr, nullptr, 33, nullptr); }),
              HasSubstr("dequantize_row_cuda(q8_0): n = 33 is not a multiple of the block size 32"));
  EXPECT_THAT(error_message([] { memra::cuda::dequantize_row_cuda(DType::Q4_K, nullptr, nullptr, 256, nullptr); }),
              HasSubstr("type q4_K has no kernel"));
  EXPECT_THAT(error_message([] { memra::cuda::quantize_row_q8_1_cuda(nullptr, nullptr, 31, nullptr); }),
              HasSubstr("n = 31 is not a multiple of the block size 32"));
}

// A Cache not made by Model::new_cache holds nothing to move: re-seating, growing or resetting
// it is an error naming the operation, not a null dereference.
TEST(EngineHost, EmptyCacheOperationsAreErrors) {
  memra::Cache c;
  EXPECT_THAT(error_message([&] { c.reseat(0); }), HasSubstr("Cache::reseat: empty cache"));
  EXPECT_THAT(error_message([&] { c.grow(64); }), HasSubstr("Cache::grow: empty cache"));
  EXPECT_THAT(error_message([&] { c.reset(); }), HasSubstr("Cache::reset: empty cache"));
  EXPECT_EQ(c.max_ctx(), 0);
  EXPECT_EQ(c.pos(), 0);
}

// The in-graph timeline (cuda/timeline.h) is a diagnostic build option: without it, asking for
// one is a clear error naming the option, and misuse is named too; launch names are noted only
// while noting is on (the bench clears them, captures a step, and reads them back).
TEST(EngineHost, TimelineErrorsAndLaunchNames) {
  namespace tl = memra::cuda::timeline;
  EXPECT_THAT(error_message([] { (void)tl::stop(); }), HasSubstr("stop() without start()"));
  if (!tl::available()) {
    EXPECT_THAT(error_message([] { tl::start(16); }), HasSubstr("-DMEMRA_TIMELINE=ON"));
  }
  tl::launch_names().clear();
  tl::note_launch("ignored");
  EXPECT_TRUE(tl::launch_names().empty());
  tl::note_launches() = true;
  tl::note_launch("a");
  tl::note_launch("b");
  tl::note_launches() = false;
  EXPECT_THAT(tl::launch_names(), ::testing::ElementsAre("a", "b"));
  tl::launch_names().clear();
}

// Shapes the kernels cannot run fail at Model::load (check_kernel_limits), naming the field and
// the limit, instead of at the first prompt; every fixture and benchmark shape passes.
TEST(EngineHost, KernelLimitsNameTheFieldAndTheLimit) {
  namespace fx = memra::fixture;
  using memra::Family;
  using memra::fixture::Preset;
  for (Family f : {Family::Qwen3, Family::Qwen3Next, Family::Qwen35, Family::Qwen35Moe})
    for (Preset p : {Preset::Tiny, Preset::Bank, Preset::Unit})
      EXPECT_NO_THROW(memra::cuda::check_kernel_limits(fx::fixture_config({.family = f, .preset = p})));
  for (auto [f, p] : {std::pair{Family::Qwen3, Preset::Qwen3_0_6B}, std::pair{Family::Qwen35, Preset::Qwen35_9B},
                      std::pair{Family::Qwen35Moe, Preset::Qwen35_35B_A3B}, std::pair{Family::GlmDsa, Preset::Glm5},
                      std::pair{Family::DeepseekV4, Preset::Dsv4Flash}, std::pair{Family::DeepseekV4, Preset::Tiny},
                      std::pair{Family::DeepseekV4, Preset::Unit}, std::pair{Family::Glm5Next, Preset::Glm5Flash},
                      std::pair{Family::Glm5Next, Preset::Tiny}, std::pair{Family::Glm5Next, Preset::Unit}})
    EXPECT_NO_THROW(memra::cuda::check_kernel_limits(fx::fixture_config({.family = f, .preset = p})));

  const memra::ModelConfig moe = fx::fixture_config({.family = Family::Qwen35Moe, .preset = Preset::Unit});
  auto limit_error = [&](auto edit) {
    memra::ModelConfig c = moe;
    edit(c);
    return error_message([&] { memra::cuda::check_kernel_limits(c); });
  };
  EXPECT_THAT(limit_error([](auto& c) { c.head_dim = 512; }),
              HasSubstr("head_dim = 512 (the attention kernels take 1..256)"));
  EXPECT_THAT(limit_error([](auto& c) { c.n_head_kv = 3; }), HasSubstr("not a multiple of n_head_kv = 3"));
  EXPECT_THAT(limit_error([](auto& c) { c.n_rot = 5; }), HasSubstr("n_rot = 5"));
  EXPECT_THAT(limit_error([](auto& c) { c.ssm_conv_kernel = 9; }),
              HasSubstr("ssm_conv_kernel = 9 (the GDN conv takes 1..8)"));
  EXPECT_THAT(limit_error([](auto& c) { c.ssm_d_v = 256; }), HasSubstr("ssm_d_v = 256 (the GDN kernels take 1..128)"));
  EXPECT_THAT(limit_error([](auto& c) { c.n_expert = 2048; }), HasSubstr("n_expert = 2048 (the router takes 1..1024)"));
  EXPECT_THAT(limit_error([](auto& c) { c.n_expert_used = 17; }), HasSubstr("n_expert_used = 17"));

  // GLM-5's limits: the MLA / DSA kernels' and sigmoid-grouped routing's, each named.
  const memra::ModelConfig glm = fx::fixture_config({.family = Family::GlmDsa, .preset = Preset::Bank});
  EXPECT_FALSE(memra::Model::unsupported(glm).has_value()) << *memra::Model::unsupported(glm);
  auto glm_error = [&](auto edit) {
    memra::ModelConfig c = glm;
    edit(c);
    return memra::Model::unsupported(c).value_or("supported");
  };
  EXPECT_THAT(glm_error([](auto& c) { c.dsa_topk = 5000; }),
              HasSubstr("dsa_topk = 5000 (the sparse attention takes 1..4096)"));
  EXPECT_THAT(glm_error([](auto& c) { c.dsa_n_head = 65; }), HasSubstr("dsa_n_head = 65"));
  EXPECT_THAT(glm_error([](auto& c) { c.dsa_head_dim = 4; }), HasSubstr("dsa_head_dim = 4"));
  EXPECT_THAT(glm_error([](auto& c) { c.n_rot = 7; }), HasSubstr("n_rot = 7"));
  EXPECT_THAT(glm_error([](auto& c) { c.n_expert_group = 3; }), HasSubstr("n_expert_group = 3"));
  EXPECT_THAT(glm_error([](auto& c) { c.n_expert_group_used = 0; }), HasSubstr("n_expert_group_used = 0"));
  EXPECT_FALSE(memra::Model::unsupported(moe).has_value());

  // DeepSeek-V4's: the hyper-connections' streams, the rotation, the output groups, the indexer.
  const memra::ModelConfig dsv4 = fx::fixture_config({.family = Family::DeepseekV4, .preset = Preset::Bank});
  auto dsv4_error = [&](auto edit) {
    memra::ModelConfig c = dsv4;
    edit(c);
    return memra::Model::unsupported(c).value_or("supported");
  };
  EXPECT_EQ(dsv4_error([](auto&) {}), "supported");
  EXPECT_THAT(dsv4_error([](auto& c) { c.hc_mult = 9; }), HasSubstr("hc_mult = 9 (the hyper-connections take 1..8"));
  EXPECT_THAT(dsv4_error([](auto& c) { c.n_rot = 18; }), HasSubstr("n_rot = 18"));
  EXPECT_THAT(dsv4_error([](auto& c) { c.o_groups = 3; }), HasSubstr("o_groups = 3"));
  EXPECT_THAT(dsv4_error([](auto& c) { c.dsa_n_head = 65; }), HasSubstr("index_n_heads = 65"));
}

}  // namespace
