// test/ops/device_op_fixture.h — the base of the GPU op tests that check kernels one by one
// (Kernels, Dsv4Kernels): the test's GPU required, one engine per process, its stream, uploads,
// poisoned outputs, and a random generator re-seeded for each of the harness's seeds.
//
// provides: DeviceOpTest
#pragma once

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <random>
#include <vector>

#include <cuda_runtime.h>

#include "memra/engine.h"
#include "memra/testing/gpu.h"
#include "ops/op_harness.h"

namespace memra::ops {

class DeviceOpTest : public ::testing::Test {
 protected:
  void SetUp() override { MEMRA_REQUIRE_TEST_GPU(1); }
  // The test's body once per seed (op_harness.h: the fixed seeds, then a fresh one), `rng`
  // seeded with it.
  void seeded(const std::function<void()>& body) {
    for_each_seed("", [&](uint64_t seed) {
      rng.seed(seed);
      body();
    });
  }
  Engine& e() {
    static Engine eng = Engine::open(testing::test_device());
    return eng;
  }
  cudaStream_t s() { return reinterpret_cast<cudaStream_t>(e().stream()); }
  template <class T>
  DeviceBuffer<T> up(const std::vector<T>& v) {
    DeviceBuffer<T> b(e(), v.size());
    b.upload(v);
    return b;
  }
  // An output buffer with every byte 0xFF (NaN for f32 / f64, -1 for ints): an element the
  // kernel never wrote cannot pass for a result.
  template <class T>
  DeviceBuffer<T> poisoned(size_t n) {
    DeviceBuffer<T> b(e(), n);
    b.fill_bytes(0xFF);
    return b;
  }
  std::mt19937_64 rng;
  std::vector<float> rnd(size_t n, float lo = -1, float hi = 1) {
    std::uniform_real_distribution<float> U(lo, hi);
    std::vector<float> v(n);
    for (float& x : v) x = U(rng);
    return v;
  }
};

}  // namespace memra::ops
