// Hugging Face tokenizer.json (+ tokenizer_config.json) -> TokenizerSpec.
//
// Accepts exactly the pipeline memra implements: normalizer NFC (or none), pre_tokenizer
// Sequence[Split(Regex, Isolated), ByteLevel(use_regex=false)], model BPE without byte
// fallback or word suffixes, decoder ByteLevel. Anything else is refused by name rather than
// tokenized differently from transformers.
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "memra/error.h"
#include "memra/tokenizer.h"
#include "tokenizer/internal.h"

namespace memra {

namespace {

using nlohmann::json;

struct Reader {
  std::string file;

  [[noreturn]] void bad(const std::string& key, const std::string& what) const {
    fail("tokenizer.json ", file, ": key '", key, "': ", what);
  }
  const json& at(const json& obj, const std::string& parent, const char* name) const {
    const std::string key = parent.empty() ? name : parent + "." + name;
    if (!obj.is_object()) bad(parent, "expected an object");
    auto it = obj.find(name);
    if (it == obj.end()) bad(key, "missing");
    return *it;
  }
  std::string str(const json& v, const std::string& key) const {
    if (!v.is_string()) bad(key, "expected a string, got " + std::string(v.type_name()));
    return v.get<std::string>();
  }
  // Optional boolean field; absent or null = false.
  bool flag(const json& obj, const std::string& parent, const char* name) const {
    auto it = obj.find(name);
    if (it == obj.end() || it->is_null()) return false;
    if (!it->is_boolean()) bad(parent + "." + name, "expected a boolean");
    return it->get<bool>();
  }
  // The object's "type" field, for dispatch.
  std::string type(const json& obj, const std::string& key) const {
    return str(at(obj, key, "type"), key + ".type");
  }
  [[noreturn]] void unsupported(const std::string& key, const std::string& what) const {
    bad(key, what + ": unsupported (memra implements Qwen's byte-level BPE only)");
  }
};

json parse_file(const std::string& path, const char* kind) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(kind, " ", path, ": cannot open");
  try {
    return json::parse(in);
  } catch (const json::exception& e) {
    fail(kind, " ", path, ": not valid JSON: ", e.what());
  }
}

bool read_normalizer(const Reader& r, const json& root) {
  const json& n = r.at(root, "", "normalizer");
  if (n.is_null()) return false;
  std::string t = r.type(n, "normalizer");
  if (t == "NFC") return true;
  if (t == "Sequence") {
    const json& list = r.at(n, "normalizer", "normalizers");
    if (list.is_array() && list.size() == 1 && r.type(list[0], "normalizer.normalizers[0]") == "NFC")
      return true;
  }
  r.unsupported("normalizer", "normalizer '" + t + "'");
}

std::string read_pre_tokenizer(const Reader& r, const json& root) {
  const json& p = r.at(root, "", "pre_tokenizer");
  if (p.is_null()) r.unsupported("pre_tokenizer", "no pre-tokenizer");
  std::string t = r.type(p, "pre_tokenizer");
  if (t != "Sequence") r.unsupported("pre_tokenizer.type", "pre-tokenizer '" + t + "'");
  const json& list = r.at(p, "pre_tokenizer", "pretokenizers");
  if (!list.is_array() || list.size() != 2)
    r.unsupported("pre_tokenizer.pretokenizers", "anything but [Split, ByteLevel]");
  const std::string k0 = "pre_tokenizer.pretokenizers[0]", k1 = "pre_tokenizer.pretokenizers[1]";
  if (std::string t0 = r.type(list[0], k0); t0 != "Split") r.unsupported(k0, "'" + t0 + "'");
  const json& pat = r.at(list[0], k0, "pattern");
  if (!pat.is_object() || !pat.contains("Regex"))
    r.unsupported(k0 + ".pattern", "a Split pattern that is not a Regex");
  std::string regex = r.str(pat["Regex"], k0 + ".pattern.Regex");
  if (std::string b = r.str(r.at(list[0], k0, "behavior"), k0 + ".behavior"); b != "Isolated")
    r.unsupported(k0 + ".behavior", "behavior '" + b + "'");
  if (r.flag(list[0], k0, "invert")) r.unsupported(k0 + ".invert", "invert=true");
  if (std::string t1 = r.type(list[1], k1); t1 != "ByteLevel") r.unsupported(k1, "'" + t1 + "'");
  if (r.flag(list[1], k1, "add_prefix_space")) r.unsupported(k1 + ".add_prefix_space", "true");
  if (r.flag(list[1], k1, "use_regex")) r.unsupported(k1 + ".use_regex", "true (a second split)");
  return regex;
}

void read_model(const Reader& r, const json& root, TokenizerSpec& spec,
                std::vector<bool>& present) {
  const json& m = r.at(root, "", "model");
  if (std::string t = r.type(m, "model"); t != "BPE") r.unsupported("model.type", "model '" + t + "'");
  if (r.flag(m, "model", "byte_fallback")) r.unsupported("model.byte_fallback", "true");
  if (r.flag(m, "model", "ignore_merges")) r.unsupported("model.ignore_merges", "true");
  for (const char* affix : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    auto it = m.find(affix);
    if (it != m.end() && !it->is_null() && !(it->is_string() && it->get<std::string>().empty()))
      r.unsupported(std::string("model.") + affix, "a non-empty affix");
  }
  if (auto it = m.find("dropout"); it != m.end() && !it->is_null() &&
                                     !(it->is_number() && it->get<double>() == 0.0))
    r.unsupported("model.dropout", "dropout");

  const json& vocab = r.at(m, "model", "vocab");
  if (!vocab.is_object()) r.bad("model.vocab", "expected an object token -> id");
  for (auto it = vocab.begin(); it != vocab.end(); ++it) {
    if (!it.value().is_number_integer())
      r.bad("model.vocab", "token '" + it.key() + "': id is not an integer");
    const int64_t id = it.value().get<int64_t>();
    if (id < 0 || id > INT32_MAX)
      r.bad("model.vocab", "token '" + it.key() + "': id " + std::to_string(id) + " out of range");
    const auto i = static_cast<size_t>(id);
    if (i >= spec.tokens.size()) {
      spec.tokens.resize(i + 1);
      spec.types.resize(i + 1, TokenType::Undefined);
      present.resize(i + 1, false);
    }
    if (present[i])
      r.bad("model.vocab", "id " + std::to_string(id) + " given to both '" + spec.tokens[i] +
                               "' and '" + it.key() + "'");
    spec.tokens[i] = it.key();
    spec.types[i] = TokenType::Normal;
    present[i] = true;
  }

  const json& merges = r.at(m, "model", "merges");
  if (!merges.is_array()) r.bad("model.merges", "expected an array");
  spec.merges.reserve(merges.size());
  for (size_t k = 0; k < merges.size(); ++k) {
    const json& e = merges[k];
    const std::string key = "model.merges[" + std::to_string(k) + "]";
    if (e.is_string()) {  // older files: "a b"
      const std::string s = e.get<std::string>();
      const size_t sp = s.find(' ');
      if (sp == std::string::npos || sp == 0 || sp + 1 == s.size() ||
          s.find(' ', sp + 1) != std::string::npos)
        r.bad(key, "'" + s + "' is not two tokens separated by one space");
      spec.merges.emplace_back(s.substr(0, sp), s.substr(sp + 1));
    } else if (e.is_array() && e.size() == 2 && e[0].is_string() && e[1].is_string()) {
      spec.merges.emplace_back(e[0].get<std::string>(), e[1].get<std::string>());
    } else {
      r.bad(key, "expected \"a b\" or [\"a\", \"b\"]");
    }
  }
}

void read_added_tokens(const Reader& r, const json& root, TokenizerSpec& spec,
                       std::vector<bool>& present) {
  auto it = root.find("added_tokens");
  if (it == root.end() || it->is_null()) return;
  if (!it->is_array()) r.bad("added_tokens", "expected an array");
  for (size_t k = 0; k < it->size(); ++k) {
    const json& a = (*it)[k];
    const std::string key = "added_tokens[" + std::to_string(k) + "]";
    const json& idv = r.at(a, key, "id");
    if (!idv.is_number_integer() || idv.get<int64_t>() < 0 || idv.get<int64_t>() > INT32_MAX)
      r.bad(key + ".id", "expected a non-negative 32-bit integer");
    const auto i = static_cast<size_t>(idv.get<int64_t>());
    const std::string content = r.str(r.at(a, key, "content"), key + ".content");
    for (const char* f : {"lstrip", "rstrip", "single_word"})
      if (r.flag(a, key, f)) r.unsupported(key + "." + f, "'" + content + "' with " + f + "=true");
    if (i >= spec.tokens.size()) {
      spec.tokens.resize(i + 1);
      spec.types.resize(i + 1, TokenType::Undefined);
      present.resize(i + 1, false);
    }
    if (present[i] && spec.tokens[i] != content)
      r.bad(key, "id " + std::to_string(i) + " is '" + content + "' here but '" + spec.tokens[i] +
                     "' in model.vocab");
    spec.tokens[i] = content;
    spec.types[i] = r.flag(a, key, "special") ? TokenType::Control : TokenType::UserDefined;
    present[i] = true;
  }
}

// bos_token etc. in tokenizer_config.json: null, "text", or {"content": "text", ...}.
int64_t config_token_id(const json& cfg, const char* name, const std::string& path,
                        const TokenizerSpec& spec) {
  auto it = cfg.find(name);
  if (it == cfg.end() || it->is_null()) return -1;
  std::string text;
  if (it->is_string()) {
    text = it->get<std::string>();
  } else if (it->is_object() && it->contains("content") && (*it)["content"].is_string()) {
    text = (*it)["content"].get<std::string>();
  } else {
    fail("tokenizer_config.json ", path, ": key '", name, "': expected a string or {content}");
  }
  for (size_t i = 0; i < spec.tokens.size(); ++i)
    if (spec.tokens[i] == text && spec.types[i] != TokenType::Normal) return static_cast<int64_t>(i);
  for (size_t i = 0; i < spec.tokens.size(); ++i)
    if (spec.tokens[i] == text) return static_cast<int64_t>(i);
  fail("tokenizer_config.json ", path, ": key '", name, "': token '", text,
       "' is not in the vocabulary");
}

}  // namespace

