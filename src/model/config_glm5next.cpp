// GLM-5's hybrid (model_type glm5_next, GLM-5.3-Flash): config.json as transformers 5.17's
// Glm5NextTextConfig reads it, defaults included, and written with every field explicit.
// The text fields are read at the top level or under text_config (the MetaKeys lookup rule);
// they are written at the top level, which Glm5NextConfig forwards to its text_config, with a
// one-block vision tower so that transformers does not build the released 24-block one for a
// text-only fixture. docs/oracle.md lists what is read and what memra refuses.
#include <algorithm>
#include <string>
#include <vector>

#include "memra/error.h"
#include "memra/memory_source.h"
#include "model/config_families.h"

namespace memra::detail {

namespace {
constexpr const char* kLinear = "linear_attention";
constexpr const char* kSparse = "deepseek_sparse_attention";
}  // namespace

ModelConfig glm5next_from_hf_keys(const MetaKeys& kv, ModelConfig c) {
  auto int_or = [&](const char* k, int64_t d) { return kv.has(k) ? kv.get_int(k) : d; };
  auto float_or = [&](const char* k, double d) { return kv.has(k) ? kv.get_float(k) : d; };
  c.n_vocab = int_or("vocab_size", 154880);
  c.n_embd = int_or("hidden_size", 4096);
  c.n_layer = int_or("num_hidden_layers", 45);
  if (c.n_layer <= 0) fail("num_hidden_layers = ", c.n_layer);
  const size_t L = static_cast<size_t>(c.n_layer);
  c.n_head = int_or("num_attention_heads", 64);
  c.n_head_kv = int_or("num_key_value_heads", c.n_head);
  c.n_ctx_train = int_or("max_position_embeddings", 1048576);
  c.rms_eps = float_or("rms_norm_eps", 1e-5);
  c.tied_embeddings = kv.has("tie_word_embeddings") && kv.get_bool("tie_word_embeddings");
  if (kv.has("hidden_act") && kv.get_string("hidden_act") != "silu")
    fail("hidden_act '", kv.get_string("hidden_act"), "' (only silu)");
  if (kv.has("attention_bias") && kv.get_bool("attention_bias")) fail("attention_bias = true (not supported)");
  if (!kv.has("q_lora_rank") && kv.is_null("q_lora_rank"))
    fail("q_lora_rank = null (the DSA layers need the query latent)");
  c.mla_q_rank = int_or("q_lora_rank", 1536);
  c.mla_kv_rank = int_or("kv_lora_rank", 512);
  c.mla_d_nope = int_or("qk_nope_head_dim", 256);
  c.n_rot = int_or("qk_rope_head_dim", 0);
  if (c.n_rot != 0) fail("qk_rope_head_dim = ", c.n_rot, " (glm5_next's attention has no rotation)");
  c.mla_d_v = int_or("v_head_dim", 256);
  c.head_dim = c.mla_d_nope;  // HF's "head_dim" key is overwritten with the rope width (0)
  c.dsa_n_head = int_or("index_n_heads", 32);
  c.dsa_head_dim = int_or("index_head_dim", 128);
  c.dsa_topk = int_or("index_topk", 2048);
  c.dsa_kpool = int_or("index_kpool", 16);
  if (kv.has("index_kpool_always_select_tail") && !kv.get_bool("index_kpool_always_select_tail"))
    fail(
        "index_kpool_always_select_tail = false (a query would attend to nothing until its first pool closes; "
        "memra reads the released form, true)");

  // KDA: the flat keys, or the linear_attn_config object that overrides them
  c.ssm_d_k = c.ssm_d_v = int_or("linear_head_dim", 128);
  c.ssm_n_k_heads = c.ssm_n_v_heads = int_or("linear_num_heads", 64);
  c.ssm_conv_kernel = int_or("linear_conv_kernel_dim", 4);
  c.kda_gate_bound = kv.is_null("linear_lower_bound") ? 0.0 : float_or("linear_lower_bound", -5.0);
  if (kv.has("linear_attn_config.head_dim")) c.ssm_d_k = c.ssm_d_v = kv.get_int("linear_attn_config.head_dim");
  if (kv.has("linear_attn_config.num_heads"))
    c.ssm_n_k_heads = c.ssm_n_v_heads = kv.get_int("linear_attn_config.num_heads");
  if (kv.has("linear_attn_config.short_conv_kernel_size"))
    c.ssm_conv_kernel = kv.get_int("linear_attn_config.short_conv_kernel_size");
  if (kv.has("linear_attn_config.gate_lower_bound"))
    c.kda_gate_bound = kv.get_float("linear_attn_config.gate_lower_bound");
  const bool safe_gate = !kv.has("linear_attn_config.safe_gate") || kv.get_bool("linear_attn_config.safe_gate");
  if (c.kda_gate_bound == 0 && kv.has("linear_attn_config.head_dim") && safe_gate) c.kda_gate_bound = -5.0;
  if (c.kda_gate_bound > 0) fail("linear_lower_bound = ", c.kda_gate_bound, " (a lower bound on a log decay is < 0)");

  c.hc_mult = int_or("hc_mult", 4);
  c.hc_iters = int_or("hc_sinkhorn_iters", 20);
  c.hc_eps = float_or("hc_eps", 1e-6);
  c.swiglu_limit = float_or("swiglu_limit", 10.0);

  // layer_types: KDA at layers i % 4 != 3 by default; "full_attention" reads as a DSA layer
  c.layer_kind.assign(L, LayerKind::Kda);
  if (kv.has("layer_types")) {
    const auto types = kv.get_string_array("layer_types");
    if (types.size() != L) fail("layer_types has ", types.size(), " entries, num_hidden_layers ", c.n_layer);
    for (size_t i = 0; i < L; ++i) {
      const std::string& t = types[i];
      if (t == kSparse || t == "full_attention")
        c.layer_kind[i] = LayerKind::Mla;
      else if (t != kLinear)
        fail("layer_types[", i, "] = '", t, "' (", kLinear, " or ", kSparse, ")");
    }
  } else {
    for (size_t i = 0; i < L; ++i) c.layer_kind[i] = i % 4 == 3 ? LayerKind::Mla : LayerKind::Kda;
  }
  // indexer_types (per layer, KDA layers included) and the FFN schedule as glm_moe_dsa's; the
  // first three layers dense by default (no first_k_dense_replace key)
  glm_hf_schedules(kv, c, 3, 12288);
  // A KDA layer's entry is never used (it has no indexer): keep only the MLA layers' flags.
  for (size_t i = 0; i < L; ++i)
    if (c.layer_kind[i] == LayerKind::Kda) c.dsa_shared[i] = 0;
  glm_hf_moe(kv, c, int_or("n_routed_experts", 288));
  return c;
}

void write_glm5next_hf_keys(const ModelConfig& c, MemorySource& dst) {
  if (c.kda_gate_bound == 0)
    fail(
        "glm5-next: a KDA gate without a lower bound is written as linear_lower_bound null, which this writer "
        "cannot express");
  write_hf_trunk_keys(c, dst, "Glm5NextForConditionalGeneration", "glm5_next");
  // transformers checks the padding id (default 154820, the release's) against the vocabulary;
  // memra does not read it (padding never reaches a decoder that runs one sequence per cache)
  dst.set("pad_token_id", std::min<int64_t>(154820, c.n_vocab - 1));
  dst.set("attention_bias", false);
  dst.set("q_lora_rank", c.mla_q_rank);
  dst.set("kv_lora_rank", c.mla_kv_rank);
  dst.set("qk_nope_head_dim", c.mla_d_nope);
  dst.set("qk_rope_head_dim", int64_t{0});
  dst.set("v_head_dim", c.mla_d_v);
  dst.set("index_n_heads", c.dsa_n_head);
  dst.set("index_head_dim", c.dsa_head_dim);
  dst.set("index_topk", c.dsa_topk);
  dst.set("index_kpool", c.dsa_kpool);
  dst.set("index_kpool_always_select_tail", true);
  dst.set("linear_head_dim", c.ssm_d_v);
  dst.set("linear_num_heads", c.ssm_n_v_heads);
  dst.set("linear_conv_kernel_dim", c.ssm_conv_kernel);
  dst.set("linear_lower_bound", c.kda_gate_bound);
  dst.set("hc_mult", c.hc_mult);
  dst.set("hc_sinkhorn_iters", c.hc_iters);
  dst.set("hc_eps", c.hc_eps);
  dst.set("swiglu_limit", c.swiglu_limit);
  std::vector<std::string> layers;
  for (LayerKind k : c.layer_kind) layers.emplace_back(k == LayerKind::Kda ? kLinear : kSparse);
  dst.set("layer_types", layers);
  write_glm_hf_schedules_and_moe(c, dst);
  // The vision tower transformers builds beside the text model: one small block (its weights are
  // not in a text fixture and are never run).
  dst.set("vision_config.depth", int64_t{1});
  dst.set("vision_config.hidden_size", int64_t{32});
  dst.set("vision_config.num_heads", int64_t{2});
  dst.set("vision_config.intermediate_size", int64_t{32});
  dst.set("vision_config.out_hidden_size", c.n_embd);
  dst.set("vision_config.projection_intermediate_size", int64_t{32});
}

// --- the GGUF form (memra's glm5-next; docs/gguf.md) --------------------------------------------

namespace {
std::string gguf_key(const char* k) { return std::string("glm5-next.") + k; }
}  // namespace

ModelConfig glm5next_gguf_keys(const MetaKeys& kv, ModelConfig c) {
  auto get = [&](const char* k) { return kv.get_int(gguf_key(k)); };
  auto getf = [&](const char* k) { return kv.get_float(gguf_key(k)); };
  if (c.n_rot != 0) fail(gguf_key("rope.dimension_count"), " = ", c.n_rot, " (glm5_next's attention has no rotation)");
  c.ssm_conv_kernel = get("ssm.conv_kernel");
  c.ssm_d_k = c.ssm_d_v = get("kda.head_dim");
  c.ssm_n_k_heads = c.ssm_n_v_heads = get("kda.head_count");
  c.kda_gate_bound = getf("kda.gate_lower_bound");  // 0: no bound
  if (c.kda_gate_bound > 0)
    fail(gguf_key("kda.gate_lower_bound"), " = ", c.kda_gate_bound, " (a lower bound on a log decay is <= 0)");
  c.dsa_kpool = get("attention.indexer.kpool");
  c.hc_mult = get("hyper_connection.count");
  c.hc_iters = get("hyper_connection.sinkhorn_iterations");
  c.hc_eps = getf("hyper_connection.epsilon");
  c.swiglu_limit = getf("swiglu_limit");
  // A KDA layer's indexer flag is never used (it has no indexer), as from config.json.
  for (size_t i = 0; i < c.layer_kind.size() && i < c.dsa_shared.size(); ++i)
    if (c.layer_kind[i] == LayerKind::Kda) c.dsa_shared[i] = 0;
  return c;
}

void write_glm5next_gguf_keys(const ModelConfig& c, MemorySource& dst) {
  dst.set(gguf_key("ssm.conv_kernel"), c.ssm_conv_kernel);
  dst.set(gguf_key("kda.head_dim"), c.ssm_d_v);
  dst.set(gguf_key("kda.head_count"), c.ssm_n_v_heads);
  dst.set(gguf_key("kda.gate_lower_bound"), c.kda_gate_bound);
  dst.set(gguf_key("attention.indexer.kpool"), c.dsa_kpool);
  dst.set(gguf_key("hyper_connection.count"), c.hc_mult);
  dst.set(gguf_key("hyper_connection.sinkhorn_iterations"), c.hc_iters);
  dst.set(gguf_key("hyper_connection.epsilon"), c.hc_eps);
  dst.set(gguf_key("swiglu_limit"), c.swiglu_limit);
}

}  // namespace memra::detail
