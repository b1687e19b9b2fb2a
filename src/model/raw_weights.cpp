// load_raw_weights: checkpoint names -> RawWeights (memra/raw_weights.h), keeping the file's
// blocks. Mirrors load_weights (weights_load.cpp) tensor by tensor; every layout change here is
// a selection of whole rows, so it is valid for any block type.
#include <cstring>
#include <numeric>
#include <sstream>

#include "memra/error.h"
#include "memra/memory_source.h"
#include "memra/quant.h"
#include "memra/raw_weights.h"
#include "model/names.h"
#include "model/weights_internal.h"

namespace memra {

int64_t RawMatrix::row_bytes() const { return memra::row_bytes(type, cols); }

int64_t RawWeights::matrix_bytes() const {
  int64_t n = 0;
  auto add = [&](const RawMatrix& m) { n += static_cast<int64_t>(m.data.size()); };
  auto ffn = [&](const RawFfn& f) { add(f.gate); add(f.up); add(f.down); };
  add(embed);
  add(output);
  for (const RawLayer& L : layers) {
    if (L.attn) { add(L.attn->wq); add(L.attn->wgate); add(L.attn->wk); add(L.attn->wv); add(L.attn->wo); }
    if (L.gdn) { add(L.gdn->wqkv); add(L.gdn->wz); add(L.gdn->wb); add(L.gdn->wa); add(L.gdn->wout); }
    if (L.ffn) ffn(*L.ffn);
    if (L.moe) { add(L.moe->router); ffn(L.moe->experts); ffn(L.moe->shared); }
  }
  return n;
}

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

bool gpu_matrix_type(DType t) {
  return t == DType::F32 || t == DType::F16 || t == DType::BF16 || t == DType::Q8_0 || t == DType::NVFP4;
}

class RawReader {
 public:
  explicit RawReader(const WeightSource& s) : src_(s) {}
  const WeightSource& src() const { return src_; }
  bool has(const std::string& name) const { return src_.find(name) != nullptr; }

  const TensorView& tensor(const std::string& name, const std::vector<int64_t>& want) const {
    const TensorView* t = src_.find(name);
    if (!t) fail(src_.path(), ": tensor '", name, "' missing (expected shape ", shape_str(want), ")");
    if (squeeze(t->ne) != squeeze(want))
      fail(src_.path(), ": tensor '", name, "': shape ", shape_str(t->ne), ", expected ", shape_str(want));
    if (!gpu_matrix_type(t->type))
      fail(src_.path(), ": tensor '", name, "': type ", dtype_name(t->type),
           " is not supported by the GPU model (F32, F16, BF16, Q8_0, NVFP4)");
    const int64_t rb = row_bytes(t->type, t->ne[0]);
    if (rb * (t->nelements() / t->ne[0]) != t->nbytes())
      fail(src_.path(), ": tensor '", name, "': ", t->nbytes(), " bytes for shape ", shape_str(t->ne));
    return *t;
  }

  // The per-tensor "<base>.scale" as one value per slab (1 when absent).
  std::vector<float> slab_scales(const TensorView& t, int64_t slabs) const {
    std::vector<float> out(static_cast<size_t>(slabs), 1.0f);
    const std::string base = t.name.size() > 7 && t.name.ends_with(".weight")
                                 ? t.name.substr(0, t.name.size() - 7) : t.name;
    const TensorView* s = src_.find(base + ".scale");
    if (!s) return out;
    std::vector<float> sv(static_cast<size_t>(s->nelements()));
    with_context(src_.path() + ": tensor '" + s->name + "'", [&] {
      for (int64_t i = 0; i < s->nelements(); i += s->ne[0])
        dequantize_row(s->type, s->data.data() + row_bytes(s->type, s->ne[0]) * (i / s->ne[0]),
                       sv.data() + i, s->ne[0]);
    });
    if (sv.size() != 1 && static_cast<int64_t>(sv.size()) != slabs)
      fail(src_.path(), ": scale tensor '", s->name, "' has ", sv.size(), " values, expected 1 or ", slabs);
    for (int64_t e = 0; e < slabs; ++e) out[static_cast<size_t>(e)] = sv.size() == 1 ? sv[0] : sv[static_cast<size_t>(e)];
    return out;
  }

