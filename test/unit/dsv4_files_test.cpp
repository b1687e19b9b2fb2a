// DeepSeek-V4's files: config.json as transformers 5.17's DeepseekV4Config reads it (its defaults,
// the release's legacy keys, the nested rope_parameters it saves) and refuses it; GGUF keys and
// tensor names as llama.cpp's deepseek4 loader reads them; and the names and conventions of every
// DeepSeek-V4 tensor in both formats, written and read back to the same bits of the oracle's
// logits. The comparison with transformers' own logits is the bank test's (docs/deepseek-v4.md).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "memra/config.h"
#include "memra/error.h"
#include "memra/fixture.h"
#include "memra/memory_source.h"
#include "memra/oracle.h"
#include "memra/source.h"
#include "memra/testing/fixtures.h"
#include "memra/weights.h"

namespace memra {
namespace {

using ::testing::HasSubstr;
using testing_fixtures::bit_equal;
using testing_fixtures::prompt;
using testing_fixtures::unit_config;

ModelConfig dsv4() { return unit_config(Family::DeepseekV4); }

// config.json keys of the unit DeepSeek-V4, with what a test changes.
MemorySource dsv4_keys() {
  MemorySource s(MetaStyle::Hf, "<dsv4 test config>");
  write_hf_keys(dsv4(), s);
  return s;
}

std::string config_error(const MemorySource& s) {
  try {
    ModelConfig::from_hf_keys(*memory_meta_keys(s)).validate();
  } catch (const Error& e) { return e.what(); }
  return "no error";
}

// Every position's logits of the oracle on `w`, single-threaded.
std::vector<std::vector<float>> logits(const ModelConfig& c, const ModelWeights& w) {
  oracle::Options o;
  o.threads = 1;
  return oracle::Model::from_weights(c, w, o).forward_all(prompt(24, c.n_vocab, 3));
}

TEST(Dsv4Config, HfKeysRoundTripThroughAFullSource) {
  const ModelConfig c = dsv4();
  const MemorySource h = to_hf_source(c, random_weights(c, 3));
  const ModelConfig r = ModelConfig::from_source(h);
  EXPECT_EQ(r, c) << config_difference(r, c);
  EXPECT_EQ(c.dsv4_attn, (std::vector<Dsv4Attn>{Dsv4Attn::Sliding, Dsv4Attn::Sliding, Dsv4Attn::Csa, Dsv4Attn::Hca}));
}

TEST(Dsv4Config, TransformersDefaultsAndTheReleasesLegacyKeys) {
  // What a release's config.json carries: compress_ratios (with the MTP layer's entry past the
  // main layers), num_hash_layers, qk_rope_head_dim, the YaRN settings under rope_scaling.
  MemorySource s(MetaStyle::Hf, "<legacy dsv4 config>");
  s.set("architectures", std::vector<std::string>{"DeepseekV4ForCausalLM"});
  for (auto [k, v] : std::vector<std::pair<const char*, int64_t>>{{"vocab_size", 1000},
                                                                  {"hidden_size", 64},
                                                                  {"num_hidden_layers", 5},
                                                                  {"num_attention_heads", 8},
                                                                  {"head_dim", 64},
                                                                  {"qk_rope_head_dim", 16},
                                                                  {"num_hash_layers", 2},
                                                                  {"compress_rate_csa", 2}})
    s.set(k, v);
  s.set("compress_ratios", std::vector<int64_t>{0, 128, 4, 128, 4, 0});
  s.set("rope_scaling.type", std::string("yarn"));
  s.set("rope_scaling.factor", 16.0);
  s.set("rope_scaling.original_max_position_embeddings", int64_t{65536});
  const ModelConfig c = ModelConfig::from_hf_keys(*memory_meta_keys(s));
  EXPECT_EQ(c.family, Family::DeepseekV4);
  EXPECT_EQ(c.dsv4_attn,
            (std::vector<Dsv4Attn>{Dsv4Attn::Sliding, Dsv4Attn::Hca, Dsv4Attn::Csa, Dsv4Attn::Hca, Dsv4Attn::Csa}));
  EXPECT_EQ(c.n_rot, 16);
  EXPECT_EQ(c.n_hash_layers, 2);
  EXPECT_EQ(c.csa_ratio, 2);
  EXPECT_EQ(c.hca_ratio, 128);
  EXPECT_EQ(c.yarn_factor, 16.0);
  EXPECT_EQ(c.yarn_orig_ctx, 65536);
  EXPECT_EQ(c.yarn_beta_fast, 32.0);
  EXPECT_EQ(c.yarn_beta_slow, 1.0);
  // DeepseekV4Config's defaults for what the file omits
  EXPECT_EQ(c.n_head_kv, 1);
  EXPECT_EQ(c.mla_q_rank, 1024);
  EXPECT_EQ(c.sliding_window, 128);
  EXPECT_EQ(c.o_groups, 8);
  EXPECT_EQ(c.o_rank, 1024);
  EXPECT_EQ(c.dsa_n_head, 64);
  EXPECT_EQ(c.dsa_head_dim, 128);
  EXPECT_EQ(c.dsa_topk, 512);
  EXPECT_EQ(c.hc_mult, 4);
  EXPECT_EQ(c.hc_iters, 20);
  EXPECT_EQ(c.n_expert, 256);
  EXPECT_EQ(c.n_expert_used, 6);
  EXPECT_EQ(c.n_ff_exp, 2048);
  EXPECT_EQ(c.n_ff_shexp, 2048);
  EXPECT_EQ(c.expert_weights_scale, 1.5);
  EXPECT_EQ(c.swiglu_limit, 10.0);
  EXPECT_EQ(c.rope_theta, 10000.0);
  EXPECT_EQ(c.compress_rope_theta, 160000.0);
  // no schedule at all: two HCA layers, then HCA and CSA alternating
  s.erase_meta("compress_ratios");
  EXPECT_EQ(ModelConfig::from_hf_keys(*memory_meta_keys(s)).dsv4_attn,
            (std::vector<Dsv4Attn>{Dsv4Attn::Hca, Dsv4Attn::Hca, Dsv4Attn::Hca, Dsv4Attn::Csa, Dsv4Attn::Hca}));
}

TEST(Dsv4Config, NestedRopeParametersAsTransformersSavesThem) {
  MemorySource s = dsv4_keys();
  for (const char* k :
       {"rope_parameters.rope_type", "rope_parameters.factor", "rope_parameters.original_max_position_embeddings",
        "rope_parameters.beta_fast", "rope_parameters.beta_slow", "rope_parameters.attention_factor", "rope_theta",
        "compress_rope_theta"})
    s.erase_meta(k);
  s.set("rope_parameters.main.rope_type", std::string("default"));
  s.set("rope_parameters.main.rope_theta", 20000.0);
  s.set("rope_parameters.compress.rope_type", std::string("yarn"));
  s.set("rope_parameters.compress.rope_theta", 40000.0);
  s.set("rope_parameters.compress.factor", 8.0);
  s.set("rope_parameters.compress.original_max_position_embeddings", int64_t{128});
  s.set("rope_parameters.compress.beta_fast", 16.0);
  s.set("rope_parameters.compress.attention_factor", 1.0);
  const ModelConfig c = ModelConfig::from_hf_keys(*memory_meta_keys(s));
  EXPECT_EQ(c.rope_theta, 20000.0);
  EXPECT_EQ(c.compress_rope_theta, 40000.0);
  EXPECT_EQ(c.yarn_factor, 8.0);
  EXPECT_EQ(c.yarn_orig_ctx, 128);
  EXPECT_EQ(c.yarn_beta_fast, 16.0);
  EXPECT_EQ(c.yarn_beta_slow, 1.0);
}

TEST(Dsv4Config, UnsupportedOrInconsistentFieldsAreNamed) {
  MemorySource s = dsv4_keys();
  s.set("layer_types",
        std::vector<std::string>{"sliding_attention", "full_attention", "sliding_attention", "sliding_attention"});
  EXPECT_THAT(config_error(s), HasSubstr("layer_types[1] = 'full_attention'"));
  s = dsv4_keys();
  s.set("layer_types", std::vector<std::string>{"sliding_attention"});
  EXPECT_THAT(config_error(s), HasSubstr("layer_types has 1 entries, num_hidden_layers 4"));
  s = dsv4_keys();
  s.set("mlp_layer_types", std::vector<std::string>{"moe", "hash_moe", "moe", "moe"});
  EXPECT_THAT(config_error(s), HasSubstr("mlp_layer_types[1] = 'hash_moe' after a 'moe' layer"));
  s = dsv4_keys();
  s.set("scoring_func", std::string("softmax"));
  EXPECT_THAT(config_error(s), HasSubstr("scoring_func 'softmax'"));
  s = dsv4_keys();
  s.set("norm_topk_prob", false);
  EXPECT_THAT(config_error(s), HasSubstr("norm_topk_prob = false"));
  s = dsv4_keys();
  s.set("n_shared_experts", int64_t{2});
  EXPECT_THAT(config_error(s), HasSubstr("n_shared_experts = 2"));
  s = dsv4_keys();
  s.set("rope_parameters.attention_factor", 1.277);
  EXPECT_THAT(config_error(s), HasSubstr("rope_parameters.attention_factor = 1.277"));
  s = dsv4_keys();
  s.set("rope_parameters.rope_type", std::string("longrope"));
  EXPECT_THAT(config_error(s), HasSubstr("rope_parameters.rope_type 'longrope'"));
  s = dsv4_keys();
  s.erase_meta("rope_parameters.original_max_position_embeddings");
  EXPECT_THAT(config_error(s), HasSubstr("original_max_position_embeddings"));
  s = dsv4_keys();
  s.set("num_key_value_heads", int64_t{2});
  EXPECT_THAT(config_error(s), HasSubstr("n_head_kv 2 (DeepSeek-V4 has one key-value head)"));
  s = dsv4_keys();
  s.set("o_groups", int64_t{3});
  EXPECT_THAT(config_error(s), HasSubstr("n_head 4 is not a multiple of o_groups 3"));
  s = dsv4_keys();
  s.set("compress_ratios", std::vector<int64_t>{0, 0, 8, 128});
  s.erase_meta("layer_types");
  EXPECT_THAT(config_error(s), HasSubstr("compress_ratios[2] = 8 (0, 4 or 128)"));
}

TEST(Dsv4Files, TensorsUnderTransformersNames) {
  const ModelConfig c = dsv4();
  const MemorySource h = to_hf_source(c, random_weights(c, 3));
  auto has = [&](const std::string& n) { return h.find(n) != nullptr; };
  EXPECT_TRUE(has("model.hc_head.hc_fn"));
  EXPECT_TRUE(has("model.layers.0.attn_hc.fn"));
  EXPECT_TRUE(has("model.layers.3.ffn_hc.scale"));
  EXPECT_TRUE(has("model.layers.0.self_attn.sinks"));
  EXPECT_TRUE(has("model.layers.1.self_attn.o_a_proj.weight"));
  // compressors: none on the sliding layers, the CSA one with its indexer, the HCA one without
  EXPECT_FALSE(has("model.layers.1.self_attn.compressor.kv_proj.weight"));
  EXPECT_TRUE(has("model.layers.2.self_attn.compressor.indexer.scorer.weights_proj.weight"));
  EXPECT_TRUE(has("model.layers.3.self_attn.compressor.position_bias"));
  EXPECT_FALSE(has("model.layers.3.self_attn.compressor.indexer.q_b_proj.weight"));
  // the CSA compressor's overlapping halves are twice as wide as the HCA one's
  EXPECT_EQ(h.find("model.layers.2.self_attn.compressor.position_bias")->ne,
            (std::vector<int64_t>{2 * c.head_dim, c.csa_ratio}));
  EXPECT_EQ(h.find("model.layers.3.self_attn.compressor.position_bias")->ne,
            (std::vector<int64_t>{c.head_dim, c.hca_ratio}));
  // layer 0 routes by its int64 table, the others by score with a bias
  const TensorView* t = h.find("model.layers.0.mlp.gate.tid2eid");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->type, DType::I64);
  EXPECT_EQ(t->ne, (std::vector<int64_t>{c.n_expert_used, c.n_vocab}));
  EXPECT_FALSE(has("model.layers.0.mlp.gate.e_score_correction_bias"));
  EXPECT_TRUE(has("model.layers.1.mlp.gate.e_score_correction_bias"));
  EXPECT_FALSE(has("model.layers.1.mlp.gate.tid2eid"));
  EXPECT_TRUE(has("model.layers.1.mlp.experts.gate_up_proj"));
  EXPECT_TRUE(has("model.layers.1.mlp.shared_experts.down_proj.weight"));
}

TEST(Dsv4Files, WeightsComeBackToTheSameLogitsBitwise) {
  const ModelConfig c = dsv4();
  const ModelWeights w = random_weights(c, 4);
  const MemorySource h = to_hf_source(c, w);
  const ModelWeights back = load_weights(h, ModelConfig::from_source(h));
  ASSERT_TRUE(back.hc_head.has_value());
  EXPECT_EQ(back.layers[0].moe->tid2eid, w.layers[0].moe->tid2eid);
  const auto a = logits(c, w), b = logits(c, back);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(bit_equal(a[i], b[i])) << "position " << i;
}

TEST(Dsv4Files, ASafetensorsDirectoryLoadsToTheSameLogits) {
  const ModelConfig c = fixture::fixture_config({.family = Family::DeepseekV4, .preset = fixture::Preset::Tiny});
  const ModelWeights w = fixture::fixture_weights(c, 7);
  const std::string dir = (std::filesystem::path(::testing::TempDir()) / "dsv4-hf").string();
  fixture::write_fixture_hf_dir(dir, c, w, "");
  const auto src = open_weights(dir);
  const ModelConfig r = ModelConfig::from_source(*src);
  EXPECT_EQ(r, c) << config_difference(r, c);
  const auto a = logits(c, w), b = logits(r, load_weights(*src, r));
  for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(bit_equal(a[i], b[i])) << "position " << i;
  std::filesystem::remove_all(dir);
}

TEST(Dsv4Files, BadTensorsAreNamed) {
  const ModelConfig c = dsv4();
  const ModelWeights w = random_weights(c, 3);
  auto load_error = [&](const MemorySource& s) {
    try {
      load_weights(s, c);
    } catch (const Error& e) { return std::string(e.what()); }
    return std::string("no error");
  };
  {  // an expert id past the experts
    ModelWeights bad = w;
    bad.layers[0].moe->tid2eid[2 * c.n_expert_used + 1] = static_cast<float>(c.n_expert);
    EXPECT_THAT(load_error(to_hf_source(c, bad)),
                HasSubstr("tensor 'model.layers.0.mlp.gate.tid2eid': token 2 slot 1 names expert 4 (experts 0..3)"));
  }
  {  // a missing indexer tensor
    MemorySource h = to_hf_source(c, w);
    h.remove("model.layers.2.self_attn.compressor.indexer.q_b_proj.weight");
    EXPECT_THAT(load_error(h),
                HasSubstr("tensor 'model.layers.2.self_attn.compressor.indexer.q_b_proj.weight' missing"));
  }
  {  // the HCA position bias read as the CSA one's width
    ModelConfig other = c;
    other.dsv4_attn[3] = Dsv4Attn::Csa;
    const MemorySource h = to_hf_source(c, w);
    try {
      load_weights(h, other);
      ADD_FAILURE() << "no error";
    } catch (const Error& e) {
      EXPECT_THAT(std::string(e.what()), HasSubstr("model.layers.3.self_attn.compressor.kv_proj.weight': shape"));
    }
  }
}

// --- GGUF (llama.cpp deepseek4) ---------------------------------------------------------------

MemorySource dsv4_gguf() { return to_gguf_source(dsv4(), random_weights(dsv4(), 3)); }

std::string gguf_config_error(const MemorySource& s) {
  try {
    ModelConfig::from_gguf_keys(*memory_meta_keys(s)).validate();
  } catch (const Error& e) { return e.what(); }
  return "no error";
}

TEST(Dsv4Gguf, KeysAsLlamaCppsLoaderReadsThem) {
  const ModelConfig c = dsv4();
  const MemorySource g = dsv4_gguf();
  const ModelConfig r = ModelConfig::from_source(g);
  EXPECT_EQ(r, c) << config_difference(r, c);
  auto meta = [&](const char* k) { return *g.meta(std::string("deepseek4.") + k); };
  EXPECT_EQ(meta("expert_gating_func"), MetaValue(int64_t{4}));  // llama.cpp: sqrtsoftplus
  EXPECT_EQ(meta("attention.compress_ratios"), MetaValue(std::vector<int64_t>{0, 0, 4, c.hca_ratio}));
  EXPECT_EQ(meta("hash_layer_count"), MetaValue(c.n_hash_layers));
  EXPECT_EQ(meta("attention.head_count_kv"), MetaValue(int64_t{1}));
  EXPECT_EQ(meta("rope.dimension_count"), MetaValue(c.n_rot));
  EXPECT_EQ(meta("swiglu_clamp_exp"), MetaValue(std::vector<double>(4, c.swiglu_limit)));
  EXPECT_EQ(meta("hyper_connection.count"), MetaValue(c.hc_mult));
  // A one-number clamp (llama.cpp reads either form) and the MTP block of llama.cpp's --mtp file,
  // which plain decoding does not load, read back to the same model.
  MemorySource h = dsv4_gguf();
  h.set("deepseek4.swiglu_clamp_exp", c.swiglu_limit);
  h.set("deepseek4.block_count", c.n_layer + 1);
  h.set("deepseek4.nextn_predict_layers", int64_t{1});
  const ModelConfig r2 = ModelConfig::from_gguf_keys(*memory_meta_keys(h));
  EXPECT_EQ(r2, c) << config_difference(r2, c);
}

TEST(Dsv4Gguf, TensorsUnderLlamaCppNames) {
  const ModelConfig c = dsv4();
  const MemorySource g = dsv4_gguf();
  auto ne = [&](const std::string& n) {
    const TensorView* t = g.find(n);
    return t ? t->ne : std::vector<int64_t>{-1};
  };
  EXPECT_EQ(ne("output_hc_fn.weight"), (std::vector<int64_t>{c.hc_mult * c.n_embd, c.hc_mult}));
  EXPECT_EQ(ne("blk.0.hc_attn_fn.weight"), (std::vector<int64_t>{c.hc_mult * c.n_embd, (2 + c.hc_mult) * c.hc_mult}));
  EXPECT_EQ(ne("blk.0.attn_sinks.weight"), (std::vector<int64_t>{c.n_head}));
  EXPECT_EQ(ne("blk.0.attn_kv.weight"), (std::vector<int64_t>{c.n_embd, c.head_dim}));
  EXPECT_EQ(ne("blk.0.attn_kv_a_norm.weight"), (std::vector<int64_t>{c.head_dim}));
  EXPECT_EQ(ne("blk.0.attn_output_a.weight"),
            (std::vector<int64_t>{c.n_head * c.head_dim / c.o_groups, c.o_groups * c.o_rank}));
  EXPECT_EQ(ne("blk.0.ffn_norm.weight"), (std::vector<int64_t>{c.n_embd}));
  // the CSA layer: its compressor (overlapping halves, twice as wide) and its indexer's
  EXPECT_EQ(ne("blk.2.attn_compressor_ape.weight"), (std::vector<int64_t>{2 * c.head_dim, c.csa_ratio}));
  EXPECT_EQ(ne("blk.2.indexer_compressor_kv.weight"), (std::vector<int64_t>{c.n_embd, 2 * c.dsa_head_dim}));
  EXPECT_EQ(ne("blk.2.indexer.attn_q_b.weight"), (std::vector<int64_t>{c.mla_q_rank, c.dsa_n_head * c.dsa_head_dim}));
  EXPECT_EQ(ne("blk.2.indexer.proj.weight"), (std::vector<int64_t>{c.n_embd, c.dsa_n_head}));
  // the HCA layer: a compressor, no indexer; the sliding layers: neither
  EXPECT_EQ(ne("blk.3.attn_compressor_ape.weight"), (std::vector<int64_t>{c.head_dim, c.hca_ratio}));
  EXPECT_EQ(g.find("blk.3.indexer.proj.weight"), nullptr);
  EXPECT_EQ(g.find("blk.1.attn_compressor_kv.weight"), nullptr);
  // layer 0 routes by its table, I32 as llama.cpp's converter writes it; the others by score
  const TensorView* t = g.find("blk.0.ffn_gate_tid2eid.weight");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->type, DType::I32);
  EXPECT_EQ(t->ne, (std::vector<int64_t>{c.n_expert_used, c.n_vocab}));
  EXPECT_EQ(g.find("blk.0.exp_probs_b.bias"), nullptr);
  EXPECT_EQ(ne("blk.1.exp_probs_b.bias"), (std::vector<int64_t>{c.n_expert}));
  EXPECT_EQ(ne("blk.1.ffn_gate_exps.weight"), (std::vector<int64_t>{c.n_embd, c.n_ff_exp, c.n_expert}));
  EXPECT_EQ(ne("blk.1.ffn_down_shexp.weight"), (std::vector<int64_t>{c.n_ff_exp, c.n_embd}));
}

