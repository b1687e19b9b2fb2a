// memra/byte_alphabet.h — GPT-2's byte alphabet, the spelling of byte-level BPE vocabularies.
//
// Each byte is one printable code point, so that a byte string can be a JSON / vocabulary key.
// Printable Latin-1 bytes ('!'..'~', '¡'..'¬', '®'..'ÿ') stand for themselves; the other 68
// bytes, in increasing order, take U+0100, U+0101, ... (space = 'Ġ'). Tokenizer loaders read
// vocabularies in it; fixture writers spell byte-level vocabularies in it.
//
// provides: byte_alphabet_encode, byte_alphabet_decode
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace memra {

std::string byte_alphabet_encode(std::string_view bytes);
// The inverse; nullopt when the string is not valid UTF-8 or holds a code point outside it.
std::optional<std::string> byte_alphabet_decode(std::string_view text);

}  // namespace memra
