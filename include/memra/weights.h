// memra/weights.h — the canonical weight set of a model, in f32, whatever the checkpoint.
//
// load_weights maps llama.cpp GGUF names and HF safetensors names onto ONE canonical layout and
// applies every convention difference on the way, so the oracle (and later the GPU model) never
// sees a checkpoint quirk. Canonical conventions (the "why" of each is the HF math in
// shared/reference/qwen-models.md):
//   - RMSNorm weights hold the multiplier actually applied: HF Next/3.5 zero-centred norms are
//     stored as 1+w (as llama.cpp's converter does); Qwen3 norms and the GDN gated norm
//     (linear_attn.norm / ssm_norm) are plain w.
//   - GDN decay: `ssm_a` = −exp(A_log) (GGUF ssm_a as is).
//   - GDN value heads in HF grouped order: value head h reads key head h / (n_v/n_k). The
//     tiled order llama.cpp writes for qwen35* is undone on load.
//   - GDN input projection split: wqkv rows [all q | all k | all v] (the conv channel order),
//     wz, wb, wa separate. HF Qwen3-Next's per-key-head interleaved in_proj_qkvz / in_proj_ba
//     (and GGUF's legacy ssm_in) are de-interleaved.
//   - Gated attention: q_proj's per-head [q | gate] rows are split into wq and wgate.
//   - Experts: one FfnWeights per expert whether the file has per-expert tensors, stacked
//     (GGUF *_exps) or fused gate_up tensors.
//   - Tied output: `output` is empty and the embedding serves as lm_head.
// Every tensor's shape is validated; a missing or misshaped tensor is an error naming the
// tensor, the expected and the actual shape.
//
// provides: Matrix, AttnWeights, GdnWeights, MlaWeights, DsaWeights, FfnWeights, MoeWeights, LayerWeights, MtpWeights,
//           ModelWeights, load_weights, random_weights, to_gguf_source, to_hf_source,
//           to_dsv4_release_source, to_hf_fp8_source
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "memra/config.h"
#include "memra/dtype.h"
#include "memra/layer_schema.h"
#include "memra/memory_source.h"
#include "memra/source.h"

