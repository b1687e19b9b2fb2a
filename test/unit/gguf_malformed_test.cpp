// Malformed GGUF corpus: every case is a file built here byte by byte (not by the writer), so
// each violates exactly the rule it is named after. Each must make GgufFile throw memra::Error
// whose message starts with "gguf <path>: " and contains the phrase that names the problem,
// both through the memory parser (from_bytes) and through the mmap path (open).
//
// Plus: every prefix of a valid file must fail cleanly (and the file must load once it is long
// enough). Run under the asan-ubsan preset to check that nothing reads out of bounds.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <unistd.h>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "memra/error.h"
#include "memra/gguf.h"

namespace memra {
namespace {

using ::testing::AnyOf;
using ::testing::HasSubstr;
using ::testing::StartsWith;

// Little-endian byte builder for hand-made GGUF files.
struct Bytes {
  std::vector<std::byte> b;

  Bytes& raw(std::string_view s) {
    for (char c : s) b.push_back(static_cast<std::byte>(c));
    return *this;
  }
  template <class T>
  Bytes& le(T v) {
    const size_t at = b.size();
    b.resize(at + sizeof v);
    std::memcpy(b.data() + at, &v, sizeof v);
    return *this;
  }
  Bytes& u8(uint8_t v) { return le(v); }
  Bytes& u32(uint32_t v) { return le(v); }
  Bytes& i64(int64_t v) { return le(v); }
  Bytes& u64(uint64_t v) { return le(v); }
  Bytes& str(std::string_view s) { return u64(s.size()).raw(s); }
  Bytes& zeros(size_t n) {
    b.resize(b.size() + n);
    return *this;
  }
  Bytes& pad(size_t align) { return zeros((align - b.size() % align) % align); }

