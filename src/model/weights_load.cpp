// load_weights: llama.cpp GGUF names and HF names -> canonical ModelWeights (memra/weights.h).
// Which tensor feeds which slot is weight_map.h (shared with load_raw_weights); this file holds
// the f32 reader and the one convention only it applies (GDN value-head reorder, permute_v_heads).
#include <cmath>
#include <cstring>

#include "memra/error.h"
#include "memra/quant.h"
#include "memra/weights.h"
#include "model/names.h"
#include "model/weight_map.h"
#include "model/weights_internal.h"

namespace memra {

namespace {

// The f32 reader of the name mapping (weight_map.h): reads tensors by name, validates their
// shapes (ggml order, trailing 1s ignored) and converts them to f32, applying an NVFP4-style
// per-tensor "<base>.scale" or a block-scaled FP8 "<base>.weight_scale_inv" when the source has
// one.
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
    const TensorView* t = &detail::checked_tensor(src_, name, want);
    return with_context(src_.path() + ": tensor '" + name + "'", [&] { return to_f32(*t); });
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
  std::vector<float> to_f32(const TensorView& t) const {
    const int64_t n = t.nelements();
    const int64_t rl = t.ne[0];
    const int64_t rb = row_bytes(t.type, rl);
    if (rb * (n / rl) != t.nbytes()) fail(t.nbytes(), " bytes for ", n, " ", dtype_name(t.type), " values");
    std::vector<float> out(static_cast<size_t>(n));
    for (int64_t r = 0; r < n / rl; ++r)
      dequantize_row(t.type, t.data.data() + r * rb, out.data() + r * rl, rl);
    // llama.cpp: y = (W x) * <name>.scale, one value per tensor or one per expert slab.
    if (const TensorView* s = src_.find(names::scale_of(t.name))) {
      std::vector<float> sv(static_cast<size_t>(s->nelements()));
      for (int64_t i = 0; i < s->nelements(); i += s->ne[0])
        dequantize_row(s->type, s->data.data() + row_bytes(s->type, s->ne[0]) * (i / s->ne[0]),
                       sv.data() + i, s->ne[0]);
      const int64_t slabs = t.ne.size() == 3 ? t.ne[2] : 1;
      if (static_cast<int64_t>(sv.size()) != 1 && static_cast<int64_t>(sv.size()) != slabs)
        fail("scale tensor '", s->name, "' has ", sv.size(), " values, expected 1 or ", slabs);
      const int64_t per = n / static_cast<int64_t>(sv.size());
      for (int64_t i = 0; i < n; ++i) out[static_cast<size_t>(i)] *= sv[static_cast<size_t>(i / per)];
    }
    if (const TensorView* s = src_.find(names::block_scale_of(t.name))) apply_block_scale(t, *s, out);
    return out;
  }

  // Block-scaled FP8 as DeepSeek-V3, GLM-5 and DeepSeek-V4 release it (config.json
  // quantization_config {"quant_method": "fp8", "weight_block_size": [128, 128]}): the matrix
  // [rows, cols] is F8_E4M3 and "<base>.weight_scale_inv" [ceil(rows/128), ceil(cols/128)] holds
  // one multiplier per 128 x 128 block (partial blocks at the edges): w = e4m3 * scale_inv.
  static constexpr int64_t kFp8Block = 128;
  void apply_block_scale(const TensorView& t, const TensorView& s, std::vector<float>& out) const {
    if (t.type != DType::F8_E4M3)
      fail("block scale '", s.name, "' beside a ", dtype_name(t.type), " tensor (block scales go with F8_E4M3)");
    if (t.ne.size() != 2) fail("block-scaled FP8 tensor of ", t.ne.size(), " dimensions (2 expected)");
    const int64_t cols = t.ne[0], rows = t.ne[1];
    const int64_t bc = (cols + kFp8Block - 1) / kFp8Block, br = (rows + kFp8Block - 1) / kFp8Block;
    if (s.ne.size() != 2 || s.ne[0] != bc || s.ne[1] != br)
      fail("block scale '", s.name, "' has shape ", detail::shape_str(s.ne), ", expected ", detail::shape_str({bc, br}),
           " (128 x 128 blocks of a [", rows, ", ", cols, "] matrix)");
    std::vector<float> sv(static_cast<size_t>(bc * br));
    for (int64_t r = 0; r < br; ++r)
      dequantize_row(s.type, s.data.data() + row_bytes(s.type, bc) * r, sv.data() + r * bc, bc);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c)
        out[static_cast<size_t>(r * cols + c)] *= sv[static_cast<size_t>((r / kFp8Block) * bc + c / kFp8Block)];
  }
  const WeightSource& src_;
};

}  // namespace

ModelWeights load_weights(const WeightSource& src, const ModelConfig& c) {
  c.validate();
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
