// memra/tokenizer.h — byte-level BPE with the Qwen2 / Qwen3.5 pre-tokenizers.
//
// Text -> ids, the way Hugging Face's `tokenizers` does it for Qwen2/Qwen3 (tokenizer.json
// with NFC normaliser, a Split pre-tokenizer regex, ByteLevel, BPE):
//   1. added tokens (<|im_start|>, <think>, ...) are found in the raw text, leftmost first and
//      the longest at a position, and become their ids;
//   2. every stretch between them is NFC-normalised, split by the pre-tokenizer regex (run by
//      PCRE2 with Unicode properties), and each piece's UTF-8 bytes are BPE-merged by rank.
// No BOS/EOS is added: a chat template or the caller adds what the model wants.
//
// Two loaders fill one plain TokenizerSpec (what the files say), so that a GGUF written from a
// tokenizer.json tokenizes exactly like the tokenizer.json (tested on a corpus).
//
// provides: TokenType, TokenizerSpec, Tokenizer, pre_tokenizer_pattern,
//           read_hf_tokenizer_spec, read_gguf_tokenizer_spec, write_tokenizer_gguf, pad_vocab
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace memra {

class GgufFile;
class GgufWriter;

// llama.cpp's token types (GGUF `tokenizer.ggml.token_type`, i32 per token).
enum class TokenType : int32_t {
  Undefined = 0,
  Normal = 1,       // a vocabulary entry in GPT-2's byte alphabet; produced by BPE
  Unknown = 2,
  Control = 3,      // special added token (<|im_end|>): matched in text, decodes to its text
  UserDefined = 4,  // non-special added token (<think>): matched in text, decodes to its text
  Unused = 5,       // padding entry ([PAD151669]): never produced, decodes to nothing
  Byte = 6,
};

// What a tokenizer file says, before any table is built. Field by field equal for a
// tokenizer.json and a GGUF written from it.
struct TokenizerSpec {
  std::string pre;          // pre-tokenizer name as GGUF spells it: "qwen2", "qwen35"; "" = custom
  std::string pre_pattern;  // the split regex (HF: read from the file; GGUF: from `pre`)
  bool nfc = true;          // NFC normaliser before the split (Qwen's tokenizer.json has it)
  // id -> token: for Normal tokens the GPT-2 byte-alphabet string ("Ġthe"); for Control and
  // UserDefined tokens the raw text that is matched in the input ("<|im_end|>").
  std::vector<std::string> tokens;
  std::vector<TokenType> types;                             // same length as tokens
  std::vector<std::pair<std::string, std::string>> merges;  // in rank order (rank 0 first)
  int64_t bos_id = -1, eos_id = -1, pad_id = -1;            // -1 = none

  bool operator==(const TokenizerSpec&) const = default;
};

// The split regex for a GGUF `tokenizer.ggml.pre` name ("qwen2", "qwen35"); nullopt if unknown.
std::optional<std::string> pre_tokenizer_pattern(std::string_view pre);

// Reads tokenizer.json (and tokenizer_config.json next to it, when present, for the
// bos/eos/pad tokens). Errors name the file and the JSON key.
TokenizerSpec read_hf_tokenizer_spec(const std::string& path);
// Reads `tokenizer.ggml.*`. Errors name `source` (the file) and the key.
TokenizerSpec read_gguf_tokenizer_spec(const GgufFile& f, std::string_view source);
// Writes `spec` as llama.cpp's keys: model "gpt2", pre, tokens, token_type (i32), merges
// ("a b"), bos/eos/padding_token_id (u32, only those >= 0). Needs a known `pre` name.
void write_tokenizer_gguf(const TokenizerSpec& spec, GgufWriter& w);
// Pads the vocabulary to n tokens with "[PAD<id>]" Unused entries, as llama.cpp's converter
// does when the model's embedding has more rows than the tokenizer has tokens.
TokenizerSpec pad_vocab(TokenizerSpec spec, size_t n);

class WeightSource;

class Tokenizer {
 public:
  // Validates the spec and builds the tables. `source` names it in error messages.
  explicit Tokenizer(TokenizerSpec spec, std::string source = "tokenizer");
  static Tokenizer from_hf_json(const std::string& path);
  static Tokenizer from_gguf(const GgufFile& f, std::string_view source = "");  // "" = "gguf <path>"
  // A GGUF file (recognised by its "GGUF" magic) or else a tokenizer.json.
  static Tokenizer from_file(const std::string& path);
  // A model's tokenizer: the GGUF's embedded one, else the tokenizer.json in the safetensors
  // directory (or beside the .safetensors file). Error naming the model when it has none.
  static Tokenizer for_model(const WeightSource& src);

  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;
  ~Tokenizer();

  // Text (UTF-8; invalid UTF-8 is an Error naming the byte offset) -> ids. No BOS/EOS.
  std::vector<int32_t> encode(std::string_view text) const;
  // Ids -> bytes. Normal tokens through the byte alphabet, added tokens as their text, Unused
  // as nothing. The result may end inside a UTF-8 sequence (a token can hold part of a
  // character). An id outside [0, n_tokens) is an Error naming the id and the vocabulary size.
  std::string decode(std::span<const int32_t> ids) const;
  // The bytes of one token (decode of {id}).
  std::string token_bytes(int32_t id) const;

  // The pre-tokenizer alone, after NFC: the pieces BPE sees (for tests and debugging).
  std::vector<std::string> pre_tokenize(std::string_view text) const;
  // The id of a token as spelled in the spec (byte-alphabet form for Normal tokens).
  std::optional<int32_t> find_token(std::string_view token) const;

  size_t n_tokens() const;
  int32_t bos_id() const;  // -1 = none
  int32_t eos_id() const;
  int32_t pad_id() const;
  const TokenizerSpec& spec() const;
  const std::string& source() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace memra
