// Tokenizer unit tests on tiny hand-written tokenizers: every expected id list below is worked
// out by hand from the vocabulary and merge list written next to it, so these run without the
// Qwen vocabulary and without node (tokenizer_agreement_test covers the real tokenizer).
//
// Byte alphabet used in the hand-written vocabularies: printable ASCII stands for itself,
// space is "Ġ" (U+0120), '\n' is "Ċ" (U+010A), tab is "ĉ" (U+0109).
#include <filesystem>
#include <fstream>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "memra/error.h"
#include "memra/gguf.h"
#include "memra/memory_source.h"
#include "memra/tokenizer.h"
#include "tokenizer/internal.h"

namespace memra {
namespace {

using nlohmann::json;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr const char* kQwen2Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// A tokenizer.json in Qwen's shape; vocab ids are the positions in `vocab`.
json make_json(const std::vector<std::string>& vocab, const std::vector<std::string>& merges,
               const json& added = json::array()) {
  json v = json::object();
  for (size_t i = 0; i < vocab.size(); ++i) v[vocab[i]] = i;
  json m = json::array();
  for (const auto& s : merges) m.push_back(s);  // old "a b" form
  return json{
      {"version", "1.0"},
      {"added_tokens", added},
      {"normalizer", {{"type", "NFC"}}},
      {"pre_tokenizer",
       {{"type", "Sequence"},
        {"pretokenizers",
         json::array({{{"type", "Split"},
                       {"pattern", {{"Regex", kQwen2Regex}}},
                       {"behavior", "Isolated"},
                       {"invert", false}},
                      {{"type", "ByteLevel"},
                       {"add_prefix_space", false},
                       {"trim_offsets", false},
                       {"use_regex", false}}})}}},
      {"post_processor", nullptr},
      {"decoder", {{"type", "ByteLevel"}}},
      {"model",
       {{"type", "BPE"}, {"dropout", nullptr}, {"unk_token", nullptr},
        {"continuing_subword_prefix", ""}, {"end_of_word_suffix", ""}, {"fuse_unk", false},
        {"byte_fallback", false}, {"ignore_merges", false}, {"vocab", v}, {"merges", m}}}};
}

json added_token(int id, const std::string& content, bool special) {
  return {{"id", id},         {"content", content}, {"single_word", false}, {"lstrip", false},
          {"rstrip", false},  {"normalized", false}, {"special", special}};
}

// Writes files into a fresh directory per test.
class TempDir {
 public:
  TempDir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = std::filesystem::temp_directory_path() /
           ("memra_tok_" + std::string(info->test_suite_name()) + "_" + info->name() + "_" +
            std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
  }
  ~TempDir() { std::filesystem::remove_all(dir_); }
  std::string write(const std::string& name, const std::string& text) const {
    auto p = dir_ / name;
    std::ofstream(p, std::ios::binary) << text;
    return p.string();
  }

