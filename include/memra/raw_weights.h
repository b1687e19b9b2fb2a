// memra/raw_weights.h — the weight set as the FILE stores it: quantized blocks kept, not f32.
//
// The GPU model streams the checkpoint's own blocks (Q8_0, NVFP4, BF16, ...) through its
// mat-vec kernels, so it cannot take the canonical f32 ModelWeights (memra/weights.h). This
// loader uses the same name mapping and applies the same conventions, but only those that are
// whole-row operations, which work on any block type:
//   - q_proj's per-head [q | gate] rows split into wq / wgate;
//   - Qwen3-Next's per-key-head interleaved in_proj_qkvz / in_proj_ba (and GGUF ssm_in,
//     ssm_ba) de-interleaved into wqkv [q | k | v] / wz / wb / wa;
//   - experts (GGUF *_exps stacks, fused gate_up, HF per-expert or fused) stacked into one
//     matrix of E slabs, slab e = rows [e*rows_per_slab, (e+1)*rows_per_slab);
//   - small vectors (norms, ssm_a, dt_bias, conv taps, shared-expert gate) converted to f32
//     exactly as load_weights does (1+w norms for HF Next/3.5, ssm_a = -exp(A_log)).
// One convention is NOT undone: llama.cpp's tiled GDN value-head order (qwen35*). Permuting
// wout's columns by value head cannot be done on blocks that straddle heads, so the raw weights
// keep the file's head order everywhere (wqkv V rows, wz, wb, wa, conv V channels, ssm_a,
// dt_bias, wout columns) and `gdn_tiled_v_heads` tells the kernels that value head h reads key
// head h % n_k instead of h / (n_v / n_k). The recurrence is per head, so the result is the
// same function of the input.
//
// NVFP4 and any other block type with a per-tensor "<name>.scale": the scale (one per tensor,
// or one per expert slab) is kept in RawMatrix::slab_scale and applied after the dot product.
//
// Matrix types the GPU model accepts: F32, F16, BF16, Q8_0, NVFP4. Anything else is an error
// naming the tensor and its type.
//
// provides: RawMatrix, RawAttn, RawGdn, RawFfn, RawMoe, RawLayer, RawWeights, load_raw_weights
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "memra/config.h"
#include "memra/dtype.h"
#include "memra/layer_schema.h"
#include "memra/source.h"

namespace memra {

// Row-major [rows, cols] in `type`'s block layout (each row row_bytes(type, cols) bytes); y = W x.
struct RawMatrix {
  DType type = DType::F32;
  int64_t rows = 0, cols = 0;
  int64_t n_slab = 1;                 // experts: E slabs of rows / n_slab rows each
  std::vector<float> slab_scale;      // [n_slab] multiplier of every dot product (1 when none)
  std::vector<std::byte> data;        // rows * row_bytes(type, cols)
  bool empty() const { return rows == 0; }
  int64_t row_bytes() const;
  int64_t slab_rows() const { return rows / n_slab; }
};

// The layer's parts as the file's blocks: the schema (memra/layer_schema.h) with RawMatrix
// matrices, f32 vectors and conv taps, and the routed experts stacked (n_slab = E).
using RawAttn = AttnT<RawMatrix, std::vector<float>>;                    // wgate empty for Qwen3
using RawGdn = GdnT<RawMatrix, std::vector<float>, std::vector<float>>;  // value heads in the file's order
using RawFfn = FfnT<RawMatrix>;                                          // [F, D], [F, D], [D, F] (or E slabs of those)
using RawMoe = MoeT<RawMatrix, std::vector<float>, RawFfn>;              // experts: gate/up [E*I, D], down [E*D, I]
using RawLayer = LayerT<RawMatrix, std::vector<float>, std::vector<float>, RawFfn>;

struct RawWeights {
  RawMatrix embed;                     // [V, D]
  std::vector<float> output_norm;      // [D]
  RawMatrix output;                    // [V, D]; empty when tied
  std::vector<RawLayer> layers;
  std::optional<HyperT<RawMatrix, std::vector<float>>> hc_head;  // DeepSeek-V4: the streams' final collapse
  bool gdn_tiled_v_heads = false;      // value head h reads key head h % n_k
  const RawMatrix& lm_head() const { return output.empty() ? embed : output; }
  int64_t matrix_bytes() const;        // every RawMatrix's data, summed
};

// Fails naming the tensor on a missing tensor, a shape mismatch or an unsupported matrix type.
// The MTP head is not loaded (the GPU model does not run it).
RawWeights load_raw_weights(const WeightSource& src, const ModelConfig& c);

}  // namespace memra
