// memra/hf_config.h — a Hugging Face config.json with typed, checked getters.
//
// Deliberately generic: it knows JSON types and one layout rule, not model families (the
// model layer maps it onto ModelConfig). Every getter failure is a memra::Error of the form
//   config.json <path>: key 'rope_parameters.rope_theta': missing
//   config.json <path>: key 'hidden_size': is string, expected integer
//
// Lookup rule. Multimodal Qwen3.5 checkpoints nest the language model's parameters under
// "text_config" (hidden_size, num_hidden_layers, ... exist only there), while text-only
// configs keep them at the top level. A key is therefore looked up at the top level first
// and, when absent there, in "text_config" (error messages then name it
// 'text_config.<key>'). A key may be a dotted path ("rope_parameters.rope_theta"); the rule
// applies to its first segment. A JSON null counts as absent for has() and the *_or getters
// (transformers writes unset optionals as null); the plain getters report it as "is null".
//
// provides: HfConfig
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace memra {

class HfConfig {
 public:
  // Parses config.json text; `path` is only used in messages. Throws memra::Error on invalid
  // JSON, duplicate keys, or a top level / "text_config" that is not an object.
  static HfConfig parse(std::string_view text, std::string path);
  // Reads and parses a file.
  static HfConfig load(const std::string& path);

  HfConfig(const HfConfig& other);
  HfConfig(HfConfig&&) noexcept;
  HfConfig& operator=(const HfConfig& other);
  HfConfig& operator=(HfConfig&&) noexcept;
  ~HfConfig();

  const std::string& path() const { return path_; }
  // The text it was parsed from (WeightSource::hf_config_json hands this out).
  const std::string& text() const { return text_; }
  const nlohmann::json& json() const { return *json_; }
  bool has_text_config() const;

  // Present and not null, under the lookup rule.
  bool has(std::string_view key) const;
  // The value under the lookup rule; nullptr when absent (null values are returned).
  const nlohmann::json* find(std::string_view key) const;

  int64_t get_int(std::string_view key) const;         // JSON integer (no 4.0)
  double get_float(std::string_view key) const;        // any JSON number
  bool get_bool(std::string_view key) const;
  std::string get_string(std::string_view key) const;
  std::vector<int64_t> get_int_array(std::string_view key) const;
  std::vector<double> get_float_array(std::string_view key) const;  // any JSON numbers
  std::vector<std::string> get_string_array(std::string_view key) const;

  // `fallback` when absent or null; a present value of the wrong type is still an error.
  int64_t get_int_or(std::string_view key, int64_t fallback) const;
  double get_float_or(std::string_view key, double fallback) const;
  bool get_bool_or(std::string_view key, bool fallback) const;
  std::string get_string_or(std::string_view key, std::string fallback) const;

  // architectures[0] (top level only: it names the checkpoint class, e.g.
  // "Qwen3ForCausalLM" or "Qwen3_5ForConditionalGeneration").
  std::string architecture() const;

 private:
  HfConfig() = default;
  struct Found;
  Found lookup(std::string_view key) const;
  const nlohmann::json& require(std::string_view key, std::string* shown) const;
  std::string path_;
  std::string text_;
  std::unique_ptr<nlohmann::json> json_;
};

}  // namespace memra
