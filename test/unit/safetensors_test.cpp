// The safetensors reader, model directories (single file, sharded), config.json and
// open_weights dispatch. Files are built byte by byte in the tests (safetensors_test_util.h);
// expected values are worked out by hand from IEEE-754 / two's-complement encodings.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <span>

#include "memra/error.h"
#include "memra/gguf.h"
#include "memra/hf_config.h"
#include "memra/safetensors.h"
#include "memra/source.h"
#include "memra/testing/errors.h"
#include "unit/safetensors_test_util.h"

namespace memra {
namespace {

using st_test::file_bytes;
using st_test::le;
using st_test::TempDir;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

template <class T>
T load(const TensorView& t, size_t i) {
  T v;
  std::memcpy(&v, t.data.data() + i * sizeof(T), sizeof(T));
  return v;
}

using memra::testing::error_message;

// --- every dtype: raw bits survive, type and size are right -----------------------------------

struct DtypeCase {
  const char* st_name;  // safetensors spelling
  DType type;
  int width;            // bytes per element
  uint64_t a, b;        // two elements' raw bits
};

void PrintTo(const DtypeCase& c, std::ostream* os) { *os << c.st_name; }

class SafetensorsDtype : public ::testing::TestWithParam<DtypeCase> {};

TEST_P(SafetensorsDtype, RawBitsRoundTrip) {
  const DtypeCase& c = GetParam();
  TempDir dir;
  const std::string header = std::string(R"({"t":{"dtype":")") + c.st_name +
                             R"(","shape":[2],"data_offsets":[0,)" +
                             std::to_string(2 * c.width) + "]}}";
  const std::string path = dir.file("t.safetensors", file_bytes(header, le(c.a, c.width) + le(c.b, c.width)));
  auto f = SafetensorsFile::open(path);
  const TensorView& t = f->tensor("t");
  EXPECT_EQ(t.type, c.type);
  EXPECT_THAT(t.ne, ElementsAre(2));
  ASSERT_EQ(t.nbytes(), 2 * c.width);
  uint64_t a = 0, b = 0;
  std::memcpy(&a, t.data.data(), c.width);  // little-endian host
  std::memcpy(&b, t.data.data() + c.width, c.width);
  EXPECT_EQ(a, c.a);
  EXPECT_EQ(b, c.b);
  EXPECT_EQ(safetensors_dtype_from_name(c.st_name), c.type);
  EXPECT_EQ(safetensors_dtype_name(c.type), std::string_view(c.st_name));
}

INSTANTIATE_TEST_SUITE_P(AllDtypes, SafetensorsDtype,
                         ::testing::Values(DtypeCase{"F32", DType::F32, 4, 0x3F800000, 0xC0200000},  // 1.0, -2.5
                                           DtypeCase{"F16", DType::F16, 2, 0x3C00, 0xC000},          // 1.0, -2.0
                                           DtypeCase{"BF16", DType::BF16, 2, 0x3F80, 0xC020},        // 1.0, -2.5
                                           DtypeCase{"F64", DType::F64, 8, 0x3FF8000000000000, 0xBFD0000000000000},
                                           DtypeCase{"F8_E4M3", DType::F8_E4M3, 1, 0x38, 0xC0},      // 1.0, -2.0
                                           DtypeCase{"F8_E8M0", DType::F8_E8M0, 1, 0x7F, 0x85},      // 1.0, 64.0
                                           DtypeCase{"I8", DType::I8, 1, 0xFF, 0x7F},                // -1, 127
                                           DtypeCase{"U8", DType::U8, 1, 0xC8, 0x01},                // 200, 1
                                           DtypeCase{"I16", DType::I16, 2, 0xFFFE, 0x012C},          // -2, 300
                                           DtypeCase{"I32", DType::I32, 4, 0xFFFFFFFE, 0x000186A0},  // -2, 100000
                                           DtypeCase{"I64", DType::I64, 8, 0xFFFFFFFFFFFFFFFD, 1ull << 40}),
                         [](const auto& info) { return std::string(info.param.st_name); });

// Values decoded the way a consumer would: the hand-encoded bits mean what the comment says.
TEST(Safetensors, DecodedValuesOfMixedFile) {
  TempDir dir;
  // Offsets are deliberately not aligned: bf16 at 0, f32 at 4 (ok), i64 at 12 (not 8-aligned),
  // f64 at 20.
  const std::string header =
      R"({"bf":{"dtype":"BF16","shape":[2],"data_offsets":[0,4]},)"
      R"("f":{"dtype":"F32","shape":[2],"data_offsets":[4,12]},)"
      R"("i":{"dtype":"I64","shape":[1],"data_offsets":[12,20]},)"
      R"("d":{"dtype":"F64","shape":[1],"data_offsets":[20,28]}})";
  const std::string data = le(0x4049, 2) + le(0xBF00, 2) +          // bf16 3.140625, -0.5
                           le(0x3F800000, 4) + le(0xC0200000, 4) +  // f32 1.0, -2.5
                           le(0xFFFFFFFFFFFFFFFD, 8) +             // i64 -3
                           le(0xBFD0000000000000, 8);              // f64 -0.25
  auto f = SafetensorsFile::open(dir.file("m.safetensors", file_bytes(header, data)));
  const TensorView& bf = f->tensor("bf");
  auto bf16_to_f32 = [](uint16_t h) {
    const uint32_t bits = static_cast<uint32_t>(h) << 16;
    float x;
    std::memcpy(&x, &bits, 4);
    return x;
  };
  EXPECT_EQ(bf16_to_f32(load<uint16_t>(bf, 0)), 3.140625f);
  EXPECT_EQ(bf16_to_f32(load<uint16_t>(bf, 1)), -0.5f);
  EXPECT_EQ(load<float>(f->tensor("f"), 0), 1.0f);
  EXPECT_EQ(load<float>(f->tensor("f"), 1), -2.5f);
  EXPECT_EQ(load<int64_t>(f->tensor("i"), 0), -3);
  EXPECT_EQ(load<double>(f->tensor("d"), 0), -0.25);
  // Spans point into the data buffer at begin offset: 8 + N + begin.
  EXPECT_EQ(f->data_start(), 8 + header.size());
  EXPECT_EQ(f->tensor("i").data.data() - f->tensor("bf").data.data(), 12);
}

// --- reference vector ------------------------------------------------------------------------

// The bytes huggingface/safetensors' own Python tests expect from saving a 2x2 int32 array
// with element [1, 1] = 1 (bindings/python/tests/test_simple.py, test_serialization): written
// by the reference implementation, not by us.
const std::string kReferenceBytes = std::string(
    "<\x00\x00\x00\x00\x00\x00\x00"
    R"({"test":{"dtype":"I32","shape":[2,2],"data_offsets":[0,16]}})"
    "\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x01\x00\x00\x00",
    8 + 60 + 16);

TEST(SafetensorsReference, ReadsTheReferenceImplementationsBytes) {
  TempDir dir;
  auto f = SafetensorsFile::open(dir.file("ref.safetensors", kReferenceBytes));
  const TensorView& t = f->tensor("test");
  EXPECT_EQ(t.type, DType::I32);
  ASSERT_THAT(t.ne, ElementsAre(2, 2));
  // Row-major [1, 1] is flat index 1*2 + 1 = 3, the only non-zero element.
  for (int i = 0; i < 4; ++i) EXPECT_EQ(load<int32_t>(t, i), i == 3 ? 1 : 0) << i;
}

TEST(SafetensorsReference, WriterMatchesReferenceUpToHeaderPadding) {
  // The reference wrote this vector unpadded (60-byte header); ours pads the header with
  // spaces to 64 so the data starts 8-aligned. Everything else must be byte-identical.
  TempDir dir;
  int32_t v[4] = {0, 0, 0, 1};
  TensorView t{"test", DType::I32, {2, 2}, std::as_bytes(std::span(v))};
  const std::string path = (dir.path() / "w.safetensors").string();
  write_safetensors_file(path, {t});
  std::ifstream in(path, std::ios::binary);
  const std::string got((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::string want = kReferenceBytes;
  want[0] = 64;
  want.insert(8 + 60, "    ");
  EXPECT_EQ(got, want);
}

// --- shapes ---------------------------------------------------------------------------------

TEST(Safetensors, ShapeIsReversedIntoGgmlOrder) {
  TempDir dir;
  // [3, 5] F32 = 60 bytes, [2, 3, 4] U8 = 24 bytes, [1, 2, 1, 3] U8 = 6 bytes.
  const std::string header =
      R"({"w":{"dtype":"F32","shape":[3,5],"data_offsets":[0,60]},)"
      R"("c":{"dtype":"U8","shape":[2,3,4],"data_offsets":[60,84]},)"
      R"("q":{"dtype":"U8","shape":[1,2,1,3],"data_offsets":[84,90]}})";
  auto f = SafetensorsFile::open(dir.file("s.safetensors", file_bytes(header, std::string(90, '\0'))));
  EXPECT_THAT(f->tensor("w").ne, ElementsAre(5, 3));
  EXPECT_EQ(f->tensor("w").nelements(), 15);
  EXPECT_THAT(f->tensor("c").ne, ElementsAre(4, 3, 2));
  EXPECT_THAT(f->tensor("q").ne, ElementsAre(3, 1, 2, 1));
}

TEST(Safetensors, RowMajorElementLandsAtGgmlIndex) {
  // W[out=2, in=3] row-major: element (r, c) is at r*3 + c, i.e. at ne-index (c, r) with
  // ne = {3, 2}: ne[0] is the fastest-varying dimension.
  TempDir dir;
  std::string data;
  for (int i = 0; i < 6; ++i) data += le(static_cast<uint64_t>(10 * i), 1);
  auto f = SafetensorsFile::open(dir.file(
      "w.safetensors",
      file_bytes(R"({"w":{"dtype":"U8","shape":[2,3],"data_offsets":[0,6]}})", data)));
  const TensorView& w = f->tensor("w");
  ASSERT_THAT(w.ne, ElementsAre(3, 2));
  // (r=1, c=2) → flat 1*ne[0] + 2 = 5 → value 50.
  EXPECT_EQ(load<uint8_t>(w, 1 * w.ne[0] + 2), 50);
}

TEST(Safetensors, ScalarAndEmptyTensors) {
  TempDir dir;
  const std::string header =
      R"({"s":{"dtype":"F32","shape":[],"data_offsets":[0,4]},)"
      R"("e":{"dtype":"F32","shape":[0,4],"data_offsets":[4,4]}})";
  auto f = SafetensorsFile::open(dir.file("z.safetensors", file_bytes(header, le(0x3F800000, 4))));
  EXPECT_THAT(f->tensor("s").ne, IsEmpty());
  EXPECT_EQ(f->tensor("s").nelements(), 1);
  EXPECT_EQ(load<float>(f->tensor("s"), 0), 1.0f);
  EXPECT_THAT(f->tensor("e").ne, ElementsAre(4, 0));
  EXPECT_EQ(f->tensor("e").nbytes(), 0);
}

// --- header features ------------------------------------------------------------------------

TEST(Safetensors, MetadataIsRead) {
  TempDir dir;
  const std::string header =
      R"({"__metadata__":{"format":"pt","note":"x y"},"t":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}})";
  auto f = SafetensorsFile::open(dir.file("m.safetensors", file_bytes(header, "A")));
  EXPECT_EQ(f->metadata().size(), 2u);
  EXPECT_EQ(f->metadata().at("format"), "pt");
  EXPECT_EQ(f->metadata().at("note"), "x y");
  EXPECT_THAT(f->tensor_names(), ElementsAre("t"));  // __metadata__ is not a tensor
}

TEST(Safetensors, NamesAreInDataOrderNotHeaderOrder) {
  TempDir dir;
  // "zeta" comes first in the data buffer, "alpha" second, "mid" third.
  const std::string header =
      R"({"alpha":{"dtype":"U8","shape":[2],"data_offsets":[1,3]},)"
      R"("mid":{"dtype":"U8","shape":[1],"data_offsets":[3,4]},)"
      R"("zeta":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}})";
  auto f = SafetensorsFile::open(dir.file("o.safetensors", file_bytes(header, "ZAAM")));
  EXPECT_THAT(f->tensor_names(), ElementsAre("zeta", "alpha", "mid"));
  EXPECT_EQ(load<char>(f->tensor("alpha"), 0), 'A');
  EXPECT_EQ(load<char>(f->tensor("zeta"), 0), 'Z');
}

TEST(Safetensors, SpacePaddedHeaderHolesAndTrailingBytesAreAccepted) {
  TempDir dir;
  // Header padded with spaces to 48 bytes (the Hugging Face writer's 8-byte alignment); a
  // 2-byte hole between the tensors and 3 bytes after the last one.
  std::string header = R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"b":{"dtype":"U8","shape":[1],"data_offsets":[3,4]}})";
  header.append(8 - header.size() % 8, ' ');
  auto f = SafetensorsFile::open(dir.file("p.safetensors", file_bytes(header, "a..b...")));
  EXPECT_EQ(load<char>(f->tensor("a"), 0), 'a');
  EXPECT_EQ(load<char>(f->tensor("b"), 0), 'b');
}

TEST(Safetensors, EmptyHeaderObjectHasNoTensors) {
  TempDir dir;
  auto f = SafetensorsFile::open(dir.file("e.safetensors", file_bytes("{}")));
  EXPECT_THAT(f->tensor_names(), IsEmpty());
  EXPECT_EQ(f->kind(), SourceKind::Safetensors);
}

TEST(Safetensors, AbsentTensorNamesTensorAndPath) {
  TempDir dir;
  const std::string path = dir.file("a.safetensors", file_bytes("{}"));
  auto f = SafetensorsFile::open(path);
  EXPECT_EQ(f->find("nope"), nullptr);
  const std::string msg = error_message([&] { f->tensor("nope"); });
  EXPECT_THAT(msg, HasSubstr(path));
  EXPECT_THAT(msg, HasSubstr("'nope'"));
}

// --- directories ----------------------------------------------------------------------------

const char kOneTensor[] = R"({"w":{"dtype":"U8","shape":[2],"data_offsets":[0,2]}})";

TEST(SafetensorsDir, ModelSafetensorsPlusConfig) {
  TempDir dir;
  dir.file("model.safetensors", file_bytes(kOneTensor, "xy"));
  const std::string cfg = R"({"architectures":["Qwen3ForCausalLM"],"hidden_size":64})";
  dir.file("config.json", cfg);
  auto d = SafetensorsDir::open(dir.path().string());
  EXPECT_THAT(d->tensor_names(), ElementsAre("w"));
  EXPECT_EQ(load<char>(d->tensor("w"), 1), 'y');
  ASSERT_NE(d->hf_config(), nullptr);
  EXPECT_EQ(d->hf_config()->get_int("hidden_size"), 64);
  ASSERT_NE(d->hf_config_json(), nullptr);
  EXPECT_EQ(*d->hf_config_json(), cfg);
  EXPECT_EQ(d->path(), dir.path().string());
}

TEST(SafetensorsDir, WithoutConfigHasNone) {
  TempDir dir;
  dir.file("model.safetensors", file_bytes(kOneTensor, "xy"));
  auto d = SafetensorsDir::open(dir.path().string());
  EXPECT_EQ(d->hf_config(), nullptr);
  EXPECT_EQ(d->hf_config_json(), nullptr);
}

TEST(SafetensorsDir, SingleOtherSafetensorsFile) {
  TempDir dir;
  dir.file("weights.safetensors", file_bytes(kOneTensor, "xy"));
  dir.file("README.md", "not a tensor file");
  auto d = SafetensorsDir::open(dir.path().string());
  ASSERT_EQ(d->shards().size(), 1u);
  EXPECT_THAT(d->shards()[0]->path(), HasSubstr("weights.safetensors"));
  EXPECT_NE(d->find("w"), nullptr);
}

TEST(SafetensorsDir, SeveralFilesWithoutIndexAreAmbiguous) {
  TempDir dir;
  dir.file("a.safetensors", file_bytes(kOneTensor, "xy"));
  dir.file("b.safetensors", file_bytes(kOneTensor, "xy"));
  const std::string msg = error_message([&] { SafetensorsDir::open(dir.path().string()); });
  EXPECT_THAT(msg, HasSubstr("safetensors " + dir.path().string() + ": "));
  EXPECT_THAT(msg, HasSubstr("a.safetensors, b.safetensors"));
}

TEST(SafetensorsDir, EmptyDirectoryIsAnError) {
  TempDir dir;
  const std::string msg = error_message([&] { SafetensorsDir::open(dir.path().string()); });
  EXPECT_THAT(msg, HasSubstr(dir.path().string()));
  EXPECT_THAT(msg, HasSubstr("no model.safetensors.index.json"));
}

TEST(SafetensorsDir, MalformedConfigIsAnErrorNotIgnored) {
  TempDir dir;
  dir.file("model.safetensors", file_bytes(kOneTensor, "xy"));
  dir.file("config.json", R"({"hidden_size": 64,)");
  const std::string msg = error_message([&] { SafetensorsDir::open(dir.path().string()); });
  EXPECT_THAT(msg, HasSubstr("config.json " + (dir.path() / "config.json").string()));
  EXPECT_THAT(msg, HasSubstr("invalid JSON"));
}

// Two shards: shard 1 holds a (F32 [2]) and b (U8 [3]); shard 2 holds c (I16 [1]).
struct Sharded {
  TempDir dir{"shards"};
  Sharded() {
    dir.file("model-00001-of-00002.safetensors",
             file_bytes(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                        R"("b":{"dtype":"U8","shape":[3],"data_offsets":[8,11]}})",
                        le(0x3F800000, 4) + le(0x40000000, 4) + "bbb"));
    dir.file("model-00002-of-00002.safetensors",
             file_bytes(R"({"c":{"dtype":"I16","shape":[1],"data_offsets":[0,2]}})",
                        le(0xFFF9, 2)));  // -7
  }
  void index(const std::string& weight_map) {
    dir.file("model.safetensors.index.json",
             R"({"metadata":{"total_size":13},"weight_map":)" + weight_map + "}");
  }
  std::string path() const { return dir.path().string(); }
};

const char kGoodMap[] =
    R"({"a":"model-00001-of-00002.safetensors","b":"model-00001-of-00002.safetensors",)"
    R"("c":"model-00002-of-00002.safetensors"})";

TEST(SafetensorsDir, TwoShardsPresentTheUnion) {
  Sharded s;
  s.index(kGoodMap);
  auto d = SafetensorsDir::open(s.path());
  EXPECT_THAT(d->tensor_names(), ElementsAre("a", "b", "c"));
  EXPECT_EQ(d->shards().size(), 2u);
  EXPECT_EQ(load<float>(d->tensor("a"), 1), 2.0f);
  EXPECT_EQ(load<int16_t>(d->tensor("c"), 0), -7);
  ASSERT_NE(d->shard_of("c"), nullptr);
  EXPECT_THAT(d->shard_of("c")->path(), HasSubstr("model-00002-of-00002.safetensors"));
  EXPECT_EQ(d->shard_of("zzz"), nullptr);
  EXPECT_EQ(d->find("zzz"), nullptr);
}

TEST(SafetensorsDir, IndexTakesPrecedenceOverModelSafetensors) {
  Sharded s;
  s.index(kGoodMap);
  s.dir.file("model.safetensors", file_bytes(R"({"other":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}})", "o"));
  auto d = SafetensorsDir::open(s.path());
  EXPECT_EQ(d->find("other"), nullptr);
  EXPECT_NE(d->find("c"), nullptr);
}

TEST(SafetensorsDir, IndexNamingMissingShard) {
  Sharded s;
  s.index(R"({"a":"model-00001-of-00002.safetensors","x":"model-00003-of-00003.safetensors"})");
  const std::string msg = error_message([&] { SafetensorsDir::open(s.path()); });
  EXPECT_THAT(msg, HasSubstr("safetensors " + s.path() + ": model.safetensors.index.json"));
  EXPECT_THAT(msg, HasSubstr("shard 'model-00003-of-00003.safetensors'"));
  EXPECT_THAT(msg, HasSubstr("does not exist"));
}

TEST(SafetensorsDir, TensorInTwoShards) {
  Sharded s;
  // Shard 2 also holds "a".
  s.dir.file("model-00002-of-00002.safetensors",
             file_bytes(R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},)"
                        R"("c":{"dtype":"I16","shape":[1],"data_offsets":[1,3]}})", "a\xF9\xFF"));
  s.index(kGoodMap);
  const std::string msg = error_message([&] { SafetensorsDir::open(s.path()); });
  EXPECT_THAT(msg, HasSubstr("tensor 'a' is in two shards"));
  EXPECT_THAT(msg, HasSubstr("model-00001-of-00002.safetensors and model-00002-of-00002.safetensors"));
}

