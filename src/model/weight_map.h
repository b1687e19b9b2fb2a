// The checkpoint-name mapping, once: which file tensor, with which expected shape (ggml order),
// feeds which canonical slot, for every family, layer kind, FFN kind, expert layout and naming
// style. Names and written shapes come from one table (Slot, tensor_name, tensor_ne); the
// writers take their tensor lists from it too (layer_tensors / head_tensors / mtp_head_tensors:
// to_gguf_source / to_hf_source in weights_export.cpp, the streamed fixture plans in
// fixture.cpp). Both loaders walk map_layer/map_model: load_weights (f32 ModelWeights,
// weights_load.cpp) and load_raw_weights (file-typed RawWeights, raw_weights.cpp). Each loader
// supplies a Reader that decides what a slot becomes (dequantised f32 or the file's blocks); the
// walk decides which tensor and which rows. Conventions that are the same for both readers live
// here too (HF 1+w norms, ssm_a = −exp(A_log)); the one that only the f32 loader applies (GDN
// value-head reorder) stays in weights_load.cpp. The writers apply them backwards.
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
//   Mat kv_b(k_b, v_b, c)             GGUF's split kv_b, shapes checked, joined (join_kv_b)
// Every check fails naming the tensor with the expected and the actual shape.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "memra/config.h"
#include "memra/error.h"
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

// GLM-5's kv_b [H·(nope + v), kv_lora] (HF kv_b_proj, the expanded MLA's matrix) and the two
// tensors llama.cpp's converter splits it into: attn_k_b {nope, kv_lora, H} (head h's nope rows,
// transposed) and attn_v_b {kv_lora, v, H} (head h's v rows as they are). Element arrays of
// `elem` bytes each, row-major as ggml stores them. A transpose cannot keep a block type's blocks,
// so a joined kv_b keeps the files' type only when both halves share an element type (F32, F16,
// BF16) and is F32 (the exact dequantised values) otherwise: joined_kv_b_type, one rule for both
// loaders, so the oracle and the GPU model multiply by the same matrix.
void join_kv_b(const std::byte* k_b, const std::byte* v_b, std::byte* kv_b, size_t elem, const ModelConfig& c);
void split_kv_b(const float* kv_b, float* k_b, float* v_b, const ModelConfig& c);
DType joined_kv_b_type(DType k_b, DType v_b);

// The tensor `name` of `src`, with shape `want` (ggml order, trailing 1s ignored). Fails with
// "<path>: tensor '<name>' missing (expected shape {…})" or
// "<path>: tensor '<name>': shape {…}, expected {…}". Both readers check through this.
const TensorView& checked_tensor(const WeightSource& src, const std::string& name,
                                 const std::vector<int64_t>& want);
// "{a, b, c}".
std::string shape_str(const std::vector<int64_t>& ne);

