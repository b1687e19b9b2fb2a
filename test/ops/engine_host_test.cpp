// The engine's host side on any machine (label cpu): device count without a GPU, and argument
// errors that must be raised before any CUDA call.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "cuda/quantize.cuh"
#include "cuda/timeline.h"
#include "memra/engine.h"
#include "memra/error.h"
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

// The in-graph timeline (cuda/timeline.h) is a diagnostic build option: without it, asking for
// one is a clear error naming the option, and misuse is named too; launch names are noted only
// while noting is on (the bench clears them, captures a step, and reads them back).
TEST(EngineHost, TimelineErrorsAndLaunchNames) {
  namespace tl = memra::cuda::timeline;
  EXPECT_THAT(error_message([] { (void)tl::stop(); }), HasSubstr("stop() without start()"));
  if (!tl::available()) EXPECT_THAT(error_message([] { tl::start(16); }), HasSubstr("-DMEMRA_TIMELINE=ON"));
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

}  // namespace
