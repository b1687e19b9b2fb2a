// load_weights: llama.cpp GGUF names and HF names -> canonical ModelWeights (memra/weights.h).
// Every convention is undone here and nowhere else; see weights.h for the canonical form.
#include <cmath>
#include <cstring>
#include <sstream>

#include "memra/error.h"
#include "memra/quant.h"
#include "memra/weights.h"
#include "model/names.h"
#include "model/weights_internal.h"

namespace memra {

namespace {

std::vector<int64_t> squeeze(std::vector<int64_t> ne) {
  while (ne.size() > 1 && ne.back() == 1) ne.pop_back();
  return ne;
}

std::string shape_str(const std::vector<int64_t>& ne) {
  std::ostringstream os;
  os << "{";
  for (size_t i = 0; i < ne.size(); ++i) os << (i ? ", " : "") << ne[i];
  os << "}";
  return os.str();
}

// Reads tensors by name, validates their shapes (ggml order, trailing 1s ignored) and converts
// them to f32, applying an NVFP4-style per-tensor "<base>.scale" when the source has one.
class Reader {
 public:
  explicit Reader(const WeightSource& s) : src_(s) {}
  const WeightSource& src() const { return src_; }
  bool has(const std::string& name) const { return src_.find(name) != nullptr; }

  std::vector<float> read(const std::string& name, std::vector<int64_t> want) const {
    const TensorView* t = src_.find(name);
    if (!t) fail(src_.path(), ": tensor '", name, "' missing (expected shape ", shape_str(want), ")");
    if (squeeze(t->ne) != squeeze(want))
      fail(src_.path(), ": tensor '", name, "': shape ", shape_str(t->ne), ", expected ",
           shape_str(want));
    return with_context(src_.path() + ": tensor '" + name + "'", [&] { return to_f32(*t); });
  }
  std::vector<float> vec(const std::string& name, int64_t n) const { return read(name, {n}); }
  Matrix mat(const std::string& name, int64_t rows, int64_t cols) const {
    Matrix m;
    m.rows = rows;
    m.cols = cols;
    m.data = read(name, {cols, rows});
    return m;
  }