TokenizerSpec read_hf_tokenizer_spec(const std::string& path) {
  const json root = parse_file(path, "tokenizer.json");
  Reader r{path};
  if (!root.is_object()) r.bad("", "expected a JSON object at the top");
  TokenizerSpec spec;
  std::vector<bool> present;
  spec.nfc = read_normalizer(r, root);
  spec.pre_pattern = read_pre_tokenizer(r, root);
  spec.pre = pre_tokenizer_name_for_pattern(spec.pre_pattern);
  read_model(r, root, spec, present);
  read_added_tokens(r, root, spec, present);
  if (const json& d = r.at(root, "", "decoder"); d.is_null() || r.type(d, "decoder") != "ByteLevel")
    r.unsupported("decoder", "a decoder other than ByteLevel");
  for (size_t i = 0; i < present.size(); ++i)
    if (!present[i])
      r.bad("model.vocab", "id " + std::to_string(i) + " has no token (ids must be dense 0.." +
                               std::to_string(present.size() - 1) + ")");

  const auto cfg_path = std::filesystem::path(path).parent_path() / "tokenizer_config.json";
  if (std::filesystem::exists(cfg_path)) {
    const json cfg = parse_file(cfg_path.string(), "tokenizer_config.json");
    if (!cfg.is_object()) fail("tokenizer_config.json ", cfg_path.string(), ": expected an object");
    spec.bos_id = config_token_id(cfg, "bos_token", cfg_path.string(), spec);
    spec.eos_id = config_token_id(cfg, "eos_token", cfg_path.string(), spec);
    spec.pad_id = config_token_id(cfg, "pad_token", cfg_path.string(), spec);
  }
  return spec;
}

Tokenizer Tokenizer::from_hf_json(const std::string& path) {
  return Tokenizer(read_hf_tokenizer_spec(path), "tokenizer.json " + path);
}

}  // namespace memra
