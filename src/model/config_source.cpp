// ModelConfig from a GGUF file, an HF config.json, or any WeightSource; and the completion of a
// metadata-only config from the tensors (vocab, tied output, dense layers in GGUF MoE models,
// MTP presence).
#include <nlohmann/json.hpp>

#include "memra/config.h"
#include "memra/error.h"
#include "memra/gguf.h"
#include "memra/hf_config.h"
#include "memra/memory_source.h"
#include "model/names.h"
#include "model/weights_internal.h"

namespace memra {

namespace {

class GgufKeys final : public MetaKeys {
 public:
  explicit GgufKeys(const GgufFile& f) : f_(f) {}
  std::string where() const override { return "gguf " + f_.path(); }
  bool has(std::string_view k) const override { return f_.has(k); }
  int64_t get_int(std::string_view k) const override { return f_.get_int(k); }
  double get_float(std::string_view k) const override { return f_.get_float(k); }
  bool get_bool(std::string_view k) const override { return f_.get_bool(k); }
  std::string get_string(std::string_view k) const override { return f_.get_string(k); }
  std::vector<int64_t> get_int_array(std::string_view k) const override {
    // attention.recurrent_layers is a bool array in llama.cpp's files.
    const GgufValue* v = f_.kv(k);
    if (v && v->is_array() && v->elem_type() == GgufType::BOOL) {
      std::vector<int64_t> out;
      for (uint64_t i = 0; i < v->count(); ++i) out.push_back(v->bool_at(i) ? 1 : 0);
      return out;
    }
    return f_.get_int_array(k);
  }
  std::vector<double> get_float_array(std::string_view k) const override { return f_.get_float_array(k); }
  std::vector<std::string> get_string_array(std::string_view k) const override {
    return f_.get_string_array(k);
  }

 private:
  const GgufFile& f_;
};

class HfKeys final : public MetaKeys {
 public:
  explicit HfKeys(const HfConfig& c) : c_(c) {}
  std::string where() const override { return "config.json " + c_.path(); }
  bool has(std::string_view k) const override { return c_.has(k); }
  int64_t get_int(std::string_view k) const override { return c_.get_int(k); }
  double get_float(std::string_view k) const override { return c_.get_float(k); }
  bool get_bool(std::string_view k) const override { return c_.get_bool(k); }
  std::string get_string(std::string_view k) const override { return c_.get_string(k); }
  std::vector<int64_t> get_int_array(std::string_view k) const override { return c_.get_int_array(k); }
  std::vector<double> get_float_array(std::string_view k) const override { return c_.get_float_array(k); }
  std::vector<std::string> get_string_array(std::string_view k) const override {
    return c_.get_string_array(k);
  }
  bool is_null(std::string_view k) const override {
    const nlohmann::json* v = c_.find(k);
    return v && v->is_null();
  }

 private:
  const HfConfig& c_;
};

// GLM-5 GGUF (and its hybrid's MLA layers): a layer runs its own indexer iff it has the
// indexer's tensors. Without <arch>.attention.indexer.types that is the schedule; with it, the
// two must agree.
void complete_indexers(ModelConfig& c, const WeightSource& src) {
  const bool from_keys = !c.dsa_shared.empty();
  if (!from_keys) c.dsa_shared.assign(static_cast<size_t>(c.n_layer), 0);
  for (int64_t i = 0; i < c.n_layer; ++i) {
    if (c.layer_kind[static_cast<size_t>(i)] != LayerKind::Mla) continue;
    const std::string probe = names::gguf_blk(i, "indexer.proj.weight");
    const uint8_t shared = src.find(probe) == nullptr;
    uint8_t& s = c.dsa_shared[static_cast<size_t>(i)];
    if (from_keys && s != shared)
      fail(src.path(), ": ", family_arch(c.family), ".attention.indexer.types says layer ", i, " is ",
           s ? "shared" : "full", " but '", probe, "' is ", shared ? "absent" : "present");
    s = shared;
  }
}

// Tensor facts GGUF metadata does not carry, and HF facts that depend on what was saved.
void complete_from_tensors(ModelConfig& c, const WeightSource& src, bool gguf_names) {
  if (gguf_names) {
    if (const TensorView* e = src.find("token_embd.weight"); e && e->ne.size() >= 2) {
      if (c.n_vocab == 0) c.n_vocab = e->ne[1];
      else if (c.n_vocab != e->ne[1])
        fail(src.path(), ": vocab_size ", c.n_vocab, " but token_embd.weight has ", e->ne[1], " rows");
    }
    c.tied_embeddings = src.find("output.weight") == nullptr;
    if (c.n_expert > 0)
      for (int64_t i = 0; i < c.n_layer; ++i)
        if (!src.find(names::gguf_blk(i, "ffn_gate_inp.weight")) && src.find(names::gguf_blk(i, "ffn_gate.weight")))
          c.ffn_kind[static_cast<size_t>(i)] = FfnKind::Dense;
    // feed_forward_length sizes the dense FFN only; a file whose every layer has experts (real
    // Qwen3-Next GGUFs carry one anyway) describes the same model as its config.json, where
    // the HF reader leaves n_ff at 0 for the same reason.
    bool any_dense = false;
    for (FfnKind k : c.ffn_kind) any_dense |= k == FfnKind::Dense;
    if (!any_dense) c.n_ff = 0;
    if (c.family == Family::GlmDsa || c.family == Family::Glm5Next) complete_indexers(c, src);
  } else {
    // save_pretrained drops mtp.* (transformers does not implement it): present iff saved.
    if (c.n_mtp > 0 && !src.find("mtp.fc.weight")) c.n_mtp = 0;
  }
}

}  // namespace

ModelConfig ModelConfig::from_gguf(const GgufFile& f) { return from_gguf_keys(GgufKeys(f)); }

ModelConfig ModelConfig::from_hf(const HfConfig& cfg) { return from_hf_keys(HfKeys(cfg)); }

ModelConfig ModelConfig::from_source(const WeightSource& src) {
  ModelConfig c;
  bool gguf_names = false;
  if (const GgufFile* g = src.gguf()) {
    c = from_gguf(*g);
    gguf_names = true;
  } else if (auto* m = dynamic_cast<const MemorySource*>(&src)) {
    auto keys = memory_meta_keys(*m);
    gguf_names = m->style() == MetaStyle::Gguf;
    c = gguf_names ? from_gguf_keys(*keys) : from_hf_keys(*keys);
  } else if (const std::string* json = src.hf_config_json()) {
    c = from_hf(HfConfig::parse(*json, src.path() + "/config.json"));
  } else {
    fail(src.path(), ": no architecture metadata (neither GGUF keys nor config.json)");
  }
  complete_from_tensors(c, src, gguf_names);
  with_context(src.path(), [&] { c.validate(); });
  return c;
}

}  // namespace memra
