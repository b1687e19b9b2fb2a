// Tiny model configurations and helpers shared by the config, weights and oracle tests.
// The shapes follow the tiny configs verified against transformers in
// shared/reference/qwen-models.md 2.7: d_k != d_v, n_v = 2 n_k, mixed layer kinds, and for
// Qwen3-Next a dense layer among MoE layers (mlp_only_layers = [2]).
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "memra/config.h"
#include "memra/oracle.h"
#include "memra/weights.h"

namespace memra::testing_fixtures {

inline ModelConfig tiny_config(Family f, int64_t vocab = 512) {
  ModelConfig c;
  c.family = f;
  c.n_vocab = vocab;
  c.n_embd = 64;
  c.n_ctx_train = 4096;
  c.rms_eps = 1e-6;
  c.n_head = 4;
  c.n_head_kv = 2;
  c.head_dim = 16;
  c.n_rot = f == Family::Qwen3 ? 16 : 4;  // Next/3.5: partial rotary factor 0.25
  c.rope_theta = f == Family::Qwen3 ? 1e6 : 1e7;
  if (f == Family::Qwen3) {
    c.n_layer = 2;
    c.layer_kind.assign(2, LayerKind::Attention);
  } else {
    c.n_layer = 4;
    c.layer_kind = {LayerKind::Linear, LayerKind::Linear, LayerKind::Linear, LayerKind::Attention};
    c.ssm_n_k_heads = 2;
    c.ssm_n_v_heads = 4;
    c.ssm_d_k = 8;
    c.ssm_d_v = 12;
    c.ssm_conv_kernel = 4;
  }
  c.ffn_kind.assign(static_cast<size_t>(c.n_layer), FfnKind::Dense);
  c.n_ff = 96;
  if (f == Family::Qwen3Next || f == Family::Qwen35Moe) {
    c.n_expert = 4;
    c.n_expert_used = 2;
    c.n_ff_exp = 32;
    c.n_ff_shexp = 48;
    c.norm_topk = true;
    c.ffn_kind.assign(static_cast<size_t>(c.n_layer), FfnKind::Moe);
    if (f == Family::Qwen3Next) c.ffn_kind[2] = FfnKind::Dense;  // dense among MoE
    else c.n_ff = 0;
  }
  return c;
}

inline std::vector<int32_t> prompt(int64_t n, int64_t vocab, uint32_t seed = 1) {
  std::vector<int32_t> p(static_cast<size_t>(n));
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 7;
  for (auto& t : p) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    t = static_cast<int32_t>((s >> 33) % static_cast<uint64_t>(vocab));
  }
  return p;
}

// max |a - b| / max |b|: the relative error of a whole logit row.
inline double rel_err(std::span<const float> a, std::span<const float> b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    num = std::max(num, std::abs(static_cast<double>(a[i]) - b[i]));
    den = std::max(den, std::abs(static_cast<double>(b[i])));
  }
  return den > 0 ? num / den : num;
}

inline bool bit_equal(std::span<const float> a, std::span<const float> b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](float x, float y) {
           return std::bit_cast<uint32_t>(x) == std::bit_cast<uint32_t>(y);
         });
}

// Every tensor of a canonical weight set with a readable name, for whole-model comparisons.
using Flat = std::vector<std::pair<std::string, std::span<const float>>>;
inline void flatten_layer(const LayerWeights& L, const std::string& p, Flat& out) {
  auto add = [&](const std::string& n, const std::vector<float>& v) { out.emplace_back(p + n, v); };
  add("attn_norm", L.attn_norm);
  add("ffn_norm", L.ffn_norm);
  if (L.attn) {
    add("wq", L.attn->wq.data); add("wgate", L.attn->wgate.data); add("wk", L.attn->wk.data);
    add("wv", L.attn->wv.data); add("wo", L.attn->wo.data); add("q_norm", L.attn->q_norm);
    add("k_norm", L.attn->k_norm);
  }
  if (L.gdn) {
    add("wqkv", L.gdn->wqkv.data); add("wz", L.gdn->wz.data); add("wb", L.gdn->wb.data);
    add("wa", L.gdn->wa.data); add("conv", L.gdn->conv.data); add("ssm_a", L.gdn->ssm_a);
    add("dt_bias", L.gdn->dt_bias); add("norm", L.gdn->norm); add("wout", L.gdn->wout.data);
  }
  auto ffn = [&](const FfnWeights& f, const std::string& q) {
    add(q + "gate", f.gate.data); add(q + "up", f.up.data); add(q + "down", f.down.data);
  };
  if (L.ffn) ffn(*L.ffn, "ffn.");
  if (L.moe) {
    add("router", L.moe->router.data);
    for (size_t e = 0; e < L.moe->experts.size(); ++e) ffn(L.moe->experts[e], "expert" + std::to_string(e) + ".");
    ffn(L.moe->shared, "shared.");
    add("shared_gate", L.moe->shared_gate);
  }
}
inline Flat flatten(const ModelWeights& w) {
  Flat out;
  out.emplace_back("embed", w.embed.data);
  out.emplace_back("output_norm", w.output_norm);
  out.emplace_back("output", w.output.data);
  for (size_t i = 0; i < w.layers.size(); ++i) flatten_layer(w.layers[i], "layer" + std::to_string(i) + ".", out);
  if (w.mtp) {
    out.emplace_back("mtp.eh_proj", w.mtp->eh_proj.data);
    out.emplace_back("mtp.enorm", w.mtp->enorm);
    out.emplace_back("mtp.hnorm", w.mtp->hnorm);
    out.emplace_back("mtp.final_norm", w.mtp->final_norm);
    flatten_layer(w.mtp->layer, "mtp.layer.", out);
  }
  return out;
}

}  // namespace memra::testing_fixtures