  // Rows `rows` of tensor t (rows indexed over all slabs of a 3-D tensor), as a matrix of
  // n_slab slabs; row i of the result belongs to source slab src_slab_of(rows[i]).
  RawMatrix gather(const TensorView& t, const std::vector<int64_t>& rows, int64_t n_slab) const {
    const int64_t cols = t.ne[0];
    const int64_t rows_per_src_slab = t.ne.size() >= 2 ? t.ne[1] : 1;
    const int64_t src_slabs = t.ne.size() == 3 ? t.ne[2] : 1;
    const std::vector<float> sc = slab_scales(t, src_slabs);
    RawMatrix m;
    m.type = t.type;
    m.rows = static_cast<int64_t>(rows.size());
    m.cols = cols;
    m.n_slab = n_slab;
    const int64_t rb = row_bytes(t.type, cols);
    m.data.resize(static_cast<size_t>(rb * m.rows));
    m.slab_scale.assign(static_cast<size_t>(n_slab), 1.0f);
    const int64_t out_per_slab = m.rows / n_slab;
    for (int64_t i = 0; i < m.rows; ++i) {
      std::memcpy(m.data.data() + i * rb, t.data.data() + rows[static_cast<size_t>(i)] * rb, static_cast<size_t>(rb));
      const float s = sc[static_cast<size_t>(rows[static_cast<size_t>(i)] / rows_per_src_slab)];
      if (i % out_per_slab == 0) m.slab_scale[static_cast<size_t>(i / out_per_slab)] = s;
      else if (m.slab_scale[static_cast<size_t>(i / out_per_slab)] != s)
        fail(src_.path(), ": tensor '", t.name, "': rows of one slab carry different scales");
    }
    return m;
  }

  RawMatrix mat(const std::string& name, int64_t rows, int64_t cols) const {
    const TensorView& t = tensor(name, {cols, rows});
    std::vector<int64_t> idx(static_cast<size_t>(rows));
    std::iota(idx.begin(), idx.end(), 0);
    return gather(t, idx, 1);
  }

  std::vector<float> vec(const std::string& name, std::vector<int64_t> want) const {
    const TensorView* t = src_.find(name);
    if (!t) fail(src_.path(), ": tensor '", name, "' missing (expected shape ", shape_str(want), ")");
    if (squeeze(t->ne) != squeeze(want))
      fail(src_.path(), ": tensor '", name, "': shape ", shape_str(t->ne), ", expected ", shape_str(want));
    std::vector<float> out(static_cast<size_t>(t->nelements()));
    with_context(src_.path() + ": tensor '" + name + "'", [&] {
      const int64_t rl = t->ne[0], rb = row_bytes(t->type, rl);
      if (rb * (t->nelements() / rl) != t->nbytes()) fail(t->nbytes(), " bytes for shape ", shape_str(t->ne));
      for (int64_t r = 0; r < t->nelements() / rl; ++r)
        dequantize_row(t->type, t->data.data() + r * rb, out.data() + r * rl, rl);
    });
    return out;
  }
  std::vector<float> vec(const std::string& name, int64_t n) const { return vec(name, std::vector<int64_t>{n}); }

