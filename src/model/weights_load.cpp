// load_weights: llama.cpp GGUF names and HF names -> canonical ModelWeights (memra/weights.h).
// Which tensor feeds which slot is weight_map.h (shared with load_raw_weights); this file holds
// the f32 reader and the one convention only it applies (GDN value-head reorder, permute_v_heads).
#include <cmath>
#include <cstring>

#include "memra/error.h"
#include "memra/quant.h"
#include "memra/weights.h"
#include "model/weight_map.h"
#include "model/weights_internal.h"

namespace memra {

namespace {

// The f32 reader of the name mapping (weight_map.h): reads tensors by name, validates their
// shapes (ggml order, trailing 1s ignored) and converts them to f32, applying an NVFP4-style
// per-tensor "<base>.scale" when the source has one.
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
    return m;
  }
  Tensor tensor(const std::string& name, std::vector<int64_t> want) const {
    const int64_t cols = want.at(0);
    return {vec(name, std::move(want)), cols};
  }
  Matrix rows(const Tensor& t, const std::vector<int64_t>& rows) const {
    Matrix m(static_cast<int64_t>(rows.size()), t.cols);
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
    return out;
  }
  const WeightSource& src_;
};

}  // namespace

namespace detail {

float ssm_a_from_a_log(float a_log) { return static_cast<float>(-std::exp(static_cast<double>(a_log))); }

void permute_v_heads(GdnWeights& g, const ModelConfig& c, bool to_tiled) {
  // Grouped (HF) value head index hg = k*r + j (key head k, j-th of its r value heads);
  // tiled (llama.cpp qwen35*) index ht = j*nk + k. Loading maps tiled -> grouped.
  const int64_t nk = c.ssm_n_k_heads, nv = c.ssm_n_v_heads, r = nv / nk, dv = c.ssm_d_v;
  const int64_t kd2 = 2 * c.ssm_key_dim(), D = c.n_embd;
  auto src_of = [&](int64_t dst) {  // for destination head index, the source head index
    const int64_t k = to_tiled ? dst % nk : dst / r, j = to_tiled ? dst / nk : dst % r;
    return to_tiled ? k * r + j : j * nk + k;
  };
  auto perm_rows = [&](Matrix& m, int64_t first, int64_t per_head) {
    Matrix old = m;
    for (int64_t h = 0; h < nv; ++h)
      std::memcpy(m.row(first + h * per_head), old.row(first + src_of(h) * per_head),
                  sizeof(float) * per_head * m.cols);
  };
  auto perm_vec = [&](std::vector<float>& v) {
    std::vector<float> old = v;
    for (int64_t h = 0; h < nv; ++h) v[static_cast<size_t>(h)] = old[static_cast<size_t>(src_of(h))];
  };
  perm_rows(g.wqkv, kd2, dv);
  perm_rows(g.wz, 0, dv);
  perm_rows(g.wb, 0, 1);
  perm_rows(g.wa, 0, 1);
  perm_rows(g.conv, kd2, dv);
  perm_vec(g.ssm_a);
  perm_vec(g.dt_bias);
  Matrix old = g.wout;  // columns
  for (int64_t d = 0; d < D; ++d)
    for (int64_t h = 0; h < nv; ++h)
      std::memcpy(g.wout.row(d) + h * dv, old.row(d) + src_of(h) * dv, sizeof(float) * dv);
}

bool hf_language_model_prefix(const WeightSource& src) {
  return src.find("model.language_model.embed_tokens.weight") != nullptr;
}

bool source_uses_gguf_names(const WeightSource& src) {
  if (src.kind() == SourceKind::Gguf) return true;
  if (src.kind() == SourceKind::Memory) {
    if (auto* m = dynamic_cast<const MemorySource*>(&src)) return m->style() == MetaStyle::Gguf;
  }
  return false;
}

}  // namespace detail

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
