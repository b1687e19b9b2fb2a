// GPU test fixtures: tiny models of every family in every weight type the GPU model streams,
// built in memory (no files) from deterministic random canonical weights.
//
//   gguf: llama.cpp names; matrices stored as F32 / BF16 / Q8_0 / NVFP4 (+ "<name>.scale")
//         where the row length allows the block, except the MoE router and the conv taps
//         (kept F32, as llama.cpp's quantizer does);
//   hf:   HF names (Qwen3-Next's interleaved qkvz/ba, zero-centred norms), matrices BF16; the
//         only form of GLM-5 (glm-dsa: MLA + DSA indexer + sigmoid-grouped MoE), whose fixtures
//         take every type (an in-memory source holds Q8_0 / NVFP4 blocks under HF names);
//   DeepSeek-V4 (deepseek4): GGUF under llama.cpp's deepseek4 names and HF under transformers';
//         type F8_E4M3 with hf is the model as DeepSeek releases it (its names, FP8 projections
//         with E8M0 block scales, FP4 experts: to_dsv4_release_source);
//   GLM-5's hybrid (glm5-next): HF only (transformers' names; llama.cpp has no such architecture);
//   F8_E4M3 for GLM-5 (hf): the projections block-scaled as its FP8 release stores them
//         (to_hf_fp8_source: E4M3 codes, one F32 "<base>.weight_scale_inv" per 128 x 128 block).
// The oracle and the GPU model load the SAME source, so the only differences between them are
// the engines' arithmetic (f64 vs f32 accumulation, q8_1 activations).
#pragma once

#include <cctype>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "exactness/split.h"
#include "memra/config.h"
#include "memra/engine.h"
#include "memra/error.h"
#include "memra/fixture.h"
#include "memra/memory_source.h"
#include "memra/model.h"
#include "memra/quant.h"
#include "memra/testing/fixtures.h"
#include "memra/testing/gpu.h"
#include "memra/weights.h"

