// The config.json readers and writers of the families whose keys share little with Qwen's
// (config.cpp dispatches to them by family).
#pragma once

#include "memra/config.h"

namespace memra {
class MemorySource;
}

namespace memra::detail {

// DeepSeek-V4 (model_type deepseek_v4): `c` arrives with its family set; every field named in
// an error is the config.json key. config_dsv4.cpp.
ModelConfig dsv4_from_hf_keys(const MetaKeys& kv, ModelConfig c);
void write_dsv4_hf_keys(const ModelConfig& c, MemorySource& dst);
// The same model as llama.cpp's deepseek4 GGUF keys; every field named in an error is the key.
ModelConfig dsv4_from_gguf_keys(const MetaKeys& kv, ModelConfig c);
void write_dsv4_gguf_keys(const ModelConfig& c, MemorySource& dst);

// The config.json keys every family writes (config.cpp): its class and model_type, the trunk's
// vocabulary, width, depth and heads, the trained context, the norm epsilon, tied embeddings and
// the SiLU activation.
void write_hf_trunk_keys(const ModelConfig& c, MemorySource& dst, const char* architecture, const char* model_type);

// The config.json keys both GLM-5 families share (config.cpp). glm_hf_schedules: the indexer
// schedule into c.dsa_shared (indexer_types, else index_topk_pattern "FSS...", else the
// index_topk_freq / index_skip_topk_offset rule: layer i runs its indexer iff
// max(i - offset + 1, 0) % freq == 0), n_ff (intermediate_size, else default_n_ff) and the FFN
// schedule (mlp_layer_types, else the first `first_dense` layers dense, the rest MoE). glm_hf_moe:
// the sigmoid-grouped MoE's keys with transformers' defaults and n_expert routed experts (n_ff 0
// when no layer is dense). write_glm_hf_schedules_and_moe: their inverse, every field explicit.
void glm_hf_schedules(const MetaKeys& kv, ModelConfig& c, int64_t first_dense, int64_t default_n_ff);
void glm_hf_moe(const MetaKeys& kv, ModelConfig& c, int64_t n_expert);
void write_glm_hf_schedules_and_moe(const ModelConfig& c, MemorySource& dst);

// GLM-5's hybrid (model_type glm5_next / glm5_next_text) as transformers 5.17's
// Glm5NextTextConfig reads it; written flat (the text fields at the top level, which
// Glm5NextConfig forwards to its text_config) with a one-block vision tower. config_glm5next.cpp.
ModelConfig glm5next_from_hf_keys(const MetaKeys& kv, ModelConfig c);
void write_glm5next_hf_keys(const ModelConfig& c, MemorySource& dst);
// Its GGUF form (memra's glm5-next, docs/gguf.md): the keys beyond glm-dsa's that
// glm_from_gguf_keys / write_glm_gguf_keys (config.cpp) read and write for it — KDA (kimi-linear's
// ssm.conv_kernel and kda.head_dim, memra's kda.head_count and kda.gate_lower_bound), the pooled
// indexer (attention.indexer.kpool), the hyper-connections (deepseek4's keys) and the SwiGLU clamp.
ModelConfig glm5next_gguf_keys(const MetaKeys& kv, ModelConfig c);
void write_glm5next_gguf_keys(const ModelConfig& c, MemorySource& dst);

}  // namespace memra::detail
