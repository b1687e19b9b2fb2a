// Sparse MoE (Qwen3-Next / Qwen3.5-MoE): p = softmax(router x) over all experts, top-k by p,
// weights renormalised to sum 1 (norm_topk; Qwen3.5-MoE always), routed experts are SwiGLU FFNs,
// plus a shared SwiGLU expert scaled by sigmoid(shared_gate . x).
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

void moe(const ModelConfig& c, const MoeWeights& w, const float* x, int64_t T, float* out, int threads,
         std::vector<Selection>* record, int64_t pos0, int32_t layer) {
  const int64_t D = c.n_embd, E = c.n_expert;
  std::vector<float> logits(static_cast<size_t>(T * E));
  matmul(w.router, x, T, logits.data(), threads);
  std::vector<double> acc(static_cast<size_t>(D));
  std::vector<float> y(static_cast<size_t>(D));
  for (int64_t t = 0; t < T; ++t) {
    const float* xt = x + t * D;
    std::fill(acc.begin(), acc.end(), 0.0);
    const auto sel = route({logits.data() + t * E, static_cast<size_t>(E)}, c.n_expert_used, c.norm_topk);
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
      ffn(w.experts[static_cast<size_t>(e)], xt, 1, y.data(), threads);
      for (int64_t d = 0; d < D; ++d) acc[d] += wt * static_cast<double>(y[d]);
    }
    if (!w.shared.gate.empty()) {
      const double sg = sigmoid(dot(w.shared_gate.data(), xt, D));
      ffn(w.shared, xt, 1, y.data(), threads);
      for (int64_t d = 0; d < D; ++d) acc[d] += sg * static_cast<double>(y[d]);
    }
    for (int64_t d = 0; d < D; ++d) out[t * D + d] = static_cast<float>(acc[d]);
  }
}

}  // namespace memra::oracle::ops