 private:
  std::vector<float> to_f32(const TensorView& t) const {
    const int64_t n = t.nelements();
    const int64_t rl = t.ne[0];
    const int64_t rb = row_bytes(t.type, rl);
    if (rb * (n / rl) != t.nbytes()) fail(t.nbytes(), " bytes for ", n, " ", dtype_name(t.type), " values");
    std::vector<float> out(static_cast<size_t>(n));
    for (int64_t r = 0; r < n / rl; ++r)
      dequantize_row(t.type, t.data.data() + r * rb, out.data() + r * rl, rl);
    // llama.cpp: y = (W x) * <name>.scale, one value per tensor or one per expert slab.
    const std::string base = t.name.size() > 7 && t.name.ends_with(".weight")
                                 ? t.name.substr(0, t.name.size() - 7) : t.name;
    if (const TensorView* s = src_.find(base + ".scale")) {
      std::vector<float> sv(static_cast<size_t>(s->nelements()));
      for (int64_t i = 0; i < s->nelements(); i += s->ne[0])
        dequantize_row(s->type, s->data.data() + row_bytes(s->type, s->ne[0]) * (i / s->ne[0]),
                       sv.data() + i, s->ne[0]);
      const int64_t slabs = t.ne.size() == 3 ? t.ne[2] : 1;
      if (static_cast<int64_t>(sv.size()) != 1 && static_cast<int64_t>(sv.size()) != slabs)
        fail("scale tensor '", s->name, "' has ", sv.size(), " values, expected 1 or ", slabs);
      const int64_t per = n / static_cast<int64_t>(sv.size());
      for (int64_t i = 0; i < n; ++i) out[static_cast<size_t>(i)] *= sv[static_cast<size_t>(i / per)];
    }
    return out;
  }
  const WeightSource& src_;
};

// HF zero-centred norm (multiplier 1 + w), folded as llama.cpp's converter does.
std::vector<float> plus_one(std::vector<float> w) {
  for (float& x : w) x = 1.0f + x;
  return w;
}

Matrix rows_of(const std::vector<float>& src, int64_t first_row, int64_t rows, int64_t cols) {
  Matrix m(rows, cols);
  std::memcpy(m.data.data(), src.data() + first_row * cols, sizeof(float) * rows * cols);
  return m;
}

void copy_rows(const float* src, Matrix& dst, int64_t dst_row, int64_t n_rows) {
  std::memcpy(dst.row(dst_row), src, sizeof(float) * n_rows * dst.cols);
}

// Splits gated q_proj rows, per head [q(hd) | gate(hd)], into wq and wgate.
void split_q_gate(const std::vector<float>& qg, int64_t H, int64_t hd, int64_t D, AttnWeights& a) {
  a.wq = Matrix(H * hd, D);
  a.wgate = Matrix(H * hd, D);
  for (int64_t h = 0; h < H; ++h) {
    copy_rows(qg.data() + (h * 2 * hd) * D, a.wq, h * hd, hd);
    copy_rows(qg.data() + (h * 2 * hd + hd) * D, a.wgate, h * hd, hd);
  }
}

// Qwen3-Next in_proj_qkvz (and GGUF legacy ssm_in): rows grouped per key head g,
// [q_g(dk) | k_g(dk) | v_g(r*dv) | z_g(r*dv)] -> wqkv [all q | all k | all v] and wz.
void deinterleave_qkvz(const std::vector<float>& w, const ModelConfig& c, GdnWeights& g) {
  const int64_t D = c.n_embd, nk = c.ssm_n_k_heads, dk = c.ssm_d_k, dv = c.ssm_d_v;
  const int64_t r = c.ssm_n_v_heads / nk, kd = c.ssm_key_dim(), grp = 2 * dk + 2 * r * dv;
  g.wqkv = Matrix(c.ssm_conv_dim(), D);
  g.wz = Matrix(c.ssm_value_dim(), D);
  for (int64_t k = 0; k < nk; ++k) {
    const float* base = w.data() + k * grp * D;
    copy_rows(base, g.wqkv, k * dk, dk);
    copy_rows(base + dk * D, g.wqkv, kd + k * dk, dk);
    copy_rows(base + 2 * dk * D, g.wqkv, 2 * kd + k * r * dv, r * dv);
    copy_rows(base + (2 * dk + r * dv) * D, g.wz, k * r * dv, r * dv);
  }
}

// Qwen3-Next in_proj_ba / GGUF ssm_ba: rows grouped per key head, [b_g(r) | a_g(r)].
void deinterleave_ba(const std::vector<float>& w, const ModelConfig& c, GdnWeights& g) {
  const int64_t D = c.n_embd, nk = c.ssm_n_k_heads, nv = c.ssm_n_v_heads, r = nv / nk;
  g.wb = Matrix(nv, D);
  g.wa = Matrix(nv, D);
  for (int64_t k = 0; k < nk; ++k) {
    copy_rows(w.data() + (k * 2 * r) * D, g.wb, k * r, r);
    copy_rows(w.data() + (k * 2 * r + r) * D, g.wa, k * r, r);
  }
}

std::vector<float> conv_taps(const Reader& rd, const std::string& name, const ModelConfig& c) {
  // GGUF squeezes conv1d to {K, conv_dim}; HF has [conv_dim, 1, K] = ne {K, 1, conv_dim}.
  // Both are conv_dim rows of K taps once the unit dim is ignored.
  const TensorView* t = rd.src().find(name);
  if (t && t->ne.size() == 3 && t->ne[1] == 1)
    return rd.read(name, {c.ssm_conv_kernel, 1, c.ssm_conv_dim()});
  return rd.read(name, {c.ssm_conv_kernel, c.ssm_conv_dim()});
}

LayerWeights load_layer_gguf(const Reader& rd, const ModelConfig& c, int64_t i, LayerKind kind,
                             bool is_mtp) {
  const int64_t D = c.n_embd;
  auto N = [&](const char* t) { return names::gguf_blk(i, t); };
  LayerWeights L;
  L.attn_norm = rd.vec(N("attn_norm.weight"), D);
  L.ffn_norm = rd.vec(N(c.family == Family::Qwen3 ? "ffn_norm.weight" : "post_attention_norm.weight"), D);
  if (kind == LayerKind::Attention) {
    AttnWeights a;
    const int64_t H = c.n_head, KV = c.n_head_kv, hd = c.head_dim;
    if (c.attn_gated()) split_q_gate(rd.read(N("attn_q.weight"), {D, 2 * H * hd}), H, hd, D, a);
    else a.wq = rd.mat(N("attn_q.weight"), H * hd, D);
    a.wk = rd.mat(N("attn_k.weight"), KV * hd, D);
    a.wv = rd.mat(N("attn_v.weight"), KV * hd, D);
    a.wo = rd.mat(N("attn_output.weight"), D, H * hd);
    a.q_norm = rd.vec(N("attn_q_norm.weight"), hd);
    a.k_norm = rd.vec(N("attn_k_norm.weight"), hd);
    L.attn = std::move(a);
  } else {
    GdnWeights g;
    const int64_t nv = c.ssm_n_v_heads;
    if (!rd.has(N("attn_qkv.weight")) && rd.has(N("ssm_in.weight"))) {
      deinterleave_qkvz(rd.read(N("ssm_in.weight"), {D, c.ssm_conv_dim() + c.ssm_value_dim()}), c, g);
    } else {
      g.wqkv = rd.mat(N("attn_qkv.weight"), c.ssm_conv_dim(), D);
      g.wz = rd.mat(N("attn_gate.weight"), c.ssm_value_dim(), D);
    }
    if (c.family == Family::Qwen3Next) {
      deinterleave_ba(rd.read(N("ssm_ba.weight"), {D, 2 * nv}), c, g);
    } else {
      g.wb = rd.mat(N("ssm_beta.weight"), nv, D);
      g.wa = rd.mat(N("ssm_alpha.weight"), nv, D);
    }
    g.conv.rows = c.ssm_conv_dim();
    g.conv.cols = c.ssm_conv_kernel;
    g.conv.data = conv_taps(rd, N("ssm_conv1d.weight"), c);
    g.ssm_a = rd.vec(N("ssm_a"), nv);
    g.dt_bias = rd.vec(N("ssm_dt.bias"), nv);
    g.norm = rd.vec(N("ssm_norm.weight"), c.ssm_d_v);
    g.wout = rd.mat(N("ssm_out.weight"), D, c.ssm_value_dim());
    if (c.gguf_tiled_v_heads()) detail::permute_v_heads(g, c, /*to_tiled=*/false);
    L.gdn = std::move(g);
  }
  // Dense layers among MoE layers: a layer without a router is a dense SwiGLU layer.
  const bool moe = is_mtp ? rd.has(N("ffn_gate_inp.weight")) : c.ffn_kind[i] == FfnKind::Moe;
  if (moe) {
    MoeWeights m;
    const int64_t E = c.n_expert, I = c.n_ff_exp;
    m.router = rd.mat(N("ffn_gate_inp.weight"), E, D);
    std::vector<float> gate, up;
    const bool fused = rd.has(N("ffn_gate_up_exps.weight")) && !rd.has(N("ffn_gate_exps.weight"));
    std::vector<float> gu;
    if (fused) gu = rd.read(N("ffn_gate_up_exps.weight"), {D, 2 * I, E});
    else {
      gate = rd.read(N("ffn_gate_exps.weight"), {D, I, E});
      up = rd.read(N("ffn_up_exps.weight"), {D, I, E});
    }
    std::vector<float> down = rd.read(N("ffn_down_exps.weight"), {I, D, E});
    m.experts.resize(static_cast<size_t>(E));
    for (int64_t e = 0; e < E; ++e) {
      FfnWeights& f = m.experts[static_cast<size_t>(e)];
      if (fused) {
        f.gate = rows_of(gu, e * 2 * I, I, D);
        f.up = rows_of(gu, e * 2 * I + I, I, D);
      } else {
        f.gate = rows_of(gate, e * I, I, D);
        f.up = rows_of(up, e * I, I, D);
      }
      f.down = rows_of(down, e * D, D, I);
    }
    if (c.n_ff_shexp > 0) {
      m.shared.gate = rd.mat(N("ffn_gate_shexp.weight"), c.n_ff_shexp, D);
      m.shared.up = rd.mat(N("ffn_up_shexp.weight"), c.n_ff_shexp, D);
      m.shared.down = rd.mat(N("ffn_down_shexp.weight"), D, c.n_ff_shexp);
      m.shared_gate = rd.vec(N("ffn_gate_inp_shexp.weight"), D);
    }
    L.moe = std::move(m);
  } else {
    FfnWeights f;
    f.gate = rd.mat(N("ffn_gate.weight"), c.n_ff, D);
    f.up = rd.mat(N("ffn_up.weight"), c.n_ff, D);
    f.down = rd.mat(N("ffn_down.weight"), D, c.n_ff);
    L.ffn = std::move(f);
  }
  return L;
}

LayerWeights load_layer_hf(const Reader& rd, const ModelConfig& c, const std::string& P,
                           LayerKind kind, FfnKind ffn) {
  const int64_t D = c.n_embd;
  const bool zc = c.zero_centred_norms();
  auto norm = [&](const std::string& name, int64_t n) {
    auto w = rd.vec(name, n);
    return zc ? plus_one(std::move(w)) : w;
  };
  LayerWeights L;
  L.attn_norm = norm(P + "input_layernorm.weight", D);
  L.ffn_norm = norm(P + "post_attention_layernorm.weight", D);
  if (kind == LayerKind::Attention) {
    AttnWeights a;
    const int64_t H = c.n_head, KV = c.n_head_kv, hd = c.head_dim;
    const std::string A = P + "self_attn.";
    if (c.attn_gated()) split_q_gate(rd.read(A + "q_proj.weight", {D, 2 * H * hd}), H, hd, D, a);
    else a.wq = rd.mat(A + "q_proj.weight", H * hd, D);
    a.wk = rd.mat(A + "k_proj.weight", KV * hd, D);
    a.wv = rd.mat(A + "v_proj.weight", KV * hd, D);
    a.wo = rd.mat(A + "o_proj.weight", D, H * hd);
    a.q_norm = norm(A + "q_norm.weight", hd);
    a.k_norm = norm(A + "k_norm.weight", hd);
    L.attn = std::move(a);
  } else {
    GdnWeights g;
    const int64_t nv = c.ssm_n_v_heads;
    const std::string G = P + "linear_attn.";
    if (c.family == Family::Qwen3Next) {
      deinterleave_qkvz(rd.read(G + "in_proj_qkvz.weight", {D, c.ssm_conv_dim() + c.ssm_value_dim()}), c, g);
      deinterleave_ba(rd.read(G + "in_proj_ba.weight", {D, 2 * nv}), c, g);
    } else {
      g.wqkv = rd.mat(G + "in_proj_qkv.weight", c.ssm_conv_dim(), D);
      g.wz = rd.mat(G + "in_proj_z.weight", c.ssm_value_dim(), D);
      g.wb = rd.mat(G + "in_proj_b.weight", nv, D);
      g.wa = rd.mat(G + "in_proj_a.weight", nv, D);
    }
    g.conv.rows = c.ssm_conv_dim();
    g.conv.cols = c.ssm_conv_kernel;
    g.conv.data = conv_taps(rd, G + "conv1d.weight", c);
    g.ssm_a = rd.vec(G + "A_log", nv);
    for (float& x : g.ssm_a) x = detail::ssm_a_from_a_log(x);
    g.dt_bias = rd.vec(G + "dt_bias", nv);
    g.norm = rd.vec(G + "norm.weight", c.ssm_d_v);  // plain w: the one norm HF keeps un-centred
    g.wout = rd.mat(G + "out_proj.weight", D, c.ssm_value_dim());
    L.gdn = std::move(g);
  }
  const std::string M = P + "mlp.";
  if (ffn == FfnKind::Moe) {
    MoeWeights m;
    const int64_t E = c.n_expert, I = c.n_ff_exp;
    m.router = rd.mat(M + "gate.weight", E, D);
    m.experts.resize(static_cast<size_t>(E));
    if (rd.has(M + "experts.gate_up_proj")) {
      // fused in-memory layout: gate_up_proj [E, 2I, D] rows [gate; up], down_proj [E, D, I]
      auto gu = rd.read(M + "experts.gate_up_proj", {D, 2 * I, E});
      auto dn = rd.read(M + "experts.down_proj", {I, D, E});
      for (int64_t e = 0; e < E; ++e) {
        FfnWeights& f = m.experts[static_cast<size_t>(e)];
        f.gate = rows_of(gu, e * 2 * I, I, D);
        f.up = rows_of(gu, e * 2 * I + I, I, D);
        f.down = rows_of(dn, e * D, D, I);
      }
    } else {
      for (int64_t e = 0; e < E; ++e) {
        const std::string X = M + "experts." + std::to_string(e) + ".";
        FfnWeights& f = m.experts[static_cast<size_t>(e)];
        f.gate = rd.mat(X + "gate_proj.weight", I, D);
        f.up = rd.mat(X + "up_proj.weight", I, D);
        f.down = rd.mat(X + "down_proj.weight", D, I);
      }
    }
    if (c.n_ff_shexp > 0) {
      m.shared.gate = rd.mat(M + "shared_expert.gate_proj.weight", c.n_ff_shexp, D);
      m.shared.up = rd.mat(M + "shared_expert.up_proj.weight", c.n_ff_shexp, D);
      m.shared.down = rd.mat(M + "shared_expert.down_proj.weight", D, c.n_ff_shexp);
      m.shared_gate = rd.read(M + "shared_expert_gate.weight", {D, 1});
    }
    L.moe = std::move(m);
  } else {
    FfnWeights f;
    f.gate = rd.mat(M + "gate_proj.weight", c.n_ff, D);
    f.up = rd.mat(M + "up_proj.weight", c.n_ff, D);
    f.down = rd.mat(M + "down_proj.weight", D, c.n_ff);
    L.ffn = std::move(f);
  }
  return L;
}

}  // namespace

namespace detail {

float ssm_a_from_a_log(float a_log) { return static_cast<float>(-std::exp(static_cast<double>(a_log))); }

void permute_v_heads(GdnWeights& g, const ModelConfig& c, bool to_tiled) {
  // Grouped (HF) value head index hg = k*r + j (key head k, j-th of its r value heads);
  // tiled (llama.cpp qwen35*) index ht = j*nk + k. Loading maps tiled -> grouped.
  const int64_t nk = c.ssm_n_k_heads, nv = c.ssm_n_v_heads, r = nv / nk, dv = c.ssm_d_v;
  const int64_t kd2 = 2 * c.ssm_key_dim(), D = c.n_embd;
  auto src_of = [&](int64_t dst) {  // for destination head index, the source head index
    const int64_t k = to_tiled ? dst % nk : dst / r, j = to_tiled ? dst / nk : dst % r;
    return to_tiled ? k * r + j : j * nk + k;
  };
  auto perm_rows = [&](Matrix& m, int64_t first, int64_t per_head) {
    Matrix old = m;
    for (int64_t h = 0; h < nv; ++h)
      std::memcpy(m.row(first + h * per_head), old.row(first + src_of(h) * per_head),
                  sizeof(float) * per_head * m.cols);
  };
  auto perm_vec = [&](std::vector<float>& v) {
    std::vector<float> old = v;
    for (int64_t h = 0; h < nv; ++h) v[static_cast<size_t>(h)] = old[static_cast<size_t>(src_of(h))];
  };
  perm_rows(g.wqkv, kd2, dv);
  perm_rows(g.wz, 0, dv);
  perm_rows(g.wb, 0, 1);
  perm_rows(g.wa, 0, 1);
  perm_rows(g.conv, kd2, dv);
  perm_vec(g.ssm_a);
  perm_vec(g.dt_bias);
  Matrix old = g.wout;  // columns
  for (int64_t d = 0; d < D; ++d)
    for (int64_t h = 0; h < nv; ++h)
      std::memcpy(g.wout.row(d) + h * dv, old.row(d) + src_of(h) * dv, sizeof(float) * dv);
}

bool hf_language_model_prefix(const WeightSource& src) {
  return src.find("model.language_model.embed_tokens.weight") != nullptr;
}

bool source_uses_gguf_names(const WeightSource& src) {
  if (src.kind() == SourceKind::Gguf) return true;
  if (src.kind() == SourceKind::Memory) {
    if (auto* m = dynamic_cast<const MemorySource*>(&src)) return m->style() == MetaStyle::Gguf;
  }
  return false;
}

}  // namespace detail

ModelWeights load_weights(const WeightSource& src, const ModelConfig& c) {
  c.validate();
  const Reader rd(src);
  const int64_t D = c.n_embd, V = c.n_vocab;
  ModelWeights w;
  w.layers.reserve(static_cast<size_t>(c.n_layer));
  if (detail::source_uses_gguf_names(src)) {
    w.embed = rd.mat("token_embd.weight", V, D);
    w.output_norm = rd.vec("output_norm.weight", D);
    if (!c.tied_embeddings) w.output = rd.mat("output.weight", V, D);
    for (int64_t i = 0; i < c.n_layer; ++i)
      w.layers.push_back(load_layer_gguf(rd, c, i, c.layer_kind[static_cast<size_t>(i)], false));
    if (c.n_mtp > 0) {
      const int64_t L = c.n_layer;
      MtpWeights m;
      m.eh_proj = rd.mat(names::gguf_blk(L, "nextn.eh_proj.weight"), D, 2 * D);
      m.enorm = rd.vec(names::gguf_blk(L, "nextn.enorm.weight"), D);
      m.hnorm = rd.vec(names::gguf_blk(L, "nextn.hnorm.weight"), D);
      m.final_norm = rd.vec(names::gguf_blk(L, "nextn.shared_head_norm.weight"), D);
      m.layer = load_layer_gguf(rd, c, L, LayerKind::Attention, true);
      w.mtp = std::move(m);
    }
  } else {
    const bool lm = detail::hf_language_model_prefix(src);
    const std::string G = names::hf_model_prefix(lm);
    const bool zc = c.zero_centred_norms();
    w.embed = rd.mat(G + "embed_tokens.weight", V, D);
    w.output_norm = rd.vec(G + "norm.weight", D);
    if (zc) w.output_norm = plus_one(std::move(w.output_norm));
    if (!c.tied_embeddings) w.output = rd.mat("lm_head.weight", V, D);
    for (int64_t i = 0; i < c.n_layer; ++i)
      w.layers.push_back(load_layer_hf(rd, c, names::hf_layer_prefix(lm, i),
                                       c.layer_kind[static_cast<size_t>(i)], c.ffn_kind[static_cast<size_t>(i)]));
    if (c.n_mtp > 0) {
      MtpWeights m;
      m.eh_proj = rd.mat("mtp.fc.weight", D, 2 * D);
      m.enorm = plus_one(rd.vec("mtp.pre_fc_norm_embedding.weight", D));
      m.hnorm = plus_one(rd.vec("mtp.pre_fc_norm_hidden.weight", D));
      m.final_norm = plus_one(rd.vec("mtp.norm.weight", D));
      const std::string P = names::hf_mtp_layer_prefix(0);
      const FfnKind fk = rd.has(P + "mlp.gate.weight") && c.n_expert > 0 ? FfnKind::Moe : FfnKind::Dense;
      m.layer = load_layer_hf(rd, c, P, LayerKind::Attention, fk);
      w.mtp = std::move(m);
    }
  }
  return w;
}

}  // namespace memra