// --- the name table -----------------------------------------------------------------------------
// Every checkpoint tensor memra reads or writes, by role. The loaders (map_layer below) and the
// writers (to_gguf_source / to_hf_source, the fixture's streamed plans) take names and shapes
// only from tensor_name / tensor_ne, so a name is spelled once.
enum class Slot {
  Embed,
  OutputNorm,
  Output,  // model level
  MtpEhProj,
  MtpEnorm,
  MtpHnorm,
  MtpFinalNorm,  // MTP head (HF mtp.*, GGUF nextn.*)
  AttnNorm,
  FfnNorm,  // every layer
  Q,
  K,
  V,
  O,
  QNorm,
  KNorm,  // attention
  Qkv,
  Z,
  Qkvz,
  B,
  A,
  Ba,
  Conv,
  SsmA,
  DtBias,
  SsmNorm,
  SsmOut,  // gated delta net
  Router,
  GateExps,
  UpExps,
  GateUpExps,
  DownExps,  // stacked / fused experts
  ExpGate,
  ExpUp,
  ExpDown,  // HF per-expert (needs the index)
  ShGate,
  ShUp,
  ShDown,
  ShGateInp,  // shared expert
  Gate,
  Up,
  Down,  // dense FFN
  MlaQA,
  MlaQANorm,
  MlaQB,
  MlaKvA,
  MlaKvANorm,
  MlaKvB,
  MlaO,  // multi-head latent attention
  DsaQB,
  DsaK,
  DsaKNorm,
  DsaKNormBias,
  DsaWeights,  // DSA indexer
  RouterBias,  // sigmoid-grouped gating's bias
  MlaKB,
  MlaVB,  // GGUF's split kv_b: k_b per head transposed [kv_lora, nope], v_b [v, kv_lora]
  // DeepSeek-V4 (HF deepseek_v4; wq_a / wq_b are MlaQA / MlaQB, same names and shapes). A
  // compressor's tensors share their names between the HCA form (width hd) and the CSA form
  // (2·hd, overlapping windows), so each form has its own slots for its shapes.
  Dsv4QANorm,
  Dsv4Kv,
  Dsv4KvNorm,
  Dsv4OA,
  Dsv4OB,
  Dsv4Sinks,
  HcaKv,
  HcaGate,
  HcaApe,
  HcaNorm,
  CsaKv,
  CsaGate,
  CsaApe,
  CsaNorm,
  IdxKv,
  IdxGate,
  IdxApe,
  IdxNorm,
  IdxQB,
  IdxWeights,  // the CSA layers' lightning indexer
  HcAttnFn,
  HcAttnBase,
  HcAttnScale,
  HcFfnFn,
  HcFfnBase,
  HcFfnScale,  // the hyper-connections around a layer's two blocks
  Tid2eid,     // a hash layer's token -> experts table (integers)
  HcHeadFn,
  HcHeadBase,
  HcHeadScale,  // model level: the streams' final collapse
  KdaQ,
  KdaK,
  KdaV,
  KdaConv,
  KdaFA,
  KdaFB,
  KdaDtBias,
  KdaALog,
  KdaB,
  KdaGA,
  KdaGB,
  KdaNorm,
  KdaO,  // Kimi delta attention (GLM-5's hybrid)
  DsaKpoolGate,
  DsaKpoolApe,  // its DSA indexer's pool gate
};

// Where a name sits: `prefix` is the layer prefix (LayerSpec::prefix) for layer slots; model
// and MTP slots ignore it and use `lm` (HF model.language_model.*) / `mtp_block` (GGUF
// blk.<n_layer>). Fails for a slot the style has no tensor for (HF GateExps, GGUF ExpGate).
struct NameAt {
  NameStyle style;
  Family family;
  std::string prefix;
  bool lm = false;
  int64_t mtp_block = 0;
  int64_t expert = -1;  // ExpGate/ExpUp/ExpDown only
};
std::string tensor_name(Slot k, const NameAt& at);
// The tensor's shape in ggml order as written (GGUF conv {K, conv_dim}, HF conv {K, 1, conv_dim};
// GGUF shared-expert gate {D}, HF {D, 1}; gated q is {D, 2·H·hd}).
std::vector<int64_t> tensor_ne(Slot k, NameStyle style, const ModelConfig& c);

// Main layer i's prefix: GGUF "blk.<i>.", HF "model.layers.<i>." (lm: model.language_model.…).
std::string layer_prefix(NameStyle style, bool lm, int64_t i);
// The MTP layer's prefix: GGUF "blk.<n_layer>.", HF "mtp.layers.0.".
std::string mtp_layer_prefix(NameStyle style, const ModelConfig& c);

// How a writer lays out routed experts.
enum class ExpertLayout { Stacked, Fused, PerExpert };  // GGUF *_exps; gate_up + down; HF per expert
struct PlannedTensor {
  Slot slot;
  std::string name;
  std::vector<int64_t> ne;
  int64_t expert = -1;
};
// The tensors a writer emits, in file order: model head (Embed, OutputNorm, Output if untied),
// one layer, and the MTP head's own four. A layer's GDN projections are written split except
// HF Qwen3-Next (in_proj_qkvz / in_proj_ba) and GGUF Qwen3-Next ssm_ba.
std::vector<PlannedTensor> head_tensors(const ModelConfig& c, NameStyle style, bool lm);
// `layer`: the main layer's index (DeepSeek-V4's attention form and hash routing depend on it).
std::vector<PlannedTensor> layer_tensors(const ModelConfig& c, NameStyle style, const std::string& prefix,
                                         LayerKind kind, FfnKind ffn, ExpertLayout experts, bool dsa_indexer = false,
                                         int64_t layer = -1);
std::vector<PlannedTensor> mtp_head_tensors(const ModelConfig& c, NameStyle style);

