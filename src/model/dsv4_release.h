// DeepSeek-V4 checkpoints as DeepSeek releases them, read under transformers' names.
//
// A release names its tensors as its own inference code does (`embed.weight`,
// `layers.N.attn.wq_a.weight`, `layers.N.ffn.experts.E.w1.weight`, `hc_head_fn`, ...), and
// transformers 5.17 renames them on load (conversion_mapping.py "deepseek_v4", the FP8
// quantizer's `.scale` -> `.weight_scale_inv`). The weight map reads transformers' names only,
// so both loaders read a release through this view, which applies the same renames:
//   - FP8 matrices: F8_E4M3 `<base>.weight` with `<base>.scale` (F8_E8M0, or powers of two in an
//     F32 container) over 128 x 128 blocks -> `<hf base>.weight` + `<hf base>.weight_scale_inv`,
//     the pair the loaders' block-scale rule reads;
//   - FP4 experts (config expert_dtype "fp4"): I8 `<base>.weight` [rows, cols/2] holding two
//     E2M1 codes per byte (the even column in the low nibble) with `<base>.scale` [rows, cols/32]
//     -> one MXFP4 tensor (ggml's block: e8m0, then element j in the low nibble of byte j and
//     element j+16 in its high nibble), the same values, no rounding;
//   - the MTP layers (`mtp.*`) are not shown: plain decoding does not run them.
// Names the view does not know pass through unchanged (the weight map then reports what it
// misses by transformers' name).
//
// The fixture writer goes the other way (to_dsv4_release): transformers' F32 tensors to the
// release's names and storage, FP8 with E8M0 block scales for the projections, FP4 experts.
//
// provides: is_dsv4_release, dsv4_hf_name, dsv4_release_name, Dsv4ReleaseView, to_dsv4_release
#pragma once

#include <deque>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "memra/config.h"
#include "memra/memory_source.h"
#include "memra/source.h"

namespace memra::detail {

// A DeepSeek-V4 checkpoint under the release's names (`embed.weight` present).
bool is_dsv4_release(const WeightSource& src, const ModelConfig& c);

// transformers' name of a release tensor ("layers.3.attn.wq_a.weight" ->
// "model.layers.3.self_attn.q_a_proj.weight"); the name itself when no rule applies. Scale
// companions (".scale") are not names of their own: the view pairs them with their weight.
std::string dsv4_hf_name(const std::string& release);
// The inverse, for the names dsv4_hf_name maps (per-expert HF names included); empty otherwise.
std::string dsv4_release_name(const std::string& hf);

class Dsv4ReleaseView : public WeightSource {
 public:
  // Fails naming the tensor for a scale without its weight, an FP4 matrix without its scale,
  // scale grids of the wrong shape, and NaN scales.
  explicit Dsv4ReleaseView(const WeightSource& src);
  SourceKind kind() const override { return src_.kind(); }
  const std::string& path() const override { return src_.path(); }
  std::vector<std::string> tensor_names() const override { return names_; }
  const TensorView* find(std::string_view name) const override;
  const std::string* hf_config_json() const override { return src_.hf_config_json(); }

 private:
  const WeightSource& src_;
  std::vector<std::string> names_;
  std::map<std::string, TensorView, std::less<>> views_;
  std::deque<std::vector<std::byte>> owned_;  // repacked FP4 experts (deque: blocks never move)
};

// A release-format source from an HF-named F32 one (to_hf_source's DeepSeek-V4 tensors, fused
// experts): the attention, compressor, indexer and shared-expert projections as F8_E4M3 with an
// F8_E8M0 ".scale" per 128 x 128 block (the smallest power of two that keeps the block within
// ±448), each routed expert split per expert (w1 gate, w3 up, w2 down) as I8-packed E2M1 with an
// F8_E8M0 ".scale" per 32 values (within ±6), the embedding, the lm_head, the router and the
// indexer's head weights BF16, the rest (norms, mixers, biases, sinks, the hash table) as the
// HF source holds them. The MTP layers are not written.
MemorySource to_dsv4_release(const MemorySource& hf);

}  // namespace memra::detail
