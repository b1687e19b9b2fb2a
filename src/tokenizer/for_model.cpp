// Tokenizer::for_model — which tokenizer belongs to a model source (memra/tokenizer.h).
#include <filesystem>

#include "memra/error.h"
#include "memra/gguf.h"
#include "memra/source.h"
#include "memra/tokenizer.h"

namespace memra {

Tokenizer Tokenizer::for_model(const WeightSource& src) {
  if (const GgufFile* g = src.gguf()) return Tokenizer::from_gguf(*g);
  namespace fs = std::filesystem;
  const fs::path p(src.path());
  const fs::path tj = (fs::is_directory(p) ? p : p.parent_path()) / "tokenizer.json";
  if (!fs::exists(tj)) fail(src.path(), ": no tokenizer (no GGUF metadata, no ", tj.string(), ")");
  return Tokenizer::from_hf_json(tj.string());
}

}  // namespace memra