 private:
  std::filesystem::path dir_;
};

Tokenizer load(const json& j) {
  TempDir d;
  return Tokenizer::from_hf_json(d.write("tokenizer.json", j.dump()));
}

// Expects loading `j` to fail with a message holding every fragment.
void expect_load_error(const json& j, std::initializer_list<const char*> fragments) {
  TempDir d;
  const std::string path = d.write("tokenizer.json", j.dump());
  try {
    Tokenizer::from_hf_json(path);
    ADD_FAILURE() << "loading succeeded; expected an error holding " << *fragments.begin();
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr(path));
    for (const char* f : fragments) EXPECT_THAT(e.what(), HasSubstr(f));
  }
}

// --- the byte alphabet -------------------------------------------------------------------

TEST(TokenizerByteAlphabet, HandCheckedCodePoints) {
  // Bytes that are not printable Latin-1 take U+0100.. in byte order: 0x00..0x20 are the first
  // 33, 0x7F..0xA0 the next 34, 0xAD the last.
  EXPECT_EQ(byte_alphabet_encode(std::string(1, '\0')), "\u0100");
  EXPECT_EQ(byte_alphabet_encode(" "), "\u0120");   // Ġ
  EXPECT_EQ(byte_alphabet_encode("\n"), "\u010A");  // Ċ
  EXPECT_EQ(byte_alphabet_encode("\x7F"), "\u0121");
  EXPECT_EQ(byte_alphabet_encode("\xA0"), "\u0142");
  EXPECT_EQ(byte_alphabet_encode("\xAD"), "\u0143");
  EXPECT_EQ(byte_alphabet_encode("A~\xA1\xFF"), "A~\u00A1\u00FF");  // stand for themselves
}

TEST(TokenizerByteAlphabet, AllBytesRoundTripAndStrangersAreRejected) {
  std::string all;
  for (int b = 0; b < 256; ++b) all += static_cast<char>(b);
  auto enc = byte_alphabet_encode(all);
  auto dec = byte_alphabet_decode(enc);
  ASSERT_TRUE(dec.has_value());
  EXPECT_EQ(*dec, all);
  EXPECT_FALSE(byte_alphabet_decode("\u0144").has_value());  // one past the last
  EXPECT_FALSE(byte_alphabet_decode("\u4E2D").has_value());  // 中
  EXPECT_FALSE(byte_alphabet_decode(" ").has_value());       // raw space is not in the alphabet
  EXPECT_FALSE(byte_alphabet_decode("\xC3").has_value());    // truncated UTF-8
}

// --- BPE merge order ---------------------------------------------------------------------

TEST(TokenizerBpe, LowerRankMergesFirstNotLeftmost) {
  //                           0    1    2    3     4
  const std::vector<std::string> v = {"a", "b", "c", "ab", "bc"};
  // "b c" ranks before "a b": the right pair merges first although "a b" is further left.
  EXPECT_THAT(load(make_json(v, {"b c", "a b"})).encode("abc"), ElementsAre(0, 4));
  EXPECT_THAT(load(make_json(v, {"a b", "b c"})).encode("abc"), ElementsAre(3, 2));
}

TEST(TokenizerBpe, MergedSymbolsMergeAgain) {
  //                           0    1    2    3     4     5
  const std::vector<std::string> v = {"a", "b", "c", "bc", "abc", "ab"};
  // b+c -> bc (rank 0), then a+bc -> abc (rank 1); "a b" (rank 2) never gets its chance.
  EXPECT_THAT(load(make_json(v, {"b c", "a bc", "a b"})).encode("abc"), ElementsAre(4));
  // Without "a bc" the word stops at a + bc.
  EXPECT_THAT(load(make_json(v, {"b c", "a b"})).encode("abc"), ElementsAre(0, 3));
}

TEST(TokenizerBpe, EqualRanksMergeLeftmostFirst) {
  //                           0    1     2
  const std::vector<std::string> v = {"a", "aa", "aaaa"};
  Tokenizer t = load(make_json(v, {"a a"}));
  EXPECT_THAT(t.encode("aaa"), ElementsAre(1, 0));      // (aa)a, not a(aa)
  EXPECT_THAT(t.encode("aaaaa"), ElementsAre(1, 1, 0));  // (aa)(aa)a
  Tokenizer t2 = load(make_json(v, {"a a", "aa aa"}));
  EXPECT_THAT(t2.encode("aaaaa"), ElementsAre(2, 0));
  EXPECT_THAT(t2.encode("a"), ElementsAre(0));
}

TEST(TokenizerBpe, LongWordMergesCompletely) {
  // 4096 'a's with merges doubling up to 'a'x16: 256 tokens of 16 a's, ids hand-indexed.
  std::vector<std::string> v = {"a", "aa", "aaaa", "aaaaaaaa", std::string(16, 'a')};
  Tokenizer t = load(make_json(v, {"a a", "aa aa", "aaaa aaaa", "aaaaaaaa aaaaaaaa"}));
  auto ids = t.encode(std::string(4096 + 7, 'a'));
  ASSERT_EQ(ids.size(), 256u + 3u);  // 7 = 4 + 2 + 1
  for (size_t i = 0; i < 256; ++i) ASSERT_EQ(ids[i], 4) << i;
  EXPECT_THAT(std::vector<int32_t>(ids.end() - 3, ids.end()), ElementsAre(2, 1, 0));
}

TEST(TokenizerBpe, RepeatedWordsAgreeWithFirstEncodingAcrossThreads) {
  //                           0    1    2     3      4
  const std::vector<std::string> v = {"a", "b", "Ġ", "ab", "Ġab"};
  Tokenizer t = load(make_json(v, {"a b", "Ġ ab"}));
  std::string text;
  std::vector<int32_t> want;
  for (int i = 0; i < 500; ++i) {
    text += i ? " ab" : "ab";
    if (i) want.push_back(4); else want.push_back(3);
  }
  std::vector<std::vector<int32_t>> got(4);
  std::vector<std::thread> th;
  for (int k = 0; k < 4; ++k) th.emplace_back([&, k] { got[k] = t.encode(text); });
  for (auto& x : th) x.join();
  for (int k = 0; k < 4; ++k) EXPECT_EQ(got[k], want) << "thread " << k;
}

TEST(TokenizerBpe, ByteWithoutTokenIsAnErrorNamingTheByte) {
  Tokenizer t = load(make_json({"a"}, {}));
  EXPECT_THAT(t.encode("aaa"), ElementsAre(0, 0, 0));
  try {
    t.encode("ab");
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("0x62"));
  }
}

