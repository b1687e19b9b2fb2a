// tools/cli.h — argument parsing shared by the memra-* programs: integers, id lists and token
// sequences, with errors that name the flag or position and the offending item (the tools print
// them and exit 1).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "memra/error.h"
#include "memra/source.h"
#include "memra/tokenizer.h"

namespace memra::cli {

// One integer, all of `s` (no trailing junk): "--ctx: '12x' is not an integer".
inline long long parse_int(const std::string& flag, const std::string& s) {
  size_t used = 0;
  long long v = 0;
  try {
    v = std::stoll(s, &used);
  } catch (...) {
    used = 0;
  }
  if (s.empty() || used != s.size()) fail(flag, ": '", s, "' is not an integer");
  return v;
}

// "1,2,3" -> {1, 2, 3}: "--tokens: item 1 'x' is not an integer". Range checks against the
// vocabulary are the model's (it names the position).
inline std::vector<int64_t> parse_id_list(const std::string& flag, const std::string& s) {
  std::vector<int64_t> out;
  size_t start = 0;
  for (;;) {
    const size_t comma = s.find(',', start);
    const std::string item = s.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    size_t used = 0;
    long long v = 0;
    try {
      v = std::stoll(item, &used);
    } catch (...) {
      used = 0;
    }
    if (item.empty() || used != item.size())
      fail(flag, ": item ", out.size(), " '", item, "' is not an integer");
    out.push_back(v);
    if (comma == std::string::npos) return out;
    start = comma + 1;
  }
}

// Prompt ids from the model's tokenizer, each checked against the model's vocabulary (a
// tokenizer with more ids than the embedding has rows): "prompt token 3 has id 151936, outside
// the model's vocabulary (151936)".
inline std::vector<int32_t> prompt_ids(const Tokenizer& tok, const std::string& text, int64_t n_vocab) {
  std::vector<int32_t> ids = tok.encode(text);
  for (size_t i = 0; i < ids.size(); ++i)
    if (ids[i] < 0 || ids[i] >= n_vocab)
      fail("prompt token ", i, " has id ", ids[i], ", outside the model's vocabulary (", n_vocab, ")");
  return ids;
}

// The sequence of a tool that takes exactly one of --tokens (an id list, each id checked against
// the vocabulary: "token 1 has id 151936, outside the model's vocabulary [0, 151936)") and
// --prompt (text through the model's own tokenizer, checked as prompt_ids).
inline std::vector<int32_t> sequence_ids(bool have_tokens, const std::string& tokens, const std::string& prompt,
                                         const WeightSource& src, int64_t n_vocab) {
  if (!have_tokens) return prompt_ids(Tokenizer::for_model(src), prompt, n_vocab);
  std::vector<int32_t> ids;
  const std::vector<int64_t> raw = parse_id_list("--tokens", tokens);
  for (size_t i = 0; i < raw.size(); ++i) {
    if (raw[i] < 0 || raw[i] >= n_vocab)
      fail("token ", i, " has id ", raw[i], ", outside the model's vocabulary [0, ", n_vocab, ")");
    ids.push_back(static_cast<int32_t>(raw[i]));
  }
  return ids;
}

}  // namespace memra::cli
