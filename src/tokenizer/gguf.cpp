// GGUF `tokenizer.ggml.*` <-> TokenizerSpec, with llama.cpp's key names and types.
#include <fstream>

#include "memra/error.h"
#include "memra/gguf.h"
#include "memra/tokenizer.h"

namespace memra {

namespace {
constexpr const char* kModel = "tokenizer.ggml.model";
constexpr const char* kPre = "tokenizer.ggml.pre";
constexpr const char* kTokens = "tokenizer.ggml.tokens";
constexpr const char* kTypes = "tokenizer.ggml.token_type";
constexpr const char* kMerges = "tokenizer.ggml.merges";
constexpr const char* kBos = "tokenizer.ggml.bos_token_id";
constexpr const char* kEos = "tokenizer.ggml.eos_token_id";
constexpr const char* kPad = "tokenizer.ggml.padding_token_id";
}  // namespace

TokenizerSpec read_gguf_tokenizer_spec(const GgufFile& f, std::string_view source) {
  const std::string src(source);
  auto bad = [&](const char* key, const auto&... what) -> void {
    fail(src, ": key '", key, "': ", what...);
  };
  for (const char* k : {kModel, kTokens, kMerges})
    if (!f.has(k)) bad(k, "missing");
  TokenizerSpec spec;
  if (std::string model = f.get_string(kModel); model != "gpt2")
    bad(kModel, "'", model, "' is unsupported (memra implements byte-level BPE, 'gpt2', only)");
  // llama.cpp falls back to a default split when `pre` is absent; memra would rather refuse
  // than split differently from the tokenizer.json the file was made from.
  if (!f.has(kPre)) bad(kPre, "missing (needed to choose the pre-tokenizer regex)");
  spec.pre = f.get_string(kPre);
  auto pattern = pre_tokenizer_pattern(spec.pre);
  if (!pattern) bad(kPre, "'", spec.pre, "' is unsupported (known: qwen2, qwen35, glm4)");
  spec.pre_pattern = *pattern;
  spec.nfc = true;  // both known pre-tokenizers come from tokenizer.json files with NFC

  spec.tokens = f.get_string_array(kTokens);
  if (f.has(kTypes)) {
    std::vector<int64_t> t = f.get_int_array(kTypes);
    if (t.size() != spec.tokens.size())
      bad(kTypes, t.size(), " entries but ", kTokens, " has ", spec.tokens.size());
    spec.types.reserve(t.size());
    for (size_t i = 0; i < t.size(); ++i) {
      if (t[i] < 0 || t[i] > static_cast<int64_t>(TokenType::Byte))
        bad(kTypes, "entry ", i, " is ", t[i], ", not a token type (0..6)");
      spec.types.push_back(static_cast<TokenType>(t[i]));
    }
  } else {
    spec.types.assign(spec.tokens.size(), TokenType::Normal);
  }

  std::vector<std::string> merges = f.get_string_array(kMerges);
  spec.merges.reserve(merges.size());
  for (size_t i = 0; i < merges.size(); ++i) {
    const std::string& m = merges[i];
    const size_t sp = m.find(' ');
    if (sp == std::string::npos || sp == 0 || sp + 1 == m.size() ||
        m.find(' ', sp + 1) != std::string::npos)
      bad(kMerges, "entry ", i, " '", m, "' is not two tokens separated by one space");
    spec.merges.emplace_back(m.substr(0, sp), m.substr(sp + 1));
  }

  auto id = [&](const char* key) -> int64_t {
    if (!f.has(key)) return -1;
    int64_t v = f.get_int(key);
    if (v < 0 || v >= static_cast<int64_t>(spec.tokens.size()))
      bad(key, v, " is outside the vocabulary (", spec.tokens.size(), " tokens)");
    return v;
  };
  spec.bos_id = id(kBos);
  spec.eos_id = id(kEos);
  spec.pad_id = id(kPad);
  return spec;
}

void write_tokenizer_gguf(const TokenizerSpec& spec, GgufWriter& w) {
  auto pattern = pre_tokenizer_pattern(spec.pre);
  if (!pattern)
    fail("write_tokenizer_gguf: pre-tokenizer '", spec.pre,
         "' has no GGUF name (known: qwen2, qwen35, glm4); a custom regex cannot be stored in GGUF");
  if (*pattern != spec.pre_pattern && !spec.pre_pattern.empty())
    fail("write_tokenizer_gguf: the spec's regex differs from the one '", spec.pre, "' names");
  if (!spec.nfc) fail("write_tokenizer_gguf: a tokenizer without NFC cannot be named '", spec.pre, "'");
  if (spec.types.size() != spec.tokens.size())
    fail("write_tokenizer_gguf: ", spec.tokens.size(), " tokens but ", spec.types.size(), " types");
  w.set_string(kModel, "gpt2");
  w.set_string(kPre, spec.pre);
  w.set_string_array(kTokens, spec.tokens);
  std::vector<int32_t> types(spec.types.size());
  for (size_t i = 0; i < types.size(); ++i) types[i] = static_cast<int32_t>(spec.types[i]);
  w.set_i32_array(kTypes, types);
  std::vector<std::string> merges;
  merges.reserve(spec.merges.size());
  for (const auto& [a, b] : spec.merges) {
    if (a.find(' ') != std::string::npos || b.find(' ') != std::string::npos)
      fail("write_tokenizer_gguf: merge '", a, "' + '", b, "' holds a space");
    merges.push_back(a + " " + b);
  }
  w.set_string_array(kMerges, std::move(merges));
  if (spec.bos_id >= 0) w.set_u32(kBos, static_cast<uint32_t>(spec.bos_id));
  if (spec.eos_id >= 0) w.set_u32(kEos, static_cast<uint32_t>(spec.eos_id));
  if (spec.pad_id >= 0) w.set_u32(kPad, static_cast<uint32_t>(spec.pad_id));
}

Tokenizer Tokenizer::from_gguf(const GgufFile& f, std::string_view source) {
  std::string src = source.empty() ? "gguf " + f.path() : std::string(source);
  return Tokenizer(read_gguf_tokenizer_spec(f, src), src);
}

Tokenizer Tokenizer::from_file(const std::string& path) {
  char magic[4] = {};
  {
    std::ifstream in(path, std::ios::binary);
    if (!in) fail("tokenizer ", path, ": cannot open");
    in.read(magic, 4);
  }
  if (std::string_view(magic, 4) == "GGUF") {
    auto f = GgufFile::open(path);
    return from_gguf(*f, "gguf " + path);
  }
  return from_hf_json(path);
}

}  // namespace memra
