// Sparse MoE. Qwen3-Next / Qwen3.5-MoE: p = softmax(router x) over all experts, top-k by p,
// weights renormalised to sum 1 (norm_topk; Qwen3.5-MoE always), routed experts are SwiGLU FFNs,
// plus a shared SwiGLU expert scaled by sigmoid(shared_gate . x). GLM-5: sigmoid-grouped gating
// (route_grouped) and a shared expert added unscaled; GLM-5's hybrid clamps every SwiGLU
// (ModelConfig::swiglu_limit).
#include <algorithm>
#include <bit>
#include <cmath>
#include <numeric>
#include <vector>

#include "oracle/ops.h"

namespace memra::oracle::ops {

std::vector<std::pair<int64_t, double>> route(std::span<const float> logits, int64_t k, bool renorm) {
  const int64_t E = static_cast<int64_t>(logits.size());
  double mx = -INFINITY;
  for (float l : logits) mx = std::max(mx, static_cast<double>(l));
  std::vector<double> p(static_cast<size_t>(E));
  double sum = 0;
  for (int64_t e = 0; e < E; ++e) sum += (p[e] = std::exp(static_cast<double>(logits[e]) - mx));
  for (double& x : p) x /= sum;
  std::vector<int64_t> idx(static_cast<size_t>(E));
  std::iota(idx.begin(), idx.end(), 0);
  // stable_sort keeps equal probabilities in index order: ties go to the lowest expert.
  std::stable_sort(idx.begin(), idx.end(), [&](int64_t a, int64_t b) { return p[a] > p[b]; });
  std::vector<std::pair<int64_t, double>> sel;
  double tot = 0;
  for (int64_t j = 0; j < k; ++j) {
    sel.emplace_back(idx[j], p[idx[j]]);
    tot += p[idx[j]];
  }
  if (renorm)
    for (auto& s : sel) s.second /= tot;
  return sel;
}

std::vector<std::pair<int64_t, double>> route_grouped(std::span<const float> logits, std::span<const float> bias,
                                                      int64_t k, int64_t n_group, int64_t n_group_used, bool renorm,
                                                      double scale) {
  const int64_t E = static_cast<int64_t>(logits.size()), per = E / n_group;
  std::vector<double> s(static_cast<size_t>(E)), choice(static_cast<size_t>(E));
  for (int64_t e = 0; e < E; ++e) {
    s[e] = sigmoid(static_cast<double>(logits[e]));
    choice[e] = s[e] + static_cast<double>(bias[e]);
  }
  auto by_choice = [&](int64_t a, int64_t b) { return choice[a] > choice[b]; };
  std::vector<double> gscore(static_cast<size_t>(n_group));
  for (int64_t gi = 0; gi < n_group; ++gi) {
    std::vector<int64_t> m(static_cast<size_t>(per));
    std::iota(m.begin(), m.end(), gi * per);
    std::stable_sort(m.begin(), m.end(), by_choice);
    gscore[gi] = choice[m[0]] + choice[m[1]];
  }
  std::vector<int64_t> groups(static_cast<size_t>(n_group));
  std::iota(groups.begin(), groups.end(), 0);
  std::stable_sort(groups.begin(), groups.end(), [&](int64_t a, int64_t b) { return gscore[a] > gscore[b]; });
  std::vector<int64_t> cand;
  for (int64_t j = 0; j < n_group_used; ++j)
    for (int64_t e = groups[j] * per; e < (groups[j] + 1) * per; ++e) cand.push_back(e);
  std::sort(cand.begin(), cand.end());
  std::stable_sort(cand.begin(), cand.end(), by_choice);
  std::vector<std::pair<int64_t, double>> sel;
  double tot = 0;
  for (int64_t j = 0; j < k; ++j) {
    sel.emplace_back(cand[j], s[cand[j]]);
    tot += s[cand[j]];
  }
  for (auto& e : sel) e.second = (renorm ? e.second / (tot + 1e-20) : e.second) * scale;
  return sel;
}

void moe(const ModelConfig& c, const MoeWeights& w, const float* x, int64_t T, float* out, int threads,
         std::vector<Selection>* record, int64_t pos0, int32_t layer) {
  const int64_t D = c.n_embd, E = c.n_expert;
  std::vector<float> logits(static_cast<size_t>(T * E));
  matmul(w.router, x, T, logits.data(), threads);
  std::vector<double> acc(static_cast<size_t>(D));
  std::vector<float> y(static_cast<size_t>(D));
  auto expert = [&](const FfnWeights& f, const float* xt) {
    if (c.swiglu_limit > 0)
      ffn_clamped(f, xt, 1, c.swiglu_limit, y.data(), threads);
    else
      ffn(f, xt, 1, y.data(), threads);
  };
  for (int64_t t = 0; t < T; ++t) {
    const float* xt = x + t * D;
    std::fill(acc.begin(), acc.end(), 0.0);
    const std::span<const float> lt{logits.data() + t * E, static_cast<size_t>(E)};
    const auto sel = c.moe_gating == MoeGating::SigmoidGrouped
                         ? route_grouped(lt, w.router_bias, c.n_expert_used, c.n_expert_group, c.n_expert_group_used,
                                         c.norm_topk, c.expert_weights_scale)
                         : route(lt, c.n_expert_used, c.norm_topk);
    if (record) {
      Selection r;
      r.pos = pos0 + t;
      r.layer = layer;
      for (auto [e, wt] : sel) {
        r.experts.push_back(static_cast<int32_t>(e));
        r.weight_bits.push_back(std::bit_cast<uint32_t>(static_cast<float>(wt)));
      }
      record->push_back(std::move(r));
    }
    for (auto [e, wt] : sel) {
      expert(w.experts[static_cast<size_t>(e)], xt);
      for (int64_t d = 0; d < D; ++d) acc[d] += wt * static_cast<double>(y[d]);
    }
    if (!w.shared.gate.empty()) {
      const double sg = w.shared_gate.empty() ? 1.0 : sigmoid(dot(w.shared_gate.data(), xt, D));
      expert(w.shared, xt);
      for (int64_t d = 0; d < D; ++d) acc[d] += sg * static_cast<double>(y[d]);
    }
    for (int64_t d = 0; d < D; ++d) out[t * D + d] = static_cast<float>(acc[d]);
  }
}

}  // namespace memra::oracle::ops