TEST(Dsv4Gguf, AGgufFileLoadsToTheSafetensorsLogitsBitwise) {
  const ModelConfig c = fixture::fixture_config({.family = Family::DeepseekV4, .preset = fixture::Preset::Tiny});
  const ModelWeights w = fixture::fixture_weights(c, 7);
  const std::filesystem::path dir = std::filesystem::path(::testing::TempDir()) / "dsv4-gguf";
  std::filesystem::create_directories(dir);
  const std::string gguf = (dir / "m.gguf").string(), hf = (dir / "hf").string();
  fixture::write_fixture_gguf(gguf, c, w, nullptr, DType::F32, "dsv4");
  fixture::write_fixture_hf_dir(hf, c, w, "");
  const auto g = open_weights(gguf), h = open_weights(hf);
  const ModelConfig rg = ModelConfig::from_source(*g);
  ModelConfig want = c;  // GGUF keeps float keys as f32
  want.rms_eps = static_cast<float>(c.rms_eps);
  want.hc_eps = static_cast<float>(c.hc_eps);
  EXPECT_EQ(rg, want) << config_difference(rg, want);
  const auto a = logits(rg, load_weights(*g, rg)), b = logits(c, load_weights(*h, c));
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(bit_equal(a[i], b[i])) << "position " << i;
  std::filesystem::remove_all(dir);
}

