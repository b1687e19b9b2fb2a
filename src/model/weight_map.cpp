// The non-template parts of the name mapping (weight_map.h): the shape check and the row lists
// of the whole-row layout changes.
#include "model/weight_map.h"

#include <cmath>
#include <cstring>
#include <numeric>
#include <sstream>

#include "memra/error.h"

namespace memra::detail {

namespace {
void append(std::vector<int64_t>& v, int64_t first, int64_t n) {
  for (int64_t i = 0; i < n; ++i) v.push_back(first + i);
}
std::vector<int64_t> squeeze(std::vector<int64_t> ne) {
  while (ne.size() > 1 && ne.back() == 1) ne.pop_back();
  return ne;
}
}  // namespace

std::string shape_str(const std::vector<int64_t>& ne) {
  std::ostringstream os;
  os << "{";
  for (size_t i = 0; i < ne.size(); ++i) os << (i ? ", " : "") << ne[i];
  os << "}";
  return os.str();
}

const TensorView& checked_tensor(const WeightSource& src, const std::string& name,
                                 const std::vector<int64_t>& want) {
  const TensorView* t = src.find(name);
  if (!t) fail(src.path(), ": tensor '", name, "' missing (expected shape ", shape_str(want), ")");
  if (squeeze(t->ne) != squeeze(want))
    fail(src.path(), ": tensor '", name, "': shape ", shape_str(t->ne), ", expected ", shape_str(want));
  return *t;
}

std::vector<int64_t> row_range(int64_t first, int64_t n) {
  std::vector<int64_t> r(static_cast<size_t>(n));
  std::iota(r.begin(), r.end(), first);
  return r;
}

void join_kv_b(const std::byte* k_b, const std::byte* v_b, std::byte* kv_b, size_t elem, const ModelConfig& c) {
  const int64_t H = c.n_head, dn = c.mla_d_nope, dv = c.mla_d_v, L = c.mla_kv_rank;
  for (int64_t h = 0; h < H; ++h) {
    std::byte* head = kv_b + static_cast<size_t>(h * (dn + dv) * L) * elem;
    const std::byte* kh = k_b + static_cast<size_t>(h * L * dn) * elem;
    for (int64_t n = 0; n < dn; ++n)
      for (int64_t l = 0; l < L; ++l)
        std::memcpy(head + static_cast<size_t>(n * L + l) * elem, kh + static_cast<size_t>(l * dn + n) * elem, elem);
    std::memcpy(head + static_cast<size_t>(dn * L) * elem, v_b + static_cast<size_t>(h * dv * L) * elem,
                static_cast<size_t>(dv * L) * elem);
  }
}

void split_kv_b(const float* kv_b, float* k_b, float* v_b, const ModelConfig& c) {
  const int64_t H = c.n_head, dn = c.mla_d_nope, dv = c.mla_d_v, L = c.mla_kv_rank;
  for (int64_t h = 0; h < H; ++h) {
    const float* head = kv_b + h * (dn + dv) * L;
    for (int64_t n = 0; n < dn; ++n)
      for (int64_t l = 0; l < L; ++l) k_b[(h * L + l) * dn + n] = head[n * L + l];
    std::memcpy(v_b + h * dv * L, head + dn * L, sizeof(float) * static_cast<size_t>(dv * L));
  }
}

void check_tid2eid(const std::vector<float>& t, const ModelConfig& c, const std::string& name) {
  const int64_t k = c.n_expert_used;
  for (size_t i = 0; i < t.size(); ++i) {
    const float e = t[i];
    if (!(e >= 0) || e >= static_cast<float>(c.n_expert) || e != std::floor(e))
      fail("tensor '", name, "': token ", static_cast<int64_t>(i) / k, " slot ", static_cast<int64_t>(i) % k,
           " names expert ", e, " (experts 0..", c.n_expert - 1, ")");
  }
}

DType joined_kv_b_type(DType k_b, DType v_b) {
  const bool element = k_b == DType::F32 || k_b == DType::F16 || k_b == DType::BF16;
  return element && k_b == v_b ? k_b : DType::F32;
}

RowSplit q_gate_rows(const ModelConfig& c) {
  const int64_t H = c.n_head, hd = c.head_dim;
  RowSplit s;
  for (int64_t h = 0; h < H; ++h) {
    append(s.first, h * 2 * hd, hd);
    append(s.second, h * 2 * hd + hd, hd);
  }
  return s;
}

RowSplit qkvz_rows(const ModelConfig& c) {
  const int64_t nk = c.ssm_n_k_heads, dk = c.ssm_d_k, dv = c.ssm_d_v;
  const int64_t r = c.ssm_n_v_heads / nk, grp = 2 * dk + 2 * r * dv;
  std::vector<int64_t> q, k, v;
  RowSplit s;
  for (int64_t h = 0; h < nk; ++h) {
    append(q, h * grp, dk);
    append(k, h * grp + dk, dk);
    append(v, h * grp + 2 * dk, r * dv);
    append(s.second, h * grp + 2 * dk + r * dv, r * dv);
  }
  s.first = std::move(q);
  s.first.insert(s.first.end(), k.begin(), k.end());
  s.first.insert(s.first.end(), v.begin(), v.end());
  return s;
}

RowSplit ba_rows(const ModelConfig& c) {
  const int64_t nk = c.ssm_n_k_heads, r = c.ssm_n_v_heads / nk;
  RowSplit s;
  for (int64_t h = 0; h < nk; ++h) {
    append(s.first, h * 2 * r, r);
    append(s.second, h * 2 * r + r, r);
  }
  return s;
}

}  // namespace memra::detail

