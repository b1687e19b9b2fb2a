// Byte-level BPE: added-token matching, NFC, the pre-tokenizer regex (PCRE2), BPE by rank.
//
// The BPE runs on raw bytes, not on GPT-2's printable byte alphabet: each Normal token's
// alphabet string is turned back into the bytes it stands for once, at construction, so that
// encoding never builds alphabet strings. A merge is a pair of token ids -> (rank, merged id).
#include "memra/tokenizer.h"

#include <algorithm>
#include <array>
#include <mutex>
#include <queue>
#include <unordered_map>

#include <pcre2.h>
#include <utf8proc.h>

#include "memra/error.h"
#include "tokenizer/internal.h"

namespace memra {

namespace {

// The split regexes as tokenizer.json spells them; `pre` names as GGUF (llama.cpp) spells them.
// qwen35 keeps combining marks (\p{M}) with their letters (llama.cpp LLAMA_VOCAB_PRE_TYPE_QWEN35).
struct PreTokenizerEntry {
  std::string_view name, pattern;
};
constexpr PreTokenizerEntry kPreTokenizers[] = {
    {"qwen2",
     R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)"},
    {"qwen35",
     R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)"},
    {"glm4",  // GLM-4.5 / GLM-5 (llama.cpp LLAMA_VOCAB_PRE_TYPE_CHATGLM4): digits in runs of up to three
     R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)"},
};

// `(?i:'s|'t|...)` in the pattern means ASCII case only in every implementation we agree with
// (llama.cpp spells it '[sS]|'[tT]..., transformers.js rewrites it the same way), whereas
// PCRE2's Unicode caseless matching would also take "'ſ" (U+017F folds to s). Rewrite each
// (?i:...) group made of plain ASCII literals into explicit [xX] classes.
std::string ascii_caseless_groups(const std::string& p) {
  std::string out;
  size_t i = 0;
  while (i < p.size()) {
    size_t g = p.find("(?i:", i);
    if (g == std::string::npos) break;
    size_t close = p.find(')', g + 4);
    if (close == std::string::npos) break;
    std::string_view body(p.data() + g + 4, close - g - 4);
    bool plain = std::all_of(body.begin(), body.end(), [](char c) {
      return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '\'' || c == '|';
    });
    out.append(p, i, g - i);
    if (!plain) {
      out.append(p, g, close + 1 - g);
    } else {
      out += "(?:";
      for (char c : body) {
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) {
          char lo = c | 0x20, up = lo & ~0x20;
          out += '[';
          out += lo;
          out += up;
          out += ']';
        } else {
          out += c;
        }
      }
      out += ')';
    }
    i = close + 1;
  }
  out.append(p, i, std::string::npos);
  return out;
}

std::string pcre2_message(int code) {
  PCRE2_UCHAR buf[256];
  pcre2_get_error_message(code, buf, sizeof buf);
  return reinterpret_cast<const char*>(buf);
}

// Per-thread match state: PCRE2 match data and a JIT stack may not be shared between threads,
// and a long whitespace run can need more than the JIT's default 32 KiB stack.
struct MatchState {
  pcre2_match_data* md = nullptr;
  pcre2_match_context* mctx = nullptr;
  pcre2_jit_stack* stack = nullptr;
  MatchState() {
    md = pcre2_match_data_create(1, nullptr);
    mctx = pcre2_match_context_create(nullptr);
    stack = pcre2_jit_stack_create(64 * 1024, 16 * 1024 * 1024, nullptr);
    if (stack) pcre2_jit_stack_assign(mctx, nullptr, stack);
  }
  ~MatchState() {
    pcre2_jit_stack_free(stack);
    pcre2_match_context_free(mctx);
    pcre2_match_data_free(md);
  }
};

// Offset of the first byte that is not part of valid UTF-8, or npos.
size_t first_invalid_utf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    if (static_cast<unsigned char>(s[i]) < 0x80) {
      ++i;
      continue;
    }
    utf8proc_int32_t cp;
    auto n = utf8proc_iterate(reinterpret_cast<const utf8proc_uint8_t*>(s.data() + i),
                              static_cast<utf8proc_ssize_t>(s.size() - i), &cp);
    if (n <= 0) return i;
    i += static_cast<size_t>(n);
  }
  return std::string_view::npos;
}

bool is_ascii(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return static_cast<unsigned char>(c) < 0x80; });
}

std::string nfc(std::string_view s) {
  if (is_ascii(s)) return std::string(s);  // ASCII has nothing to compose
  utf8proc_uint8_t* out = nullptr;
  auto n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(s.data()),
                        static_cast<utf8proc_ssize_t>(s.size()), &out,
                        static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE));
  if (n < 0) fail("NFC normalisation failed: ", utf8proc_errmsg(n));
  std::string r(reinterpret_cast<const char*>(out), static_cast<size_t>(n));
  std::free(out);
  return r;
}

