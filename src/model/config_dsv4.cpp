// DeepSeek-V4's metadata. config.json (model_type deepseek_v4): read as transformers 5.17's
// DeepseekV4Config reads it, defaults and the release's legacy keys included, and written with
// every field explicit. GGUF (arch deepseek4): the keys llama.cpp's loader reads, as its
// converter writes them. docs/deepseek-v4.md lists the keys and what memra refuses.
#include "model/config_families.h"

#include <algorithm>
#include <string>
#include <vector>

#include "memra/error.h"
#include "memra/memory_source.h"

namespace memra::detail {

namespace {
constexpr const char* kCsa = "compressed_sparse_attention";
constexpr const char* kHca = "heavily_compressed_attention";
constexpr const char* kSliding = "sliding_attention";

// The compressed layers' rope settings: the nested rope_parameters.compress object (what
// transformers writes), or the flat rope_parameters / legacy rope_scaling keys (what a release's
// config.json carries, and what DeepseekV4Config folds into "compress"). The first of the three
// that holds any rope key is the one read.
std::string compress_rope_key(const MetaKeys& kv, const char* field) {
  for (const char* base : {"rope_parameters.compress.", "rope_parameters.", "rope_scaling."})
    for (const char* probe : {"rope_type", "type", "factor", "rope_theta", "original_max_position_embeddings"})
      if (kv.has(std::string(base) + probe)) return std::string(base) + field;
  return std::string("rope_parameters.") + field;
}
}  // namespace

ModelConfig dsv4_from_hf_keys(const MetaKeys& kv, ModelConfig c) {
  auto int_or = [&](const char* k, int64_t d) { return kv.has(k) ? kv.get_int(k) : d; };
  auto float_or = [&](const std::string& k, double d) { return kv.has(k) ? kv.get_float(k) : d; };
  c.n_vocab = kv.get_int("vocab_size");
  c.n_embd = kv.get_int("hidden_size");
  c.n_layer = kv.get_int("num_hidden_layers");
  if (c.n_layer <= 0) fail("num_hidden_layers = ", c.n_layer);
  const size_t L = static_cast<size_t>(c.n_layer);
  c.n_head = kv.get_int("num_attention_heads");
  c.n_head_kv = int_or("num_key_value_heads", 1);
  c.head_dim = int_or("head_dim", 512);
  c.n_ctx_train = int_or("max_position_embeddings", 1048576);
  c.rms_eps = float_or("rms_norm_eps", 1e-6);
  c.tied_embeddings = kv.has("tie_word_embeddings") && kv.get_bool("tie_word_embeddings");
  if (kv.has("hidden_act") && kv.get_string("hidden_act") != "silu")
    fail("hidden_act '", kv.get_string("hidden_act"), "' (only silu)");
  for (const char* k : {"attention_bias", "mlp_bias"})
    if (kv.has(k) && kv.get_bool(k)) fail(k, " = true (DeepSeek-V4 has no projection biases)");
  // Rotated dims: partial_rotary_factor, else the legacy qk_rope_head_dim, else 64 / 512.
  const double prf = kv.has("partial_rotary_factor") ? kv.get_float("partial_rotary_factor")
                     : kv.has("qk_rope_head_dim")
                         ? static_cast<double>(kv.get_int("qk_rope_head_dim")) / static_cast<double>(c.head_dim)
                         : 64.0 / 512.0;
  c.n_rot = static_cast<int64_t>(static_cast<double>(c.head_dim) * prf);  // transformers: int(hd * factor)
  c.mla_q_rank = int_or("q_lora_rank", 1024);
  c.sliding_window = int_or("sliding_window", 128);
  c.o_groups = int_or("o_groups", 8);
  c.o_rank = int_or("o_lora_rank", 1024);
  c.dsa_n_head = int_or("index_n_heads", 64);
  c.dsa_head_dim = int_or("index_head_dim", 128);
  c.dsa_topk = int_or("index_topk", 512);
  c.hc_mult = int_or("hc_mult", 4);
  c.hc_iters = int_or("hc_sinkhorn_iters", 20);
  c.hc_eps = float_or("hc_eps", 1e-6);
  c.swiglu_limit = float_or("swiglu_limit", 10.0);

  // Rope: sliding layers plain with rope_theta ("main" must stay default); the compressed layers
  // with compress_rope_theta and, where configured, YaRN without its attention factor.
  if (kv.has("rope_parameters.main.rope_type") && kv.get_string("rope_parameters.main.rope_type") != "default")
    fail("rope_parameters.main.rope_type '", kv.get_string("rope_parameters.main.rope_type"),
         "' (the sliding layers' rope is plain)");
  c.rope_theta = kv.has("rope_parameters.main.rope_theta") ? kv.get_float("rope_parameters.main.rope_theta")
                 : kv.has("rope_theta")                    ? kv.get_float("rope_theta")
                                                           : float_or("rope_parameters.rope_theta", 10000.0);
  c.compress_rope_theta = kv.has("rope_parameters.compress.rope_theta")
                              ? kv.get_float("rope_parameters.compress.rope_theta")
                              : float_or("compress_rope_theta", 160000.0);
  const std::string type_key = compress_rope_key(kv, "rope_type"), legacy_type_key = compress_rope_key(kv, "type");
  const std::string rope_type = kv.has(type_key)          ? kv.get_string(type_key)
                                : kv.has(legacy_type_key) ? kv.get_string(legacy_type_key)
                                                          : "default";
  if (rope_type == "yarn") {
    c.yarn_factor = kv.get_float(compress_rope_key(kv, "factor"));
    c.yarn_orig_ctx = kv.get_int(compress_rope_key(kv, "original_max_position_embeddings"));
    // transformers reads `or 32` / `or 1`: a 0 or null means the default too.
    const double bf = float_or(compress_rope_key(kv, "beta_fast"), 0),
                 bs = float_or(compress_rope_key(kv, "beta_slow"), 0);
    c.yarn_beta_fast = bf != 0 ? bf : 32;
    c.yarn_beta_slow = bs != 0 ? bs : 1;
    const std::string af = compress_rope_key(kv, "attention_factor");
    if (kv.has(af) && kv.get_float(af) != 1.0)
      fail(af, " = ", kv.get_float(af), " (DeepSeek-V4 does not scale its rotations: 1.0 or absent)");
  } else if (rope_type != "default") {
    fail(type_key, " '", rope_type, "' (default or yarn)");
  }

  // Compress rates: compress_rates, or the legacy compress_rate_csa / compress_rate_hca.
  c.csa_ratio = kv.has(std::string("compress_rates.") + kCsa) ? kv.get_int(std::string("compress_rates.") + kCsa)
                                                              : int_or("compress_rate_csa", 4);
  c.hca_ratio = kv.has(std::string("compress_rates.") + kHca) ? kv.get_int(std::string("compress_rates.") + kHca)
                                                              : int_or("compress_rate_hca", 128);
  // Attention schedule: layer_types, else the legacy compress_ratios (0 / 4 / 128 per layer),
  // else DeepseekV4Config's default (two HCA layers, then HCA and CSA alternating).
  c.layer_kind.assign(L, LayerKind::Dsv4);
  c.dsv4_attn.assign(L, Dsv4Attn::Sliding);
  if (kv.has("layer_types")) {
    const std::vector<std::string> t = kv.get_string_array("layer_types");
    if (t.size() != L) fail("layer_types has ", t.size(), " entries, num_hidden_layers ", c.n_layer);
    for (size_t i = 0; i < L; ++i) {
      if (t[i] == kCsa)
        c.dsv4_attn[i] = Dsv4Attn::Csa;
      else if (t[i] == kHca)
        c.dsv4_attn[i] = Dsv4Attn::Hca;
      else if (t[i] != kSliding)
        fail("layer_types[", i, "] = '", t[i], "' (", kSliding, ", ", kCsa, " or ", kHca, ")");
    }
  } else if (kv.has("compress_ratios")) {  // a release lists its MTP layers' too: the first L count
    const std::vector<int64_t> r = kv.get_int_array("compress_ratios");
    if (r.size() < L) fail("compress_ratios has ", r.size(), " entries, num_hidden_layers ", c.n_layer);
    for (size_t i = 0; i < L; ++i) {
      if (r[i] == 4)
        c.dsv4_attn[i] = Dsv4Attn::Csa;
      else if (r[i] == 128)
        c.dsv4_attn[i] = Dsv4Attn::Hca;
      else if (r[i] != 0)
        fail("compress_ratios[", i, "] = ", r[i], " (0, 4 or 128)");
    }
  } else {
    for (size_t i = 0; i < L; ++i) c.dsv4_attn[i] = i < 2 || (i - 2) % 2 == 0 ? Dsv4Attn::Hca : Dsv4Attn::Csa;
  }

  // MoE in every layer: the first ones routed by the hash table (mlp_layer_types, else the legacy
  // num_hash_layers, else 3). memra runs hash layers as a prefix of the stack.
  c.ffn_kind.assign(L, FfnKind::Moe);
  c.n_ff = 0;
  if (kv.has("mlp_layer_types")) {
    const std::vector<std::string> t = kv.get_string_array("mlp_layer_types");
    if (t.size() != L) fail("mlp_layer_types has ", t.size(), " entries, num_hidden_layers ", c.n_layer);
    c.n_hash_layers = 0;
    for (size_t i = 0; i < L; ++i) {
      if (t[i] == "hash_moe") {
        if (static_cast<int64_t>(i) != c.n_hash_layers)
          fail("mlp_layer_types[", i, "] = 'hash_moe' after a 'moe' layer (memra runs hash layers first)");
        ++c.n_hash_layers;
      } else if (t[i] != "moe") {
        fail("mlp_layer_types[", i, "] = '", t[i], "' (hash_moe or moe)");
      }
    }
  } else {
    c.n_hash_layers = std::min<int64_t>(int_or("num_hash_layers", 3), c.n_layer);
  }
  if (kv.has("scoring_func") && kv.get_string("scoring_func") != "sqrtsoftplus")
    fail("scoring_func '", kv.get_string("scoring_func"), "' (memra runs sqrtsoftplus)");
  // transformers renormalises the chosen weights whatever norm_topk_prob says, and builds one
  // shared expert of moe_intermediate_size whatever n_shared_experts says: other values would
  // mean a model transformers does not run.
  if (kv.has("norm_topk_prob") && !kv.get_bool("norm_topk_prob"))
    fail("norm_topk_prob = false (DeepSeek-V4 renormalises the chosen experts' weights)");
  if (kv.has("n_shared_experts") && kv.get_int("n_shared_experts") != 1)
    fail("n_shared_experts = ", kv.get_int("n_shared_experts"), " (DeepSeek-V4 has one shared expert)");
  c.moe_gating = MoeGating::SqrtSoftplus;
  c.n_expert = int_or("n_routed_experts", 256);
  c.n_expert_used = int_or("num_experts_per_tok", 6);
  c.n_ff_exp = int_or("moe_intermediate_size", 2048);
  c.n_ff_shexp = c.n_ff_exp;
  c.norm_topk = true;
  c.expert_weights_scale = float_or("routed_scaling_factor", 1.5);
  // num_nextn_predict_layers: the MTP layers' weights (mtp.*) are not loaded; plain decoding
  // does not run them.
  return c;
}

void write_dsv4_hf_keys(const ModelConfig& c, MemorySource& dst) {
  write_hf_trunk_keys(c, dst, "DeepseekV4ForCausalLM", "deepseek_v4");
  dst.set("head_dim", c.head_dim);
  dst.set("partial_rotary_factor", static_cast<double>(c.n_rot) / static_cast<double>(c.head_dim));
  dst.set("q_lora_rank", c.mla_q_rank);
  dst.set("attention_bias", false);
  dst.set("mlp_bias", false);
  dst.set("rope_theta", c.rope_theta);
  dst.set("compress_rope_theta", c.compress_rope_theta);
  if (c.yarn_factor > 0) {
    dst.set("rope_parameters.rope_type", std::string("yarn"));
    dst.set("rope_parameters.factor", c.yarn_factor);
    dst.set("rope_parameters.original_max_position_embeddings", c.yarn_orig_ctx);
    dst.set("rope_parameters.beta_fast", c.yarn_beta_fast);
    dst.set("rope_parameters.beta_slow", c.yarn_beta_slow);
    dst.set("rope_parameters.attention_factor", 1.0);
  }
  std::vector<std::string> attn, mlp;
  for (int64_t i = 0; i < c.n_layer; ++i) {
    const Dsv4Attn a = c.dsv4_attn[static_cast<size_t>(i)];
    attn.emplace_back(a == Dsv4Attn::Csa ? kCsa : a == Dsv4Attn::Hca ? kHca : kSliding);
    mlp.emplace_back(i < c.n_hash_layers ? "hash_moe" : "moe");
  }
  dst.set("layer_types", attn);
  dst.set("mlp_layer_types", mlp);
  dst.set(std::string("compress_rates.") + kCsa, c.csa_ratio);
  dst.set(std::string("compress_rates.") + kHca, c.hca_ratio);
  dst.set("sliding_window", c.sliding_window);
  dst.set("o_groups", c.o_groups);
  dst.set("o_lora_rank", c.o_rank);
  dst.set("index_n_heads", c.dsa_n_head);
  dst.set("index_head_dim", c.dsa_head_dim);
  dst.set("index_topk", c.dsa_topk);
  dst.set("hc_mult", c.hc_mult);
  dst.set("hc_sinkhorn_iters", c.hc_iters);
  dst.set("hc_eps", c.hc_eps);
  dst.set("swiglu_limit", c.swiglu_limit);
  if (c.n_ff_shexp != c.n_ff_exp)
    fail("deepseek_v4: a shared expert of ", c.n_ff_shexp, " differs from moe_intermediate_size ", c.n_ff_exp,
         " (config.json sizes it as one expert)");
  dst.set("n_routed_experts", c.n_expert);
  dst.set("num_experts_per_tok", c.n_expert_used);
  dst.set("moe_intermediate_size", c.n_ff_exp);
  dst.set("n_shared_experts", int64_t{1});
  dst.set("scoring_func", std::string("sqrtsoftplus"));
  dst.set("norm_topk_prob", true);
  dst.set("routed_scaling_factor", c.expert_weights_scale);
  dst.set("num_nextn_predict_layers", int64_t{0});
}

// --- GGUF (llama.cpp deepseek4) -----------------------------------------------------------------

namespace {
constexpr const char* kArch = "deepseek4";
std::string gguf_key(const char* k) { return std::string(kArch) + "." + k; }
}  // namespace

ModelConfig dsv4_from_gguf_keys(const MetaKeys& kv, ModelConfig c) {
  auto get = [&](const char* k) { return kv.get_int(gguf_key(k)); };
  auto get_or = [&](const char* k, int64_t d) { return kv.has(gguf_key(k)) ? kv.get_int(gguf_key(k)) : d; };
  auto getf = [&](const char* k) { return kv.get_float(gguf_key(k)); };
  auto require_eq = [&](const char* k, int64_t got, int64_t want, const char* why) {
    if (got != want) fail(gguf_key(k), " = ", got, " (", why, ")");
  };
  const int64_t n_blocks = get("block_count"), n_mtp = get_or("nextn_predict_layers", 0);
  if (n_mtp < 0 || n_mtp >= n_blocks)
    fail(gguf_key("nextn_predict_layers"), " = ", n_mtp, " with block_count ", n_blocks);
  c.n_layer = n_blocks - n_mtp;  // an MTP block (llama.cpp's --mtp file) is not loaded: plain decoding skips it
  const size_t L = static_cast<size_t>(c.n_layer);
  c.n_embd = get("embedding_length");
  c.n_ctx_train = get_or("context_length", 0);
  c.n_vocab = get_or("vocab_size", 0);  // llama.cpp's converter does not write it: token_embd says
  c.n_head = get("attention.head_count");
  c.n_head_kv = get_or("attention.head_count_kv", 1);
  require_eq("attention.head_count_kv", c.n_head_kv, 1, "DeepSeek-V4 has one key-value head");
  c.head_dim = get("attention.key_length");
  if (kv.has(gguf_key("attention.value_length")))
    require_eq("attention.value_length", get("attention.value_length"), c.head_dim, "K = V: key_length");
  c.n_rot = get("rope.dimension_count");
  c.rms_eps = getf("attention.layer_norm_rms_epsilon");
  c.rope_theta = kv.has(gguf_key("rope.freq_base")) ? getf("rope.freq_base") : 10000.0;
  c.compress_rope_theta = getf("attention.compress_rope_freq_base");
  const std::string scaling =
      kv.has(gguf_key("rope.scaling.type")) ? kv.get_string(gguf_key("rope.scaling.type")) : std::string("none");
  if (scaling == "yarn") {  // on the compressed layers only, as llama.cpp applies it
    c.yarn_factor = getf("rope.scaling.factor");
    c.yarn_orig_ctx = get("rope.scaling.original_context_length");
    c.yarn_beta_fast = kv.has(gguf_key("rope.scaling.yarn_beta_fast")) ? getf("rope.scaling.yarn_beta_fast") : 32.0;
    c.yarn_beta_slow = kv.has(gguf_key("rope.scaling.yarn_beta_slow")) ? getf("rope.scaling.yarn_beta_slow") : 1.0;
  } else if (scaling != "none") {
    fail(gguf_key("rope.scaling.type"), " = '", scaling, "' (none or yarn)");
  }
  c.mla_q_rank = get("attention.q_lora_rank");
  c.sliding_window = get("attention.sliding_window");
  c.o_groups = get("attention.output_group_count");
  c.o_rank = get("attention.output_lora_rank");
  c.dsa_n_head = get("attention.indexer.head_count");
  c.dsa_head_dim = get("attention.indexer.key_length");
  c.dsa_topk = get("attention.indexer.top_k");
  c.hc_mult = get("hyper_connection.count");
  c.hc_iters = get("hyper_connection.sinkhorn_iterations");
  c.hc_eps = getf("hyper_connection.epsilon");

  // Per-layer compress ratios (llama.cpp lists the MTP layer's too): 0 sliding, 4 compressed-
  // sparse (the layers with an indexer: llama.cpp tells CSA by this ratio), any other heavily
  // compressed. llama.cpp itself accepts only 128 there; memra reads any one HCA ratio.
  const std::vector<int64_t> ratios = kv.get_int_array(gguf_key("attention.compress_ratios"));
  if (ratios.size() < L)
    fail(gguf_key("attention.compress_ratios"), " has ", ratios.size(), " entries for ", L, " layers");
  c.layer_kind.assign(L, LayerKind::Dsv4);
  c.dsv4_attn.assign(L, Dsv4Attn::Sliding);
  c.csa_ratio = 4;
  c.hca_ratio = 0;
  for (size_t i = 0; i < L; ++i) {
    const int64_t r = ratios[i];
    if (r == 0) continue;
    if (r < 0) fail(gguf_key("attention.compress_ratios"), "[", i, "] = ", r);
    if (r == c.csa_ratio) {
      c.dsv4_attn[i] = Dsv4Attn::Csa;
      continue;
    }
    if (c.hca_ratio != 0 && r != c.hca_ratio)
      fail(gguf_key("attention.compress_ratios"), "[", i, "] = ", r, " after HCA layers of ", c.hca_ratio,
           " (one heavily compressed ratio per model)");
    c.hca_ratio = r;
    c.dsv4_attn[i] = Dsv4Attn::Hca;
  }
  if (c.hca_ratio == 0) c.hca_ratio = 128;

  c.ffn_kind.assign(L, FfnKind::Moe);
  c.n_ff = 0;
  c.n_hash_layers = get("hash_layer_count");
  if (c.n_hash_layers < 0 || c.n_hash_layers > c.n_layer)
    fail(gguf_key("hash_layer_count"), " = ", c.n_hash_layers, " with ", c.n_layer, " layers");
  const int64_t gating = get("expert_gating_func");
  if (gating != 4) fail(gguf_key("expert_gating_func"), " = ", gating, " (DeepSeek-V4 scores by sqrt(softplus): 4)");
  c.moe_gating = MoeGating::SqrtSoftplus;
  require_eq("expert_shared_count", get("expert_shared_count"), 1, "DeepSeek-V4 has one shared expert");
  if (!kv.get_bool(gguf_key("expert_weights_norm")))
    fail(gguf_key("expert_weights_norm"), " = false (DeepSeek-V4 renormalises the chosen experts' weights)");
  c.norm_topk = true;
  c.n_expert = get("expert_count");
  c.n_expert_used = get("expert_used_count");
  c.n_ff_exp = get("expert_feed_forward_length");
  c.n_ff_shexp = c.n_ff_exp;
  c.expert_weights_scale = getf("expert_weights_scale");
  // The SwiGLU clamp: a per-layer array (or one number) for the routed experts, the same or
  // absent for the shared one. memra clamps every expert of every layer alike.
  auto limits = [&](const char* k) {
    const std::string key = gguf_key(k);
    std::vector<double> v = kv.get_float_array(key);
    if (v.size() < L) fail(key, " has ", v.size(), " entries for ", L, " layers");
    for (size_t i = 1; i < L; ++i)
      if (v[i] != v[0]) fail(key, "[", i, "] = ", v[i], " differs from [0] = ", v[0], " (one limit per model)");
    return v[0];
  };
  auto limit_of = [&](const char* k) {  // llama.cpp reads one number or a per-layer array
    try {
      return kv.get_float(gguf_key(k));
    } catch (const Error&) { return limits(k); }
  };
  c.swiglu_limit = limit_of("swiglu_clamp_exp");
  if (kv.has(gguf_key("swiglu_clamp_shexp")) && limit_of("swiglu_clamp_shexp") != c.swiglu_limit)
    fail(gguf_key("swiglu_clamp_shexp"), " = ", limit_of("swiglu_clamp_shexp"), " differs from swiglu_clamp_exp ",
         c.swiglu_limit, " (memra clamps the shared expert like the routed ones)");
  return c;
}

void write_dsv4_gguf_keys(const ModelConfig& c, MemorySource& dst) {
  auto set = [&](const char* k, MetaValue v) { dst.set(gguf_key(k), std::move(v)); };
  if (c.csa_ratio != 4 && std::count(c.dsv4_attn.begin(), c.dsv4_attn.end(), Dsv4Attn::Csa) > 0)
    fail("deepseek4 GGUF: a compressed-sparse ratio of ", c.csa_ratio,
         " (llama.cpp's compress_ratios tell CSA layers by the ratio 4)");
  if (c.hca_ratio == 4 && std::count(c.dsv4_attn.begin(), c.dsv4_attn.end(), Dsv4Attn::Hca) > 0)
    fail("deepseek4 GGUF: a heavily compressed ratio of 4 would read back as compressed-sparse");
  if (c.n_ff_shexp != c.n_ff_exp)
    fail("deepseek4 GGUF: a shared expert of ", c.n_ff_shexp, " differs from the expert width ", c.n_ff_exp);
  dst.set("general.architecture", std::string(kArch));
  dst.set("general.alignment", int64_t{32});
  set("block_count", c.n_layer);
  set("context_length", c.n_ctx_train);
  set("embedding_length", c.n_embd);
  set("embedding_length_out", c.hc_mult * c.n_embd);
  set("vocab_size", c.n_vocab);
  set("attention.head_count", c.n_head);
  set("attention.head_count_kv", c.n_head_kv);
  set("attention.key_length", c.head_dim);
  set("attention.value_length", c.head_dim);
  set("attention.layer_norm_rms_epsilon", c.rms_eps);
  set("rope.dimension_count", c.n_rot);
  set("rope.freq_base", c.rope_theta);
  if (c.yarn_factor > 0) {
    set("rope.scaling.type", std::string("yarn"));
    set("rope.scaling.factor", c.yarn_factor);
    set("rope.scaling.original_context_length", c.yarn_orig_ctx);
    set("rope.scaling.yarn_beta_fast", c.yarn_beta_fast);
    set("rope.scaling.yarn_beta_slow", c.yarn_beta_slow);
  }
  set("attention.q_lora_rank", c.mla_q_rank);
  set("attention.sliding_window", c.sliding_window);
  set("attention.output_group_count", c.o_groups);
  set("attention.output_lora_rank", c.o_rank);
  set("attention.compress_rope_freq_base", c.compress_rope_theta);
  std::vector<int64_t> ratios;
  for (const Dsv4Attn a : c.dsv4_attn)
    ratios.push_back(a == Dsv4Attn::Csa ? c.csa_ratio : a == Dsv4Attn::Hca ? c.hca_ratio : 0);
  set("attention.compress_ratios", ratios);
  set("attention.indexer.head_count", c.dsa_n_head);
  set("attention.indexer.key_length", c.dsa_head_dim);
  set("attention.indexer.top_k", c.dsa_topk);
  set("hyper_connection.count", c.hc_mult);
  set("hyper_connection.sinkhorn_iterations", c.hc_iters);
  set("hyper_connection.epsilon", c.hc_eps);
  set("hash_layer_count", c.n_hash_layers);
  set("expert_count", c.n_expert);
  set("expert_used_count", c.n_expert_used);
  set("expert_feed_forward_length", c.n_ff_exp);
  set("expert_shared_count", int64_t{1});
  set("expert_weights_scale", c.expert_weights_scale);
  set("expert_weights_norm", true);
  set("expert_gating_func", int64_t{4});
  const std::vector<double> limit(static_cast<size_t>(c.n_layer), c.swiglu_limit);
  set("swiglu_clamp_exp", limit);
  set("swiglu_clamp_shexp", limit);
}

}  // namespace memra::detail
