// memra/memory_source.h — a WeightSource that owns its tensors and metadata in memory.
//
// Tests and the fixture generator build models without touching the disk: they fill a
// MemorySource with tensors (any DType, raw bytes in that type's block layout) and with the
// architecture metadata the model layer needs, written in ONE of two styles:
//   MetaStyle::Gguf — llama.cpp keys ("general.architecture", "qwen3next.block_count", ...);
//   MetaStyle::Hf   — HF config.json keys ("model_type", "hidden_size", nested objects as
//                     dotted paths: "rope_parameters.rope_theta").
// A GGUF writer can copy a Gguf-style MemorySource key by key; an HF exporter can turn an
// Hf-style one into config.json + model.safetensors.
//
// Tensor bytes are stored in map nodes that never move, so a TensorView handed out by find()
// stays valid until that tensor is removed or replaced.
//
// provides: MetaValue, MetaStyle, MemorySource
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "memra/source.h"

namespace memra {

// One metadata value. Integers (signed or unsigned in the file) are int64, floats double;
// arrays of bool are stored as arrays of 0/1 integers.
using MetaValue = std::variant<int64_t, double, bool, std::string, std::vector<int64_t>,
                               std::vector<double>, std::vector<std::string>>;

enum class MetaStyle { Gguf, Hf };

class MemorySource : public WeightSource {
 public:
  explicit MemorySource(MetaStyle style, std::string path = "<memory>");
  // Moving keeps every TensorView valid (map nodes move as a whole); copying would not.
  MemorySource(MemorySource&&) = default;
  MemorySource& operator=(MemorySource&&) = default;
  MemorySource(const MemorySource&) = delete;
  MemorySource& operator=(const MemorySource&) = delete;

  SourceKind kind() const override { return SourceKind::Memory; }
  const std::string& path() const override { return path_; }
  std::vector<std::string> tensor_names() const override;  // insertion order
  const TensorView* find(std::string_view name) const override;

  // Adds (or replaces) a tensor; `bytes` must be exactly row_bytes(type, ne[0]) * rows.
  void add(std::string name, DType type, std::vector<int64_t> ne, std::vector<std::byte> bytes);
  void add_f32(std::string name, std::vector<int64_t> ne, std::span<const float> values);
  // Removes a tensor; fails naming it when absent (tests use it to make a model incomplete).
  void remove(std::string_view name);

  MetaStyle style() const { return style_; }
  void set(std::string key, MetaValue value) { meta_[std::move(key)] = std::move(value); }
  void erase_meta(std::string_view key);
  const MetaValue* meta(std::string_view key) const;
  const std::map<std::string, MetaValue, std::less<>>& all_meta() const { return meta_; }

 private:
  struct Entry {
    std::vector<std::byte> bytes;
    TensorView view;
  };
  MetaStyle style_;
  std::string path_;
  std::map<std::string, Entry, std::less<>> tensors_;
  std::vector<std::string> order_;
  std::map<std::string, MetaValue, std::less<>> meta_;
};

}  // namespace memra