TEST(SafetensorsDir, IndexMapsTensorToShardThatLacksIt) {
  Sharded s;
  s.index(R"({"a":"model-00001-of-00002.safetensors","b":"model-00001-of-00002.safetensors",)"
          R"("c":"model-00001-of-00002.safetensors","z":"model-00002-of-00002.safetensors"})");
  const std::string msg = error_message([&] { SafetensorsDir::open(s.path()); });
  EXPECT_THAT(msg, HasSubstr("tensor 'c' is mapped to shard 'model-00001-of-00002.safetensors', "
                             "which does not hold it"));
}

TEST(SafetensorsDir, ShardHoldsTensorTheIndexDoesNotList) {
  Sharded s;
  s.index(R"({"a":"model-00001-of-00002.safetensors","c":"model-00002-of-00002.safetensors"})");
  const std::string msg = error_message([&] { SafetensorsDir::open(s.path()); });
  EXPECT_THAT(msg, HasSubstr("holds tensor 'b', which the index does not list"));
}

TEST(SafetensorsDir, ShardNameMustStayInsideTheDirectory) {
  Sharded s;
  s.index(R"({"a":"../model-00001-of-00002.safetensors"})");
  const std::string msg = error_message([&] { SafetensorsDir::open(s.path()); });
  EXPECT_THAT(msg, HasSubstr("is not a plain file name"));
}