// One decoder layer: names are "<prefix><gguf or hf name>", prefix "blk.N." (GGUF) or
// "model.layers.N." / "model.language_model.layers.N." / "mtp.layers.0." (HF).
struct LayerSpec {
  NameStyle style;
  std::string prefix;
  LayerKind kind;
  FfnKind ffn;
  bool dsa_indexer = false;  // an MLA layer with its own indexer (ModelConfig::dsa_shared)
  int64_t layer = -1;        // the main layer's index (DeepSeek-V4: attention form, hash routing)
};

// A DeepSeek-V4 hash layer's table as read (f32 values of an integer tensor): every entry an
// integer expert id in [0, n_expert), else an error naming the tensor, the token and the value.
void check_tid2eid(const std::vector<float>& t, const ModelConfig& c, const std::string& name);

template <class R>
typename R::Layer map_layer(const R& rd, const ModelConfig& c, const LayerSpec& s) {
  const bool gguf = s.style == NameStyle::Gguf;
  const int64_t D = c.n_embd;
  const NameAt at{s.style, c.family, s.prefix};
  auto N = [&](Slot k) { return tensor_name(k, at); };
  auto ne = [&](Slot k) { return tensor_ne(k, s.style, c); };
  // A matrix slot as [rows, cols] = ne {cols, rows}; `expert` for HF per-expert slots.
  auto mat = [&](Slot k, int64_t expert = -1) {
    NameAt where = at;
    where.expert = expert;
    const std::vector<int64_t> e = ne(k);
    return rd.mat(tensor_name(k, where), e[1], e[0]);
  };
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
  L.attn_norm = norm(N(Slot::AttnNorm), D);
  L.ffn_norm = norm(N(Slot::FfnNorm), D);
  if (s.kind == LayerKind::Attention) {
    typename R::Attn a;
    if (c.attn_gated()) std::tie(a.wq, a.wgate) = split(N(Slot::Q), ne(Slot::Q), q_gate_rows(c));
    else a.wq = mat(Slot::Q);
    a.wk = mat(Slot::K);
    a.wv = mat(Slot::V);
    a.wo = mat(Slot::O);
    a.q_norm = norm(N(Slot::QNorm), c.head_dim);
    a.k_norm = norm(N(Slot::KNorm), c.head_dim);
    L.attn = std::move(a);
  } else if (s.kind == LayerKind::Mla) {
    // GLM-5's norms are plain multipliers in both name sets (no zero-centring).
    typename R::Layer::Mla a;
    a.wq_a = mat(Slot::MlaQA);
    a.q_a_norm = rd.vec(N(Slot::MlaQANorm), ne(Slot::MlaQANorm));
    a.wq_b = mat(Slot::MlaQB);
    a.wkv_a = mat(Slot::MlaKvA);
    a.kv_a_norm = rd.vec(N(Slot::MlaKvANorm), ne(Slot::MlaKvANorm));
    // GGUF: attn_k_b + attn_v_b as llama.cpp's converter writes them; attn_kv_b in older files.
    if (gguf && !rd.has(N(Slot::MlaKvB))) {
      a.wkv_b = rd.kv_b(N(Slot::MlaKB), N(Slot::MlaVB), c);
    } else {
      a.wkv_b = mat(Slot::MlaKvB);
    }
    a.wo = mat(Slot::MlaO);
    L.mla = std::move(a);
    if (s.dsa_indexer) {
      typename R::Layer::Dsa x;
      x.wq_b = mat(Slot::DsaQB);
      x.wk = mat(Slot::DsaK);
      x.k_norm = rd.vec(N(Slot::DsaKNorm), ne(Slot::DsaKNorm));
      x.k_norm_bias = rd.vec(N(Slot::DsaKNormBias), ne(Slot::DsaKNormBias));
      x.weights = mat(Slot::DsaWeights);
      if (c.dsa_kpool > 0) {
        x.kpool_gate = mat(Slot::DsaKpoolGate);
        x.kpool_ape = rd.vec(N(Slot::DsaKpoolApe), ne(Slot::DsaKpoolApe));
      }
      L.dsa = std::move(x);
    }
  } else if (s.kind == LayerKind::Kda) {
    typename R::Layer::Kda k;
    auto vec = [&](Slot x) { return rd.vec(N(x), ne(x)); };
    k.wq = mat(Slot::KdaQ);
    k.wk = mat(Slot::KdaK);
    k.wv = mat(Slot::KdaV);
    const int64_t conv_dim = c.ssm_conv_dim();
    k.conv = rd.conv(vec(Slot::KdaConv), conv_dim, c.ssm_conv_kernel);
    k.f_a = mat(Slot::KdaFA);
    k.f_b = mat(Slot::KdaFB);
    k.dt_bias = vec(Slot::KdaDtBias);
    k.a_log = vec(Slot::KdaALog);
    k.wb = mat(Slot::KdaB);
    k.g_a = mat(Slot::KdaGA);
    k.g_b = mat(Slot::KdaGB);
    k.norm = vec(Slot::KdaNorm);
    k.wo = mat(Slot::KdaO);
    L.kda = std::move(k);
  } else if (s.kind == LayerKind::Dsv4) {
    // DeepSeek-V4's norms are plain multipliers (no zero-centring).
    auto vec = [&](Slot k) { return rd.vec(N(k), ne(k)); };
    typename R::Layer::Dsv4 a;
    a.wq_a = mat(Slot::MlaQA);
    a.q_a_norm = vec(Slot::Dsv4QANorm);
    a.wq_b = mat(Slot::MlaQB);
    a.wkv = mat(Slot::Dsv4Kv);
    a.kv_norm = vec(Slot::Dsv4KvNorm);
    a.wo_a = mat(Slot::Dsv4OA);
    a.wo_b = mat(Slot::Dsv4OB);
    a.sinks = vec(Slot::Dsv4Sinks);
    L.dsv4 = std::move(a);
    const Dsv4Attn form = c.dsv4_attn.at(static_cast<size_t>(s.layer));
    if (form != Dsv4Attn::Sliding) {
      const bool csa = form == Dsv4Attn::Csa;
      typename R::Layer::Compressor k;
      k.wkv = mat(csa ? Slot::CsaKv : Slot::HcaKv);
      k.wgate = mat(csa ? Slot::CsaGate : Slot::HcaGate);
      k.ape = vec(csa ? Slot::CsaApe : Slot::HcaApe);
      k.norm = vec(csa ? Slot::CsaNorm : Slot::HcaNorm);
      L.compressor = std::move(k);
    }
    if (form == Dsv4Attn::Csa) {
      typename R::Layer::Dsv4Indexer x;
      x.wq_b = mat(Slot::IdxQB);
      x.weights = mat(Slot::IdxWeights);
      x.comp.wkv = mat(Slot::IdxKv);
      x.comp.wgate = mat(Slot::IdxGate);
      x.comp.ape = vec(Slot::IdxApe);
      x.comp.norm = vec(Slot::IdxNorm);
      L.dsv4_indexer = std::move(x);
    }
  } else {
    typename R::Gdn g;
    const int64_t conv_dim = c.ssm_conv_dim();
    const bool next = c.family == Family::Qwen3Next;
    // q/k/v/z: interleaved per key head for HF Next and GGUF's legacy ssm_in; split otherwise.
    const bool qkvz_interleaved =
        gguf ? !rd.has(N(Slot::Qkv)) && rd.has(N(Slot::Qkvz)) : next;
    if (qkvz_interleaved)
      std::tie(g.wqkv, g.wz) = split(N(Slot::Qkvz), ne(Slot::Qkvz), qkvz_rows(c));
    else {
      g.wqkv = mat(Slot::Qkv);
      g.wz = mat(Slot::Z);
    }
    if (next) {  // b/a interleaved per key head in both name sets
      std::tie(g.wb, g.wa) = split(N(Slot::Ba), ne(Slot::Ba), ba_rows(c));
    } else {
      g.wb = mat(Slot::B);
      g.wa = mat(Slot::A);
    }
    // GGUF squeezes conv1d to {K, conv_dim}; HF has [conv_dim, 1, K] = ne {K, 1, conv_dim}.
    // Both are conv_dim rows of K taps once the unit dim is ignored.
    const std::string conv = N(Slot::Conv);
    const TensorView* ct = rd.find(conv);
    const bool unit_dim = ct && ct->ne.size() == 3 && ct->ne[1] == 1;
    g.conv = rd.conv(rd.vec(conv, unit_dim ? std::vector<int64_t>{c.ssm_conv_kernel, 1, conv_dim}
                                           : std::vector<int64_t>{c.ssm_conv_kernel, conv_dim}),
                     conv_dim, c.ssm_conv_kernel);
    g.ssm_a = rd.vec(N(Slot::SsmA), ne(Slot::SsmA));
    if (!gguf) for (float& x : g.ssm_a) x = ssm_a_from_a_log(x);  // GGUF stores −exp(A_log)
    g.dt_bias = rd.vec(N(Slot::DtBias), ne(Slot::DtBias));
    // The gated norm is plain w in both sets: the one norm HF keeps un-centred.
    g.norm = rd.vec(N(Slot::SsmNorm), ne(Slot::SsmNorm));
    g.wout = mat(Slot::SsmOut);
    L.gdn = std::move(g);
  }
  if (c.is_hyper()) {  // the hyper-connections around the mixer and the FFN
    auto vec = [&](Slot k) { return rd.vec(N(k), ne(k)); };
    typename R::Layer::Hyper ha, hf;
    ha.fn = mat(Slot::HcAttnFn);
    ha.base = vec(Slot::HcAttnBase);
    ha.scale = vec(Slot::HcAttnScale);
    hf.fn = mat(Slot::HcFfnFn);
    hf.base = vec(Slot::HcFfnBase);
    hf.scale = vec(Slot::HcFfnScale);
    L.hc_attn = std::move(ha);
    L.hc_ffn = std::move(hf);
  }
  if (s.ffn == FfnKind::Moe) {
    typename R::Moe m;
    const int64_t E = c.n_expert, I = c.n_ff_exp;
    m.router = mat(Slot::Router);
    // DeepSeek-V4: the first n_hash_layers route by the token's table, the rest by score with a bias.
    const bool hash = c.moe_gating == MoeGating::SqrtSoftplus && s.layer >= 0 && s.layer < c.n_hash_layers;
    if (c.moe_gating == MoeGating::SigmoidGrouped || (c.moe_gating == MoeGating::SqrtSoftplus && !hash))
      m.router_bias = rd.vec(N(Slot::RouterBias), ne(Slot::RouterBias));
    if (hash) {
      m.tid2eid = rd.vec(N(Slot::Tid2eid), ne(Slot::Tid2eid));
      check_tid2eid(m.tid2eid, c, N(Slot::Tid2eid));
    }
    std::vector<typename R::Mat> gate, up, down;
    // Fused gate_up: GGUF ffn_gate_up_exps {D, 2I, E}, HF experts.gate_up_proj [E, 2I, D];
    // slab e holds rows [gate_e ; up_e]. Down is stacked {I, D, E} alongside.
    const std::string gu = N(Slot::GateUpExps);
    const bool fused = gguf ? rd.has(gu) && !rd.has(N(Slot::GateExps)) : rd.has(gu);
    if (fused || gguf) {
      const std::string dn_name = N(Slot::DownExps);
      if (fused) {
        auto t = rd.tensor(gu, ne(Slot::GateUpExps));
        auto dn = rd.tensor(dn_name, ne(Slot::DownExps));
        for (int64_t e = 0; e < E; ++e) {
          gate.push_back(rd.rows(t, row_range(e * 2 * I, I)));
          up.push_back(rd.rows(t, row_range(e * 2 * I + I, I)));
          down.push_back(rd.rows(dn, row_range(e * D, D)));
        }
      } else {  // GGUF stacked ffn_{gate,up,down}_exps
        auto tg = rd.tensor(N(Slot::GateExps), ne(Slot::GateExps));
        auto tu = rd.tensor(N(Slot::UpExps), ne(Slot::UpExps));
        auto dn = rd.tensor(dn_name, ne(Slot::DownExps));
        for (int64_t e = 0; e < E; ++e) {
          gate.push_back(rd.rows(tg, row_range(e * I, I)));
          up.push_back(rd.rows(tu, row_range(e * I, I)));
          down.push_back(rd.rows(dn, row_range(e * D, D)));
        }
      }
    } else {  // HF per expert: mlp.experts.<e>.{gate,up,down}_proj.weight
      for (int64_t e = 0; e < E; ++e) {
        gate.push_back(mat(Slot::ExpGate, e));
        up.push_back(mat(Slot::ExpUp, e));
        down.push_back(mat(Slot::ExpDown, e));
      }
    }
    m.experts = rd.experts(std::move(gate), std::move(up), std::move(down));
    if (c.n_ff_shexp > 0) {
      m.shared.gate = mat(Slot::ShGate);
      m.shared.up = mat(Slot::ShUp);
      m.shared.down = mat(Slot::ShDown);
      if (c.shared_expert_gated())
        m.shared_gate = rd.vec(N(Slot::ShGateInp), ne(Slot::ShGateInp));  // GGUF {D}, HF {D, 1}
    }
    L.moe = std::move(m);
  } else {
    typename R::Ffn f;
    f.gate = mat(Slot::Gate);
    f.up = mat(Slot::Up);
    f.down = mat(Slot::Down);
    L.ffn = std::move(f);
  }
  return L;
}

