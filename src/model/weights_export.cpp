// Canonical weights -> checkpoint names and conventions (GGUF as llama.cpp's converter writes
// it, HF as save_pretrained writes it), and deterministic random canonical weights. Used by the
// round-trip tests and the fixture generator.
#include <cmath>
#include <cstring>
#include <initializer_list>
#include <optional>
#include <span>

#include "memra/error.h"
#include "memra/weights.h"
#include "model/weight_map.h"
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

HyperWeights rand_hyper(Rng& g, int64_t rows, int64_t cols, int64_t n_scale) {
  return {rand_mat(g, rows, cols), rand_vec(g, rows, -0.5f, 0.5f), rand_vec(g, n_scale, 0.5f, 1.5f)};
}

CompressorWeights rand_compressor(Rng& g, int64_t D, int64_t width, int64_t ratio, bool overlap) {
  const int64_t cw = overlap ? 2 * width : width;
  return {rand_mat(g, cw, D), rand_mat(g, cw, D), rand_vec(g, ratio * cw, -0.5f, 0.5f),
          rand_vec(g, width, 0.75f, 1.25f)};
}

// layer: the layer's index (DeepSeek-V4's attention form and hash routing depend on it).
LayerWeights rand_layer(Rng& g, const ModelConfig& c, LayerKind kind, FfnKind ffn, bool dsa_indexer = false,
                        int64_t layer = 0) {
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
  } else if (kind == LayerKind::Mla) {
    MlaWeights a;
    const int64_t H = c.n_head, qr = c.mla_q_rank, kvr = c.mla_kv_rank;
    a.wq_a = rand_mat(g, qr, D);
    a.q_a_norm = rand_vec(g, qr, 0.75f, 1.25f);
    a.wq_b = rand_mat(g, H * c.head_dim, qr);
    a.wkv_a = rand_mat(g, kvr + c.n_rot, D);
    a.kv_a_norm = rand_vec(g, kvr, 0.75f, 1.25f);
    a.wkv_b = rand_mat(g, H * (c.mla_d_nope + c.mla_d_v), kvr);
    a.wo = rand_mat(g, D, H * c.mla_d_v);
    L.mla = std::move(a);
    if (dsa_indexer) {
      DsaWeights x;
      x.wq_b = rand_mat(g, c.dsa_n_head * c.dsa_head_dim, qr);
      x.wk = rand_mat(g, c.dsa_head_dim, D);
      x.k_norm = rand_vec(g, c.dsa_head_dim, 0.75f, 1.25f);
      x.k_norm_bias = rand_vec(g, c.dsa_head_dim, -0.25f, 0.25f);
      x.weights = rand_mat(g, c.dsa_n_head, D);
      if (c.dsa_kpool > 0) {
        x.kpool_gate = rand_mat(g, c.dsa_head_dim, D);
        x.kpool_ape = rand_vec(g, c.dsa_kpool * c.dsa_head_dim, -0.5f, 0.5f);
      }
      L.dsa = std::move(x);
    }
  } else if (kind == LayerKind::Kda) {
    KdaWeights k;
    const int64_t H = c.ssm_n_v_heads, d = c.ssm_d_v, hd = H * d;
    k.wq = rand_mat(g, hd, D);
    k.wk = rand_mat(g, hd, D);
    k.wv = rand_mat(g, hd, D);
    k.conv = rand_mat(g, c.ssm_conv_dim(), c.ssm_conv_kernel, 0.5f);
    k.f_a = rand_mat(g, d, D);
    k.f_b = rand_mat(g, hd, d);
    k.dt_bias = rand_vec(g, hd, -1.0f, 1.0f);  // with a_log: decays exp(g) spread over (0, 1)
    k.a_log = rand_vec(g, H, -1.0f, 1.0f);
    k.wb = rand_mat(g, H, D);
    k.g_a = rand_mat(g, d, D);
    k.g_b = rand_mat(g, hd, d);
    k.norm = rand_vec(g, d, 0.75f, 1.25f);
    k.wo = rand_mat(g, D, hd);
    L.kda = std::move(k);
  } else if (kind == LayerKind::Dsv4) {
    Dsv4AttnWeights a;
    const int64_t H = c.n_head, hd = c.head_dim, qr = c.mla_q_rank, G = c.o_groups, R = c.o_rank;
    a.wq_a = rand_mat(g, qr, D);
    a.q_a_norm = rand_vec(g, qr, 0.75f, 1.25f);
    a.wq_b = rand_mat(g, H * hd, qr);
    a.wkv = rand_mat(g, hd, D);
    a.kv_norm = rand_vec(g, hd, 0.75f, 1.25f);
    a.wo_a = rand_mat(g, G * R, H * hd / G);
    a.wo_b = rand_mat(g, D, G * R);
    a.sinks = rand_vec(g, H, -1.0f, 1.0f);
    L.dsv4 = std::move(a);
    const Dsv4Attn form = c.dsv4_attn[static_cast<size_t>(layer)];
    if (form != Dsv4Attn::Sliding) {
      const bool csa = form == Dsv4Attn::Csa;
      L.compressor = rand_compressor(g, D, hd, csa ? c.csa_ratio : c.hca_ratio, csa);
    }
    if (form == Dsv4Attn::Csa) {
      Dsv4IndexerWeights x;
      x.wq_b = rand_mat(g, c.dsa_n_head * c.dsa_head_dim, qr);
      x.weights = rand_mat(g, c.dsa_n_head, D);
      x.comp = rand_compressor(g, D, c.dsa_head_dim, c.csa_ratio, true);
      L.dsv4_indexer = std::move(x);
    }
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
  if (c.is_hyper()) {
    const int64_t N = c.hc_mult;
    L.hc_attn = rand_hyper(g, (2 + N) * N, N * D, 3);
    L.hc_ffn = rand_hyper(g, (2 + N) * N, N * D, 3);
  }
  if (ffn == FfnKind::Moe) {
    MoeWeights m;
    m.router = rand_mat(g, c.n_expert, D, 1.0f);  // spread logits so routing is not a near-tie
    const bool hash = c.moe_gating == MoeGating::SqrtSoftplus && layer < c.n_hash_layers;
    if (c.moe_gating == MoeGating::SigmoidGrouped || (c.moe_gating == MoeGating::SqrtSoftplus && !hash))
      m.router_bias = rand_vec(g, c.n_expert, -0.1f, 0.1f);
    if (hash)  // each token's top_k distinct experts: a rotation of a random start
      for (int64_t t = 0; t < c.n_vocab; ++t) {
        const int64_t e0 = static_cast<int64_t>(g.next() % static_cast<uint64_t>(c.n_expert));
        for (int64_t j = 0; j < c.n_expert_used; ++j) m.tid2eid.push_back(static_cast<float>((e0 + j) % c.n_expert));
      }
    for (int64_t e = 0; e < c.n_expert; ++e) m.experts.push_back(rand_ffn(g, D, c.n_ff_exp));
    if (c.n_ff_shexp > 0) {
      m.shared = rand_ffn(g, D, c.n_ff_shexp);
      if (c.shared_expert_gated()) m.shared_gate = rand_vec(g, D, -0.2f, 0.2f);
    }
    L.moe = std::move(m);
  } else {
    L.ffn = rand_ffn(g, D, c.n_ff);
  }
  return L;
}