std::string_view type_name(TokenType t) {
  switch (t) {
    case TokenType::Undefined: return "undefined";
    case TokenType::Normal: return "normal";
    case TokenType::Unknown: return "unknown";
    case TokenType::Control: return "control";
    case TokenType::UserDefined: return "user-defined";
    case TokenType::Unused: return "unused";
    case TokenType::Byte: return "byte";
  }
  return "?";
}

}  // namespace

std::optional<std::string> pre_tokenizer_pattern(std::string_view pre) {
  for (const auto& e : kPreTokenizers)
    if (e.name == pre) return std::string(e.pattern);
  return std::nullopt;
}

std::string pre_tokenizer_name_for_pattern(std::string_view pattern) {
  for (const auto& e : kPreTokenizers)
    if (e.pattern == pattern) return std::string(e.name);
  return "";
}

struct Tokenizer::Impl {
  TokenizerSpec spec;
  std::string source;
  std::vector<std::string> bytes_of;                  // id -> what decode emits
  std::unordered_map<std::string, int32_t> by_spell;  // spec spelling -> id
  std::array<int32_t, 256> byte_token{};              // byte -> its single-byte Normal token, -1
  struct Merge {
    int32_t rank, id;
  };
  std::unordered_map<uint64_t, Merge> merges;  // (left id << 32 | right id) -> merge
  // Added tokens by first byte, longest first: leftmost-longest matching in the raw text.
  std::array<std::vector<std::pair<std::string, int32_t>>, 256> added_by_byte;
  pcre2_code* re = nullptr;

  // Piece -> ids; looked up by string_view (no allocation on a hit).
  struct PieceHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  mutable std::mutex cache_mu;
  mutable std::unordered_map<std::string, std::vector<int32_t>, PieceHash, std::equal_to<>> cache;
  static constexpr size_t kCacheMax = 1 << 16;

  ~Impl() { pcre2_code_free(re); }

  static uint64_t key(int32_t a, int32_t b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  }

  void build();
  void split(std::string_view text, std::vector<std::string_view>& out) const;
  void bpe(std::string_view piece, std::vector<int32_t>& out) const;
  void encode_plain(std::string_view text, std::vector<int32_t>& out) const;
};

void Tokenizer::Impl::build() {
  const auto& s = spec;
  const size_t n = s.tokens.size();
  if (n == 0) fail(source, ": empty vocabulary");
  if (n > static_cast<size_t>(INT32_MAX)) fail(source, ": ", n, " tokens do not fit int32 ids");
  if (s.types.size() != n)
    fail(source, ": ", n, " tokens but ", s.types.size(), " token types");
  byte_token.fill(-1);
  bytes_of.resize(n);
  by_spell.reserve(n * 2);
  std::unordered_map<std::string, int32_t> normal_by_bytes;
  normal_by_bytes.reserve(n * 2);
  for (size_t i = 0; i < n; ++i) {
    const auto id = static_cast<int32_t>(i);
    const std::string& t = s.tokens[i];
    by_spell.emplace(t, id);  // first spelling wins, as in a vocab map
    switch (s.types[i]) {
      case TokenType::Normal: {
        auto b = byte_alphabet_decode(t);
        if (!b)
          fail(source, ": token ", id, " '", t, "' (normal) is not in the byte-level alphabet");
        bytes_of[i] = *b;
        normal_by_bytes.emplace(*b, id);
        if (b->size() == 1) {
          auto& slot = byte_token[static_cast<unsigned char>((*b)[0])];
          if (slot < 0) slot = id;
        }
        break;
      }
      case TokenType::Control:
      case TokenType::UserDefined:
        if (t.empty()) fail(source, ": added token ", id, " has empty text");
        if (first_invalid_utf8(t) != std::string::npos)
          fail(source, ": added token ", id, " is not valid UTF-8");
        bytes_of[i] = t;
        added_by_byte[static_cast<unsigned char>(t[0])].emplace_back(t, id);
        break;
      case TokenType::Unused:
        break;  // padding rows: never produced, decode to nothing (as llama.cpp)
      default:
        fail(source, ": token ", id, " '", t, "' has type ", type_name(s.types[i]), " (",
             static_cast<int32_t>(s.types[i]), "), unsupported for byte-level BPE");
    }
  }
  for (auto& v : added_by_byte)
    std::stable_sort(v.begin(), v.end(),
                     [](const auto& a, const auto& b) { return a.first.size() > b.first.size(); });

  merges.reserve(s.merges.size() * 2);
  for (size_t r = 0; r < s.merges.size(); ++r) {
    const auto& [a, b] = s.merges[r];
    auto ia = by_spell.find(a), ib = by_spell.find(b), im = by_spell.find(a + b);
    if (ia == by_spell.end() || ib == by_spell.end() || im == by_spell.end()) {
      const std::string& missing = ia == by_spell.end() ? a : ib == by_spell.end() ? b : a + b;
      fail(source, ": merge ", r, " '", a, " ", b, "': '", missing, "' is not in the vocabulary");
    }
    // Duplicate pairs keep their first (lowest) rank, as HF's merge map does.
    merges.emplace(key(ia->second, ib->second), Merge{static_cast<int32_t>(r), im->second});
  }

  auto check_id = [&](int64_t id, const char* what) {
    if (id < -1 || id >= static_cast<int64_t>(n))
      fail(source, ": ", what, " id ", id, " outside the vocabulary (", n, " tokens)");
  };
  check_id(s.bos_id, "bos");
  check_id(s.eos_id, "eos");
  check_id(s.pad_id, "pad");

  std::string pattern = s.pre_pattern;
  if (pattern.empty()) {
    auto p = pre_tokenizer_pattern(s.pre);
    if (!p) fail(source, ": unknown pre-tokenizer '", s.pre, "' (known: qwen2, qwen35, glm4)");
    pattern = *p;
  }
  pattern = ascii_caseless_groups(pattern);
  int err = 0;
  PCRE2_SIZE err_off = 0;
  re = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                     PCRE2_UTF | PCRE2_UCP, &err, &err_off, nullptr);
  if (!re)
    fail(source, ": pre-tokenizer regex does not compile at offset ", err_off, ": ",
         pcre2_message(err), " (pattern ", pattern, ")");
  pcre2_jit_compile(re, PCRE2_JIT_COMPLETE);  // the interpreter is the fallback; same result
}

