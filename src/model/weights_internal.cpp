// The model layer's shared helpers (weights_internal.h): used by both loaders, the exporter and
// config detection, defined here so that no loader's file is a dependency of the name table.
#include "model/weights_internal.h"

#include <cmath>
#include <cstring>

#include "memra/error.h"
#include "memra/memory_source.h"
#include "memra/quant.h"
#include "model/names.h"
#include "model/weight_map.h"

namespace memra {

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

namespace {
constexpr int64_t kFp8Block = 128;

void apply_block_scale(const TensorView& t, const TensorView& s, std::vector<float>& out) {
  if (t.type != DType::F8_E4M3)
    fail("block scale '", s.name, "' beside a ", dtype_name(t.type), " tensor (block scales go with F8_E4M3)");
  if (t.ne.size() != 2) fail("block-scaled FP8 tensor of ", t.ne.size(), " dimensions (2 expected)");
  const int64_t cols = t.ne[0], rows = t.ne[1];
  const int64_t bc = (cols + kFp8Block - 1) / kFp8Block, br = (rows + kFp8Block - 1) / kFp8Block;
  if (s.ne.size() != 2 || s.ne[0] != bc || s.ne[1] != br)
    fail("block scale '", s.name, "' has shape ", shape_str(s.ne), ", expected ", shape_str({bc, br}),
         " (128 x 128 blocks of a [", rows, ", ", cols, "] matrix)");
  std::vector<float> sv(static_cast<size_t>(bc * br));
  for (int64_t r = 0; r < br; ++r)
    dequantize_row(s.type, s.data.data() + row_bytes(s.type, bc) * r, sv.data() + r * bc, bc);
  for (float v : sv)
    if (!std::isfinite(v)) fail("block scale '", s.name, "' holds ", v);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      out[static_cast<size_t>(r * cols + c)] *= sv[static_cast<size_t>((r / kFp8Block) * bc + c / kFp8Block)];
}
}  // namespace

std::vector<float> tensor_values(const WeightSource& src, const TensorView& t) {
  return with_context(src.path() + ": tensor '" + t.name + "'", [&] {
    const int64_t n = t.nelements();
    const int64_t rl = t.ne[0];
    const int64_t rb = row_bytes(t.type, rl);
    if (rb * (n / rl) != t.nbytes()) fail(t.nbytes(), " bytes for ", n, " ", dtype_name(t.type), " values");
    std::vector<float> out(static_cast<size_t>(n));
    for (int64_t r = 0; r < n / rl; ++r) dequantize_row(t.type, t.data.data() + r * rb, out.data() + r * rl, rl);
    if (const TensorView* s = src.find(names::scale_of(t.name))) {
      std::vector<float> sv(static_cast<size_t>(s->nelements()));
      for (int64_t i = 0; i < s->nelements(); i += s->ne[0])
        dequantize_row(s->type, s->data.data() + row_bytes(s->type, s->ne[0]) * (i / s->ne[0]), sv.data() + i,
                       s->ne[0]);
      const int64_t slabs = t.ne.size() == 3 ? t.ne[2] : 1;
      if (static_cast<int64_t>(sv.size()) != 1 && static_cast<int64_t>(sv.size()) != slabs)
        fail("scale tensor '", s->name, "' has ", sv.size(), " values, expected 1 or ", slabs);
      const int64_t per = n / static_cast<int64_t>(sv.size());
      for (int64_t i = 0; i < n; ++i) out[static_cast<size_t>(i)] *= sv[static_cast<size_t>(i / per)];
    }
    if (const TensorView* s = src.find(names::block_scale_of(t.name))) apply_block_scale(t, *s, out);
    return out;
  });
}

bool needs_expansion(const WeightSource& src, const TensorView& t) {
  return t.type == DType::MXFP4 || (t.type == DType::F8_E4M3 && src.find(names::block_scale_of(t.name)) != nullptr);
}

}  // namespace detail

}  // namespace memra