TEST(Dsv4Gguf, KeysItCannotRunAreNamed) {
  auto with = [](const char* key, MetaValue v) {
    MemorySource s = dsv4_gguf();
    s.set(std::string("deepseek4.") + key, std::move(v));
    return gguf_config_error(s);
  };
  EXPECT_THAT(with("expert_gating_func", int64_t{2}), HasSubstr("deepseek4.expert_gating_func = 2"));
  EXPECT_THAT(with("expert_shared_count", int64_t{2}), HasSubstr("deepseek4.expert_shared_count = 2"));
  EXPECT_THAT(with("expert_weights_norm", false), HasSubstr("deepseek4.expert_weights_norm = false"));
  EXPECT_THAT(with("attention.head_count_kv", int64_t{4}), HasSubstr("deepseek4.attention.head_count_kv = 4"));
  EXPECT_THAT(with("attention.value_length", int64_t{16}), HasSubstr("deepseek4.attention.value_length = 16"));
  EXPECT_THAT(with("attention.compress_ratios", std::vector<int64_t>{0, 4}),
              HasSubstr("deepseek4.attention.compress_ratios has 2 entries for 4 layers"));
  EXPECT_THAT(with("attention.compress_ratios", std::vector<int64_t>{0, 8, 4, 128}),
              HasSubstr("deepseek4.attention.compress_ratios[3] = 128 after HCA layers of 8"));
  EXPECT_THAT(with("hash_layer_count", int64_t{9}), HasSubstr("deepseek4.hash_layer_count = 9"));
  EXPECT_THAT(with("swiglu_clamp_exp", std::vector<double>{10, 10, 7, 10}),
              HasSubstr("deepseek4.swiglu_clamp_exp[2] = 7 differs from [0] = 10"));
  EXPECT_THAT(with("swiglu_clamp_shexp", std::vector<double>{5, 5, 5, 5}),
              HasSubstr("deepseek4.swiglu_clamp_shexp = 5 differs from swiglu_clamp_exp 10"));
  EXPECT_THAT(with("rope.scaling.type", std::string("linear")), HasSubstr("deepseek4.rope.scaling.type = 'linear'"));
  // A model whose CSA ratio is not 4 has no llama.cpp form: compress_ratios tell CSA by it.
  ModelConfig c = dsv4();
  c.csa_ratio = 8;
  try {
    to_gguf_source(c, random_weights(c, 3));
    ADD_FAILURE() << "no error";
  } catch (const Error& e) { EXPECT_THAT(std::string(e.what()), HasSubstr("compressed-sparse ratio of 8")); }
}

}  // namespace
}  // namespace memra