// --- pre-tokenizer (Qwen2 regex through PCRE2) -------------------------------------------

std::vector<std::string> split(const std::string& s) {
  static Tokenizer t = load(make_json({"a"}, {}));
  return t.pre_tokenize(s);
}

TEST(TokenizerPreTokenize, ContractionsAnyAsciiCase) {
  EXPECT_THAT(split("it's"), ElementsAre("it", "'s"));
  EXPECT_THAT(split("IT'S"), ElementsAre("IT", "'S"));
  EXPECT_THAT(split("you'LL we'Re I'd"), ElementsAre("you", "'LL", " we", "'Re", " I", "'d"));
  EXPECT_THAT(split("don't"), ElementsAre("don", "'t"));
  // "'x" is no contraction: the apostrophe joins the letters as their optional prefix.
  EXPECT_THAT(split("'xyz"), ElementsAre("'xyz"));
}

TEST(TokenizerPreTokenize, CaseFoldingIsAsciiOnly) {
  // U+017F (long s) case-folds to 's' in Unicode; like llama.cpp and transformers.js, memra's
  // contractions are ASCII-only, so "'ſt" is one letter-run piece.
  EXPECT_THAT(split("'\u017Ft"), ElementsAre("'\u017Ft"));
}

TEST(TokenizerPreTokenize, DigitsOneByOne) {
  EXPECT_THAT(split("12345"), ElementsAre("1", "2", "3", "4", "5"));
  EXPECT_THAT(split("$100"), ElementsAre("$", "1", "0", "0"));
  EXPECT_THAT(split("x2"), ElementsAre("x", "2"));
  EXPECT_THAT(split("\u0661\u0662"), ElementsAre("\u0661", "\u0662"));  // Arabic-Indic digits are \p{N}
}

TEST(TokenizerPreTokenize, Whitespace) {
  EXPECT_THAT(split("hello world"), ElementsAre("hello", " world"));
  // \s+(?!\S) leaves the last space to prefix the next word.
  EXPECT_THAT(split("a   b"), ElementsAre("a", "  ", " b"));
  // Spaces before a newline go with it (\s*[\r\n]+).
  EXPECT_THAT(split("a  \nb"), ElementsAre("a", "  \n", "b"));
  EXPECT_THAT(split("a\r\n\r\nb"), ElementsAre("a", "\r\n\r\n", "b"));
  EXPECT_THAT(split("x  "), ElementsAre("x", "  "));
  EXPECT_THAT(split("\t\tx"), ElementsAre("\t", "\tx"));
  EXPECT_THAT(split("   "), ElementsAre("   "));
}