 private:
  const WeightSource& src_;
};

std::vector<float> plus_one(std::vector<float> w) {
  for (float& x : w) x = 1.0f + x;
  return w;
}

std::vector<int64_t> range(int64_t first, int64_t n) {
  std::vector<int64_t> r(static_cast<size_t>(n));
  std::iota(r.begin(), r.end(), first);
  return r;
}

void append(std::vector<int64_t>& a, const std::vector<int64_t>& b) { a.insert(a.end(), b.begin(), b.end()); }

// Gated q_proj: per head [q(hd) | gate(hd)] rows.
void split_q_gate(const RawReader& rd, const std::string& name, const ModelConfig& c, RawAttn& a) {
  const int64_t H = c.n_head, hd = c.head_dim, D = c.n_embd;
  const TensorView& t = rd.tensor(name, {D, 2 * H * hd});
  std::vector<int64_t> q, g;
  for (int64_t h = 0; h < H; ++h) {
    append(q, range(h * 2 * hd, hd));
    append(g, range(h * 2 * hd + hd, hd));
  }
  a.wq = rd.gather(t, q, 1);
  a.wgate = rd.gather(t, g, 1);
}

// Qwen3-Next qkvz: per key head [q(dk) | k(dk) | v(r*dv) | z(r*dv)].
void deinterleave_qkvz(const RawReader& rd, const std::string& name, const ModelConfig& c, RawGdn& g) {
  const int64_t D = c.n_embd, nk = c.ssm_n_k_heads, dk = c.ssm_d_k, dv = c.ssm_d_v;
  const int64_t r = c.ssm_n_v_heads / nk, grp = 2 * dk + 2 * r * dv;
  const TensorView& t = rd.tensor(name, {D, c.ssm_conv_dim() + c.ssm_value_dim()});
  std::vector<int64_t> q, k, v, z;
  for (int64_t h = 0; h < nk; ++h) {
    append(q, range(h * grp, dk));
    append(k, range(h * grp + dk, dk));
    append(v, range(h * grp + 2 * dk, r * dv));
    append(z, range(h * grp + 2 * dk + r * dv, r * dv));
  }
  std::vector<int64_t> qkv = q;
  append(qkv, k);
  append(qkv, v);
  g.wqkv = rd.gather(t, qkv, 1);
  g.wz = rd.gather(t, z, 1);
}

// Qwen3-Next ba: per key head [b(r) | a(r)].
void deinterleave_ba(const RawReader& rd, const std::string& name, const ModelConfig& c, RawGdn& g) {
  const int64_t D = c.n_embd, nk = c.ssm_n_k_heads, nv = c.ssm_n_v_heads, r = nv / nk;
  const TensorView& t = rd.tensor(name, {D, 2 * nv});
  std::vector<int64_t> b, a;
  for (int64_t h = 0; h < nk; ++h) {
    append(b, range(h * 2 * r, r));
    append(a, range(h * 2 * r + r, r));
  }
  g.wb = rd.gather(t, b, 1);
  g.wa = rd.gather(t, a, 1);
}

std::vector<float> conv_taps(const RawReader& rd, const std::string& name, const ModelConfig& c) {
  const TensorView* t = rd.src().find(name);
  if (t && t->ne.size() == 3 && t->ne[1] == 1) return rd.vec(name, {c.ssm_conv_kernel, 1, c.ssm_conv_dim()});
  return rd.vec(name, {c.ssm_conv_kernel, c.ssm_conv_dim()});
}

// GGUF expert stacks: gate/up {D, I, E} (or fused gate_up {D, 2I, E}), down {I, D, E}.
RawFfn gguf_experts(const RawReader& rd, const ModelConfig& c, const std::string& p) {
  const int64_t D = c.n_embd, I = c.n_ff_exp, E = c.n_expert;
  RawFfn f;
  const bool fused = rd.has(p + "ffn_gate_up_exps.weight") && !rd.has(p + "ffn_gate_exps.weight");
  if (fused) {
    const TensorView& t = rd.tensor(p + "ffn_gate_up_exps.weight", {D, 2 * I, E});
    std::vector<int64_t> g, u;
    for (int64_t e = 0; e < E; ++e) {
      append(g, range(e * 2 * I, I));
      append(u, range(e * 2 * I + I, I));
    }
    f.gate = rd.gather(t, g, E);
    f.up = rd.gather(t, u, E);
  } else {
    f.gate = rd.gather(rd.tensor(p + "ffn_gate_exps.weight", {D, I, E}), range(0, E * I), E);
    f.up = rd.gather(rd.tensor(p + "ffn_up_exps.weight", {D, I, E}), range(0, E * I), E);
  }
  f.down = rd.gather(rd.tensor(p + "ffn_down_exps.weight", {I, D, E}), range(0, E * D), E);
  return f;
}

// Stacks per-expert matrices (HF experts.N.*) into one matrix of E slabs.
RawMatrix stack(std::vector<RawMatrix> parts) {
  RawMatrix m;
  m.type = parts.at(0).type;
  m.cols = parts[0].cols;
  m.n_slab = static_cast<int64_t>(parts.size());
  for (const RawMatrix& p : parts) {
    if (p.type != m.type) fail("experts of one layer have different types (", dtype_name(m.type), " vs ", dtype_name(p.type), ")");
    m.rows += p.rows;
    m.data.insert(m.data.end(), p.data.begin(), p.data.end());
    m.slab_scale.push_back(p.slab_scale.at(0));
  }
  return m;
}

RawLayer load_layer_gguf(const RawReader& rd, const ModelConfig& c, int64_t i) {
  const int64_t D = c.n_embd;
  auto N = [&](const char* t) { return names::gguf_blk(i, t); };
  RawLayer L;
  L.attn_norm = rd.vec(N("attn_norm.weight"), D);
  L.ffn_norm = rd.vec(N(c.family == Family::Qwen3 ? "ffn_norm.weight" : "post_attention_norm.weight"), D);
  if (c.layer_kind[static_cast<size_t>(i)] == LayerKind::Attention) {
    RawAttn a;
    const int64_t H = c.n_head, KV = c.n_head_kv, hd = c.head_dim;
    if (c.attn_gated()) split_q_gate(rd, N("attn_q.weight"), c, a);
    else a.wq = rd.mat(N("attn_q.weight"), H * hd, D);
    a.wk = rd.mat(N("attn_k.weight"), KV * hd, D);
    a.wv = rd.mat(N("attn_v.weight"), KV * hd, D);
    a.wo = rd.mat(N("attn_output.weight"), D, H * hd);
    a.q_norm = rd.vec(N("attn_q_norm.weight"), hd);
    a.k_norm = rd.vec(N("attn_k_norm.weight"), hd);
    L.attn = std::move(a);
  } else {
    RawGdn g;
    const int64_t nv = c.ssm_n_v_heads;
    if (!rd.has(N("attn_qkv.weight")) && rd.has(N("ssm_in.weight"))) {
      deinterleave_qkvz(rd, N("ssm_in.weight"), c, g);
    } else {
      g.wqkv = rd.mat(N("attn_qkv.weight"), c.ssm_conv_dim(), D);
      g.wz = rd.mat(N("attn_gate.weight"), c.ssm_value_dim(), D);
    }
    if (c.family == Family::Qwen3Next) {
      deinterleave_ba(rd, N("ssm_ba.weight"), c, g);
    } else {
      g.wb = rd.mat(N("ssm_beta.weight"), nv, D);
      g.wa = rd.mat(N("ssm_alpha.weight"), nv, D);
    }
    g.conv = conv_taps(rd, N("ssm_conv1d.weight"), c);
    g.ssm_a = rd.vec(N("ssm_a"), nv);
    g.dt_bias = rd.vec(N("ssm_dt.bias"), nv);
    g.norm = rd.vec(N("ssm_norm.weight"), c.ssm_d_v);
    g.wout = rd.mat(N("ssm_out.weight"), D, c.ssm_value_dim());
    L.gdn = std::move(g);
  }
  if (c.ffn_kind[static_cast<size_t>(i)] == FfnKind::Moe) {
    RawMoe m;
    m.router = rd.mat(N("ffn_gate_inp.weight"), c.n_expert, D);
    m.experts = gguf_experts(rd, c, names::gguf_blk(i, ""));
    if (c.n_ff_shexp > 0) {
      m.shared.gate = rd.mat(N("ffn_gate_shexp.weight"), c.n_ff_shexp, D);
      m.shared.up = rd.mat(N("ffn_up_shexp.weight"), c.n_ff_shexp, D);
      m.shared.down = rd.mat(N("ffn_down_shexp.weight"), D, c.n_ff_shexp);
      m.shared_gate = rd.vec(N("ffn_gate_inp_shexp.weight"), D);
    }
    L.moe = std::move(m);
  } else {
    RawFfn f;
    f.gate = rd.mat(N("ffn_gate.weight"), c.n_ff, D);
    f.up = rd.mat(N("ffn_up.weight"), c.n_ff, D);
    f.down = rd.mat(N("ffn_down.weight"), D, c.n_ff);
    L.ffn = std::move(f);
  }
  return L;
}

RawLayer load_layer_hf(const RawReader& rd, const ModelConfig& c, const std::string& P, int64_t i) {
  const int64_t D = c.n_embd;
  const bool zc = c.zero_centred_norms();
  auto norm = [&](const std::string& name, int64_t n) {
    auto w = rd.vec(name, n);
    return zc ? plus_one(std::move(w)) : w;
  };
  RawLayer L;
  L.attn_norm = norm(P + "input_layernorm.weight", D);
  L.ffn_norm = norm(P + "post_attention_layernorm.weight", D);
  if (c.layer_kind[static_cast<size_t>(i)] == LayerKind::Attention) {
    RawAttn a;
    const int64_t H = c.n_head, KV = c.n_head_kv, hd = c.head_dim;
    const std::string A = P + "self_attn.";
    if (c.attn_gated()) split_q_gate(rd, A + "q_proj.weight", c, a);
    else a.wq = rd.mat(A + "q_proj.weight", H * hd, D);
    a.wk = rd.mat(A + "k_proj.weight", KV * hd, D);
    a.wv = rd.mat(A + "v_proj.weight", KV * hd, D);
    a.wo = rd.mat(A + "o_proj.weight", D, H * hd);
    a.q_norm = norm(A + "q_norm.weight", hd);
    a.k_norm = norm(A + "k_norm.weight", hd);
    L.attn = std::move(a);
  } else {
    RawGdn g;
    const int64_t nv = c.ssm_n_v_heads;
    const std::string G = P + "linear_attn.";
    if (c.family == Family::Qwen3Next) {
      deinterleave_qkvz(rd, G + "in_proj_qkvz.weight", c, g);
      deinterleave_ba(rd, G + "in_proj_ba.weight", c, g);
    } else {
      g.wqkv = rd.mat(G + "in_proj_qkv.weight", c.ssm_conv_dim(), D);
      g.wz = rd.mat(G + "in_proj_z.weight", c.ssm_value_dim(), D);
      g.wb = rd.mat(G + "in_proj_b.weight", nv, D);
      g.wa = rd.mat(G + "in_proj_a.weight", nv, D);
    }
    g.conv = conv_taps(rd, G + "conv1d.weight", c);
    g.ssm_a = rd.vec(G + "A_log", nv);
    for (float& x : g.ssm_a) x = detail::ssm_a_from_a_log(x);
    g.dt_bias = rd.vec(G + "dt_bias", nv);
    g.norm = rd.vec(G + "norm.weight", c.ssm_d_v);
    g.wout = rd.mat(G + "out_proj.weight", D, c.ssm_value_dim());
    L.gdn = std::move(g);
  }
  const std::string M = P + "mlp.";
  if (c.ffn_kind[static_cast<size_t>(i)] == FfnKind::Moe) {
    RawMoe m;
    const int64_t E = c.n_expert, I = c.n_ff_exp;
    m.router = rd.mat(M + "gate.weight", E, D);
    if (rd.has(M + "experts.gate_up_proj")) {
      const TensorView& gu = rd.tensor(M + "experts.gate_up_proj", {D, 2 * I, E});
      std::vector<int64_t> g, u;
      for (int64_t e = 0; e < E; ++e) {
        append(g, range(e * 2 * I, I));
        append(u, range(e * 2 * I + I, I));
      }
      m.experts.gate = rd.gather(gu, g, E);
      m.experts.up = rd.gather(gu, u, E);
      m.experts.down = rd.gather(rd.tensor(M + "experts.down_proj", {I, D, E}), range(0, E * D), E);
    } else {
      std::vector<RawMatrix> g, u, d;
      for (int64_t e = 0; e < E; ++e) {
        const std::string X = M + "experts." + std::to_string(e) + ".";
        g.push_back(rd.mat(X + "gate_proj.weight", I, D));
        u.push_back(rd.mat(X + "up_proj.weight", I, D));
        d.push_back(rd.mat(X + "down_proj.weight", D, I));
      }
      m.experts.gate = stack(std::move(g));
      m.experts.up = stack(std::move(u));
      m.experts.down = stack(std::move(d));
    }
    if (c.n_ff_shexp > 0) {
      m.shared.gate = rd.mat(M + "shared_expert.gate_proj.weight", c.n_ff_shexp, D);
      m.shared.up = rd.mat(M + "shared_expert.up_proj.weight", c.n_ff_shexp, D);
      m.shared.down = rd.mat(M + "shared_expert.down_proj.weight", D, c.n_ff_shexp);
      m.shared_gate = rd.vec(M + "shared_expert_gate.weight", {D, 1});
    }
    L.moe = std::move(m);
  } else {
    RawFfn f;
    f.gate = rd.mat(M + "gate_proj.weight", c.n_ff, D);
    f.up = rd.mat(M + "up_proj.weight", c.n_ff, D);
    f.down = rd.mat(M + "down_proj.weight", D, c.n_ff);
    L.ffn = std::move(f);
  }
  return L;
}

}  // namespace

