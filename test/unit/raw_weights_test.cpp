// load_raw_weights keeps the file's blocks but must describe the same model as load_weights:
// every raw matrix row, dequantized and multiplied by its slab's scale, is bit-identical to the
// canonical f32 row (the canonical loader performs exactly that dequantization). The one
// convention the raw loader leaves in the file's order — llama.cpp's tiled GDN value heads
// (qwen35*) — is checked through the head map written out here (tiled head j*nk + k is grouped
// head k*r + j), not through the loader's code. Plus: unsupported matrix types are errors
// naming the tensor. GLM-5's GGUF kv_b, split in the file, joins back to the canonical kv_b.
#include <cstring>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "exactness/gpu_fixture.h"
#include "memra/error.h"
#include "memra/quant.h"
#include "memra/raw_weights.h"
#include "memra/weights.h"

namespace memra {
namespace {

// Row r of a raw matrix as f32 (dequantized, times its slab scale).
std::vector<float> raw_row(const RawMatrix& m, int64_t r) {
  std::vector<float> v(static_cast<size_t>(m.cols));
  dequantize_row(m.type, m.data.data() + r * m.row_bytes(), v.data(), m.cols);
  const float s = m.slab_scale.at(static_cast<size_t>(r / m.slab_rows()));
  if (m.type == DType::NVFP4 || s != 1.0f)
    for (float& x : v) x *= s;
  return v;
}

void expect_rows_equal(const RawMatrix& raw, const Matrix& canon, const std::string& what,
                       const std::function<int64_t(int64_t)>& row_map = nullptr) {
  ASSERT_EQ(raw.rows, canon.rows) << what;
  ASSERT_EQ(raw.cols, canon.cols) << what;
  for (int64_t r = 0; r < raw.rows; ++r) {
    const std::vector<float> v = raw_row(raw, r);
    const int64_t cr = row_map ? row_map(r) : r;
    ASSERT_EQ(std::memcmp(v.data(), canon.row(cr), sizeof(float) * static_cast<size_t>(raw.cols)), 0)
        << what << ": raw row " << r << " vs canonical row " << cr;
  }
}

struct Case {
  Family family;
  DType type;
  bool hf;
};

class RawWeightsFamily : public ::testing::TestWithParam<Case> {};

TEST_P(RawWeightsFamily, DequantizedRawEqualsCanonical) {
  const Case& k = GetParam();
  const gpu_test::FixtureModel fx = gpu_test::make_fixture(k.family, k.type, k.hf);
  const ModelConfig& c = fx.config;
  const RawWeights raw = load_raw_weights(*fx.source, c);
  const ModelWeights w = load_weights(*fx.source, c);
  const bool tiled = !k.hf && c.gguf_tiled_v_heads();
  EXPECT_EQ(raw.gdn_tiled_v_heads, tiled);
  const int64_t nk = c.ssm_n_k_heads, nv = c.ssm_n_v_heads, dv = c.ssm_d_v, r = nk ? nv / nk : 1;
  // raw (file) value head -> canonical (grouped) value head
  auto head = [&](int64_t h) { return tiled ? (h % nk) * r + h / nk : h; };
  expect_rows_equal(raw.embed, w.embed, "embed");
  if (!c.tied_embeddings) expect_rows_equal(raw.output, w.output, "output");
  EXPECT_EQ(raw.output_norm, w.output_norm);
  for (int64_t i = 0; i < c.n_layer; ++i) {
    const RawLayer& R = raw.layers[static_cast<size_t>(i)];
    const LayerWeights& L = w.layers[static_cast<size_t>(i)];
    const std::string P = fx.id + " layer " + std::to_string(i) + " ";
    EXPECT_EQ(R.attn_norm, L.attn_norm) << P;
    EXPECT_EQ(R.ffn_norm, L.ffn_norm) << P;
    if (L.attn) {
      expect_rows_equal(R.attn->wq, L.attn->wq, P + "wq");
      if (!L.attn->wgate.empty()) expect_rows_equal(R.attn->wgate, L.attn->wgate, P + "wgate");
      expect_rows_equal(R.attn->wk, L.attn->wk, P + "wk");
      expect_rows_equal(R.attn->wv, L.attn->wv, P + "wv");
      expect_rows_equal(R.attn->wo, L.attn->wo, P + "wo");
      EXPECT_EQ(R.attn->q_norm, L.attn->q_norm) << P;
    }
    if (L.gdn) {
      const int64_t kd2 = 2 * c.ssm_key_dim();
      // V rows (and conv V channels) move by whole heads of dv rows
      auto vrow = [&](int64_t row) { return row < kd2 ? row : kd2 + head((row - kd2) / dv) * dv + (row - kd2) % dv; };
      expect_rows_equal(R.gdn->wqkv, L.gdn->wqkv, P + "wqkv", vrow);
      expect_rows_equal(R.gdn->wz, L.gdn->wz, P + "wz", [&](int64_t row) { return head(row / dv) * dv + row % dv; });
      expect_rows_equal(R.gdn->wb, L.gdn->wb, P + "wb", head);
      expect_rows_equal(R.gdn->wa, L.gdn->wa, P + "wa", head);
      for (int64_t h = 0; h < nv; ++h) {
        EXPECT_EQ(R.gdn->ssm_a[h], L.gdn->ssm_a[head(h)]) << P << "ssm_a " << h;
        EXPECT_EQ(R.gdn->dt_bias[h], L.gdn->dt_bias[head(h)]) << P << "dt_bias " << h;
      }
      const int64_t K = c.ssm_conv_kernel;
      for (int64_t ch = 0; ch < c.ssm_conv_dim(); ++ch)
        for (int64_t j = 0; j < K; ++j)
          ASSERT_EQ(R.gdn->conv[ch * K + j], L.gdn->conv.at(vrow(ch), j)) << P << "conv " << ch << "," << j;
      EXPECT_EQ(R.gdn->norm, L.gdn->norm) << P;
      // wout: columns move by heads
      for (int64_t d = 0; d < c.n_embd; ++d) {
        const std::vector<float> v = raw_row(R.gdn->wout, d);
        for (int64_t col = 0; col < c.ssm_value_dim(); ++col)
          ASSERT_EQ(v[col], L.gdn->wout.at(d, head(col / dv) * dv + col % dv)) << P << "wout " << d << "," << col;
      }
    }
    if (L.mla) {  // GGUF's kv_b arrives split (attn_k_b transposed): joined, F32 unless both are F32/F16/BF16
      expect_rows_equal(R.mla->wq_a, L.mla->wq_a, P + "wq_a");
      expect_rows_equal(R.mla->wq_b, L.mla->wq_b, P + "wq_b");
      expect_rows_equal(R.mla->wkv_a, L.mla->wkv_a, P + "wkv_a");
      expect_rows_equal(R.mla->wkv_b, L.mla->wkv_b, P + "wkv_b");
      EXPECT_EQ(R.mla->wkv_b.type, L.mla->wkv_b.stored) << P << "wkv_b's type";
      if (!k.hf && k.type != DType::F32) { EXPECT_EQ(R.mla->wkv_b.type, DType::F32) << P; }
      expect_rows_equal(R.mla->wo, L.mla->wo, P + "wo");
      EXPECT_EQ(R.mla->q_a_norm, L.mla->q_a_norm) << P;
      EXPECT_EQ(R.mla->kv_a_norm, L.mla->kv_a_norm) << P;
    }
    ASSERT_EQ(R.dsa.has_value(), L.dsa.has_value()) << P;
    if (L.dsa) {
      expect_rows_equal(R.dsa->wq_b, L.dsa->wq_b, P + "indexer wq_b");
      expect_rows_equal(R.dsa->wk, L.dsa->wk, P + "indexer wk");
      expect_rows_equal(R.dsa->weights, L.dsa->weights, P + "indexer weights");
      EXPECT_EQ(R.dsa->k_norm, L.dsa->k_norm) << P;
      EXPECT_EQ(R.dsa->k_norm_bias, L.dsa->k_norm_bias) << P;
    }
    if (L.ffn) {
      expect_rows_equal(R.ffn->gate, L.ffn->gate, P + "ffn.gate");
      expect_rows_equal(R.ffn->up, L.ffn->up, P + "ffn.up");
      expect_rows_equal(R.ffn->down, L.ffn->down, P + "ffn.down");
    }
    if (L.moe) {
      expect_rows_equal(R.moe->router, L.moe->router, P + "router");
      EXPECT_EQ(R.moe->router_bias, L.moe->router_bias) << P;
      const int64_t E = c.n_expert, I = c.n_ff_exp, D = c.n_embd;
      ASSERT_EQ(R.moe->experts.gate.n_slab, E);
      for (int64_t e = 0; e < E; ++e)
        for (int64_t row = 0; row < I; ++row) {
          const std::vector<float> g = raw_row(R.moe->experts.gate, e * I + row), u = raw_row(R.moe->experts.up, e * I + row);
          ASSERT_EQ(std::memcmp(g.data(), L.moe->experts[e].gate.row(row), 4 * D), 0) << P << "expert " << e << " gate " << row;
          ASSERT_EQ(std::memcmp(u.data(), L.moe->experts[e].up.row(row), 4 * D), 0) << P << "expert " << e << " up " << row;
        }
      for (int64_t e = 0; e < E; ++e)
        for (int64_t row = 0; row < D; ++row) {
          const std::vector<float> d = raw_row(R.moe->experts.down, e * D + row);
          ASSERT_EQ(std::memcmp(d.data(), L.moe->experts[e].down.row(row), 4 * I), 0) << P << "expert " << e << " down " << row;
        }
      if (!L.moe->shared.gate.empty()) {
        expect_rows_equal(R.moe->shared.gate, L.moe->shared.gate, P + "shared.gate");
        expect_rows_equal(R.moe->shared.down, L.moe->shared.down, P + "shared.down");
        EXPECT_EQ(R.moe->shared_gate, L.moe->shared_gate) << P;
      }
    }
  }
}

std::string case_name(const ::testing::TestParamInfo<Case>& i) {
  std::string t(dtype_name(i.param.type));
  std::string f(family_arch(i.param.family));
  for (char& ch : f) ch = ch == '-' ? '_' : ch;  // glm-dsa
  return f + "_" + t + (i.param.hf ? "_hf" : "_gguf");
}

std::vector<Case> cases() {
  std::vector<Case> v;
  for (Family f : {Family::Qwen3, Family::Qwen3Next, Family::Qwen35, Family::Qwen35Moe, Family::GlmDsa}) {
    for (DType t : {DType::F32, DType::Q8_0, DType::NVFP4}) v.push_back({f, t, false});
    v.push_back({f, DType::BF16, true});
  }
  return v;
}

INSTANTIATE_TEST_SUITE_P(Families, RawWeightsFamily, ::testing::ValuesIn(cases()), case_name);

TEST(RawWeights, UnsupportedMatrixTypeNamesTheTensor) {
  gpu_test::FixtureModel fx = gpu_test::make_fixture(Family::Qwen3, DType::F32, false);
  const TensorView& t = *fx.source->find("blk.1.ffn_up.weight");
  const std::vector<int64_t> ne = t.ne;
  std::vector<std::byte> q(static_cast<size_t>(row_bytes(DType::Q4_0, ne[0]) * (t.nelements() / ne[0])));
  fx.source->add("blk.1.ffn_up.weight", DType::Q4_0, ne, std::move(q));
  EXPECT_THAT([&] { load_raw_weights(*fx.source, fx.config); },
              ::testing::ThrowsMessage<Error>(::testing::AllOf(::testing::HasSubstr("blk.1.ffn_up.weight"),
                                                               ::testing::HasSubstr("q4_0"))));
}

}  // namespace
}  // namespace memra
