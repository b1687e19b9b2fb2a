// The checkpoint-name mapping, once: which file tensor, with which expected shape (ggml order),
// feeds which canonical slot, for every family, layer kind, FFN kind, expert layout and naming
// style. Both loaders walk it: load_weights (f32 ModelWeights, weights_load.cpp) and
// load_raw_weights (file-typed RawWeights, raw_weights.cpp). Each loader supplies a Reader that
// decides what a slot becomes (dequantised f32 or the file's blocks); the walk decides which
// tensor and which rows. Conventions that are the same for both readers live here too (HF 1+w
// norms, ssm_a = −exp(A_log)); the one that only the f32 loader applies (GDN value-head
// reorder) stays in weights_load.cpp.
//
// Reader concept (see F32Reader / RawReader):
//   types   Mat, Tensor, Conv, Experts; output structs Layer, Attn, Gdn, Ffn, Moe
//   bool has(name)                    tensor present
//   const TensorView* find(name)      tensor or null (shape peeks only)
//   Tensor tensor(name, ne)           checked shape; input to rows()
//   Mat rows(const Tensor&, rows)     the listed whole rows (over all slabs of a 3-D tensor)
//   Mat mat(name, rows, cols)         checked [rows, cols] (ne {cols, rows})
//   std::vector<float> vec(name, ne)  checked, as f32
//   Conv conv(taps, rows, K)          [rows, K] conv taps
//   Experts experts(gate, up, down)   one Mat per expert each
// Every check fails naming the tensor with the expected and the actual shape.
#pragma once

#include <cstdint>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "memra/config.h"
#include "memra/source.h"
#include "model/names.h"
#include "model/weights_internal.h"

