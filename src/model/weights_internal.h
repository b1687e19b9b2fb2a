// Helpers shared by the weight loader, the exporter and config detection (not public API).
#pragma once

#include "memra/config.h"
#include "memra/weights.h"

namespace memra::detail {

// −exp(A_log) in double, rounded once: llama.cpp's converter stores this as ssm_a.
float ssm_a_from_a_log(float a_log);
// Reorders GDN value heads between HF grouped order and llama.cpp's tiled qwen35* order in every
// tensor that carries them (qkv V rows, z, b, a, ssm_a, dt_bias, conv V channels, out columns).
void permute_v_heads(GdnWeights& g, const ModelConfig& c, bool to_tiled);
// VLM-style checkpoint (model.language_model.*).
bool hf_language_model_prefix(const WeightSource& src);
// GGUF file or Gguf-style MemorySource: llama.cpp names.
bool source_uses_gguf_names(const WeightSource& src);

}  // namespace memra::detail
