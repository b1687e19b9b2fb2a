// DeepSeek-V4's pieces for the CPU oracle (transformers 5.17 `deepseek_v4`; the equations are in
// docs/deepseek-v4.md): the manifold-constrained hyper-connections (mHC) that replace the
// residual add, RoPE on a layer's own frequency table (plain or YaRN) applied to the trailing
// rotated slice and undone on the attention output, the compressor's gated pooling of a window,
// the lightning indexer's scores, attention over a key list with a per-head sink logit, the
// grouped low-rank output projection, sqrt-softplus and hash routing, and the clamped SwiGLU.
// The numeric contract of ops.h: f64 inside each op, f32 out.
#include <algorithm>
#include <cmath>
#include <numbers>
#include <numeric>
#include <vector>

#include "memra/error.h"
#include "oracle/ops.h"

namespace memra::oracle::ops {

namespace {

// x * rsqrt(mean(x^2) + eps) over n values, in f64, rounded to f32 (the mHC input norm).
std::vector<float> unweighted_rmsnorm(const float* x, int64_t n, double eps) {
  double ss = 0;
  for (int64_t i = 0; i < n; ++i) ss += static_cast<double>(x[i]) * static_cast<double>(x[i]);
  const double r = 1.0 / std::sqrt(ss / static_cast<double>(n) + eps);
  std::vector<float> y(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) y[static_cast<size_t>(i)] = static_cast<float>(static_cast<double>(x[i]) * r);
  return y;
}

}  // namespace

HcMix hc_mix(const float* X, int64_t N, int64_t D, const Matrix& fn, std::span<const float> base,
             std::span<const float> scale, int64_t iters, double hc_eps, double rms_eps) {
  const int64_t M = (2 + N) * N;
  if (fn.rows != M || fn.cols != N * D || static_cast<int64_t>(base.size()) != M || scale.size() != 3 || iters < 1)
    fail("hc_mix: fn [", fn.rows, ", ", fn.cols, "], base ", base.size(), ", scale ", scale.size(), ", iters ", iters,
         " for ", N, " streams of ", D);
  const std::vector<float> hn = unweighted_rmsnorm(X, N * D, rms_eps);
  std::vector<float> buf;
  const float* h = input_rows(fn, hn.data(), 1, buf);
  std::vector<double> z(static_cast<size_t>(M));
  for (int64_t r = 0; r < M; ++r) z[static_cast<size_t>(r)] = dot(fn.row(r), h, N * D);
  HcMix m;
  m.n = N;
  m.pre.resize(static_cast<size_t>(N));
  m.post.resize(static_cast<size_t>(N));
  m.comb.resize(static_cast<size_t>(N * N));
  const double s_pre = scale[0], s_post = scale[1], s_comb = scale[2];
  for (int64_t n = 0; n < N; ++n) {
    m.pre[n] = sigmoid(z[n] * s_pre + base[n]) + hc_eps;
    m.post[n] = 2.0 * sigmoid(z[N + n] * s_post + base[N + n]);
  }
  // comb[i][j]: softmax over j of the logits, + eps; then Sinkhorn, columns first.
  for (int64_t i = 0; i < N; ++i) {
    double* row = m.comb.data() + i * N;
    double mx = -INFINITY;
    for (int64_t j = 0; j < N; ++j) mx = std::max(mx, row[j] = z[2 * N + i * N + j] * s_comb + base[2 * N + i * N + j]);
    double sum = 0;
    for (int64_t j = 0; j < N; ++j) sum += (row[j] = std::exp(row[j] - mx));
    for (int64_t j = 0; j < N; ++j) row[j] = row[j] / sum + hc_eps;
  }
  auto normalise_columns = [&] {
    for (int64_t j = 0; j < N; ++j) {
      double s = 0;
      for (int64_t i = 0; i < N; ++i) s += m.comb[i * N + j];
      for (int64_t i = 0; i < N; ++i) m.comb[i * N + j] /= s + hc_eps;
    }
  };
  normalise_columns();
  for (int64_t it = 1; it < iters; ++it) {
    for (int64_t i = 0; i < N; ++i) {
      double s = 0;
      for (int64_t j = 0; j < N; ++j) s += m.comb[i * N + j];
      for (int64_t j = 0; j < N; ++j) m.comb[i * N + j] /= s + hc_eps;
    }
    normalise_columns();
  }
  return m;
}

void hc_collapse(std::span<const double> pre, const float* X, int64_t D, float* c) {
  const int64_t N = static_cast<int64_t>(pre.size());
  for (int64_t d = 0; d < D; ++d) {
    double s = 0;
    for (int64_t n = 0; n < N; ++n) s += pre[n] * static_cast<double>(X[n * D + d]);
    c[d] = static_cast<float>(s);
  }
}

void hc_expand(const HcMix& m, const float* out, float* X, int64_t D) {
  const int64_t N = m.n;
  std::vector<float> next(static_cast<size_t>(N * D));
  for (int64_t k = 0; k < N; ++k)
    for (int64_t d = 0; d < D; ++d) {
      double s = m.post[k] * static_cast<double>(out[d]);
      for (int64_t j = 0; j < N; ++j) s += m.comb[j * N + k] * static_cast<double>(X[j * D + d]);
      next[static_cast<size_t>(k * D + d)] = static_cast<float>(s);
    }
  std::copy(next.begin(), next.end(), X);
}

std::vector<double> hc_head_pre(const float* X, int64_t N, int64_t D, const Matrix& fn, std::span<const float> base,
                                std::span<const float> scale, double hc_eps, double rms_eps) {
  if (fn.rows != N || fn.cols != N * D || static_cast<int64_t>(base.size()) != N || scale.size() != 1)
    fail("hc_head: fn [", fn.rows, ", ", fn.cols, "], base ", base.size(), ", scale ", scale.size(), " for ", N,
         " streams of ", D);
  const std::vector<float> hn = unweighted_rmsnorm(X, N * D, rms_eps);
  std::vector<float> buf;
  const float* h = input_rows(fn, hn.data(), 1, buf);
  std::vector<double> pre(static_cast<size_t>(N));
  for (int64_t n = 0; n < N; ++n) pre[n] = sigmoid(dot(fn.row(n), h, N * D) * scale[0] + base[n]) + hc_eps;
  return pre;
}

void rope_pairs_freq(float* x, std::span<const double> inv_freq, int64_t pos, bool inverse) {
  for (size_t i = 0; i < inv_freq.size(); ++i) {
    const double ang = static_cast<double>(pos) * inv_freq[i];
    const double cs = std::cos(ang), sn = inverse ? -std::sin(ang) : std::sin(ang);
    const double a = x[2 * i], b = x[2 * i + 1];
    x[2 * i] = static_cast<float>(a * cs - b * sn);
    x[2 * i + 1] = static_cast<float>(b * cs + a * sn);
  }
}

void pool_window(const float* kv, const float* gate, int64_t S, int64_t width, float* out) {
  for (int64_t c = 0; c < width; ++c) {
    double mx = -INFINITY;
    for (int64_t s = 0; s < S; ++s) mx = std::max(mx, static_cast<double>(gate[s * width + c]));
    if (mx == -INFINITY) fail("pool_window: channel ", c, " has no slot (every gate is -inf)");
    double den = 0, num = 0;
    for (int64_t s = 0; s < S; ++s) {
      const double g = static_cast<double>(gate[s * width + c]);
      if (g == -INFINITY) continue;  // an empty slot: weight exactly 0
      const double e = std::exp(g - mx);
      den += e;
      num += e * static_cast<double>(kv[s * width + c]);
    }
    out[c] = static_cast<float>(num / den);
  }
}

void compressor_append(CompressorState& s, const float* kv, const float* gate, int64_t T, std::span<const float> ape,
                       std::span<const float> norm, double eps, std::span<const double> inv_freq) {
  const int64_t m = s.ratio, w = s.width, cw = s.cw();
  if (m <= 0 || w <= 0 || static_cast<int64_t>(ape.size()) != m * cw || static_cast<int64_t>(norm.size()) != w ||
      2 * static_cast<int64_t>(inv_freq.size()) > w)
    fail("compressor: ratio ", m, ", width ", w, ", ape ", ape.size(), " (expected ", m * cw, "), norm ", norm.size(),
         ", rotated ", 2 * inv_freq.size());
  const int64_t t0 = s.tokens();
  s.kv.insert(s.kv.end(), kv, kv + T * cw);
  s.gate.insert(s.gate.end(), gate, gate + T * cw);
  const int64_t S = s.overlap ? 2 * m : m;
  std::vector<float> skv(static_cast<size_t>(S * w)), sgate(static_cast<size_t>(S * w)), pooled(static_cast<size_t>(w));
  // each slot: token `t`'s half starting at `off` of its projections, with ape row j
  auto fill = [&](int64_t slot, int64_t t, int64_t off, int64_t j) {
    for (int64_t c = 0; c < w; ++c) {
      skv[slot * w + c] = s.kv[t * cw + off + c];
      sgate[slot * w + c] = static_cast<float>(static_cast<double>(s.gate[t * cw + off + c]) + ape[j * cw + off + c]);
    }
  };
  for (int64_t win = t0 / m; (win + 1) * m <= t0 + T; ++win) {  // the windows this call closes
    if (s.overlap) {
      for (int64_t j = 0; j < m; ++j) {
        if (win == 0) {
          for (int64_t c = 0; c < w; ++c) skv[j * w + c] = 0.0f, sgate[j * w + c] = -INFINITY;
        } else {
          fill(j, (win - 1) * m + j, 0, j);
        }
        fill(m + j, win * m + j, w, j);
      }
    } else {
      for (int64_t j = 0; j < m; ++j) fill(j, win * m + j, 0, j);
    }
    pool_window(skv.data(), sgate.data(), S, w, pooled.data());
    std::vector<float> row(static_cast<size_t>(w));
    rmsnorm(pooled.data(), norm.data(), w, eps, row.data());
    rope_pairs_freq(row.data() + w - 2 * static_cast<int64_t>(inv_freq.size()), inv_freq, win * m, false);
    s.rows.insert(s.rows.end(), row.begin(), row.end());
  }
}

std::vector<double> indexer_scores(const float* q, const float* w, const float* K, int64_t T, int64_t n_head,
                                   int64_t head_dim) {
  const double k_scale = 1.0 / std::sqrt(static_cast<double>(head_dim));
  const double w_scale = 1.0 / std::sqrt(static_cast<double>(n_head));
  std::vector<double> score(static_cast<size_t>(T), 0.0);
  for (int64_t t = 0; t < T; ++t) {
    double s = 0;
    for (int64_t h = 0; h < n_head; ++h) {
      const double qk = dot(q + h * head_dim, K + t * head_dim, head_dim);
      s += static_cast<double>(w[h]) * w_scale * (std::max(qk, 0.0) * k_scale);
    }
    score[static_cast<size_t>(t)] = s;
  }
  return score;
}

void sink_attention(const float* q, std::span<const float* const> keys, const float* sinks, int64_t n_head,
                    int64_t head_dim, float* out) {
  const double scale = 1.0 / std::sqrt(static_cast<double>(head_dim));
  const size_t J = keys.size();
  std::vector<double> l(J);
  for (int64_t h = 0; h < n_head; ++h) {
    const float* qh = q + h * head_dim;
    double mx = static_cast<double>(sinks[h]);
    for (size_t j = 0; j < J; ++j) mx = std::max(mx, l[j] = dot(qh, keys[j], head_dim) * scale);
    double den = std::exp(static_cast<double>(sinks[h]) - mx);  // the sink takes mass, gives no value
    for (size_t j = 0; j < J; ++j) den += (l[j] = std::exp(l[j] - mx));
    for (int64_t d = 0; d < head_dim; ++d) {
      double s = 0;
      for (size_t j = 0; j < J; ++j) s += l[j] * static_cast<double>(keys[j][d]);
      out[h * head_dim + d] = static_cast<float>(s / den);
    }
  }
}

void grouped_out(const Matrix& wo_a, int64_t groups, const float* o, float* y) {
  if (groups <= 0 || wo_a.rows % groups != 0) fail("grouped_out: ", wo_a.rows, " rows in ", groups, " groups");
  const int64_t R = wo_a.rows / groups, in = wo_a.cols;
  std::vector<float> buf;
  const float* x = input_rows(wo_a, o, groups, buf);  // each group's slice is a row of the product
  for (int64_t g = 0; g < groups; ++g)
    for (int64_t r = 0; r < R; ++r) y[g * R + r] = static_cast<float>(dot(wo_a.row(g * R + r), x + g * in, in));
}

std::vector<std::pair<int64_t, double>> route_sqrt_softplus(std::span<const float> logits, std::span<const float> bias,
                                                            std::span<const int32_t> fixed, int64_t k, double scale) {
  const int64_t E = static_cast<int64_t>(logits.size());
  std::vector<double> s(static_cast<size_t>(E));
  for (int64_t e = 0; e < E; ++e) s[e] = std::sqrt(softplus(static_cast<double>(logits[e])));
  std::vector<int64_t> chosen;
  if (!fixed.empty()) {  // a hash layer: the token's experts from tid2eid
    for (int32_t e : fixed) {
      if (e < 0 || e >= E) fail("route: hash table names expert ", e, " of ", E);
      chosen.push_back(e);
    }
  } else {
    std::vector<double> choice(static_cast<size_t>(E));
    for (int64_t e = 0; e < E; ++e) choice[e] = s[e] + (bias.empty() ? 0.0 : static_cast<double>(bias[e]));
    std::vector<int64_t> idx(static_cast<size_t>(E));
    std::iota(idx.begin(), idx.end(), 0);
    std::stable_sort(idx.begin(), idx.end(), [&](int64_t a, int64_t b) { return choice[a] > choice[b]; });
    chosen.assign(idx.begin(), idx.begin() + k);
  }
  double sum = 0;
  for (int64_t e : chosen) sum += s[e];
  std::vector<std::pair<int64_t, double>> sel;
  for (int64_t e : chosen) sel.emplace_back(e, s[e] / (sum + 1e-20) * scale);
  return sel;
}

void ffn_clamped(const FfnWeights& w, const float* x, int64_t T, double limit, float* out, int threads) {
  const int64_t F = w.gate.rows;
  std::vector<float> g(static_cast<size_t>(T * F)), u(static_cast<size_t>(T * F));
  matmul(w.gate, x, T, g.data(), threads);
  matmul(w.up, x, T, u.data(), threads);
  for (int64_t i = 0; i < T * F; ++i) {
    const double gi = std::min(static_cast<double>(g[i]), limit);
    const double ui = std::clamp(static_cast<double>(u[i]), -limit, limit);
    g[i] = static_cast<float>(silu(gi) * ui);
  }
  matmul(w.down, g.data(), T, out, threads);
}

}  // namespace memra::oracle::ops
