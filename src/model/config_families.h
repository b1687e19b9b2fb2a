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

// GLM-5's hybrid (model_type glm5_next / glm5_next_text) as transformers 5.17's
// Glm5NextTextConfig reads it; written flat (the text fields at the top level, which
// Glm5NextConfig forwards to its text_config) with a one-block vision tower. config_glm5next.cpp.
ModelConfig glm5next_from_hf_keys(const MetaKeys& kv, ModelConfig c);
void write_glm5next_hf_keys(const ModelConfig& c, MemorySource& dst);

}  // namespace memra::detail
