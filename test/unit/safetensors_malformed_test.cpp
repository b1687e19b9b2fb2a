// Malformed safetensors files: every defect must be a memra::Error that starts with
// "safetensors <path>: " and says what is wrong — never a crash, never a silently wrong tensor
// (DESIGN.md law 6). Run under the asan-ubsan preset too: a read past the mapping would show
// there even when it happens not to crash.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>

#include "memra/error.h"
#include "memra/safetensors.h"
#include "unit/safetensors_test_util.h"

namespace memra {
namespace {

using st_test::file_bytes;
using st_test::le;
using st_test::TempDir;
using ::testing::HasSubstr;
using ::testing::StartsWith;

struct MalformedCase {
  const char* name;      // test name suffix
  std::string bytes;     // the whole file
  const char* expected;  // phrase the message must contain
};

// gtest prints a failing case by this instead of a hex dump.
void PrintTo(const MalformedCase& c, std::ostream* os) { *os << c.name; }

std::string error_of_open(const std::string& path) {
  try {
    SafetensorsFile::open(path);
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "opened " << path;
  return {};
}

std::string header_only(std::string_view h) { return file_bytes(h); }

// One tensor entry around `entry`, 4 bytes of data.
std::string one(std::string_view entry) {
  return file_bytes(std::string(R"({"w":)") + std::string(entry) + "}", "abcd");
}

std::vector<MalformedCase> malformed_cases() {
  const std::string deep = std::string(100, '[') + std::string(100, ']');
  return {
      {"EmptyFile", "", "shorter than the 8-byte header length"},
      {"FiveBytes", "\x02\x00\x00\x00\x00", "shorter than the 8-byte header length"},
      {"HeaderLengthPastEnd", le(64, 8) + "{}", "header length 64 exceeds the file"},
      {"HeaderLengthHuge", le(1ull << 40, 8) + "{}", "exceeds the limit"},
      {"HeaderLengthMaxU64", le(~0ull, 8) + "{}", "exceeds the limit"},
      {"InvalidJson", header_only("{not json}"), "header: invalid JSON"},
      {"TruncatedJson", header_only(R"({"w":{"dtype":"F32")"), "invalid JSON"},
      {"JsonComment", header_only("{/*c*/}"), "invalid JSON"},
      {"InvalidUtf8Name", header_only("{\"\xff\":{}}"), "invalid JSON"},
      {"TrailingGarbage", header_only("{} x"), "invalid JSON"},
      {"HeaderIsArray", header_only("[]"), "header is array, expected object"},
      {"HeaderIsString", header_only(R"("x")"), "header is string, expected object"},
      {"DeepNesting", header_only(R"({"w":)" + deep + "}"), "nesting deeper than 64"},
      {"EntryNotObject", header_only(R"({"w":3})"), "tensor 'w': entry is integer, expected object"},
      {"MissingDtype", one(R"({"shape":[1],"data_offsets":[0,4]})"), "tensor 'w': missing 'dtype'"},
      {"MissingShape", one(R"({"dtype":"F32","data_offsets":[0,4]})"), "tensor 'w': missing 'shape'"},
      {"MissingOffsets", one(R"({"dtype":"F32","shape":[1]})"), "tensor 'w': missing 'data_offsets'"},
      {"DtypeNotString", one(R"({"dtype":7,"shape":[1],"data_offsets":[0,4]})"), "'dtype' is integer, expected string"},
      {"DtypeF8E5M2", one(R"({"dtype":"F8_E5M2","shape":[4],"data_offsets":[0,4]})"), "unsupported dtype 'F8_E5M2'"},
      {"DtypeBool", one(R"({"dtype":"BOOL","shape":[4],"data_offsets":[0,4]})"), "unsupported dtype 'BOOL'"},
      {"DtypeLowercase", one(R"({"dtype":"f32","shape":[1],"data_offsets":[0,4]})"), "unsupported dtype 'f32'"},
      {"ShapeNotArray", one(R"({"dtype":"F32","shape":1,"data_offsets":[0,4]})"), "'shape' is integer, expected array"},
      {"ShapeNegative", one(R"({"dtype":"U8","shape":[-4],"data_offsets":[0,4]})"), "shape[0] is -4: negative"},
      {"ShapeFloat", one(R"({"dtype":"U8","shape":[2,2.0],"data_offsets":[0,4]})"), "shape[1] is float, expected a non-negative integer"},
      {"ShapeString", one(R"({"dtype":"U8","shape":["4"],"data_offsets":[0,4]})"), "shape[0] is string"},
      {"ShapeNull", one(R"({"dtype":"U8","shape":[null],"data_offsets":[0,4]})"), "shape[0] is null"},
      {"FiveDims", one(R"({"dtype":"U8","shape":[1,1,1,1,4],"data_offsets":[0,4]})"), "shape has 5 dimensions; memra supports at most 4"},
      {"ShapeDimTooLarge", one(R"({"dtype":"U8","shape":[9223372036854775808],"data_offsets":[0,4]})"), "shape[0] is 9223372036854775808: too large"},
      {"ShapeDimBeyondU64", one(R"({"dtype":"U8","shape":[18446744073709551616],"data_offsets":[0,4]})"), "shape[0] is float"},
      {"ShapeProductOverflow", one(R"({"dtype":"U8","shape":[4294967296,4294967296],"data_offsets":[0,4]})"), "overflows int64 elements"},
      {"ShapeBytesOverflow", one(R"({"dtype":"F32","shape":[4611686018427387904],"data_offsets":[0,4]})"), "overflows int64 bytes"},
      {"OffsetsNotArray", one(R"({"dtype":"U8","shape":[4],"data_offsets":{"a":0}})"), "'data_offsets' is object, expected array"},
      {"OffsetsThreeEntries", one(R"({"dtype":"U8","shape":[4],"data_offsets":[0,4,8]})"), "'data_offsets' has 3 entries, expected 2"},
      {"OffsetsNegative", one(R"({"dtype":"U8","shape":[4],"data_offsets":[-1,3]})"), "data_offsets[0] is -1: negative"},
      {"OffsetsFloat", one(R"({"dtype":"U8","shape":[4],"data_offsets":[0,4.5]})"), "data_offsets[1] is float"},
      {"EndBeforeBegin", one(R"({"dtype":"U8","shape":[0],"data_offsets":[4,0]})"), "data_offsets [4, 0]: end before begin"},
      {"SizeMismatch", one(R"({"dtype":"F16","shape":[3],"data_offsets":[0,4]})"), "span 4 bytes, but shape [3] of F16 needs 6"},
      {"PastDataBuffer", one(R"({"dtype":"U8","shape":[4],"data_offsets":[2,6]})"), "past the end of the data buffer (4 bytes)"},
      {"PastDataBufferHuge", one(R"({"dtype":"U8","shape":[1],"data_offsets":[18446744073709551614,18446744073709551615]})"), "past the end of the data buffer"},
      {"Overlap",
       file_bytes(R"({"a":{"dtype":"U8","shape":[3],"data_offsets":[0,3]},"b":{"dtype":"U8","shape":[2],"data_offsets":[2,4]}})", "abcd"),
       "tensor 'b' [2, 4) overlaps tensor 'a' [0, 3)"},
      {"OverlapContained",
       file_bytes(R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},"b":{"dtype":"U8","shape":[1],"data_offsets":[1,2]},"c":{"dtype":"U8","shape":[1],"data_offsets":[3,4]}})", "abcd"),
       "overlaps tensor 'a'"},
      {"DuplicateTensor",
       file_bytes(R"({"w":{"dtype":"U8","shape":[2],"data_offsets":[0,2]},"w":{"dtype":"U8","shape":[2],"data_offsets":[2,4]}})", "abcd"),
       "duplicate tensor name 'w'"},
      {"DuplicateFieldInEntry", one(R"({"dtype":"U8","dtype":"F32","shape":[1],"data_offsets":[0,4]})"), "duplicate key 'w.dtype'"},
      {"MetadataNotObject", header_only(R"({"__metadata__":["x"]})"), "__metadata__ is array, expected object"},
      {"MetadataValueNotString", header_only(R"({"__metadata__":{"n":1}})"), "__metadata__ key 'n' is integer, expected string"},
      {"EmptyTensorName", file_bytes(R"({"":{"dtype":"U8","shape":[4],"data_offsets":[0,4]}})", "abcd"), "empty tensor name"},
  };
}

class SafetensorsMalformed : public ::testing::TestWithParam<MalformedCase> {};

TEST_P(SafetensorsMalformed, ThrowsWithPathAndReason) {
  const MalformedCase& c = GetParam();
  TempDir dir("stbad");
  const std::string path = dir.file(std::string(c.name) + ".safetensors", c.bytes);
  try {
    SafetensorsFile::open(path);
    FAIL() << "opened a malformed file";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), StartsWith("safetensors " + path + ": "));
    EXPECT_THAT(e.what(), HasSubstr(c.expected));
  }
}

