// Multi-head latent attention with the DSA indexer (GLM-5, transformers 5.17 glm_moe_dsa).
//
//   q_lat = rmsnorm(wq_a x; eps 1e-6)            q = wq_b q_lat       per head [nope | rope]
//   [c | kr] = wkv_a x;  c = rmsnorm(c; 1e-6)     [k_nope | v] = wkv_b c per head
//   rope (interleaved pairs) on q's rope part and on kr, the one rope key all heads share
//   key_h = [k_nope_h | kr],  o_h = softmax(q_h . key_h / sqrt(head_dim)) v_h   over the selected tokens
//   out = wo [o_1 .. o_H]
// The cache holds every position's expanded key and value (the form transformers caches) and its
// latent row [c | rotated kr]; mla_decode = latent attends one-token calls over the latent rows in
// the absorbed form (mla_attend_latent below), the same numbers up to rounding.
//
// Selection. A layer with an indexer scores every token s <= p for the query at position p:
//   score(s) = sum_h w_h relu(qi_h . ki_s / sqrt(hd_i)),  w = weights x / sqrt(n_i)
// with qi = dsa.wq_b q_lat and ki_s = layernorm(dsa.wk x_s) (weight, bias, eps 1e-6), the first
// n_rot dims of each rotated like the attention's. The query attends to its dsa_topk best tokens
// (all of them while p + 1 <= dsa_topk); ties at the cut go to the lowest position (transformers'
// topk leaves their order unspecified; random-weight fixtures do not produce exact ties). A
// "shared" layer reuses the selection of the layer before it.
//
// GLM-5's hybrid (glm5_next; dsa_kpool = P, n_rot 0, latent norms at rms_eps): the indexer
// scores pools instead of tokens. Pool j holds tokens jP .. jP+P-1; its key is, per channel c,
//   kp_j[c] = sum_s softmax_s(g_s[c] + ape[s - jP][c]) ki_s[c],  g_s = kpool_gate x_s
// and the query at p scores the pools that close at or before it, (p + 1) / P of them, with the
// formula above; it attends to the tokens of its dsa_topk / P best pools (ties: lowest pool) and
// to the open tail, tokens ((p + 1) / P) P .. p, always.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <vector>

#include "memra/error.h"
#include "oracle/ops.h"

