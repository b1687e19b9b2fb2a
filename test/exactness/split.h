// test/exactness/split.h — how a gate target loads its GPU models: whole, or split into two
// pipeline stages (memra/model.h LoadOptions) when the target is compiled with MEMRA_TEST_STAGES.
//
// A gate file compiled a second time with MEMRA_TEST_STAGES runs its whole gate — cases, arms,
// canaries — on the split model: over the two devices CTest gave the test (a GPUS 2 target,
// label multi_gpu), or with both stages on the test's one device, each on its own stream (the
// same code path, hand-overs and events included, minus peer access). The split point is the
// automatic one (weight bytes). Its verdicts must be the unsplit gate's: a split changes no bit.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "memra/model.h"
#include "memra/testing/gpu.h"

namespace memra::gpu_test {

// Two stages: over the two devices CTest gave a GPUS 2 target, else on the test's device twice;
// `split`: the second stage's first layer (empty: the automatic split).
inline LoadOptions two_stages(std::vector<int64_t> split = {}) {
#ifdef MEMRA_TEST_GPUS  // a GPU test target's (memra_add_gate GPUS); host tests include this too
  constexpr int gpus = MEMRA_TEST_GPUS;
#else
  constexpr int gpus = 1;
#endif
  LoadOptions o;
  if (gpus >= 2) {
    o.devices = testing::test_devices(2);
  } else {
    const int d = testing::test_device();
    o.devices = {d, d};
  }
  o.split = std::move(split);
  return o;
}

inline LoadOptions gate_load_options() {
#ifdef MEMRA_TEST_STAGES
  return two_stages();
#else
  return {};
#endif
}

}  // namespace memra::gpu_test
