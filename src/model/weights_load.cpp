// load_weights: llama.cpp GGUF names and HF names -> canonical ModelWeights (memra/weights.h).
// Which tensor feeds which slot is weight_map.h (shared with load_raw_weights); this file holds
// the f32 reader and the one convention only it applies (GDN value-head reorder, permute_v_heads).
#include <cmath>
#include <cstring>
#include <optional>

#include "memra/error.h"
#include "memra/quant.h"
#include "memra/weights.h"
#include "model/dsv4_release.h"
#include "model/names.h"
#include "model/weight_map.h"
#include "model/weights_internal.h"

namespace memra {

namespace {

// The f32 reader of the name mapping (weight_map.h): reads tensors by name, validates their
// shapes (ggml order, trailing 1s ignored) and converts them to f32 with the scales the source
// holds for them (detail::tensor_values).
class F32Reader {
 public:
  using Mat = Matrix;
  using Conv = Matrix;
  using Experts = std::vector<FfnWeights>;
  using Layer = LayerWeights;
  using Attn = AttnWeights;
  using Gdn = GdnWeights;
  using Ffn = FfnWeights;
  using Moe = MoeWeights;
  struct Tensor {  // a whole dequantised tensor, for row selections
    std::vector<float> data;
    int64_t cols = 0;
    DType stored = DType::F32;
  };

  explicit F32Reader(const WeightSource& s) : src_(s) {}
  bool has(const std::string& name) const { return src_.find(name) != nullptr; }
  const TensorView* find(const std::string& name) const { return src_.find(name); }

  std::vector<float> vec(const std::string& name, std::vector<int64_t> want) const {
    return detail::tensor_values(src_, detail::checked_tensor(src_, name, want));
  }
  Matrix mat(const std::string& name, int64_t rows, int64_t cols) const {
    Matrix m;
    m.rows = rows;
    m.cols = cols;
    m.data = vec(name, {cols, rows});
    m.stored = src_.find(name)->type;
    return m;
  }
  Tensor tensor(const std::string& name, std::vector<int64_t> want) const {
    const int64_t cols = want.at(0);
    std::vector<float> data = vec(name, std::move(want));
    return {std::move(data), cols, src_.find(name)->type};
  }
  Matrix rows(const Tensor& t, const std::vector<int64_t>& rows) const {
    Matrix m(static_cast<int64_t>(rows.size()), t.cols);
    m.stored = t.stored;
    for (size_t i = 0; i < rows.size(); ++i)
      std::memcpy(m.row(static_cast<int64_t>(i)), t.data.data() + rows[i] * t.cols, sizeof(float) * t.cols);
    return m;
  }
  Matrix conv(std::vector<float> taps, int64_t rows, int64_t k) const {
    Matrix m;
    m.rows = rows;
    m.cols = k;
    m.data = std::move(taps);
    return m;
  }
  Matrix kv_b(const std::string& k_b, const std::string& v_b, const ModelConfig& c) const {
    const std::vector<float> k = vec(k_b, detail::tensor_ne(detail::Slot::MlaKB, detail::NameStyle::Gguf, c));
    const std::vector<float> v = vec(v_b, detail::tensor_ne(detail::Slot::MlaVB, detail::NameStyle::Gguf, c));
    Matrix m(c.n_head * (c.mla_d_nope + c.mla_d_v), c.mla_kv_rank);
    detail::join_kv_b(reinterpret_cast<const std::byte*>(k.data()), reinterpret_cast<const std::byte*>(v.data()),
                      reinterpret_cast<std::byte*>(m.data.data()), sizeof(float), c);
    m.stored = detail::joined_kv_b_type(src_.find(k_b)->type, src_.find(v_b)->type);
    return m;
  }
  Experts experts(std::vector<Matrix> gate, std::vector<Matrix> up, std::vector<Matrix> down) const {
    Experts e(gate.size());
    for (size_t i = 0; i < e.size(); ++i) e[i] = {std::move(gate[i]), std::move(up[i]), std::move(down[i])};
    return e;
  }

 private:
  const WeightSource& src_;
};

}  // namespace

ModelWeights load_weights(const WeightSource& file, const ModelConfig& c) {
  c.validate();
  std::optional<detail::Dsv4ReleaseView> release;  // a DeepSeek-V4 release, under transformers' names
  if (detail::is_dsv4_release(file, c)) release.emplace(file);
  const WeightSource& src = release ? *release : file;
  const F32Reader rd(src);
  const bool gguf = detail::source_uses_gguf_names(src);
  const detail::NameStyle style = gguf ? detail::NameStyle::Gguf : detail::NameStyle::Hf;
  ModelWeights w;
  detail::map_model(rd, c, style, !gguf && detail::hf_language_model_prefix(src), w);
  // The one convention the raw loader cannot apply on blocks: llama.cpp's tiled value heads.
  if (gguf && c.gguf_tiled_v_heads())
    for (LayerWeights& L : w.layers)
      if (L.gdn) detail::permute_v_heads(*L.gdn, c, /*to_tiled=*/false);
  if (c.n_mtp > 0) {
    MtpWeights m;
    detail::map_mtp(rd, c, style, m);
    w.mtp = std::move(m);
  }
  return w;
}

}  // namespace memra
