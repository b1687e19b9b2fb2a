// Gated DeltaNet (Qwen3-Next / Qwen3.5 linear attention), recurrent and chunked forms.
//
//   [q|k|v] = silu(causal depthwise conv_K(Wqkv x));  z = Wz x;  beta = sigmoid(Wb x);
//   g = ssm_a * softplus(Wa x + dt_bias)   (ssm_a = -exp(A_log); g <= 0 is the log decay)
//   q, k <- x / sqrt(sum x^2 + 1e-6) per head (fixed eps, not rms_eps); q <- q / sqrt(d_k)
//   value head h uses key head h / (n_v / n_k) (grouped order);
//   per head, state S [d_k, d_v]:
//     S <- exp(g_t) S;  u = beta_t (v_t - S^T k_t);  S <- S + k_t u^T;  o_t = S^T q_t
//   out = Wout( gated_rmsnorm(o, z) )  with gated_rmsnorm = w * rmsnorm(o) * silu(z) per head.
//
// The chunked form (chunk C = 64, HF torch_chunk_gated_delta_rule) evaluates the same recurrence
// per chunk with the WY representation: gamma = cumsum(g), L[i,j] = beta_i (k_i.k_j)
// exp(gamma_i - gamma_j) for j < i, U = (I+L)^-1 (beta v), W = (I+L)^-1 (beta exp(gamma) k),
// V' = U - W S, O = exp(gamma) (Q S) + ((Q K^T) . D) V', S <- exp(gamma_last) S + sum_j
// exp(gamma_last - gamma_j) k_j V'_j^T, with D[i,j] = exp(gamma_i - gamma_j) for j <= i.
// A last chunk shorter than C is the same as HF's zero padding (padded steps neither decay the
// state nor add to it).
// Kimi delta attention (KDA) runs the same rule with a log decay per key channel (g [T, dk]):
// gamma, the decay matrices and the state's decay are then taken per channel.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "oracle/ops.h"

