// test/ops/op_harness.h — a GPU kernel against its CPU contract.
//
// An op test is a list of declarative cases. A case's vars() ("type=q8_0,n=4096,src=bits") is
// its GTest parameter name (sanitised), the key for --gtest_filter, and the key of its inputs'
// seeds. Every case runs its body once per seed (for_each_seed), in order:
//   fixed:  fnv1a64(key) XOR kFixedSeeds[i] — the same inputs on every run, so what a case covers
//           never depends on a run's luck (docs/testing.md lists the seeds);
//   fresh:  fnv1a64(key) XOR run seed — new inputs every run. The run seed is printed once and
//           recorded in every test's XML (property run_seed); MEMRA_SEED=<that value> replays a
//           failing run exactly.
// A failure names its seed (a scoped trace "seed fixed 0x... " / "seed fresh 0x..."). Tests
// that are not parameterised by a case (TEST_F over a fixed list of shapes) key their seeds on
// their own name (Suite.Name). Outputs are poisoned (every byte
// 0xFF: NaN for f32, NaN scales and -1 quants for blocks) before the launch, so an element the
// kernel never wrote cannot match. The comparison is bitwise or NMSE (Σ(g-r)²/Σr²), chosen per
// op and per arch by the case's tolerance().
//
// provides: Tolerance, measured_nmse, OpCase, Vars, run_seed, case_seed, kFixedSeeds, SeedRun, seed_runs,
//           seed_current_test, for_each_seed, test_arch, nmse, compare_to_contract, OpCaseName, OpTest
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <iostream>
#include <optional>
#include <span>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "memra/testing/gate.h"
#include "memra/testing/gpu.h"

namespace memra::ops {

struct Tolerance {
  bool bitwise = true;
  double max_nmse = 0;
  static Tolerance exact() { return {true, 0}; }
  static Tolerance nmse(double max) { return {false, max}; }
};

// An NMSE bound looked up by arch label in the bounds measured so far ({{"h100", 1e-12}}). An
// arch with no measured bound is a test failure naming the op and the archs that have one, and
// the comparison then runs at NMSE 0: a bound is measured on a family before it is trusted
// there, never borrowed from another silently.
Tolerance measured_nmse(std::string_view op, std::string_view arch,
                        std::initializer_list<std::pair<std::string_view, double>> bounds);

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

// The fixed seeds every op case runs with, on every run, before its fresh one.
inline constexpr uint64_t kFixedSeeds[] = {0x6d656d7261000001ull, 0x6d656d7261000002ull};

struct SeedRun {
  uint64_t seed;
  bool fresh;         // the run seed's (else one of kFixedSeeds)
  std::string label;  // "seed fixed 0x..." / "seed fresh 0x... (MEMRA_SEED=0x...)"
};
// The fixed seeds' runs of `key`, then its fresh one (case_seed).
std::vector<SeedRun> seed_runs(std::string_view key);

// case_seed(key) for the running test, logged so the inputs can be replayed: printed
// ("[ seed     ] <key> -> 0x..."), and recorded as the GTest properties "seed" and "run_seed"
// (MEMRA_SEED=<run_seed> replays the run from its XML alone). Without a key: the test's full
// name (Suite.Name).
uint64_t seed_current_test(std::string_view key);
uint64_t seed_current_test();

// Runs body(seed) once per seed_runs(key) (key: the running test's Suite.Name when empty), each
// under a scoped trace naming the seed; the fresh seed is logged as seed_current_test logs it.
void for_each_seed(std::string_view key, const std::function<void(uint64_t)>& body);

// The arch label ("h100", ...) of the device the test runs on (test_device()); "" without one.
std::string test_arch();

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
// logs the case's seed (stdout and GTest properties), and hands out the arch label.
template <class Case>
class OpTest : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
#ifdef MEMRA_TEST_ARCHS
    MEMRA_REQUIRE_TEST_GPU();
#endif
    ::testing::Test::RecordProperty("vars", this->GetParam().vars());
  }
  // The case's body, once per seed (the fixed ones, then the fresh one).
  void for_each_seed(const std::function<void(uint64_t)>& body) const {
    ::memra::ops::for_each_seed(this->GetParam().vars(), body);
  }
  std::string arch() const { return test_arch(); }
  Tolerance tolerance() const { return this->GetParam().tolerance(arch()); }
};

}  // namespace memra::ops