// Model-level slots (embedding, final norm, untied output) and the n_layer main layers.
// `lm` selects HF's model.language_model.* prefix. W is ModelWeights or RawWeights.
template <class R, class W>
void map_model(const R& rd, const ModelConfig& c, NameStyle style, bool lm, W& w) {
  const bool gguf = style == NameStyle::Gguf;
  const NameAt at{style, c.family, "", lm};
  const int64_t D = c.n_embd, V = c.n_vocab;
  w.embed = rd.mat(tensor_name(Slot::Embed, at), V, D);
  w.output_norm = rd.vec(tensor_name(Slot::OutputNorm, at), {D});
  if (!gguf && c.zero_centred_norms()) for (float& x : w.output_norm) x = 1.0f + x;
  if (!c.tied_embeddings) w.output = rd.mat(tensor_name(Slot::Output, at), V, D);
  w.layers.reserve(static_cast<size_t>(c.n_layer));
  for (int64_t i = 0; i < c.n_layer; ++i) {
    const size_t k = static_cast<size_t>(i);
    const bool indexer = c.layer_kind[k] == LayerKind::Mla && !c.dsa_shared[k];
    w.layers.push_back(
        map_layer(rd, c, {style, layer_prefix(style, lm, i), c.layer_kind[k], c.ffn_kind[k], indexer, i}));
  }
  if (c.family == Family::DeepseekV4) {
    auto vec = [&](Slot k) { return rd.vec(tensor_name(k, at), tensor_ne(k, style, c)); };
    const std::vector<int64_t> fn = tensor_ne(Slot::HcHeadFn, style, c);
    typename std::remove_reference_t<decltype(*w.hc_head)> h;
    h.fn = rd.mat(tensor_name(Slot::HcHeadFn, at), fn[1], fn[0]);
    h.base = vec(Slot::HcHeadBase);
    h.scale = vec(Slot::HcHeadScale);
    w.hc_head = std::move(h);
  }
}