TEST(SafetensorsDir, MalformedIndex) {
  Sharded s;
  s.dir.file("model.safetensors.index.json", R"({"weight_map": ["a"]})");
  std::string msg = error_message([&] { SafetensorsDir::open(s.path()); });
  EXPECT_THAT(msg, HasSubstr("model.safetensors.index.json: 'weight_map' is array, expected object"));
  s.dir.file("model.safetensors.index.json", R"({"metadata":{}})");
  msg = error_message([&] { SafetensorsDir::open(s.path()); });
  EXPECT_THAT(msg, HasSubstr("missing 'weight_map'"));
  s.dir.file("model.safetensors.index.json", R"({"weight_map":{"a":"x","a":"y"}})");
  msg = error_message([&] { SafetensorsDir::open(s.path()); });
  EXPECT_THAT(msg, HasSubstr("duplicate key 'weight_map.a'"));
}

TEST(SafetensorsDir, ErrorInsideAShardNamesTheShard) {
  Sharded s;
  s.dir.file("model-00002-of-00002.safetensors", file_bytes(R"({"c":{"dtype":"I16"}})"));
  s.index(kGoodMap);
  const std::string msg = error_message([&] { SafetensorsDir::open(s.path()); });
  EXPECT_THAT(msg, HasSubstr("safetensors " + (s.dir.path() / "model-00002-of-00002.safetensors").string() +
                             ": tensor 'c': missing 'shape'"));
}

