// GLM-5 (glm_moe_dsa) pieces the whole-model bank test (hf_bank_test: the oracle within 1e-4 of
// transformers 5.17's logits) cannot localise: the config reader's defaults and refusals, the
// interleaved RoPE, the indexer key LayerNorm, the DSA selection and the sigmoid-grouped router,
// each against a hand computation; the HF writer/reader round trip of every GLM-5 tensor; and
// GGUF as llama.cpp's glm-dsa converter writes it (kv_b split into attn_k_b / attn_v_b).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "memra/config.h"
#include "memra/error.h"
#include "memra/fixture.h"
#include "memra/memory_source.h"
#include "memra/oracle.h"
#include "memra/testing/fixtures.h"
#include "memra/weights.h"
#include "oracle/ops.h"

namespace memra {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using testing_fixtures::unit_config;

ModelConfig glm() { return unit_config(Family::GlmDsa); }

// A minimal GLM-5 config.json as keys, with what a test changes.
MemorySource glm_keys() {
  MemorySource s(MetaStyle::Hf, "<glm test config>");
  write_hf_keys(glm(), s);
  return s;
}

TEST(GlmConfig, HfKeysRoundTripThroughAFullSource) {
  const ModelConfig c = glm();
  MemorySource h = to_hf_source(c, random_weights(c, 3));
  const ModelConfig r = ModelConfig::from_source(h);
  EXPECT_EQ(r, c) << config_difference(r, c);
  // layers 1 and 2 reuse layer 0's selection; layer 3 runs its own indexer
  EXPECT_EQ(c.dsa_shared, (std::vector<uint8_t>{0, 1, 1, 0}));
  EXPECT_NE(h.find("model.layers.0.self_attn.indexer.wk.weight"), nullptr);
  EXPECT_EQ(h.find("model.layers.1.self_attn.indexer.wk.weight"), nullptr);
  EXPECT_NE(h.find("model.layers.1.mlp.gate.e_score_correction_bias"), nullptr);
  EXPECT_NE(h.find("model.layers.1.mlp.shared_experts.down_proj.weight"), nullptr);
  EXPECT_EQ(h.find("model.layers.1.mlp.shared_expert_gate.weight"), nullptr);
}

TEST(GlmConfig, TransformersDefaultsFillWhatTheConfigOmits) {
  MemorySource s(MetaStyle::Hf, "<minimal glm config>");
  s.set("architectures", std::vector<std::string>{"GlmMoeDsaForCausalLM"});
  for (auto [k, v] : std::vector<std::pair<const char*, int64_t>>{{"vocab_size", 1000},
                                                                  {"hidden_size", 64},
                                                                  {"num_hidden_layers", 5},
                                                                  {"num_attention_heads", 4},
                                                                  {"q_lora_rank", 32},
                                                                  {"kv_lora_rank", 16},
                                                                  {"qk_nope_head_dim", 8},
                                                                  {"qk_rope_head_dim", 8},
                                                                  {"v_head_dim", 8}})
    s.set(k, v);
  s.set("index_topk_freq", int64_t{2});
  s.set("index_skip_topk_offset", int64_t{1});
  const ModelConfig c = ModelConfig::from_hf_keys(*memory_meta_keys(s));
  EXPECT_EQ(c.rms_eps, 1e-5);
  EXPECT_EQ(c.head_dim, 16);
  EXPECT_EQ(c.n_head_kv, 4);
  // first_k_dense_replace 3: layers 0-2 dense, the rest MoE with GLM-5's routing defaults
  EXPECT_EQ(c.ffn_kind,
            (std::vector<FfnKind>{FfnKind::Dense, FfnKind::Dense, FfnKind::Dense, FfnKind::Moe, FfnKind::Moe}));
  EXPECT_EQ(c.n_expert, 256);
  EXPECT_EQ(c.n_expert_used, 8);
  EXPECT_EQ(c.expert_weights_scale, 2.5);
  EXPECT_EQ(c.moe_gating, MoeGating::SigmoidGrouped);
  // freq 2, offset 1: layer i runs its indexer iff max(i, 0) % 2 == 0
  EXPECT_EQ(c.dsa_shared, (std::vector<uint8_t>{0, 1, 0, 1, 0}));
  EXPECT_EQ(c.dsa_n_head, 32);
  EXPECT_EQ(c.dsa_head_dim, 128);
  EXPECT_EQ(c.dsa_topk, 2048);
}

TEST(GlmConfig, IndexerPatternStringGivesTheSharedLayers) {
  MemorySource s = glm_keys();
  s.erase_meta("indexer_types");
  s.set("index_topk_pattern", std::string("FSFS"));
  EXPECT_EQ(ModelConfig::from_hf_keys(*memory_meta_keys(s)).dsa_shared, (std::vector<uint8_t>{0, 1, 0, 1}));
}

TEST(GlmConfig, UnsupportedOrInconsistentFieldsAreNamed) {
  auto error_of = [](const MemorySource& s) {
    try {
      ModelConfig::from_hf_keys(*memory_meta_keys(s)).validate();
    } catch (const Error& e) { return std::string(e.what()); }
    return std::string("no error");
  };
  MemorySource s = glm_keys();
  s.set("rope_parameters.rope_type", std::string("yarn"));
  EXPECT_THAT(error_of(s), HasSubstr("rope_type 'yarn'"));
  s = glm_keys();
  s.set("attention_bias", true);
  EXPECT_THAT(error_of(s), HasSubstr("attention_bias"));
  s = glm_keys();
  s.set("indexer_types", std::vector<std::string>{"shared", "full", "full", "full"});
  EXPECT_THAT(error_of(s), HasSubstr("layer 0's indexer is 'shared'"));
  s = glm_keys();
  s.set("indexer_types", std::vector<std::string>{"full", "sparse", "full", "full"});
  EXPECT_THAT(error_of(s), HasSubstr("indexer_types[1] = 'sparse'"));
  s = glm_keys();
  s.set("num_key_value_heads", int64_t{2});
  EXPECT_THAT(error_of(s), HasSubstr("n_head_kv 2 differs from n_head 4"));
  s = glm_keys();
  s.set("n_group", int64_t{3});
  EXPECT_THAT(error_of(s), HasSubstr("n_expert 8 is not a multiple of n_expert_group 3"));
  s = glm_keys();
  s.set("topk_group", int64_t{1});
  s.set("num_experts_per_tok", int64_t{3});
  EXPECT_THAT(error_of(s), HasSubstr("n_expert_used 3 exceeds the 1 selectable groups of 2"));
  s = glm_keys();
  s.erase_meta("q_lora_rank");
  EXPECT_THAT(error_of(s), HasSubstr("q_lora_rank"));
}

// --- GGUF (llama.cpp's glm-dsa) -----------------------------------------------------------------

MemorySource glm_gguf(const ModelConfig& c, uint64_t seed = 3) { return to_gguf_source(c, random_weights(c, seed)); }

std::string config_error(const MemorySource& s) {
  try {
    ModelConfig::from_source(s);
  } catch (const Error& e) { return e.what(); }
  return "no error";
}

TEST(GlmGguf, KeysAndTensorsAsLlamaCppWritesThem) {
  const ModelConfig c = glm();
  const MemorySource g = glm_gguf(c);
  const ModelConfig r = ModelConfig::from_source(g);
  EXPECT_EQ(r, c) << config_difference(r, c);
  auto key = [&](const char* k) { return std::get<int64_t>(*g.meta(std::string("glm-dsa.") + k)); };
  // MLA written as MQA over the latent: one kv head of kv_lora + rope, values kv_lora wide
  EXPECT_EQ(key("attention.head_count_kv"), 1);
  EXPECT_EQ(key("attention.key_length"), c.mla_kv_rank + c.n_rot);
  EXPECT_EQ(key("attention.value_length"), c.mla_kv_rank);
  EXPECT_EQ(key("attention.key_length_mla"), c.mla_d_nope + c.n_rot);
  EXPECT_EQ(key("attention.value_length_mla"), c.mla_d_v);
  EXPECT_EQ(key("expert_gating_func"), 2);
  EXPECT_EQ(std::get<std::vector<int64_t>>(*g.meta("glm-dsa.attention.indexer.types")),
            (std::vector<int64_t>{1, 0, 0, 1}));
  // kv_b split as the converter splits it; shared layers carry no indexer
  EXPECT_EQ(g.find("blk.0.attn_kv_b.weight"), nullptr);
  EXPECT_EQ(g.tensor("blk.0.attn_k_b.weight").ne, (std::vector<int64_t>{c.mla_d_nope, c.mla_kv_rank, c.n_head}));
  EXPECT_EQ(g.tensor("blk.0.attn_v_b.weight").ne, (std::vector<int64_t>{c.mla_kv_rank, c.mla_d_v, c.n_head}));
  EXPECT_NE(g.find("blk.0.indexer.attn_q_b.weight"), nullptr);
  EXPECT_EQ(g.find("blk.1.indexer.proj.weight"), nullptr);
  EXPECT_NE(g.find("blk.1.exp_probs_b.bias"), nullptr);
  EXPECT_NE(g.find("blk.1.ffn_gate_exps.weight"), nullptr);
  EXPECT_NE(g.find("blk.1.ffn_down_shexp.weight"), nullptr);
  EXPECT_NE(g.find("blk.0.ffn_norm.weight"), nullptr);
}

// attn_k_b holds head h's nope rows of kv_b transposed: element (h, l, n) is kv_b row
// h·(nope + v) + n, column l; attn_v_b element (h, j, l) is row h·(nope + v) + nope + j. Checked
// here by index arithmetic written out, then through both loaders back to the same kv_b.
TEST(GlmGguf, SplitKvBIsTheConvertersLayoutAndJoinsBackBitwise) {
  const ModelConfig c = glm();
  const ModelWeights w = random_weights(c, 5);
  const MemorySource g = to_gguf_source(c, w);
  const Matrix& kvb = w.layers[2].mla->wkv_b;
  const int64_t dn = c.mla_d_nope, dv = c.mla_d_v, L = c.mla_kv_rank;
  auto elem = [&](const char* name, int64_t i) {
    float v;
    std::memcpy(&v, g.tensor(name).data.data() + 4 * i, 4);
    return v;
  };
  for (int64_t h : {0, 3})
    for (int64_t l : {0, 7, 31}) {
      for (int64_t n : {0, 5, 15})
        EXPECT_EQ(elem("blk.2.attn_k_b.weight", (h * L + l) * dn + n), kvb.at(h * (dn + dv) + n, l));
      for (int64_t j : {0, 9})
        EXPECT_EQ(elem("blk.2.attn_v_b.weight", (h * dv + j) * L + l), kvb.at(h * (dn + dv) + dn + j, l));
    }
  const ModelWeights back = load_weights(g, ModelConfig::from_source(g));
  const ModelWeights hf = [&] {
    const MemorySource h = to_hf_source(c, w);
    return load_weights(h, ModelConfig::from_source(h));
  }();
  const auto fg = testing_fixtures::flatten(back), fh = testing_fixtures::flatten(hf),
             fo = testing_fixtures::flatten(w);
  ASSERT_EQ(fg.size(), fo.size());
  for (size_t i = 0; i < fo.size(); ++i) {
    EXPECT_EQ(fg[i].first, fo[i].first);
    EXPECT_TRUE(testing_fixtures::bit_equal(fg[i].second, fo[i].second)) << fo[i].first;
    EXPECT_TRUE(testing_fixtures::bit_equal(fh[i].second, fo[i].second)) << fo[i].first;
  }
}

TEST(GlmGguf, OracleLogitsFromGgufEqualHfBitwise) {
  const ModelConfig c = glm();
  const ModelWeights w = random_weights(c, 9);
  const MemorySource g = to_gguf_source(c, w), h = to_hf_source(c, w);
  const std::vector<int32_t> prompt = {1, 17, 42, 5, 99, 3, 250, 8, 77, 61, 12, 400, 33, 2, 90, 7, 150, 11, 64, 21};
  ASSERT_GT(static_cast<int64_t>(prompt.size()), c.dsa_topk);  // the sparse selection drops tokens
  const auto lg = oracle::Model::load(g).forward_all(prompt), lh = oracle::Model::load(h).forward_all(prompt);
  ASSERT_EQ(lg.size(), lh.size());
  for (size_t t = 0; t < lg.size(); ++t) EXPECT_TRUE(testing_fixtures::bit_equal(lg[t], lh[t])) << "position " << t;
}

TEST(GlmGguf, LegacyUnsplitKvBReadsTheSame) {
  const ModelConfig c = glm();
  const ModelWeights w = random_weights(c, 5);
  MemorySource g = to_gguf_source(c, w);
  for (int64_t i = 0; i < c.n_layer; ++i) {
    const std::string P = "blk." + std::to_string(i) + ".";
    g.remove(P + "attn_k_b.weight");
    g.remove(P + "attn_v_b.weight");
    const Matrix& kvb = w.layers[static_cast<size_t>(i)].mla->wkv_b;
    g.add_f32(P + "attn_kv_b.weight", {kvb.cols, kvb.rows}, kvb.data);
  }
  const ModelWeights back = load_weights(g, ModelConfig::from_source(g));
  EXPECT_TRUE(testing_fixtures::bit_equal(back.layers[3].mla->wkv_b.data, w.layers[3].mla->wkv_b.data));
}

TEST(GlmGguf, IndexerScheduleComesFromTheTensorsWithoutTheKey) {
  MemorySource g = glm_gguf(glm());
  g.erase_meta("glm-dsa.attention.indexer.types");
  EXPECT_EQ(ModelConfig::from_source(g).dsa_shared, (std::vector<uint8_t>{0, 1, 1, 0}));
  // with the key, the two must agree
  g.set("glm-dsa.attention.indexer.types", std::vector<int64_t>{1, 1, 0, 1});
  EXPECT_THAT(config_error(g),
              AllOf(HasSubstr("says layer 1 is full"), HasSubstr("'blk.1.indexer.proj.weight' is absent")));
}

TEST(GlmGguf, BadKeysAndTensorsAreNamed) {
  auto with = [](const char* k, MetaValue v) {
    MemorySource g = glm_gguf(glm());
    g.set(std::string("glm-dsa.") + k, std::move(v));
    return config_error(g);
  };
  EXPECT_THAT(with("expert_gating_func", int64_t{1}), HasSubstr("expert_gating_func = 1"));
  EXPECT_THAT(with("attention.head_count_kv", int64_t{2}), HasSubstr("head_count_kv = 2"));
  EXPECT_THAT(with("attention.key_length", int64_t{24}),
              HasSubstr("key_length = 24, expected kv_lora_rank + rope = 40"));
  EXPECT_THAT(with("rope.scaling.type", std::string("yarn")), HasSubstr("rope.scaling.type = 'yarn'"));
  EXPECT_THAT(with("attention.indexer.types", std::vector<int64_t>{1, 0}),
              HasSubstr("indexer.types has 2 entries, 4 layers"));
  MemorySource g = glm_gguf(glm());
  g.erase_meta("glm-dsa.attention.key_length_mla");
  EXPECT_THAT(config_error(g), HasSubstr("key_length_mla"));
  // a misshaped attn_k_b (untransposed) names the tensor and both shapes
  const ModelConfig c = glm();
  g = glm_gguf(c);
  const std::vector<float> zeros(static_cast<size_t>(c.n_head * c.mla_kv_rank * c.mla_d_nope));
  g.add_f32("blk.2.attn_k_b.weight", {c.mla_kv_rank, c.mla_d_nope, c.n_head}, zeros);
  EXPECT_THAT([&] { load_weights(g, ModelConfig::from_source(g)); },
              ::testing::ThrowsMessage<Error>(AllOf(HasSubstr("blk.2.attn_k_b.weight"), HasSubstr("{32, 16, 4}"),
                                                    HasSubstr("expected {16, 32, 4}"))));
}

// Interleaved pairs rotate like NEOX halves once the pairs are laid out as [evens | odds]:
// transformers' own formulation, which this checks the oracle's in-place form against.
TEST(GlmOps, RopePairsIsNeoxOnTheDeinterleavedLayout) {
  const int64_t n = 8;
  std::vector<float> x(n), d(n);
  for (int64_t i = 0; i < n; ++i) x[i] = 0.1f * static_cast<float>(i + 1) * (i % 2 ? -1.0f : 1.0f);
  for (int64_t i = 0; i < n / 2; ++i) {
    d[i] = x[2 * i];
    d[i + n / 2] = x[2 * i + 1];
  }
  oracle::ops::rope_pairs(x.data(), n, 37, 1e4);
  oracle::ops::rope_neox(d.data(), n, 37, 1e4);
  for (int64_t i = 0; i < n / 2; ++i) {
    EXPECT_EQ(x[2 * i], d[i]) << i;
    EXPECT_EQ(x[2 * i + 1], d[i + n / 2]) << i;
  }
  std::vector<float> y = {1, 2, 3, 4};
  oracle::ops::rope_pairs(y.data(), 2, 5, 1e4);  // only the first pair turns, by 5 radians
  EXPECT_FLOAT_EQ(y[0], static_cast<float>(std::cos(5.0) - 2 * std::sin(5.0)));
  EXPECT_FLOAT_EQ(y[1], static_cast<float>(2 * std::cos(5.0) + std::sin(5.0)));
  EXPECT_EQ(y[2], 3);
  EXPECT_EQ(y[3], 4);
}

TEST(GlmOps, LayerNormHandComputed) {
  const float x[4] = {1, 2, 3, 6}, w[4] = {1, 2, 1, 1}, b[4] = {0, 0, 1, -1};
  float y[4];
  oracle::ops::layernorm(x, w, b, 4, 0.0, y);  // mean 3, variance (4+1+0+9)/4 = 3.5
  const double s = 1.0 / std::sqrt(3.5);
  EXPECT_FLOAT_EQ(y[0], static_cast<float>(-2 * s));
  EXPECT_FLOAT_EQ(y[1], static_cast<float>(-2 * s));
  EXPECT_FLOAT_EQ(y[2], 1.0f);
  EXPECT_FLOAT_EQ(y[3], static_cast<float>(3 * s - 1));
}

TEST(GlmOps, SelectTopKeepsEverythingUpToKAndCutsTiesAtTheLowestPosition) {
  const std::vector<double> s = {0.5, 2.0, 0.5, -1.0, 0.5, 3.0};
  EXPECT_EQ(oracle::ops::select_top(s, 6), (std::vector<int32_t>{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(oracle::ops::select_top(s, 2), (std::vector<int32_t>{1, 5}));
  // three tied at 0.5 for the last two places: positions 0 and 2 win, in position order
  EXPECT_EQ(oracle::ops::select_top(s, 4), (std::vector<int32_t>{0, 1, 2, 5}));
}

TEST(GlmOps, GroupedRoutingHandComputed) {
  // 8 experts in 4 groups of 2. Logits chosen so sigmoid is easy to read back; the bias moves
  // expert 7 ahead for the choice but its weight stays its own sigmoid.
  const std::vector<float> logits = {2.0f, -2.0f, 0.0f, 0.5f, 1.0f, 1.0f, -3.0f, -1.0f};
  const std::vector<float> bias = {0, 0, 0, 0, 0, 0, 0, 1.0f};
  auto sg = [](double l) { return 1.0 / (1.0 + std::exp(-l)); };
  // group scores (sum of both choices): g0 .881+.119=1.0, g1 .5+.622=1.122, g2 .731+.731=1.462,
  // g3 .047+(.269+1)=1.316 -> best two groups: g2, g3; top-2 choices inside: 7 (1.269), then 4
  // (0.731, tied with 5: the lower index)
  const auto sel = oracle::ops::route_grouped(logits, bias, 2, 4, 2, true, 2.5);
  ASSERT_EQ(sel.size(), 2u);
  EXPECT_EQ(sel[0].first, 7);
  EXPECT_EQ(sel[1].first, 4);
  const double tot = sg(-1.0) + sg(1.0) + 1e-20;
  EXPECT_DOUBLE_EQ(sel[0].second, sg(-1.0) / tot * 2.5);
  EXPECT_DOUBLE_EQ(sel[1].second, sg(1.0) / tot * 2.5);
  // expert 0 has the best score overall, but its group loses: grouping really restricts
  const auto one_group = oracle::ops::route_grouped(logits, bias, 2, 4, 1, false, 1.0);
  EXPECT_EQ(one_group[0].first, 4);
  EXPECT_EQ(one_group[1].first, 5);
  EXPECT_DOUBLE_EQ(one_group[0].second, sg(1.0));
  // a single group is plain top-k of the biased choice
  const auto flat = oracle::ops::route_grouped(logits, bias, 3, 1, 1, false, 1.0);
  EXPECT_EQ(flat[0].first, 7);
  EXPECT_EQ(flat[1].first, 0);
  EXPECT_EQ(flat[2].first, 4);
}

// The indexer decides: with index_topk raised to the prompt length the selection keeps every
// token, and the logits move; a prompt no longer than index_topk is unaffected.
TEST(GlmOracle, TheIndexerSelectionChangesTheOutputOnlyPastIndexTopk) {
  ModelConfig c = glm();
  const ModelWeights w = random_weights(c, 11);
  ModelConfig dense = c;
  dense.dsa_topk = 64;
  const oracle::Model sparse_m = oracle::Model::from_weights(c, w), dense_m = oracle::Model::from_weights(dense, w);
  const auto p = testing_fixtures::prompt(40, c.n_vocab, 9);
  const std::span<const int32_t> all(p), first = all.first(static_cast<size_t>(c.dsa_topk));
  EXPECT_TRUE(testing_fixtures::bit_equal(sparse_m.forward_last(first), dense_m.forward_last(first)));
  EXPECT_GT(testing_fixtures::rel_err(sparse_m.forward_last(all), dense_m.forward_last(all)), 1e-3);
}

// mla_decode = latent (the absorbed form, ops::mla_attend_latent): one-token steps over the
// latent rows are the expanded steps up to the form's two f32 roundings (the latent query and
// output); calls of more than one token keep the expanded form (bitwise). The rows past index_topk
// attend to a selection that drops tokens.
TEST(GlmOracle, LatentDecodeIsTheExpandedFormUpToRounding) {
  const ModelConfig c = glm();
  const ModelWeights w = random_weights(c, 11);
  oracle::Options lo;
  lo.mla_decode = MlaDecode::latent;
  const oracle::Model ex = oracle::Model::from_weights(c, w), la = oracle::Model::from_weights(c, w, lo);
  const auto p = testing_fixtures::prompt(40, c.n_vocab, 9);
  oracle::Cache ce = ex.new_cache(40), cl = la.new_cache(40);
  EXPECT_TRUE(testing_fixtures::bit_equal(ex.prime(std::span(p).first(20), ce), la.prime(std::span(p).first(20), cl)));
  double worst = 0;
  int differing = 0;
  for (size_t i = 20; i < p.size(); ++i) {
    const std::vector<float> a = ex.decode_step(p[i], ce).logits, b = la.decode_step(p[i], cl).logits;
    worst = std::max(worst, testing_fixtures::rel_err(b, a));
    differing += !testing_fixtures::bit_equal(a, b);
  }
  EXPECT_GT(differing, 0) << "vacuous: the latent steps are the expanded ones bit for bit";
  EXPECT_LT(worst, 1e-5) << "the absorbed form is not the expanded math";
}

}  // namespace
}  // namespace memra