// HF's Split with behavior "Isolated": every match is a piece, and so is any stretch the
// regex skipped (the Qwen patterns cover every character, so there are none in practice).
void Tokenizer::Impl::split(std::string_view text, std::vector<std::string_view>& out) const {
  thread_local MatchState st;
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t off = 0, gap = 0;  // gap: start of text not yet covered by a piece
  while (off < text.size()) {
    int rc = pcre2_match(re, subject, text.size(), off, PCRE2_NO_UTF_CHECK, st.md, st.mctx);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) fail(source, ": pre-tokenizer regex failed at byte ", off, ": ", pcre2_message(rc));
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(st.md);
    size_t b = ov[0], e = ov[1];
    if (e == b) {  // an empty match covers nothing: step over one character
      off = b + 1;
      while (off < text.size() && (static_cast<unsigned char>(text[off]) & 0xC0) == 0x80) ++off;
      continue;
    }
    if (b > gap) out.push_back(text.substr(gap, b - gap));
    out.push_back(text.substr(b, e - b));
    off = gap = e;
  }
  if (gap < text.size()) out.push_back(text.substr(gap));
}

// Merges the lowest-ranked adjacent pair first, the leftmost on equal ranks, until no pair of
// the word has a merge. A heap of (rank, position) with stale entries skipped, O(n log n).
void Tokenizer::Impl::bpe(std::string_view piece, std::vector<int32_t>& out) const {
  const size_t n = piece.size();
  std::vector<int32_t> id(n);
  for (size_t i = 0; i < n; ++i) {
    const auto b = static_cast<unsigned char>(piece[i]);
    if (byte_token[b] < 0)
      fail(source, ": no token for byte 0x", "0123456789abcdef"[b >> 4], "0123456789abcdef"[b & 15],
           " (the vocabulary lacks its byte-level token)");
    id[i] = byte_token[b];
  }
  if (n == 1) {
    out.push_back(id[0]);
    return;
  }
  // Symbols live at their first byte's index; next/prev link the surviving ones.
  std::vector<int32_t> next(n), prev(n);
  for (size_t i = 0; i < n; ++i) {
    next[i] = i + 1 < n ? static_cast<int32_t>(i + 1) : -1;
    prev[i] = static_cast<int32_t>(i) - 1;
  }
  using Entry = std::pair<int32_t, int32_t>;  // (rank, left position): min-heap order
  std::priority_queue<Entry, std::vector<Entry>, std::greater<>> heap;
  auto push = [&](int32_t left) {
    if (left < 0 || next[left] < 0) return;
    auto it = merges.find(key(id[left], id[next[left]]));
    if (it != merges.end()) heap.emplace(it->second.rank, left);
  };
  for (size_t i = 0; i + 1 < n; ++i) push(static_cast<int32_t>(i));
  std::vector<bool> dead(n, false);
  while (!heap.empty()) {
    auto [rank, left] = heap.top();
    heap.pop();
    if (dead[left] || next[left] < 0) continue;
    const int32_t right = next[left];
    auto it = merges.find(key(id[left], id[right]));
    if (it == merges.end() || it->second.rank != rank) continue;  // the pair changed since
    id[left] = it->second.id;
    dead[right] = true;
    next[left] = next[right];
    if (next[right] >= 0) prev[next[right]] = left;
    push(prev[left]);
    push(left);
  }
  for (int32_t i = 0; i >= 0; i = next[i]) out.push_back(id[i]);
}