// --- config.json ----------------------------------------------------------------------------

const char kConfigText[] = R"({
  "architectures": ["Qwen3_5ForConditionalGeneration"],
  "model_type": "qwen3_5",
  "tie_word_embeddings": false,
  "vocab_size": 151936,
  "text_config": {
    "hidden_size": 2048,
    "rms_norm_eps": 1e-06,
    "tie_word_embeddings": true,
    "vocab_size": 248320,
    "layer_types": ["linear_attention", "full_attention"],
    "rope_parameters": {"rope_theta": 10000000, "mrope_section": [11, 11, 10]},
    "sliding_window": null,
    "attn_output_gate": true,
    "head_dim": "256"
  },
  "big": 18446744073709551615,
  "ratio": 4.0
})";

HfConfig sample_config() { return HfConfig::parse(kConfigText, "/m/config.json"); }

TEST(HfConfig, TypedGetters) {
  const HfConfig c = sample_config();
  EXPECT_EQ(c.get_string("model_type"), "qwen3_5");
  EXPECT_EQ(c.get_int("vocab_size"), 151936);
  EXPECT_FALSE(c.get_bool("tie_word_embeddings"));
  EXPECT_EQ(c.get_float("rms_norm_eps"), 1e-6);
  EXPECT_EQ(c.get_float("ratio"), 4.0);
  EXPECT_THAT(c.get_string_array("layer_types"), ElementsAre("linear_attention", "full_attention"));
  EXPECT_EQ(c.architecture(), "Qwen3_5ForConditionalGeneration");
  EXPECT_EQ(c.path(), "/m/config.json");
  EXPECT_EQ(c.text(), kConfigText);
}

