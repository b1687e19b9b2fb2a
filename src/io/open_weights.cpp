// open_weights: the one entry point that turns a path into a WeightSource, whatever the format.
#include <cstring>
#include <filesystem>
#include <fstream>

#include "memra/error.h"
#include "memra/gguf.h"
#include "memra/safetensors.h"
#include "memra/source.h"

namespace memra {
namespace {

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

}  // namespace

// Dispatch order: a directory is a Hugging Face model directory; a file is GGUF when named
// *.gguf or when it starts with the GGUF magic (files renamed without the suffix still open),
// safetensors when named *.safetensors or when its 9th byte opens the JSON header ('{').
// Anything else is refused rather than guessed at.
std::unique_ptr<WeightSource> open_weights(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (!fs::exists(st)) fail("open_weights ", path, ": no such file or directory");
  if (fs::is_directory(st)) return SafetensorsDir::open(path);
  if (!fs::is_regular_file(st)) fail("open_weights ", path, ": not a regular file or directory");
  if (ends_with(path, ".gguf")) return GgufFile::open(path);
  if (ends_with(path, ".safetensors")) return SafetensorsFile::open(path);

  char head[9] = {};
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("open_weights ", path, ": cannot open");
  in.read(head, sizeof head);
  const std::streamsize got = in.gcount();
  if (got >= 4 && std::memcmp(head, "GGUF", 4) == 0) return GgufFile::open(path);
  if (got >= 9 && head[8] == '{') return SafetensorsFile::open(path);
  fail("open_weights ", path,
       ": neither GGUF (no .gguf suffix, no 'GGUF' magic) nor safetensors (no .safetensors "
       "suffix, no JSON header)");
}

}  // namespace memra
