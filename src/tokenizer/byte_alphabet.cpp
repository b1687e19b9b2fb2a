// GPT-2's byte <-> code point alphabet, computed rather than tabled.
#include <array>

#include "tokenizer/internal.h"

namespace memra {

namespace {

constexpr bool stands_for_itself(int b) {
  return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

struct Alphabet {
  std::array<char32_t, 256> to_cp{};
  std::array<int16_t, 256 + 68> to_byte{};  // code point -> byte, -1 if none
  constexpr Alphabet() {
    for (auto& v : to_byte) v = -1;
    int extra = 0;
    for (int b = 0; b < 256; ++b) {
      char32_t cp = stands_for_itself(b) ? static_cast<char32_t>(b) : 256 + extra++;
      to_cp[b] = cp;
      to_byte[cp] = static_cast<int16_t>(b);
    }
  }
};
constexpr Alphabet kAlphabet;

void put_utf8(std::string& out, char32_t cp) {  // cp < 0x800 here
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

}  // namespace

std::string byte_alphabet_encode(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char b : bytes) put_utf8(out, kAlphabet.to_cp[b]);
  return out;
}

std::optional<std::string> byte_alphabet_decode(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const auto c0 = static_cast<unsigned char>(text[i]);
    char32_t cp;
    if (c0 < 0x80) {
      cp = c0;
      i += 1;
    } else if ((c0 & 0xE0) == 0xC0 && i + 1 < text.size() &&
               (static_cast<unsigned char>(text[i + 1]) & 0xC0) == 0x80) {
      cp = (static_cast<char32_t>(c0 & 0x1F) << 6) | (static_cast<unsigned char>(text[i + 1]) & 0x3F);
      if (cp < 0x80) return std::nullopt;  // overlong
      i += 2;
    } else {
      return std::nullopt;  // every code point of the alphabet is below U+0800
    }
    if (cp >= kAlphabet.to_byte.size() || kAlphabet.to_byte[cp] < 0) return std::nullopt;
    out += static_cast<char>(kAlphabet.to_byte[cp]);
  }
  return out;
}

}  // namespace memra