TEST(HfConfig, TopLevelFirstThenTextConfig) {
  const HfConfig c = sample_config();
  EXPECT_TRUE(c.has_text_config());
  EXPECT_EQ(c.get_int("hidden_size"), 2048);     // only in text_config
  EXPECT_EQ(c.get_int("vocab_size"), 151936);    // both: the top level wins
  EXPECT_TRUE(c.get_bool("attn_output_gate"));
  EXPECT_TRUE(c.has("hidden_size"));
  EXPECT_FALSE(c.has("num_experts"));
}

TEST(HfConfig, DottedPathAndIntArray) {
  const HfConfig c = sample_config();
  EXPECT_EQ(c.get_float("rope_parameters.rope_theta"), 1e7);  // an integer promotes
  EXPECT_EQ(c.get_int("rope_parameters.rope_theta"), 10000000);
  EXPECT_THAT(c.get_int_array("rope_parameters.mrope_section"), ElementsAre(11, 11, 10));
  EXPECT_EQ(error_message([&] { c.get_int("rope_parameters.partial_rotary_factor"); }),
            "config.json /m/config.json: key 'text_config.rope_parameters.partial_rotary_factor': missing");
}

TEST(HfConfig, ErrorMessagesNameKeyAndTypes) {
  const HfConfig c = sample_config();
  EXPECT_EQ(error_message([&] { c.get_int("num_hidden_layers"); }),
            "config.json /m/config.json: key 'num_hidden_layers': missing");
  EXPECT_EQ(error_message([&] { c.get_int("head_dim"); }),
            "config.json /m/config.json: key 'text_config.head_dim': is string, expected integer");
  EXPECT_EQ(error_message([&] { c.get_int("ratio"); }),  // 4.0 is not an integer
            "config.json /m/config.json: key 'ratio': is float, expected integer");
  EXPECT_EQ(error_message([&] { c.get_string("vocab_size"); }),
            "config.json /m/config.json: key 'vocab_size': is integer, expected string");
  EXPECT_EQ(error_message([&] { c.get_bool("model_type"); }),
            "config.json /m/config.json: key 'model_type': is string, expected boolean");
  EXPECT_EQ(error_message([&] { c.get_float("layer_types"); }),
            "config.json /m/config.json: key 'text_config.layer_types': is array, expected number");
  EXPECT_EQ(error_message([&] { c.get_int_array("layer_types"); }),
            "config.json /m/config.json: key 'text_config.layer_types[0]': is string, expected integer");
  EXPECT_THAT(error_message([&] { c.get_int("big"); }), HasSubstr("out of int64 range"));
}

