// memra/testing/gpu.h — which GPU a test runs on, and whether it may run at all.
//
// A test carries the CTest arch labels it is meaningful on (memra_add_gate ARCHS, which also
// compiles them in as MEMRA_TEST_ARCHS). At run time it asks for a GPU of one of those
// families: on a machine without one it skips with the reason, and in strict mode
// (MEMRA_REQUIRE_GPU=1, set by ctest/gpu-ci.sh) that skip is a failure, so an arch-labelled CI
// run can never pass by skipping everything.
//
// Arch families (CTest labels) from the compute capability major (the table cmake/archs.txt,
// compiled into src/testing/gpu.cpp; CMake and ctest/gpu-ci.sh read the same file):
//   sm_90  -> h100     (H100, H200)
//   sm_100 -> b200     (B200; sm_103 B300 too)
//   sm_120 -> rtx5090  (RTX 5090 and the other GB20x parts)
//
// The device query uses the CUDA driver library loaded at run time (libcuda.so.1), so it works
// in any build, with or without the CUDA layer, and returns no GPUs (never crashes) on a
// machine without a driver.
//
// provides: GpuInfo, query_gpus, arch_label, strict_gpu_mode, EnvLookup, test_devices,
//           test_device, test_gpu, gpu_unavailable, test_gpus_needed, MEMRA_REQUIRE_GPU_ARCH,
//           MEMRA_TEST_GPUS_NEEDED, MEMRA_REQUIRE_TEST_GPU
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace memra::testing {

struct GpuInfo {
  int index = 0;
  std::string name;
  int cc_major = 0, cc_minor = 0;
  int sm_count = 0;
  uint64_t total_mem = 0;  // bytes
  std::string sm() const { return "sm_" + std::to_string(cc_major * 10 + cc_minor); }
};

// Every visible device (CUDA_VISIBLE_DEVICES applies); empty without a driver or a GPU.
// Queried once per process.
const std::vector<GpuInfo>& query_gpus();

// "h100" / "b200" / "rtx5090" for a compute capability major, "" for families without a label.
std::string_view arch_label(int cc_major);

// MEMRA_REQUIRE_GPU=1: "no GPU / wrong arch" fails instead of skipping. Any other value than
// unset, "", "0" or "1" is an error (a typo must not silently turn strict mode off).
bool strict_gpu_mode();

// An environment lookup (nullptr: unset): std::getenv in a test process, a map in the unit tests.
using EnvLookup = std::function<const char*(const char*)>;

// The devices this test process should use, in order. Under `ctest --resource-spec-file`:
// every GPU CTest allocated through RESOURCE_GROUPS, i.e. the ids of CTEST_RESOURCE_GROUP_<i>_GPUS
// ("id:<id>,slots:<n>", several joined by ';') for i < CTEST_RESOURCE_GROUP_COUNT. A test
// registered with GPUS 2 ("2,gpus:100") gets one id per group, in group order, and they need not
// be ascending or contiguous (group 0 may hold card 1 and group 1 card 0). Without
// CTEST_RESOURCE_GROUP_COUNT (run by hand, or ctest without a spec): devices 0..n-1.
// A malformed variable is an error that names it.
std::vector<int> test_devices(int n = 1);
std::vector<int> test_devices(int n, const EnvLookup& env);

// The first of test_devices(): the card a one-GPU test opens.
int test_device();
// That card's entry of query_gpus(); nullopt where there is none (no driver, no such device).
std::optional<GpuInfo> test_gpu();

// Why a test labelled for `archs` (a ';'- or ','-separated list of arch labels, e.g.
// "h100;b200") cannot run here, or nullopt if it can: it needs `min_devices` GPUs, every device
// it was given must exist, and each must be of one of the families. The overloads over `gpus`
// are pure (the unit tests drive them): `devices` as test_devices() lists them, or the
// contiguous devices `device`..`device + min_devices - 1` (a braced `{0}` picks this one: pass
// std::vector<int>{0} for a list of one).
std::optional<std::string> gpu_unavailable(std::string_view archs, int min_devices = 1);
std::optional<std::string> gpu_unavailable(const std::vector<GpuInfo>& gpus,
                                           const std::vector<int>& devices, std::string_view archs,
                                           int min_devices);
std::optional<std::string> gpu_unavailable(const std::vector<GpuInfo>& gpus, int device,
                                           std::string_view archs, int min_devices);

// The GPUs a test needs: as many as its target was registered with (memra_add_gate GPUS,
// compiled in as MEMRA_TEST_GPUS: CTest hands it that many resource groups) or as the test asks
// for, whichever is more. So a GPUS 2 target on a one-GPU machine skips (fails in strict mode)
// with the reason, even where its SetUp asks for one.
constexpr int test_gpus_needed(int registered, int asked = 1) {
  return asked > registered ? asked : registered;
}

}  // namespace memra::testing

// Skips the current test (or fails it in strict mode) unless a GPU of one of `archs` is here.
// Use at the top of a test body or in SetUp(); it returns from the calling function.
#define MEMRA_REQUIRE_GPU_ARCH(archs, ...)                                                 \
  do {                                                                                     \
    if (auto memra_why_ = ::memra::testing::gpu_unavailable(archs __VA_OPT__(, ) __VA_ARGS__)) { \
      if (::memra::testing::strict_gpu_mode())                                             \
        GTEST_FAIL() << *memra_why_ << " (strict mode: MEMRA_REQUIRE_GPU=1)";             \
      else                                                                                 \
        GTEST_SKIP() << *memra_why_;                                                       \
    }                                                                                      \
  } while (0)

// The same for the arch labels and GPU count the test target was registered with
// (memra_add_gate ARCHS and GPUS); an argument asks for more GPUs than registered, never fewer.
#ifdef MEMRA_TEST_ARCHS
#ifndef MEMRA_TEST_GPUS
#define MEMRA_TEST_GPUS 1
#endif
#define MEMRA_TEST_GPUS_NEEDED(...) \
  ::memra::testing::test_gpus_needed(MEMRA_TEST_GPUS __VA_OPT__(, ) __VA_ARGS__)
#define MEMRA_REQUIRE_TEST_GPU(...) \
  MEMRA_REQUIRE_GPU_ARCH(MEMRA_TEST_ARCHS, MEMRA_TEST_GPUS_NEEDED(__VA_ARGS__))
#endif