void Tokenizer::Impl::encode_plain(std::string_view text, std::vector<int32_t>& out) const {
  if (text.empty()) return;
  const std::string normal = spec.nfc ? nfc(text) : std::string(text);
  std::vector<std::string_view> pieces;
  split(normal, pieces);
  for (std::string_view p : pieces) {
    {
      std::lock_guard lock(cache_mu);
      auto it = cache.find(p);
      if (it != cache.end()) {
        out.insert(out.end(), it->second.begin(), it->second.end());
        continue;
      }
    }
    const size_t start = out.size();
    bpe(p, out);
    std::lock_guard lock(cache_mu);
    if (cache.size() >= kCacheMax) cache.clear();
    cache.emplace(std::string(p), std::vector<int32_t>(out.begin() + start, out.end()));
  }
}

Tokenizer::Tokenizer(TokenizerSpec spec, std::string source) : impl_(std::make_unique<Impl>()) {
  impl_->spec = std::move(spec);
  impl_->source = std::move(source);
  impl_->build();
}

Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

std::vector<int32_t> Tokenizer::encode(std::string_view text) const {
  if (size_t bad = first_invalid_utf8(text); bad != std::string_view::npos)
    fail(impl_->source, ": encode: invalid UTF-8 at byte offset ", bad, " of ", text.size());
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 1);
  size_t plain = 0, i = 0;
  while (i < text.size()) {
    const auto& cands = impl_->added_by_byte[static_cast<unsigned char>(text[i])];
    const std::pair<std::string, int32_t>* hit = nullptr;
    for (const auto& c : cands)
      if (text.compare(i, c.first.size(), c.first) == 0) {
        hit = &c;
        break;
      }
    if (!hit) {
      ++i;
      continue;
    }
    impl_->encode_plain(text.substr(plain, i - plain), out);
    out.push_back(hit->second);
    i += hit->first.size();
    plain = i;
  }
  impl_->encode_plain(text.substr(plain), out);
  return out;
}

std::string Tokenizer::decode(std::span<const int32_t> ids) const {
  std::string out;
  const auto n = impl_->bytes_of.size();
  for (size_t k = 0; k < ids.size(); ++k) {
    const int32_t id = ids[k];
    if (id < 0 || static_cast<size_t>(id) >= n)
      fail(impl_->source, ": decode: id ", id, " (position ", k, ") outside the vocabulary of ", n,
           " tokens");
    out += impl_->bytes_of[static_cast<size_t>(id)];
  }
  return out;
}

std::string Tokenizer::token_bytes(int32_t id) const { return decode(std::span(&id, 1)); }

std::vector<std::string> Tokenizer::pre_tokenize(std::string_view text) const {
  if (size_t bad = first_invalid_utf8(text); bad != std::string_view::npos)
    fail(impl_->source, ": pre_tokenize: invalid UTF-8 at byte offset ", bad);
  const std::string normal = impl_->spec.nfc ? nfc(text) : std::string(text);
  std::vector<std::string_view> pieces;
  impl_->split(normal, pieces);
  return {pieces.begin(), pieces.end()};
}

std::optional<int32_t> Tokenizer::find_token(std::string_view token) const {
  auto it = impl_->by_spell.find(std::string(token));
  if (it == impl_->by_spell.end()) return std::nullopt;
  return it->second;
}

size_t Tokenizer::n_tokens() const { return impl_->bytes_of.size(); }
int32_t Tokenizer::bos_id() const { return static_cast<int32_t>(impl_->spec.bos_id); }
int32_t Tokenizer::eos_id() const { return static_cast<int32_t>(impl_->spec.eos_id); }
int32_t Tokenizer::pad_id() const { return static_cast<int32_t>(impl_->spec.pad_id); }
const TokenizerSpec& Tokenizer::spec() const { return impl_->spec; }
const std::string& Tokenizer::source() const { return impl_->source; }

TokenizerSpec pad_vocab(TokenizerSpec spec, size_t n) {
  for (size_t i = spec.tokens.size(); i < n; ++i) {
    spec.tokens.push_back("[PAD" + std::to_string(i) + "]");
    spec.types.push_back(TokenType::Unused);
  }
  return spec;
}

}  // namespace memra
