// load_raw_weights: checkpoint names -> RawWeights (memra/raw_weights.h), keeping the file's
// blocks. Which tensor feeds which slot is weight_map.h, shared with load_weights; every layout
// change there is a selection of whole rows, so it is valid for any block type.
#include <bit>
#include <cstring>
#include <deque>
#include <optional>

#include "memra/error.h"
#include "memra/memory_source.h"
#include "memra/quant.h"
#include "memra/raw_weights.h"
#include "model/dsv4_release.h"
#include "model/names.h"
#include "model/weight_map.h"
#include "model/weights_internal.h"

namespace memra {

int64_t RawMatrix::row_bytes() const { return memra::row_bytes(type, cols); }

int64_t RawWeights::matrix_bytes() const {
  int64_t n = 0;
  auto add = [&](const auto& t) {
    if constexpr (std::is_same_v<std::remove_cvref_t<decltype(t)>, RawMatrix>) n += static_cast<int64_t>(t.data.size());
  };
  add(embed);
  add(output);
  for (const RawLayer& L : layers) for_each_tensor([&](std::string_view, const auto& t) { add(t); }, L);
  if (hc_head) add(hc_head->fn);
  return n;
}

namespace {

using detail::shape_str;

bool gpu_matrix_type(DType t) {
  return t == DType::F32 || t == DType::F16 || t == DType::BF16 || t == DType::Q8_0 || t == DType::NVFP4;
}

// Stacks per-expert matrices into one matrix of E slabs (slab e = expert e's rows).
RawMatrix stack(std::vector<RawMatrix> parts) {
  RawMatrix m;
  m.type = parts.at(0).type;
  m.cols = parts[0].cols;
  m.n_slab = static_cast<int64_t>(parts.size());
  for (const RawMatrix& p : parts) {
    if (p.type != m.type) fail("experts of one layer have different types (", dtype_name(m.type), " vs ", dtype_name(p.type), ")");
    m.rows += p.rows;
    m.data.insert(m.data.end(), p.data.begin(), p.data.end());
    m.slab_scale.push_back(p.slab_scale.at(0));
  }
  return m;
}

// The file-typed reader of the name mapping (weight_map.h): matrices keep the file's blocks
// (whole rows selected), small vectors are converted to f32.
class RawReader {
 public:
  using Mat = RawMatrix;
  using Tensor = const TensorView*;
  using Conv = std::vector<float>;
  using Experts = RawFfn;
  using Layer = RawLayer;
  using Attn = RawAttn;
  using Gdn = RawGdn;
  using Ffn = RawFfn;
  using Moe = RawMoe;

  explicit RawReader(const WeightSource& s) : src_(s) {}
  bool has(const std::string& name) const { return src_.find(name) != nullptr; }
  const TensorView* find(const std::string& name) const { return src_.find(name); }

  const TensorView* tensor(const std::string& name, const std::vector<int64_t>& want) const {
    return &checked(name, want);
  }
  RawMatrix rows(const TensorView* t, const std::vector<int64_t>& rows) const { return gather(*t, rows, 1); }
  std::vector<float> conv(std::vector<float> taps, int64_t, int64_t) const { return taps; }
  RawFfn experts(std::vector<RawMatrix> gate, std::vector<RawMatrix> up, std::vector<RawMatrix> down) const {
    RawFfn f;
    f.gate = stack(std::move(gate));
    f.up = stack(std::move(up));
    f.down = stack(std::move(down));
    return f;
  }

  const TensorView& checked(const std::string& name, const std::vector<int64_t>& want) const {
    const TensorView* t = &detail::checked_tensor(src_, name, want);
    if (detail::needs_expansion(src_, *t)) return expanded(*t);
    if (!gpu_matrix_type(t->type))
      fail(src_.path(), ": tensor '", name, "': type ", dtype_name(t->type),
           " is not supported by the GPU model (F32, F16, BF16, Q8_0, NVFP4; block-scaled FP8 and MXFP4 as BF16 or "
           "F32)");
    const int64_t rb = row_bytes(t->type, t->ne[0]);
    if (rb * (t->nelements() / t->ne[0]) != t->nbytes())
      fail(src_.path(), ": tensor '", name, "': ", t->nbytes(), " bytes for shape ", shape_str(t->ne));
    return *t;
  }