TEST(HfConfig, NullCountsAsAbsentForDefaults) {
  const HfConfig c = sample_config();
  EXPECT_FALSE(c.has("sliding_window"));
  ASSERT_NE(c.find("sliding_window"), nullptr);  // present, null
  EXPECT_EQ(c.get_int_or("sliding_window", 4096), 4096);
  EXPECT_EQ(c.get_int_or("num_experts", 0), 0);
  EXPECT_EQ(c.get_int_or("hidden_size", 1), 2048);
  EXPECT_EQ(c.get_string_or("rope_type", "default"), "default");
  EXPECT_EQ(error_message([&] { c.get_int("sliding_window"); }),
            "config.json /m/config.json: key 'text_config.sliding_window': is null, expected integer");
  // A present value of the wrong type is not silently replaced by the default.
  EXPECT_THAT(error_message([&] { c.get_int_or("head_dim", 128); }), HasSubstr("expected integer"));
}

TEST(HfConfig, FlatConfigWithoutTextConfig) {
  const HfConfig c = HfConfig::parse(R"({"hidden_size": 8, "text_config": null})", "c.json");
  EXPECT_FALSE(c.has_text_config());
  EXPECT_EQ(c.get_int("hidden_size"), 8);
  EXPECT_EQ(error_message([&] { c.architecture(); }), "config.json c.json: key 'architectures': missing");
}