namespace memra::oracle::ops {

namespace {

// The delta rule over one head with a scalar log decay per step (GDN: g [T]) or one per key
// channel (KDA: g [T, dk], row i of the state decays by exp(g_t[i])). The scalar form's
// arithmetic is the one the GDN contracts were set on, operation for operation.
template <bool kPerChannel>
void delta_rule_recurrent_t(const double* q, const double* k, const double* v, const double* g, const double* beta,
                            int64_t T, int64_t dk, int64_t dv, double* S, double* o) {
  std::vector<double> u(static_cast<size_t>(dv));
  for (int64_t t = 0; t < T; ++t) {
    const double* kt = k + t * dk;
    const double* qt = q + t * dk;
    const double* vt = v + t * dv;
    if constexpr (kPerChannel) {
      for (int64_t i = 0; i < dk; ++i) {  // S <- diag(exp(g)) S
        const double decay = std::exp(g[t * dk + i]);
        for (int64_t j = 0; j < dv; ++j) S[i * dv + j] *= decay;
      }
    } else {
      const double decay = std::exp(g[t]);
      for (int64_t i = 0; i < dk * dv; ++i) S[i] *= decay;  // S <- exp(g) S
    }
    for (int64_t j = 0; j < dv; ++j) u[j] = 0;
    for (int64_t i = 0; i < dk; ++i)                                 // S^T k (decayed S)
      for (int64_t j = 0; j < dv; ++j) u[j] += S[i * dv + j] * kt[i];
    for (int64_t j = 0; j < dv; ++j) u[j] = beta[t] * (vt[j] - u[j]);  // u = beta (v - S^T k)
    for (int64_t i = 0; i < dk; ++i)                                 // S <- S + k u^T
      for (int64_t j = 0; j < dv; ++j) S[i * dv + j] += kt[i] * u[j];
    double* ot = o + t * dv;
    for (int64_t j = 0; j < dv; ++j) ot[j] = 0;
    for (int64_t i = 0; i < dk; ++i)                                 // o = S^T q (updated S)
      for (int64_t j = 0; j < dv; ++j) ot[j] += S[i * dv + j] * qt[i];
  }
}

template <bool kPerChannel>
void delta_rule_chunked_t(const double* q, const double* k, const double* v, const double* g, const double* beta,
                          int64_t T, int64_t dk, int64_t dv, int64_t chunk, double* S, double* o) {
  const int64_t gw = kPerChannel ? dk : 1;  // decays per step
  std::vector<double> gam, L, U, W, Vn, kS;
  for (int64_t t0 = 0; t0 < T; t0 += chunk) {
    const int64_t C = std::min(chunk, T - t0);
    const double* K = k + t0 * dk;
    const double* Q = q + t0 * dk;
    const double* Vv = v + t0 * dv;
    gam.assign(static_cast<size_t>(C * gw), 0.0);  // gamma = cumsum(g) per channel
    for (int64_t a = 0; a < gw; ++a) {
      double run = 0;
      for (int64_t i = 0; i < C; ++i) gam[i * gw + a] = (run += g[(t0 + i) * gw + a]);
    }
    // sum_a x_a y_a exp(gamma_i - gamma_j): per channel for KDA; the scalar form factors the
    // decay out of the dot.
    auto decayed_dot = [&](const double* x, const double* y, int64_t i, int64_t j) {
      if constexpr (kPerChannel) {
        double acc = 0;
        for (int64_t a = 0; a < dk; ++a) acc += x[a] * y[a] * std::exp(gam[i * dk + a] - gam[j * dk + a]);
        return acc;
      } else {
        return dot_f64(x, y, dk) * std::exp(gam[i] - gam[j]);
      }
    };
    auto g_of = [&](int64_t i, int64_t a) { return gam[i * gw + (kPerChannel ? a : 0)]; };
    // L = strict_lower(diag(beta) (K K^T) . D)
    L.assign(static_cast<size_t>(C * C), 0.0);
    for (int64_t i = 0; i < C; ++i)
      for (int64_t j = 0; j < i; ++j) {
        if constexpr (kPerChannel)
          L[i * C + j] = beta[t0 + i] * decayed_dot(K + i * dk, K + j * dk, i, j);
        else
          L[i * C + j] = beta[t0 + i] * dot_f64(K + i * dk, K + j * dk, dk) * std::exp(gam[i] - gam[j]);
      }
    // (I + L) U = beta V and (I + L) W = beta exp(gamma) K by forward substitution.
    U.assign(static_cast<size_t>(C * dv), 0.0);
    W.assign(static_cast<size_t>(C * dk), 0.0);
    for (int64_t i = 0; i < C; ++i) {
      const double b = beta[t0 + i];
      for (int64_t d = 0; d < dv; ++d) U[i * dv + d] = b * Vv[i * dv + d];
      for (int64_t d = 0; d < dk; ++d) W[i * dk + d] = b * std::exp(g_of(i, d)) * K[i * dk + d];
      for (int64_t j = 0; j < i; ++j) {
        const double l = L[i * C + j];
        for (int64_t d = 0; d < dv; ++d) U[i * dv + d] -= l * U[j * dv + d];
        for (int64_t d = 0; d < dk; ++d) W[i * dk + d] -= l * W[j * dk + d];
      }
    }
    // V' = U - W S
    Vn = U;
    for (int64_t i = 0; i < C; ++i)
      for (int64_t a = 0; a < dk; ++a) {
        const double wa = W[i * dk + a];
        for (int64_t d = 0; d < dv; ++d) Vn[i * dv + d] -= wa * S[a * dv + d];
      }
    // O_i = (q_i exp(gamma_i)) S + sum_{j<=i} (decayed q_i.k_j) V'_j
    for (int64_t i = 0; i < C; ++i) {
      double* oi = o + (t0 + i) * dv;
      for (int64_t d = 0; d < dv; ++d) oi[d] = 0;
      for (int64_t a = 0; a < dk; ++a) {
        const double qa = Q[i * dk + a] * std::exp(g_of(i, a));
        for (int64_t d = 0; d < dv; ++d) oi[d] += qa * S[a * dv + d];
      }
      for (int64_t j = 0; j <= i; ++j) {
        const double c = decayed_dot(Q + i * dk, K + j * dk, i, j);
        for (int64_t d = 0; d < dv; ++d) oi[d] += c * Vn[j * dv + d];
      }
    }
    // S <- exp(gamma_last) S + sum_j exp(gamma_last - gamma_j) k_j V'_j^T (per channel row)
    for (int64_t a = 0; a < dk; ++a) {
      const double el = std::exp(g_of(C - 1, a));
      for (int64_t d = 0; d < dv; ++d) S[a * dv + d] *= el;
    }
    for (int64_t j = 0; j < C; ++j)
      for (int64_t a = 0; a < dk; ++a) {
        const double ka = K[j * dk + a] * std::exp(g_of(C - 1, a) - g_of(j, a));
        for (int64_t d = 0; d < dv; ++d) S[a * dv + d] += ka * Vn[j * dv + d];
      }
  }
}

}  // namespace

void delta_rule_recurrent(const double* q, const double* k, const double* v, const double* g, const double* beta,
                          int64_t T, int64_t dk, int64_t dv, double* S, double* o) {
  delta_rule_recurrent_t<false>(q, k, v, g, beta, T, dk, dv, S, o);
}
void delta_rule_chunked(const double* q, const double* k, const double* v, const double* g, const double* beta,
                        int64_t T, int64_t dk, int64_t dv, int64_t chunk, double* S, double* o) {
  delta_rule_chunked_t<false>(q, k, v, g, beta, T, dk, dv, chunk, S, o);
}
void kda_delta_rule_recurrent(const double* q, const double* k, const double* v, const double* g, const double* beta,
                              int64_t T, int64_t dk, int64_t dv, double* S, double* o) {
  delta_rule_recurrent_t<true>(q, k, v, g, beta, T, dk, dv, S, o);
}
void kda_delta_rule_chunked(const double* q, const double* k, const double* v, const double* g, const double* beta,
                            int64_t T, int64_t dk, int64_t dv, int64_t chunk, double* S, double* o) {
  delta_rule_chunked_t<true>(q, k, v, g, beta, T, dk, dv, chunk, S, o);
}

std::vector<float> causal_conv_silu(const Matrix& taps, const float* x, int64_t T, int64_t cd, int64_t K,
                                    std::vector<float>& state) {
  std::vector<float> xin(static_cast<size_t>((K - 1 + T) * cd));
  std::memcpy(xin.data(), state.data(), sizeof(float) * static_cast<size_t>((K - 1) * cd));
  std::memcpy(xin.data() + (K - 1) * cd, x, sizeof(float) * static_cast<size_t>(T * cd));
  std::vector<float> conv(static_cast<size_t>(T * cd));
  for (int64_t t = 0; t < T; ++t)
    for (int64_t ch = 0; ch < cd; ++ch) {
      double s = 0;
      for (int64_t j = 0; j < K; ++j)
        s += static_cast<double>(taps.at(ch, j)) * static_cast<double>(xin[(t + j) * cd + ch]);
      conv[t * cd + ch] = static_cast<float>(silu(s));
    }
  std::memcpy(state.data(), xin.data() + T * cd, sizeof(float) * static_cast<size_t>((K - 1) * cd));
  return conv;
}

void gdn(const ModelConfig& c, const GdnWeights& w, const float* x, int64_t T, GdnPrefill form, GdnCacheLayer& cache,
         float* out, int threads) {
  const int64_t nk = c.ssm_n_k_heads, nv = c.ssm_n_v_heads, dk = c.ssm_d_k, dv = c.ssm_d_v;
  const int64_t r = nv / nk, kd = c.ssm_key_dim(), vd = c.ssm_value_dim(), cd = c.ssm_conv_dim();
  const int64_t K = c.ssm_conv_kernel;
  std::vector<float> qkv(static_cast<size_t>(T * cd)), z(static_cast<size_t>(T * vd)),
      b(static_cast<size_t>(T * nv)), a(static_cast<size_t>(T * nv));
  matmul(w.wqkv, x, T, qkv.data(), threads);
  matmul(w.wz, x, T, z.data(), threads);
  matmul(w.wb, x, T, b.data(), threads);
  matmul(w.wa, x, T, a.data(), threads);

  const std::vector<float> conv = causal_conv_silu(w.conv, qkv.data(), T, cd, K, cache.conv);

  // Per value head: gather q, k (L2-normed, q scaled), v, g, beta over time.
  const double qscale = 1.0 / std::sqrt(static_cast<double>(dk));
  auto l2 = [&](const float* src, double* dst, double extra) {
    double ss = 0;
    for (int64_t i = 0; i < dk; ++i) ss += static_cast<double>(src[i]) * static_cast<double>(src[i]);
    const double inv = extra / std::sqrt(ss + 1e-6);
    for (int64_t i = 0; i < dk; ++i) dst[i] = static_cast<double>(src[i]) * inv;
  };
  std::vector<float> o(static_cast<size_t>(T * vd));
  std::vector<double> qh(static_cast<size_t>(T * dk)), kh(static_cast<size_t>(T * dk)),
      vh(static_cast<size_t>(T * dv)), gh(static_cast<size_t>(T)), bh(static_cast<size_t>(T)),
      oh(static_cast<size_t>(T * dv));
  for (int64_t h = 0; h < nv; ++h) {
    const int64_t key = h / r;
    for (int64_t t = 0; t < T; ++t) {
      const float* row = conv.data() + t * cd;
      l2(row + key * dk, qh.data() + t * dk, qscale);
      l2(row + kd + key * dk, kh.data() + t * dk, 1.0);
      for (int64_t d = 0; d < dv; ++d) vh[t * dv + d] = row[2 * kd + h * dv + d];
      bh[t] = sigmoid(b[t * nv + h]);
      gh[t] = static_cast<double>(w.ssm_a[h]) *
              softplus(static_cast<double>(a[t * nv + h]) + static_cast<double>(w.dt_bias[h]));
    }
    double* S = cache.state.data() + h * dk * dv;
    if (form == GdnPrefill::recurrent)
      delta_rule_recurrent(qh.data(), kh.data(), vh.data(), gh.data(), bh.data(), T, dk, dv, S, oh.data());
    else
      delta_rule_chunked(qh.data(), kh.data(), vh.data(), gh.data(), bh.data(), T, dk, dv, kGdnChunk, S, oh.data());
    for (int64_t t = 0; t < T; ++t)
      for (int64_t d = 0; d < dv; ++d) o[t * vd + h * dv + d] = static_cast<float>(oh[t * dv + d]);
  }
  for (int64_t t = 0; t < T; ++t)
    for (int64_t h = 0; h < nv; ++h) {
      float* oth = o.data() + t * vd + h * dv;
      rmsnorm_gated(oth, z.data() + t * vd + h * dv, w.norm.data(), dv, c.rms_eps, oth);
    }
  matmul(w.wout, o.data(), T, out, threads);
}

}  // namespace memra::oracle::ops
