// The exactness gates' file fixtures: a model FILE the GPU model loads as a user's would, with
// its sha256 and its tokenizer.
//
//   "<family>-<type>"  the tiny fixture GGUF <build>/fixtures/tiny-<family>-<type>.gguf (made by
//                      the ctest fixtures fixture_gen_tiny_*: D 64, the real Qwen3 vocabulary and
//                      tokenizer, weights scaled to trained-like margins; docs/fixtures.md), and
//                      its committed TeacherForced bank test/fixtures/banks/tf/<id>.json;
//                      "glm-dsa-f32" is GLM-5's f32 HF directory tiny-glm-dsa-hf (its bank hashes
//                      that directory's model.safetensors), "deepseek4-f32" DeepSeek-V4's
//                      tiny-deepseek4-hf, "glm5-next-f32" GLM-5's hybrid's tiny-glm5-next-hf;
//   "real-<preset>-<type>"  a realistic-shape fixture GGUF <build>/fixtures/<id>.gguf (made by
//                      fixture_gen_real_*: Qwen3-0.6B at full depth, Qwen3.5-9B and
//                      Qwen3.5-35B-A3B layers at 4 layers) and its TeacherForced bank <build>/fixtures/banks/<id>.json, made
//                      by the test run (bank_gen_real_*: memra-bank, 64 steps; not committed: the
//                      CPU oracle at these widths takes minutes on a CI box without a GPU);
//   "user"             the checkpoint MEMRA_GATE_MODEL names (a GGUF file or an HF directory;
//                      docs/testing.md "Your own checkpoint"), its bank MEMRA_GATE_BANK if set.
// The gates instantiate a "user" case each; it skips, saying why, unless MEMRA_GATE_MODEL is set,
// and is never part of strict-mode coverage.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "exactness/split.h"
#include "memra/engine.h"
#include "memra/error.h"
#include "memra/hash.h"
#include "memra/model.h"
#include "memra/source.h"
#include "memra/testing/gpu.h"
#include "memra/tokenizer.h"

namespace memra::gpu_test {

inline Engine& file_fixture_engine() {
  static Engine e = Engine::open(testing::test_device());
  return e;
}

struct FileFixture {
  std::string id;
  std::filesystem::path model_path, bank_path;
  std::string model_sha256;  // of the GGUF, or of an HF directory's model.safetensors
  std::unique_ptr<WeightSource> source;
  std::unique_ptr<Model> gpu;
  std::unique_ptr<Tokenizer> tokenizer;
  bool quantised = false;  // Q8_0 / NVFP4 matrices: the oracle takes the q8_1 contract
};

inline bool user_case(const std::string& id) { return id == "user"; }

// For a gate's SetUp: skip the user case without MEMRA_GATE_MODEL (true: skipped).
inline bool skip_user_case_without_model(const std::string& id) {
  const char* p = std::getenv("MEMRA_GATE_MODEL");
  return user_case(id) && (!p || !*p);
}
inline constexpr const char* kNoUserModel =
    "MEMRA_GATE_MODEL is not set: the user-checkpoint case runs a model of your own (docs/testing.md "
    "\"Your own checkpoint\"); never part of strict coverage";

// MEMRA_GATE_PROMPTS: one prompt per non-empty line (the user case's prompts); empty when unset.
// A file that is set but cannot be read is an error naming it.
inline std::vector<std::string> user_prompts() {
  const char* p = std::getenv("MEMRA_GATE_PROMPTS");
  std::vector<std::string> v;
  if (!p || !*p) return v;
  std::ifstream f(p);
  if (!f) fail("MEMRA_GATE_PROMPTS ", p, ": cannot open");
  for (std::string line; std::getline(f, line);)
    if (!line.empty()) v.push_back(line);
  if (v.empty()) fail("MEMRA_GATE_PROMPTS ", p, ": no prompt in it (one per line)");
  return v;
}

inline std::unique_ptr<FileFixture> load_file_fixture(const std::string& id) {
  namespace fs = std::filesystem;
  auto m = std::make_unique<FileFixture>();
  m->id = id;
  if (user_case(id)) {
    const char* p = std::getenv("MEMRA_GATE_MODEL");
    if (!p || !*p) fail("MEMRA_GATE_MODEL is not set");
    m->model_path = p;
    if (const char* b = std::getenv("MEMRA_GATE_BANK")) m->bank_path = b;
  } else if (id.starts_with("real-")) {
    m->model_path = fs::path(MEMRA_BINARY_DIR) / "fixtures" / (id + ".gguf");
    m->bank_path = fs::path(MEMRA_BINARY_DIR) / "fixtures/banks" / (id + ".json");
  } else {
    m->model_path = fs::path(MEMRA_BINARY_DIR) / "fixtures" / ("tiny-" + id + ".gguf");
    // The seed families have f32 HF directories, the files their committed banks were made from:
    // GLM-5, DeepSeek-V4 (the seed's own model), GLM-5's hybrid
    for (const char* f : {"glm-dsa", "deepseek4", "glm5-next"})
      if (id == std::string(f) + "-f32")
        m->model_path = fs::path(MEMRA_BINARY_DIR) / "fixtures" / ("tiny-" + id.substr(0, id.size() - 4) + "-hf");
    m->bank_path = fs::path(MEMRA_SOURCE_DIR) / "test/fixtures/banks/tf" / (id + ".json");
  }
  if (!fs::exists(m->model_path))
    fail(m->model_path.string(), ": no such model (the fixture files are made by the ctest fixtures fixture_gen_*)");
  const fs::path hashed = fs::is_directory(m->model_path) ? m->model_path / "model.safetensors" : m->model_path;
  m->model_sha256 = sha256_file_hex(hashed.string());
  m->source = open_weights(m->model_path.string());
  m->gpu = std::make_unique<Model>(Model::load(file_fixture_engine(), *m->source, gate_load_options()));
  m->tokenizer = std::make_unique<Tokenizer>(Tokenizer::for_model(*m->source));
  for (const std::string& n : m->source->tensor_names()) {
    const DType t = m->source->find(n)->type;
    m->quantised = m->quantised || t == DType::Q8_0 || t == DType::NVFP4;
  }
  return m;
}

// The realistic fixtures of `types` ("real-qwen3-0.6b-nvfp4", ...); no presets: one per family —
// Qwen3-0.6B, Qwen3.5-9B's layers (the GDN hybrid), Qwen3.5-35B-A3B's layers (its MoE).
inline std::vector<std::string> real_fixture_ids(std::initializer_list<const char*> types,
                                                 std::vector<std::string> presets = {}) {
  if (presets.empty()) presets = {"qwen3-0.6b", "qwen35-9b", "qwen35-35b-a3b"};
  std::vector<std::string> v;
  for (const std::string& p : presets)
    for (const char* t : types) v.push_back("real-" + p + "-" + t);
  return v;
}

// The fixture ids of `families` x `types` ("qwen35-nvfp4", ...); no families: all four.
inline std::vector<std::string> file_fixture_ids(std::initializer_list<const char*> types,
                                                 std::vector<std::string> families = {}) {
  if (families.empty()) families = {"qwen3", "qwen3next", "qwen35", "qwen35moe"};
  std::vector<std::string> v;
  for (const std::string& f : families)
    for (const char* t : types) v.push_back(f + "-" + t);
  return v;
}

}  // namespace memra::gpu_test
