// GGUF writer and reader: byte layout against hand-laid bytes from the spec, round trips of
// every value type and of tensors of several block types, alignment and offsets, the typed
// getters' errors, and the writer's output read back by an independent Python reader
// (test/fixtures/gguf_check.py).
//
// Malformed input is in gguf_malformed_test.cpp.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <unistd.h>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "memra/error.h"
#include "memra/gguf.h"
#include "memra/testing/errors.h"

namespace memra {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::vector<std::byte> bytes_of(std::initializer_list<int> v) {
  std::vector<std::byte> out;
  for (int x : v) out.push_back(static_cast<std::byte>(x));
  return out;
}

// Deterministic filler: byte i of tensor `seed` (the writer must not interpret tensor data).
std::vector<std::byte> filler(size_t n, unsigned seed) {
  std::vector<std::byte> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<std::byte>((i * 31 + seed * 17 + 5) & 0xff);
  return v;
}

// Files go to a per-process directory (parallel runs of this binary, e.g. a sanitizer build
// next to the default one, must not share files), removed when the tests end.
std::filesystem::path temp_dir() {
  return std::filesystem::temp_directory_path() /
         ("memra_gguf_test_" + std::to_string(::getpid()));
}
std::string temp_path(const std::string& name) {
  std::filesystem::create_directories(temp_dir());
  return (temp_dir() / name).string();
}
class TempDirCleanup : public ::testing::Environment {
 public:
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(temp_dir(), ec);
  }
};
[[maybe_unused]] ::testing::Environment* const kCleanup =
    ::testing::AddGlobalTestEnvironment(new TempDirCleanup);

using memra::testing::error_message;

// --- the writer against the spec, byte by byte ---------------------------------------------

// Header + one u32 kv + one f32 tensor, laid out by hand from the spec:
//   magic, u32 version, i64 n_tensors, i64 n_kv, kv (u64 len, key, u32 type, value),
//   tensor info (u64 len, name, u32 n_dims, i64 ne[], u32 type, u64 offset),
//   zero padding to 32, tensor data padded with zeros to 32.
// The writer appends general.quantization_version = 2 (u32) after the user's keys even though
// no tensor is quantized (llama.cpp's converter writes it into every file).
TEST(GgufWriterBytes, MatchesHandLaidSpecLayout) {
  const std::vector<std::byte> expected = bytes_of({
      'G', 'G', 'U', 'F',                              // 0: magic
      3, 0, 0, 0,                                      // 4: version 3
      1, 0, 0, 0, 0, 0, 0, 0,                          // 8: n_tensors 1
      2, 0, 0, 0, 0, 0, 0, 0,                          // 16: n_kv 2 (1 + quantization_version)
      3, 0, 0, 0, 0, 0, 0, 0, 'a', '.', 'b',           // 24: key "a.b"
      4, 0, 0, 0,                                      // 35: type u32
      7, 0, 0, 0,                                      // 39: value 7
      28, 0, 0, 0, 0, 0, 0, 0,                         // 43
      'g', 'e', 'n', 'e', 'r', 'a', 'l', '.', 'q', 'u', 'a', 'n', 't', 'i', 'z', 'a', 't', 'i',
      'o', 'n', '_', 'v', 'e', 'r', 's', 'i', 'o', 'n',
      4, 0, 0, 0, 2, 0, 0, 0,                          // 79: u32 2
      1, 0, 0, 0, 0, 0, 0, 0, 'w',                     // 87: name "w"
      1, 0, 0, 0,                                      // 96: n_dims 1
      2, 0, 0, 0, 0, 0, 0, 0,                          // 100: ne[0] 2
      0, 0, 0, 0,                                      // 108: type f32
      0, 0, 0, 0, 0, 0, 0, 0,                          // 112: offset 0
      0, 0, 0, 0, 0, 0, 0, 0,                          // 120: pad to 128
      0x00, 0x00, 0x80, 0x3f, 0x00, 0x00, 0x00, 0xc0,  // 128: 1.0f, -2.0f
      0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,  // 136: pad to 160
      0, 0, 0, 0, 0, 0, 0, 0});
  ASSERT_EQ(expected.size(), 160u);

  GgufWriter w;
  w.set_u32("a.b", 7);
  const float data[2] = {1.0f, -2.0f};
  w.add_tensor("w", DType::F32, {2}, std::as_bytes(std::span(data)));
  EXPECT_EQ(w.to_bytes(), expected);

  auto f = GgufFile::from_bytes(expected, "hand.gguf");
  EXPECT_EQ(f->version(), 3u);
  EXPECT_EQ(f->alignment(), 32u);
  EXPECT_EQ(f->data_offset(), 128u);
  EXPECT_EQ(f->get_int("a.b"), 7);
  EXPECT_EQ(f->get_int("general.quantization_version"), 2);
  const TensorView& t = f->tensor("w");
  EXPECT_EQ(t.type, DType::F32);
  EXPECT_THAT(t.ne, ElementsAre(2));
  ASSERT_EQ(t.data.size(), 8u);
  EXPECT_EQ(f->tensor_offset("w"), 0u);
  EXPECT_EQ(std::memcmp(t.data.data(), expected.data() + 128, 8), 0);
}