  // Header with magic "GGUF".
  Bytes& header(uint32_t version, int64_t n_tensors, int64_t n_kv) {
    return raw("GGUF").u32(version).i64(n_tensors).i64(n_kv);
  }
  Bytes& kv_u32(std::string_view key, uint32_t v) { return str(key).u32(4).u32(v); }
  Bytes& tensor_info(std::string_view name, std::vector<int64_t> ne, uint32_t type,
                     uint64_t offset) {
    str(name).u32(static_cast<uint32_t>(ne.size()));
    for (int64_t n : ne) i64(n);
    return u32(type).u64(offset);
  }
};

// A file with one f32 tensor {2} at offset 0 and its 8 data bytes: the valid base for the
// tensor cases, varied one field at a time.
std::vector<std::byte> one_tensor(std::string_view name, std::vector<int64_t> ne, uint32_t type,
                                  uint64_t offset, size_t data_bytes = 8) {
  Bytes f;
  f.header(3, 1, 0).tensor_info(name, std::move(ne), type, offset).pad(32).zeros(data_bytes);
  return f.b;
}

struct Case {
  std::string name;
  std::function<std::vector<std::byte>()> make;
  std::string phrase;  // must appear in the message
};

std::ostream& operator<<(std::ostream& os, const Case& c) { return os << c.name; }

constexpr uint64_t kHuge = uint64_t{1} << 62;

std::vector<Case> cases() {
  return {
      // --- header
      {"EmptyFile", [] { return std::vector<std::byte>{}; },
       "truncated reading header magic at offset 0 (file size 0)"},
      {"ShortMagic", [] { return Bytes{}.raw("GG").b; }, "truncated reading header magic"},
      {"BadMagic", [] { return Bytes{}.raw("GGML").u32(3).i64(0).i64(0).b; },
       "bad magic 'GGML' (expected 'GGUF')"},
      {"BinaryMagic", [] { return Bytes{}.u32(0x00000000).u32(3).i64(0).i64(0).b; },
       "bad magic '\\x00\\x00\\x00\\x00'"},
      {"TruncatedVersion", [] { return Bytes{}.raw("GGUF").u8(3).u8(0).b; },
       "truncated reading header version at offset 4 (file size 6)"},
      {"Version0", [] { return Bytes{}.header(0, 0, 0).b; }, "version 0 is invalid"},
      {"Version1", [] { return Bytes{}.header(1, 0, 0).b; }, "GGUF v1 is no longer supported"},
      {"Version4", [] { return Bytes{}.header(4, 0, 0).b; },
       "version 4 is not supported (memra reads versions 2 and 3)"},
      {"ByteSwappedVersion", [] { return Bytes{}.header(0x03000000, 0, 0).b; },
       "version 0x03000000 looks byte-swapped (version 3 of a big-endian file?)"},
      {"TruncatedTensorCount", [] { return Bytes{}.raw("GGUF").u32(3).u32(0).b; },
       "truncated reading header tensor count at offset 8"},
      {"NegativeTensorCount", [] { return Bytes{}.header(3, -1, 0).b; },
       "tensor count -1 is negative"},
      {"NegativeKvCount", [] { return Bytes{}.header(3, 0, -5).b; }, "kv count -5 is negative"},
      {"HugeKvCount", [] { return Bytes{}.header(3, 0, int64_t{1} << 62).kv_u32("a", 1).b; },
       "kv count 4611686018427387904 cannot fit in the 17 bytes left at offset 24"},
      {"HugeTensorCount", [] { return Bytes{}.header(3, 1000, 0).zeros(100).b; },
       "tensor count 1000 cannot fit in the 100 bytes left"},
      // --- key/value pairs
      {"HugeKeyLength", [] { return Bytes{}.header(3, 0, 1).u64(kHuge).zeros(8).b; },
       "kv 0 key: string length 4611686018427387904 exceeds the 8 bytes left at offset 32"},
      {"EmptyKey", [] { return Bytes{}.header(3, 0, 1).str("").u32(4).u32(1).b; },
       "kv 0: empty key"},
      {"DuplicateKey",
       [] { return Bytes{}.header(3, 0, 2).kv_u32("a.b", 1).kv_u32("a.b", 2).b; },
       "duplicate key 'a.b' (kv 0 and kv 1)"},
      {"LongDuplicateKeyShortened",
       [] {
         const std::string key(200, 'k');
         return Bytes{}.header(3, 0, 2).kv_u32(key, 1).kv_u32(key, 2).b;
       },
       "duplicate key '" + std::string(80, 'k') + "...(200 bytes)' (kv 0 and kv 1)"},
      {"ControlBytesInKeyEscaped",
       [] { return Bytes{}.header(3, 0, 1).str("a\nb'").u32(13).u32(0).b; },
       "kv 0 ('a\\x0ab\\x27'): unknown value type 13"},
      {"UnknownKvType", [] { return Bytes{}.header(3, 0, 1).str("k").u32(13).u32(0).b; },
       "kv 0 ('k'): unknown value type 13"},
      {"TruncatedKvValue", [] { return Bytes{}.header(3, 0, 1).str("k").u32(10).u32(0).zeros(2).b; },
       "truncated reading kv 0 ('k') value at offset 37 (file size 43)"},
      {"HugeStringValue",
       [] { return Bytes{}.header(3, 0, 1).str("k").u32(8).u64(kHuge).zeros(4).b; },
       "kv 0 ('k') value: string length 4611686018427387904 exceeds the 4 bytes left"},
      {"BoolValue2", [] { return Bytes{}.header(3, 0, 1).str("k").u32(7).u8(2).b; },
       "kv 0 ('k') value: bool value 2 (must be 0 or 1)"},
      {"BoolArrayElement3",
       [] { return Bytes{}.header(3, 0, 1).str("k").u32(9).u32(7).u64(2).u8(1).u8(3).b; },
       "kv 0 ('k'): bool array element 1 is 3 (must be 0 or 1)"},
      {"NestedArray",
       [] { return Bytes{}.header(3, 0, 1).str("k").u32(9).u32(9).u64(0).zeros(8).b; },
       "kv 0 ('k'): nested arrays are not supported"},
      {"UnknownArrayElemType",
       [] { return Bytes{}.header(3, 0, 1).str("k").u32(9).u32(13).u64(0).b; },
       "kv 0 ('k'): unknown array element type 13"},
      {"HugeArrayCount",
       [] { return Bytes{}.header(3, 0, 1).str("k").u32(9).u32(4).u64(kHuge).zeros(16).b; },
       "kv 0 ('k'): array count 4611686018427387904 of u32 cannot fit in the 16 bytes left"},
      {"ArrayCountOneTooMany",
       [] { return Bytes{}.header(3, 0, 1).str("k").u32(9).u32(11).u64(3).i64(1).i64(2).b; },
       "array count 3 of i64 cannot fit in the 16 bytes left"},
      {"HugeStringArrayCount",
       [] { return Bytes{}.header(3, 0, 1).str("k").u32(9).u32(8).u64(kHuge).zeros(16).b; },
       "kv 0 ('k'): array count 4611686018427387904 of string cannot fit"},
      {"StringArrayElementTruncated",
       [] {
         return Bytes{}.header(3, 0, 1).str("toks").u32(9).u32(8).u64(2).str("ab").u64(5).raw("xy").b;
       },
       "kv 0 ('toks') element[1]: string length 5 exceeds the 2 bytes left"},
      {"AlignmentU64",
       [] { return Bytes{}.header(3, 0, 1).str("general.alignment").u32(10).u64(32).b; },
       "general.alignment is u64, expected u32"},
      {"AlignmentI32",
       [] { return Bytes{}.header(3, 0, 1).str("general.alignment").u32(5).u32(32).b; },
       "general.alignment is i32, expected u32"},
      {"AlignmentNotPowerOfTwo",
       [] { return Bytes{}.header(3, 0, 1).kv_u32("general.alignment", 48).b; },
       "general.alignment 48 is not a non-zero power of two"},
      {"AlignmentZero", [] { return Bytes{}.header(3, 0, 1).kv_u32("general.alignment", 0).b; },
       "general.alignment 0 is not a non-zero power of two"},
      // --- tensor infos
      {"EmptyTensorName", [] { return one_tensor("", {2}, 0, 0); }, "tensor info 0: empty name"},
      {"TensorName64Bytes", [] { return one_tensor(std::string(64, 'x'), {2}, 0, 0); },
       "tensor info 0: name length 64 exceeds 63 bytes"},
      {"HugeTensorNameLength",
       [] { return Bytes{}.header(3, 1, 0).u64(kHuge).zeros(40).b; },
       "tensor info 0 name: string length 4611686018427387904 exceeds the 40 bytes left"},
      {"NDims0", [] { return one_tensor("w", {}, 0, 0); },
       "tensor info 0 ('w'): n_dims 0 (must be 1..4)"},
      {"NDims5", [] { return one_tensor("w", {2, 1, 1, 1, 1}, 0, 0); },
       "tensor info 0 ('w'): n_dims 5 (must be 1..4)"},
      {"NegativeNe", [] { return one_tensor("w", {2, -2}, 0, 0); },
       "tensor info 0 ('w'): ne[1] = -2 is negative"},
      {"UnknownGgmlType41", [] { return one_tensor("w", {2}, 41, 0); },
       "tensor info 0 ('w'): unknown ggml type 41"},
      {"UnknownGgmlType99", [] { return one_tensor("w", {2}, 99, 0); }, "unknown ggml type 99"},
      {"RemovedGgmlType4", [] { return one_tensor("w", {32}, 4, 0); }, "unknown ggml type 4"},
      {"GgmlTypeCount43", [] { return one_tensor("w", {2}, 43, 0); }, "unknown ggml type 43"},
      {"Ne0NotMultipleOfBlock", [] { return one_tensor("q", {33}, 8, 0, 34); },
       "tensor info 0 ('q'): ne[0] = 33 is not a multiple of the q8_0 block size 32"},
      {"NvFp4Ne0NotMultipleOf64", [] { return one_tensor("q", {32}, 40, 0, 36); },
       "ne[0] = 32 is not a multiple of the nvfp4 block size 64"},
      {"ElementCountOverflow",
       [] { return one_tensor("w", {int64_t{1} << 40, int64_t{1} << 40}, 0, 0); },
       "tensor info 0 ('w'): shape {1099511627776, 1099511627776} overflows the int64 element "
       "count"},
      {"ByteSizeOverflow",
       [] { return one_tensor("w", {int64_t{1} << 31, int64_t{1} << 31}, 0, 0); },
       "overflows the int64 byte size"},
      {"DataPastEnd", [] { return one_tensor("w", {2}, 0, 0, 7); },
       "tensor 'w': data at file offset 64 + 0 (8 bytes) extends past the end of the file "
       "(size 71)"},
      {"HugeShapePastEnd", [] { return one_tensor("w", {1 << 20}, 0, 0); },
       "extends past the end of the file"},
      {"WrongFirstOffset", [] { return one_tensor("w", {2}, 0, 32, 40); },
       "tensor 'w' has offset 32, expected 0"},
      {"OverlappingOffset",
       [] {
         return Bytes{}.header(3, 2, 0).tensor_info("a", {2}, 0, 0).tensor_info("b", {2}, 0, 0)
             .pad(32).zeros(40).b;
       },
       "tensor 'b' at offset 0 (8 bytes) overlaps tensor 'a' at offset 0 (8 bytes); expected "
       "offset 32"},
      {"OverlapsAnEarlierTensor",
       [] {
         // c starts inside a (not b, the tensor just before it): the message names a.
         return Bytes{}.header(3, 3, 0).tensor_info("a", {16}, 0, 0).tensor_info("b", {2}, 0, 64)
             .tensor_info("c", {2}, 0, 8).pad(32).zeros(128).b;
       },
       "tensor 'c' at offset 8 (8 bytes) overlaps tensor 'a' at offset 0 (64 bytes); expected "
       "offset 96"},
      {"UnpaddedOffset",
       [] {
         return Bytes{}.header(3, 2, 0).tensor_info("a", {2}, 0, 0).tensor_info("b", {2}, 0, 8)
             .pad(32).zeros(40).b;
       },
       "tensor 'b' has offset 8, expected 32"},
      {"DuplicateTensorName",
       [] {
         return Bytes{}.header(3, 2, 0).tensor_info("w", {2}, 0, 0).tensor_info("w", {2}, 0, 32)
             .pad(32).zeros(40).b;
       },
       "duplicate tensor name 'w' (tensor info 0 and 1)"},
      {"TruncatedInNe",
       [] { return Bytes{}.header(3, 1, 0).str("blk.0.attn_q.weight").u32(2).i64(64).zeros(4).b; },
       // 24 header + 8 + 19 name + 4 n_dims + 8 ne[0] = 63
       "truncated reading tensor info 0 ('blk.0.attn_q.weight') ne[1] at offset 63 (file size "
       "67)"},
      {"TruncatedTensorOffset",
       [] {
         auto b = Bytes{}.header(3, 1, 0).tensor_info("blk.0.w", {2}, 0, 0).b;
         b.resize(b.size() - 3);  // cut inside the u64 offset
         return b;
       },
       "truncated reading tensor info 0 ('blk.0.w') offset at offset 55 (file size 60)"},
  };
}

class GgufMalformed : public ::testing::TestWithParam<Case> {};

TEST_P(GgufMalformed, ThrowsNamedError) {
  const Case& c = GetParam();
  const std::vector<std::byte> bytes = c.make();
  const std::string name = c.name + ".gguf";
  try {
    GgufFile::from_bytes(bytes, name);
    ADD_FAILURE() << "from_bytes accepted the malformed file";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), StartsWith("gguf " + name + ": "));
    EXPECT_THAT(e.what(), HasSubstr(c.phrase));
  }
  // The mmap path shares the parser; its errors name the real path.
  // Per process, so that parallel runs (default and sanitizer builds) do not share files.
  const auto dir = std::filesystem::temp_directory_path() /
                   ("memra_gguf_malformed_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string path = (dir / name).string();
  {
    std::ofstream os(path, std::ios::binary | std::ios::trunc);
    os.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    ASSERT_TRUE(os.good()) << path;
  }
  try {
    GgufFile::open(path);
    ADD_FAILURE() << "open accepted the malformed file";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), StartsWith("gguf " + path + ": "));
    EXPECT_THAT(e.what(), HasSubstr(c.phrase));
  }
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
}

