// Checkpoint tensor names in one place: llama.cpp GGUF names (blk.N.*) and HF names
// (model.layers.N.* / model.language_model.layers.N.*, mtp.*). Both the loader and the
// exporter build names only through these helpers.
#pragma once

#include <cstdint>
#include <string>

namespace memra::names {

// GGUF: "blk.<i>.<t>".
inline std::string gguf_blk(int64_t i, const char* t) { return "blk." + std::to_string(i) + "." + t; }

// HF: a layer prefix is "model.layers.<i>." (or with language_model) for main layers and
// "mtp.layers.<i>." for MTP layers.
inline std::string hf_model_prefix(bool language_model) {
  return language_model ? "model.language_model." : "model.";
}
inline std::string hf_layer_prefix(bool language_model, int64_t i) {
  return hf_model_prefix(language_model) + "layers." + std::to_string(i) + ".";
}
inline std::string hf_mtp_layer_prefix(int64_t i) { return "mtp.layers." + std::to_string(i) + "."; }

// NVFP4-style per-tensor scale of a matrix: "<base>.scale" for "<base>.weight" (llama.cpp; one
// value, or one per expert slab), "<name>.scale" for a name without ".weight".
inline std::string scale_of(const std::string& tensor) {
  const bool w = tensor.size() > 7 && tensor.ends_with(".weight");
  return (w ? tensor.substr(0, tensor.size() - 7) : tensor) + ".scale";
}

// Block-scaled FP8 multipliers of a matrix (DeepSeek-V3 / GLM-5 / DeepSeek-V4 releases):
// "<base>.weight_scale_inv" for "<base>.weight"; empty for a name without ".weight".
inline std::string block_scale_of(const std::string& tensor) {
  return tensor.ends_with(".weight") ? tensor + "_scale_inv" : std::string();
}

}  // namespace memra::names
