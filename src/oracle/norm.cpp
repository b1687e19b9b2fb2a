// RMSNorm (plain and GDN-gated) and the scalar activations, in f64.
#include <cmath>

#include "oracle/ops.h"

namespace memra::oracle::ops {

double silu(double x) { return x / (1.0 + std::exp(-x)); }
double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }
double softplus(double x) { return x > 20.0 ? x : std::log1p(std::exp(x)); }

namespace {
double inv_rms(const float* x, int64_t n, double eps) {
  double ss = 0;
  for (int64_t i = 0; i < n; ++i) ss += static_cast<double>(x[i]) * static_cast<double>(x[i]);
  return 1.0 / std::sqrt(ss / static_cast<double>(n) + eps);
}
}  // namespace

void rmsnorm(const float* x, const float* w, int64_t n, double eps, float* y) {
  const double r = inv_rms(x, n, eps);
  for (int64_t i = 0; i < n; ++i) y[i] = static_cast<float>(static_cast<double>(x[i]) * r * static_cast<double>(w[i]));
}

void rmsnorm_gated(const float* x, const float* z, const float* w, int64_t n, double eps, float* y, NormGate gate) {
  // Norm first, then the gate (Qwen3NextRMSNormGated; llama.cpp: ssm_norm then * silu(z)).
  const double r = inv_rms(x, n, eps);
  for (int64_t i = 0; i < n; ++i) {
    const double zi = static_cast<double>(z[i]);
    y[i] = static_cast<float>(static_cast<double>(w[i]) * static_cast<double>(x[i]) * r *
                              (gate == NormGate::silu ? silu(zi) : sigmoid(zi)));
  }
}

}  // namespace memra::oracle::ops