RawWeights load_raw_weights(const WeightSource& src, const ModelConfig& c) {
  c.validate();
  const RawReader rd(src);
  const int64_t D = c.n_embd, V = c.n_vocab;
  RawWeights w;
  w.layers.reserve(static_cast<size_t>(c.n_layer));
  if (detail::source_uses_gguf_names(src)) {
    w.gdn_tiled_v_heads = c.gguf_tiled_v_heads();
    w.embed = rd.mat("token_embd.weight", V, D);
    w.output_norm = rd.vec("output_norm.weight", D);
    if (!c.tied_embeddings) w.output = rd.mat("output.weight", V, D);
    for (int64_t i = 0; i < c.n_layer; ++i) w.layers.push_back(load_layer_gguf(rd, c, i));
  } else {
    const bool lm = detail::hf_language_model_prefix(src);
    const std::string G = names::hf_model_prefix(lm);
    w.embed = rd.mat(G + "embed_tokens.weight", V, D);
    w.output_norm = rd.vec(G + "norm.weight", D);
    if (c.zero_centred_norms()) w.output_norm = plus_one(std::move(w.output_norm));
    if (!c.tied_embeddings) w.output = rd.mat("lm_head.weight", V, D);
    for (int64_t i = 0; i < c.n_layer; ++i) w.layers.push_back(load_layer_hf(rd, c, names::hf_layer_prefix(lm, i), i));
  }
  return w;
}

}  // namespace memra
