#include "op_harness.h"

#include <cmath>
#include <cstdlib>
#include <iostream>
#include <random>
#include <sstream>

#include "memra/error.h"
#include "memra/testing/matchers.h"

namespace memra::ops {

uint64_t parse_seed(std::string_view text) {
  std::string s(text);
  char* end = nullptr;
  const bool hex = s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X');
  const unsigned long long v = std::strtoull(s.c_str(), &end, hex ? 16 : 10);
  if (s.empty() || end == nullptr || *end != '\0' || s[0] == '-')
    fail("MEMRA_SEED='", text, "' is not a decimal or 0x-hex unsigned number");
  return v;
}

uint64_t run_seed() {
  static const uint64_t seed = [] {
    uint64_t s;
    const char* env = std::getenv("MEMRA_SEED");
    if (env && *env) {
      s = parse_seed(env);
    } else {
      std::random_device rd;
      s = (uint64_t(rd()) << 32) ^ rd();
    }
    std::cout << "[ seed     ] MEMRA_SEED=0x" << std::hex << s << std::dec
              << (env && *env ? " (from the environment)" : " replays this run") << "\n";
    return s;
  }();
  return seed;
}

namespace {

std::string hex(uint64_t v) {
  std::ostringstream os;
  os << "0x" << std::hex << v;
  return os.str();
}

}  // namespace

uint64_t seed_current_test(std::string_view key) {
  const uint64_t seed = case_seed(key);
  ::testing::Test::RecordProperty("seed", hex(seed));
  ::testing::Test::RecordProperty("run_seed", hex(run_seed()));
  std::cout << "[ seed     ] " << key << " -> " << hex(seed) << " (MEMRA_SEED=" << hex(run_seed())
            << ")\n";
  return seed;
}

std::vector<SeedRun> seed_runs(std::string_view key) {
  std::vector<SeedRun> v;
  for (uint64_t f : kFixedSeeds) {
    const uint64_t s = fnv1a64(key) ^ f;
    v.push_back({s, false, "seed fixed " + hex(s)});
  }
  const uint64_t s = case_seed(key);
  v.push_back({s, true, "seed fresh " + hex(s) + " (MEMRA_SEED=" + hex(run_seed()) + ")"});
  return v;
}

void for_each_seed(std::string_view key, const std::function<void(uint64_t)>& body) {
  std::string k(key);
  if (k.empty()) {
    const ::testing::TestInfo* t = ::testing::UnitTest::GetInstance()->current_test_info();
    MEMRA_CHECK(t != nullptr, "for_each_seed: called outside a test");
    k = std::string(t->test_suite_name()) + "." + t->name();
  }
  seed_current_test(k);  // logs and records the fresh seed for replay
  for (const SeedRun& r : seed_runs(k)) {
    SCOPED_TRACE(r.label);
    body(r.seed);
  }
}

uint64_t seed_current_test() {
  const ::testing::TestInfo* t = ::testing::UnitTest::GetInstance()->current_test_info();
  MEMRA_CHECK(t != nullptr, "seed_current_test: called outside a test");
  return seed_current_test(std::string(t->test_suite_name()) + "." + t->name());
}

Tolerance measured_nmse(std::string_view op, std::string_view arch,
                        std::initializer_list<std::pair<std::string_view, double>> bounds) {
  std::string have;
  for (const auto& [a, bound] : bounds) {
    if (a == arch) return Tolerance::nmse(bound);
    have += (have.empty() ? "" : ", ") + std::string(a);
  }
  ADD_FAILURE() << op << ": no NMSE bound measured on '" << arch << "' (measured on: " << have
                << "); measure this op there and add its bound";
  return Tolerance::nmse(0);
}

std::string test_arch() {
  const auto& g = memra::testing::query_gpus();
  const int d = memra::testing::test_device();
  return d >= 0 && d < int(g.size()) ? std::string(memra::testing::arch_label(g[size_t(d)].cc_major))
                                     : "";
}

uint64_t fnv1a64(std::string_view s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

double nmse(std::span<const float> got, std::span<const float> ref) {
  MEMRA_CHECK(got.size() == ref.size(), "nmse: ", got.size(), " values vs ", ref.size());
  double num = 0, den = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double d = double(got[i]) - double(ref[i]);
    num += d * d;
    den += double(ref[i]) * double(ref[i]);
  }
  if (den == 0) return num == 0 ? 0 : INFINITY;
  return num / den;
}

::testing::AssertionResult compare_to_contract(std::span<const float> got,
                                               std::span<const float> ref, const Tolerance& tol) {
  if (got.size() != ref.size())
    return ::testing::AssertionFailure() << "kernel produced " << got.size() << " values, the contract "
                                         << ref.size();
  if (tol.bitwise) {
    std::ostringstream why;
    if (memra::testing::BitIdentical(ref).MatchAndExplain(got, &why))
      return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << "kernel output is not bitwise equal to the CPU contract, "
                                         << why.str();
  }
  for (size_t i = 0; i < got.size(); ++i)
    if (!std::isfinite(got[i]) && std::isfinite(ref[i])) {
      std::ostringstream os;
      os << "kernel output [" << i << "] is " << got[i] << " where the contract has " << ref[i]
         << " (unwritten elements stay poisoned as NaN)";
      return ::testing::AssertionFailure() << os.str();
    }
  const double e = nmse(got, ref);
  if (e <= tol.max_nmse) return ::testing::AssertionSuccess();
  std::ostringstream os;  // 6 significant digits, not AssertionResult's round-trip precision
  os << "nmse " << e << " > " << tol.max_nmse;
  return ::testing::AssertionFailure() << os.str();
}

}  // namespace memra::ops