namespace memra {

// Row-major [rows, cols]; used as y = W x (a PyTorch Linear weight [out, in]).
struct Matrix {
  int64_t rows = 0, cols = 0;
  std::vector<float> data;
  // The checkpoint tensor's storage type (F32 for generated weights), and whether a product with
  // this matrix rounds its input rows to q8_1 first (quantize_row_q8_1, then exactly
  // dequantised): the GPU's W8A8 / W4A8 activation contract (memra/quant.h), which an oracle
  // built with oracle::Options::q8_1_activations sets on every Q8_0 / NVFP4 matrix.
  DType stored = DType::F32;
  bool q8_1_input = false;
  Matrix() = default;
  Matrix(int64_t r, int64_t c) : rows(r), cols(c), data(static_cast<size_t>(r * c), 0.0f) {}
  bool empty() const { return data.empty(); }
  const float* row(int64_t r) const { return data.data() + r * cols; }
  float* row(int64_t r) { return data.data() + r * cols; }
  float& at(int64_t r, int64_t c) { return data[static_cast<size_t>(r * cols + c)]; }
  float at(int64_t r, int64_t c) const { return data[static_cast<size_t>(r * cols + c)]; }
};

// The layer's parts as f32 host tensors: the schema (memra/layer_schema.h) with Matrix
// matrices and conv taps, std::vector<float> vectors and one FFN per routed expert.
using AttnWeights = AttnT<Matrix, std::vector<float>>;
using GdnWeights = GdnT<Matrix, std::vector<float>, Matrix>;  // value heads grouped
using KdaWeights = KdaT<Matrix, std::vector<float>, Matrix>;
using MlaWeights = MlaT<Matrix, std::vector<float>>;
using DsaWeights = DsaIndexerT<Matrix, std::vector<float>>;
using Dsv4AttnWeights = Dsv4AttnT<Matrix, std::vector<float>>;
using CompressorWeights = CompressorT<Matrix, std::vector<float>>;
using Dsv4IndexerWeights = Dsv4IndexerT<Matrix, std::vector<float>>;
using HyperWeights = HyperT<Matrix, std::vector<float>>;
using FfnWeights = FfnT<Matrix>;
using MoeWeights = MoeT<Matrix, std::vector<float>, std::vector<FfnWeights>>;  // experts [E]
using LayerWeights = LayerT<Matrix, std::vector<float>, Matrix, std::vector<FfnWeights>>;

struct MtpWeights {
  Matrix eh_proj;                // [D, 2D] input [embedding | hidden]
  std::vector<float> enorm;      // [D] pre_fc_norm_embedding
  std::vector<float> hnorm;      // [D] pre_fc_norm_hidden
  std::vector<float> final_norm; // [D] mtp.norm / nextn.shared_head_norm
  LayerWeights layer;            // one full-attention decoder layer
};

struct ModelWeights {
  Matrix embed;                     // [V, D]
  std::vector<float> output_norm;   // [D]
  Matrix output;                    // [V, D]; empty when tied (embed is the lm_head)
  std::vector<LayerWeights> layers; // [n_layer]
  std::optional<MtpWeights> mtp;
  std::optional<HyperWeights> hc_head;  // DeepSeek-V4: the streams' final collapse
  const Matrix& lm_head() const { return output.empty() ? embed : output; }
};

// Loads and converts every tensor `c` needs from `src` (GGUF names when src is a GGUF file or a
// Gguf-style MemorySource, HF names otherwise). Fails naming the tensor on a missing tensor, a
// shape mismatch (expected vs actual, ggml order), or a type that cannot be dequantised.
ModelWeights load_weights(const WeightSource& src, const ModelConfig& c);

// Deterministic random canonical weights for tests and fixtures (splitmix64 from `seed`).
// Norm multipliers lie in [0.75, 1.25] so the HF export (w = m − 1) is exact; ssm_a in
// [−8, −0.5]; dt_bias around 1; matrices U(±1/sqrt(cols)) (embeddings U(±1)).
ModelWeights random_weights(const ModelConfig& c, uint64_t seed);

// The reverse mapping, applying each convention backwards as llama.cpp's converter and HF's
// save_pretrained would: metadata + F32 tensors with llama.cpp names (+1 norms folded in, ssm_a,
// tiled V heads for qwen35*, interleaved [q|gate], stacked or fused experts), or with HF names
// (raw zero-centred norms, A_log = log(−ssm_a), interleaved in_proj_qkvz/in_proj_ba for
// Qwen3-Next, per-expert or fused experts). The GGUF values are derived from the HF values the
// way the converter does (ssm_a = −exp(A_log), norm = 1 + w), so both load to the same weights.
struct HfLayout {
  bool fused_experts = false;           // experts.gate_up_proj [E,2I,D] + experts.down_proj (DeepSeek-V4: always,
                                        // as transformers saves it)
  bool language_model_prefix = false;   // model.language_model.* (VLM-style checkpoints)
};
struct GgufLayout {
  bool fused_gate_up_exps = false;      // ffn_gate_up_exps instead of ffn_gate_exps + ffn_up_exps
};
MemorySource to_gguf_source(const ModelConfig& c, const ModelWeights& w, GgufLayout layout = {});
MemorySource to_hf_source(const ModelConfig& c, const ModelWeights& w, HfLayout layout = {});
// A DeepSeek-V4 model as DeepSeek releases it (docs/deepseek-v4.md "Files as released"): the
// release's names, the projections as FP8 E4M3 with E8M0 128 x 128 block scales, the routed
// experts as FP4 (I8-packed E2M1, E8M0 per 32), embedding, lm_head and router BF16. The values
// are rounded to those formats.
MemorySource to_dsv4_release_source(const ModelConfig& c, const ModelWeights& w);
// HF names with every projection matrix block-scaled FP8 as DeepSeek-V3 and GLM-5 release them
// (quantization_config fp8, weight_block_size [128, 128]): F8_E4M3 codes of w / s and an F32
// "<base>.weight_scale_inv" s = amax / 448 per 128 x 128 block (1 for an all-zero block). The
// embedding, the lm_head, the router and 1-D tensors stay as to_hf_source writes them (experts
// per expert). The values are rounded to that format. DeepSeek-V4: to_dsv4_release_source.
MemorySource to_hf_fp8_source(const ModelConfig& c, const ModelWeights& w);

}  // namespace memra
