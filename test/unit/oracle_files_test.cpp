// End to end through the real file readers: a model written as a GGUF file (GgufWriter, the
// llama.cpp key types: u32 counts, f32 floats, bool-array recurrent_layers) and as an HF
// directory (config.json with nested rope_parameters + model.safetensors) loads through
// open_weights and gives the same logits as the in-memory sources.
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "memra/gguf.h"
#include "memra/oracle.h"
#include "memra/safetensors.h"
#include "memra/testing/fixtures.h"
#include "memra/weights.h"

namespace memra::oracle {
namespace {

using testing_fixtures::bit_equal;
using testing_fixtures::prompt;
using testing_fixtures::unit_config;

// Metadata as llama.cpp's converter types it: integers u32, floats f32 (so rms eps and theta
// come back as f32-rounded values, as from a real file), per-layer flags as a bool array.
std::vector<std::byte> gguf_bytes(const MemorySource& s) {
  GgufWriter w;
  for (const auto& [k, v] : s.all_meta()) {
    if (auto* i = std::get_if<int64_t>(&v)) w.set_u32(k, static_cast<uint32_t>(*i));
    else if (auto* d = std::get_if<double>(&v)) w.set_f32(k, static_cast<float>(*d));
    else if (auto* b = std::get_if<bool>(&v)) w.set_bool(k, *b);
    else if (auto* str = std::get_if<std::string>(&v)) w.set_string(k, *str);
    else if (auto* a = std::get_if<std::vector<int64_t>>(&v)) {
      if (k.ends_with("recurrent_layers")) w.set_bool_array(k, std::vector<bool>(a->begin(), a->end()));
      else w.set_i32_array(k, std::vector<int32_t>(a->begin(), a->end()));
    }
  }
  for (const std::string& n : s.tensor_names()) {
    const TensorView& t = s.tensor(n);
    w.add_tensor(n, t.type, t.ne, t.data);
  }
  return w.to_bytes();
}

std::string config_json(const MemorySource& s) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [k, v] : s.all_meta()) {
    nlohmann::json* at = &j;
    std::string key = k;
    if (auto dot = k.find('.'); dot != std::string::npos) {  // "rope_parameters.rope_theta"
      at = &j[k.substr(0, dot)];
      key = k.substr(dot + 1);
    }
    std::visit([&](const auto& x) { (*at)[key] = x; }, v);
  }
  return j.dump(2);
}

class OracleFiles : public ::testing::TestWithParam<Family> {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::path(MEMRA_BINARY_DIR) / "test-tmp" /
           ("oracle_files_" + std::string(family_arch(GetParam())));
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_;
};

TEST_P(OracleFiles, GgufFileAndHfDirectoryMatchMemorySources) {
  ModelConfig c = unit_config(GetParam());
  if (c.family != Family::Qwen3) c.n_mtp = 1;
  c.rms_eps = static_cast<float>(1e-6);  // as the f32 key of a real GGUF file stores it
  c.rope_theta = static_cast<float>(c.rope_theta);
  ModelWeights w = random_weights(c, 31);
  Options o;
  o.threads = 1;
  auto p = prompt(12, c.n_vocab, 3);

  MemorySource g = to_gguf_source(c, w);
  const std::string gguf_path = (dir_ / "m.gguf").string();
  {
    auto bytes = gguf_bytes(g);
    std::ofstream(gguf_path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()),
                                                     static_cast<std::streamsize>(bytes.size()));
  }
  auto gf = open_weights(gguf_path);
  Model mf = Model::load(*gf, o);
  EXPECT_TRUE(mf.config() == c) << mf.config().summary();
  const std::vector<float> ref = Model::load(g, o).forward_last(p);
  EXPECT_TRUE(bit_equal(mf.forward_last(p), ref));

  MemorySource h = to_hf_source(c, w);
  std::vector<TensorView> views;
  for (const std::string& n : h.tensor_names()) views.push_back(h.tensor(n));
  write_safetensors_file((dir_ / "model.safetensors").string(), views);
  std::ofstream(dir_ / "config.json") << config_json(h);
  auto hd = open_weights(dir_.string());
  Model mh = Model::load(*hd, o);
  EXPECT_TRUE(mh.config() == c) << mh.config().summary();
  EXPECT_TRUE(bit_equal(mh.forward_last(p), ref));
}

INSTANTIATE_TEST_SUITE_P(Families, OracleFiles,
                         ::testing::Values(Family::Qwen3, Family::Qwen3Next, Family::Qwen35, Family::Qwen35Moe),
                         [](const auto& i) { return std::string(family_arch(i.param)); });

}  // namespace
}  // namespace memra::oracle
