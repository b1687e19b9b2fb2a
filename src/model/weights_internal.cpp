// The model layer's shared helpers (weights_internal.h): used by both loaders, the exporter and
// config detection, defined here so that no loader's file is a dependency of the name table.
#include "model/weights_internal.h"

#include <cmath>
#include <cstring>

#include "memra/memory_source.h"

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

}  // namespace detail

}  // namespace memra