namespace memra::detail {

enum class NameStyle { Gguf, Hf };

// Whole-row layout changes as row lists (the only kind valid for any block type).
struct RowSplit {
  std::vector<int64_t> first, second;
};
// Gated q_proj / attn_q: per head [q(hd) | gate(hd)] -> (wq rows, wgate rows).
RowSplit q_gate_rows(const ModelConfig& c);
// Qwen3-Next in_proj_qkvz / GGUF ssm_in: per key head [q(dk) | k(dk) | v(r*dv) | z(r*dv)]
// -> (wqkv rows [all q | all k | all v], wz rows).
RowSplit qkvz_rows(const ModelConfig& c);
// Qwen3-Next in_proj_ba / GGUF ssm_ba: per key head [b(r) | a(r)] -> (wb rows, wa rows).
RowSplit ba_rows(const ModelConfig& c);
// Rows [first, first + n).
std::vector<int64_t> row_range(int64_t first, int64_t n);

// The tensor `name` of `src`, with shape `want` (ggml order, trailing 1s ignored). Fails with
// "<path>: tensor '<name>' missing (expected shape {…})" or
// "<path>: tensor '<name>': shape {…}, expected {…}". Both readers check through this.
const TensorView& checked_tensor(const WeightSource& src, const std::string& name,
                                 const std::vector<int64_t>& want);
// "{a, b, c}".
std::string shape_str(const std::vector<int64_t>& ne);

// One decoder layer: names are "<prefix><gguf or hf name>", prefix "blk.N." (GGUF) or
// "model.layers.N." / "model.language_model.layers.N." / "mtp.layers.0." (HF).
struct LayerSpec {
  NameStyle style;
  std::string prefix;
  LayerKind kind;
  FfnKind ffn;
};

template <class R>
typename R::Layer map_layer(const R& rd, const ModelConfig& c, const LayerSpec& s) {
  const bool gguf = s.style == NameStyle::Gguf;
  const int64_t D = c.n_embd;
  // The two name sets side by side: N(gguf, hf).
  auto N = [&](const char* g, const char* h) { return s.prefix + (gguf ? g : h); };
  // HF Next/3.5 store zero-centred norms (multiplier 1 + w); GGUF already holds 1 + w.
  const bool plus_one = !gguf && c.zero_centred_norms();
  auto norm = [&](const std::string& name, int64_t n) {
    std::vector<float> w = rd.vec(name, {n});
    if (plus_one) for (float& x : w) x = 1.0f + x;
    return w;
  };
  auto split = [&](const std::string& name, std::vector<int64_t> ne, const RowSplit& rs) {
    auto t = rd.tensor(name, std::move(ne));
    return std::make_pair(rd.rows(t, rs.first), rd.rows(t, rs.second));
  };

  typename R::Layer L;
  L.attn_norm = norm(N("attn_norm.weight", "input_layernorm.weight"), D);
  L.ffn_norm = norm(N(c.family == Family::Qwen3 ? "ffn_norm.weight" : "post_attention_norm.weight",
                      "post_attention_layernorm.weight"), D);
  if (s.kind == LayerKind::Attention) {
    typename R::Attn a;
    const int64_t H = c.n_head, KV = c.n_head_kv, hd = c.head_dim;
    const std::string q = N("attn_q.weight", "self_attn.q_proj.weight");
    if (c.attn_gated()) std::tie(a.wq, a.wgate) = split(q, {D, 2 * H * hd}, q_gate_rows(c));
    else a.wq = rd.mat(q, H * hd, D);
    a.wk = rd.mat(N("attn_k.weight", "self_attn.k_proj.weight"), KV * hd, D);
    a.wv = rd.mat(N("attn_v.weight", "self_attn.v_proj.weight"), KV * hd, D);
    a.wo = rd.mat(N("attn_output.weight", "self_attn.o_proj.weight"), D, H * hd);
    a.q_norm = norm(N("attn_q_norm.weight", "self_attn.q_norm.weight"), hd);
    a.k_norm = norm(N("attn_k_norm.weight", "self_attn.k_norm.weight"), hd);
    L.attn = std::move(a);
  } else {
    typename R::Gdn g;
    const int64_t nv = c.ssm_n_v_heads, conv_dim = c.ssm_conv_dim(), vd = c.ssm_value_dim();
    const bool next = c.family == Family::Qwen3Next;
    // q/k/v/z: interleaved per key head for HF Next and GGUF's legacy ssm_in; split otherwise.
    const bool qkvz_interleaved =
        gguf ? !rd.has(N("attn_qkv.weight", "")) && rd.has(N("ssm_in.weight", "")) : next;
    if (qkvz_interleaved)
      std::tie(g.wqkv, g.wz) = split(N("ssm_in.weight", "linear_attn.in_proj_qkvz.weight"),
                                     {D, conv_dim + vd}, qkvz_rows(c));
    else {
      g.wqkv = rd.mat(N("attn_qkv.weight", "linear_attn.in_proj_qkv.weight"), conv_dim, D);
      g.wz = rd.mat(N("attn_gate.weight", "linear_attn.in_proj_z.weight"), vd, D);
    }
    if (next) {  // b/a interleaved per key head in both name sets
      std::tie(g.wb, g.wa) = split(N("ssm_ba.weight", "linear_attn.in_proj_ba.weight"), {D, 2 * nv}, ba_rows(c));
    } else {
      g.wb = rd.mat(N("ssm_beta.weight", "linear_attn.in_proj_b.weight"), nv, D);
      g.wa = rd.mat(N("ssm_alpha.weight", "linear_attn.in_proj_a.weight"), nv, D);
    }
    // GGUF squeezes conv1d to {K, conv_dim}; HF has [conv_dim, 1, K] = ne {K, 1, conv_dim}.
    // Both are conv_dim rows of K taps once the unit dim is ignored.
    const std::string conv = N("ssm_conv1d.weight", "linear_attn.conv1d.weight");
    const TensorView* ct = rd.find(conv);
    const bool unit_dim = ct && ct->ne.size() == 3 && ct->ne[1] == 1;
    g.conv = rd.conv(rd.vec(conv, unit_dim ? std::vector<int64_t>{c.ssm_conv_kernel, 1, conv_dim}
                                           : std::vector<int64_t>{c.ssm_conv_kernel, conv_dim}),
                     conv_dim, c.ssm_conv_kernel);
    g.ssm_a = rd.vec(N("ssm_a", "linear_attn.A_log"), {nv});
    if (!gguf) for (float& x : g.ssm_a) x = ssm_a_from_a_log(x);  // GGUF stores −exp(A_log)
    g.dt_bias = rd.vec(N("ssm_dt.bias", "linear_attn.dt_bias"), {nv});
    // The gated norm is plain w in both sets: the one norm HF keeps un-centred.
    g.norm = rd.vec(N("ssm_norm.weight", "linear_attn.norm.weight"), {c.ssm_d_v});
    g.wout = rd.mat(N("ssm_out.weight", "linear_attn.out_proj.weight"), D, vd);
    L.gdn = std::move(g);
  }
  if (s.ffn == FfnKind::Moe) {
    typename R::Moe m;
    const int64_t E = c.n_expert, I = c.n_ff_exp, S = c.n_ff_shexp;
    m.router = rd.mat(N("ffn_gate_inp.weight", "mlp.gate.weight"), E, D);
    std::vector<typename R::Mat> gate, up, down;
    // Fused gate_up: GGUF ffn_gate_up_exps {D, 2I, E}, HF experts.gate_up_proj [E, 2I, D];
    // slab e holds rows [gate_e ; up_e]. Down is stacked {I, D, E} alongside.
    const std::string gu = N("ffn_gate_up_exps.weight", "mlp.experts.gate_up_proj");
    const bool fused = gguf ? rd.has(gu) && !rd.has(N("ffn_gate_exps.weight", "")) : rd.has(gu);
    if (fused || gguf) {
      auto dn_name = N("ffn_down_exps.weight", "mlp.experts.down_proj");
      if (fused) {
        auto t = rd.tensor(gu, {D, 2 * I, E});
        auto dn = rd.tensor(dn_name, {I, D, E});
        for (int64_t e = 0; e < E; ++e) {
          gate.push_back(rd.rows(t, row_range(e * 2 * I, I)));
          up.push_back(rd.rows(t, row_range(e * 2 * I + I, I)));
          down.push_back(rd.rows(dn, row_range(e * D, D)));
        }
      } else {  // GGUF stacked ffn_{gate,up,down}_exps
        auto tg = rd.tensor(N("ffn_gate_exps.weight", ""), {D, I, E});
        auto tu = rd.tensor(N("ffn_up_exps.weight", ""), {D, I, E});
        auto dn = rd.tensor(dn_name, {I, D, E});
        for (int64_t e = 0; e < E; ++e) {
          gate.push_back(rd.rows(tg, row_range(e * I, I)));
          up.push_back(rd.rows(tu, row_range(e * I, I)));
          down.push_back(rd.rows(dn, row_range(e * D, D)));
        }
      }
    } else {  // HF per expert: mlp.experts.<e>.{gate,up,down}_proj.weight
      for (int64_t e = 0; e < E; ++e) {
        const std::string X = s.prefix + "mlp.experts." + std::to_string(e) + ".";
        gate.push_back(rd.mat(X + "gate_proj.weight", I, D));
        up.push_back(rd.mat(X + "up_proj.weight", I, D));
        down.push_back(rd.mat(X + "down_proj.weight", D, I));
      }
    }
    m.experts = rd.experts(std::move(gate), std::move(up), std::move(down));
    if (S > 0) {
      m.shared.gate = rd.mat(N("ffn_gate_shexp.weight", "mlp.shared_expert.gate_proj.weight"), S, D);
      m.shared.up = rd.mat(N("ffn_up_shexp.weight", "mlp.shared_expert.up_proj.weight"), S, D);
      m.shared.down = rd.mat(N("ffn_down_shexp.weight", "mlp.shared_expert.down_proj.weight"), D, S);
      // GGUF {D}; HF Linear(D, 1) = [1, D], ne {D, 1}.
      m.shared_gate = rd.vec(N("ffn_gate_inp_shexp.weight", "mlp.shared_expert_gate.weight"),
                             gguf ? std::vector<int64_t>{D} : std::vector<int64_t>{D, 1});
    }
    L.moe = std::move(m);
  } else {
    typename R::Ffn f;
    f.gate = rd.mat(N("ffn_gate.weight", "mlp.gate_proj.weight"), c.n_ff, D);
    f.up = rd.mat(N("ffn_up.weight", "mlp.up_proj.weight"), c.n_ff, D);
    f.down = rd.mat(N("ffn_down.weight", "mlp.down_proj.weight"), D, c.n_ff);
    L.ffn = std::move(f);
  }
  return L;
}

// Model-level slots (embedding, final norm, untied output) and the n_layer main layers.
// `lm` selects HF's model.language_model.* prefix. W is ModelWeights or RawWeights.
template <class R, class W>
void map_model(const R& rd, const ModelConfig& c, NameStyle style, bool lm, W& w) {
  const bool gguf = style == NameStyle::Gguf;
  const int64_t D = c.n_embd, V = c.n_vocab;
  const std::string G = names::hf_model_prefix(lm);
  w.embed = rd.mat(gguf ? "token_embd.weight" : G + "embed_tokens.weight", V, D);
  w.output_norm = rd.vec(gguf ? "output_norm.weight" : G + "norm.weight", {D});
  if (!gguf && c.zero_centred_norms()) for (float& x : w.output_norm) x = 1.0f + x;
  if (!c.tied_embeddings) w.output = rd.mat(gguf ? "output.weight" : "lm_head.weight", V, D);
  w.layers.reserve(static_cast<size_t>(c.n_layer));
  for (int64_t i = 0; i < c.n_layer; ++i) {
    const size_t k = static_cast<size_t>(i);
    w.layers.push_back(map_layer(rd, c, {style, gguf ? names::gguf_blk(i, "") : names::hf_layer_prefix(lm, i),
                                         c.layer_kind[k], c.ffn_kind[k]}));
  }
}

// The MTP head (f32 loader only: the GPU model does not run it). GGUF: the extra block
// blk.<n_layer>.nextn.* plus that block's layer tensors; HF: mtp.* plus mtp.layers.0.*.
// Its FFN kind follows the file: MoE iff the router is present.
template <class R, class M>
void map_mtp(const R& rd, const ModelConfig& c, NameStyle style, M& m) {
  const int64_t D = c.n_embd;
  if (style == NameStyle::Gguf) {
    const int64_t L = c.n_layer;
    m.eh_proj = rd.mat(names::gguf_blk(L, "nextn.eh_proj.weight"), D, 2 * D);
    m.enorm = rd.vec(names::gguf_blk(L, "nextn.enorm.weight"), {D});
    m.hnorm = rd.vec(names::gguf_blk(L, "nextn.hnorm.weight"), {D});
    m.final_norm = rd.vec(names::gguf_blk(L, "nextn.shared_head_norm.weight"), {D});
    const bool moe = rd.has(names::gguf_blk(L, "ffn_gate_inp.weight"));
    m.layer = map_layer(rd, c, {style, names::gguf_blk(L, ""), LayerKind::Attention,
                                moe ? FfnKind::Moe : FfnKind::Dense});
  } else {
    // MTP exists only for Next/3.5, whose HF norms are all zero-centred.
    auto norm = [&](const char* name) {
      std::vector<float> w = rd.vec(name, {D});
      for (float& x : w) x = 1.0f + x;
      return w;
    };
    m.eh_proj = rd.mat("mtp.fc.weight", D, 2 * D);
    m.enorm = norm("mtp.pre_fc_norm_embedding.weight");
    m.hnorm = norm("mtp.pre_fc_norm_hidden.weight");
    m.final_norm = norm("mtp.norm.weight");
    const std::string P = names::hf_mtp_layer_prefix(0);
    const bool moe = rd.has(P + "mlp.gate.weight") && c.n_expert > 0;
    m.layer = map_layer(rd, c, {style, P, LayerKind::Attention, moe ? FfnKind::Moe : FfnKind::Dense});
  }
}

}  // namespace memra::detail
