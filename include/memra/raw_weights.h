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

struct RawAttn {
  RawMatrix wq, wgate, wk, wv, wo;     // as AttnWeights; wgate empty for Qwen3
  std::vector<float> q_norm, k_norm;   // [hd] multipliers
};

struct RawGdn {
  RawMatrix wqkv, wz, wb, wa, wout;    // value heads in the file's order (see above)
  std::vector<float> conv;             // [conv_dim, K] taps, tap K-1 multiplies the newest input
  std::vector<float> ssm_a, dt_bias;   // [nv]
  std::vector<float> norm;             // [dv] gated-norm multiplier
};

struct RawFfn {
  RawMatrix gate, up, down;            // [F, D], [F, D], [D, F] (or E slabs of those)
  bool empty() const { return gate.empty(); }
};

struct RawMoe {
  RawMatrix router;                    // [E, D]
  RawFfn experts;                      // stacked: gate/up [E*I, D], down [E*D, I], n_slab = E
  RawFfn shared;                       // empty when n_ff_shexp == 0
  std::vector<float> shared_gate;      // [D]
};

struct RawLayer {
  std::vector<float> attn_norm, ffn_norm;  // [D] multipliers
  std::optional<RawAttn> attn;
  std::optional<RawGdn> gdn;
  std::optional<RawFfn> ffn;
  std::optional<RawMoe> moe;
};

struct RawWeights {
  RawMatrix embed;                     // [V, D]
  std::vector<float> output_norm;      // [D]
  RawMatrix output;                    // [V, D]; empty when tied
  std::vector<RawLayer> layers;
  bool gdn_tiled_v_heads = false;      // value head h reads key head h % n_k
  const RawMatrix& lm_head() const { return output.empty() ? embed : output; }
  int64_t matrix_bytes() const;        // every RawMatrix's data, summed
};

// Fails naming the tensor on a missing tensor, a shape mismatch or an unsupported matrix type.
// The MTP head is not loaded (the GPU model does not run it).
RawWeights load_raw_weights(const WeightSource& src, const ModelConfig& c);

}  // namespace memra
