// Bad input to the oracle is an error with context, never a crash or a silent wrong answer
// (DESIGN.md numeric law 6): out-of-vocabulary ids, prompts over the cache, empty prompts,
// NaN/Inf named with the layer where it first appeared, wrong architecture, missing and
// misshaped tensors, a cache from another model, MTP on a model without one.
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "memra/error.h"
#include "memra/gguf.h"
#include "memra/oracle.h"
#include "memra/testing/fixtures.h"
#include "memra/weights.h"

namespace memra::oracle {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::ThrowsMessage;
using testing_fixtures::unit_config;

Model model(Family f, ModelWeights* keep = nullptr) {
  ModelConfig c = unit_config(f);
  ModelWeights w = random_weights(c, 21);
  if (keep) *keep = w;
  Options o;
  o.threads = 1;
  return Model::from_weights(c, std::move(w), o);
}

TEST(OracleErrors, TokenIdOutOfRange) {
  Model m = model(Family::Qwen35);
  const std::vector<int32_t> p = {1, 2, 512, 4};
  EXPECT_THAT([&] { m.forward_last(p); },
              ThrowsMessage<Error>(HasSubstr("token id 512 at position 2 out of range (vocab 512)")));
  const std::vector<int32_t> n = {-1};
  EXPECT_THAT([&] { m.forward_all(n); },
              ThrowsMessage<Error>(HasSubstr("token id -1 at position 0 out of range (vocab 512)")));
  Cache c = m.new_cache(8);
  m.prime(std::vector<int32_t>{1, 2, 3}, c);
  EXPECT_THAT([&] { m.decode_step(9999, c); },
              ThrowsMessage<Error>(HasSubstr("token id 9999 at position 3 out of range")));
}

TEST(OracleErrors, PromptOverTheCacheNamesBoth) {
  Model m = model(Family::Qwen3);
  Cache c = m.new_cache(4);
  const std::vector<int32_t> p = {1, 2, 3, 4, 5};
  EXPECT_THAT([&] { m.prime(p, c); },
              ThrowsMessage<Error>(HasSubstr("prompt of 5 tokens at position 0 exceeds the cache's max_ctx 4")));
  m.prime(std::vector<int32_t>{1, 2, 3, 4}, c);
  EXPECT_THAT([&] { m.decode_step(1, c); },
              ThrowsMessage<Error>(HasSubstr("prompt of 1 tokens at position 4 exceeds the cache's max_ctx 4")));
  EXPECT_THAT([&] { m.new_cache(0); }, ThrowsMessage<Error>(HasSubstr("max_ctx 0")));
}

TEST(OracleErrors, EmptyPrompt) {
  Model m = model(Family::Qwen3);
  Cache c = m.new_cache(4);
  EXPECT_THAT([&] { m.forward_last({}); }, ThrowsMessage<Error>(HasSubstr("empty prompt")));
  EXPECT_THAT([&] { m.prime({}, c); }, ThrowsMessage<Error>(HasSubstr("empty prompt")));
}

TEST(OracleErrors, NonFiniteNamesTheLayer) {
  ModelConfig c = unit_config(Family::Qwen3Next);
  ModelWeights w = random_weights(c, 22);
  const std::vector<int32_t> p = {5, 6, 7};
  // An Inf in layer 1's GDN output projection first shows after layer 1's mixer.
  ModelWeights a = w;
  a.layers[1].gdn->wout.data[0] = std::numeric_limits<float>::infinity();
  EXPECT_THAT([&] { Model::from_weights(c, a).forward_last(p); },
              ThrowsMessage<Error>(
                  AllOf(HasSubstr("non-finite"), HasSubstr("in layer 1 (linear attention)"), HasSubstr("position 0"))));
  // A NaN in layer 3's MoE router poisons its MoE output.
  ModelWeights b = w;
  b.layers[3].moe->router.data[5] = std::nanf("");
  EXPECT_THAT([&] { Model::from_weights(c, b).forward_last(p); }, ThrowsMessage<Error>(HasSubstr("in layer 3 (MoE)")));
  // A NaN in the lm_head only shows in the logits.
  ModelWeights d = w;
  d.output.data[64 * 100] = std::nanf("");
  EXPECT_THAT(
      [&] { Model::from_weights(c, d).forward_last(p); },
      ThrowsMessage<Error>(AllOf(HasSubstr("non-finite value"), HasSubstr("element 100"), HasSubstr("in lm_head"))));
  // A NaN embedding row is named as the embedding.
  ModelWeights e = w;
  e.embed.at(6, 3) = std::nanf("");
  EXPECT_THAT([&] { Model::from_weights(c, e).forward_last(p); },
              ThrowsMessage<Error>(AllOf(HasSubstr("token embedding"), HasSubstr("position 1"))));
}

TEST(OracleErrors, WrongArchitectureIsNamed) {
  ModelConfig c = unit_config(Family::Qwen3);
  MemorySource g = to_gguf_source(c, random_weights(c, 23));
  g.set("general.architecture", std::string("qwen3moe"));
  EXPECT_THAT([&] { Model::load(g); }, ThrowsMessage<Error>(HasSubstr("unsupported architecture 'qwen3moe'")));
  MemorySource h = to_hf_source(c, random_weights(c, 23));
  h.set("architectures", std::vector<std::string>{"MistralForCausalLM"});
  EXPECT_THAT([&] { Model::load(h); }, ThrowsMessage<Error>(HasSubstr("'MistralForCausalLM'")));
}

TEST(OracleErrors, MissingAndMisshapedTensorsThroughLoad) {
  ModelConfig c = unit_config(Family::Qwen3Next);
  ModelWeights w = random_weights(c, 24);
  MemorySource g = to_gguf_source(c, w);
  g.remove("blk.0.ssm_ba.weight");
  EXPECT_THAT([&] { Model::load(g); }, ThrowsMessage<Error>(HasSubstr("'blk.0.ssm_ba.weight' missing")));
  MemorySource h = to_hf_source(c, w);
  std::vector<float> bad(64 * 5, 0.0f);
  h.add_f32("model.layers.1.mlp.gate.weight", {64, 5}, bad);
  EXPECT_THAT([&] { Model::load(h); },
              ThrowsMessage<Error>(AllOf(HasSubstr("model.layers.1.mlp.gate.weight"), HasSubstr("{64, 5}"),
                                         HasSubstr("expected {64, 4}"))));
}

// The same two errors from real files: a GGUF that another tool wrote (llama.cpp's converter,
// test/fixtures/converted/), patched in place — the architecture value renamed, a tensor name
// changed — must fail to load with the file and the thing named.
std::string patched_copy(const std::string& what, const std::string& from, const std::string& to) {
  const std::string src = std::string(MEMRA_SOURCE_DIR) + "/test/fixtures/converted/bank_qwen35.gguf";
  std::ifstream in(src, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t at = bytes.find(from);
  if (at == std::string::npos || from.size() != to.size()) throw std::runtime_error("cannot patch " + src);
  bytes.replace(at, from.size(), to);
  const auto path = std::filesystem::temp_directory_path() / ("memra-oracle-errors-" + what + ".gguf");
  std::ofstream(path, std::ios::binary) << bytes;
  return path.string();
}

TEST(OracleErrors, WrongArchitectureAndMissingTensorInAFile) {
  // The architecture value follows its key, the type (u32) and the length (u64).
  const std::string key = "general.architecture";
  const std::string arch_file = patched_copy("arch", key + std::string("\x08\0\0\0\x06\0\0\0\0\0\0\0qwen35", 18),
                                             key + std::string("\x08\0\0\0\x06\0\0\0\0\0\0\0qwen99", 18));
  EXPECT_THAT([&] { Model::load(*GgufFile::open(arch_file)); },
              ThrowsMessage<Error>(AllOf(HasSubstr(arch_file), HasSubstr("unsupported architecture 'qwen99'"))));
  const std::string tensor_file = patched_copy("tensor", "output_norm.weight", "output_norX.weight");
  EXPECT_THAT([&] { Model::load(*GgufFile::open(tensor_file)); },
              ThrowsMessage<Error>(AllOf(HasSubstr(tensor_file), HasSubstr("'output_norm.weight' missing"))));
  std::filesystem::remove(arch_file);
  std::filesystem::remove(tensor_file);
}

TEST(OracleErrors, InconsistentWeightsAndForeignCache) {
  ModelConfig c = unit_config(Family::Qwen35);
  ModelWeights w = random_weights(c, 25);
  ModelWeights bad = w;
  bad.layers[2].gdn->norm.pop_back();
  EXPECT_THAT([&] { Model::from_weights(c, bad); }, ThrowsMessage<Error>(HasSubstr("layer 2.norm: 11 values, expected 12")));
  Model m = Model::from_weights(c, w);
  Model q = model(Family::Qwen3);
  Cache foreign = q.new_cache(8);
  EXPECT_THAT([&] { m.decode_step(1, foreign); }, ThrowsMessage<Error>(HasSubstr("cache from another model")));
  Cache mine = m.new_cache(8);
  Step s = m.decode_step(1, mine);
  EXPECT_THAT([&] { m.mtp_step(s.hidden, 2, mine); }, ThrowsMessage<Error>(HasSubstr("no MTP head")));
}

TEST(OracleErrors, TopKRejectsNaN) {
  const float l[3] = {1.0f, std::nanf(""), 0.0f};
  EXPECT_THAT([&] { top_k(l, 2); }, ThrowsMessage<Error>(HasSubstr("logit 1 is NaN")));
}

}  // namespace
}  // namespace memra::oracle
