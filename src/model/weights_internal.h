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

// A tensor's values as f32: its blocks decoded, then the scales its source holds for it
// applied (one f32 rounding per product, the oracle's weights):
//   - llama.cpp's per-tensor "<base>.scale": y = (W x) * scale, one value per tensor or per
//     expert slab;
//   - block-scaled FP8 as DeepSeek-V3, GLM-5 and DeepSeek-V4 release it (config.json
//     quantization_config {"quant_method": "fp8", "weight_block_size": [128, 128]}): the F8_E4M3
//     matrix [rows, cols] with "<base>.weight_scale_inv" [ceil(rows/128), ceil(cols/128)] (F32,
//     or F8_E8M0 powers of two), one multiplier per 128 x 128 block, partial blocks at the edges.
// Fails naming the tensor for a byte count that does not match its shape or a scale of the
// wrong shape or beside the wrong type.
std::vector<float> tensor_values(const WeightSource& src, const TensorView& t);
// The file-typed loader's test for a tensor it cannot keep as stored (its scales must be applied
// first): an F8_E4M3 matrix with block scales, or an MXFP4 one. tensor_values gives its values.
bool needs_expansion(const WeightSource& src, const TensorView& t);

}  // namespace memra::detail
