// memra/safetensors.h — Hugging Face safetensors: one mmap'd file, a (sharded) model directory,
// and a small writer for fixtures and tests.
//
// File layout: u64 little-endian N, N bytes of JSON header (may end in space padding), then the
// data buffer. The header maps each tensor name to {"dtype", "shape", "data_offsets": [b, e]}
// (offsets relative to the data buffer) plus an optional "__metadata__" of string → string.
// Shapes are row-major (outermost first); TensorView::ne is ggml order, so the reader reverses
// them: shape [out, in] → ne {in, out}. Tensors have at most 4 dimensions (TensorView's limit).
// A 0-d tensor (shape []) gets ne {} and one element.
//
// Everything in the header is checked before a tensor is handed out (DESIGN.md law 6): every
// failure throws memra::Error beginning "safetensors <path>: " and naming the tensor/field.
// Tensor data is not aligned in general (the format does not promise it): copy or use
// unaligned loads.
//
// provides: SafetensorsFile, SafetensorsDir, write_safetensors_file, safetensors_dtype_name,
//           safetensors_dtype_from_name
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "memra/dtype.h"
#include "memra/hf_config.h"
#include "memra/mapped_file.h"
#include "memra/source.h"

namespace memra {

// The safetensors spelling of a dtype ("F32", "BF16", "F8_E4M3", ...); nullopt for types that
// safetensors cannot hold (the ggml block types).
std::optional<std::string_view> safetensors_dtype_name(DType t);
// Inverse of the above for the dtypes memra reads: F32 F16 BF16 F64 F8_E4M3 F8_E8M0 I8 U8 I16 I32
// I64.
// nullopt for any other name (BOOL, U16, F8_E5M2, ... are valid safetensors but unsupported).
std::optional<DType> safetensors_dtype_from_name(std::string_view name);

// One .safetensors file, mapped read-only for the lifetime of the object; TensorView::data
// points into the mapping.
class SafetensorsFile : public WeightSource {
 public:
  // Throws memra::Error ("safetensors <path>: ...") on any I/O or format problem.
  static std::unique_ptr<SafetensorsFile> open(const std::string& path);
  ~SafetensorsFile() override;
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  SourceKind kind() const override { return SourceKind::Safetensors; }
  const std::string& path() const override { return path_; }
  // In data order (ascending data_offsets begin; equal begins by name).
  std::vector<std::string> tensor_names() const override;
  const TensorView* find(std::string_view name) const override;

  // The header's "__metadata__" (empty when absent).
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  // Bytes before the data buffer: 8 + N.
  uint64_t data_start() const { return data_start_; }

 private:
  SafetensorsFile() = default;
  std::string path_;
  MappedFile map_;
  uint64_t data_start_ = 0;
  std::vector<TensorView> tensors_;  // data order
  std::map<std::string, size_t, std::less<>> by_name_;
  std::map<std::string, std::string> metadata_;
};

// A Hugging Face model directory: the union of its safetensors shards plus config.json.
// Which files, in this order of precedence:
//   1. model.safetensors.index.json: {"weight_map": {tensor: shard file}}; every shard named is
//      opened, every tensor it lists must be in that shard, and every tensor of a shard must
//      be listed for that shard (a tensor in two shards, or a shard that does not match its
//      index, is an error). Shard names are plain file names inside the directory.
//   2. model.safetensors.
//   3. the only *.safetensors file in the directory (several are ambiguous: an error).
// config.json is parsed when present (a malformed one is an error, not ignored).
class SafetensorsDir : public WeightSource {
 public:
  static std::unique_ptr<SafetensorsDir> open(const std::string& dir);
  ~SafetensorsDir() override;

  SourceKind kind() const override { return SourceKind::Safetensors; }
  const std::string& path() const override { return path_; }
  // Shards in file-name order, each in its data order.
  std::vector<std::string> tensor_names() const override;
  const TensorView* find(std::string_view name) const override;
  const std::string* hf_config_json() const override;

  // nullptr when the directory has no config.json.
  const HfConfig* hf_config() const { return config_ ? &*config_ : nullptr; }
  const std::vector<std::unique_ptr<SafetensorsFile>>& shards() const { return shards_; }
  // The shard holding `name`; nullptr when absent.
  const SafetensorsFile* shard_of(std::string_view name) const;

 private:
  SafetensorsDir() = default;
  std::string path_;
  std::vector<std::unique_ptr<SafetensorsFile>> shards_;
  std::map<std::string, const SafetensorsFile*, std::less<>> owner_;
  std::optional<HfConfig> config_;
};

// Writes a .safetensors file holding `tensors` in the given order, data contiguous, header
// padded with spaces so the data buffer starts at a multiple of 8 (as Hugging Face's writer
// does). Each view's ne is written reversed (ggml order → row-major shape). Throws on a type
// safetensors cannot hold, data whose size is not nelements × element size, a duplicate or
// empty name, or an I/O error. For fixtures and tests; the reader does not depend on it.
void write_safetensors_file(const std::string& path, const std::vector<TensorView>& tensors,
                            const std::map<std::string, std::string>& metadata = {});

}  // namespace memra
