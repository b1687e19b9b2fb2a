// memra/source.h — WeightSource: "tensor by name -> {type, shape, bytes}", whatever the file.
//
// The model layer maps checkpoint names onto the architecture through this interface only, so a
// GGUF file, a safetensors file, a sharded safetensors directory and an in-memory test source
// are interchangeable. Shapes use ggml's order throughout: ne[0] is the fastest-varying
// dimension (the row length), so a PyTorch [out, in] weight has ne = {in, out}. The
// safetensors reader reverses its row-major shapes into this order.
//
// provides: TensorView, WeightSource, SourceKind, open_weights
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "memra/dtype.h"


namespace memra {

class GgufFile;

struct TensorView {
  std::string name;
  DType type = DType::F32;
  std::vector<int64_t> ne;          // ggml order: ne[0] fastest; at most 4 dims
  std::span<const std::byte> data;  // exactly nbytes(), inside the source's mapping
  int64_t nelements() const;
  int64_t nbytes() const { return static_cast<int64_t>(data.size()); }
};

enum class SourceKind { Gguf, Safetensors, Memory };

class WeightSource {
 public:
  virtual ~WeightSource() = default;
  virtual SourceKind kind() const = 0;
  // The file or directory it was opened from (used in every error message).
  virtual const std::string& path() const = 0;
  // Tensor names in file order.
  virtual std::vector<std::string> tensor_names() const = 0;
  // nullptr when absent.
  virtual const TensorView* find(std::string_view name) const = 0;
  // Throws memra::Error naming the tensor and the source when absent.
  const TensorView& tensor(std::string_view name) const;

  // Architecture metadata: the GGUF file (kind Gguf) or the parsed HF config.json (kind
  // Safetensors, when the directory has one). nullptr when the source has none.
  virtual const GgufFile* gguf() const { return nullptr; }
  virtual const std::string* hf_config_json() const { return nullptr; }
};

// Opens a .gguf file, a .safetensors file, or a directory holding model.safetensors or a
// sharded model.safetensors.index.json (plus config.json). Throws memra::Error with the path.
std::unique_ptr<WeightSource> open_weights(const std::string& path);

}  // namespace memra