// The MTP head (f32 loader only: the GPU model does not run it). GGUF: the extra block
// blk.<n_layer>.nextn.* plus that block's layer tensors; HF: mtp.* plus mtp.layers.0.*.
// Its FFN kind follows the file: MoE iff the router is present.
template <class R, class M>
void map_mtp(const R& rd, const ModelConfig& c, NameStyle style, M& m) {
  const int64_t D = c.n_embd;
  const bool gguf = style == NameStyle::Gguf;
  const NameAt at{style, c.family, "", false, c.n_layer};
  auto N = [&](Slot k) { return tensor_name(k, at); };
  // MTP exists only for Next/3.5, whose HF norms are all zero-centred; GGUF holds 1 + w.
  auto norm = [&](Slot k) {
    std::vector<float> w = rd.vec(N(k), {D});
    if (!gguf) for (float& x : w) x = 1.0f + x;
    return w;
  };
  m.eh_proj = rd.mat(N(Slot::MtpEhProj), D, 2 * D);
  m.enorm = norm(Slot::MtpEnorm);
  m.hnorm = norm(Slot::MtpHnorm);
  m.final_norm = norm(Slot::MtpFinalNorm);
  const std::string P = mtp_layer_prefix(style, c);
  const bool has_router = rd.has(tensor_name(Slot::Router, {style, c.family, P}));
  const bool moe = gguf ? has_router : has_router && c.n_expert > 0;
  m.layer = map_layer(rd, c, {style, P, LayerKind::Attention, moe ? FfnKind::Moe : FfnKind::Dense});
}

}  // namespace memra::detail