namespace memra::oracle::ops {

namespace {
// The indexer-key LayerNorm's eps (1e-6 in both GLM-5 families; the latent norms':
// ModelConfig::mla_latent_eps).
constexpr double kIndexNormEps = ModelConfig::kMlaNormEps;
}  // namespace

void rope_pairs(float* x, int64_t n_rot, int64_t pos, double theta) {
  for (int64_t i = 0; i < n_rot / 2; ++i) {
    const double inv_freq = std::pow(theta, -2.0 * static_cast<double>(i) / static_cast<double>(n_rot));
    const double ang = static_cast<double>(pos) * inv_freq;
    const double cs = std::cos(ang), sn = std::sin(ang);
    const double a = x[2 * i], b = x[2 * i + 1];
    x[2 * i] = static_cast<float>(a * cs - b * sn);
    x[2 * i + 1] = static_cast<float>(b * cs + a * sn);
  }
}

void layernorm(const float* x, const float* w, const float* b, int64_t n, double eps, float* y) {
  double mean = 0;
  for (int64_t i = 0; i < n; ++i) mean += static_cast<double>(x[i]);
  mean /= static_cast<double>(n);
  double var = 0;
  for (int64_t i = 0; i < n; ++i) var += (static_cast<double>(x[i]) - mean) * (static_cast<double>(x[i]) - mean);
  const double r = 1.0 / std::sqrt(var / static_cast<double>(n) + eps);
  for (int64_t i = 0; i < n; ++i)
    y[i] = static_cast<float>((static_cast<double>(x[i]) - mean) * r * static_cast<double>(w[i]) +
                              static_cast<double>(b[i]));
}

std::vector<int32_t> select_top(std::span<const double> scores, int64_t k) {
  std::vector<int32_t> idx(scores.size());
  std::iota(idx.begin(), idx.end(), 0);
  if (static_cast<int64_t>(idx.size()) <= k) return idx;
  // stable: equal scores keep position order, so ties go to the lowest position
  std::stable_sort(idx.begin(), idx.end(), [&](int32_t a, int32_t b) { return scores[a] > scores[b]; });
  idx.resize(static_cast<size_t>(k));
  std::sort(idx.begin(), idx.end());
  return idx;
}

std::vector<int32_t> select_top_torch_cpu(std::span<const double> scores, int64_t n_total, int64_t k) {
  const int64_t n = static_cast<int64_t>(scores.size());
  if (n_total < n) fail("select_top_torch_cpu: ", n, " scores in a row of ", n_total);
  k = std::min(k, n_total);
  if (k <= 0) return {};
  if (k * 64 <= n_total)
    fail("select_top_torch_cpu: a row of ", n_total, " for top ", k,
         " takes torch's partial-sort branch, which is not reproduced");
  using Entry = std::pair<float, int64_t>;
  std::vector<Entry> row(static_cast<size_t>(n_total));
  for (int64_t j = 0; j < n_total; ++j) row[j] = {j < n ? static_cast<float>(scores[j]) : -INFINITY, j};
  auto before = [](const Entry& a, const Entry& b) {
    return (std::isnan(a.first) && !std::isnan(b.first)) || a.first > b.first;
  };
  std::nth_element(row.begin(), row.begin() + (k - 1), row.end(), before);
  std::sort(row.begin(), row.begin() + (k - 1), before);
  std::vector<int32_t> out;
  for (int64_t j = 0; j < k; ++j)
    if (row[j].second < n) out.push_back(static_cast<int32_t>(row[j].second));
  std::sort(out.begin(), out.end());
  return out;
}

void mla_attend_latent(const Matrix& wkv_b, int64_t H, int64_t dn, int64_t n_rot, int64_t dv, const float* q, int64_t T,
                       const float* lat, const std::vector<std::vector<int32_t>>& selection, float* o, int threads) {
  const int64_t kvr = wkv_b.cols, hd = dn + n_rot, lw = kvr + n_rot;
  if (wkv_b.rows != H * (dn + dv))
    fail("mla_attend_latent: wkv_b has ", wkv_b.rows, " rows for ", H, " heads of ", dn, " + ", dv);
  if (static_cast<int64_t>(selection.size()) != T)
    fail("mla_attend_latent: ", selection.size(), " selections for ", T, " tokens");
  const double scale = 1.0 / std::sqrt(static_cast<double>(hd));
  parallel_rows(T * H, T * H * (dn + dv) * kvr, threads, [&](int64_t r0, int64_t r1) {
    std::vector<double> acc(static_cast<size_t>(kvr)), p;
    std::vector<float> qa(static_cast<size_t>(lw)), ol(static_cast<size_t>(kvr));
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t t = r / H, h = r % H;
      const float* qh = q + (t * H + h) * hd;
      std::fill(acc.begin(), acc.end(), 0.0);
      for (int64_t i = 0; i < dn; ++i) {  // W_UK_h^T q_nope: row i of the head's key block times q[i]
        const float* wr = wkv_b.row(h * (dn + dv) + i);
        for (int64_t j = 0; j < kvr; ++j) acc[j] += static_cast<double>(qh[i]) * static_cast<double>(wr[j]);
      }
      for (int64_t j = 0; j < kvr; ++j) qa[j] = static_cast<float>(acc[j]);
      std::copy(qh + dn, qh + hd, qa.begin() + kvr);
      const std::vector<int32_t>& sel = selection[static_cast<size_t>(t)];
      p.assign(sel.size(), 0.0);
      double mx = -INFINITY;
      for (size_t j = 0; j < sel.size(); ++j) {
        p[j] = dot(qa.data(), lat + sel[j] * lw, lw) * scale;
        mx = std::max(mx, p[j]);
      }
      double sum = 0;
      for (double& v : p) sum += (v = std::exp(v - mx));
      std::fill(acc.begin(), acc.end(), 0.0);
      for (size_t j = 0; j < sel.size(); ++j) {
        const float* cs = lat + sel[j] * lw;
        const double ps = p[j] / sum;
        for (int64_t i = 0; i < kvr; ++i) acc[i] += ps * static_cast<double>(cs[i]);
      }
      for (int64_t i = 0; i < kvr; ++i) ol[i] = static_cast<float>(acc[i]);
      for (int64_t d = 0; d < dv; ++d)  // W_UV_h ol
        o[(t * H + h) * dv + d] = static_cast<float>(dot(wkv_b.row(h * (dn + dv) + dn + d), ol.data(), kvr));
    }
  });
}

