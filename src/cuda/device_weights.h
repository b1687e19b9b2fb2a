// src/cuda/device_weights.h — the model's weights on the device: the layer schema
// (memra/layer_schema.h) with DevMatrix matrices (planar rows, cuda/planar.cuh) and f32 device
// vectors, made by uploading RawWeights or by drawing synthetic blocks (benchmarks).
//
// Shape limits of the kernels are a property of the model, not of a call: check_kernel_limits
// runs before any upload, so a model the kernels cannot run fails at Model::load naming the
// field and the limit instead of at its first prompt.
//
// provides: DevMatrix, DevVec, DevHyper, DevLayer, DeviceWeights, upload_weights, synthetic_weights,
//           check_kernel_limits, LayerRange, ModelBytes, model_bytes
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "cuda/dmat.h"
#include "memra/config.h"
#include "memra/engine.h"
#include "memra/layer_schema.h"
#include "memra/raw_weights.h"

namespace memra::cuda {

// One weight matrix on the device; `m` is the kernels' view of it.
struct DevMatrix {
  DeviceBuffer<uint8_t> bytes;  // planar rows (+16 B of slack for whole-word loads)
  DeviceBuffer<float> scale;    // [n_slab] multiplier of every dot product
  DMat m;
  int64_t n_slab = 1;
  bool empty() const { return m.rows == 0; }
  int64_t total_bytes() const { return m.rows * m.row_bytes; }
};

using DevVec = DeviceBuffer<float>;
using DevFfn = FfnT<DevMatrix>;
using DevHyper = HyperT<DevMatrix, DevVec>;

// A layer on the device: the schema's tensors, plus the shared-expert gate as the [1, D] F32
// matrix the mat-vec reads (the same values as moe->shared_gate; derived at upload).
struct DevLayer : LayerT<DevMatrix, DevVec, DevVec, DevFfn> {
  LayerKind kind = LayerKind::Attention;
  DevMatrix shared_gate_row;
};

struct DeviceWeights {
  DevMatrix embed, output;  // output empty when tied
  DevVec output_norm;
  std::vector<DevLayer> layers;
  std::optional<DevHyper> hc_head;  // DeepSeek-V4: the streams' final collapse
  bool tiled = false;               // GDN value head h reads key head h % n_k (RawWeights::gdn_tiled_v_heads)
  const DMat& lm_head() const { return output.empty() ? embed.m : output.m; }
  int64_t weight_bytes() const;  // every matrix
  // what one decode step reads (a stage: the embedding row where it embeds, the lm_head where it heads)
  int64_t decode_bytes_per_token(int64_t n_expert_used, bool embeds = true, bool heads = true) const;
};

// Fails naming the field and the limit when a kernel family cannot run `c`'s shapes (Model's
// construction calls it before any allocation).
void check_kernel_limits(const ModelConfig& c);

// A pipeline stage's part of the weights (memra/model.h LoadOptions): layers [l0, l1) (the others
// left empty), the embedding on the first stage (and on the last where the lm_head is tied to
// it), the output norm, lm_head and DeepSeek-V4's hc_head on the last. The defaults: everything.
struct LayerRange {
  int64_t l0 = 0, l1 = -1;  // -1: n_layer
};

DeviceWeights upload_weights(Engine& e, const ModelConfig& c, const RawWeights& w, LayerRange r = {});

// Valid random blocks of type `t` for every matrix (the router and shared gate F32), norms 1,
// drawn on the device: the real shapes without a file (benchmarks). Deterministic in seed (the
// same values whatever the stage split: each matrix's seed is its place in the whole model).
DeviceWeights synthetic_weights(Engine& e, const ModelConfig& c, DType t, uint64_t seed, LayerRange r = {});

// Bytes of each layer's matrices, of the embedding and of the lm_head (+ DeepSeek-V4's hc_head)
// as they will sit on the device: what an automatic stage split balances.
struct ModelBytes {
  std::vector<int64_t> layers;
  int64_t embed = 0, head = 0;
};
ModelBytes model_bytes(const ModelConfig& c, const RawWeights& w);
ModelBytes model_bytes(const ModelConfig& c, DType t);  // a synthetic model's

}  // namespace memra::cuda
