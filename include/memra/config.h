// memra/config.h — ModelConfig: the architecture of one Qwen3 / Qwen3-Next / Qwen3.5 / GLM-5 model.
//
// One struct for the five families, filled from llama.cpp GGUF metadata (arch strings qwen3,
// qwen3next, qwen35, qwen35moe) or from an HF config.json (Qwen3ForCausalLM,
// Qwen3NextForCausalLM, Qwen3_5ForCausalLM, Qwen3_5MoeForCausalLM and their
// ForConditionalGeneration / model_type spellings; GlmMoeDsaForCausalLM, model_type
// glm_moe_dsa, as transformers 5.17 defines it; GGUF arch glm-dsa as llama.cpp's converter writes
// it: docs/oracle.md; Glm5NextForConditionalGeneration, model_type glm5_next / glm5_next_text,
// GLM-5's hybrid, from config.json only: llama.cpp has no such architecture). HF semantics rule,
// so shapes that
// llama.cpp itself rejects are representable: a linear-attention key head dim different from
// the value head dim (GGUF: ssm.state_size vs ssm.inner_size / ssm.time_step_rank), and dense
// layers among MoE layers (HF mlp_only_layers / decoder_sparse_step; in GGUF a layer whose
// blk.N.ffn_gate_inp is absent, which from_source detects).
//
// Metadata is read through MetaKeys, a minimal key-value view, so the same parser serves a GGUF
// file, an HF config.json and an in-memory MemorySource. Unknown architectures and missing or
// inconsistent fields are errors that name the key and the value.
//
// provides: Family, LayerKind, FfnKind, ModelConfig, MetaKeys, family_arch
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <ostream>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace memra {

class GgufFile;
class HfConfig;
class WeightSource;
class MemorySource;

enum class Family { Qwen3, Qwen3Next, Qwen35, Qwen35Moe, GlmDsa, DeepseekV4, Glm5Next };
// full (softmax) attention | Gated DeltaNet | multi-head latent attention with the DSA indexer |
// DeepSeek-V4 attention (one key-value head over a sliding window plus compressed rows: Dsv4Attn) |
// Kimi delta attention (GLM-5's hybrid: the delta rule with a decay per key channel)
enum class LayerKind : uint8_t { Attention, Linear, Mla, Dsv4, Kda };
// A DeepSeek-V4 layer's keys beyond its sliding window: none; the indexer's choice among the rows
// of an overlapping 4:1 compressor (compressed sparse attention); every row of a 128:1 compressor
// (heavily compressed attention). docs/deepseek-v4.md.
enum class Dsv4Attn : uint8_t { Sliding, Csa, Hca };
enum class FfnKind : uint8_t { Dense, Moe };
// How the router picks and weights experts:
//   Softmax         p = softmax(logits); top-k of p; weights p (renormalised when norm_topk)
//                   (Qwen3-Next / Qwen3.5-MoE);
//   SigmoidGrouped  s = sigmoid(logits); choice score s + router_bias; the n_expert_group_used
//                   groups with the largest sum of their two best choice scores; top-k of the
//                   choice scores inside them; weights s (renormalised when norm_topk) times
//                   expert_weights_scale (DeepSeek-V3 / GLM-5 "noaux_tc");
//   SqrtSoftplus    s = sqrt(softplus(logits)); top-k of s + router_bias, or the token's row of
//                   the hash table in the first n_hash_layers; weights s / (sum + 1e-20) times
//                   expert_weights_scale (DeepSeek-V4).
enum class MoeGating : uint8_t { Softmax, SigmoidGrouped, SqrtSoftplus };

// llama.cpp's arch string of a family: "qwen3", "qwen3next", "qwen35", "qwen35moe", "glm-dsa",
// "deepseek4"; GLM-5's hybrid has no llama.cpp architecture and is named "glm5-next" in memra.
std::string_view family_arch(Family f);
// Parses an arch string; fails naming it when it is not one of the families.
Family family_from_arch(std::string_view arch);

// Read-only key lookup. Keys are the source's own (GGUF "qwen3next.block_count", HF
// "hidden_size"; nested HF objects as dotted paths "rope_parameters.rope_theta"). Getters fail
// naming the key when it is absent or of another type.
class MetaKeys {
 public:
  virtual ~MetaKeys() = default;
  virtual std::string where() const = 0;  // "gguf x.gguf", "config.json of dir", ...
  virtual bool has(std::string_view key) const = 0;
  virtual int64_t get_int(std::string_view key) const = 0;
  virtual double get_float(std::string_view key) const = 0;  // integers accepted
  virtual bool get_bool(std::string_view key) const = 0;
  virtual std::string get_string(std::string_view key) const = 0;
  virtual std::vector<int64_t> get_int_array(std::string_view key) const = 0;  // bools as 0/1
  virtual std::vector<double> get_float_array(std::string_view key) const = 0;  // integers accepted
  virtual std::vector<std::string> get_string_array(std::string_view key) const = 0;
  // Present with the value null (config.json's "unset" for an optional whose default is not
  // null); has() counts null as absent. Sources without nulls (GGUF, memory) never have one.
  virtual bool is_null(std::string_view) const { return false; }
};

struct ModelConfig {
  Family family = Family::Qwen3;

  int64_t n_vocab = 0;
  int64_t n_embd = 0;       // hidden size D
  int64_t n_layer = 0;      // main decoder layers (MTP layers not counted)
  int64_t n_ctx_train = 0;  // trained context length (metadata only; the cache sets max_ctx)
  double rms_eps = 1e-6;
  bool tied_embeddings = false;  // lm_head is token_embd

  // Full attention (every family). Qwen3-Next / 3.5 attention is output-gated: q_proj also
  // produces a per-head gate, o = attn * sigmoid(gate).
  int64_t n_head = 0;
  int64_t n_head_kv = 0;
  int64_t head_dim = 0;
  int64_t n_rot = 0;          // rotated dims per head (NEOX half-split), <= head_dim, even
  double rope_theta = 10000;  // rope base

  std::vector<LayerKind> layer_kind;  // [n_layer]
  std::vector<FfnKind> ffn_kind;      // [n_layer]
  int64_t n_ff = 0;                   // dense SwiGLU width (0 when the model has no dense layer)

  // Gated DeltaNet (hybrid families). Kimi delta attention (LayerKind::Kda) uses the same fields
  // with ssm_n_k_heads = ssm_n_v_heads = its heads and ssm_d_k = ssm_d_v = its head width, so its
  // conv ([q | k | v] channels: ssm_conv_dim) and state are sized like GDN's.
  int64_t ssm_n_k_heads = 0;    // linear_num_key_heads   (GGUF ssm.group_count)
  int64_t ssm_n_v_heads = 0;    // linear_num_value_heads (GGUF ssm.time_step_rank)
  int64_t ssm_d_k = 0;          // linear_key_head_dim    (GGUF ssm.state_size)
  int64_t ssm_d_v = 0;          // linear_value_head_dim  (GGUF ssm.inner_size / time_step_rank)
  int64_t ssm_conv_kernel = 0;  // linear_conv_kernel_dim (GGUF ssm.conv_kernel)
  // KDA's forget gate g = kda_gate_bound * sigmoid(exp(A_log) f) (transformers' "safe gate",
  // linear_lower_bound, -5 as released); 0: no bound, g = -exp(A_log) * softplus(f).
  double kda_gate_bound = 0;

  // MoE
  int64_t n_expert = 0;
  int64_t n_expert_used = 0;  // top-k
  int64_t n_ff_exp = 0;       // moe_intermediate_size
  int64_t n_ff_shexp = 0;     // shared_expert_intermediate_size (0: no shared expert)
  bool norm_topk = true;      // renormalise the top-k weights (Qwen3.5-MoE: always)

  MoeGating moe_gating = MoeGating::Softmax;
  int64_t n_expert_group = 1;         // n_group: experts split into this many equal groups
  int64_t n_expert_group_used = 1;    // topk_group: groups the top-k may come from
  double expert_weights_scale = 1.0;  // routed_scaling_factor (GLM-5: 2.5)

  // Multi-head latent attention (LayerKind::Mla; DeepSeek-V3 MLA as GLM-5 uses it). Per head the
  // query/key is [d_nope | n_rot] (head_dim = mla_d_nope + n_rot), the value mla_d_v wide; the
  // rotated part is one key shared by all heads. n_head_kv == n_head (no grouping).
  int64_t mla_q_rank = 0;   // q_lora_rank
  int64_t mla_kv_rank = 0;  // kv_lora_rank
  int64_t mla_d_nope = 0;   // qk_nope_head_dim
  int64_t mla_d_v = 0;      // v_head_dim
  // The q / kv latent norms and the indexer's key LayerNorm use this eps, not rms_eps
  // (glm_moe_dsa fixes it in the modules).
  static constexpr double kMlaNormEps = 1e-6;
  // DSA lightning indexer: each query attends to the dsa_topk earlier tokens the indexer scores
  // highest. A "shared" layer (dsa_shared[i] = 1) has no indexer of its own and reuses the
  // selection of the layer before it (GLM-5.2 indexer_types / index_topk_pattern).
  int64_t dsa_n_head = 0;           // index_n_heads
  int64_t dsa_head_dim = 0;         // index_head_dim (its first n_rot dims are rotated)
  int64_t dsa_topk = 0;             // index_topk
  std::vector<uint8_t> dsa_shared;  // [n_layer] for MLA models, else empty
  // GLM-5's hybrid scores pools of dsa_kpool consecutive tokens instead of single tokens (each
  // pool's key a gated average of its tokens' keys), keeps dsa_topk / dsa_kpool pools and always
  // adds the query's open tail pool token by token. 0: per-token scoring (glm_moe_dsa).
  int64_t dsa_kpool = 0;
  // Positions a query's DSA selection holds at most: dsa_topk, plus a pooled indexer's open tail.
  int64_t dsa_sel_width() const { return dsa_kpool > 0 ? dsa_topk + dsa_kpool - 1 : dsa_topk; }

  // DeepSeek-V4 (LayerKind::Dsv4, docs/deepseek-v4.md): head_dim is the one key-value head's
  // width (K = V) and the queries', n_rot its trailing rotated dims; mla_q_rank the query
  // bottleneck; dsa_n_head / dsa_head_dim / dsa_topk the CSA layers' lightning indexer.
  std::vector<Dsv4Attn> dsv4_attn;       // [n_layer] for DeepSeek-V4, else empty
  int64_t csa_ratio = 0, hca_ratio = 0;  // compress rates
  int64_t sliding_window = 0;            // raw keys per query, itself included
  double compress_rope_theta = 0;        // the compressed layers' rope table (sliding: rope_theta)
  double yarn_factor = 0;                // YaRN on the compressed layers' table (0: none)
  int64_t yarn_orig_ctx = 0;
  double yarn_beta_fast = 32, yarn_beta_slow = 1;
  int64_t o_groups = 0, o_rank = 0;  // grouped low-rank output projection
  int64_t hc_mult = 0;               // residual streams (manifold-constrained hyper-connections)
  int64_t hc_iters = 0;              // Sinkhorn iterations
  double hc_eps = 0;
  int64_t n_hash_layers = 0;  // the first MoE layers route by the token's row of a hash table
  // SwiGLU clamp (gate <= limit, |up| <= limit); 0: none. DeepSeek-V4: the experts'; GLM-5's
  // hybrid: every FFN's (dense, routed and shared).
  double swiglu_limit = 0;

  int64_t n_mtp = 0;  // MTP (next-token prediction) layers present in the weights: 0 or 1

  bool is_qwen_hybrid() const {
    return family == Family::Qwen3Next || family == Family::Qwen35 || family == Family::Qwen35Moe;
  }
  bool attn_gated() const { return is_qwen_hybrid(); }
  // HF stores zero-centred norms (multiplier 1+w) for Next/3.5 except linear_attn.norm.
  bool zero_centred_norms() const { return is_qwen_hybrid(); }
  // Qwen's shared expert is scaled by sigmoid(shared_gate . x); GLM-5's is added as is.
  bool shared_expert_gated() const { return !is_glm() && family != Family::DeepseekV4; }
  bool is_glm() const { return family == Family::GlmDsa || family == Family::Glm5Next; }
  // The residual stream is hc_mult hyper-connected streams (DeepSeek-V4, GLM-5's hybrid).
  bool is_hyper() const { return family == Family::DeepseekV4 || family == Family::Glm5Next; }
  // The MLA latent norms' eps: glm_moe_dsa fixes 1e-6 in its modules, glm5_next uses rms_eps.
  double mla_latent_eps() const { return family == Family::Glm5Next ? rms_eps : kMlaNormEps; }
  bool has_mla() const;
  bool has_kda() const;
  // Widths of one position's cached key and value over all heads: GQA n_head_kv·head_dim for
  // both; MLA n_head·head_dim and n_head·mla_d_v (the expanded per-head keys and values).
  int64_t kv_k_width() const { return is_glm() ? n_head * head_dim : n_head_kv * head_dim; }
  int64_t kv_v_width() const { return is_glm() ? n_head * mla_d_v : n_head_kv * head_dim; }
  // llama.cpp reorders GDN value heads from grouped to tiled order for qwen35/qwen35moe.
  bool gguf_tiled_v_heads() const { return family == Family::Qwen35 || family == Family::Qwen35Moe; }
  bool has_linear() const;
  bool has_moe() const;
  int64_t ssm_key_dim() const { return ssm_n_k_heads * ssm_d_k; }
  int64_t ssm_value_dim() const { return ssm_n_v_heads * ssm_d_v; }
  int64_t ssm_conv_dim() const { return 2 * ssm_key_dim() + ssm_value_dim(); }

  // Fails (naming the field and value) unless every dimension is consistent: positive sizes,
  // n_head % n_head_kv == 0, n_rot even and <= head_dim, n_v % n_k == 0, top-k <= n_expert, ...
  void validate() const;
  // Fails (naming the count, the position or the id) unless the T tokens of a call fit a cache
  // at position pos of max_ctx: T > 0, pos + T <= max_ctx, every id in [0, n_vocab). The one
  // check of the oracle and the GPU model (src/cuda/layer_walk.cu prepare).
  void check_prompt(std::span<const int32_t> tokens, int64_t pos, int64_t max_ctx) const;
  std::string summary() const;  // one line for logs and error context

  // From metadata alone. GGUF cannot say which layers of an MoE model are dense, nor the vocab
  // when <arch>.vocab_size is absent: from_source completes both from the tensors.
  static ModelConfig from_gguf_keys(const MetaKeys& kv);
  static ModelConfig from_hf_keys(const MetaKeys& kv);
  static ModelConfig from_gguf(const GgufFile& f);
  static ModelConfig from_hf(const HfConfig& c);
  // Dispatches on the source (GGUF metadata, HF config.json, MemorySource metadata), then
  // completes the config from tensor presence/shapes: vocab, tied output, dense layers among MoE
  // in GGUF, MTP present. Validates.
  static ModelConfig from_source(const WeightSource& src);
};

bool operator==(const ModelConfig& a, const ModelConfig& b);
// The fields in which a and b differ, "n_ff 128 vs 0, rms_eps ..." (empty when a == b): what a
// test or a "these two files disagree" error prints instead of two opaque structs.
std::string config_difference(const ModelConfig& a, const ModelConfig& b);
// GoogleTest's printer for a ModelConfig (its one-line summary, not a byte dump).
void PrintTo(const ModelConfig& c, std::ostream* os);

// MetaKeys over a MemorySource's metadata (either style).
std::unique_ptr<MetaKeys> memory_meta_keys(const MemorySource& src);

// The reverse mapping, for the fixture generator and round-trip tests: writes `c` as llama.cpp
// GGUF keys or as HF config keys into `dst` (whose style must match).
void write_gguf_keys(const ModelConfig& c, MemorySource& dst);
void write_hf_keys(const ModelConfig& c, MemorySource& dst);

}  // namespace memra
