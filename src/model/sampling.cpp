// Greedy and Gumbel-max sampling with a counter-based generator (include/memra/sampling.h).
#include "memra/sampling.h"

#include <cmath>

#include "memra/error.h"

namespace memra {

std::array<uint32_t, 4> philox4x32_10(std::array<uint32_t, 4> c, std::array<uint32_t, 2> k) {
  // Random123's constants: round multipliers and the Weyl key increments.
  constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;
  constexpr uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
  for (int r = 0; r < 10; ++r) {
    const uint64_t p0 = static_cast<uint64_t>(kM0) * c[0];
    const uint64_t p1 = static_cast<uint64_t>(kM1) * c[2];
    const uint32_t hi0 = static_cast<uint32_t>(p0 >> 32), lo0 = static_cast<uint32_t>(p0);
    const uint32_t hi1 = static_cast<uint32_t>(p1 >> 32), lo1 = static_cast<uint32_t>(p1);
    c = {hi1 ^ c[1] ^ k[0], lo1, hi0 ^ c[3] ^ k[1], lo0};
    k[0] += kW0;
    k[1] += kW1;
  }
  return c;
}

double uniform_from_53_bits(uint64_t bits) {
  const double u = (static_cast<double>(bits) + 0.5) * 0x1p-53;
  return u < 1.0 ? u : 0x1.fffffffffffffp-1;
}

double philox_uniform(uint64_t seed, uint64_t counter, uint64_t index) {
  const auto lo = [](uint64_t x) { return static_cast<uint32_t>(x); };
  const auto hi = [](uint64_t x) { return static_cast<uint32_t>(x >> 32); };
  const auto r = philox4x32_10({lo(index), hi(index), lo(counter), hi(counter)}, {lo(seed), hi(seed)});
  const uint64_t bits = (static_cast<uint64_t>(r[0]) << 21) ^ (r[1] >> 11);  // 53 bits
  return uniform_from_53_bits(bits);
}

int32_t argmax_lowest(std::span<const float> logits) {
  if (logits.empty()) fail("argmax: empty logit row");
  int32_t best = 0;
  for (size_t i = 0; i < logits.size(); ++i) {
    if (std::isnan(logits[i])) fail("argmax: logit ", i, " is NaN");
    if (logits[i] > logits[static_cast<size_t>(best)]) best = static_cast<int32_t>(i);
  }
  return best;
}

int32_t sample_token(std::span<const float> logits, const SampleSpec& spec) {
  if (!(spec.temperature >= 0) || !std::isfinite(spec.temperature))
    fail("sample: temperature ", spec.temperature, " (must be finite and >= 0)");
  if (spec.temperature == 0) return argmax_lowest(logits);
  if (logits.empty()) fail("sample: empty logit row");
  const double inv_t = 1.0 / static_cast<double>(spec.temperature);
  int32_t best = -1;
  double best_score = 0;
  for (size_t i = 0; i < logits.size(); ++i) {
    if (std::isnan(logits[i])) fail("sample: logit ", i, " is NaN");
    const double u = philox_uniform(spec.seed, spec.counter, i);
    const double score = static_cast<double>(logits[i]) * inv_t - std::log(-std::log(u));
    if (best < 0 || score > best_score) {
      best = static_cast<int32_t>(i);
      best_score = score;
    }
  }
  return best;
}

}  // namespace memra