INSTANTIATE_TEST_SUITE_P(Corpus, SafetensorsMalformed, ::testing::ValuesIn(malformed_cases()),
                         [](const auto& info) { return std::string(info.param.name); });

// The corpus cases are built to reach the checks they name; make sure the one-entry template
// itself is valid, or every "one(...)" case would fail for the wrong reason.
TEST(SafetensorsMalformedControl, TemplateEntryIsValid) {
  TempDir dir("stbad");
  auto f = SafetensorsFile::open(
      dir.file("ok.safetensors", one(R"({"dtype":"U8","shape":[4],"data_offsets":[0,4]})")));
  EXPECT_EQ(f->tensor("w").nbytes(), 4);
  EXPECT_EQ(std::memcmp(f->tensor("w").data.data(), "abcd", 4), 0);
}

// A small valid file whose last tensor ends at the last byte, so that every proper prefix cuts
// the length, the header, or tensor data.
std::string small_valid_file() {
  return file_bytes(
      R"({"__metadata__":{"k":"v"},"a":{"dtype":"BF16","shape":[2,1],"data_offsets":[0,4]},)"
      R"("b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
      le(0x3F80, 2) + le(0xC020, 2) + le(0x3F800000, 4));
}

TEST(SafetensorsTruncation, EveryProperPrefixThrows) {
  TempDir dir("sttrunc");
  const std::string full = small_valid_file();
  ASSERT_NO_THROW(SafetensorsFile::open(dir.file("full.safetensors", full)));
  for (size_t n = 0; n < full.size(); ++n) {
    const std::string path = dir.file("cut.safetensors", full.substr(0, n));
    try {
      SafetensorsFile::open(path);
      ADD_FAILURE() << "prefix of " << n << " of " << full.size() << " bytes opened";
    } catch (const Error& e) {
      EXPECT_THAT(e.what(), StartsWith("safetensors " + path + ": ")) << "prefix " << n;
    }
  }
}