INSTANTIATE_TEST_SUITE_P(Corpus, GgufMalformed, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<Case>& i) { return i.param.name; });

// The corpus cases differ from a valid file in the named field only: the same builders with
// valid values load.
TEST(GgufMalformedControls, ValidBuildersLoad) {
  auto f = GgufFile::from_bytes(one_tensor("w", {2}, 0, 0), "ok.gguf");
  EXPECT_EQ(f->data_offset(), 64u);
  EXPECT_EQ(f->tensor("w").nbytes(), 8);
  auto g = GgufFile::from_bytes(
      Bytes{}.header(3, 2, 1).kv_u32("general.alignment", 16).tensor_info("a", {2}, 0, 0)
          .tensor_info("b", {32, 1}, 8, 16).pad(16).zeros(16 + 34).b);
  EXPECT_EQ(g->alignment(), 16u);
  EXPECT_EQ(g->tensor_offset("b"), 16u);
  auto h = GgufFile::from_bytes(one_tensor(std::string(63, 'x'), {64}, 40, 0, 36));
  EXPECT_EQ(h->tensors()[0].type, DType::NVFP4);
  auto v2 = GgufFile::from_bytes(Bytes{}.header(2, 0, 1).kv_u32("k", 1).b);
  EXPECT_EQ(v2->version(), 2u);
}

