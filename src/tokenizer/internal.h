// Tokenizer internals shared by the loaders and the encoder (not public API).
//
// provides: byte_alphabet_encode, byte_alphabet_decode, pre_tokenizer_name_for_pattern
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace memra {

// GPT-2's byte alphabet: each byte is one printable code point, so that a byte string can be a
// JSON/vocabulary key. Printable Latin-1 bytes ('!'..'~', '¡'..'¬', '®'..'ÿ') stand for
// themselves; the other 68 bytes, in increasing order, take U+0100, U+0101, ... (space = 'Ġ').
std::string byte_alphabet_encode(std::string_view bytes);
// The inverse; nullopt when the string is not valid UTF-8 or holds a code point outside it.
std::optional<std::string> byte_alphabet_decode(std::string_view text);

// The GGUF `pre` name of a known split regex as tokenizer.json spells it, or "".
std::string pre_tokenizer_name_for_pattern(std::string_view pattern);

}  // namespace memra
