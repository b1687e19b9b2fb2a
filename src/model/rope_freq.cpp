// rope_inv_freq (memra/rope_freq.h): a rope table's frequencies, plain or YaRN.
#include "memra/rope_freq.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "memra/config.h"

namespace memra {

std::vector<double> rope_inv_freq(int64_t n_rot, double theta, const Yarn& yarn) {
  const int64_t half = n_rot / 2;
  std::vector<double> f(static_cast<size_t>(half));
  for (int64_t i = 0; i < half; ++i) f[i] = std::pow(theta, -2.0 * static_cast<double>(i) / static_cast<double>(n_rot));
  if (!(yarn.factor > 0)) return f;
  // YaRN: dims rotating more than beta_fast times over the original context keep their frequency,
  // those rotating less than beta_slow times are interpolated (divided by the factor), a linear
  // ramp between (transformers' _compute_yarn_parameters with truncation).
  const double dim = static_cast<double>(n_rot), orig = static_cast<double>(yarn.orig_ctx);
  auto corr = [&](double rotations) {
    return dim * std::log(orig / (rotations * 2.0 * std::numbers::pi)) / (2.0 * std::log(theta));
  };
  const double low = std::max(std::floor(corr(yarn.beta_fast)), 0.0);
  double high = std::min(std::ceil(corr(yarn.beta_slow)), dim - 1.0);
  if (low == high) high += 0.001;
  for (int64_t i = 0; i < half; ++i) {
    const double ramp = std::clamp((static_cast<double>(i) - low) / (high - low), 0.0, 1.0);
    const double extrapolate = 1.0 - ramp;
    f[i] = f[i] / yarn.factor * (1.0 - extrapolate) + f[i] * extrapolate;
  }
  return f;
}

std::vector<double> dsv4_rope_freq(const ModelConfig& c, bool compressed) {
  if (!compressed) return rope_inv_freq(c.n_rot, c.rope_theta, {});
  return rope_inv_freq(c.n_rot, c.compress_rope_theta,
                       {.factor = c.yarn_factor,
                        .orig_ctx = c.yarn_orig_ctx,
                        .beta_fast = c.yarn_beta_fast,
                        .beta_slow = c.yarn_beta_slow});
}

}  // namespace memra
