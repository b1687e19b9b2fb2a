// Tokenizer internals shared by the loaders and the encoder (not public API).
//
// provides: pre_tokenizer_name_for_pattern (and memra/byte_alphabet.h)
#pragma once

#include <string>
#include <string_view>

#include "memra/byte_alphabet.h"

namespace memra {

// The GGUF `pre` name of a known split regex as tokenizer.json spells it, or "".
std::string pre_tokenizer_name_for_pattern(std::string_view pattern);

}  // namespace memra