  // A block-scaled FP8 or an MXFP4 matrix has no GPU mat-vec of its own: its values (scales
  // applied, as the f32 loader computes them) are kept as BF16 when every one of them is a BF16
  // value, else as F32 — the same numbers either way. DeepSeek-V4's releases scale by powers of
  // two (E8M0), so their E4M3 and E2M1 codes land in BF16 exactly, at twice or four times the
  // bytes of the file.
  const TensorView& expanded(const TensorView& t) const {
    const std::vector<float> v = detail::tensor_values(src_, t);
    bool bf16 = true;
    for (float x : v) bf16 = bf16 && (std::bit_cast<uint32_t>(x) & 0xffffu) == 0;
    Expanded& e = expanded_.emplace_back();
    e.view.name = t.name;
    e.view.ne = t.ne;
    e.view.type = bf16 ? DType::BF16 : DType::F32;
    e.bytes.resize(static_cast<size_t>(row_bytes(e.view.type, t.ne[0]) * (t.nelements() / t.ne[0])));
    quantize_row(e.view.type, v.data(), e.bytes.data(), static_cast<int64_t>(v.size()));
    e.view.data = std::span<const std::byte>(e.bytes);
    return e.view;
  }
  bool is_expanded(const TensorView& t) const {
    for (const Expanded& e : expanded_)
      if (&e.view == &t) return true;
    return false;
  }

  // The per-tensor "<base>.scale" as one value per slab (1 when absent).
  std::vector<float> slab_scales(const TensorView& t, int64_t slabs) const {
    std::vector<float> out(static_cast<size_t>(slabs), 1.0f);
    const TensorView* s = src_.find(names::scale_of(t.name));
    if (!s || is_expanded(t)) return out;  // an expanded tensor's values carry its scales
    std::vector<float> sv(static_cast<size_t>(s->nelements()));
    with_context(src_.path() + ": tensor '" + s->name + "'", [&] {
      for (int64_t i = 0; i < s->nelements(); i += s->ne[0])
        dequantize_row(s->type, s->data.data() + row_bytes(s->type, s->ne[0]) * (i / s->ne[0]),
                       sv.data() + i, s->ne[0]);
    });
    if (sv.size() != 1 && static_cast<int64_t>(sv.size()) != slabs)
      fail(src_.path(), ": scale tensor '", s->name, "' has ", sv.size(), " values, expected 1 or ", slabs);
    for (int64_t e = 0; e < slabs; ++e) out[static_cast<size_t>(e)] = sv.size() == 1 ? sv[0] : sv[static_cast<size_t>(e)];
    return out;
  }

  // Rows `rows` of tensor t (rows indexed over all slabs of a 3-D tensor), as a matrix of
  // n_slab slabs; row i of the result belongs to source slab src_slab_of(rows[i]).
  RawMatrix gather(const TensorView& t, const std::vector<int64_t>& rows, int64_t n_slab) const {
    const int64_t cols = t.ne[0];
    const int64_t rows_per_src_slab = t.ne.size() >= 2 ? t.ne[1] : 1;
    const int64_t src_slabs = t.ne.size() == 3 ? t.ne[2] : 1;
    const std::vector<float> sc = slab_scales(t, src_slabs);
    RawMatrix m;
    m.type = t.type;
    m.rows = static_cast<int64_t>(rows.size());
    m.cols = cols;
    m.n_slab = n_slab;
    const int64_t rb = row_bytes(t.type, cols);
    m.data.resize(static_cast<size_t>(rb * m.rows));
    m.slab_scale.assign(static_cast<size_t>(n_slab), 1.0f);
    const int64_t out_per_slab = m.rows / n_slab;
    for (int64_t i = 0; i < m.rows; ++i) {
      std::memcpy(m.data.data() + i * rb, t.data.data() + rows[static_cast<size_t>(i)] * rb, static_cast<size_t>(rb));
      const float s = sc[static_cast<size_t>(rows[static_cast<size_t>(i)] / rows_per_src_slab)];
      if (i % out_per_slab == 0) m.slab_scale[static_cast<size_t>(i / out_per_slab)] = s;
      else if (m.slab_scale[static_cast<size_t>(i / out_per_slab)] != s)
        fail(src_.path(), ": tensor '", t.name, "': rows of one slab carry different scales");
    }
    return m;
  }