// Cutting a valid file anywhere must give a clean error (never a crash or an out-of-bounds
// read), up to the end of the last tensor's data; from there on it loads (llama.cpp does not
// require the last tensor's padding either).
TEST(GgufTruncation, EveryPrefixOfAValidFile) {
  GgufWriter w;
  w.set_string("general.architecture", "qwen3");
  w.set_u32("qwen3.block_count", 1);
  w.set_f32("f", 1.5f);
  w.set_bool("b", true);
  w.set_string_array("tokenizer.ggml.tokens", {"a", "bc", ""});
  w.set_i32_array("ids", {1, 2, 3});
  std::vector<std::byte> d1(8, std::byte{1}), d2(34, std::byte{2});
  w.add_tensor("blk.0.attn_q.weight", DType::F32, {2}, d1);
  w.add_tensor("blk.0.ffn_up.weight", DType::Q8_0, {32}, d2);
  const std::vector<std::byte> full = w.to_bytes();
  const auto whole = GgufFile::from_bytes(full);
  const size_t needed = whole->data_offset() + whole->tensor_offset("blk.0.ffn_up.weight") + 34;
  ASSERT_LT(needed, full.size());

  for (size_t n = 0; n < full.size(); ++n) {
    std::span<const std::byte> prefix(full.data(), n);
    if (n < needed) {
      try {
        GgufFile::from_bytes(prefix, "cut.gguf");
        ADD_FAILURE() << "prefix of " << n << " bytes loaded";
      } catch (const Error& e) {
        ASSERT_THAT(e.what(), StartsWith("gguf cut.gguf: ")) << n;
        ASSERT_THAT(e.what(), AnyOf(HasSubstr("truncated reading"), HasSubstr("bytes left"),
                                    HasSubstr("past the end of the file")))
            << n;
      }
    } else {
      EXPECT_NO_THROW(GgufFile::from_bytes(prefix, "cut.gguf")) << n;
    }
  }
}