void mla(const ModelConfig& c, const MlaWeights& w, const DsaWeights* dsa, const float* x, int64_t T, int64_t pos0,
         AttnCacheLayer& cache, std::vector<std::vector<int32_t>>& selection, float* out, int threads, MlaDecode form) {
  const int64_t H = c.n_head, hd = c.head_dim, dn = c.mla_d_nope, dr = c.n_rot, dv = c.mla_d_v;
  const int64_t qr = c.mla_q_rank, kvr = c.mla_kv_rank, kw = c.kv_k_width(), vw = c.kv_v_width();
  const double latent_eps = c.mla_latent_eps();
  std::vector<float> qlat(static_cast<size_t>(T * qr)), q(static_cast<size_t>(T * H * hd));
  std::vector<float> kva(static_cast<size_t>(T * (kvr + dr))), lat(static_cast<size_t>(T * kvr));
  std::vector<float> kvb(static_cast<size_t>(T * H * (dn + dv)));
  matmul(w.wq_a, x, T, qlat.data(), threads);
  for (int64_t t = 0; t < T; ++t)
    rmsnorm(qlat.data() + t * qr, w.q_a_norm.data(), qr, latent_eps, qlat.data() + t * qr);
  matmul(w.wq_b, qlat.data(), T, q.data(), threads);
  matmul(w.wkv_a, x, T, kva.data(), threads);
  for (int64_t t = 0; t < T; ++t)
    rmsnorm(kva.data() + t * (kvr + dr), w.kv_a_norm.data(), kvr, latent_eps, lat.data() + t * kvr);
  matmul(w.wkv_b, lat.data(), T, kvb.data(), threads);
  for (int64_t t = 0; t < T; ++t) {
    const int64_t pos = pos0 + t;
    for (int64_t h = 0; h < H; ++h) rope_pairs(q.data() + (t * H + h) * hd + dn, dr, pos, c.rope_theta);
    float* kr = kva.data() + t * (kvr + dr) + kvr;
    rope_pairs(kr, dr, pos, c.rope_theta);
    float* lp = cache.lat.data() + pos * (kvr + dr);  // the latent row: [c | kr]
    std::memcpy(lp, lat.data() + t * kvr, sizeof(float) * kvr);
    std::memcpy(lp + kvr, kr, sizeof(float) * dr);
    float* kp = cache.k.data() + pos * kw;
    float* vp = cache.v.data() + pos * vw;
    for (int64_t h = 0; h < H; ++h) {
      const float* src = kvb.data() + (t * H + h) * (dn + dv);
      std::memcpy(kp + h * hd, src, sizeof(float) * dn);
      std::memcpy(kp + h * hd + dn, kr, sizeof(float) * dr);
      std::memcpy(vp + h * dv, src + dn, sizeof(float) * dv);
    }
  }

  if (dsa) {
    const int64_t ni = c.dsa_n_head, hi = c.dsa_head_dim, P = c.dsa_kpool;
    std::vector<float> qi(static_cast<size_t>(T * ni * hi)), ki(static_cast<size_t>(T * hi)),
        wi(static_cast<size_t>(T * ni));
    matmul(dsa->wq_b, qlat.data(), T, qi.data(), threads);
    matmul(dsa->wk, x, T, ki.data(), threads);
    matmul(dsa->weights, x, T, wi.data(), threads);
    if (P > 0) matmul(dsa->kpool_gate, x, T, cache.index_gate.data() + pos0 * hi, threads);
    for (int64_t t = 0; t < T; ++t) {
      const int64_t pos = pos0 + t;
      for (int64_t h = 0; h < ni; ++h) rope_pairs(qi.data() + (t * ni + h) * hi, dr, pos, c.rope_theta);
      float* kt = cache.index_k.data() + pos * hi;
      layernorm(ki.data() + t * hi, dsa->k_norm.data(), dsa->k_norm_bias.data(), hi, kIndexNormEps, kt);
      rope_pairs(kt, dr, pos, c.rope_theta);
    }
    // The keys scored: every token's, or (pooled) every pool's that closes by the call's last token.
    const float* keys = cache.index_k.data();
    std::vector<float> pooled;
    if (P > 0) {
      const int64_t n_pools = (pos0 + T) / P;
      pooled.resize(static_cast<size_t>(n_pools * hi));
      std::vector<float> logit(static_cast<size_t>(P * hi));
      for (int64_t j = 0; j < n_pools; ++j) {
        for (int64_t i = 0; i < P * hi; ++i) logit[i] = cache.index_gate[j * P * hi + i] + dsa->kpool_ape[i];
        pool_window(cache.index_k.data() + j * P * hi, logit.data(), P, hi, pooled.data() + j * hi);
      }
      keys = pooled.data();
    }
    const double qk_scale = 1.0 / std::sqrt(static_cast<double>(hi)),
                 w_scale = 1.0 / std::sqrt(static_cast<double>(ni));
    selection.assign(static_cast<size_t>(T), {});
    parallel_rows(T, T * (pos0 + T) * ni * hi, threads, [&](int64_t t0, int64_t t1) {
      std::vector<double> score;
      for (int64_t t = t0; t < t1; ++t) {
        const int64_t p = pos0 + t, n = P > 0 ? (p + 1) / P : p + 1;
        score.assign(static_cast<size_t>(n), 0.0);
        for (int64_t s = 0; s < n; ++s) {
          double acc = 0;
          for (int64_t h = 0; h < ni; ++h) {
            const double qk = dot(qi.data() + (t * ni + h) * hi, keys + s * hi, hi) * qk_scale;
            acc += static_cast<double>(wi[t * ni + h]) * w_scale * std::max(qk, 0.0);
          }
          score[s] = acc;
        }
        std::vector<int32_t>& sel = selection[static_cast<size_t>(t)];
        if (P == 0) {
          sel = select_top(score, c.dsa_topk);
          continue;
        }
        sel.clear();
        for (int32_t j : select_top(score, c.dsa_topk / P))
          for (int64_t s = 0; s < P; ++s) sel.push_back(static_cast<int32_t>(j * P + s));
        for (int64_t s = n * P; s <= p; ++s) sel.push_back(static_cast<int32_t>(s));  // the open tail
      }
    });
  }
  if (static_cast<int64_t>(selection.size()) != T)
    fail("oracle: MLA layer without an indexer and no selection from the layer before it");

  std::vector<float> o(static_cast<size_t>(T * H * dv));
  if (form == MlaDecode::latent && T == 1) {
    mla_attend_latent(w.wkv_b, H, dn, dr, dv, q.data(), T, cache.lat.data(), selection, o.data(), threads);
    matmul(w.wo, o.data(), T, out, threads);
    return;
  }
  const double scale = 1.0 / std::sqrt(static_cast<double>(hd));
  parallel_rows(T * H, T * H * (pos0 + T) * (hd + dv), threads, [&](int64_t r0, int64_t r1) {
    std::vector<double> p, acc(static_cast<size_t>(dv));
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t t = r / H, h = r % H;
      const std::vector<int32_t>& sel = selection[static_cast<size_t>(t)];
      const float* qh = q.data() + (t * H + h) * hd;
      p.assign(sel.size(), 0.0);
      double mx = -INFINITY;
      for (size_t j = 0; j < sel.size(); ++j) {
        p[j] = dot(qh, cache.k.data() + sel[j] * kw + h * hd, hd) * scale;
        mx = std::max(mx, p[j]);
      }
      double sum = 0;
      for (double& v : p) sum += (v = std::exp(v - mx));
      std::fill(acc.begin(), acc.end(), 0.0);
      for (size_t j = 0; j < sel.size(); ++j) {
        const float* vs = cache.v.data() + sel[j] * vw + h * dv;
        const double ps = p[j] / sum;
        for (int64_t d = 0; d < dv; ++d) acc[d] += ps * static_cast<double>(vs[d]);
      }
      for (int64_t d = 0; d < dv; ++d) o[(t * H + h) * dv + d] = static_cast<float>(acc[d]);
    }
  });
  matmul(w.wo, o.data(), T, out, threads);
}

}  // namespace memra::oracle::ops
