// Canonical weights -> checkpoint names and conventions (GGUF as llama.cpp's converter writes
// it, HF as save_pretrained writes it), and deterministic random canonical weights. Used by the
// round-trip tests and the fixture generator.
#include <cmath>
#include <cstring>

#include "memra/error.h"
#include "memra/weights.h"
#include "model/names.h"
#include "model/weights_internal.h"

namespace memra {

namespace {

// --- random -----------------------------------------------------------------------------------

class Rng {
 public:
  explicit Rng(uint64_t seed) : s_(seed) {}
  uint64_t next() {  // splitmix64
    uint64_t z = (s_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  float uniform(float lo, float hi) {
    const double u = static_cast<double>(next() >> 11) * (1.0 / 9007199254740992.0);
    return static_cast<float>(lo + (hi - lo) * u);
  }

 private:
  uint64_t s_;
};

Matrix rand_mat(Rng& g, int64_t rows, int64_t cols, float scale = 0) {
  Matrix m(rows, cols);
  const float s = scale > 0 ? scale : 1.0f / std::sqrt(static_cast<float>(cols));
  for (float& x : m.data) x = g.uniform(-s, s);
  return m;
}
std::vector<float> rand_vec(Rng& g, int64_t n, float lo, float hi) {
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = g.uniform(lo, hi);
  return v;
}

FfnWeights rand_ffn(Rng& g, int64_t D, int64_t F) {
  return {rand_mat(g, F, D), rand_mat(g, F, D), rand_mat(g, D, F)};
}

LayerWeights rand_layer(Rng& g, const ModelConfig& c, LayerKind kind, FfnKind ffn) {
  const int64_t D = c.n_embd;
  LayerWeights L;
  L.attn_norm = rand_vec(g, D, 0.75f, 1.25f);
  L.ffn_norm = rand_vec(g, D, 0.75f, 1.25f);
  if (kind == LayerKind::Attention) {
    AttnWeights a;
    const int64_t H = c.n_head, KV = c.n_head_kv, hd = c.head_dim;
    a.wq = rand_mat(g, H * hd, D);
    if (c.attn_gated()) a.wgate = rand_mat(g, H * hd, D);
    a.wk = rand_mat(g, KV * hd, D);
    a.wv = rand_mat(g, KV * hd, D);
    a.wo = rand_mat(g, D, H * hd);
    a.q_norm = rand_vec(g, hd, 0.75f, 1.25f);
    a.k_norm = rand_vec(g, hd, 0.75f, 1.25f);
    L.attn = std::move(a);
  } else {
    GdnWeights w;
    const int64_t nv = c.ssm_n_v_heads;
    w.wqkv = rand_mat(g, c.ssm_conv_dim(), D);
    w.wz = rand_mat(g, c.ssm_value_dim(), D);
    w.wb = rand_mat(g, nv, D);
    w.wa = rand_mat(g, nv, D);
    w.conv = rand_mat(g, c.ssm_conv_dim(), c.ssm_conv_kernel, 0.5f);
    w.ssm_a = rand_vec(g, nv, -8.0f, -0.5f);
    w.dt_bias = rand_vec(g, nv, 0.5f, 1.5f);
    w.norm = rand_vec(g, c.ssm_d_v, 0.75f, 1.25f);
    w.wout = rand_mat(g, D, c.ssm_value_dim());
    L.gdn = std::move(w);
  }
  if (ffn == FfnKind::Moe) {
    MoeWeights m;
    m.router = rand_mat(g, c.n_expert, D, 1.0f);  // spread logits so routing is not a near-tie
    for (int64_t e = 0; e < c.n_expert; ++e) m.experts.push_back(rand_ffn(g, D, c.n_ff_exp));
    if (c.n_ff_shexp > 0) {
      m.shared = rand_ffn(g, D, c.n_ff_shexp);
      m.shared_gate = rand_vec(g, D, -0.2f, 0.2f);
    }
    L.moe = std::move(m);
  } else {
    L.ffn = rand_ffn(g, D, c.n_ff);
  }
  return L;
}

// --- export helpers -----------------------------------------------------------------------------

void put(MemorySource& s, const std::string& name, const Matrix& m) {
  s.add_f32(name, {m.cols, m.rows}, m.data);
}
void put(MemorySource& s, const std::string& name, const std::vector<float>& v) {
  s.add_f32(name, {static_cast<int64_t>(v.size())}, v);
}
// HF zero-centred raw weight w from the canonical multiplier m (exact for m in [0.5, 2]).
std::vector<float> minus_one(std::vector<float> v) {
  for (float& x : v) x = x - 1.0f;
  return v;
}
// The GGUF value the converter derives from that HF weight: 1 + w.
std::vector<float> via_hf_norm(const std::vector<float>& m) {
  std::vector<float> v = minus_one(m);
  for (float& x : v) x = 1.0f + x;
  return v;
}
float a_log_of(float a) { return static_cast<float>(std::log(-static_cast<double>(a))); }

std::vector<float> interleave_q_gate(const AttnWeights& a, int64_t H, int64_t hd) {
  const int64_t D = a.wq.cols;
  std::vector<float> out(static_cast<size_t>(2 * H * hd * D));
  for (int64_t h = 0; h < H; ++h) {
    std::memcpy(out.data() + (h * 2 * hd) * D, a.wq.row(h * hd), sizeof(float) * hd * D);
    std::memcpy(out.data() + (h * 2 * hd + hd) * D, a.wgate.row(h * hd), sizeof(float) * hd * D);
  }
  return out;
}

std::vector<float> interleave_qkvz(const GdnWeights& g, const ModelConfig& c) {
  const int64_t D = c.n_embd, nk = c.ssm_n_k_heads, dk = c.ssm_d_k, dv = c.ssm_d_v;
  const int64_t r = c.ssm_n_v_heads / nk, kd = c.ssm_key_dim(), grp = 2 * dk + 2 * r * dv;
  std::vector<float> out(static_cast<size_t>(nk * grp * D));
  for (int64_t k = 0; k < nk; ++k) {
    float* base = out.data() + k * grp * D;
    std::memcpy(base, g.wqkv.row(k * dk), sizeof(float) * dk * D);
    std::memcpy(base + dk * D, g.wqkv.row(kd + k * dk), sizeof(float) * dk * D);
    std::memcpy(base + 2 * dk * D, g.wqkv.row(2 * kd + k * r * dv), sizeof(float) * r * dv * D);
    std::memcpy(base + (2 * dk + r * dv) * D, g.wz.row(k * r * dv), sizeof(float) * r * dv * D);
  }
  return out;
}

std::vector<float> interleave_ba(const GdnWeights& g, const ModelConfig& c) {
  const int64_t D = c.n_embd, nk = c.ssm_n_k_heads, r = c.ssm_n_v_heads / nk;
  std::vector<float> out(static_cast<size_t>(2 * c.ssm_n_v_heads * D));
  for (int64_t k = 0; k < nk; ++k) {
    std::memcpy(out.data() + (k * 2 * r) * D, g.wb.row(k * r), sizeof(float) * r * D);
    std::memcpy(out.data() + (k * 2 * r + r) * D, g.wa.row(k * r), sizeof(float) * r * D);
  }
  return out;
}

void put_layer_gguf(MemorySource& s, const ModelConfig& c, int64_t i, const LayerWeights& L,
                    GgufLayout layout) {
  auto N = [&](const char* t) { return names::gguf_blk(i, t); };
  const bool zc = c.zero_centred_norms();
  auto norm = [&](const std::vector<float>& m) { return zc ? via_hf_norm(m) : m; };
  const int64_t D = c.n_embd;
  put(s, N("attn_norm.weight"), norm(L.attn_norm));
  put(s, N(c.family == Family::Qwen3 ? "ffn_norm.weight" : "post_attention_norm.weight"), norm(L.ffn_norm));
  if (L.attn) {
    const AttnWeights& a = *L.attn;
    if (c.attn_gated())
      s.add_f32(N("attn_q.weight"), {D, 2 * c.n_head * c.head_dim}, interleave_q_gate(a, c.n_head, c.head_dim));
    else put(s, N("attn_q.weight"), a.wq);
    put(s, N("attn_k.weight"), a.wk);
    put(s, N("attn_v.weight"), a.wv);
    put(s, N("attn_output.weight"), a.wo);
    put(s, N("attn_q_norm.weight"), norm(a.q_norm));
    put(s, N("attn_k_norm.weight"), norm(a.k_norm));
  }
  if (L.gdn) {
    GdnWeights g = *L.gdn;
    for (float& a : g.ssm_a) a = detail::ssm_a_from_a_log(a_log_of(a));
    if (c.gguf_tiled_v_heads()) detail::permute_v_heads(g, c, /*to_tiled=*/true);
    put(s, N("attn_qkv.weight"), g.wqkv);
    put(s, N("attn_gate.weight"), g.wz);
    if (c.family == Family::Qwen3Next) {
      s.add_f32(N("ssm_ba.weight"), {D, 2 * c.ssm_n_v_heads}, interleave_ba(g, c));
    } else {
      put(s, N("ssm_beta.weight"), g.wb);
      put(s, N("ssm_alpha.weight"), g.wa);
    }
    put(s, N("ssm_conv1d.weight"), g.conv);
    put(s, N("ssm_a"), g.ssm_a);
    put(s, N("ssm_dt.bias"), g.dt_bias);
    put(s, N("ssm_norm.weight"), g.norm);
    put(s, N("ssm_out.weight"), g.wout);
  }
  if (L.moe) {
    const MoeWeights& m = *L.moe;
    const int64_t E = c.n_expert, I = c.n_ff_exp;
    put(s, N("ffn_gate_inp.weight"), m.router);
    std::vector<float> gate, up, gu, down;
    for (const FfnWeights& f : m.experts) {
      if (layout.fused_gate_up_exps) {
        gu.insert(gu.end(), f.gate.data.begin(), f.gate.data.end());
        gu.insert(gu.end(), f.up.data.begin(), f.up.data.end());
      } else {
        gate.insert(gate.end(), f.gate.data.begin(), f.gate.data.end());
        up.insert(up.end(), f.up.data.begin(), f.up.data.end());
      }
      down.insert(down.end(), f.down.data.begin(), f.down.data.end());
    }
    if (layout.fused_gate_up_exps) {
      s.add_f32(N("ffn_gate_up_exps.weight"), {D, 2 * I, E}, gu);
    } else {
      s.add_f32(N("ffn_gate_exps.weight"), {D, I, E}, gate);
      s.add_f32(N("ffn_up_exps.weight"), {D, I, E}, up);
    }
    s.add_f32(N("ffn_down_exps.weight"), {I, D, E}, down);
    if (c.n_ff_shexp > 0) {
      put(s, N("ffn_gate_shexp.weight"), m.shared.gate);
      put(s, N("ffn_up_shexp.weight"), m.shared.up);
      put(s, N("ffn_down_shexp.weight"), m.shared.down);
      put(s, N("ffn_gate_inp_shexp.weight"), m.shared_gate);
    }
  }
  if (L.ffn) {
    put(s, N("ffn_gate.weight"), L.ffn->gate);
    put(s, N("ffn_up.weight"), L.ffn->up);
    put(s, N("ffn_down.weight"), L.ffn->down);
  }
}

void put_layer_hf(MemorySource& s, const ModelConfig& c, const std::string& P, const LayerWeights& L,
                  HfLayout layout) {
  const bool zc = c.zero_centred_norms();
  auto norm = [&](const std::vector<float>& m) { return zc ? minus_one(m) : m; };
  const int64_t D = c.n_embd;
  put(s, P + "input_layernorm.weight", norm(L.attn_norm));
  put(s, P + "post_attention_layernorm.weight", norm(L.ffn_norm));
  if (L.attn) {
    const AttnWeights& a = *L.attn;
    const std::string A = P + "self_attn.";
    if (c.attn_gated())
      s.add_f32(A + "q_proj.weight", {D, 2 * c.n_head * c.head_dim}, interleave_q_gate(a, c.n_head, c.head_dim));
    else put(s, A + "q_proj.weight", a.wq);
    put(s, A + "k_proj.weight", a.wk);
    put(s, A + "v_proj.weight", a.wv);
    put(s, A + "o_proj.weight", a.wo);
    put(s, A + "q_norm.weight", norm(a.q_norm));
    put(s, A + "k_norm.weight", norm(a.k_norm));
  }
  if (L.gdn) {
    const GdnWeights& g = *L.gdn;
    const std::string G = P + "linear_attn.";
    if (c.family == Family::Qwen3Next) {
      s.add_f32(G + "in_proj_qkvz.weight", {D, c.ssm_conv_dim() + c.ssm_value_dim()}, interleave_qkvz(g, c));
      s.add_f32(G + "in_proj_ba.weight", {D, 2 * c.ssm_n_v_heads}, interleave_ba(g, c));
    } else {
      put(s, G + "in_proj_qkv.weight", g.wqkv);
      put(s, G + "in_proj_z.weight", g.wz);
      put(s, G + "in_proj_b.weight", g.wb);
      put(s, G + "in_proj_a.weight", g.wa);
    }
    s.add_f32(G + "conv1d.weight", {c.ssm_conv_kernel, 1, c.ssm_conv_dim()}, g.conv.data);
    std::vector<float> a_log = g.ssm_a;
    for (float& a : a_log) a = a_log_of(a);
    put(s, G + "A_log", a_log);
    put(s, G + "dt_bias", g.dt_bias);
    put(s, G + "norm.weight", g.norm);
    put(s, G + "out_proj.weight", g.wout);
  }
  const std::string M = P + "mlp.";
  if (L.moe) {
    const MoeWeights& m = *L.moe;
    const int64_t E = c.n_expert, I = c.n_ff_exp;
    put(s, M + "gate.weight", m.router);
    if (layout.fused_experts) {
      std::vector<float> gu, down;
      for (const FfnWeights& f : m.experts) {
        gu.insert(gu.end(), f.gate.data.begin(), f.gate.data.end());
        gu.insert(gu.end(), f.up.data.begin(), f.up.data.end());
        down.insert(down.end(), f.down.data.begin(), f.down.data.end());
      }
      s.add_f32(M + "experts.gate_up_proj", {D, 2 * I, E}, gu);
      s.add_f32(M + "experts.down_proj", {I, D, E}, down);
    } else {
      for (int64_t e = 0; e < E; ++e) {
        const std::string X = M + "experts." + std::to_string(e) + ".";
        const FfnWeights& f = m.experts[static_cast<size_t>(e)];
        put(s, X + "gate_proj.weight", f.gate);
        put(s, X + "up_proj.weight", f.up);
        put(s, X + "down_proj.weight", f.down);
      }
    }
    if (c.n_ff_shexp > 0) {
      put(s, M + "shared_expert.gate_proj.weight", m.shared.gate);
      put(s, M + "shared_expert.up_proj.weight", m.shared.up);
      put(s, M + "shared_expert.down_proj.weight", m.shared.down);
      s.add_f32(M + "shared_expert_gate.weight", {D, 1}, m.shared_gate);
    }
  }
  if (L.ffn) {
    put(s, M + "gate_proj.weight", L.ffn->gate);
    put(s, M + "up_proj.weight", L.ffn->up);
    put(s, M + "down_proj.weight", L.ffn->down);
  }
}

}  // namespace

ModelWeights random_weights(const ModelConfig& c, uint64_t seed) {
  c.validate();
  Rng g(seed);
  ModelWeights w;
  w.embed = rand_mat(g, c.n_vocab, c.n_embd, 1.0f);
  w.output_norm = rand_vec(g, c.n_embd, 0.75f, 1.25f);
  if (!c.tied_embeddings) w.output = rand_mat(g, c.n_vocab, c.n_embd);
  for (int64_t i = 0; i < c.n_layer; ++i)
    w.layers.push_back(rand_layer(g, c, c.layer_kind[static_cast<size_t>(i)], c.ffn_kind[static_cast<size_t>(i)]));
  if (c.n_mtp > 0) {
    MtpWeights m;
    m.eh_proj = rand_mat(g, c.n_embd, 2 * c.n_embd);
    m.enorm = rand_vec(g, c.n_embd, 0.75f, 1.25f);
    m.hnorm = rand_vec(g, c.n_embd, 0.75f, 1.25f);
    m.final_norm = rand_vec(g, c.n_embd, 0.75f, 1.25f);
    m.layer = rand_layer(g, c, LayerKind::Attention, c.n_expert > 0 ? FfnKind::Moe : FfnKind::Dense);
    w.mtp = std::move(m);
  }
  return w;
}

MemorySource to_gguf_source(const ModelConfig& c, const ModelWeights& w, GgufLayout layout) {
  MemorySource s(MetaStyle::Gguf, std::string("<memory gguf ") + std::string(family_arch(c.family)) + ">");
  write_gguf_keys(c, s);
  const bool zc = c.zero_centred_norms();
  put(s, "token_embd.weight", w.embed);
  put(s, "output_norm.weight", zc ? via_hf_norm(w.output_norm) : w.output_norm);
  if (!c.tied_embeddings) put(s, "output.weight", w.output);
  for (int64_t i = 0; i < c.n_layer; ++i) put_layer_gguf(s, c, i, w.layers[static_cast<size_t>(i)], layout);
  if (c.n_mtp > 0 && w.mtp) {
    const int64_t L = c.n_layer;
    put(s, names::gguf_blk(L, "nextn.eh_proj.weight"), w.mtp->eh_proj);
    put(s, names::gguf_blk(L, "nextn.enorm.weight"), via_hf_norm(w.mtp->enorm));
    put(s, names::gguf_blk(L, "nextn.hnorm.weight"), via_hf_norm(w.mtp->hnorm));
    put(s, names::gguf_blk(L, "nextn.shared_head_norm.weight"), via_hf_norm(w.mtp->final_norm));
    put_layer_gguf(s, c, L, w.mtp->layer, layout);
  }
  return s;
}

MemorySource to_hf_source(const ModelConfig& c, const ModelWeights& w, HfLayout layout) {
  MemorySource s(MetaStyle::Hf, std::string("<memory hf ") + std::string(family_arch(c.family)) + ">");
  write_hf_keys(c, s);
  const bool zc = c.zero_centred_norms();
  const std::string G = names::hf_model_prefix(layout.language_model_prefix);
  put(s, G + "embed_tokens.weight", w.embed);
  put(s, G + "norm.weight", zc ? minus_one(w.output_norm) : w.output_norm);
  if (!c.tied_embeddings) put(s, "lm_head.weight", w.output);
  for (int64_t i = 0; i < c.n_layer; ++i)
    put_layer_hf(s, c, names::hf_layer_prefix(layout.language_model_prefix, i), w.layers[static_cast<size_t>(i)], layout);
  if (c.n_mtp > 0 && w.mtp) {
    put(s, "mtp.fc.weight", w.mtp->eh_proj);
    put(s, "mtp.pre_fc_norm_embedding.weight", minus_one(w.mtp->enorm));
    put(s, "mtp.pre_fc_norm_hidden.weight", minus_one(w.mtp->hnorm));
    put(s, "mtp.norm.weight", minus_one(w.mtp->final_norm));
    put_layer_hf(s, c, names::hf_mtp_layer_prefix(0), w.mtp->layer, layout);
  }
  return s;
}

}  // namespace memra