TEST(TokenizerPreTokenize, WhitespaceIsUnicodeWhiteSpace) {
  // \s is Unicode White_Space, as in HF's Oniguruma and llama.cpp: NEL (U+0085) is space, the
  // BOM (U+FEFF, a format character) is not. ECMAScript's \s says the opposite for both, so
  // transformers.js differs here; the agreement corpus leaves these two out.
  EXPECT_THAT(split("x\u0085\u0085y"), ElementsAre("x", "\u0085", "\u0085y"));
  EXPECT_THAT(split("x\uFEFF\uFEFFy"), ElementsAre("x", "\uFEFF\uFEFF", "y"));
  EXPECT_THAT(split("a\u2028b"), ElementsAre("a", "\u2028b"));
}

TEST(TokenizerPreTokenize, PunctuationAndScripts) {
  EXPECT_THAT(split("f(x);\n"), ElementsAre("f", "(x", ");\n"));
  EXPECT_THAT(split("Hello, 世界"), ElementsAre("Hello", ",", " 世界"));
  EXPECT_THAT(split("Hello,世界"), ElementsAre("Hello", ",世界"));
  EXPECT_THAT(split(" ...!?"), ElementsAre(" ...!?"));
  EXPECT_THAT(split("\U0001F600\U0001F600 ok"), ElementsAre("\U0001F600\U0001F600", " ok"));
}

TEST(TokenizerPreTokenize, NfcComposesBeforeSplitting) {
  // NFD "e" + U+0301 becomes U+00E9, a letter, so the word stays whole.
  EXPECT_THAT(split("cafe\u0301!"), ElementsAre("caf\u00E9", "!"));
  // Without the NFC normaliser the combining mark (not \p{L}) splits off.
  json j = make_json({"a"}, {});
  j["normalizer"] = nullptr;
  EXPECT_THAT(load(j).pre_tokenize("cafe\u0301!"), ElementsAre("cafe", "\u0301!"));
}

// --- added tokens ------------------------------------------------------------------------

//                                       0    1    2    3    4    5    6    7
const std::vector<std::string> kSmall = {"a", "b", "<", "|", "x", ">", "y", "Ġ"};

json with_added() {
  return make_json(kSmall, {},
                   json::array({added_token(8, "<|x|>", true), added_token(9, "<|x|>y", true),
                                added_token(10, "<t>", false)}));
}

TEST(TokenizerAddedTokens, MatchedInTextLongestFirst) {
  Tokenizer t = load(with_added());
  EXPECT_THAT(t.encode("a<|x|>b"), ElementsAre(0, 8, 1));
  EXPECT_THAT(t.encode("<|x|>y"), ElementsAre(9));        // the longer token wins
  EXPECT_THAT(t.encode("<|x|>yy"), ElementsAre(9, 6));
  EXPECT_THAT(t.encode("<t><t>"), ElementsAre(10, 10));    // non-special added tokens too
  EXPECT_THAT(t.encode("<|x"), ElementsAre(2, 3, 4));      // incomplete: plain bytes
  EXPECT_EQ(t.spec().types[8], TokenType::Control);
  EXPECT_EQ(t.spec().types[10], TokenType::UserDefined);
}

TEST(TokenizerAddedTokens, SplitBeforeThePreTokenizer) {
  // " <t> a": the space before <t> cannot prefix it; it is its own piece, as in HF.
  Tokenizer t = load(with_added());
  EXPECT_THAT(t.encode(" <t> a"), ElementsAre(7, 10, 7, 0));
}