  RawMatrix mat(const std::string& name, int64_t rows, int64_t cols) const {
    return gather(checked(name, {cols, rows}), detail::row_range(0, rows), 1);
  }

  RawMatrix kv_b(const std::string& k_b, const std::string& v_b, const ModelConfig& c) const {
    const TensorView& k = checked(k_b, detail::tensor_ne(detail::Slot::MlaKB, detail::NameStyle::Gguf, c));
    const TensorView& v = checked(v_b, detail::tensor_ne(detail::Slot::MlaVB, detail::NameStyle::Gguf, c));
    RawMatrix m;
    m.type = detail::joined_kv_b_type(k.type, v.type);
    m.rows = c.n_head * (c.mla_d_nope + c.mla_d_v);
    m.cols = c.mla_kv_rank;
    m.slab_scale.assign(1, 1.0f);
    m.data.resize(static_cast<size_t>(m.rows * m.row_bytes()));
    if (k.type == m.type && v.type == m.type) {  // an element type shared by both halves: moved
      detail::join_kv_b(k.data.data(), v.data.data(), m.data.data(),
                        static_cast<size_t>(type_traits(m.type).block_bytes), c);
    } else {  // F32: dequantised as the f32 loader does (per-tensor scale included)
      const std::vector<float> kf = dequantized(k), vf = dequantized(v);
      detail::join_kv_b(reinterpret_cast<const std::byte*>(kf.data()), reinterpret_cast<const std::byte*>(vf.data()),
                        m.data.data(), sizeof(float), c);
    }
    return m;
  }

  std::vector<float> vec(const std::string& name, std::vector<int64_t> want) const {
    const TensorView* t = &detail::checked_tensor(src_, name, want);
    if (detail::needs_expansion(src_, *t)) return detail::tensor_values(src_, *t);
    std::vector<float> out(static_cast<size_t>(t->nelements()));
    with_context(src_.path() + ": tensor '" + name + "'", [&] {
      const int64_t rl = t->ne[0], rb = row_bytes(t->type, rl);
      if (rb * (t->nelements() / rl) != t->nbytes()) fail(t->nbytes(), " bytes for shape ", shape_str(t->ne));
      for (int64_t r = 0; r < t->nelements() / rl; ++r)
        dequantize_row(t->type, t->data.data() + r * rb, out.data() + r * rl, rl);
    });
    return out;
  }

 private:
  // The whole tensor as f32, times its per-tensor (or per-slab) "<base>.scale".
  std::vector<float> dequantized(const TensorView& t) const {
    const int64_t rl = t.ne[0], rb = row_bytes(t.type, rl), n = t.nelements();
    const int64_t slabs = t.ne.size() == 3 ? t.ne[2] : 1;
    const std::vector<float> sc = slab_scales(t, slabs);
    std::vector<float> out(static_cast<size_t>(n));
    for (int64_t r = 0; r < n / rl; ++r) dequantize_row(t.type, t.data.data() + r * rb, out.data() + r * rl, rl);
    if (sc.size() > 1 || sc[0] != 1.0f)
      for (int64_t i = 0; i < n; ++i) out[static_cast<size_t>(i)] *= sc[static_cast<size_t>(i / (n / slabs))];
    return out;
  }
  struct Expanded {
    std::vector<std::byte> bytes;
    TensorView view;
  };
  const WeightSource& src_;
  mutable std::deque<Expanded> expanded_;  // deque: a returned view never moves
};

}  // namespace

RawWeights load_raw_weights(const WeightSource& file, const ModelConfig& c) {
  c.validate();
  std::optional<detail::Dsv4ReleaseView> release;  // a DeepSeek-V4 release, under transformers' names
  if (detail::is_dsv4_release(file, c)) release.emplace(file);
  const WeightSource& src = release ? *release : file;
  const RawReader rd(src);
  const bool gguf = detail::source_uses_gguf_names(src);
  RawWeights w;
  // Tiled value heads are kept as the file has them (see raw_weights.h); the kernels are told.
  w.gdn_tiled_v_heads = gguf && c.gguf_tiled_v_heads();
  detail::map_model(rd, c, gguf ? detail::NameStyle::Gguf : detail::NameStyle::Hf,
                    !gguf && detail::hf_language_model_prefix(src), w);
  return w;
}

}  // namespace memra
