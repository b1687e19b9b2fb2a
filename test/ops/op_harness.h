// test/ops/op_harness.h — a GPU kernel against its CPU contract.
//
// An op test is a list of declarative cases. A case's vars() ("type=q8_0,n=4096,src=bits") is
// its GTest parameter name (sanitised), the key for --gtest_filter, and the seed of its inputs:
//   seed = fnv1a64(vars()) XOR run seed
// The run seed is fresh each process (new random inputs every run) and printed once; set
// MEMRA_SEED=<that value> to replay a failing run exactly. Outputs are poisoned (every byte
// 0xFF: NaN for f32, NaN scales and -1 quants for blocks) before the launch, so an element the
// kernel never wrote cannot match. The comparison is bitwise or NMSE (Σ(g-r)²/Σr²), chosen per
// op and per arch by the case's tolerance().
//
// provides: Tolerance, OpCase, Vars, run_seed, case_seed, nmse, compare_to_contract,
//           OpCaseName, OpTest
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <iostream>
#include <optional>
#include <span>
#include <sstream>
#include <string>
#include <string_view>

#include "memra/testing/gate.h"
#include "memra/testing/gpu.h"

namespace memra::ops {

struct Tolerance {
  bool bitwise = true;
  double max_nmse = 0;
  static Tolerance exact() { return {true, 0}; }
  static Tolerance nmse(double max) { return {false, max}; }
};

struct OpCase {
  virtual ~OpCase() = default;
  virtual std::string vars() const = 0;
  // Per arch label ("h100", "b200", "rtx5090"): the hook for a kernel whose rounding is
  // arch-dependent (e.g. native FP4 MMA on b200). Default: bitwise everywhere.
  virtual Tolerance tolerance(std::string_view arch) const { return Tolerance::exact(); }
};

// "k=v,k=v" builder for vars().
class Vars {
 public:
  template <class T>
  Vars& operator()(std::string_view key, const T& value) {
    if (!first_) os_ << ',';
    first_ = false;
    os_ << key << '=' << value;
    return *this;
  }
  std::string str() const { return os_.str(); }

 private:
  std::ostringstream os_;
  bool first_ = true;
};

// The process's run seed: MEMRA_SEED (decimal or 0x-hex) if set, else random; printed to
// stdout once ("[ seed ] MEMRA_SEED=0x... replays this run").
uint64_t run_seed();
// Parses a MEMRA_SEED value; throws memra::Error on anything that is not a number.
uint64_t parse_seed(std::string_view text);
uint64_t fnv1a64(std::string_view s);
inline uint64_t case_seed(std::string_view vars) { return fnv1a64(vars) ^ run_seed(); }

// Σ(g-r)² / Σr² in double. Both empty: 0. Σr² == 0: 0 if got is all zero too, else +inf.
double nmse(std::span<const float> got, std::span<const float> ref);

// The verdict: sizes equal, then bitwise (BitIdentical's explanation on failure) or: every
// element finite where the reference is (an unwritten, poisoned element is named by index),
// and nmse <= max.
::testing::AssertionResult compare_to_contract(std::span<const float> got,
                                               std::span<const float> ref, const Tolerance& tol);

struct OpCaseName {
  template <class C>
  std::string operator()(const ::testing::TestParamInfo<C>& info) const {
    return memra::testing::sanitize_test_name(info.param.vars());
  }
};

// Fixture base: requires a GPU of the target's arch labels (skip, or FAIL in strict mode),
// logs the case's seed (stdout and a GTest property), and hands out the arch label.
template <class Case>
class OpTest : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
#ifdef MEMRA_TEST_ARCHS
    MEMRA_REQUIRE_TEST_GPU();
#endif
    seed_ = case_seed(this->GetParam().vars());
    std::ostringstream hex;
    hex << "0x" << std::hex << seed_;
    ::testing::Test::RecordProperty("seed", hex.str());
    ::testing::Test::RecordProperty("vars", this->GetParam().vars());
    std::cout << "[ seed     ] " << this->GetParam().vars() << " -> " << hex.str() << "\n";
  }
  uint64_t seed() const { return seed_; }
  std::string arch() const {
    const auto& g = memra::testing::query_gpus();
    const int d = memra::testing::test_device();
    return d < int(g.size()) ? std::string(memra::testing::arch_label(g[size_t(d)].cc_major)) : "";
  }
  Tolerance tolerance() const { return this->GetParam().tolerance(arch()); }

 private:
  uint64_t seed_ = 0;
};

}  // namespace memra::ops