TEST(HfConfig, MalformedConfigs) {
  EXPECT_THAT(error_message([] { HfConfig::parse("[1]", "c.json"); }),
              HasSubstr("config.json c.json: top level is array, expected object"));
  EXPECT_THAT(error_message([] { HfConfig::parse(R"({"text_config": 3})", "c.json"); }),
              HasSubstr("key 'text_config': is integer, expected object"));
  EXPECT_THAT(error_message([] { HfConfig::parse(R"({"a": 1, "a": 2})", "c.json"); }),
              HasSubstr("duplicate key 'a'"));
  EXPECT_THAT(error_message([] { HfConfig::parse(R"({"a": )", "c.json"); }),
              HasSubstr("config.json c.json: invalid JSON"));
  EXPECT_THAT(error_message([] { HfConfig::parse(R"({"architectures": []})", "c.json").architecture(); }),
              HasSubstr("key 'architectures': is empty"));
  EXPECT_THAT(error_message([] { HfConfig::load("/nonexistent/config.json"); }),
              HasSubstr("config.json /nonexistent/config.json: cannot open"));
}

// --- open_weights dispatch ------------------------------------------------------------------

TEST(OpenWeights, DirectoryAndSafetensorsFile) {
  TempDir dir;
  const std::string file = dir.file("model.safetensors", file_bytes(kOneTensor, "xy"));
  dir.file("config.json", R"({"hidden_size": 2})");
  auto d = open_weights(dir.path().string());
  EXPECT_EQ(d->kind(), SourceKind::Safetensors);
  ASSERT_NE(dynamic_cast<SafetensorsDir*>(d.get()), nullptr);
  EXPECT_NE(d->hf_config_json(), nullptr);
  auto f = open_weights(file);
  ASSERT_NE(dynamic_cast<SafetensorsFile*>(f.get()), nullptr);
  EXPECT_EQ(f->path(), file);
  EXPECT_EQ(f->hf_config_json(), nullptr);  // a single file carries no config
  EXPECT_EQ(load<char>(f->tensor("w"), 0), 'x');
}

TEST(OpenWeights, SafetensorsWithoutSuffixIsSniffed) {
  TempDir dir;
  const std::string file = dir.file("weights.bin", file_bytes(kOneTensor, "xy"));
  auto f = open_weights(file);
  EXPECT_NE(dynamic_cast<SafetensorsFile*>(f.get()), nullptr);
}

TEST(OpenWeights, NonexistentPathIsNamed) {
  EXPECT_EQ(error_message([] { open_weights("/nonexistent/memra/model.gguf"); }),
            "open_weights /nonexistent/memra/model.gguf: no such file or directory");
}

TEST(OpenWeights, UnrecognisedFileIsRefused) {
  TempDir dir;
  const std::string file = dir.file("notes.txt", "hello, this is not a model");
  const std::string msg = error_message([&] { open_weights(file); });
  EXPECT_THAT(msg, HasSubstr("open_weights " + file + ": neither GGUF"));
}

// A minimal GGUF v3 file: no metadata, one F32 tensor "t" of 2 elements, data aligned to 32.
std::string tiny_gguf() {
  std::string b = "GGUF" + le(3, 4) + le(1, 8) + le(0, 8);  // magic, version, n_tensors, n_kv
  b += le(1, 8) + "t";                                       // name
  b += le(1, 4) + le(2, 8);                                  // n_dims, ne[0]
  b += le(0, 4) + le(0, 8);                                  // type F32, offset 0
  b.append((32 - b.size() % 32) % 32, '\0');
  return b + le(0x3F800000, 4) + le(0xC0200000, 4);          // 1.0, -2.5
}