// --- the name table -------------------------------------------------------------------------------

namespace memra::detail {

namespace {
struct SlotNames {
  Slot slot;
  const char* gguf;  // null: GGUF has no such tensor
  const char* hf;    // null: HF has no such tensor
};
// Layer slots: the name after the layer prefix. Model and MTP slots: see tensor_name.
constexpr SlotNames kNames[] = {
    {Slot::Embed, "token_embd.weight", "embed_tokens.weight"},
    {Slot::OutputNorm, "output_norm.weight", "norm.weight"},
    {Slot::Output, "output.weight", "lm_head.weight"},
    {Slot::MtpEhProj, "nextn.eh_proj.weight", "mtp.fc.weight"},
    {Slot::MtpEnorm, "nextn.enorm.weight", "mtp.pre_fc_norm_embedding.weight"},
    {Slot::MtpHnorm, "nextn.hnorm.weight", "mtp.pre_fc_norm_hidden.weight"},
    {Slot::MtpFinalNorm, "nextn.shared_head_norm.weight", "mtp.norm.weight"},
    {Slot::AttnNorm, "attn_norm.weight", "input_layernorm.weight"},
    {Slot::FfnNorm, "post_attention_norm.weight", "post_attention_layernorm.weight"},  // Qwen3 GGUF: ffn_norm
    {Slot::Q, "attn_q.weight", "self_attn.q_proj.weight"},
    {Slot::K, "attn_k.weight", "self_attn.k_proj.weight"},
    {Slot::V, "attn_v.weight", "self_attn.v_proj.weight"},
    {Slot::O, "attn_output.weight", "self_attn.o_proj.weight"},
    {Slot::QNorm, "attn_q_norm.weight", "self_attn.q_norm.weight"},
    {Slot::KNorm, "attn_k_norm.weight", "self_attn.k_norm.weight"},
    {Slot::Qkv, "attn_qkv.weight", "linear_attn.in_proj_qkv.weight"},
    {Slot::Z, "attn_gate.weight", "linear_attn.in_proj_z.weight"},
    {Slot::Qkvz, "ssm_in.weight", "linear_attn.in_proj_qkvz.weight"},  // GGUF: legacy, read only
    {Slot::B, "ssm_beta.weight", "linear_attn.in_proj_b.weight"},
    {Slot::A, "ssm_alpha.weight", "linear_attn.in_proj_a.weight"},
    {Slot::Ba, "ssm_ba.weight", "linear_attn.in_proj_ba.weight"},
    {Slot::Conv, "ssm_conv1d.weight", "linear_attn.conv1d.weight"},
    {Slot::SsmA, "ssm_a", "linear_attn.A_log"},
    {Slot::DtBias, "ssm_dt.bias", "linear_attn.dt_bias"},
    {Slot::SsmNorm, "ssm_norm.weight", "linear_attn.norm.weight"},
    {Slot::SsmOut, "ssm_out.weight", "linear_attn.out_proj.weight"},
    {Slot::Router, "ffn_gate_inp.weight", "mlp.gate.weight"},
    {Slot::GateExps, "ffn_gate_exps.weight", nullptr},
    {Slot::UpExps, "ffn_up_exps.weight", nullptr},
    {Slot::GateUpExps, "ffn_gate_up_exps.weight", "mlp.experts.gate_up_proj"},
    {Slot::DownExps, "ffn_down_exps.weight", "mlp.experts.down_proj"},
    {Slot::ExpGate, nullptr, "gate_proj.weight"},  // HF: mlp.experts.<e>.<name>
    {Slot::ExpUp, nullptr, "up_proj.weight"},
    {Slot::ExpDown, nullptr, "down_proj.weight"},
    {Slot::ShGate, "ffn_gate_shexp.weight", "mlp.shared_expert.gate_proj.weight"},
    {Slot::ShUp, "ffn_up_shexp.weight", "mlp.shared_expert.up_proj.weight"},
    {Slot::ShDown, "ffn_down_shexp.weight", "mlp.shared_expert.down_proj.weight"},
    {Slot::ShGateInp, "ffn_gate_inp_shexp.weight", "mlp.shared_expert_gate.weight"},
    {Slot::Gate, "ffn_gate.weight", "mlp.gate_proj.weight"},
    {Slot::Up, "ffn_up.weight", "mlp.up_proj.weight"},
    {Slot::Down, "ffn_down.weight", "mlp.down_proj.weight"},
    // GLM-5 (HF glm_moe_dsa; GGUF as llama.cpp's glm-dsa, whose converter splits kv_b into
    // attn_k_b and attn_v_b: attn_kv_b is read from older files only)
    {Slot::MlaQA, "attn_q_a.weight", "self_attn.q_a_proj.weight"},
    {Slot::MlaQANorm, "attn_q_a_norm.weight", "self_attn.q_a_layernorm.weight"},
    {Slot::MlaQB, "attn_q_b.weight", "self_attn.q_b_proj.weight"},
    {Slot::MlaKvA, "attn_kv_a_mqa.weight", "self_attn.kv_a_proj_with_mqa.weight"},
    {Slot::MlaKvANorm, "attn_kv_a_norm.weight", "self_attn.kv_a_layernorm.weight"},
    {Slot::MlaKvB, "attn_kv_b.weight", "self_attn.kv_b_proj.weight"},
    {Slot::MlaO, "attn_output.weight", "self_attn.o_proj.weight"},
    {Slot::DsaQB, "indexer.attn_q_b.weight", "self_attn.indexer.wq_b.weight"},
    {Slot::DsaK, "indexer.attn_k.weight", "self_attn.indexer.wk.weight"},
    {Slot::DsaKNorm, "indexer.k_norm.weight", "self_attn.indexer.k_norm.weight"},
    {Slot::DsaKNormBias, "indexer.k_norm.bias", "self_attn.indexer.k_norm.bias"},
    {Slot::DsaWeights, "indexer.proj.weight", "self_attn.indexer.weights_proj.weight"},
    {Slot::RouterBias, "exp_probs_b.bias", "mlp.gate.e_score_correction_bias"},
    {Slot::MlaKB, "attn_k_b.weight", nullptr},
    {Slot::MlaVB, "attn_v_b.weight", nullptr},
    // DeepSeek-V4: HF as transformers 5.17's deepseek_v4 saves it; GGUF as llama.cpp's deepseek4
    // (llama-arch.cpp; the hash table ffn_gate_tid2eid as I32, the model's hc_head as output_hc_*)
    {Slot::Dsv4QANorm, "attn_q_a_norm.weight", "self_attn.q_a_norm.weight"},
    {Slot::Dsv4Kv, "attn_kv.weight", "self_attn.kv_proj.weight"},
    {Slot::Dsv4KvNorm, "attn_kv_a_norm.weight", "self_attn.kv_norm.weight"},
    {Slot::Dsv4OA, "attn_output_a.weight", "self_attn.o_a_proj.weight"},
    {Slot::Dsv4OB, "attn_output_b.weight", "self_attn.o_b_proj.weight"},
    {Slot::Dsv4Sinks, "attn_sinks.weight", "self_attn.sinks"},
    {Slot::HcaKv, "attn_compressor_kv.weight", "self_attn.compressor.kv_proj.weight"},
    {Slot::HcaGate, "attn_compressor_gate.weight", "self_attn.compressor.gate_proj.weight"},
    {Slot::HcaApe, "attn_compressor_ape.weight", "self_attn.compressor.position_bias"},
    {Slot::HcaNorm, "attn_compressor_norm.weight", "self_attn.compressor.kv_norm.weight"},
    {Slot::CsaKv, "attn_compressor_kv.weight", "self_attn.compressor.kv_proj.weight"},
    {Slot::CsaGate, "attn_compressor_gate.weight", "self_attn.compressor.gate_proj.weight"},
    {Slot::CsaApe, "attn_compressor_ape.weight", "self_attn.compressor.position_bias"},
    {Slot::CsaNorm, "attn_compressor_norm.weight", "self_attn.compressor.kv_norm.weight"},
    {Slot::IdxKv, "indexer_compressor_kv.weight", "self_attn.compressor.indexer.kv_proj.weight"},
    {Slot::IdxGate, "indexer_compressor_gate.weight", "self_attn.compressor.indexer.gate_proj.weight"},
    {Slot::IdxApe, "indexer_compressor_ape.weight", "self_attn.compressor.indexer.position_bias"},
    {Slot::IdxNorm, "indexer_compressor_norm.weight", "self_attn.compressor.indexer.kv_norm.weight"},
    {Slot::IdxQB, "indexer.attn_q_b.weight", "self_attn.compressor.indexer.q_b_proj.weight"},
    {Slot::IdxWeights, "indexer.proj.weight", "self_attn.compressor.indexer.scorer.weights_proj.weight"},
    {Slot::HcAttnFn, "hc_attn_fn.weight", "attn_hc.fn"},
    {Slot::HcAttnBase, "hc_attn_base.weight", "attn_hc.base"},
    {Slot::HcAttnScale, "hc_attn_scale.weight", "attn_hc.scale"},
    {Slot::HcFfnFn, "hc_ffn_fn.weight", "ffn_hc.fn"},
    {Slot::HcFfnBase, "hc_ffn_base.weight", "ffn_hc.base"},
    {Slot::HcFfnScale, "hc_ffn_scale.weight", "ffn_hc.scale"},
    {Slot::Tid2eid, "ffn_gate_tid2eid.weight", "mlp.gate.tid2eid"},
    {Slot::HcHeadFn, "output_hc_fn.weight", "hc_head.hc_fn"},
    {Slot::HcHeadBase, "output_hc_base.weight", "hc_head.hc_base"},
    {Slot::HcHeadScale, "output_hc_scale.weight", "hc_head.hc_scale"},
    // GLM-5's hybrid: HF as transformers 5.17's glm5_next saves it; GGUF memra's glm5-next
    // (docs/gguf.md: llama.cpp has no such architecture) with llama.cpp's kimi-linear names for
    // the KDA tensors, except the conv (one tensor over q | k | v, as qwen3next's ssm_conv1d,
    // where kimi-linear splits it in three) and A_log, kept as it is (kimi-linear's ssm_a holds
    // −exp(A_log), which would not read back bit for bit); the pooled indexer's two tensors are
    // memra's names
    {Slot::KdaQ, "attn_q.weight", "self_attn.q_proj.weight"},
    {Slot::KdaK, "attn_k.weight", "self_attn.k_proj.weight"},
    {Slot::KdaV, "attn_v.weight", "self_attn.v_proj.weight"},
    {Slot::KdaConv, "ssm_conv1d.weight", "self_attn.conv1d.weight"},
    {Slot::KdaFA, "ssm_f_a.weight", "self_attn.forget_gate.f_a_proj.weight"},
    {Slot::KdaFB, "ssm_f_b.weight", "self_attn.forget_gate.f_b_proj.weight"},
    {Slot::KdaDtBias, "ssm_dt.bias", "self_attn.forget_gate.dt_bias"},
    {Slot::KdaALog, "ssm_a_log", "self_attn.forget_gate.A_log"},
    {Slot::KdaB, "ssm_beta.weight", "self_attn.b_proj.weight"},
    {Slot::KdaGA, "ssm_g_a.weight", "self_attn.g_a_proj.weight"},
    {Slot::KdaGB, "ssm_g_b.weight", "self_attn.g_b_proj.weight"},
    {Slot::KdaNorm, "ssm_norm.weight", "self_attn.o_norm.weight"},
    {Slot::KdaO, "attn_output.weight", "self_attn.o_proj.weight"},
    {Slot::DsaKpoolGate, "indexer.kpool_gate.weight", "self_attn.indexer.index_kpool_compress_gate"},
    {Slot::DsaKpoolApe, "indexer.kpool_ape.weight", "self_attn.indexer.index_kpool_compress_ape"},
};

const SlotNames& names_of(Slot k) {
  const auto i = static_cast<size_t>(k);
  if (i >= std::size(kNames) || kNames[i].slot != k)
    fail("weight map: slot ", static_cast<int>(k), " not in the name table");
  return kNames[i];
}
}  // namespace

std::string tensor_name(Slot k, const NameAt& at) {
  const bool gguf = at.style == NameStyle::Gguf;
  const SlotNames& n = names_of(k);
  const char* t = gguf ? n.gguf : n.hf;
  if (!t) fail("weight map: slot ", static_cast<int>(k), " has no ", gguf ? "GGUF" : "HF", " tensor");
  switch (k) {
    case Slot::Embed:
    case Slot::OutputNorm:
    case Slot::HcHeadFn:
    case Slot::HcHeadBase:
    case Slot::HcHeadScale:
      return gguf ? t : names::hf_model_prefix(at.lm) + t;
    case Slot::Output: return t;
    case Slot::MtpEhProj:
    case Slot::MtpEnorm:
    case Slot::MtpHnorm:
    case Slot::MtpFinalNorm: return gguf ? names::gguf_blk(at.mtp_block, t) : t;
    case Slot::FfnNorm:
      return at.prefix + (gguf && (at.family == Family::Qwen3 || at.family == Family::GlmDsa ||
                                   at.family == Family::DeepseekV4 || at.family == Family::Glm5Next)
                              ? "ffn_norm.weight"
                              : t);
    case Slot::ShGate:
    case Slot::ShUp:
    case Slot::ShDown:
      // GLM-5 and DeepSeek-V4 name their shared expert module in the plural.
      if (!gguf && (at.family == Family::GlmDsa || at.family == Family::Glm5Next ||
                    at.family == Family::DeepseekV4)) {  // "mlp.shared_expert.<m>" -> "mlp.shared_experts.<m>"
        std::string n(t);
        n.insert(std::string_view("mlp.shared_expert").size(), "s");
        return at.prefix + n;
      }
      return at.prefix + t;
    case Slot::ExpGate:
    case Slot::ExpUp:
    case Slot::ExpDown:
      if (at.expert < 0) fail("weight map: per-expert tensor '", t, "' without an expert index");
      return at.prefix + "mlp.experts." + std::to_string(at.expert) + "." + t;
    default: return at.prefix + t;
  }
}

std::vector<int64_t> tensor_ne(Slot k, NameStyle style, const ModelConfig& c) {
  const bool gguf = style == NameStyle::Gguf;
  const int64_t D = c.n_embd, V = c.n_vocab, H = c.n_head, KV = c.n_head_kv, hd = c.head_dim;
  const int64_t nv = c.ssm_n_v_heads, conv = c.ssm_conv_dim(), vd = c.ssm_value_dim();
  const int64_t E = c.n_expert, I = c.n_ff_exp, S = c.n_ff_shexp, F = c.n_ff;
  switch (k) {
    case Slot::Embed:
    case Slot::Output: return {D, V};
    case Slot::MtpEhProj: return {2 * D, D};
    case Slot::OutputNorm:
    case Slot::MtpEnorm:
    case Slot::MtpHnorm:
    case Slot::MtpFinalNorm:
    case Slot::AttnNorm:
    case Slot::FfnNorm: return {D};
    case Slot::Q: return {D, (c.attn_gated() ? 2 : 1) * H * hd};
    case Slot::K:
    case Slot::V: return {D, KV * hd};
    case Slot::O: return {H * hd, D};
    case Slot::QNorm:
    case Slot::KNorm: return {hd};
    case Slot::Qkv: return {D, conv};
    case Slot::Z: return {D, vd};
    case Slot::Qkvz: return {D, conv + vd};
    case Slot::B:
    case Slot::A: return {D, nv};
    case Slot::Ba: return {D, 2 * nv};
    case Slot::Conv:
      if (gguf) return {c.ssm_conv_kernel, conv};  // squeezed
      return {c.ssm_conv_kernel, 1, conv};           // torch [conv_dim, 1, K]
    case Slot::SsmA:
    case Slot::DtBias: return {nv};
    case Slot::SsmNorm: return {c.ssm_d_v};
    case Slot::SsmOut: return {vd, D};
    case Slot::Router: return {D, E};
    case Slot::GateExps:
    case Slot::UpExps: return {D, I, E};
    case Slot::GateUpExps: return {D, 2 * I, E};  // slab e: rows [gate_e ; up_e]
    case Slot::DownExps: return {I, D, E};
    case Slot::ExpGate:
    case Slot::ExpUp: return {D, I};
    case Slot::ExpDown: return {I, D};
    case Slot::ShGate:
    case Slot::ShUp: return {D, S};
    case Slot::ShDown: return {S, D};
    case Slot::ShGateInp:
      if (gguf) return {D};
      return {D, 1};  // Linear(D, 1)
    case Slot::Gate:
    case Slot::Up: return {D, F};
    case Slot::Down: return {F, D};
    case Slot::MlaQA:
      return {D, c.mla_q_rank};
    case Slot::MlaQANorm:
      return {c.mla_q_rank};
    case Slot::MlaQB:
      return {c.mla_q_rank, H * hd};
    case Slot::MlaKvA:
      return {D, c.mla_kv_rank + c.n_rot};
    case Slot::MlaKvANorm:
      return {c.mla_kv_rank};
    case Slot::MlaKvB:
      return {c.mla_kv_rank, H * (c.mla_d_nope + c.mla_d_v)};
    case Slot::MlaO:
      return {H * c.mla_d_v, D};
    case Slot::DsaQB:
      return {c.mla_q_rank, c.dsa_n_head * c.dsa_head_dim};
    case Slot::DsaK:
      return {D, c.dsa_head_dim};
    case Slot::DsaKNorm:
    case Slot::DsaKNormBias:
      return {c.dsa_head_dim};
    case Slot::DsaWeights:
      return {D, c.dsa_n_head};
    case Slot::RouterBias:
      return {E};
    case Slot::MlaKB:  // torch [H, kv_lora, nope]: head h's k rows of kv_b, transposed
      return {c.mla_d_nope, c.mla_kv_rank, H};
    case Slot::MlaVB:  // torch [H, v, kv_lora]: head h's v rows of kv_b as they are
      return {c.mla_kv_rank, c.mla_d_v, H};
    case Slot::Dsv4QANorm:
      return {c.mla_q_rank};
    case Slot::Dsv4Kv:
      return {D, hd};
    case Slot::Dsv4KvNorm:
    case Slot::HcaNorm:
    case Slot::CsaNorm:
      return {hd};
    case Slot::Dsv4OA:
      return {c.o_groups > 0 ? H * hd / c.o_groups : 0, c.o_groups * c.o_rank};
    case Slot::Dsv4OB:
      return {c.o_groups * c.o_rank, D};
    case Slot::Dsv4Sinks:
      return {H};
    case Slot::HcaKv:
    case Slot::HcaGate:
      return {D, hd};
    case Slot::HcaApe:
      return {hd, c.hca_ratio};  // torch position_bias [ratio, width]
    case Slot::CsaKv:
    case Slot::CsaGate:
      return {D, 2 * hd};
    case Slot::CsaApe:
      return {2 * hd, c.csa_ratio};
    case Slot::IdxKv:
    case Slot::IdxGate:
      return {D, 2 * c.dsa_head_dim};
    case Slot::IdxApe:
      return {2 * c.dsa_head_dim, c.csa_ratio};
    case Slot::IdxNorm:
      return {c.dsa_head_dim};
    case Slot::IdxQB:
      return {c.mla_q_rank, c.dsa_n_head * c.dsa_head_dim};
    case Slot::IdxWeights:
      return {D, c.dsa_n_head};
    case Slot::HcAttnFn:
    case Slot::HcFfnFn:
      return {c.hc_mult * D, (2 + c.hc_mult) * c.hc_mult};
    case Slot::HcAttnBase:
    case Slot::HcFfnBase:
      return {(2 + c.hc_mult) * c.hc_mult};
    case Slot::HcAttnScale:
    case Slot::HcFfnScale:
      return {3};
    case Slot::Tid2eid:
      return {c.n_expert_used, V};  // torch [vocab, top_k]
    case Slot::HcHeadFn:
      return {c.hc_mult * D, c.hc_mult};
    case Slot::HcHeadBase:
      return {c.hc_mult};
    case Slot::HcHeadScale:
      return {1};
    case Slot::KdaQ:
    case Slot::KdaK:
    case Slot::KdaV:
    case Slot::KdaGB:
    case Slot::KdaFB:
      return {k == Slot::KdaGB || k == Slot::KdaFB ? c.ssm_d_v : D, c.ssm_value_dim()};
    case Slot::KdaConv:
      return {c.ssm_conv_kernel, 1, conv};  // torch [3*H*d, 1, K]
    case Slot::KdaFA:
    case Slot::KdaGA:
      return {D, c.ssm_d_v};
    case Slot::KdaDtBias:
      return {c.ssm_value_dim()};
    case Slot::KdaALog:
      return {nv};
    case Slot::KdaB:
      return {D, nv};
    case Slot::KdaNorm:
      return {c.ssm_d_v};
    case Slot::KdaO:
      return {vd, D};
    case Slot::DsaKpoolGate:
      return {D, c.dsa_head_dim};
    case Slot::DsaKpoolApe:
      return {c.dsa_head_dim, c.dsa_kpool};  // torch [P, hd]
  }
  fail("weight map: slot ", static_cast<int>(k), " has no shape");
}

std::string layer_prefix(NameStyle style, bool lm, int64_t i) {
  return style == NameStyle::Gguf ? names::gguf_blk(i, "") : names::hf_layer_prefix(lm, i);
}

std::string mtp_layer_prefix(NameStyle style, const ModelConfig& c) {
  return style == NameStyle::Gguf ? names::gguf_blk(c.n_layer, "") : names::hf_mtp_layer_prefix(0);
}

namespace {
struct Planner {
  const ModelConfig& c;
  NameStyle style;
  NameAt at;
  std::vector<PlannedTensor> out;
  void add(Slot k, int64_t expert = -1) {
    at.expert = expert;
    out.push_back({k, tensor_name(k, at), tensor_ne(k, style, c), expert});
  }
};
}  // namespace

std::vector<PlannedTensor> head_tensors(const ModelConfig& c, NameStyle style, bool lm) {
  Planner p{c, style, {style, c.family, "", lm}, {}};
  p.add(Slot::Embed);
  p.add(Slot::OutputNorm);
  if (!c.tied_embeddings) p.add(Slot::Output);
  if (c.family == Family::DeepseekV4)
    for (Slot k : {Slot::HcHeadFn, Slot::HcHeadBase, Slot::HcHeadScale}) p.add(k);
  return std::move(p.out);
}

std::vector<PlannedTensor> mtp_head_tensors(const ModelConfig& c, NameStyle style) {
  Planner p{c, style, {style, c.family, "", false, c.n_layer}, {}};
  for (Slot k : {Slot::MtpEhProj, Slot::MtpEnorm, Slot::MtpHnorm, Slot::MtpFinalNorm}) p.add(k);
  return std::move(p.out);
}

std::vector<PlannedTensor> layer_tensors(const ModelConfig& c, NameStyle style, const std::string& prefix,
                                         LayerKind kind, FfnKind ffn, ExpertLayout experts, bool dsa_indexer,
                                         int64_t layer) {
  const bool gguf = style == NameStyle::Gguf, next = c.family == Family::Qwen3Next;
  Planner p{c, style, {style, c.family, prefix}, {}};
  p.add(Slot::AttnNorm);
  p.add(Slot::FfnNorm);
  if (kind == LayerKind::Attention) {
    for (Slot k : {Slot::Q, Slot::K, Slot::V, Slot::O, Slot::QNorm, Slot::KNorm}) p.add(k);
  } else if (kind == LayerKind::Mla) {
    for (Slot k : {Slot::MlaQA, Slot::MlaQANorm, Slot::MlaQB, Slot::MlaKvA, Slot::MlaKvANorm}) p.add(k);
    if (gguf) {  // llama.cpp's converter writes kv_b split, k_b transposed (for the absorbed form)
      p.add(Slot::MlaKB);
      p.add(Slot::MlaVB);
    } else {
      p.add(Slot::MlaKvB);
    }
    p.add(Slot::MlaO);
    if (dsa_indexer)
      for (Slot k : {Slot::DsaQB, Slot::DsaK, Slot::DsaKNorm, Slot::DsaKNormBias, Slot::DsaWeights}) p.add(k);
    if (dsa_indexer && c.dsa_kpool > 0)
      for (Slot k : {Slot::DsaKpoolGate, Slot::DsaKpoolApe}) p.add(k);
  } else if (kind == LayerKind::Kda) {
    for (Slot k : {Slot::KdaQ, Slot::KdaK, Slot::KdaV, Slot::KdaConv, Slot::KdaFA, Slot::KdaFB, Slot::KdaDtBias,
                   Slot::KdaALog, Slot::KdaB, Slot::KdaGA, Slot::KdaGB, Slot::KdaNorm, Slot::KdaO})
      p.add(k);
  } else if (kind == LayerKind::Dsv4) {
    for (Slot k : {Slot::MlaQA, Slot::Dsv4QANorm, Slot::MlaQB, Slot::Dsv4Kv, Slot::Dsv4KvNorm, Slot::Dsv4OA,
                   Slot::Dsv4OB, Slot::Dsv4Sinks})
      p.add(k);
    const Dsv4Attn form = c.dsv4_attn.at(static_cast<size_t>(layer));
    if (form == Dsv4Attn::Hca)
      for (Slot k : {Slot::HcaKv, Slot::HcaGate, Slot::HcaApe, Slot::HcaNorm}) p.add(k);
    if (form == Dsv4Attn::Csa)
      for (Slot k : {Slot::CsaKv, Slot::CsaGate, Slot::CsaApe, Slot::CsaNorm, Slot::IdxKv, Slot::IdxGate, Slot::IdxApe,
                     Slot::IdxNorm, Slot::IdxQB, Slot::IdxWeights})
        p.add(k);
  } else {
    if (!gguf && next) {
      p.add(Slot::Qkvz);
      p.add(Slot::Ba);
    } else {
      p.add(Slot::Qkv);
      p.add(Slot::Z);
      if (next) p.add(Slot::Ba);
      else {
        p.add(Slot::B);
        p.add(Slot::A);
      }
    }
    for (Slot k : {Slot::Conv, Slot::SsmA, Slot::DtBias, Slot::SsmNorm, Slot::SsmOut}) p.add(k);
  }
  if (c.is_hyper())
    for (Slot k :
         {Slot::HcAttnFn, Slot::HcAttnBase, Slot::HcAttnScale, Slot::HcFfnFn, Slot::HcFfnBase, Slot::HcFfnScale})
      p.add(k);
  if (ffn == FfnKind::Moe) {
    p.add(Slot::Router);
    const bool hash = c.moe_gating == MoeGating::SqrtSoftplus && layer >= 0 && layer < c.n_hash_layers;
    if (c.moe_gating == MoeGating::SigmoidGrouped || (c.moe_gating == MoeGating::SqrtSoftplus && !hash))
      p.add(Slot::RouterBias);
    if (hash) p.add(Slot::Tid2eid);
    switch (experts) {
      case ExpertLayout::Stacked:
        for (Slot k : {Slot::GateExps, Slot::UpExps, Slot::DownExps}) p.add(k);
        break;
      case ExpertLayout::Fused:
        p.add(Slot::GateUpExps);
        p.add(Slot::DownExps);
        break;
      case ExpertLayout::PerExpert:
        for (int64_t e = 0; e < c.n_expert; ++e)
          for (Slot k : {Slot::ExpGate, Slot::ExpUp, Slot::ExpDown}) p.add(k, e);
        break;
    }
    if (c.n_ff_shexp > 0) {
      for (Slot k : {Slot::ShGate, Slot::ShUp, Slot::ShDown}) p.add(k);
      if (c.shared_expert_gated()) p.add(Slot::ShGateInp);
    }
  } else {
    for (Slot k : {Slot::Gate, Slot::Up, Slot::Down}) p.add(k);
  }
  return std::move(p.out);
}

}  // namespace memra::detail
