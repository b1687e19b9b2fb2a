// ModelConfig: parsing from llama.cpp GGUF keys and HF config keys, validation, and the reverse
// (writing keys) for fixtures. Facts: shared/reference/llamacpp-gguf-and-models.md section 3,
// shared/reference/qwen-models.md sections 1-2.
#include "memra/config.h"

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <sstream>

#include "memra/error.h"
#include "memra/memory_source.h"
#include "model/config_families.h"

namespace memra {

std::string_view family_arch(Family f) {
  switch (f) {
    case Family::Qwen3: return "qwen3";
    case Family::Qwen3Next: return "qwen3next";
    case Family::Qwen35: return "qwen35";
    case Family::Qwen35Moe: return "qwen35moe";
    case Family::GlmDsa:
      return "glm-dsa";
    case Family::DeepseekV4:
      return "deepseek4";
    case Family::Glm5Next:
      return "glm5-next";
  }
  return "?";
}

Family family_from_arch(std::string_view arch) {
  if (arch == "qwen3") return Family::Qwen3;
  if (arch == "qwen3next") return Family::Qwen3Next;
  if (arch == "qwen35") return Family::Qwen35;
  if (arch == "qwen35moe") return Family::Qwen35Moe;
  if (arch == "glm-dsa") return Family::GlmDsa;
  if (arch == "deepseek4") return Family::DeepseekV4;
  if (arch == "glm5-next") return Family::Glm5Next;
  fail("unsupported architecture '", arch,
       "' (supported: qwen3, qwen3next, qwen35, qwen35moe, glm-dsa, deepseek4, glm5-next)");
}

bool ModelConfig::has_linear() const {
  for (LayerKind k : layer_kind)
    if (k == LayerKind::Linear) return true;
  return false;
}

bool ModelConfig::has_kda() const {
  for (LayerKind k : layer_kind)
    if (k == LayerKind::Kda) return true;
  return false;
}

bool ModelConfig::has_mla() const {
  for (LayerKind k : layer_kind)
    if (k == LayerKind::Mla) return true;
  return false;
}

bool ModelConfig::has_moe() const {
  for (FfnKind k : ffn_kind)
    if (k == FfnKind::Moe) return true;
  return false;
}

void ModelConfig::check_prompt(std::span<const int32_t> tokens, int64_t pos, int64_t max_ctx) const {
  if (tokens.empty()) fail("empty prompt");
  const int64_t T = static_cast<int64_t>(tokens.size());
  if (pos + T > max_ctx) fail("prompt of ", T, " tokens at position ", pos, " exceeds the cache's max_ctx ", max_ctx);
  for (int64_t i = 0; i < T; ++i)
    if (tokens[i] < 0 || tokens[i] >= n_vocab)
      fail("token id ", tokens[i], " at position ", pos + i, " out of range (vocab ", n_vocab, ")");
}

namespace {
const char* gating_name(MoeGating g) {
  return g == MoeGating::Softmax ? "softmax" : g == MoeGating::SigmoidGrouped ? "sigmoid-grouped" : "sqrt-softplus";
}
}  // namespace

void ModelConfig::validate() const {
  auto pos = [&](const char* field, int64_t v) {
    if (v <= 0) fail("model config (", family_arch(family), "): ", field, " = ", v, " must be > 0");
  };
  const std::string ctx = std::string("model config (") + std::string(family_arch(family)) + "): ";
  pos("n_vocab", n_vocab);
  pos("n_embd", n_embd);
  pos("n_layer", n_layer);
  pos("n_head", n_head);
  pos("n_head_kv", n_head_kv);
  pos("head_dim", head_dim);
  if (n_head % n_head_kv != 0)
    fail(ctx, "n_head ", n_head, " is not a multiple of n_head_kv ", n_head_kv);
  if (family == Family::Glm5Next) {
    if (n_rot != 0) fail(ctx, "n_rot ", n_rot, " (GLM-5's hybrid rotates nothing: qk_rope_head_dim 0)");
  } else if (n_rot <= 0 || n_rot > head_dim || n_rot % 2 != 0) {
    fail(ctx, "n_rot ", n_rot, " must be even and in (0, head_dim ", head_dim, "]");
  }
  if (!(rope_theta > 0)) fail(ctx, "rope_theta ", rope_theta, " must be > 0");
  if (!(rms_eps > 0)) fail(ctx, "rms_eps ", rms_eps, " must be > 0");
  if (static_cast<int64_t>(layer_kind.size()) != n_layer || static_cast<int64_t>(ffn_kind.size()) != n_layer)
    fail(ctx, "per-layer lists have ", layer_kind.size(), "/", ffn_kind.size(), " entries, n_layer ", n_layer);
  if (family == Family::Qwen3 && has_linear())
    fail(ctx, "qwen3 has no linear-attention layers");
  if (is_glm()) {
    for (int64_t i = 0; i < n_layer; ++i) {
      const LayerKind k = layer_kind[static_cast<size_t>(i)];
      if (family == Family::GlmDsa && k != LayerKind::Mla)
        fail(ctx, "layer ", i, " is not an MLA layer (every glm-dsa layer is)");
      if (family == Family::Glm5Next && k != LayerKind::Mla && k != LayerKind::Kda)
        fail(ctx, "layer ", i, " is neither MLA nor KDA (glm5-next interleaves the two)");
    }
    pos("mla_q_rank", mla_q_rank);
    pos("mla_kv_rank", mla_kv_rank);
    pos("mla_d_nope", mla_d_nope);
    pos("mla_d_v", mla_d_v);
    pos("dsa_n_head", dsa_n_head);
    pos("dsa_head_dim", dsa_head_dim);
    pos("dsa_topk", dsa_topk);
    if (n_head_kv != n_head)
      fail(ctx, "n_head_kv ", n_head_kv, " differs from n_head ", n_head, " (MLA has no grouping)");
    if (head_dim != mla_d_nope + n_rot)
      fail(ctx, "head_dim ", head_dim, " is not mla_d_nope ", mla_d_nope, " + n_rot ", n_rot);
    if (dsa_head_dim < n_rot) fail(ctx, "dsa_head_dim ", dsa_head_dim, " < n_rot ", n_rot);
    if (static_cast<int64_t>(dsa_shared.size()) != n_layer)
      fail(ctx, "dsa_shared has ", dsa_shared.size(), " entries, n_layer ", n_layer);
    if (dsa_shared[0]) fail(ctx, "layer 0's indexer is 'shared': there is no earlier selection to reuse");
    if (family == Family::Glm5Next) {
      // transformers hands a selection only from a full MLA layer to the layer right after it
      for (int64_t i = 0; i < n_layer; ++i) {
        const size_t k = static_cast<size_t>(i);
        if (layer_kind[k] == LayerKind::Kda && dsa_shared[k])
          fail(ctx, "layer ", i, " is a KDA layer with a 'shared' indexer");
        if (layer_kind[k] == LayerKind::Mla && dsa_shared[k] &&
            (layer_kind[k - 1] != LayerKind::Mla || dsa_shared[k - 1]))
          fail(ctx, "layer ", i, "'s indexer is 'shared' but layer ", i - 1,
               " is not an MLA layer with its own indexer (the only selection glm5_next passes on)");
      }
      pos("dsa_kpool", dsa_kpool);
      if (dsa_topk % dsa_kpool != 0) fail(ctx, "dsa_topk ", dsa_topk, " is not a multiple of dsa_kpool ", dsa_kpool);
      pos("hc_mult", hc_mult);
      pos("hc_iters", hc_iters);
      if (!(hc_eps >= 0) || !(swiglu_limit >= 0))
        fail(ctx, "hc_eps ", hc_eps, ", swiglu_limit ", swiglu_limit, " must be >= 0");
      if (!(kda_gate_bound <= 0)) fail(ctx, "kda_gate_bound ", kda_gate_bound, " must be <= 0 (0: no bound)");
      if (has_kda() && (ssm_n_k_heads != ssm_n_v_heads || ssm_d_k != ssm_d_v))
        fail(ctx, "KDA heads ", ssm_n_k_heads, "x", ssm_d_k, " (keys) vs ", ssm_n_v_heads, "x", ssm_d_v,
             " (values) differ: KDA projects q, k and v to the same heads");
    } else if (dsa_kpool != 0) {
      fail(ctx, "dsa_kpool ", dsa_kpool, " set for glm-dsa (its indexer scores single tokens)");
    }
  } else {
    if (has_mla()) fail(ctx, "family ", family_arch(family), " has no MLA layers");
    if (!dsa_shared.empty()) fail(ctx, "dsa_shared set for a model without MLA layers");
  }
  if (family == Family::DeepseekV4) {
    if (static_cast<int64_t>(dsv4_attn.size()) != n_layer)
      fail(ctx, "dsv4_attn has ", dsv4_attn.size(), " entries, n_layer ", n_layer);
    bool csa = false;
    for (int64_t i = 0; i < n_layer; ++i) {
      if (layer_kind[static_cast<size_t>(i)] != LayerKind::Dsv4)
        fail(ctx, "layer ", i, " is not a DeepSeek-V4 attention layer (every deepseek4 layer is)");
      if (ffn_kind[static_cast<size_t>(i)] != FfnKind::Moe)
        fail(ctx, "layer ", i, " is not MoE (every deepseek4 layer is)");
      csa |= dsv4_attn[static_cast<size_t>(i)] == Dsv4Attn::Csa;
    }
    if (n_head_kv != 1) fail(ctx, "n_head_kv ", n_head_kv, " (DeepSeek-V4 has one key-value head)");
    pos("mla_q_rank", mla_q_rank);
    pos("csa_ratio", csa_ratio);
    pos("hca_ratio", hca_ratio);
    pos("sliding_window", sliding_window);
    pos("o_groups", o_groups);
    pos("o_rank", o_rank);
    pos("hc_mult", hc_mult);
    pos("hc_iters", hc_iters);
    if (n_head % o_groups != 0) fail(ctx, "n_head ", n_head, " is not a multiple of o_groups ", o_groups);
    if (!(compress_rope_theta > 0)) fail(ctx, "compress_rope_theta ", compress_rope_theta, " must be > 0");
    if (!(hc_eps >= 0) || !(swiglu_limit >= 0) || !(yarn_factor >= 0))
      fail(ctx, "hc_eps ", hc_eps, ", swiglu_limit ", swiglu_limit, ", yarn_factor ", yarn_factor, " must be >= 0");
    if (yarn_factor > 0) pos("yarn_orig_ctx", yarn_orig_ctx);
    if (n_hash_layers < 0 || n_hash_layers > n_layer)
      fail(ctx, "n_hash_layers ", n_hash_layers, " outside [0, n_layer ", n_layer, "]");
    if (csa) {
      pos("dsa_n_head", dsa_n_head);
      pos("dsa_head_dim", dsa_head_dim);
      pos("dsa_topk", dsa_topk);
      if (dsa_head_dim < n_rot) fail(ctx, "dsa_head_dim ", dsa_head_dim, " < n_rot ", n_rot);
    }
  } else if (!dsv4_attn.empty()) {
    fail(ctx, "dsv4_attn set for a model without DeepSeek-V4 layers");
  }
  if (has_kda() && family != Family::Glm5Next) fail(ctx, "family ", family_arch(family), " has no KDA layers");
  if (family != Family::Glm5Next && (dsa_kpool != 0 || kda_gate_bound != 0))
    fail(ctx, "dsa_kpool / kda_gate_bound set outside glm5-next");
  if (has_linear() || has_kda()) {
    pos("ssm_n_k_heads", ssm_n_k_heads);
    pos("ssm_n_v_heads", ssm_n_v_heads);
    pos("ssm_d_k", ssm_d_k);
    pos("ssm_d_v", ssm_d_v);
    pos("ssm_conv_kernel", ssm_conv_kernel);
    if (ssm_n_v_heads % ssm_n_k_heads != 0)
      fail(ctx, "linear value heads ", ssm_n_v_heads, " not a multiple of key heads ", ssm_n_k_heads);
  }
  bool any_dense = false;
  for (FfnKind k : ffn_kind) any_dense |= k == FfnKind::Dense;
  if (any_dense) pos("n_ff", n_ff);
  if (has_moe()) {
    if (family == Family::Qwen3 || family == Family::Qwen35)
      fail(ctx, "family ", family_arch(family), " has no MoE layers");
    pos("n_expert", n_expert);
    pos("n_expert_used", n_expert_used);
    pos("n_ff_exp", n_ff_exp);
    if (n_expert_used > n_expert)
      fail(ctx, "n_expert_used ", n_expert_used, " > n_expert ", n_expert);
    if (n_ff_shexp < 0) fail(ctx, "n_ff_shexp ", n_ff_shexp, " < 0");
    const MoeGating want = is_glm()                       ? MoeGating::SigmoidGrouped
                           : family == Family::DeepseekV4 ? MoeGating::SqrtSoftplus
                                                          : MoeGating::Softmax;
    if (moe_gating != want)
      fail(ctx, "MoE gating ", gating_name(moe_gating), " is not the gating of ", family_arch(family));
    pos("n_expert_group", n_expert_group);
    pos("n_expert_group_used", n_expert_group_used);
    if (n_expert % n_expert_group != 0)
      fail(ctx, "n_expert ", n_expert, " is not a multiple of n_expert_group ", n_expert_group);
    if (n_expert_group_used > n_expert_group)
      fail(ctx, "n_expert_group_used ", n_expert_group_used, " > n_expert_group ", n_expert_group);
    if (moe_gating == MoeGating::SigmoidGrouped) {
      if (n_expert / n_expert_group < 2)
        fail(ctx, "expert groups of ", n_expert / n_expert_group, " (a group is scored by its two best experts)");
      if (n_expert_group_used * (n_expert / n_expert_group) < n_expert_used)
        fail(ctx, "n_expert_used ", n_expert_used, " exceeds the ", n_expert_group_used, " selectable groups of ",
             n_expert / n_expert_group);
    } else if (n_expert_group != 1 || n_expert_group_used != 1) {
      fail(ctx, "expert groups with ", gating_name(moe_gating), " gating");
    }
    if (!(expert_weights_scale > 0)) fail(ctx, "expert_weights_scale ", expert_weights_scale, " must be > 0");
  }
  if (n_mtp < 0 || n_mtp > 1) fail(ctx, "n_mtp ", n_mtp, " (only 0 or 1 MTP layer supported)");
  if (n_mtp > 0 && !is_qwen_hybrid()) fail(ctx, family_arch(family), ": no MTP head is loaded for this family");
}

namespace {
template <class E>
std::string show_flags(const std::vector<E>& v) {
  std::string s;
  for (E e : v) s += static_cast<char>('0' + static_cast<int>(e));
  return s;
}
}  // namespace

std::string ModelConfig::summary() const {
  std::ostringstream os;
  os << family_arch(family) << " vocab " << n_vocab << " D " << n_embd << " layers " << n_layer
     << " heads " << n_head << "/" << n_head_kv << "x" << head_dim << " rot " << n_rot;
  if (has_kda())
    os << " kda " << ssm_n_v_heads << "x" << ssm_d_v << " conv " << ssm_conv_kernel << " bound " << kda_gate_bound;
  if (has_linear())
    os << " gdn k " << ssm_n_k_heads << "x" << ssm_d_k << " v " << ssm_n_v_heads << "x" << ssm_d_v
       << " conv " << ssm_conv_kernel;
  if (has_mla())
    os << " mla q " << mla_q_rank << " kv " << mla_kv_rank << " nope " << mla_d_nope << " v " << mla_d_v << " dsa "
       << dsa_n_head << "x" << dsa_head_dim << " top " << dsa_topk << " shared " << show_flags(dsa_shared);
  if (dsa_kpool) os << " kpool " << dsa_kpool;
  if (family == Family::Glm5Next)
    os << " layers " << show_flags(layer_kind) << " hc " << hc_mult << " swiglu " << swiglu_limit;
  if (has_moe()) os << " moe " << n_expert_used << "/" << n_expert << "x" << n_ff_exp << " shexp " << n_ff_shexp;
  if (moe_gating == MoeGating::SigmoidGrouped)
    os << " sigmoid groups " << n_expert_group_used << "/" << n_expert_group << " scale " << expert_weights_scale;
  if (family == Family::DeepseekV4)
    os << " dsv4 " << show_flags(dsv4_attn) << " window " << sliding_window << " rates " << csa_ratio << "/"
       << hca_ratio << " q " << mla_q_rank << " out " << o_groups << "x" << o_rank << " hc " << hc_mult << " hash "
       << n_hash_layers;
  if (n_ff) os << " ff " << n_ff;
  if (tied_embeddings) os << " tied";
  if (n_mtp) os << " mtp " << n_mtp;
  return os.str();
}

namespace {

std::string show(int64_t v) { return std::to_string(v); }
std::string show(bool v) { return v ? "true" : "false"; }
std::string show(double v) {
  std::ostringstream os;
  os << std::setprecision(17) << v;
  return os.str();
}
std::string show(Family f) { return std::string(family_arch(f)); }
std::string show(MoeGating g) { return gating_name(g); }
template <class E>
std::string show(const std::vector<E>& v) {
  std::string s;
  for (E e : v) s += static_cast<char>('0' + static_cast<int>(e));
  return s;
}

}  // namespace

// One list of fields for both == and the explanation, so they cannot drift apart.
std::string config_difference(const ModelConfig& a, const ModelConfig& b) {
  std::string out;
  auto field = [&](const char* name, const auto& x, const auto& y) {
    if (x == y) return;
    out += (out.empty() ? "" : ", ") + std::string(name) + " " + show(x) + " vs " + show(y);
  };
  field("family", a.family, b.family);
  field("n_vocab", a.n_vocab, b.n_vocab);
  field("n_embd", a.n_embd, b.n_embd);
  field("n_layer", a.n_layer, b.n_layer);
  field("n_ctx_train", a.n_ctx_train, b.n_ctx_train);
  field("rms_eps", a.rms_eps, b.rms_eps);
  field("tied_embeddings", a.tied_embeddings, b.tied_embeddings);
  field("n_head", a.n_head, b.n_head);
  field("n_head_kv", a.n_head_kv, b.n_head_kv);
  field("head_dim", a.head_dim, b.head_dim);
  field("n_rot", a.n_rot, b.n_rot);
  field("rope_theta", a.rope_theta, b.rope_theta);
  field("layer_kind", a.layer_kind, b.layer_kind);
  field("ffn_kind", a.ffn_kind, b.ffn_kind);
  field("n_ff", a.n_ff, b.n_ff);
  field("ssm_n_k_heads", a.ssm_n_k_heads, b.ssm_n_k_heads);
  field("ssm_n_v_heads", a.ssm_n_v_heads, b.ssm_n_v_heads);
  field("ssm_d_k", a.ssm_d_k, b.ssm_d_k);
  field("ssm_d_v", a.ssm_d_v, b.ssm_d_v);
  field("ssm_conv_kernel", a.ssm_conv_kernel, b.ssm_conv_kernel);
  field("kda_gate_bound", a.kda_gate_bound, b.kda_gate_bound);
  field("n_expert", a.n_expert, b.n_expert);
  field("n_expert_used", a.n_expert_used, b.n_expert_used);
  field("n_ff_exp", a.n_ff_exp, b.n_ff_exp);
  field("n_ff_shexp", a.n_ff_shexp, b.n_ff_shexp);
  field("norm_topk", a.norm_topk, b.norm_topk);
  field("moe_gating", a.moe_gating, b.moe_gating);
  field("n_expert_group", a.n_expert_group, b.n_expert_group);
  field("n_expert_group_used", a.n_expert_group_used, b.n_expert_group_used);
  field("expert_weights_scale", a.expert_weights_scale, b.expert_weights_scale);
  field("mla_q_rank", a.mla_q_rank, b.mla_q_rank);
  field("mla_kv_rank", a.mla_kv_rank, b.mla_kv_rank);
  field("mla_d_nope", a.mla_d_nope, b.mla_d_nope);
  field("mla_d_v", a.mla_d_v, b.mla_d_v);
  field("dsa_n_head", a.dsa_n_head, b.dsa_n_head);
  field("dsa_head_dim", a.dsa_head_dim, b.dsa_head_dim);
  field("dsa_topk", a.dsa_topk, b.dsa_topk);
  field("dsa_shared", a.dsa_shared, b.dsa_shared);
  field("dsa_kpool", a.dsa_kpool, b.dsa_kpool);
  field("dsv4_attn", a.dsv4_attn, b.dsv4_attn);
  field("csa_ratio", a.csa_ratio, b.csa_ratio);
  field("hca_ratio", a.hca_ratio, b.hca_ratio);
  field("sliding_window", a.sliding_window, b.sliding_window);
  field("compress_rope_theta", a.compress_rope_theta, b.compress_rope_theta);
  field("yarn_factor", a.yarn_factor, b.yarn_factor);
  field("yarn_orig_ctx", a.yarn_orig_ctx, b.yarn_orig_ctx);
  field("yarn_beta_fast", a.yarn_beta_fast, b.yarn_beta_fast);
  field("yarn_beta_slow", a.yarn_beta_slow, b.yarn_beta_slow);
  field("o_groups", a.o_groups, b.o_groups);
  field("o_rank", a.o_rank, b.o_rank);
  field("hc_mult", a.hc_mult, b.hc_mult);
  field("hc_iters", a.hc_iters, b.hc_iters);
  field("hc_eps", a.hc_eps, b.hc_eps);
  field("n_hash_layers", a.n_hash_layers, b.n_hash_layers);
  field("swiglu_limit", a.swiglu_limit, b.swiglu_limit);
  field("n_mtp", a.n_mtp, b.n_mtp);
  return out;
}

bool operator==(const ModelConfig& a, const ModelConfig& b) { return config_difference(a, b).empty(); }

void PrintTo(const ModelConfig& c, std::ostream* os) { *os << c.summary(); }

// --- GGUF keys (llama.cpp) --------------------------------------------------------------------

namespace {

// GLM-5 as llama.cpp's converter writes glm-dsa (DeepSeek-V2's MLA keys plus the indexer's):
// MLA is written as MQA over the latent, so head_count_kv is 1, key_length is kv_lora + rope and
// value_length kv_lora; the per-head widths are key_length_mla (nope + rope) and value_length_mla.
// Routing is DeepSeek-V3's (expert_gating_func 2 = sigmoid, llama.cpp's default for this
// architecture; the group keys default to one group). attention.indexer.types (true = full) is
// optional: without it from_source reads each layer's indexer from its tensors. An appended MTP
// block (nextn_predict_layers) is not read, as with the HF directory.
// GLM-5's hybrid (memra's glm5-next, docs/gguf.md) shares these keys; its head_count_kv is an
// array, as llama.cpp's kimi-linear writes it: 1 on an MLA layer, 0 on a KDA layer; its own keys
// are read by glm5next_gguf_keys.
ModelConfig glm_from_gguf_keys(const MetaKeys& kv, ModelConfig c) {
  const std::string arch(family_arch(c.family));
  auto key = [&](const char* k) { return arch + "." + k; };
  auto get = [&](const char* k) { return kv.get_int(key(k)); };
  auto get_or = [&](const char* k, int64_t d) { return kv.has(key(k)) ? kv.get_int(key(k)) : d; };
  const int64_t n_blocks = get("block_count"), n_mtp = get_or("nextn_predict_layers", 0);
  if (n_mtp < 0 || n_mtp >= n_blocks) fail(key("nextn_predict_layers"), " = ", n_mtp, " with block_count ", n_blocks);
  c.n_layer = n_blocks - n_mtp;
  c.n_embd = get("embedding_length");
  c.n_ctx_train = get_or("context_length", 0);
  c.n_vocab = get_or("vocab_size", 0);
  c.n_head = get("attention.head_count");
  if (c.family == Family::Glm5Next) {
    const std::vector<int64_t> kv_heads = kv.get_int_array(key("attention.head_count_kv"));
    if (static_cast<int64_t>(kv_heads.size()) != c.n_layer)
      fail(key("attention.head_count_kv"), " has ", kv_heads.size(), " entries, ", c.n_layer, " layers");
    for (size_t i = 0; i < kv_heads.size(); ++i) {
      if (kv_heads[i] != 0 && kv_heads[i] != 1)
        fail(key("attention.head_count_kv"), "[", i, "] = ", kv_heads[i], " (1: an MLA layer, 0: a KDA layer)");
      c.layer_kind.push_back(kv_heads[i] ? LayerKind::Mla : LayerKind::Kda);
    }
  } else {
    const int64_t kv_heads = get_or("attention.head_count_kv", 1);
    if (kv_heads != 1 && kv_heads != c.n_head)
      fail(key("attention.head_count_kv"), " = ", kv_heads, " (MLA: 1, the latent, or head_count ", c.n_head, ")");
    c.layer_kind.assign(static_cast<size_t>(c.n_layer), LayerKind::Mla);
  }
  c.n_head_kv = c.n_head;
  c.rms_eps = kv.get_float(key("attention.layer_norm_rms_epsilon"));
  c.rope_theta = kv.has(key("rope.freq_base")) ? kv.get_float(key("rope.freq_base")) : 10000.0;
  if (kv.has(key("rope.scaling.type")) && kv.get_string(key("rope.scaling.type")) != "none")
    fail(key("rope.scaling.type"), " = '", kv.get_string(key("rope.scaling.type")), "' (only none)");
  c.n_rot = get("rope.dimension_count");
  c.mla_q_rank = get("attention.q_lora_rank");
  c.mla_kv_rank = get("attention.kv_lora_rank");
  c.head_dim = get("attention.key_length_mla");
  c.mla_d_nope = c.head_dim - c.n_rot;
  c.mla_d_v = get("attention.value_length_mla");
  if (kv.has(key("attention.key_length")) && get("attention.key_length") != c.mla_kv_rank + c.n_rot)
    fail(key("attention.key_length"), " = ", get("attention.key_length"),
         ", expected kv_lora_rank + rope = ", c.mla_kv_rank + c.n_rot);
  if (kv.has(key("attention.value_length")) && get("attention.value_length") != c.mla_kv_rank)
    fail(key("attention.value_length"), " = ", get("attention.value_length"), ", expected kv_lora_rank ",
         c.mla_kv_rank);
  c.dsa_n_head = get("attention.indexer.head_count");
  c.dsa_head_dim = get("attention.indexer.key_length");
  c.dsa_topk = get("attention.indexer.top_k");
  if (kv.has(key("attention.indexer.types"))) {
    const std::vector<int64_t> full = kv.get_int_array(key("attention.indexer.types"));
    if (static_cast<int64_t>(full.size()) != c.n_layer)
      fail(key("attention.indexer.types"), " has ", full.size(), " entries, ", c.n_layer, " layers");
    for (int64_t f : full) c.dsa_shared.push_back(f ? 0 : 1);
  }  // else empty: from_source reads it from the tensors
  c.n_ff = get_or("feed_forward_length", 0);
  c.n_expert = get("expert_count");
  const int64_t n_dense = get_or("leading_dense_block_count", 0);
  if (n_dense < 0 || n_dense > c.n_layer) fail(key("leading_dense_block_count"), " = ", n_dense);
  c.ffn_kind.assign(static_cast<size_t>(c.n_layer), FfnKind::Moe);
  for (int64_t i = 0; i < n_dense; ++i) c.ffn_kind[static_cast<size_t>(i)] = FfnKind::Dense;
  if (const int64_t gating = get_or("expert_gating_func", 2); gating != 2)
    fail(key("expert_gating_func"), " = ", gating, " (", arch, " routes by sigmoid, 2)");
  c.moe_gating = MoeGating::SigmoidGrouped;
  c.n_expert_used = get("expert_used_count");
  c.n_ff_exp = get("expert_feed_forward_length");
  c.n_ff_shexp = c.n_ff_exp * get_or("expert_shared_count", 0);
  c.norm_topk = kv.has(key("expert_weights_norm")) && kv.get_bool(key("expert_weights_norm"));
  c.expert_weights_scale = kv.has(key("expert_weights_scale")) ? kv.get_float(key("expert_weights_scale")) : 1.0;
  c.n_expert_group = get_or("expert_group_count", 1);
  c.n_expert_group_used = get_or("expert_group_used_count", 1);
  if (c.family == Family::Glm5Next) return detail::glm5next_gguf_keys(kv, c);
  return c;
}

void write_glm_gguf_keys(const ModelConfig& c, MemorySource& dst) {
  const std::string arch(family_arch(c.family));
  auto key = [&](const char* k) { return arch + "." + k; };
  dst.set("general.architecture", arch);
  dst.set("general.alignment", int64_t{32});
  dst.set(key("block_count"), c.n_layer);
  dst.set(key("context_length"), c.n_ctx_train);
  dst.set(key("embedding_length"), c.n_embd);
  dst.set(key("vocab_size"), c.n_vocab);
  if (c.n_ff) dst.set(key("feed_forward_length"), c.n_ff);
  dst.set(key("attention.head_count"), c.n_head);
  if (c.family == Family::Glm5Next) {
    std::vector<int64_t> kv_heads;
    for (LayerKind k : c.layer_kind) kv_heads.push_back(k == LayerKind::Mla ? 1 : 0);
    dst.set(key("attention.head_count_kv"), kv_heads);
  } else {
    dst.set(key("attention.head_count_kv"), int64_t{1});
  }
  dst.set(key("attention.key_length"), c.mla_kv_rank + c.n_rot);
  dst.set(key("attention.value_length"), c.mla_kv_rank);
  dst.set(key("attention.key_length_mla"), c.head_dim);
  dst.set(key("attention.value_length_mla"), c.mla_d_v);
  dst.set(key("attention.q_lora_rank"), c.mla_q_rank);
  dst.set(key("attention.kv_lora_rank"), c.mla_kv_rank);
  dst.set(key("attention.layer_norm_rms_epsilon"), c.rms_eps);
  dst.set(key("rope.dimension_count"), c.n_rot);
  dst.set(key("rope.freq_base"), c.rope_theta);
  dst.set(key("attention.indexer.head_count"), c.dsa_n_head);
  dst.set(key("attention.indexer.key_length"), c.dsa_head_dim);
  dst.set(key("attention.indexer.top_k"), c.dsa_topk);
  std::vector<int64_t> full;
  for (uint8_t s : c.dsa_shared) full.push_back(s ? 0 : 1);
  dst.set(key("attention.indexer.types"), full);  // a bool array in the file (write_fixture_gguf)
  int64_t n_dense = 0;
  while (n_dense < c.n_layer && c.ffn_kind[static_cast<size_t>(n_dense)] == FfnKind::Dense) ++n_dense;
  dst.set(key("leading_dense_block_count"), n_dense);  // a later dense layer shows in its tensors
  dst.set(key("expert_count"), c.n_expert);
  dst.set(key("expert_used_count"), c.n_expert_used);
  dst.set(key("expert_feed_forward_length"), c.n_ff_exp);
  if (c.n_ff_exp <= 0 || c.n_ff_shexp % c.n_ff_exp != 0)
    fail(arch, ": the shared expert width ", c.n_ff_shexp, " is not a multiple of the expert width ", c.n_ff_exp,
         " (GGUF counts shared experts)");
  dst.set(key("expert_shared_count"), c.n_ff_shexp / c.n_ff_exp);
  dst.set(key("expert_weights_norm"), c.norm_topk);
  dst.set(key("expert_weights_scale"), c.expert_weights_scale);
  dst.set(key("expert_gating_func"), int64_t{2});
  dst.set(key("expert_group_count"), c.n_expert_group);
  dst.set(key("expert_group_used_count"), c.n_expert_group_used);
  if (c.family == Family::Glm5Next) detail::write_glm5next_gguf_keys(c, dst);
}

}  // namespace

ModelConfig ModelConfig::from_gguf_keys(const MetaKeys& kv) {
  return with_context(kv.where(), [&] {
    if (!kv.has("general.architecture")) fail("no general.architecture");
    const std::string arch = kv.get_string("general.architecture");
    ModelConfig c;
    c.family = family_from_arch(arch);
    if (c.family == Family::GlmDsa || c.family == Family::Glm5Next) return glm_from_gguf_keys(kv, c);
    if (c.family == Family::DeepseekV4) return detail::dsv4_from_gguf_keys(kv, c);
    auto key = [&](const char* k) { return arch + "." + k; };
    auto get = [&](const char* k) { return kv.get_int(key(k)); };
    auto get_or = [&](const char* k, int64_t d) { return kv.has(key(k)) ? kv.get_int(key(k)) : d; };

    const int64_t n_blocks = get("block_count");
    c.n_mtp = get_or("nextn_predict_layers", 0);
    if (c.n_mtp < 0 || c.n_mtp >= n_blocks)
      fail(key("nextn_predict_layers"), " = ", c.n_mtp, " with block_count ", n_blocks);
    c.n_layer = n_blocks - c.n_mtp;  // MTP blocks are appended after the main layers
    c.n_embd = get("embedding_length");
    c.n_ctx_train = get_or("context_length", 0);
    c.n_vocab = get_or("vocab_size", 0);
    c.n_head = get("attention.head_count");
    c.n_head_kv = get_or("attention.head_count_kv", c.n_head);
    c.head_dim = get_or("attention.key_length", c.n_head > 0 ? c.n_embd / c.n_head : 0);
    if (kv.has(key("attention.value_length")) && get("attention.value_length") != c.head_dim)
      fail(key("attention.value_length"), " = ", get("attention.value_length"),
           " differs from key_length ", c.head_dim, " (unsupported)");
    c.n_rot = get_or("rope.dimension_count", c.head_dim);
    c.rope_theta = kv.has(key("rope.freq_base")) ? kv.get_float(key("rope.freq_base")) : 10000.0;
    c.rms_eps = kv.get_float(key("attention.layer_norm_rms_epsilon"));
    c.n_ff = get_or("feed_forward_length", 0);

    c.layer_kind.assign(c.n_layer, LayerKind::Attention);
    if (c.family != Family::Qwen3) {
      if (kv.has(key("attention.recurrent_layers"))) {
        auto flags = kv.get_int_array(key("attention.recurrent_layers"));
        if (static_cast<int64_t>(flags.size()) != n_blocks)
          fail(key("attention.recurrent_layers"), " has ", flags.size(), " entries, block_count ", n_blocks);
        for (int64_t i = 0; i < c.n_layer; ++i)
          c.layer_kind[i] = flags[i] ? LayerKind::Linear : LayerKind::Attention;
      } else {
        const int64_t interval = get_or("full_attention_interval", 4);
        if (interval <= 0) fail(key("full_attention_interval"), " = ", interval);
        for (int64_t i = 0; i < c.n_layer; ++i)
          c.layer_kind[i] = (i + 1) % interval != 0 ? LayerKind::Linear : LayerKind::Attention;
      }
      c.ssm_conv_kernel = get("ssm.conv_kernel");
      c.ssm_d_k = get("ssm.state_size");
      c.ssm_n_k_heads = get("ssm.group_count");
      c.ssm_n_v_heads = get("ssm.time_step_rank");
      const int64_t inner = get("ssm.inner_size");
      if (c.ssm_n_v_heads <= 0 || inner % c.ssm_n_v_heads != 0)
        fail(key("ssm.inner_size"), " = ", inner, " not a multiple of ssm.time_step_rank ", c.ssm_n_v_heads);
      c.ssm_d_v = inner / c.ssm_n_v_heads;
    }
    const bool moe_family = c.family == Family::Qwen3Next || c.family == Family::Qwen35Moe;
    c.n_expert = moe_family ? get("expert_count") : 0;
    c.ffn_kind.assign(c.n_layer, c.n_expert > 0 ? FfnKind::Moe : FfnKind::Dense);
    if (c.n_expert > 0) {
      c.n_expert_used = get("expert_used_count");
      c.n_ff_exp = get("expert_feed_forward_length");
      c.n_ff_shexp = get_or("expert_shared_feed_forward_length", 0);
      c.norm_topk = c.family == Family::Qwen35Moe ? true
                    : kv.has(key("expert_weights_norm")) ? kv.get_bool(key("expert_weights_norm"))
                                                          : true;
    }
    return c;
  });
}

void write_gguf_keys(const ModelConfig& c, MemorySource& dst) {
  if (dst.style() != MetaStyle::Gguf) fail(dst.path(), ": write_gguf_keys needs a Gguf-style source");
  if (c.family == Family::GlmDsa || c.family == Family::Glm5Next) return write_glm_gguf_keys(c, dst);
  if (c.family == Family::DeepseekV4) return detail::write_dsv4_gguf_keys(c, dst);
  const std::string arch(family_arch(c.family));
  auto key = [&](const char* k) { return arch + "." + k; };
  dst.set("general.architecture", arch);
  dst.set("general.alignment", int64_t{32});
  dst.set(key("block_count"), c.n_layer + c.n_mtp);
  if (c.n_mtp) dst.set(key("nextn_predict_layers"), c.n_mtp);
  dst.set(key("context_length"), c.n_ctx_train);
  dst.set(key("embedding_length"), c.n_embd);
  dst.set(key("vocab_size"), c.n_vocab);
  if (c.n_ff) dst.set(key("feed_forward_length"), c.n_ff);
  dst.set(key("attention.head_count"), c.n_head);
  dst.set(key("attention.head_count_kv"), c.n_head_kv);
  dst.set(key("attention.key_length"), c.head_dim);
  dst.set(key("attention.value_length"), c.head_dim);
  dst.set(key("attention.layer_norm_rms_epsilon"), c.rms_eps);
  dst.set(key("rope.dimension_count"), c.n_rot);
  dst.set(key("rope.freq_base"), c.rope_theta);
  if (c.gguf_tiled_v_heads()) {
    // llama.cpp requires IMROPE sections for qwen35*; for text every section sees the same
    // position, so any split of n_rot/2 frequencies gives the plain NEOX rotation.
    const int64_t half = c.n_rot / 2, s = half / 3;
    dst.set(key("rope.dimension_sections"), std::vector<int64_t>{half - 2 * s, s, s, 0});
  }
  if (c.family != Family::Qwen3) {
    std::vector<int64_t> flags(c.n_layer + c.n_mtp, 0);
    for (int64_t i = 0; i < c.n_layer; ++i) flags[i] = c.layer_kind[i] == LayerKind::Linear;
    dst.set(key("attention.recurrent_layers"), flags);
    dst.set(key("ssm.conv_kernel"), c.ssm_conv_kernel);
    dst.set(key("ssm.state_size"), c.ssm_d_k);
    dst.set(key("ssm.group_count"), c.ssm_n_k_heads);
    dst.set(key("ssm.time_step_rank"), c.ssm_n_v_heads);
    dst.set(key("ssm.inner_size"), c.ssm_value_dim());
  }
  if (c.n_expert > 0) {
    dst.set(key("expert_count"), c.n_expert);
    dst.set(key("expert_used_count"), c.n_expert_used);
    dst.set(key("expert_feed_forward_length"), c.n_ff_exp);
    if (c.n_ff_shexp) dst.set(key("expert_shared_feed_forward_length"), c.n_ff_shexp);
    if (c.family == Family::Qwen3Next) dst.set(key("expert_weights_norm"), c.norm_topk);
  }
}

// --- HF config keys -------------------------------------------------------------------------

namespace {

Family family_from_hf(const MetaKeys& kv) {
  // architectures[0] names the class; model_type is the fallback (config.json of a VLM-style
  // Qwen3.5 checkpoint has the text fields under text_config, which the MetaKeys view resolves).
  if (kv.has("architectures")) {
    auto archs = kv.get_string_array("architectures");
    if (!archs.empty()) {
      const std::string& a = archs[0];
      if (a == "Qwen3ForCausalLM") return Family::Qwen3;
      if (a == "Qwen3NextForCausalLM") return Family::Qwen3Next;
      if (a == "Qwen3_5ForCausalLM" || a == "Qwen3_5ForConditionalGeneration") return Family::Qwen35;
      if (a == "Qwen3_5MoeForCausalLM" || a == "Qwen3_5MoeForConditionalGeneration") return Family::Qwen35Moe;
      if (a == "GlmMoeDsaForCausalLM") return Family::GlmDsa;
      if (a == "DeepseekV4ForCausalLM") return Family::DeepseekV4;
      if (a == "Glm5NextForConditionalGeneration") return Family::Glm5Next;
      fail("unsupported architecture '", a,
           "' (supported: Qwen3ForCausalLM, Qwen3NextForCausalLM, "
           "Qwen3_5ForCausalLM, Qwen3_5MoeForCausalLM, GlmMoeDsaForCausalLM, DeepseekV4ForCausalLM, "
           "Glm5NextForConditionalGeneration)");
    }
  }
  if (!kv.has("model_type")) fail("neither architectures nor model_type present");
  const std::string t = kv.get_string("model_type");
  if (t == "qwen3") return Family::Qwen3;
  if (t == "qwen3_next") return Family::Qwen3Next;
  if (t == "qwen3_5" || t == "qwen3_5_text") return Family::Qwen35;
  if (t == "qwen3_5_moe" || t == "qwen3_5_moe_text") return Family::Qwen35Moe;
  if (t == "glm_moe_dsa") return Family::GlmDsa;
  if (t == "deepseek_v4") return Family::DeepseekV4;
  if (t == "glm5_next" || t == "glm5_next_text") return Family::Glm5Next;
  fail("unsupported model_type '", t, "'");
}

// GLM-5 (glm_moe_dsa) as transformers 5.17's GlmMoeDsaConfig reads it, defaults included: the
// first first_k_dense_replace (3) layers dense unless mlp_layer_types lists them; indexer_types
// from index_topk_pattern ("F"/"S" per layer) or from index_topk_freq / index_skip_topk_offset
// (layer i runs its indexer iff max(i - offset + 1, 0) % freq == 0; default: every layer).
// What memra does not implement fails naming the key: a query without LoRA (q_lora_rank null),
// projection biases, a RoPE other than "default" (YaRN changes the softmax scale too).
ModelConfig glm_from_hf_keys(const MetaKeys& kv, ModelConfig c) {
  auto get_or = [&](const char* k, int64_t d) { return kv.has(k) ? kv.get_int(k) : d; };
  c.n_vocab = kv.get_int("vocab_size");
  c.n_embd = kv.get_int("hidden_size");
  c.n_layer = kv.get_int("num_hidden_layers");
  if (c.n_layer <= 0) fail("num_hidden_layers = ", c.n_layer);
  c.n_head = kv.get_int("num_attention_heads");
  c.n_head_kv = get_or("num_key_value_heads", c.n_head);
  c.n_ctx_train = get_or("max_position_embeddings", 0);
  c.rms_eps = kv.has("rms_norm_eps") ? kv.get_float("rms_norm_eps") : 1e-5;
  c.tied_embeddings = kv.has("tie_word_embeddings") ? kv.get_bool("tie_word_embeddings") : false;
  if (kv.has("hidden_act") && kv.get_string("hidden_act") != "silu")
    fail("hidden_act '", kv.get_string("hidden_act"), "' (only silu)");
  if (kv.has("attention_bias") && kv.get_bool("attention_bias")) fail("attention_bias = true (not supported)");
  if (kv.has("rope_parameters.rope_type") && kv.get_string("rope_parameters.rope_type") != "default")
    fail("rope_parameters.rope_type '", kv.get_string("rope_parameters.rope_type"), "' (only default)");
  c.rope_theta = kv.has("rope_parameters.rope_theta") ? kv.get_float("rope_parameters.rope_theta")
                 : kv.has("rope_theta")               ? kv.get_float("rope_theta")
                                                      : 10000.0;
  c.mla_q_rank = kv.get_int("q_lora_rank");
  c.mla_kv_rank = kv.get_int("kv_lora_rank");
  c.mla_d_nope = kv.get_int("qk_nope_head_dim");
  c.n_rot = kv.get_int("qk_rope_head_dim");
  c.mla_d_v = kv.get_int("v_head_dim");
  c.head_dim = c.mla_d_nope + c.n_rot;  // HF's "head_dim" key is overwritten with the rope width
  c.dsa_n_head = get_or("index_n_heads", 32);
  c.dsa_head_dim = get_or("index_head_dim", 128);
  c.dsa_topk = get_or("index_topk", 2048);
  c.layer_kind.assign(static_cast<size_t>(c.n_layer), LayerKind::Mla);
  detail::glm_hf_schedules(kv, c, get_or("first_k_dense_replace", 3), 12288);
  detail::glm_hf_moe(kv, c, kv.has("n_routed_experts") ? kv.get_int("n_routed_experts") : get_or("num_experts", 256));
  bool any_dense = false;
  for (FfnKind k : c.ffn_kind) any_dense |= k == FfnKind::Dense;
  if (!any_dense) c.n_ff = 0;
  return c;
}

// quantization_config: memra reads the one form the releases it loads use, block-scaled FP8
// (quant_method "fp8", E4M3 codes, 128 x 128 blocks); the tensors say which matrices carry it.
void check_quantization_config(const MetaKeys& kv) {
  const char* experts = "expert_dtype";  // DeepSeek-V4: how the routed experts are stored
  if (kv.has(experts) && kv.get_string(experts) != "fp4" && kv.get_string(experts) != "fp8")
    fail(experts, " '", kv.get_string(experts), "' (fp4 or fp8)");
  const char* method = "quantization_config.quant_method";
  if (!kv.has(method)) return;
  if (kv.get_string(method) != "fp8")
    fail(method, " '", kv.get_string(method), "' (memra reads block-scaled fp8 checkpoints)");
  const char* fmt = "quantization_config.fmt";
  if (kv.has(fmt) && kv.get_string(fmt) != "e4m3") fail(fmt, " '", kv.get_string(fmt), "' (e4m3)");
  const char* block = "quantization_config.weight_block_size";
  if (kv.has(block) && kv.get_int_array(block) != std::vector<int64_t>{128, 128})
    fail(block, " is not [128, 128] (the block scale grid memra reads)");
}

}  // namespace

ModelConfig ModelConfig::from_hf_keys(const MetaKeys& kv) {
  return with_context(kv.where(), [&] {
    ModelConfig c;
    c.family = family_from_hf(kv);
    check_quantization_config(kv);
    if (c.family == Family::GlmDsa) return glm_from_hf_keys(kv, c);
    if (c.family == Family::DeepseekV4) return detail::dsv4_from_hf_keys(kv, c);
    if (c.family == Family::Glm5Next) return detail::glm5next_from_hf_keys(kv, c);
    auto get_or = [&](const char* k, int64_t d) { return kv.has(k) ? kv.get_int(k) : d; };
    c.n_vocab = kv.get_int("vocab_size");
    c.n_embd = kv.get_int("hidden_size");
    c.n_layer = kv.get_int("num_hidden_layers");
    c.n_head = kv.get_int("num_attention_heads");
    c.n_head_kv = get_or("num_key_value_heads", c.n_head);
    c.head_dim = get_or("head_dim", c.n_head > 0 ? c.n_embd / c.n_head : 0);
    c.n_ctx_train = get_or("max_position_embeddings", 0);
    c.rms_eps = kv.has("rms_norm_eps") ? kv.get_float("rms_norm_eps") : 1e-6;
    c.tied_embeddings = kv.has("tie_word_embeddings") ? kv.get_bool("tie_word_embeddings") : false;
    // v5 configs nest rope settings in rope_parameters; older ones have them top-level.
    auto fget = [&](const char* nested, const char* flat, double d) {
      if (kv.has(nested)) return kv.get_float(nested);
      if (kv.has(flat)) return kv.get_float(flat);
      return d;
    };
    c.rope_theta = fget("rope_parameters.rope_theta", "rope_theta", 10000.0);
    const double prf = c.family == Family::Qwen3
                           ? 1.0
                           : fget("rope_parameters.partial_rotary_factor", "partial_rotary_factor", 0.25);
    c.n_rot = static_cast<int64_t>(static_cast<double>(c.head_dim) * prf);  // HF: int(hd * factor)
    c.n_ff = get_or("intermediate_size", 0);
    if (c.n_layer <= 0) fail("num_hidden_layers = ", c.n_layer);

    c.layer_kind.assign(c.n_layer, LayerKind::Attention);
    if (c.family != Family::Qwen3) {
      if (kv.has("layer_types")) {
        auto types = kv.get_string_array("layer_types");
        if (static_cast<int64_t>(types.size()) != c.n_layer)
          fail("layer_types has ", types.size(), " entries, num_hidden_layers ", c.n_layer);
        for (int64_t i = 0; i < c.n_layer; ++i) {
          if (types[i] == "linear_attention") c.layer_kind[i] = LayerKind::Linear;
          else if (types[i] != "full_attention") fail("layer_types[", i, "] = '", types[i], "'");
        }
      } else {
        const int64_t interval = get_or("full_attention_interval", 4);
        if (interval <= 0) fail("full_attention_interval = ", interval);
        for (int64_t i = 0; i < c.n_layer; ++i)
          c.layer_kind[i] = (i + 1) % interval != 0 ? LayerKind::Linear : LayerKind::Attention;
      }
      c.ssm_conv_kernel = get_or("linear_conv_kernel_dim", 4);
      c.ssm_d_k = get_or("linear_key_head_dim", 128);
      c.ssm_d_v = get_or("linear_value_head_dim", 128);
      c.ssm_n_k_heads = get_or("linear_num_key_heads", 16);
      c.ssm_n_v_heads = get_or("linear_num_value_heads", 32);
      c.n_mtp = get_or("mtp_num_hidden_layers", 0);  // from_source drops it when mtp.* is absent
    }
    c.ffn_kind.assign(c.n_layer, FfnKind::Dense);
    if (c.family == Family::Qwen3Next || c.family == Family::Qwen35Moe) {
      c.n_expert = get_or("num_experts", 0);
      if (c.n_expert > 0) {
        c.n_expert_used = kv.get_int("num_experts_per_tok");
        c.n_ff_exp = kv.get_int("moe_intermediate_size");
        c.n_ff_shexp = get_or("shared_expert_intermediate_size", 0);
        c.norm_topk = c.family == Family::Qwen35Moe ? true
                      : kv.has("norm_topk_prob") ? kv.get_bool("norm_topk_prob") : true;
        // HF Qwen3-Next rule: MoE iff i not in mlp_only_layers and (i+1) % decoder_sparse_step == 0.
        const int64_t step = get_or("decoder_sparse_step", 1);
        if (step <= 0) fail("decoder_sparse_step = ", step);
        std::vector<int64_t> only = kv.has("mlp_only_layers") ? kv.get_int_array("mlp_only_layers")
                                                             : std::vector<int64_t>{};
        for (int64_t i = 0; i < c.n_layer; ++i) {
          bool dense = (i + 1) % step != 0;
          for (int64_t j : only) dense |= j == i;
          c.ffn_kind[i] = dense ? FfnKind::Dense : FfnKind::Moe;
        }
        for (int64_t j : only)
          if (j < 0 || j >= c.n_layer) fail("mlp_only_layers entry ", j, " out of range (", c.n_layer, " layers)");
      }
    }
    bool any_dense = false;
    for (FfnKind k : c.ffn_kind) any_dense |= k == FfnKind::Dense;
    if (!any_dense) c.n_ff = 0;
    return c;
  });
}

namespace {
// GLM-5's config.json keys, every field explicit (nothing left to transformers' defaults).
void write_glm_hf_keys(const ModelConfig& c, MemorySource& dst) {
  detail::write_hf_trunk_keys(c, dst, "GlmMoeDsaForCausalLM", "glm_moe_dsa");
  dst.set("attention_bias", false);
  dst.set("rope_parameters.rope_type", std::string("default"));
  dst.set("rope_parameters.rope_theta", c.rope_theta);
  dst.set("q_lora_rank", c.mla_q_rank);
  dst.set("kv_lora_rank", c.mla_kv_rank);
  dst.set("qk_nope_head_dim", c.mla_d_nope);
  dst.set("qk_rope_head_dim", c.n_rot);
  dst.set("v_head_dim", c.mla_d_v);
  dst.set("index_n_heads", c.dsa_n_head);
  dst.set("index_head_dim", c.dsa_head_dim);
  dst.set("index_topk", c.dsa_topk);
  detail::write_glm_hf_schedules_and_moe(c, dst);
}
}  // namespace

void write_hf_keys(const ModelConfig& c, MemorySource& dst) {
  if (dst.style() != MetaStyle::Hf) fail(dst.path(), ": write_hf_keys needs an Hf-style source");
  if (c.family == Family::GlmDsa) return write_glm_hf_keys(c, dst);
  if (c.family == Family::DeepseekV4) return detail::write_dsv4_hf_keys(c, dst);
  if (c.family == Family::Glm5Next) return detail::write_glm5next_hf_keys(c, dst);
  static const char* kArch[] = {"Qwen3ForCausalLM", "Qwen3NextForCausalLM", "Qwen3_5ForCausalLM",
                                "Qwen3_5MoeForCausalLM"};
  static const char* kType[] = {"qwen3", "qwen3_next", "qwen3_5_text", "qwen3_5_moe_text"};
  const int f = static_cast<int>(c.family);
  detail::write_hf_trunk_keys(c, dst, kArch[f], kType[f]);
  dst.set("head_dim", c.head_dim);
  dst.set("rope_parameters.rope_type", std::string("default"));
  dst.set("rope_parameters.rope_theta", c.rope_theta);
  if (c.family != Family::Qwen3)
    dst.set("rope_parameters.partial_rotary_factor",
            static_cast<double>(c.n_rot) / static_cast<double>(c.head_dim));
  if (c.n_ff) dst.set("intermediate_size", c.n_ff);
  if (c.family != Family::Qwen3) {
    std::vector<std::string> types;
    for (LayerKind k : c.layer_kind) types.push_back(k == LayerKind::Linear ? "linear_attention" : "full_attention");
    dst.set("layer_types", types);
    dst.set("linear_conv_kernel_dim", c.ssm_conv_kernel);
    dst.set("linear_key_head_dim", c.ssm_d_k);
    dst.set("linear_value_head_dim", c.ssm_d_v);
    dst.set("linear_num_key_heads", c.ssm_n_k_heads);
    dst.set("linear_num_value_heads", c.ssm_n_v_heads);
    dst.set("mtp_num_hidden_layers", c.n_mtp);
  }
  if (c.n_expert > 0) {
    dst.set("num_experts", c.n_expert);
    dst.set("num_experts_per_tok", c.n_expert_used);
    dst.set("moe_intermediate_size", c.n_ff_exp);
    dst.set("shared_expert_intermediate_size", c.n_ff_shexp);
    dst.set("norm_topk_prob", c.norm_topk);
    dst.set("decoder_sparse_step", int64_t{1});
    std::vector<int64_t> only;
    for (int64_t i = 0; i < c.n_layer; ++i)
      if (c.ffn_kind[i] == FfnKind::Dense) only.push_back(i);
    dst.set("mlp_only_layers", only);
  }
}

// --- MetaKeys over MemorySource -----------------------------------------------------------

namespace {

class MemoryKeys final : public MetaKeys {
 public:
  explicit MemoryKeys(const MemorySource& s) : s_(s) {}
  std::string where() const override {
    return (s_.style() == MetaStyle::Gguf ? "gguf metadata of " : "config of ") + s_.path();
  }
  bool has(std::string_view key) const override { return s_.meta(key) != nullptr; }
  int64_t get_int(std::string_view key) const override {
    const MetaValue& v = at(key);
    if (auto* i = std::get_if<int64_t>(&v)) return *i;
    if (auto* b = std::get_if<bool>(&v)) return *b ? 1 : 0;
    if (auto* d = std::get_if<double>(&v); d && std::floor(*d) == *d) return static_cast<int64_t>(*d);
    type_error(key, "an integer");
  }
  double get_float(std::string_view key) const override {
    const MetaValue& v = at(key);
    if (auto* d = std::get_if<double>(&v)) return *d;
    if (auto* i = std::get_if<int64_t>(&v)) return static_cast<double>(*i);
    type_error(key, "a number");
  }
  bool get_bool(std::string_view key) const override {
    const MetaValue& v = at(key);
    if (auto* b = std::get_if<bool>(&v)) return *b;
    if (auto* i = std::get_if<int64_t>(&v); i && (*i == 0 || *i == 1)) return *i == 1;
    type_error(key, "a bool");
  }
  std::string get_string(std::string_view key) const override {
    const MetaValue& v = at(key);
    if (auto* s = std::get_if<std::string>(&v)) return *s;
    type_error(key, "a string");
  }
  std::vector<int64_t> get_int_array(std::string_view key) const override {
    const MetaValue& v = at(key);
    if (auto* a = std::get_if<std::vector<int64_t>>(&v)) return *a;
    type_error(key, "an integer array");
  }
  std::vector<double> get_float_array(std::string_view key) const override {
    const MetaValue& v = at(key);
    if (auto* a = std::get_if<std::vector<double>>(&v)) return *a;
    if (auto* a = std::get_if<std::vector<int64_t>>(&v)) return {a->begin(), a->end()};
    type_error(key, "a number array");
  }
  std::vector<std::string> get_string_array(std::string_view key) const override {
    const MetaValue& v = at(key);
    if (auto* a = std::get_if<std::vector<std::string>>(&v)) return *a;
    if (auto* s = std::get_if<std::string>(&v)) return {*s};
    type_error(key, "a string array");
  }