// Single-byte corruption of the length and header: each variant must either open with every
// view inside the file, or throw memra::Error. Under ASan this checks there is no stray read.
TEST(SafetensorsCorruption, EveryHeaderByteReplacedOpensOrThrows) {
  TempDir dir("stcorrupt");
  const std::string full = small_valid_file();
  const uint64_t header_end = full.size() - 8;  // 8 data bytes
  const char replacements[] = {'"', '}', ']', '9', '-', ',', ' ', '\0', '\xff'};
  int opened = 0, threw = 0;
  for (size_t i = 0; i < header_end; ++i) {
    for (char r : replacements) {
      if (full[i] == r) continue;
      std::string bad = full;
      bad[i] = r;
      const std::string path = dir.file("c.safetensors", bad);
      try {
        auto f = SafetensorsFile::open(path);
        ++opened;
        for (const std::string& name : f->tensor_names()) {
          const TensorView& t = f->tensor(name);
          // Every view lies in the data buffer of this file.
          EXPECT_GE(t.nbytes(), 0);
          EXPECT_LE(static_cast<uint64_t>(t.nbytes()), bad.size() - f->data_start())
              << "byte " << i;
        }
      } catch (const Error& e) {
        ++threw;
        EXPECT_THAT(e.what(), StartsWith("safetensors " + path + ": ")) << "byte " << i;
      }
    }
  }
  // Most single-byte edits of a JSON header break it; a few (a digit in a metadata value,
  // a space) survive. Both outcomes must have happened, or the loop tested nothing.
  EXPECT_GT(threw, 0);
  EXPECT_GT(opened, 0);
}

TEST(SafetensorsFileErrors, NonexistentFile) {
  EXPECT_THAT(error_of_open("/nonexistent/x.safetensors"),
              StartsWith("safetensors /nonexistent/x.safetensors: cannot open: "));
}

TEST(SafetensorsFileErrors, DirectoryIsNotAFile) {
  TempDir dir("stdir");
  EXPECT_EQ(error_of_open(dir.path().string()),
            "safetensors " + dir.path().string() + ": is a directory");
}

}  // namespace
}  // namespace memra