// --- export ------------------------------------------------------------------------------------
// The tensor list (names, shapes, order) comes from weight_map.h's table; here each planned
// tensor gets its values, with the loader's conventions applied backwards.

using detail::ExpertLayout;
using detail::NameStyle;
using detail::PlannedTensor;
using detail::Slot;

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
// A zero-centred norm as stored in `style`.
std::vector<float> stored_norm(NameStyle style, const std::vector<float>& m) {
  return style == NameStyle::Gguf ? via_hf_norm(m) : minus_one(m);
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

// Every expert's listed matrices, expert after expert (slab e = [parts of expert e]).
std::vector<float> stack_experts(const MoeWeights& m, std::initializer_list<Matrix FfnWeights::*> parts) {
  std::vector<float> out;
  for (const FfnWeights& f : m.experts)
    for (Matrix FfnWeights::*p : parts) out.insert(out.end(), (f.*p).data.begin(), (f.*p).data.end());
  return out;
}

void put_tensor(MemorySource& s, const PlannedTensor& t, std::span<const float> values) {
  s.add_f32(t.name, t.ne, values);  // checks the value count against the planned shape
}

// A hash layer's table as each format stores it: int64 expert ids in the HF checkpoint, int32
// in llama.cpp's GGUF (its converter casts them).
template <typename Int>
void put_ids(MemorySource& s, const PlannedTensor& t, const std::vector<float>& ids, DType type) {
  std::vector<std::byte> bytes(ids.size() * sizeof(Int));
  for (size_t i = 0; i < ids.size(); ++i) {
    const Int e = static_cast<Int>(ids[i]);
    std::memcpy(bytes.data() + i * sizeof(Int), &e, sizeof(Int));
  }
  s.add(t.name, type, t.ne, std::move(bytes));
}
void put_tid2eid(MemorySource& s, const PlannedTensor& t, const std::vector<float>& ids, NameStyle style) {
  if (style == NameStyle::Gguf)
    put_ids<int32_t>(s, t, ids, DType::I32);
  else
    put_ids<int64_t>(s, t, ids, DType::I64);
}

// One layer (main or MTP) under `prefix`; its kinds are the ones its weights have. `layer`: the
// main layer's index (-1 for the MTP layer).
void put_layer(MemorySource& s, const ModelConfig& c, NameStyle style, const std::string& prefix, const LayerWeights& L,
               ExpertLayout experts, int64_t layer = -1) {
  const bool gguf = style == NameStyle::Gguf;
  const bool zc = c.zero_centred_norms();
  auto norm = [&](const std::vector<float>& m) { return zc ? stored_norm(style, m) : m; };
  // GDN as stored: GGUF ssm_a = −exp(A_log) (the converter's value) in tiled V-head order for
  // qwen35*; HF A_log = log(−ssm_a).
  std::optional<GdnWeights> g = L.gdn;
  if (g) {
    for (float& a : g->ssm_a) a = gguf ? detail::ssm_a_from_a_log(a_log_of(a)) : a_log_of(a);
    if (gguf && c.gguf_tiled_v_heads()) detail::permute_v_heads(*g, c, /*to_tiled=*/true);
  }
  const LayerKind kind = L.attn   ? LayerKind::Attention
                         : L.mla  ? LayerKind::Mla
                         : L.dsv4 ? LayerKind::Dsv4
                         : L.kda  ? LayerKind::Kda
                                  : LayerKind::Linear;
  const FfnKind ffn = L.moe ? FfnKind::Moe : FfnKind::Dense;
  for (const PlannedTensor& t : detail::layer_tensors(c, style, prefix, kind, ffn, experts, L.dsa.has_value(), layer)) {
    auto need = [&](const auto& opt) -> const auto& {
      if (!opt) fail("export: tensor '", t.name, "': the layer's weights lack this part");
      return *opt;
    };
    switch (t.slot) {
      case Slot::AttnNorm: put_tensor(s, t, norm(L.attn_norm)); break;
      case Slot::FfnNorm: put_tensor(s, t, norm(L.ffn_norm)); break;
      case Slot::Q:
        if (c.attn_gated()) put_tensor(s, t, interleave_q_gate(need(L.attn), c.n_head, c.head_dim));
        else put_tensor(s, t, need(L.attn).wq.data);
        break;
      case Slot::K: put_tensor(s, t, need(L.attn).wk.data); break;
      case Slot::V: put_tensor(s, t, need(L.attn).wv.data); break;
      case Slot::O: put_tensor(s, t, need(L.attn).wo.data); break;
      case Slot::QNorm: put_tensor(s, t, norm(need(L.attn).q_norm)); break;
      case Slot::KNorm: put_tensor(s, t, norm(need(L.attn).k_norm)); break;
      case Slot::Qkv: put_tensor(s, t, need(g).wqkv.data); break;
      case Slot::Z: put_tensor(s, t, need(g).wz.data); break;
      case Slot::Qkvz: put_tensor(s, t, interleave_qkvz(need(g), c)); break;
      case Slot::B: put_tensor(s, t, need(g).wb.data); break;
      case Slot::A: put_tensor(s, t, need(g).wa.data); break;
      case Slot::Ba: put_tensor(s, t, interleave_ba(need(g), c)); break;
      case Slot::Conv: put_tensor(s, t, need(g).conv.data); break;
      case Slot::SsmA: put_tensor(s, t, need(g).ssm_a); break;
      case Slot::DtBias: put_tensor(s, t, need(g).dt_bias); break;
      case Slot::SsmNorm: put_tensor(s, t, need(g).norm); break;  // plain w in both sets
      case Slot::SsmOut: put_tensor(s, t, need(g).wout.data); break;
      case Slot::Router: put_tensor(s, t, need(L.moe).router.data); break;
      case Slot::GateExps: put_tensor(s, t, stack_experts(need(L.moe), {&FfnWeights::gate})); break;
      case Slot::UpExps: put_tensor(s, t, stack_experts(need(L.moe), {&FfnWeights::up})); break;
      case Slot::GateUpExps:
        put_tensor(s, t, stack_experts(need(L.moe), {&FfnWeights::gate, &FfnWeights::up}));
        break;
      case Slot::DownExps: put_tensor(s, t, stack_experts(need(L.moe), {&FfnWeights::down})); break;
      case Slot::ExpGate: put_tensor(s, t, need(L.moe).experts.at(static_cast<size_t>(t.expert)).gate.data); break;
      case Slot::ExpUp: put_tensor(s, t, need(L.moe).experts.at(static_cast<size_t>(t.expert)).up.data); break;
      case Slot::ExpDown: put_tensor(s, t, need(L.moe).experts.at(static_cast<size_t>(t.expert)).down.data); break;
      case Slot::ShGate: put_tensor(s, t, need(L.moe).shared.gate.data); break;
      case Slot::ShUp: put_tensor(s, t, need(L.moe).shared.up.data); break;
      case Slot::ShDown: put_tensor(s, t, need(L.moe).shared.down.data); break;
      case Slot::ShGateInp: put_tensor(s, t, need(L.moe).shared_gate); break;
      case Slot::Gate: put_tensor(s, t, need(L.ffn).gate.data); break;
      case Slot::Up: put_tensor(s, t, need(L.ffn).up.data); break;
      case Slot::Down: put_tensor(s, t, need(L.ffn).down.data); break;
      case Slot::MlaQA:  // also DeepSeek-V4's query latent (same name and shape)
        put_tensor(s, t, L.dsv4 ? L.dsv4->wq_a.data : need(L.mla).wq_a.data);
        break;
      case Slot::MlaQANorm:
        put_tensor(s, t, need(L.mla).q_a_norm);
        break;
      case Slot::MlaQB:
        put_tensor(s, t, L.dsv4 ? L.dsv4->wq_b.data : need(L.mla).wq_b.data);
        break;
      case Slot::MlaKvA:
        put_tensor(s, t, need(L.mla).wkv_a.data);
        break;
      case Slot::MlaKvANorm:
        put_tensor(s, t, need(L.mla).kv_a_norm);
        break;
      case Slot::MlaKvB:
        put_tensor(s, t, need(L.mla).wkv_b.data);
        break;
      case Slot::MlaKB:
      case Slot::MlaVB: {  // llama.cpp's split of kv_b (weight_map.h split_kv_b)
        const int64_t H = c.n_head, kvr = c.mla_kv_rank;
        std::vector<float> k(static_cast<size_t>(H * kvr * c.mla_d_nope)), v(static_cast<size_t>(H * c.mla_d_v * kvr));
        detail::split_kv_b(need(L.mla).wkv_b.data.data(), k.data(), v.data(), c);
        put_tensor(s, t, t.slot == Slot::MlaKB ? k : v);
        break;
      }
      case Slot::MlaO:
        put_tensor(s, t, need(L.mla).wo.data);
        break;
      case Slot::DsaQB:
        put_tensor(s, t, need(L.dsa).wq_b.data);
        break;
      case Slot::DsaK:
        put_tensor(s, t, need(L.dsa).wk.data);
        break;
      case Slot::DsaKNorm:
        put_tensor(s, t, need(L.dsa).k_norm);
        break;
      case Slot::DsaKNormBias:
        put_tensor(s, t, need(L.dsa).k_norm_bias);
        break;
      case Slot::DsaWeights:
        put_tensor(s, t, need(L.dsa).weights.data);
        break;
      case Slot::RouterBias:
        put_tensor(s, t, need(L.moe).router_bias);
        break;
      case Slot::Dsv4QANorm:
        put_tensor(s, t, need(L.dsv4).q_a_norm);
        break;
      case Slot::Dsv4Kv:
        put_tensor(s, t, need(L.dsv4).wkv.data);
        break;
      case Slot::Dsv4KvNorm:
        put_tensor(s, t, need(L.dsv4).kv_norm);
        break;
      case Slot::Dsv4OA:
        put_tensor(s, t, need(L.dsv4).wo_a.data);
        break;
      case Slot::Dsv4OB:
        put_tensor(s, t, need(L.dsv4).wo_b.data);
        break;
      case Slot::Dsv4Sinks:
        put_tensor(s, t, need(L.dsv4).sinks);
        break;
      case Slot::HcaKv:
      case Slot::CsaKv:
        put_tensor(s, t, need(L.compressor).wkv.data);
        break;
      case Slot::HcaGate:
      case Slot::CsaGate:
        put_tensor(s, t, need(L.compressor).wgate.data);
        break;
      case Slot::HcaApe:
      case Slot::CsaApe:
        put_tensor(s, t, need(L.compressor).ape);
        break;
      case Slot::HcaNorm:
      case Slot::CsaNorm:
        put_tensor(s, t, need(L.compressor).norm);
        break;
      case Slot::IdxKv:
        put_tensor(s, t, need(L.dsv4_indexer).comp.wkv.data);
        break;
      case Slot::IdxGate:
        put_tensor(s, t, need(L.dsv4_indexer).comp.wgate.data);
        break;
      case Slot::IdxApe:
        put_tensor(s, t, need(L.dsv4_indexer).comp.ape);
        break;
      case Slot::IdxNorm:
        put_tensor(s, t, need(L.dsv4_indexer).comp.norm);
        break;
      case Slot::IdxQB:
        put_tensor(s, t, need(L.dsv4_indexer).wq_b.data);
        break;
      case Slot::IdxWeights:
        put_tensor(s, t, need(L.dsv4_indexer).weights.data);
        break;
      case Slot::HcAttnFn:
        put_tensor(s, t, need(L.hc_attn).fn.data);
        break;
      case Slot::HcAttnBase:
        put_tensor(s, t, need(L.hc_attn).base);
        break;
      case Slot::HcAttnScale:
        put_tensor(s, t, need(L.hc_attn).scale);
        break;
      case Slot::HcFfnFn:
        put_tensor(s, t, need(L.hc_ffn).fn.data);
        break;
      case Slot::HcFfnBase:
        put_tensor(s, t, need(L.hc_ffn).base);
        break;
      case Slot::HcFfnScale:
        put_tensor(s, t, need(L.hc_ffn).scale);
        break;
      case Slot::KdaQ:
        put_tensor(s, t, need(L.kda).wq.data);
        break;
      case Slot::KdaK:
        put_tensor(s, t, need(L.kda).wk.data);
        break;
      case Slot::KdaV:
        put_tensor(s, t, need(L.kda).wv.data);
        break;
      case Slot::KdaConv:
        put_tensor(s, t, need(L.kda).conv.data);
        break;
      case Slot::KdaFA:
        put_tensor(s, t, need(L.kda).f_a.data);
        break;
      case Slot::KdaFB:
        put_tensor(s, t, need(L.kda).f_b.data);
        break;
      case Slot::KdaDtBias:
        put_tensor(s, t, need(L.kda).dt_bias);
        break;
      case Slot::KdaALog:
        put_tensor(s, t, need(L.kda).a_log);
        break;
      case Slot::KdaB:
        put_tensor(s, t, need(L.kda).wb.data);
        break;
      case Slot::KdaGA:
        put_tensor(s, t, need(L.kda).g_a.data);
        break;
      case Slot::KdaGB:
        put_tensor(s, t, need(L.kda).g_b.data);
        break;
      case Slot::KdaNorm:
        put_tensor(s, t, need(L.kda).norm);
        break;
      case Slot::KdaO:
        put_tensor(s, t, need(L.kda).wo.data);
        break;
      case Slot::DsaKpoolGate:
        put_tensor(s, t, need(L.dsa).kpool_gate.data);
        break;
      case Slot::DsaKpoolApe:
        put_tensor(s, t, need(L.dsa).kpool_ape);
        break;
      case Slot::Tid2eid:
        put_tid2eid(s, t, need(L.moe).tid2eid, style);
        break;
      default: fail("export: tensor '", t.name, "' is not a layer tensor");
    }
  }
}

// Model head, main layers and (when present) the MTP head and layer, in file order.
void put_model(MemorySource& s, const ModelConfig& c, const ModelWeights& w, NameStyle style, bool lm,
               ExpertLayout experts) {
  for (const PlannedTensor& t : detail::head_tensors(c, style, lm)) {
    switch (t.slot) {
      case Slot::Embed: put_tensor(s, t, w.embed.data); break;
      case Slot::OutputNorm:
        put_tensor(s, t, c.zero_centred_norms() ? stored_norm(style, w.output_norm) : w.output_norm);
        break;
      case Slot::Output: put_tensor(s, t, w.output.data); break;
      case Slot::HcHeadFn:
      case Slot::HcHeadBase:
      case Slot::HcHeadScale: {
        if (!w.hc_head) fail("export: tensor '", t.name, "': the weights lack hc_head");
        const HyperWeights& h = *w.hc_head;
        put_tensor(s, t,
                   t.slot == Slot::HcHeadFn     ? std::span<const float>(h.fn.data)
                   : t.slot == Slot::HcHeadBase ? std::span<const float>(h.base)
                                                : std::span<const float>(h.scale));
        break;
      }
      default: fail("export: tensor '", t.name, "' is not a model-head tensor");
    }
  }
  for (int64_t i = 0; i < c.n_layer; ++i)
    put_layer(s, c, style, detail::layer_prefix(style, lm, i), w.layers[static_cast<size_t>(i)], experts, i);
  if (c.n_mtp > 0 && w.mtp) {
    // MTP exists only for Next/3.5: its norms are zero-centred in HF.
    for (const PlannedTensor& t : detail::mtp_head_tensors(c, style)) {
      switch (t.slot) {
        case Slot::MtpEhProj: put_tensor(s, t, w.mtp->eh_proj.data); break;
        case Slot::MtpEnorm: put_tensor(s, t, stored_norm(style, w.mtp->enorm)); break;
        case Slot::MtpHnorm: put_tensor(s, t, stored_norm(style, w.mtp->hnorm)); break;
        case Slot::MtpFinalNorm: put_tensor(s, t, stored_norm(style, w.mtp->final_norm)); break;
        default: fail("export: tensor '", t.name, "' is not an MTP-head tensor");
      }
    }
    put_layer(s, c, style, detail::mtp_layer_prefix(style, c), w.mtp->layer, experts);
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
  for (int64_t i = 0; i < c.n_layer; ++i) {
    const size_t k = static_cast<size_t>(i);
    const bool indexer = c.layer_kind[k] == LayerKind::Mla && !c.dsa_shared[k];
    w.layers.push_back(rand_layer(g, c, c.layer_kind[k], c.ffn_kind[k], indexer, i));
  }
  if (c.family == Family::DeepseekV4) w.hc_head = rand_hyper(g, c.hc_mult, c.hc_mult * c.n_embd, 1);
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
  put_model(s, c, w, NameStyle::Gguf, false,
            layout.fused_gate_up_exps ? ExpertLayout::Fused : ExpertLayout::Stacked);
  return s;
}

MemorySource to_hf_source(const ModelConfig& c, const ModelWeights& w, HfLayout layout) {
  MemorySource s(MetaStyle::Hf, std::string("<memory hf ") + std::string(family_arch(c.family)) + ">");
  write_hf_keys(c, s);
  // DeepSeek-V4 and GLM-5's hybrid: the experts as transformers 5.17 holds (and saves) them
  const bool fused = layout.fused_experts || c.is_hyper();
  // GLM-5's hybrid lives in transformers only inside its vision-language model
  // (Glm5NextForConditionalGeneration): the text model's tensors are model.language_model.*
  put_model(s, c, w, NameStyle::Hf, layout.language_model_prefix || c.family == Family::Glm5Next,
            fused ? ExpertLayout::Fused : ExpertLayout::PerExpert);
  return s;
}

}  // namespace memra