TEST(OpenWeights, GgufBySuffixAndByMagic) {
  TempDir dir;
  for (const char* name : {"m.gguf", "renamed.bin"}) {
    SCOPED_TRACE(name);
    const std::string file = dir.file(name, tiny_gguf());
    auto g = open_weights(file);
    EXPECT_EQ(g->kind(), SourceKind::Gguf);
    EXPECT_NE(dynamic_cast<GgufFile*>(g.get()), nullptr);
    const TensorView& t = g->tensor("t");
    EXPECT_THAT(t.ne, ElementsAre(2));
    EXPECT_EQ(load<float>(t, 1), -2.5f);
  }
}

TEST(OpenWeights, GgufSuffixOnSafetensorsBytesFailsAsGguf) {
  // The suffix decides: a .gguf that is not GGUF gets the GGUF reader's error, not a guess.
  TempDir dir;
  const std::string file = dir.file("wrong.gguf", file_bytes(kOneTensor, "xy"));
  EXPECT_THAT(error_message([&] { open_weights(file); }), HasSubstr(file));
}

// --- writer ---------------------------------------------------------------------------------

TEST(SafetensorsWriter, MatchesHandBuiltBytes) {
  TempDir dir;
  const std::string f32 = le(0x3F800000, 4) + le(0xC0200000, 4);
  TensorView w{"w", DType::F32, {2}, std::as_bytes(std::span(f32.data(), f32.size()))};
  const std::string path = (dir.path() / "w.safetensors").string();
  write_safetensors_file(path, {w}, {{"format", "pt"}});
  std::string header = R"({"__metadata__":{"format":"pt"},"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  header.append((8 - (8 + header.size()) % 8) % 8, ' ');
  std::ifstream in(path, std::ios::binary);
  const std::string got((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(got, file_bytes(header, f32));
  EXPECT_EQ(got.size() % 8, 0u);
}

TEST(SafetensorsWriter, RoundTripThroughReader) {
  TempDir dir;
  const std::string bf = le(0x3F80, 2) + le(0xC020, 2) + le(0x4049, 2) + le(0x0000, 2) +
                         le(0xBF00, 2) + le(0x7F80, 2);  // [2, 3] bf16
  const std::string i8 = "\x01\xFF\x7F";
  const std::string e4 = "\x38";
  std::vector<TensorView> ts = {
      {"layer.weight", DType::BF16, {3, 2}, std::as_bytes(std::span(bf.data(), bf.size()))},
      {"bias", DType::I8, {3}, std::as_bytes(std::span(i8.data(), i8.size()))},
      {"scale", DType::F8_E4M3, {}, std::as_bytes(std::span(e4.data(), e4.size()))},
  };
  const std::string path = (dir.path() / "r.safetensors").string();
  write_safetensors_file(path, ts, {{"a", "1"}, {"b", "two"}});
  auto f = SafetensorsFile::open(path);
  EXPECT_THAT(f->tensor_names(), ElementsAre("layer.weight", "bias", "scale"));
  for (const TensorView& t : ts) {
    const TensorView& r = f->tensor(t.name);
    EXPECT_EQ(r.type, t.type) << t.name;
    EXPECT_EQ(r.ne, t.ne) << t.name;
    ASSERT_EQ(r.nbytes(), t.nbytes()) << t.name;
    EXPECT_EQ(std::memcmp(r.data.data(), t.data.data(), t.data.size()), 0) << t.name;
  }
  EXPECT_EQ(f->metadata().at("b"), "two");
  EXPECT_EQ(f->data_start() % 8, 0u);
}

TEST(SafetensorsWriter, RefusesWhatTheFormatCannotHold) {
  TempDir dir;
  const std::string path = (dir.path() / "bad.safetensors").string();
  const std::string four(4, '\0');
  const auto bytes = std::as_bytes(std::span(four.data(), four.size()));
  EXPECT_THAT(error_message([&] { write_safetensors_file(path, {{"q", DType::Q8_0, {32}, bytes}}); }),
              HasSubstr("type q8_0 has no safetensors dtype"));
  EXPECT_THAT(error_message([&] { write_safetensors_file(path, {{"f", DType::F32, {2}, bytes}}); }),
              HasSubstr("data is 4 bytes, shape needs 8"));
  EXPECT_THAT(error_message([&] {
                write_safetensors_file(path, {{"f", DType::F32, {1}, bytes}, {"f", DType::U8, {4}, bytes}});
              }),
              HasSubstr("tensor 'f': name used twice"));
}

}  // namespace
}  // namespace memra