TEST(TokenizerAddedTokens, NormalisedOnlyBetweenAddedTokens) {
  // '>' + U+0338 composes to U+226F under NFC, but the '>' belongs to <t>, matched first in
  // the raw text; the lone U+0338 after it stays as it is (transformers does the same).
  json j = with_added();
  // U+0338 is bytes CC B8 -> alphabet "Ì" (U+00CC) and "¸" (U+00B8).
  j["model"]["vocab"]["\u00CC"] = 11;
  j["model"]["vocab"]["\u00B8"] = 12;
  Tokenizer t = load(j);
  auto ids = t.encode("<t>\u0338");
  EXPECT_THAT(ids, ElementsAre(10, 11, 12));
  EXPECT_EQ(t.decode(ids), "<t>\u0338");
}

// --- decode ------------------------------------------------------------------------------

TEST(TokenizerDecode, BytesAndAddedTokenText) {
  Tokenizer t = load(with_added());
  std::vector<int32_t> ids = {0, 7, 8, 10, 7, 1};
  EXPECT_EQ(t.decode(ids), "a <|x|><t> b");
  EXPECT_EQ(t.token_bytes(7), " ");
}

TEST(TokenizerDecode, OutOfRangeIdsNameIdAndVocabSize) {
  Tokenizer t = load(with_added());
  for (int32_t bad : {11, -1, 1 << 30}) {
    std::vector<int32_t> ids = {0, bad};
    try {
      t.decode(ids);
      ADD_FAILURE() << "expected an error for id " << bad;
    } catch (const Error& e) {
      EXPECT_THAT(e.what(), HasSubstr("id " + std::to_string(bad)));
      EXPECT_THAT(e.what(), HasSubstr("11 tokens"));
    }
  }
}

TEST(TokenizerEncode, InvalidUtf8IsAnErrorWithOffset) {
  Tokenizer t = load(with_added());
  for (auto [text, off] : {std::pair<std::string, int>{"ab\xFF", 2}, {"a\xC3", 1},
                           {"a\xED\xA0\x80", 1} /* surrogate */, {"\xC0\xAF", 0} /* overlong */}) {
    try {
      t.encode(text);
      ADD_FAILURE() << "expected an error";
    } catch (const Error& e) {
      EXPECT_THAT(e.what(), HasSubstr("invalid UTF-8 at byte offset " + std::to_string(off)));
    }
  }
  EXPECT_TRUE(t.encode("").empty());
}

// --- tokenizer.json errors ---------------------------------------------------------------

TEST(TokenizerHfJson, MissingOrMalformedFile) {
  TempDir d;
  try {
    Tokenizer::from_hf_json("/nonexistent/tokenizer.json");
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("/nonexistent/tokenizer.json: cannot open"));
  }
  const std::string p = d.write("tokenizer.json", "{\"model\": [");
  try {
    Tokenizer::from_hf_json(p);
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("not valid JSON"));
  }
}

TEST(TokenizerHfJson, MissingKeysAreNamed) {
  json j = make_json(kSmall, {});
  j["model"].erase("merges");
  expect_load_error(j, {"model.merges", "missing"});
  j = make_json(kSmall, {});
  j.erase("pre_tokenizer");
  expect_load_error(j, {"pre_tokenizer", "missing"});
}

TEST(TokenizerHfJson, BadMergesAreNamed) {
  expect_load_error(make_json(kSmall, {"ab"}), {"model.merges[0]", "'ab'"});
  expect_load_error(make_json(kSmall, {"a b"}), {"merge 0 'a b'", "'ab' is not in the vocabulary"});
  expect_load_error(make_json(kSmall, {"a q"}), {"'q' is not in the vocabulary"});
  json j = make_json({"a", "b", "ab"}, {});
  j["model"]["merges"] = json::array({json::array({"a", "b"}), 7});
  expect_load_error(j, {"model.merges[1]"});
  // The pair form alone loads and merges.
  j["model"]["merges"] = json::array({json::array({"a", "b"})});
  EXPECT_THAT(load(j).encode("ab"), ElementsAre(2));
}

