// Full (softmax) attention: Qwen3's plain form and Qwen3-Next/3.5's output-gated form.
//   q = q_norm(Wq x), k = k_norm(Wk x) per head (RMSNorm over head_dim, before RoPE), v = Wv x;
//   NEOX RoPE on the first n_rot dims; GQA: query head h reads kv head h / (H / KV);
//   o = softmax(q k^T / sqrt(head_dim), causal) v;  gated: o *= sigmoid(Wgate x);  out = Wo o.
#include <cmath>
#include <cstring>
#include <vector>

#include "oracle/ops.h"

namespace memra::oracle::ops {

void attention(const ModelConfig& c, const AttnWeights& w, const float* x, int64_t T, int64_t pos0,
               AttnCacheLayer& cache, float* out, int threads) {
  const int64_t H = c.n_head, KV = c.n_head_kv, hd = c.head_dim;
  const int64_t qd = H * hd, kvd = KV * hd, group = H / KV;
  std::vector<float> q(static_cast<size_t>(T * qd)), k(static_cast<size_t>(T * kvd)),
      v(static_cast<size_t>(T * kvd)), gate;
  matmul(w.wq, x, T, q.data(), threads);
  matmul(w.wk, x, T, k.data(), threads);
  matmul(w.wv, x, T, v.data(), threads);
  if (!w.wgate.empty()) {
    gate.resize(static_cast<size_t>(T * qd));
    matmul(w.wgate, x, T, gate.data(), threads);
  }
  for (int64_t t = 0; t < T; ++t) {
    const int64_t pos = pos0 + t;
    for (int64_t h = 0; h < H; ++h) {
      float* qh = q.data() + t * qd + h * hd;
      rmsnorm(qh, w.q_norm.data(), hd, c.rms_eps, qh);
      rope_neox(qh, c.n_rot, pos, c.rope_theta);
    }
    for (int64_t h = 0; h < KV; ++h) {
      float* kh = k.data() + t * kvd + h * hd;
      rmsnorm(kh, w.k_norm.data(), hd, c.rms_eps, kh);
      rope_neox(kh, c.n_rot, pos, c.rope_theta);
    }
    std::memcpy(cache.k.data() + pos * kvd, k.data() + t * kvd, sizeof(float) * kvd);
    std::memcpy(cache.v.data() + pos * kvd, v.data() + t * kvd, sizeof(float) * kvd);
  }

  const double scale = 1.0 / std::sqrt(static_cast<double>(hd));
  std::vector<float> o(static_cast<size_t>(T * qd));
  parallel_rows(T * H, T * H * (pos0 + T) * hd * 2, threads, [&](int64_t r0, int64_t r1) {
    std::vector<double> p, acc(static_cast<size_t>(hd));
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t t = r / H, h = r % H, kvh = h / group, n = pos0 + t + 1;
      const float* qh = q.data() + t * qd + h * hd;
      p.assign(static_cast<size_t>(n), 0.0);
      double mx = -INFINITY;
      for (int64_t s = 0; s < n; ++s) {
        p[s] = dot(qh, cache.k.data() + s * kvd + kvh * hd, hd) * scale;
        mx = std::max(mx, p[s]);
      }
      double sum = 0;
      for (int64_t s = 0; s < n; ++s) sum += (p[s] = std::exp(p[s] - mx));
      std::fill(acc.begin(), acc.end(), 0.0);
      for (int64_t s = 0; s < n; ++s) {
        const float* vs = cache.v.data() + s * kvd + kvh * hd;
        const double ps = p[s] / sum;
        for (int64_t d = 0; d < hd; ++d) acc[d] += ps * static_cast<double>(vs[d]);
      }
      float* oh = o.data() + t * qd + h * hd;
      if (gate.empty()) {
        for (int64_t d = 0; d < hd; ++d) oh[d] = static_cast<float>(acc[d]);
      } else {
        const float* gh = gate.data() + t * qd + h * hd;
        for (int64_t d = 0; d < hd; ++d) oh[d] = static_cast<float>(acc[d] * sigmoid(gh[d]));
      }
    }
  });
  matmul(w.wo, o.data(), T, out, threads);
}

}  // namespace memra::oracle::ops
