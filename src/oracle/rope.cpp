// NEOX (rotate_half) RoPE over the first n_rot dims of a head; partial rotation (Qwen3-Next/3.5:
// n_rot = head_dim/4) leaves the remaining dims untouched. Qwen3.5's interleaved M-RoPE gives the
// same rotation for text, where the T/H/W positions are all equal.
#include <cmath>

#include "oracle/ops.h"

namespace memra::oracle::ops {

void rope_neox(float* x, int64_t n_rot, int64_t pos, double theta) {
  const int64_t half = n_rot / 2;
  for (int64_t i = 0; i < half; ++i) {
    // inv_freq_i = theta^(-2i/n_rot): the denominator is the rotated width, not head_dim.
    const double inv_freq = std::pow(theta, -2.0 * static_cast<double>(i) / static_cast<double>(n_rot));
    const double ang = static_cast<double>(pos) * inv_freq;
    const double cs = std::cos(ang), sn = std::sin(ang);
    const double a = x[i], b = x[i + half];
    x[i] = static_cast<float>(a * cs - b * sn);
    x[i + half] = static_cast<float>(b * cs + a * sn);
  }
}

}  // namespace memra::oracle::ops