namespace memra::gpu_test {

// Tensors a conversion to `type` leaves F32: the MoE router and the conv taps in a block-quantised
// file (llama.cpp's quantizer keeps them; GGUF's ffn_gate_inp, HF's mlp.gate), the NVFP4 scales. A
// BF16 conversion takes the HF router too, as a BF16 checkpoint stores it.
inline bool keep_f32(const std::string& name, DType type) {
  const bool blocks = type == DType::Q8_0 || type == DType::NVFP4;
  auto has = [&](const char* part) { return name.find(part) != std::string::npos; };
  // DeepSeek-V4's hyper-connection mixers and compressor position biases stay F32 as its
  // converters keep them (GGUF hc_* / output_hc_* / *_ape, HF attn_hc / ffn_hc / hc_head /
  // position_bias)
  const bool dsv4_f32 = has("hc_") || has("_hc.") || has("_ape") || has("position_bias");
  return has("ffn_gate_inp") || has("conv1d") || name.ends_with(".scale") || dsv4_f32 ||
         (blocks && name.ends_with("mlp.gate.weight"));
}

// Re-stores every eligible matrix of `src` as `type`.
inline void convert_matrices(MemorySource& src, DType type) {
  if (type == DType::F32) return;
  const int64_t bs = type_traits(type).block_elems;
  for (const std::string& name : src.tensor_names()) {
    const TensorView t = *src.find(name);
    if (t.ne.size() < 2 || keep_f32(name, type) || t.type != DType::F32 || t.ne[0] % bs != 0) continue;
    const int64_t cols = t.ne[0], rows = t.nelements() / cols;
    const float* x = reinterpret_cast<const float*>(t.data.data());
    std::vector<std::byte> bytes(static_cast<size_t>(row_bytes(type, cols) * rows));
    if (type == DType::NVFP4) {
      const float s2 = quantize_nvfp4_tensor(x, bytes.data(), rows, cols);
      const std::string base = name.ends_with(".weight") ? name.substr(0, name.size() - 7) : name;
      src.add(name, type, t.ne, std::move(bytes));
      const float sv[1] = {s2};
      src.add_f32(base + ".scale", {1}, sv);
    } else {
      for (int64_t r = 0; r < rows; ++r)
        quantize_row(type, x + r * cols, bytes.data() + r * row_bytes(type, cols), cols);
      src.add(name, type, t.ne, std::move(bytes));
    }
  }
}

struct FixtureModel {
  std::string id;
  ModelConfig config;
  std::unique_ptr<MemorySource> source;
  DType type = DType::F32;  // the matrices' weight type
  bool hf = false;          // HF names (else llama.cpp's)
};

// A fixture's id "<family>-<type>-<gguf|hf>", e.g. "qwen35moe-nvfp4-gguf": the model id of the
// gates' cases (memra/testing/gate.h GateCase::model). A wide fixture (n_embd > 0: the unit
// preset at that hidden width, the heads keeping their sizes, a 4096-token vocabulary) appends
// "-d<n_embd>", e.g. "qwen35-q8_0-gguf-d4096": rows as wide as the benchmark shapes' (the
// mat-vec forms that only such rows take), the rest as small as the unit preset.
inline std::string fixture_id(Family f, DType type, bool hf, int64_t n_embd = 0) {
  std::string t(dtype_name(type));
  for (char& ch : t) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return std::string(family_arch(f)) + "-" + t + (hf ? "-hf" : "-gguf") +
         (n_embd > 0 ? "-d" + std::to_string(n_embd) : std::string());
}

inline FixtureModel make_fixture(Family f, DType type, bool hf, uint64_t seed = 7, int64_t n_embd = 0) {
  FixtureModel m;
  // a wide fixture's vocabulary: an lm_head of 256 row tiles, more than any GPU's SMs
  const int64_t vocab = n_embd > 0 ? 4096 : 512;
  m.config =
      fixture::fixture_config({.family = f, .preset = fixture::Preset::Unit, .n_vocab = vocab, .n_embd = n_embd});
  const ModelWeights w = random_weights(m.config, seed + static_cast<uint64_t>(f));
  if (type == DType::F8_E4M3) {  // the FP8 releases' forms
    if (!hf) fail("gpu fixture: FP8 fixtures are HF directories");
    m.source = std::make_unique<MemorySource>(f == Family::DeepseekV4 ? to_dsv4_release_source(m.config, w)
                                                                      : to_hf_fp8_source(m.config, w));
  } else {
    m.source = std::make_unique<MemorySource>(hf ? to_hf_source(m.config, w) : to_gguf_source(m.config, w));
    convert_matrices(*m.source, type);
  }
  m.id = fixture_id(f, type, hf, n_embd);
  m.type = type;
  m.hf = hf;
  return m;
}

// The fixture `id` names (fixture_id's inverse); an error naming the id for any other string.
inline FixtureModel make_fixture(const std::string& id, uint64_t seed = 7) {
  std::string base = id;
  int64_t n_embd = 0;
  if (const size_t d = id.rfind("-d");
      d != std::string::npos && d + 2 < id.size() && id.find_first_not_of("0123456789", d + 2) == std::string::npos) {
    n_embd = std::stoll(id.substr(d + 2));
    base = id.substr(0, d);
  }
  for (Family f : {Family::Qwen3, Family::Qwen3Next, Family::Qwen35, Family::Qwen35Moe, Family::GlmDsa,
                   Family::DeepseekV4, Family::Glm5Next})
    for (DType t : {DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::NVFP4, DType::F8_E4M3})
      for (bool hf : {false, true})
        if (fixture_id(f, t, hf) == base) return make_fixture(f, t, hf, seed, n_embd);
  fail("gpu fixture: no fixture model '", id,
       "' (ids are <family>-<type>-<gguf|hf>[-d<hidden width>], e.g. qwen35moe-nvfp4-gguf, qwen35-q8_0-gguf-d4096)");
}

// Whether the test device runs the bulk-fed mat-vec tiles (sm_90 on: their kernels' code), which
// the wide fixtures' rows reach (Counters::bulk_tile_launches).
inline bool device_has_bulk_tiles() {
  const std::optional<testing::GpuInfo> g = testing::test_gpu();
  return g && g->cc_major >= 9;
}

// A fixture model on the GPU alone, for the gates that compare the GPU model's own arms
// (DecodeBatch, DecodeGraph); one engine on the test device per process.
struct GpuFixture {
  FixtureModel fx;
  std::unique_ptr<Model> gpu;
};

inline Engine& gpu_fixture_engine() {
  static Engine e = Engine::open(testing::test_device());
  return e;
}

inline std::unique_ptr<GpuFixture> load_gpu_fixture(const std::string& id) {
  auto m = std::make_unique<GpuFixture>();
  m->fx = make_fixture(id);
  m->gpu = std::make_unique<Model>(Model::load(gpu_fixture_engine(), *m->fx.source, gate_load_options()));
  return m;
}

}  // namespace memra::gpu_test
