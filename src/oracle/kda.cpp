// Kimi delta attention (KDA), the linear-attention layer of GLM-5's hybrid, as transformers 5.17
// computes it (models/glm5_next Glm5NextTextLinearAttention; kimi_linear defines the same layer):
//
//   [q|k|v] = silu(causal depthwise conv_K([wq x | wk x | wv x]))      (no bias)
//   f = f_b(f_a x) + dt_bias;  g = bound * sigmoid(exp(A_log_h) f)     (the "safe gate"), or
//                              g = -exp(A_log_h) * softplus(f)         (no bound)
//   beta = sigmoid(wb x);  q, k <- x / sqrt(sum x^2 + 1e-6) per head;  q <- q / sqrt(d)
//   per head, state S [d, d]: S <- diag(exp(g_t)) S;  u = beta_t (v_t - S^T k_t);
//                             S <- S + k_t u^T;  o_t = S^T q_t
//   out = wo( rmsnorm(o_h) * norm * sigmoid(g_b(g_a x))_h )  per head.
//
// The delta rule is gdn.cpp's with the decay taken per key channel (kda_delta_rule_*); heads are
// not grouped (q, k and v have H heads each).
#include <cmath>
#include <cstring>
#include <vector>

#include "memra/error.h"
#include "oracle/ops.h"

namespace memra::oracle::ops {

void kda(const KdaShape& s, const KdaWeights& w, const float* x, int64_t T, GdnPrefill form, GdnCacheLayer& cache,
         float* out, int threads) {
  const int64_t H = s.n_head, d = s.head_dim, K = s.conv_kernel, hd = H * d, cd = 3 * hd;
  MEMRA_CHECK(
      static_cast<int64_t>(cache.conv.size()) == (K - 1) * cd && static_cast<int64_t>(cache.state.size()) == H * d * d,
      "kda: a cache of ", cache.conv.size(), " conv and ", cache.state.size(), " state values for ", H, " heads of ", d,
      " and a kernel of ", K);
  std::vector<float> qkv(static_cast<size_t>(T * cd)), proj(static_cast<size_t>(T * hd)),
      fa(static_cast<size_t>(T * d)), f(static_cast<size_t>(T * hd)), b(static_cast<size_t>(T * H)),
      ga(static_cast<size_t>(T * d)), gate(static_cast<size_t>(T * hd));
  // [q | k | v] rows of every token, as transformers concatenates them before the conv
  const Matrix* parts[3] = {&w.wq, &w.wk, &w.wv};
  for (int p = 0; p < 3; ++p) {
    matmul(*parts[p], x, T, proj.data(), threads);
    for (int64_t t = 0; t < T; ++t)
      std::memcpy(qkv.data() + t * cd + p * hd, proj.data() + t * hd, sizeof(float) * static_cast<size_t>(hd));
  }
  matmul(w.f_a, x, T, fa.data(), threads);
  matmul(w.f_b, fa.data(), T, f.data(), threads);
  matmul(w.wb, x, T, b.data(), threads);
  matmul(w.g_a, x, T, ga.data(), threads);
  matmul(w.g_b, ga.data(), T, gate.data(), threads);

  const std::vector<float> conv = causal_conv_silu(w.conv, qkv.data(), T, cd, K, cache.conv);

  const double qscale = 1.0 / std::sqrt(static_cast<double>(d));
  auto l2 = [&](const float* src, double* dst, double scale) {
    double ss = 0;
    for (int64_t i = 0; i < d; ++i) ss += static_cast<double>(src[i]) * static_cast<double>(src[i]);
    const double inv = scale / std::sqrt(ss + 1e-6);
    for (int64_t i = 0; i < d; ++i) dst[i] = static_cast<double>(src[i]) * inv;
  };
  std::vector<float> o(static_cast<size_t>(T * hd));
  std::vector<double> qh(static_cast<size_t>(T * d)), kh(qh.size()), vh(qh.size()), gh(qh.size()),
      bh(static_cast<size_t>(T)), oh(qh.size());
  for (int64_t h = 0; h < H; ++h) {
    const double rate = std::exp(static_cast<double>(w.a_log[static_cast<size_t>(h)]));
    for (int64_t t = 0; t < T; ++t) {
      const float* row = conv.data() + t * cd;
      l2(row + h * d, qh.data() + t * d, qscale);
      l2(row + hd + h * d, kh.data() + t * d, 1.0);
      for (int64_t i = 0; i < d; ++i) vh[t * d + i] = row[2 * hd + h * d + i];
      for (int64_t i = 0; i < d; ++i) {
        const double fi = static_cast<double>(f[t * hd + h * d + i]) + static_cast<double>(w.dt_bias[h * d + i]);
        gh[t * d + i] = s.gate_bound ? *s.gate_bound * sigmoid(rate * fi) : -rate * softplus(fi);
      }
      bh[t] = sigmoid(b[t * H + h]);
    }
    double* S = cache.state.data() + h * d * d;
    if (form == GdnPrefill::recurrent)
      kda_delta_rule_recurrent(qh.data(), kh.data(), vh.data(), gh.data(), bh.data(), T, d, d, S, oh.data());
    else
      kda_delta_rule_chunked(qh.data(), kh.data(), vh.data(), gh.data(), bh.data(), T, d, d, kGdnChunk, S, oh.data());
    for (int64_t t = 0; t < T; ++t)
      for (int64_t i = 0; i < d; ++i) o[t * hd + h * d + i] = static_cast<float>(oh[t * d + i]);
  }
  for (int64_t t = 0; t < T; ++t)
    for (int64_t h = 0; h < H; ++h) {
      float* oth = o.data() + t * hd + h * d;
      rmsnorm_gated(oth, gate.data() + t * hd + h * d, w.norm.data(), d, s.rms_eps, oth, NormGate::sigmoid);
    }
  matmul(w.wo, o.data(), T, out, threads);
}

}  // namespace memra::oracle::ops
