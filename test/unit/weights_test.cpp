// load_weights: GGUF (llama.cpp names and conventions) and HF (transformers names) sources of the
// same model load to the same canonical weights; each convention is checked on individual
// elements with index arithmetic written out here, independently of the loader/exporter; missing
// and misshaped tensors are errors naming the tensor and both shapes.
#include <cmath>
#include <cstring>
#include <map>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "memra/error.h"
#include "memra/memory_source.h"
#include "memra/oracle.h"
#include "memra/quant.h"
#include "memra/raw_weights.h"
#include "memra/testing/fixtures.h"
#include "memra/weights.h"

namespace memra {
namespace {

using ::testing::HasSubstr;
using testing_fixtures::flatten;
using testing_fixtures::unit_config;

// Reads element (row, col) of a 2-D F32 tensor stored {cols, rows}.
float at(const MemorySource& s, const std::string& name, int64_t row, int64_t col) {
  const TensorView& t = s.tensor(name);
  float v;
  std::memcpy(&v, t.data.data() + (row * t.ne[0] + col) * 4, 4);
  return v;
}
float at1(const MemorySource& s, const std::string& name, int64_t i) { return at(s, name, 0, i); }

void expect_same_weights(const ModelWeights& a, const ModelWeights& b) {
  auto fa = flatten(a), fb = flatten(b);
  ASSERT_EQ(fa.size(), fb.size());
  for (size_t i = 0; i < fa.size(); ++i) {
    ASSERT_EQ(fa[i].first, fb[i].first);
    ASSERT_TRUE(testing_fixtures::bit_equal(fa[i].second, fb[i].second)) << fa[i].first;
  }
}

class WeightsFamily : public ::testing::TestWithParam<Family> {};

TEST_P(WeightsFamily, GgufAndHfSourcesLoadToTheSameCanonicalWeights) {
  ModelConfig c = unit_config(GetParam());
  if (c.family != Family::Qwen3) c.n_mtp = 1;
  ModelWeights w = random_weights(c, 11);
  MemorySource g = to_gguf_source(c, w);
  MemorySource h = to_hf_source(c, w);
  ModelWeights wg = load_weights(g, ModelConfig::from_source(g));
  ModelWeights wh = load_weights(h, ModelConfig::from_source(h));
  expect_same_weights(wg, wh);
  // and equal to the original except where HF stores a transformed value: ssm_a goes through
  // A_log = log(-a) (an ulp or so), norms through w = m - 1 (exact for m in [0.75, 1.25]).
  auto fo = flatten(w), fl = flatten(wh);
  for (size_t i = 0; i < fo.size(); ++i) {
    const bool is_a = fo[i].first.ends_with("ssm_a");
    for (size_t j = 0; j < fo[i].second.size(); ++j) {
      if (is_a) ASSERT_NEAR(fl[i].second[j], fo[i].second[j], 4e-7 * std::abs(fo[i].second[j])) << fo[i].first;
      else ASSERT_EQ(fl[i].second[j], fo[i].second[j]) << fo[i].first << "[" << j << "]";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Families, WeightsFamily,
                         ::testing::Values(Family::Qwen3, Family::Qwen3Next, Family::Qwen35, Family::Qwen35Moe),
                         [](const auto& i) { return std::string(family_arch(i.param)); });

TEST(WeightsConventions, ZeroCentredNormsGetPlusOneExceptSsmNorm) {
  ModelConfig c = unit_config(Family::Qwen35);
  ModelWeights w = random_weights(c, 12);
  MemorySource h = to_hf_source(c, w);
  MemorySource g = to_gguf_source(c, w);
  // HF raw w; GGUF and canonical hold 1 + w.
  const float hf = at1(h, "model.layers.0.input_layernorm.weight", 5);
  EXPECT_EQ(at1(g, "blk.0.attn_norm.weight", 5), 1.0f + hf);
  EXPECT_EQ(w.layers[0].attn_norm[5], 1.0f + hf);
  const float hq = at1(h, "model.layers.3.self_attn.q_norm.weight", 2);
  EXPECT_EQ(at1(g, "blk.3.attn_q_norm.weight", 2), 1.0f + hq);
  EXPECT_EQ(at1(h, "model.norm.weight", 7) + 1.0f, at1(g, "output_norm.weight", 7));
  // linear_attn.norm is plain w in both.
  EXPECT_EQ(at1(h, "model.layers.0.linear_attn.norm.weight", 3), at1(g, "blk.0.ssm_norm.weight", 3));
  EXPECT_EQ(at1(h, "model.layers.0.linear_attn.norm.weight", 3), w.layers[0].gdn->norm[3]);
  // Qwen3 dense: plain w everywhere.
  ModelConfig c3 = unit_config(Family::Qwen3);
  ModelWeights w3 = random_weights(c3, 12);
  MemorySource h3 = to_hf_source(c3, w3);
  EXPECT_EQ(at1(h3, "model.layers.1.post_attention_layernorm.weight", 4), w3.layers[1].ffn_norm[4]);
}

TEST(WeightsConventions, SsmAIsMinusExpALogAndDtBiasIsCarried) {
  ModelConfig c = unit_config(Family::Qwen3Next);
  ModelWeights w = random_weights(c, 13);
  MemorySource h = to_hf_source(c, w);
  const float a_log = at1(h, "model.layers.1.linear_attn.A_log", 2);
  ModelWeights wh = load_weights(h, ModelConfig::from_source(h));
  EXPECT_EQ(wh.layers[1].gdn->ssm_a[2], static_cast<float>(-std::exp(static_cast<double>(a_log))));
  MemorySource g = to_gguf_source(c, w);
  EXPECT_EQ(at1(g, "blk.1.ssm_a", 2), wh.layers[1].gdn->ssm_a[2]);
  EXPECT_EQ(at1(g, "blk.1.ssm_dt.bias", 3), at1(h, "model.layers.1.linear_attn.dt_bias", 3));
}

TEST(WeightsConventions, GatedQProjIsPerHeadInterleaved) {
  ModelConfig c = unit_config(Family::Qwen3Next);
  ModelWeights w = random_weights(c, 14);
  MemorySource h = to_hf_source(c, w);
  const int64_t hd = c.head_dim;
  // q_proj rows of head 2: [q (hd rows) | gate (hd rows)] at 2*hd*2.
  for (int64_t d : {0, 5, 15}) {
    EXPECT_EQ(at(h, "model.layers.3.self_attn.q_proj.weight", 2 * 2 * hd + d, 7), w.layers[3].attn->wq.at(2 * hd + d, 7));
    EXPECT_EQ(at(h, "model.layers.3.self_attn.q_proj.weight", 2 * 2 * hd + hd + d, 7), w.layers[3].attn->wgate.at(2 * hd + d, 7));
  }
}

TEST(WeightsConventions, Qwen3NextQkvzAndBaAreGroupedPerKeyHead) {
  ModelConfig c = unit_config(Family::Qwen3Next);  // nk 2, nv 4 (r 2), dk 8, dv 12
  ModelWeights w = random_weights(c, 15);
  MemorySource h = to_hf_source(c, w);
  const GdnWeights& g = *w.layers[0].gdn;
  const std::string qkvz = "model.layers.0.linear_attn.in_proj_qkvz.weight";
  const std::string ba = "model.layers.0.linear_attn.in_proj_ba.weight";
  // group 1 starts at row 1 * (2*8 + 2*2*12) = 64: q(8) k(8) v(24) z(24)
  EXPECT_EQ(at(h, qkvz, 64 + 3, 9), g.wqkv.at(8 + 3, 9));            // q of key head 1
  EXPECT_EQ(at(h, qkvz, 64 + 8 + 3, 9), g.wqkv.at(16 + 8 + 3, 9));   // k of key head 1
  EXPECT_EQ(at(h, qkvz, 64 + 16 + 12 + 4, 9), g.wqkv.at(32 + 3 * 12 + 4, 9));  // v head 3 (= 1*2+1)
  EXPECT_EQ(at(h, qkvz, 64 + 40 + 12 + 4, 9), g.wz.at(3 * 12 + 4, 9));          // z head 3
  // ba group 1: rows 4..7 = [b2 b3 a2 a3]
  EXPECT_EQ(at(h, ba, 5, 1), g.wb.at(3, 1));
  EXPECT_EQ(at(h, ba, 6, 1), g.wa.at(2, 1));
  // the GGUF ssm_ba has the same grouping; attn_qkv/attn_gate are already de-interleaved.
  MemorySource gg = to_gguf_source(c, w);
  EXPECT_EQ(at(gg, "blk.0.ssm_ba.weight", 5, 1), g.wb.at(3, 1));
  EXPECT_EQ(at(gg, "blk.0.attn_qkv.weight", 32 + 3 * 12 + 4, 9), g.wqkv.at(32 + 3 * 12 + 4, 9));
}

TEST(WeightsConventions, Qwen35GgufValueHeadsAreTiled) {
  ModelConfig c = unit_config(Family::Qwen35);  // nk 2, r 2: grouped head k*2+j <-> tiled j*2+k
  ModelWeights w = random_weights(c, 16);
  MemorySource g = to_gguf_source(c, w);
  const GdnWeights& G = *w.layers[1].gdn;
  const int64_t dv = 12, kd2 = 32;
  // grouped head 1 (k=0, j=1) sits at tiled index 2; grouped head 2 (k=1, j=0) at tiled 1.
  EXPECT_EQ(at1(g, "blk.1.ssm_dt.bias", 2), G.dt_bias[1]);
  EXPECT_EQ(at1(g, "blk.1.ssm_dt.bias", 1), G.dt_bias[2]);
  EXPECT_EQ(at(g, "blk.1.attn_qkv.weight", kd2 + 2 * dv + 5, 3), G.wqkv.at(kd2 + 1 * dv + 5, 3));
  EXPECT_EQ(at(g, "blk.1.attn_gate.weight", 1 * dv + 5, 3), G.wz.at(2 * dv + 5, 3));
  EXPECT_EQ(at(g, "blk.1.ssm_beta.weight", 2, 3), G.wb.at(1, 3));
  EXPECT_EQ(at(g, "blk.1.ssm_alpha.weight", 1, 3), G.wa.at(2, 3));
  EXPECT_EQ(at(g, "blk.1.ssm_conv1d.weight", kd2 + 2 * dv + 5, 1), G.conv.at(kd2 + 1 * dv + 5, 1));
  EXPECT_EQ(at(g, "blk.1.ssm_out.weight", 7, 2 * dv + 5), G.wout.at(7, 1 * dv + 5));
  // q/k rows and heads 0 and 3 (fixed points of the permutation) stay.
  EXPECT_EQ(at(g, "blk.1.attn_qkv.weight", 9, 3), G.wqkv.at(9, 3));
  EXPECT_EQ(at1(g, "blk.1.ssm_dt.bias", 3), G.dt_bias[3]);
  // qwen3next GGUF is NOT reordered.
  ModelConfig cn = unit_config(Family::Qwen3Next);
  ModelWeights wn = random_weights(cn, 16);
  MemorySource gn = to_gguf_source(cn, wn);
  EXPECT_EQ(at1(gn, "blk.1.ssm_dt.bias", 1), wn.layers[1].gdn->dt_bias[1]);
}

// With r = n_v / n_k = 3 != n_k = 2 the grouped<->tiled map is not its own inverse, so a loader
// that applied it in the wrong direction would be caught here.
TEST(WeightsConventions, Qwen35TiledOrderWithThreeValueHeadsPerKeyHead) {
  ModelConfig c = unit_config(Family::Qwen35Moe);
  c.ssm_n_v_heads = 6;
  ModelWeights w = random_weights(c, 26);
  MemorySource g = to_gguf_source(c, w);
  const GdnWeights& G = *w.layers[0].gdn;
  // grouped head k*3 + j sits at tiled j*2 + k: 1 (k0 j1) -> 2, 2 (k0 j2) -> 4, 3 (k1 j0) -> 1,
  // 4 (k1 j1) -> 3, 5 (k1 j2) -> 5.
  const int64_t tiled_of[6] = {0, 2, 4, 1, 3, 5};
  for (int64_t h = 0; h < 6; ++h) {
    EXPECT_EQ(at1(g, "blk.0.ssm_dt.bias", tiled_of[h]), G.dt_bias[h]) << h;
    EXPECT_EQ(at(g, "blk.0.ssm_out.weight", 3, tiled_of[h] * 12 + 7), G.wout.at(3, h * 12 + 7)) << h;
  }
  MemorySource h = to_hf_source(c, w);
  expect_same_weights(load_weights(g, ModelConfig::from_source(g)), load_weights(h, ModelConfig::from_source(h)));
}

TEST(WeightsExperts, FusedAndPerExpertLayoutsLoadTheSame) {
  ModelConfig c = unit_config(Family::Qwen35Moe);
  ModelWeights w = random_weights(c, 17);
  MemorySource h1 = to_hf_source(c, w);
  MemorySource h2 = to_hf_source(c, w, {.fused_experts = true, .language_model_prefix = true});
  ASSERT_NE(h1.find("model.layers.0.mlp.experts.3.down_proj.weight"), nullptr);
  ASSERT_NE(h2.find("model.language_model.layers.0.mlp.experts.gate_up_proj"), nullptr);
  MemorySource g1 = to_gguf_source(c, w);
  MemorySource g2 = to_gguf_source(c, w, {.fused_gate_up_exps = true});
  ASSERT_NE(g2.find("blk.0.ffn_gate_up_exps.weight"), nullptr);
  ModelWeights a = load_weights(h1, ModelConfig::from_source(h1));
  expect_same_weights(a, load_weights(h2, ModelConfig::from_source(h2)));
  expect_same_weights(a, load_weights(g1, ModelConfig::from_source(g1)));
  expect_same_weights(a, load_weights(g2, ModelConfig::from_source(g2)));
  // hand check of the stacked layout: expert 2's up row 5 col 9 in ffn_up_exps {D, I, E}
  const int64_t D = 64, I = 32;
  EXPECT_EQ(at(g1, "blk.0.ffn_up_exps.weight", 2 * I + 5, 9), a.layers[0].moe->experts[2].up.at(5, 9));
  // fused gate_up: expert 1 rows [gate(I) | up(I)] at 2*I*1
  EXPECT_EQ(at(g2, "blk.0.ffn_gate_up_exps.weight", 2 * I + I + 5, 9), a.layers[0].moe->experts[1].up.at(5, 9));
  EXPECT_EQ(at(g1, "blk.0.ffn_down_exps.weight", 3 * D + 4, 6), a.layers[0].moe->experts[3].down.at(4, 6));
}

TEST(WeightsErrors, MissingTensorIsNamed) {
  ModelConfig c = unit_config(Family::Qwen35);
  MemorySource g = to_gguf_source(c, random_weights(c, 18));
  g.remove("blk.1.attn_qkv.weight");
  EXPECT_THAT([&] { load_weights(g, c); },
              ::testing::ThrowsMessage<Error>(HasSubstr("tensor 'blk.1.attn_qkv.weight' missing")));
  MemorySource h = to_hf_source(c, random_weights(c, 18));
  h.remove("model.layers.3.self_attn.k_norm.weight");
  EXPECT_THAT([&] { load_weights(h, c); },
              ::testing::ThrowsMessage<Error>(HasSubstr("model.layers.3.self_attn.k_norm.weight")));
}

TEST(WeightsErrors, ShapeMismatchNamesExpectedAndActual) {
  ModelConfig c = unit_config(Family::Qwen3);
  MemorySource g = to_gguf_source(c, random_weights(c, 19));
  std::vector<float> bad(64 * 33, 0.0f);
  g.add_f32("blk.0.attn_k.weight", {64, 33}, bad);
  try {
    load_weights(g, c);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("'blk.0.attn_k.weight'"));
    EXPECT_THAT(e.what(), HasSubstr("shape {64, 33}, expected {64, 32}"));
  }
}

TEST(WeightsOutput, TiedGgufUsesTheEmbedding) {
  ModelConfig c = unit_config(Family::Qwen3);
  ModelWeights w = random_weights(c, 20);
  MemorySource g = to_gguf_source(c, w);
  g.remove("output.weight");
  ModelConfig cg = ModelConfig::from_source(g);
  ASSERT_TRUE(cg.tied_embeddings);
  ModelWeights l = load_weights(g, cg);
  EXPECT_TRUE(l.output.empty());
  EXPECT_EQ(&l.lm_head(), &l.embed);
  // HF with tie_word_embeddings=false but no lm_head: an error naming it.
  MemorySource h = to_hf_source(c, w);
  h.remove("lm_head.weight");
  EXPECT_THAT([&] { load_weights(h, ModelConfig::from_source(h)); },
              ::testing::ThrowsMessage<Error>(HasSubstr("'lm_head.weight' missing")));
}

TEST(WeightsDtypes, QuantisedTensorsAndPerTensorScaleAreApplied) {
  ModelConfig c = unit_config(Family::Qwen3);
  ModelWeights w = random_weights(c, 21);
  MemorySource g = to_gguf_source(c, w);
  // attn_output {128 -> 64}: replace by Q8_0 and expect dequantize_row's values.
  const Matrix& wo = w.layers[0].attn->wo;
  std::vector<std::byte> q(static_cast<size_t>(row_bytes(DType::Q8_0, wo.cols) * wo.rows));
  for (int64_t r = 0; r < wo.rows; ++r)
    quantize_row(DType::Q8_0, wo.row(r), q.data() + r * row_bytes(DType::Q8_0, wo.cols), wo.cols);
  std::vector<float> want(wo.data.size());
  for (int64_t r = 0; r < wo.rows; ++r)
    dequantize_row(DType::Q8_0, q.data() + r * row_bytes(DType::Q8_0, wo.cols), want.data() + r * wo.cols, wo.cols);
  g.add("blk.0.attn_output.weight", DType::Q8_0, {wo.cols, wo.rows}, q);
  // a per-tensor scale on attn_v (llama.cpp: y = (W x) * scale) multiplies every element.
  const float two = 2.0f;
  g.add_f32("blk.1.attn_v.scale", {1}, std::span<const float>(&two, 1));
  ModelWeights l = load_weights(g, c);
  EXPECT_EQ(l.layers[0].attn->wo.data, want);
  EXPECT_NE(want, wo.data);  // the quantisation changed something: the check is not vacuous
  EXPECT_EQ(l.layers[1].attn->wv.at(3, 4), 2.0f * w.layers[1].attn->wv.at(3, 4));
}

TEST(MemorySourceTest, ValidatesBytesAndKeepsViewsStable) {
  MemorySource s(MetaStyle::Gguf, "mem");
  std::vector<float> a(8, 1.0f);
  s.add_f32("a", {8}, a);
  const TensorView* va = s.find("a");
  for (int i = 0; i < 100; ++i) s.add_f32("t" + std::to_string(i), {8}, a);
  EXPECT_EQ(s.find("a"), va);
  EXPECT_EQ(va->data.size(), 32u);
  EXPECT_THAT([&] { s.add("b", DType::F32, {8}, std::vector<std::byte>(31)); },
              ::testing::ThrowsMessage<Error>(HasSubstr("31 bytes given")));
  EXPECT_THAT([&] { s.remove("zzz"); }, ::testing::ThrowsMessage<Error>(HasSubstr("'zzz'")));
  EXPECT_EQ(s.tensor_names().front(), "a");
  MemorySource moved = std::move(s);
  EXPECT_EQ(moved.find("a"), va);  // moving keeps the views valid
}

}  // namespace
}  // namespace memra

namespace memra {
namespace {

// Block-scaled FP8 as DeepSeek-V3 / GLM-5 / DeepSeek-V4 release it: every matrix rewritten as
// F8_E4M3 plus "<base>.weight_scale_inv", one f32 per 128 x 128 block. The loaded value of each
// element must be its e4m3 code times ITS block's scale, written out here: shapes with several
// blocks and partial edge blocks on both axes (embedding 512 rows; FFN 200 wide).
TEST(WeightsFp8, BlockScaledE4M3IsDequantisedPerBlock) {
  ModelConfig c = unit_config(Family::GlmDsa);
  c.n_ff = 200;
  MemorySource h = to_hf_source(c, random_weights(c, 5));
  std::map<std::string, std::vector<float>> want;  // name -> expected f32 values, row-major
  for (const std::string& name : h.tensor_names()) {
    const TensorView& t = h.tensor(name);
    if (t.type != DType::F32 || t.ne.size() != 2 || t.ne[1] == 1 || !name.ends_with(".weight")) continue;
    const int64_t cols = t.ne[0], rows = t.ne[1], bc = (cols + 127) / 128, br = (rows + 127) / 128;
    std::vector<float> w(static_cast<size_t>(rows * cols));
    std::memcpy(w.data(), t.data.data(), w.size() * 4);
    std::vector<float> scale(static_cast<size_t>(bc * br), 0.0f), deq(w.size());
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t k = 0; k < cols; ++k) {
        float& s = scale[static_cast<size_t>((r / 128) * bc + k / 128)];
        s = std::max(s, std::abs(w[static_cast<size_t>(r * cols + k)]) / 448.0f);
      }
    std::vector<std::byte> codes(w.size());
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t k = 0; k < cols; ++k) {
        const size_t i = static_cast<size_t>(r * cols + k);
        const float s = scale[static_cast<size_t>((r / 128) * bc + k / 128)];
        const uint8_t q = f32_to_e4m3(w[i] / s);
        codes[i] = static_cast<std::byte>(q);
        deq[i] = e4m3_to_f32(q) * s;
      }
    want[name] = std::move(deq);
    h.add(name, DType::F8_E4M3, {cols, rows}, std::move(codes));
    h.add_f32(name + "_scale_inv", {bc, br}, scale);
  }
  const ModelWeights w = load_weights(h, c);
  auto expect = [&](const Matrix& m, const std::string& name) {
    ASSERT_TRUE(want.count(name)) << name;
    EXPECT_TRUE(testing_fixtures::bit_equal(m.data, want.at(name))) << name;
    EXPECT_EQ(m.stored, DType::F8_E4M3) << name;
  };
  expect(w.embed, "model.embed_tokens.weight");  // 4 row blocks
  expect(w.output, "lm_head.weight");
  expect(w.layers[0].ffn->gate, "model.layers.0.mlp.gate_proj.weight");  // a full and a partial row block
  expect(w.layers[0].ffn->down, "model.layers.0.mlp.down_proj.weight");  // a full and a partial column block
  expect(w.layers[1].moe->experts[3].up, "model.layers.1.mlp.experts.3.up_proj.weight");
  expect(w.layers[2].mla->wkv_b, "model.layers.2.self_attn.kv_b_proj.weight");
  // and the oracle runs on it
  EXPECT_NO_THROW(oracle::Model::from_weights(c, w).forward_last(testing_fixtures::prompt(20, c.n_vocab)));
  // The GPU's file-typed loader holds them as the same values: F32, since a scale amax / 448 is
  // no power of two and its products are no BF16 values.
  const RawWeights raw = load_raw_weights(h, c);
  auto raw_values = [](const RawMatrix& m) {
    EXPECT_EQ(m.type, DType::F32);
    std::vector<float> v(static_cast<size_t>(m.rows * m.cols));
    std::memcpy(v.data(), m.data.data(), v.size() * 4);
    return v;
  };
  EXPECT_TRUE(
      testing_fixtures::bit_equal(raw_values(raw.layers[0].ffn->down), want.at("model.layers.0.mlp.down_proj.weight")));
  EXPECT_TRUE(testing_fixtures::bit_equal(raw_values(raw.layers[2].mla->wkv_b),
                                          want.at("model.layers.2.self_attn.kv_b_proj.weight")));

  // a scale tensor of another block grid is an error naming both shapes
  h.add_f32("model.layers.0.mlp.down_proj.weight_scale_inv", {1, 1}, std::vector<float>{1.0f});
  EXPECT_THAT([&] { load_weights(h, c); },
              ::testing::ThrowsMessage<Error>(AllOf(HasSubstr("model.layers.0.mlp.down_proj.weight_scale_inv"),
                                                    HasSubstr("shape {1, 1}, expected {2, 1}"))));
}

}  // namespace
}  // namespace memra
