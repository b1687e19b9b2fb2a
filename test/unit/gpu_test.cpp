// Which cards a GPU test uses and when it may run, on the host: CTest's resource-group
// environment parsed into device ids, and the decision over a made-up device list. The failure
// these catch: a GPUS 2 test that reads only group 0 (so it opens one card twice, or card 0
// while CTest gave it cards 1 and 2), or that assumes contiguous ids and runs on a machine with
// one GPU.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "memra/error.h"
#include "memra/testing/errors.h"

// As memra_add_gate(... ARCHS h100 GPUS 2) compiles them in, so the macros below are the ones a
// two-GPU gate gets.
#define MEMRA_TEST_ARCHS "h100"
#define MEMRA_TEST_GPUS 2
#include "memra/testing/gate.h"
#include "memra/testing/gpu.h"

namespace {

namespace mt = memra::testing;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using memra::testing::error_message;

// An environment made of a map: the lookup test_devices() does, without touching the process's.
mt::EnvLookup env(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const char* name) -> const char* {
    const auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
}

TEST(TestDevices, OutsideCtestTheFirstN) {
  EXPECT_THAT(mt::test_devices(1, env({})), ElementsAre(0));
  EXPECT_THAT(mt::test_devices(2, env({})), ElementsAre(0, 1));
}

TEST(TestDevices, EveryResourceGroupInGroupOrder) {
  // RESOURCE_GROUPS "2,gpus:100" on a 2-card spec: one card per group, in whatever order CTest
  // hands them out.
  EXPECT_THAT(mt::test_devices(2, env({{"CTEST_RESOURCE_GROUP_COUNT", "2"},
                                       {"CTEST_RESOURCE_GROUP_0", "gpus"},
                                       {"CTEST_RESOURCE_GROUP_0_GPUS", "id:1,slots:100"},
                                       {"CTEST_RESOURCE_GROUP_1", "gpus"},
                                       {"CTEST_RESOURCE_GROUP_1_GPUS", "id:0,slots:100"}})),
              ElementsAre(1, 0));
  // Several cards in one group (";"-joined), a group of another resource type, field order.
  EXPECT_THAT(mt::test_devices(3, env({{"CTEST_RESOURCE_GROUP_COUNT", "3"},
                                       {"CTEST_RESOURCE_GROUP_0_GPUS", "id:2,slots:50;slots:50,id:3"},
                                       {"CTEST_RESOURCE_GROUP_1", "disks"},
                                       {"CTEST_RESOURCE_GROUP_2_GPUS", "id:7,slots:100"}})),
              ElementsAre(2, 3, 7));
  // Under CTest the allocation is the whole answer: fewer cards than asked stays fewer (the
  // decision below says why), never padded with cards CTest gave another test.
  EXPECT_THAT(mt::test_devices(2, env({{"CTEST_RESOURCE_GROUP_COUNT", "1"},
                                       {"CTEST_RESOURCE_GROUP_0_GPUS", "id:1,slots:100"}})),
              ElementsAre(1));
  // Groups set by hand without the count: read up to the first one missing.
  EXPECT_THAT(mt::test_devices(1, env({{"CTEST_RESOURCE_GROUP_0_GPUS", "id:3,slots:100"}})),
              ElementsAre(3));
}

TEST(TestDevices, MalformedVariablesAreNamed) {
  EXPECT_THAT(error_message([] { mt::test_devices(1, env({{"CTEST_RESOURCE_GROUP_COUNT", "two"}})); }),
              HasSubstr("CTEST_RESOURCE_GROUP_COUNT='two'"));
  EXPECT_THAT(error_message([] {
                mt::test_devices(1, env({{"CTEST_RESOURCE_GROUP_COUNT", "1"},
                                         {"CTEST_RESOURCE_GROUP_0_GPUS", "slots:100"}}));
              }),
              HasSubstr("CTEST_RESOURCE_GROUP_0_GPUS='slots:100': entry 'slots:100' has no id:"));
  EXPECT_THAT(error_message([] {
                mt::test_devices(1, env({{"CTEST_RESOURCE_GROUP_COUNT", "1"},
                                         {"CTEST_RESOURCE_GROUP_0_GPUS", "id:gpu0,slots:100"}}));
              }),
              HasSubstr("'gpu0' is not a device index"));
}

TEST(GpuNeeds, EveryListedDeviceMustExistAndBeOfTheArch) {
  const std::vector<mt::GpuInfo> two = {{.name = "NVIDIA H200", .cc_major = 9},
                                        {.name = "NVIDIA H200", .cc_major = 9}};
  EXPECT_EQ(mt::gpu_unavailable(two, {1, 0}, "h100", 2), std::nullopt);
  const std::vector<mt::GpuInfo> one = {{.name = "NVIDIA H200", .cc_major = 9}};
  EXPECT_EQ(mt::gpu_unavailable(one, {1, 0}, "h100", 2),
            std::optional<std::string>("needs 2 GPU(s) (devices 1, 0), have 1"));
  EXPECT_EQ(mt::gpu_unavailable(one, std::vector<int>{0}, "h100", 2),
            std::optional<std::string>("needs 2 GPU(s), was given 1 (device 0)"));
  const std::vector<mt::GpuInfo> mixed = {{.name = "NVIDIA H200", .cc_major = 9},
                                          {.name = "NVIDIA L4", .cc_major = 8, .cc_minor = 9}};
  EXPECT_EQ(mt::gpu_unavailable(mixed, {0, 1}, "h100", 2),
            std::optional<std::string>("needs h100, device 1 is NVIDIA L4 (sm_89)"));
  EXPECT_EQ(mt::gpu_unavailable({}, {0, 1}, "h100", 2),
            std::optional<std::string>("needs 2 GPUs (h100), none found"));
}

TEST(GpuNeeds, ARegisteredGpuCountIsTheMinimum) {
  // A GPUS 2 target needs two cards even where a test asks for one.
  EXPECT_EQ(MEMRA_TEST_GPUS_NEEDED(), 2);
  EXPECT_EQ(MEMRA_TEST_GPUS_NEEDED(1), 2);
  EXPECT_EQ(MEMRA_TEST_GPUS_NEEDED(3), 3);
  // On a one-GPU machine, run by hand: devices 0 and 1, and the reason names the shortfall.
  const std::vector<mt::GpuInfo> one = {{.name = "NVIDIA H200", .cc_major = 9}};
  EXPECT_EQ(mt::gpu_unavailable(one, mt::test_devices(MEMRA_TEST_GPUS_NEEDED(), env({})), "h100",
                                MEMRA_TEST_GPUS_NEEDED()),
            std::optional<std::string>("needs 2 GPU(s) from device 0, have 1"));
}

TEST(GpuNeeds, TheMacroAsksForTheRegisteredCount) {
  // What this machine lacks for two h100-class cards (the registered count, not the one asked
  // for): on a machine without GPUs "needs 2 GPUs (h100), none found".
  const std::optional<std::string> why = mt::gpu_unavailable("h100", 2);
  const char* old = std::getenv("MEMRA_REQUIRE_GPU");
  const std::string saved = old ? old : "";
  const auto body = [] {
    MEMRA_REQUIRE_TEST_GPU(1);  // asks for one; the target registered two
    ADD_FAILURE() << "body ran";
  };
  ::setenv("MEMRA_REQUIRE_GPU", "1", 1);  // strict: the reason comes back as the failure
  const auto strict = mt::run_intercepted(body);
  ::setenv("MEMRA_REQUIRE_GPU", "0", 1);
  const auto relaxed = mt::run_intercepted(body);
  if (old) ::setenv("MEMRA_REQUIRE_GPU", saved.c_str(), 1);
  else ::unsetenv("MEMRA_REQUIRE_GPU");
  ASSERT_EQ(strict.failures, 1);
  if (!why) {  // two suitable cards here: the body runs in both modes
    EXPECT_THAT(strict.messages[0], HasSubstr("body ran"));
    EXPECT_EQ(relaxed.failures, 1);
    return;
  }
  EXPECT_THAT(strict.messages[0], HasSubstr(*why));
  if (mt::query_gpus().empty()) { EXPECT_THAT(*why, HasSubstr("needs 2 GPUs (h100), none found")); }
  EXPECT_TRUE(relaxed.skipped);
  EXPECT_EQ(relaxed.failures, 0);
}

}  // namespace