// Flipping any single byte of the metadata must never crash: it either loads or throws Error.
TEST(GgufCorruption, EverySingleByteFlipFailsCleanlyOrLoads) {
  GgufWriter w;
  w.set_string("general.architecture", "qwen3");
  w.set_u32("general.alignment", 32);
  w.set_string_array("s", {"x", "yz"});
  w.add_tensor("t", DType::Q8_0, {32, 2}, std::vector<std::byte>(68, std::byte{3}));
  const std::vector<std::byte> full = w.to_bytes();
  const size_t header_end = GgufFile::from_bytes(full)->data_offset();
  int errors = 0;
  for (size_t i = 0; i < header_end; ++i) {
    for (uint8_t flip : {uint8_t{0x01}, uint8_t{0x80}, uint8_t{0xff}}) {
      std::vector<std::byte> bad = full;
      bad[i] ^= static_cast<std::byte>(flip);
      try {
        GgufFile::from_bytes(bad, "flip.gguf");
      } catch (const Error& e) {
        ASSERT_THAT(e.what(), StartsWith("gguf flip.gguf: ")) << i;
        ++errors;
      }
    }
  }
  // Most flips break the file (magic, lengths, types, offsets); a few land in string
  // contents and padding and still load.
  EXPECT_GT(errors, static_cast<int>(header_end));
}

}  // namespace
}  // namespace memra