TEST(TokenizerHfJson, UnsupportedPipelinesAreRefusedByName) {
  json j = make_json(kSmall, {});
  j["model"]["type"] = "WordPiece";
  expect_load_error(j, {"model.type", "WordPiece", "unsupported"});
  j = make_json(kSmall, {});
  j["model"]["byte_fallback"] = true;
  expect_load_error(j, {"model.byte_fallback", "unsupported"});
  j = make_json(kSmall, {});
  j["normalizer"] = {{"type", "NFKC"}};
  expect_load_error(j, {"normalizer", "NFKC", "unsupported"});
  j = make_json(kSmall, {});
  j["pre_tokenizer"]["pretokenizers"][1]["use_regex"] = true;
  expect_load_error(j, {"pre_tokenizer.pretokenizers[1].use_regex"});
  j = make_json(kSmall, {}, json::array({added_token(8, "<m>", true)}));
  j["added_tokens"][0]["lstrip"] = true;
  expect_load_error(j, {"added_tokens[0].lstrip", "<m>"});
  j = make_json(kSmall, {});
  j["decoder"] = nullptr;
  expect_load_error(j, {"decoder"});
}

TEST(TokenizerHfJson, VocabularyShapeErrors) {
  // id 9 with nothing at 8: ids must be dense.
  expect_load_error(make_json(kSmall, {}, json::array({added_token(9, "<q>", true)})),
                    {"id 8 has no token"});
  // An added token that contradicts the vocabulary at its id.
  expect_load_error(make_json(kSmall, {}, json::array({added_token(0, "<q>", true)})),
                    {"added_tokens[0]", "'<q>'", "'a'"});
  json j = make_json(kSmall, {});
  j["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "(unclosed";
  expect_load_error(j, {"regex does not compile"});
}

TEST(TokenizerHfJson, SpecialIdsFromTokenizerConfig) {
  TempDir d;
  const std::string p = d.write("tokenizer.json", with_added().dump());
  EXPECT_EQ(Tokenizer::from_hf_json(p).eos_id(), -1);  // no config: none
  d.write("tokenizer_config.json",
          R"({"bos_token": null, "eos_token": "<|x|>", "pad_token": {"content": "<t>"}})");
  Tokenizer t = Tokenizer::from_hf_json(p);
  EXPECT_EQ(t.bos_id(), -1);
  EXPECT_EQ(t.eos_id(), 8);
  EXPECT_EQ(t.pad_id(), 10);
  d.write("tokenizer_config.json", R"({"eos_token": "<nope>"})");
  try {
    Tokenizer::from_hf_json(p);
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("eos_token"));
    EXPECT_THAT(e.what(), HasSubstr("<nope>"));
  }
}

TEST(TokenizerHfJson, KnownPatternGetsItsGgufName) {
  Tokenizer t = load(make_json(kSmall, {}));
  EXPECT_EQ(t.spec().pre, "qwen2");
  EXPECT_EQ(t.spec().pre_pattern, kQwen2Regex);
  json j = make_json(kSmall, {});
  j["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "\\p{L}+|\\s+|.";
  EXPECT_EQ(load(j).spec().pre, "");  // custom: works, but has no GGUF name
}

// --- GGUF --------------------------------------------------------------------------------

std::unique_ptr<GgufFile> to_gguf(const GgufWriter& w) {
  auto bytes = w.to_bytes();
  return GgufFile::from_bytes(bytes, "tok.gguf");
}

TEST(TokenizerGguf, WrittenSpecReadsBackEqual) {
  TempDir d;
  d.write("tokenizer_config.json", R"({"eos_token": "<|x|>", "pad_token": "<t>"})");
  json j = with_added();
  j["model"]["vocab"]["ab"] = 11;
  j["model"]["merges"] = json::array({"a b"});
  TokenizerSpec spec = read_hf_tokenizer_spec(d.write("tokenizer.json", j.dump()));
  GgufWriter w;
  write_tokenizer_gguf(spec, w);
  auto f = to_gguf(w);
  EXPECT_EQ(f->get_string("tokenizer.ggml.model"), "gpt2");
  EXPECT_EQ(f->get_string("tokenizer.ggml.pre"), "qwen2");
  EXPECT_EQ(f->kv("tokenizer.ggml.eos_token_id")->type(), GgufType::U32);
  EXPECT_EQ(f->kv("tokenizer.ggml.token_type")->elem_type(), GgufType::I32);
  EXPECT_EQ(f->get_string_array("tokenizer.ggml.merges"), std::vector<std::string>{"a b"});
  EXPECT_FALSE(f->has("tokenizer.ggml.bos_token_id"));
  TokenizerSpec back = read_gguf_tokenizer_spec(*f, "tok.gguf");
  EXPECT_EQ(back, spec);
  Tokenizer t = Tokenizer::from_gguf(*f);
  EXPECT_THAT(t.encode("ab<|x|>y"), ElementsAre(11, 9));
  EXPECT_EQ(t.eos_id(), 8);
}

// A GGUF holding `spec`'s keys with one key replaced (or removed when `v` is nullopt).
std::unique_ptr<GgufFile> gguf_with(const std::string& key, std::optional<GgufValue> v) {
  TokenizerSpec spec = load(with_added()).spec();
  GgufWriter w;
  write_tokenizer_gguf(spec, w);
  if (v) w.set(key, *v); else w.remove(key);
  return to_gguf(w);
}

void expect_gguf_error(const GgufFile& f, std::initializer_list<const char*> fragments) {
  try {
    Tokenizer::from_gguf(f);
    ADD_FAILURE() << "expected an error holding " << *fragments.begin();
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("tok.gguf"));
    for (const char* s : fragments) EXPECT_THAT(e.what(), HasSubstr(s));
  }
}

TEST(TokenizerGguf, MissingAndMalformedKeysAreNamed) {
  expect_gguf_error(*gguf_with("tokenizer.ggml.merges", std::nullopt),
                    {"tokenizer.ggml.merges", "missing"});
  expect_gguf_error(*gguf_with("tokenizer.ggml.tokens", std::nullopt),
                    {"tokenizer.ggml.tokens", "missing"});
  expect_gguf_error(*gguf_with("tokenizer.ggml.pre", std::nullopt), {"tokenizer.ggml.pre", "missing"});
  expect_gguf_error(*gguf_with("tokenizer.ggml.merges", GgufValue::string_array({"a b", "ab"})),
                    {"tokenizer.ggml.merges", "entry 1 'ab'"});
  expect_gguf_error(*gguf_with("tokenizer.ggml.token_type", GgufValue::i32_array({1, 1, 1})),
                    {"tokenizer.ggml.token_type", "3 entries", "11"});
  expect_gguf_error(*gguf_with("tokenizer.ggml.eos_token_id", GgufValue::u32(11)),
                    {"tokenizer.ggml.eos_token_id", "11"});
  expect_gguf_error(*gguf_with("tokenizer.ggml.merges", GgufValue::u32(3)),
                    {"tokenizer.ggml.merges"});
}

TEST(TokenizerGguf, UnsupportedModelsAndPreNames) {
  for (const char* model : {"llama", "spm", "bert"})
    expect_gguf_error(*gguf_with("tokenizer.ggml.model", GgufValue::string(model)),
                      {"tokenizer.ggml.model", model, "unsupported"});
  expect_gguf_error(*gguf_with("tokenizer.ggml.pre", GgufValue::string("llama-bpe")),
                    {"tokenizer.ggml.pre", "llama-bpe", "unsupported"});
  TokenizerSpec custom = load(make_json(kSmall, {})).spec();
  custom.pre = "";
  GgufWriter w;
  EXPECT_THROW(write_tokenizer_gguf(custom, w), Error);
}

TEST(TokenizerGguf, FromFileTellsGgufFromTokenizerJsonByMagic) {
  TempDir d;
  const std::string json_path = d.write("tokenizer.json", with_added().dump());
  GgufWriter w;
  write_tokenizer_gguf(Tokenizer::from_file(json_path).spec(), w);
  const std::string gguf_path = d.write("model.bin", "");  // no .gguf suffix: magic decides
  w.write(gguf_path);
  Tokenizer g = Tokenizer::from_file(gguf_path);
  EXPECT_THAT(g.source(), HasSubstr("gguf"));
  EXPECT_THAT(g.encode("a<|x|>y"), ElementsAre(0, 9));
  EXPECT_THROW(Tokenizer::from_file(d.write("empty", "")), Error);
}

TEST(TokenizerGguf, PreNameSelectsTheSplitRegex) {
  // qwen35 keeps combining marks with their letters; qwen2 splits them off. "x" + U+0301 has
  // no precomposed form, so NFC leaves the mark in place for the regex to see.
  TokenizerSpec spec = load(with_added()).spec();
  GgufWriter w;
  write_tokenizer_gguf(spec, w);
  EXPECT_THAT(Tokenizer::from_gguf(*to_gguf(w)).pre_tokenize("x\u0301y z"),
              ElementsAre("x", "\u0301y", " z"));
  w.set_string("tokenizer.ggml.pre", "qwen35");
  EXPECT_THAT(Tokenizer::from_gguf(*to_gguf(w)).pre_tokenize("x\u0301y z"),
              ElementsAre("x\u0301y", " z"));
  // glm4 (GLM-5's GGUF) keeps digits in runs of up to three; qwen2 splits every digit.
  w.set_string("tokenizer.ggml.pre", "glm4");
  EXPECT_THAT(Tokenizer::from_gguf(*to_gguf(w)).pre_tokenize("a 12345"), ElementsAre("a", " ", "123", "45"));
  w.set_string("tokenizer.ggml.pre", "qwen2");
  EXPECT_THAT(Tokenizer::from_gguf(*to_gguf(w)).pre_tokenize("a 12345"),
              ElementsAre("a", " ", "1", "2", "3", "4", "5"));
}

TEST(TokenizerGguf, PaddedVocabularyDecodesPaddingToNothing) {
  TokenizerSpec spec = pad_vocab(load(with_added()).spec(), 16);
  ASSERT_EQ(spec.tokens.size(), 16u);
  EXPECT_EQ(spec.tokens[15], "[PAD15]");
  EXPECT_EQ(spec.types[15], TokenType::Unused);
  GgufWriter w;
  write_tokenizer_gguf(spec, w);
  Tokenizer t = Tokenizer::from_gguf(*to_gguf(w));
  EXPECT_EQ(t.n_tokens(), 16u);
  std::vector<int32_t> ids = {0, 15, 1};
  EXPECT_EQ(t.decode(ids), "ab");
  EXPECT_THAT(t.encode("a<|x|>b"), ElementsAre(0, 8, 1));  // padding changes no encoding
}

}  // namespace
}  // namespace memra

namespace memra {
namespace {

// Tokenizer::for_model: a safetensors model's tokenizer is the tokenizer.json in its directory;
// without one the error names the model (the tools print it for --prompt).
TEST(TokenizerForModel, TokenizerJsonBesideTheWeights) {
  TempDir d;
  const std::string tj = d.write("tokenizer.json", make_json({"a", "b", "c", "ab"}, {"a b"}).dump());
  const std::string dir = std::filesystem::path(tj).parent_path().string();
  const MemorySource in_dir(MetaStyle::Hf, dir);
  EXPECT_THAT(Tokenizer::for_model(in_dir).encode("abc"), ElementsAre(3, 2));
  const MemorySource beside(MetaStyle::Hf, dir + "/model.safetensors");
  EXPECT_THAT(Tokenizer::for_model(beside).encode("ab"), ElementsAre(3));
}

TEST(TokenizerForModel, NoTokenizerIsAnErrorNamingTheModel) {
  TempDir d;
  const std::string dir =
      std::filesystem::path(d.write("config.json", "{}")).parent_path().string();
  const MemorySource src(MetaStyle::Hf, dir);
  try {
    Tokenizer::for_model(src);
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr(dir + ": no tokenizer"));
  }
}

}  // namespace
}  // namespace memra