// A Q8_0 tensor (quantized) with a string array and a custom alignment of 16: the writer must
// append general.quantization_version = 2 (u32) after the user's keys and pad to 16.
TEST(GgufWriterBytes, QuantizedStringArrayAlignment16) {
  const std::vector<std::byte> q = filler(34, 1);  // one Q8_0 block
  std::vector<std::byte> expected = bytes_of({
      'G', 'G', 'U', 'F', 3, 0, 0, 0,
      1, 0, 0, 0, 0, 0, 0, 0,                          // n_tensors 1
      3, 0, 0, 0, 0, 0, 0, 0,                          // n_kv 3 (2 + quantization_version)
      17, 0, 0, 0, 0, 0, 0, 0,                         // 24
      'g', 'e', 'n', 'e', 'r', 'a', 'l', '.', 'a', 'l', 'i', 'g', 'n', 'm', 'e', 'n', 't',
      4, 0, 0, 0, 16, 0, 0, 0,                         // 49: u32 16
      1, 0, 0, 0, 0, 0, 0, 0, 's',                     // 57: key "s"
      9, 0, 0, 0, 8, 0, 0, 0,                          // 66: array of string
      2, 0, 0, 0, 0, 0, 0, 0,                          // 74: count 2
      2, 0, 0, 0, 0, 0, 0, 0, 'h', 'i',                // 82: "hi"
      0, 0, 0, 0, 0, 0, 0, 0,                          // 92: ""
      28, 0, 0, 0, 0, 0, 0, 0,                         // 100
      'g', 'e', 'n', 'e', 'r', 'a', 'l', '.', 'q', 'u', 'a', 'n', 't', 'i', 'z', 'a', 't', 'i',
      'o', 'n', '_', 'v', 'e', 'r', 's', 'i', 'o', 'n',
      4, 0, 0, 0, 2, 0, 0, 0,                          // 136: u32 2
      1, 0, 0, 0, 0, 0, 0, 0, 'q',                     // 144: name "q"
      2, 0, 0, 0,                                      // 153: n_dims 2
      32, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, // 157: ne {32, 1}
      8, 0, 0, 0,                                      // 173: q8_0
      0, 0, 0, 0, 0, 0, 0, 0,                          // 177: offset 0
      0, 0, 0, 0, 0, 0, 0});                           // 185: pad to 192
  ASSERT_EQ(expected.size(), 192u);
  expected.insert(expected.end(), q.begin(), q.end());  // 192..226
  expected.resize(192 + 48);                            // pad 34 to 48

  GgufWriter w;
  w.set_u32("general.alignment", 16);
  w.set_string_array("s", {"hi", ""});
  w.add_tensor("q", DType::Q8_0, {32, 1}, q);
  EXPECT_EQ(w.to_bytes(), expected);

  auto f = GgufFile::from_bytes(expected, "q.gguf");
  EXPECT_EQ(f->alignment(), 16u);
  EXPECT_EQ(f->data_offset(), 192u);
  EXPECT_EQ(f->get_int("general.quantization_version"), 2);
  EXPECT_EQ(f->kv("general.quantization_version")->type(), GgufType::U32);
  EXPECT_THAT(f->get_string_array("s"), ElementsAre("hi", ""));
}

// --- round trips ----------------------------------------------------------------------------