 private:
  const MetaValue& at(std::string_view key) const {
    const MetaValue* v = s_.meta(key);
    if (!v) fail("key '", key, "' missing");
    return *v;
  }
  [[noreturn]] void type_error(std::string_view key, const char* want) const {
    fail("key '", key, "' is not ", want);
  }
  const MemorySource& s_;
};

}  // namespace

std::unique_ptr<MetaKeys> memory_meta_keys(const MemorySource& src) {
  return std::make_unique<MemoryKeys>(src);
}

namespace detail {

void write_hf_trunk_keys(const ModelConfig& c, MemorySource& dst, const char* architecture, const char* model_type) {
  dst.set("architectures", std::vector<std::string>{architecture});
  dst.set("model_type", std::string(model_type));
  dst.set("vocab_size", c.n_vocab);
  dst.set("hidden_size", c.n_embd);
  dst.set("num_hidden_layers", c.n_layer);
  dst.set("num_attention_heads", c.n_head);
  dst.set("num_key_value_heads", c.n_head_kv);
  dst.set("max_position_embeddings", c.n_ctx_train);
  dst.set("rms_norm_eps", c.rms_eps);
  dst.set("tie_word_embeddings", c.tied_embeddings);
  dst.set("hidden_act", std::string("silu"));
}

void glm_hf_schedules(const MetaKeys& kv, ModelConfig& c, int64_t first_dense, int64_t default_n_ff) {
  const size_t L = static_cast<size_t>(c.n_layer);
  c.dsa_shared.assign(L, 0);
  if (kv.has("indexer_types") || kv.has("index_topk_pattern")) {
    const char* key = kv.has("indexer_types") ? "indexer_types" : "index_topk_pattern";
    std::vector<std::string> types = kv.get_string_array(key);
    if (types.size() == 1 && types[0].size() == L && L > 1) {  // "FSSF..."
      const std::string p = types[0];
      types.clear();
      for (char ch : p) types.emplace_back(1, ch);
    }
    if (types.size() != L) fail(key, " has ", types.size(), " entries, num_hidden_layers ", c.n_layer);
    for (size_t i = 0; i < L; ++i) {
      const std::string& t = types[i];
      if (t == "shared" || t == "S")
        c.dsa_shared[i] = 1;
      else if (t != "full" && t != "F")
        fail(key, "[", i, "] = '", t, "' (full or shared)");
    }
  } else {
    const int64_t freq = kv.has("index_topk_freq") ? std::max<int64_t>(kv.get_int("index_topk_freq"), 1) : 1;
    const int64_t offset = kv.has("index_skip_topk_offset") ? kv.get_int("index_skip_topk_offset") : 2;
    for (size_t i = 0; i < L; ++i)
      c.dsa_shared[i] = std::max<int64_t>(static_cast<int64_t>(i) - offset + 1, 0) % freq != 0;
  }
  c.n_ff = kv.has("intermediate_size") ? kv.get_int("intermediate_size") : default_n_ff;
  c.ffn_kind.assign(L, FfnKind::Moe);
  if (kv.has("mlp_layer_types")) {
    const auto types = kv.get_string_array("mlp_layer_types");
    if (types.size() != L) fail("mlp_layer_types has ", types.size(), " entries, num_hidden_layers ", c.n_layer);
    for (size_t i = 0; i < L; ++i) {
      if (types[i] == "dense")
        c.ffn_kind[i] = FfnKind::Dense;
      else if (types[i] != "sparse")
        fail("mlp_layer_types[", i, "] = '", types[i], "' (dense or sparse)");
    }
  } else {
    for (size_t i = 0; i < std::min(static_cast<size_t>(std::max<int64_t>(first_dense, 0)), L); ++i)
      c.ffn_kind[i] = FfnKind::Dense;
  }
}

void glm_hf_moe(const MetaKeys& kv, ModelConfig& c, int64_t n_expert) {
  auto get_or = [&](const char* k, int64_t d) { return kv.has(k) ? kv.get_int(k) : d; };
  if (c.has_moe()) {
    c.moe_gating = MoeGating::SigmoidGrouped;
    c.n_expert = n_expert;
    c.n_expert_used = get_or("num_experts_per_tok", 8);
    c.n_ff_exp = get_or("moe_intermediate_size", 2048);
    c.n_ff_shexp = c.n_ff_exp * get_or("n_shared_experts", 1);
    c.norm_topk = !kv.has("norm_topk_prob") || kv.get_bool("norm_topk_prob");
    c.n_expert_group = get_or("n_group", 1);
    c.n_expert_group_used = get_or("topk_group", 1);
    c.expert_weights_scale = kv.has("routed_scaling_factor") ? kv.get_float("routed_scaling_factor") : 2.5;
  }
  bool any_dense = false;
  for (FfnKind k : c.ffn_kind) any_dense |= k == FfnKind::Dense;
  if (!any_dense) c.n_ff = 0;
}

void write_glm_hf_schedules_and_moe(const ModelConfig& c, MemorySource& dst) {
  std::vector<std::string> idx, mlp;
  for (uint8_t s : c.dsa_shared) idx.emplace_back(s ? "shared" : "full");
  for (FfnKind k : c.ffn_kind) mlp.emplace_back(k == FfnKind::Moe ? "sparse" : "dense");
  dst.set("indexer_types", idx);
  dst.set("mlp_layer_types", mlp);
  dst.set("intermediate_size", c.n_ff);
  if (c.n_expert == 0) return;
  if (c.n_ff_exp <= 0 || c.n_ff_shexp % c.n_ff_exp != 0)
    fail(family_arch(c.family), ": the shared expert width ", c.n_ff_shexp,
         " is not a multiple of moe_intermediate_size ", c.n_ff_exp, " (HF sizes it as n_shared_experts experts)");
  dst.set("n_routed_experts", c.n_expert);
  dst.set("num_experts_per_tok", c.n_expert_used);
  dst.set("moe_intermediate_size", c.n_ff_exp);
  dst.set("n_shared_experts", c.n_ff_shexp / c.n_ff_exp);
  dst.set("norm_topk_prob", c.norm_topk);
  dst.set("n_group", c.n_expert_group);
  dst.set("topk_group", c.n_expert_group_used);
  dst.set("routed_scaling_factor", c.expert_weights_scale);
}

}  // namespace detail

}  // namespace memra