TEST(GgufRoundTrip, EveryScalarType) {
  GgufWriter w;
  w.set_u8("u8", 255);
  w.set_i8("i8", -128);
  w.set_u16("u16", 65535);
  w.set_i16("i16", -32768);
  w.set_u32("u32", 4294967295u);
  w.set_i32("i32", std::numeric_limits<int32_t>::min());
  w.set_u64("u64", std::numeric_limits<uint64_t>::max());
  w.set_i64("i64", std::numeric_limits<int64_t>::min());
  w.set_f32("f32", -0.1f);
  w.set_f64("f64", 1e-300);
  w.set_bool("t", true);
  w.set_bool("f", false);
  w.set_string("s", std::string("qwen3 \xe4\xb8\xad\0x", 11));  // UTF-8 and an embedded NUL
  w.set_string("empty", "");
  auto f = GgufFile::from_bytes(w.to_bytes(), "scalars.gguf");

  EXPECT_THAT(f->keys(), ElementsAre("u8", "i8", "u16", "i16", "u32", "i32", "u64", "i64", "f32",
                                     "f64", "t", "f", "s", "empty",
                                     "general.quantization_version"));
  const std::pair<const char*, GgufType> types[] = {
      {"u8", GgufType::U8},   {"i8", GgufType::I8},   {"u16", GgufType::U16},
      {"i16", GgufType::I16}, {"u32", GgufType::U32}, {"i32", GgufType::I32},
      {"u64", GgufType::U64}, {"i64", GgufType::I64}, {"f32", GgufType::F32},
      {"f64", GgufType::F64}, {"t", GgufType::BOOL},  {"s", GgufType::STRING}};
  for (auto [key, type] : types) {
    ASSERT_NE(f->kv(key), nullptr) << key;
    EXPECT_EQ(f->kv(key)->type(), type) << key;
    EXPECT_FALSE(f->kv(key)->is_array()) << key;
  }
  EXPECT_EQ(f->get_int("u8"), 255);
  EXPECT_EQ(f->get_int("i8"), -128);
  EXPECT_EQ(f->get_int("u16"), 65535);
  EXPECT_EQ(f->get_int("i16"), -32768);
  EXPECT_EQ(f->get_int("u32"), 4294967295LL);
  EXPECT_EQ(f->get_int("i32"), std::numeric_limits<int32_t>::min());
  EXPECT_EQ(f->kv("u64")->as_uint(), std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(f->get_int("i64"), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(f->get_float("f32"), static_cast<double>(-0.1f));
  EXPECT_EQ(f->get_float("f64"), 1e-300);
  EXPECT_TRUE(f->get_bool("t"));
  EXPECT_FALSE(f->get_bool("f"));
  EXPECT_EQ(f->get_string("s"), std::string("qwen3 \xe4\xb8\xad\0x", 11));
  EXPECT_EQ(f->get_string("empty"), "");
  EXPECT_EQ(f->tensors().size(), 0u);
}

TEST(GgufRoundTrip, ArraysOfEveryElementType) {
  GgufWriter w;
  w.set_u8_array("u8", {0, 1, 255});
  w.set_i8_array("i8", {-128, 0, 127});
  w.set_u16_array("u16", {0, 65535});
  w.set_i16_array("i16", {-32768, 32767});
  w.set_u32_array("u32", {1, 4294967295u});
  w.set_i32_array("i32", {-1, 2, -3});
  w.set_u64_array("u64", {0, 1ull << 63});
  w.set_i64_array("i64", {std::numeric_limits<int64_t>::min(), 5});
  w.set_f32_array("f32", {0.5f, -1.25f, 3e38f});
  w.set_f64_array("f64", {0.1, -2.5});
  w.set_bool_array("bool", {true, false, true});
  w.set_string_array("str", {"a", "", "\xc4\xa0hello", std::string(300, 'x')});
  w.set_i32_array("empty", {});
  w.set_string_array("empty_str", {});
  auto f = GgufFile::from_bytes(w.to_bytes(), "arrays.gguf");

  auto check_array = [&](const char* key, GgufType elem, uint64_t n) {
    const GgufValue* v = f->kv(key);
    ASSERT_NE(v, nullptr) << key;
    EXPECT_EQ(v->type(), GgufType::ARRAY) << key;
    EXPECT_EQ(v->elem_type(), elem) << key;
    EXPECT_EQ(v->count(), n) << key;
  };
  check_array("u8", GgufType::U8, 3);
  check_array("i8", GgufType::I8, 3);
  check_array("u16", GgufType::U16, 2);
  check_array("i16", GgufType::I16, 2);
  check_array("u32", GgufType::U32, 2);
  check_array("i32", GgufType::I32, 3);
  check_array("u64", GgufType::U64, 2);
  check_array("i64", GgufType::I64, 2);
  check_array("f32", GgufType::F32, 3);
  check_array("f64", GgufType::F64, 2);
  check_array("bool", GgufType::BOOL, 3);
  check_array("str", GgufType::STRING, 4);
  check_array("empty", GgufType::I32, 0);
  check_array("empty_str", GgufType::STRING, 0);

  EXPECT_THAT(f->get_int_array("u8"), ElementsAre(0, 1, 255));
  EXPECT_THAT(f->get_int_array("i8"), ElementsAre(-128, 0, 127));
  EXPECT_THAT(f->get_int_array("u16"), ElementsAre(0, 65535));
  EXPECT_THAT(f->get_int_array("i16"), ElementsAre(-32768, 32767));
  EXPECT_THAT(f->get_int_array("u32"), ElementsAre(1, 4294967295LL));
  EXPECT_THAT(f->get_int_array("i32"), ElementsAre(-1, 2, -3));
  EXPECT_EQ(f->kv("u64")->int_at(0), 0);
  EXPECT_THAT(error_message([&] { f->get_int_array("u64"); }),
              HasSubstr("u64 value 9223372036854775808 does not fit int64"));
  EXPECT_THAT(f->get_int_array("i64"), ElementsAre(std::numeric_limits<int64_t>::min(), 5));
  EXPECT_THAT(f->get_float_array("f32"),
              ElementsAre(0.5, -1.25, static_cast<double>(3e38f)));
  EXPECT_THAT(f->get_float_array("f64"), ElementsAre(0.1, -2.5));
  EXPECT_THAT(f->get_float_array("i32"), ElementsAre(-1.0, 2.0, -3.0));
  EXPECT_TRUE(f->kv("bool")->bool_at(0));
  EXPECT_FALSE(f->kv("bool")->bool_at(1));
  EXPECT_THAT(f->get_string_array("str"),
              ElementsAre("a", "", "\xc4\xa0hello", std::string(300, 'x')));
  EXPECT_TRUE(f->get_int_array("empty").empty());
  EXPECT_TRUE(f->get_string_array("empty_str").empty());
}

// The values the writer was given come back equal, value by value (GgufValue::operator==
// compares type, element type and bytes).
TEST(GgufRoundTrip, ValuesCompareEqual) {
  const std::vector<std::pair<std::string, GgufValue>> values = {
      {"a", GgufValue::f32(std::numeric_limits<float>::quiet_NaN())},
      {"b", GgufValue::f64(-0.0)},
      {"c", GgufValue::u16_array({1, 2, 3})},
      {"d", GgufValue::string_array({"x", "yy"})},
      {"e", GgufValue::boolean(true)}};
  GgufWriter w;
  for (const auto& [k, v] : values) w.set(k, v);
  auto f = GgufFile::from_bytes(w.to_bytes());
  for (const auto& [k, v] : values) EXPECT_TRUE(*f->kv(k) == v) << k;
  EXPECT_FALSE(*f->kv("a") == GgufValue::f32(0.0f));
  EXPECT_FALSE(*f->kv("c") == GgufValue::u32_array({1, 2, 3}));
}

struct TensorCase {
  std::string name;
  DType type;
  std::vector<int64_t> ne;
  size_t nbytes;  // worked out by hand from the block table
};

// Tensors of several types and 1..4 dims: data bytes, shapes and offsets. Offsets are the
// padded running sums, worked out here by hand.
TEST(GgufRoundTrip, TensorsOfSeveralTypes) {
  const std::vector<TensorCase> cases = {
      {"f32.1d", DType::F32, {5}, 20},                       // offset 0, padded 32
      {"f16.2d", DType::F16, {3, 2}, 12},                    // offset 32, padded 32
      {"bf16.3d", DType::BF16, {4, 2, 3}, 48},               // offset 64, padded 64
      {"q8_0.2d", DType::Q8_0, {64, 3}, 2 * 34 * 3},         // offset 128, 204 padded 224
      {"nvfp4.4d", DType::NVFP4, {128, 1, 2, 2}, 2 * 36 * 4},  // offset 352, 288 padded 288
      {"mxfp4.1d", DType::MXFP4, {32}, 17},                  // offset 640
      {"empty", DType::F32, {0, 4}, 0},                      // offset 672, zero bytes
  };
  const uint64_t offsets[] = {0, 32, 64, 128, 352, 640, 672};
  GgufWriter w;
  w.set_string("general.architecture", "test");
  for (size_t i = 0; i < cases.size(); ++i) {
    const TensorCase& c = cases[i];
    // The hand-worked sizes agree with the block table.
    int64_t rows = 1;
    for (size_t d = 1; d < c.ne.size(); ++d) rows *= c.ne[d];
    ASSERT_EQ(static_cast<size_t>(row_bytes(c.type, c.ne[0]) * rows), c.nbytes) << c.name;
    w.add_tensor(c.name, c.type, c.ne, filler(c.nbytes, static_cast<unsigned>(i)));
  }
  const std::string path = temp_path("tensors.gguf");
  w.write(path);
  auto f = GgufFile::open(path);
  EXPECT_EQ(f->path(), path);
  EXPECT_EQ(f->kind(), SourceKind::Gguf);
  EXPECT_EQ(f->gguf(), f.get());
  EXPECT_EQ(f->data_offset() % 32, 0u);
  std::vector<std::string> names;
  for (const auto& c : cases) names.push_back(c.name);
  EXPECT_EQ(f->tensor_names(), names);
  // Quantized tensors present: the writer added the quantization version.
  EXPECT_EQ(f->get_int("general.quantization_version"), 2);
  for (size_t i = 0; i < cases.size(); ++i) {
    const TensorCase& c = cases[i];
    const TensorView* t = f->find(c.name);
    ASSERT_NE(t, nullptr) << c.name;
    EXPECT_EQ(t->type, c.type) << c.name;
    EXPECT_EQ(t->ne, c.ne) << c.name;
    EXPECT_EQ(f->tensor_offset(c.name), offsets[i]) << c.name;
    const auto want = filler(c.nbytes, static_cast<unsigned>(i));
    ASSERT_EQ(t->data.size(), c.nbytes) << c.name;
    EXPECT_TRUE(std::equal(want.begin(), want.end(), t->data.begin())) << c.name;
  }
  // The file ends at the last tensor's padded end.
  EXPECT_EQ(f->file_size(), f->data_offset() + 672);
  EXPECT_EQ(f->find("absent"), nullptr);
  EXPECT_THAT(error_message([&] { f->tensor("absent"); }), HasSubstr("tensor 'absent' not found"));
}

TEST(GgufRoundTrip, CustomAlignment64) {
  GgufWriter w;
  w.set_u32("general.alignment", 64);
  w.add_tensor("a", DType::F32, {3}, filler(12, 1));
  w.add_tensor("b", DType::F16, {65}, filler(130, 2));
  w.add_tensor("c", DType::I8, {1}, filler(1, 3));
  const auto bytes = w.to_bytes();
  auto f = GgufFile::from_bytes(bytes, "a64.gguf");
  EXPECT_EQ(f->alignment(), 64u);
  EXPECT_EQ(f->data_offset() % 64, 0u);
  EXPECT_EQ(f->tensor_offset("a"), 0u);
  EXPECT_EQ(f->tensor_offset("b"), 64u);   // 12 -> 64
  EXPECT_EQ(f->tensor_offset("c"), 256u);  // 64 + (130 -> 192)
  EXPECT_EQ(bytes.size(), f->data_offset() + 256 + 64);
  // Padding bytes are zeros.
  for (size_t i = f->data_offset() + 12; i < f->data_offset() + 64; ++i)
    ASSERT_EQ(bytes[i], std::byte{0}) << i;
  // No quantized tensor, and still a quantization version (llama.cpp's converter writes it too).
  EXPECT_EQ(f->get_int("general.quantization_version"), 2);
}

TEST(GgufRoundTrip, Version2IsRead) {
  GgufWriter w;
  w.set_i32("k", -5);
  w.add_tensor("t", DType::F32, {1}, filler(4, 0));
  auto bytes = w.to_bytes();
  bytes[4] = std::byte{2};  // v2 has v3's layout (v3 only added big-endian files)
  auto f = GgufFile::from_bytes(bytes, "v2.gguf");
  EXPECT_EQ(f->version(), 2u);
  EXPECT_EQ(f->get_int("k"), -5);
}

TEST(GgufRoundTrip, FileAndMemoryPathsAgree) {
  GgufWriter w;
  w.set_string("general.architecture", "qwen3");
  w.set_u32("qwen3.block_count", 2);
  w.add_tensor("t", DType::BF16, {2, 2}, filler(8, 9));
  const std::string path = temp_path("same.gguf");
  w.write(path);
  auto a = GgufFile::open(path);
  auto b = GgufFile::from_bytes(w.to_bytes(), path);
  EXPECT_EQ(a->keys(), b->keys());
  EXPECT_EQ(a->data_offset(), b->data_offset());
  EXPECT_EQ(a->file_size(), b->file_size());
  EXPECT_TRUE(std::equal(a->tensor("t").data.begin(), a->tensor("t").data.end(),
                         b->tensor("t").data.begin(), b->tensor("t").data.end()));
  EXPECT_EQ(a->architecture(), "qwen3");
}

// --- getters --------------------------------------------------------------------------------

class GgufGetters : public ::testing::Test {
 protected:
  void SetUp() override {
    GgufWriter w;
    w.set_f32("f", 2.5f);
    w.set_u32("u", 7);
    w.set_u8("small", 1);
    w.set_u64("big", 1ull << 63);
    w.set_string("s", "x");
    w.set_i32_array("ia", {1, 2});
    w.set_f32_array("fa", {1.5f});
    w.set_bool("b", true);
    f = GgufFile::from_bytes(w.to_bytes(), "get.gguf");
  }
  std::unique_ptr<GgufFile> f;
};

TEST_F(GgufGetters, MissingKeyNamesFileAndKey) {
  EXPECT_EQ(error_message([&] { f->get_int("nope"); }), "gguf get.gguf: key 'nope': missing");
  EXPECT_EQ(error_message([&] { f->get_string_array("nope"); }), "gguf get.gguf: key 'nope': missing");
}

TEST_F(GgufGetters, WrongTypeNamesBothTypes) {
  EXPECT_EQ(error_message([&] { f->get_int("f"); }),
            "gguf get.gguf: key 'f': is f32, expected an integer");
  EXPECT_EQ(error_message([&] { f->get_string("u"); }),
            "gguf get.gguf: key 'u': is u32, expected string");
  EXPECT_EQ(error_message([&] { f->get_bool("small"); }),
            "gguf get.gguf: key 'small': is u8, expected bool");
  EXPECT_EQ(error_message([&] { f->get_int("b"); }),
            "gguf get.gguf: key 'b': is bool, expected an integer");
  EXPECT_EQ(error_message([&] { f->get_int("ia"); }),
            "gguf get.gguf: key 'ia': is array[i32 x 2], expected an integer");
  EXPECT_EQ(error_message([&] { f->get_string_array("ia"); }),
            "gguf get.gguf: key 'ia': is array[i32 x 2], expected array of string");
  EXPECT_EQ(error_message([&] { f->get_int_array("fa"); }),
            "gguf get.gguf: key 'fa': is array[f32 x 1], expected array of integers");
  EXPECT_EQ(error_message([&] { f->get_float_array("s"); }),
            "gguf get.gguf: key 's': is string, expected array of floats");
}

TEST_F(GgufGetters, IntRangeAndConversions) {
  EXPECT_EQ(error_message([&] { f->get_int("big"); }),
            "gguf get.gguf: key 'big': u64 value 9223372036854775808 does not fit int64");
  EXPECT_EQ(f->get_float("u"), 7.0);  // integers are accepted as floats
  EXPECT_EQ(f->get_float("big"), 9223372036854775808.0);
  EXPECT_EQ(f->get_int_or("absent", -3), -3);
  EXPECT_EQ(f->get_int_or("u", -3), 7);
  EXPECT_EQ(f->get_float_or("absent", 1e4), 1e4);
  EXPECT_EQ(f->get_string_or("absent", "d"), "d");
  EXPECT_TRUE(f->get_bool_or("absent", true));
  // A present key of the wrong type is still an error, not the default.
  EXPECT_THAT(error_message([&] { f->get_int_or("s", 0); }), HasSubstr("is string"));
  EXPECT_EQ(f->architecture(), "");
}

TEST(GgufValueDisplay, ScalarsArraysAndLongStrings) {
  EXPECT_EQ(GgufValue::u32(42).to_display(), "42");
  EXPECT_EQ(GgufValue::boolean(false).to_display(), "false");
  EXPECT_EQ(GgufValue::string("a\"b\n").to_display(), "\"a\\\"b\\n\"");
  EXPECT_EQ(GgufValue::i32_array({1, 2, 3}).to_display(), "[i32 x 3] 1, 2, 3");
  EXPECT_EQ(GgufValue::i32_array({1, 2, 3, 4}).to_display(2), "[i32 x 4] 1, 2, ...");
  EXPECT_EQ(GgufValue::string(std::string(10, 'z')).to_display(8, 4),
            "\"zzzz\"... (10 bytes)");
  EXPECT_EQ(GgufValue::string_array({"a", "b"}).to_display(), "[string x 2] \"a\", \"b\"");
  EXPECT_EQ(GgufValue::f32(0.5f).to_display(), "0.5");
  EXPECT_EQ(GgufValue::f32(0.1f).to_display(), "0.1");  // shortest round-trip form
  EXPECT_EQ(GgufValue::f64(1e-300).to_display(), "1e-300");
  EXPECT_EQ(GgufValue::u64(18446744073709551615ull).to_display(), "18446744073709551615");
  EXPECT_EQ(GgufValue::u64_array({}).to_display(), "[u64 x 0]");
}

// --- writer validation ----------------------------------------------------------------------

TEST(GgufWriterChecks, RejectsBadTensors) {
  GgufWriter w;
  w.add_tensor("ok", DType::F32, {2}, filler(8, 0));
  EXPECT_EQ(error_message([&] { w.add_tensor("ok", DType::F32, {2}, filler(8, 0)); }),
            "gguf writer: tensor 'ok': duplicate tensor name");
  EXPECT_EQ(error_message([&] { w.add_tensor("x", DType::F32, {3}, filler(8, 0)); }),
            "gguf writer: tensor 'x': data is 8 bytes, expected 12 for f32 with ne[0] = 3 and 1 "
            "rows");
  EXPECT_THAT(error_message([&] { w.add_tensor("q", DType::Q8_0, {33}, filler(34, 0)); }),
              HasSubstr("not a multiple of the q8_0 block size 32"));
  EXPECT_EQ(error_message([&] { w.add_tensor("d5", DType::F32, {1, 1, 1, 1, 1}, filler(4, 0)); }),
            "gguf writer: tensor 'd5': n_dims 5 (must be 1..4)");
  EXPECT_EQ(error_message([&] { w.add_tensor("d0", DType::F32, {}, {}); }),
            "gguf writer: tensor 'd0': n_dims 0 (must be 1..4)");
  EXPECT_EQ(error_message([&] { w.add_tensor("n", DType::F32, {2, -1}, {}); }),
            "gguf writer: tensor 'n': ne[1] = -1 is negative");
  EXPECT_THAT(error_message([&] { w.add_tensor(std::string(64, 'n'), DType::F32, {1}, filler(4, 0)); }),
              HasSubstr("name length 64 exceeds 63 bytes"));
  EXPECT_THAT(error_message([&] { w.add_tensor("e", DType::F8_E4M3, {1}, filler(1, 0)); }),
              HasSubstr("has no ggml type id"));
  EXPECT_EQ(error_message([&] { w.set_u32("", 1); }), "gguf writer: empty key");
  // A name of 63 bytes is the longest allowed and reads back.
  w.add_tensor(std::string(63, 'n'), DType::F32, {1}, filler(4, 0));
  auto f = GgufFile::from_bytes(w.to_bytes());
  EXPECT_NE(f->find(std::string(63, 'n')), nullptr);
}

TEST(GgufWriterChecks, RejectsBadAlignmentAtWrite) {
  GgufWriter w;
  w.set_u64("general.alignment", 32);
  EXPECT_EQ(error_message([&] { w.to_bytes(); }),
            "gguf writer: general.alignment is u64, expected u32");
  w.set_u32("general.alignment", 24);
  EXPECT_EQ(error_message([&] { w.write(temp_path("never.gguf")); }),
            "gguf writer: general.alignment 24 is not a non-zero power of two");
  w.set_u32("general.alignment", 0);
  EXPECT_THAT(error_message([&] { w.to_bytes(); }), HasSubstr("general.alignment 0 is not"));
}

TEST(GgufWriterChecks, SetReplacesInPlaceAndKeepsUserQuantizationVersion) {
  GgufWriter w;
  w.set_u32("a", 1);
  w.set_u32("b", 2);
  w.set_string("a", "now a string");
  w.set_u32("general.quantization_version", 1);
  w.add_tensor("q", DType::Q8_0, {32}, filler(34, 0));
  auto f = GgufFile::from_bytes(w.to_bytes());
  EXPECT_THAT(f->keys(), ElementsAre("a", "b", "general.quantization_version"));
  EXPECT_EQ(f->get_string("a"), "now a string");
  EXPECT_EQ(f->get_int("general.quantization_version"), 1);  // the writer never overrides it
  w.remove("b");
  EXPECT_FALSE(w.has("b"));
}

// A generated tensor (bytes emitted in pieces at write time) lands exactly where a copied one
// does; file_size() predicts the size without running the generators.
TEST(GgufWriterGenerated, PiecesLandLikeCopiedData) {
  const std::vector<std::byte> q = filler(3 * 34, 4);  // Q8_0 {32, 3}
  GgufWriter copied;
  copied.set_string("general.architecture", "qwen3");
  copied.add_tensor("a", DType::F32, {3}, filler(12, 1));
  copied.add_tensor("q", DType::Q8_0, {32, 3}, q);

  int calls = 0;
  GgufWriter generated;
  generated.set_string("general.architecture", "qwen3");
  generated.add_tensor("a", DType::F32, {3}, filler(12, 1));
  generated.add_tensor_generated("q", DType::Q8_0, {32, 3}, [&](const GgufWriter::Emit& emit) {
    ++calls;
    emit(std::span(q).subspan(0, 1));
    emit(std::span(q).subspan(1, 0));
    emit(std::span(q).subspan(1, 60));
    emit(std::span(q).subspan(61));
  });
  const uint64_t predicted = generated.file_size();
  EXPECT_EQ(calls, 0);
  const auto bytes = generated.to_bytes();
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(bytes, copied.to_bytes());
  EXPECT_EQ(predicted, bytes.size());
  EXPECT_EQ(copied.file_size(), bytes.size());

  const std::string path = temp_path("generated.gguf");
  generated.write(path);
  EXPECT_EQ(std::filesystem::file_size(path), predicted);
  auto f = GgufFile::open(path);
  const auto& t = f->tensor("q");
  EXPECT_TRUE(std::equal(q.begin(), q.end(), t.data.begin(), t.data.end()));
}

TEST(GgufWriterGenerated, WrongByteCountFailsAndLeavesNoFile) {
  GgufWriter shortw;
  shortw.add_tensor_generated("s", DType::F32, {4}, [](const GgufWriter::Emit& emit) {
    emit(filler(12, 0));
  });
  const std::string path = temp_path("short.gguf");
  EXPECT_EQ(error_message([&] { shortw.write(path); }),
            "gguf writer: tensor 's': generator emitted 12 bytes, expected 16");
  EXPECT_FALSE(std::filesystem::exists(path)) << "a half-written file was left behind";

  GgufWriter longw;
  longw.add_tensor_generated("l", DType::F32, {1}, [](const GgufWriter::Emit& emit) {
    emit(filler(4, 0));
    emit(filler(1, 0));
  });
  EXPECT_EQ(error_message([&] { longw.to_bytes(); }),
            "gguf writer: tensor 'l': generator emitted more than 4 bytes");
  EXPECT_THAT(error_message([&] { longw.add_tensor_generated("x", DType::Q8_0, {31}, nullptr); }),
              HasSubstr("not a multiple of the q8_0 block size"));
}

TEST(GgufWriterChecks, UnwritablePathNamesIt) {
  GgufWriter w;
  EXPECT_THAT(error_message([&] { w.write("/nonexistent-dir/x.gguf"); }),
              HasSubstr("gguf /nonexistent-dir/x.gguf: cannot create"));
}

TEST(GgufOpen, MissingFileAndDirectoryNamePath) {
  EXPECT_THAT(error_message([&] { GgufFile::open("/nonexistent/m.gguf"); }),
              HasSubstr("gguf /nonexistent/m.gguf: cannot open: No such file or directory"));
  const std::string dir = temp_path("");
  EXPECT_THAT(error_message([&] { GgufFile::open(dir); }), HasSubstr("is a directory"));
}

// --- the writer read by an independent implementation ----------------------------------------

bool have_python() { return std::system("python3 -c 'import struct, json' >/dev/null 2>&1") == 0; }

std::string run_checker(const std::string& args) {
  const std::string cmd = "python3 " MEMRA_SOURCE_DIR "/test/fixtures/gguf_check.py " + args;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return "";
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  const int rc = pclose(p);
  if (rc != 0) ADD_FAILURE() << cmd << " exited with " << rc;
  return out;
}

std::string f32_bits(float v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "f32:%08x", std::bit_cast<uint32_t>(v));
  return buf;
}

TEST(GgufIndependentReader, PythonReadsWhatTheWriterWrote) {
  if (!have_python())
    FAIL() << "python3 not found: the independent reader test/fixtures/gguf_check.py needs it "
              "(every supported build machine has python3; a missing one is a setup error)";
  GgufWriter w;
  w.set_string("general.architecture", "qwen3");
  w.set_u32("general.alignment", 64);
  w.set_i64("i", -9);
  w.set_f32("f", 0.25f);
  w.set_bool("b", true);
  w.set_string_array("toks", {"a", "\xc4\xa0", ""});
  w.set_f32_array("scores", {1.0f, -0.5f});
  w.add_tensor("t0", DType::F32, {3}, filler(12, 0));
  w.add_tensor("t1", DType::Q8_0, {32, 2}, filler(68, 1));
  w.add_tensor("t2", DType::NVFP4, {64, 1, 1, 2}, filler(72, 2));
  const std::string path = temp_path("py.gguf");
  w.write(path);

  const auto j = nlohmann::json::parse(run_checker(path));
  EXPECT_EQ(j["version"], 3);
  EXPECT_EQ(j["n_tensors"], 3);
  EXPECT_EQ(j["n_kv"], 8);  // 7 + general.quantization_version
  EXPECT_EQ(j["alignment"], 64);
  const auto& kv = j["kv"];
  ASSERT_EQ(kv.size(), 8u);
  EXPECT_EQ(kv[0]["key"], "general.architecture");
  EXPECT_EQ(kv[0]["value"], "qwen3");
  EXPECT_EQ(kv[1]["type"], "u32");
  EXPECT_EQ(kv[2]["type"], "i64");
  EXPECT_EQ(kv[2]["value"], -9);
  EXPECT_EQ(kv[3]["value"], f32_bits(0.25f));
  EXPECT_EQ(kv[4]["value"], true);
  EXPECT_EQ(kv[5]["elem_type"], "string");
  EXPECT_EQ(kv[5]["value"], nlohmann::json::array({"a", "\xc4\xa0", ""}));
  EXPECT_EQ(kv[6]["value"], nlohmann::json::array({f32_bits(1.0f), f32_bits(-0.5f)}));
  EXPECT_EQ(kv[7]["key"], "general.quantization_version");
  EXPECT_EQ(kv[7]["type"], "u32");
  EXPECT_EQ(kv[7]["value"], 2);
  const auto& ts = j["tensors"];
  ASSERT_EQ(ts.size(), 3u);
  EXPECT_EQ(ts[0]["offset"], 0);
  EXPECT_EQ(ts[1]["offset"], 64);   // 12 -> 64
  EXPECT_EQ(ts[2]["offset"], 192);  // 64 + (68 -> 128)
  EXPECT_EQ(ts[1]["type"], 8);
  EXPECT_EQ(ts[2]["type"], 40);
  EXPECT_EQ(ts[2]["ne"], nlohmann::json::array({64, 1, 1, 2}));
  const int sizes[] = {12, 68, 72};
  for (int i = 0; i < 3; ++i) {
    std::string hex;
    for (std::byte b : filler(sizes[i], i)) {
      char buf[3];
      std::snprintf(buf, sizeof buf, "%02x", static_cast<unsigned>(b));
      hex += buf;
    }
    EXPECT_EQ(ts[i]["data_hex"], hex) << i;
  }
  EXPECT_EQ(j["data_offset"].get<int64_t>() % 64, 0);
  EXPECT_EQ(j["file_size"], j["data_offset"].get<int64_t>() + 192 + 128);
}

// The reader on a file written by the Python side (contents listed in gguf_check.py's
// write_sample docstring; the values below are that list, not the reader's output).
TEST(GgufIndependentReader, ReadsWhatPythonWrote) {
  if (!have_python())
    FAIL() << "python3 not found: the independent writer test/fixtures/gguf_check.py needs it "
              "(every supported build machine has python3; a missing one is a setup error)";
  const std::string path = temp_path("from_python.gguf");
  run_checker("--write " + path);
  auto f = GgufFile::open(path);
  EXPECT_EQ(f->version(), 3u);
  EXPECT_EQ(f->alignment(), 32u);
  EXPECT_EQ(f->data_offset() % 32, 0u);
  EXPECT_EQ(f->architecture(), "qwen3");
  EXPECT_EQ(f->get_int("qwen3.block_count"), 2);
  EXPECT_EQ(f->kv("qwen3.block_count")->type(), GgufType::U32);
  EXPECT_EQ(f->get_float("qwen3.rope.freq_base"), 1e6);
  EXPECT_THAT(f->get_string_array("tokenizer.ggml.tokens"), ElementsAre("a", "\xc4\xa0" "b"));
  EXPECT_THAT(f->get_float_array("tokenizer.ggml.scores"), ElementsAre(0.5, -1.0));
  EXPECT_FALSE(f->get_bool("flag"));
  EXPECT_EQ(f->kv("small")->elem_type(), GgufType::I16);
  EXPECT_THAT(f->get_int_array("small"), ElementsAre(-1, 2));
  EXPECT_EQ(f->get_int("big"), int64_t{1} << 40);
  EXPECT_EQ(f->get_int("general.quantization_version"), 2);
  ASSERT_EQ(f->tensors().size(), 2u);
  const TensorView& e = f->tensor("token_embd.weight");
  EXPECT_EQ(e.type, DType::F32);
  EXPECT_THAT(e.ne, ElementsAre(4, 2));
  float vals[8];
  ASSERT_EQ(e.data.size(), sizeof vals);
  std::memcpy(vals, e.data.data(), sizeof vals);
  EXPECT_THAT(vals, ElementsAre(0, 1, 2, 3, 4, 5, 6, 7));
  const TensorView& q = f->tensor("blk.0.attn_q.weight");
  EXPECT_EQ(q.type, DType::Q8_0);
  EXPECT_EQ(f->tensor_offset("blk.0.attn_q.weight"), 32u);
  ASSERT_EQ(q.data.size(), 34u);
  for (size_t i = 0; i < 34; ++i) EXPECT_EQ(static_cast<int>(q.data[i]), static_cast<int>(i));
  EXPECT_EQ(f->file_size(), f->data_offset() + 32 + 64);  // 32 f32 bytes, 34 padded to 64
}

}  // namespace
}  // namespace memra
