// DeepSeek-V4's files: config.json as transformers 5.17's DeepseekV4Config reads it (its defaults,
// the release's legacy keys, the nested rope_parameters it saves) and refuses it; GGUF keys and
// tensor names as llama.cpp's deepseek4 loader reads them; and the names and conventions of every
// DeepSeek-V4 tensor in both formats, written and read back to the same bits of the oracle's
// logits. The comparison with transformers' own logits is the bank test's (docs/deepseek-v4.md).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "memra/config.h"
#include "memra/error.h"
#include "memra/fixture.h"
#include "memra/memory_source.h"
#include "memra/oracle.h"
#include "memra/quant.h"
#include "memra/raw_weights.h"
#include "memra/source.h"
#include "memra/testing/fixtures.h"
#include "memra/weights.h"

namespace memra {
namespace {

using ::testing::AllOf;
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

// The error loading `s` as `c` gives ("no error" when it loads).
std::string weights_error(const MemorySource& s, const ModelConfig& c) {
  try {
    load_weights(s, c);
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
  auto load_error = [&](const MemorySource& s) { return weights_error(s, c); };
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

// --- files as released (the release's names, FP8 with E8M0 block scales, FP4 experts) ---------

// D 256: the FP8 projections span two 128-blocks along their rows or their columns.
ModelConfig dsv4_wide() {
  return fixture::fixture_config(
      {.family = Family::DeepseekV4, .preset = fixture::Preset::Unit, .n_vocab = 512, .n_embd = 256});
}

const uint8_t* bytes_of(const MemorySource& s, const std::string& name) {
  return reinterpret_cast<const uint8_t*>(s.tensor(name).data.data());
}

// Every loaded value is its code times ITS block's scale, decoded here by hand from the release
// bytes: E4M3 codes over 128 x 128 E8M0 blocks, and E2M1 codes two per byte (the even column in
// the low nibble) with one E8M0 scale per 32 values of a row.
TEST(Dsv4Release, LoadsTheValuesItsCodesDecodeTo) {
  const ModelConfig c = dsv4_wide();
  const MemorySource rel = to_dsv4_release_source(c, random_weights(c, 3));
  const ModelWeights w = load_weights(rel, c);
  auto fp8 = [&](const Matrix& m, const std::string& base) {
    const uint8_t* q = bytes_of(rel, base + ".weight");
    const uint8_t* e = bytes_of(rel, base + ".scale");
    const int64_t bc = (m.cols + 127) / 128;
    std::vector<float> want(m.data.size());
    for (int64_t r = 0; r < m.rows; ++r)
      for (int64_t k = 0; k < m.cols; ++k)
        want[static_cast<size_t>(r * m.cols + k)] =
            e4m3_to_f32(q[r * m.cols + k]) * std::ldexp(1.0f, e[(r / 128) * bc + k / 128] - 127);
    EXPECT_TRUE(bit_equal(m.data, want)) << base;
    EXPECT_EQ(m.stored, DType::F8_E4M3) << base;
  };
  fp8(w.layers[0].dsv4->wq_a, "layers.0.attn.wq_a");  // [32, 256]: two column blocks
  fp8(w.layers[0].dsv4->wo_b, "layers.0.attn.wo_b");  // [256, 32]: two row blocks
  fp8(w.layers[2].compressor->wkv, "layers.2.attn.compressor.wkv");
  fp8(w.layers[2].dsv4_indexer->wq_b, "layers.2.attn.indexer.wq_b");
  fp8(w.layers[3].moe->shared.down, "layers.3.ffn.shared_experts.w2");
  auto fp4 = [&](const Matrix& m, const std::string& base) {
    const uint8_t* q = bytes_of(rel, base + ".weight");
    const uint8_t* e = bytes_of(rel, base + ".scale");
    std::vector<float> want(m.data.size());
    for (int64_t r = 0; r < m.rows; ++r)
      for (int64_t k = 0; k < m.cols; ++k) {
        const uint8_t code = (q[(r * m.cols + k) / 2] >> (4 * (k & 1))) & 0xf;
        const float v = e2m1_to_f32(code) * std::ldexp(1.0f, e[(r * m.cols + k) / 32] - 127);
        want[static_cast<size_t>(r * m.cols + k)] = v == 0 ? 0.0f : v;  // E2M1's -0 loads as +0 (no sum differs)
      }
    EXPECT_TRUE(bit_equal(m.data, want)) << base;
    EXPECT_EQ(m.stored, DType::MXFP4) << base;
  };
  fp4(w.layers[1].moe->experts[2].gate, "layers.1.ffn.experts.2.w1");
  fp4(w.layers[1].moe->experts[2].up, "layers.1.ffn.experts.2.w3");
  fp4(w.layers[3].moe->experts[0].down, "layers.3.ffn.experts.0.w2");
  // the values are not all one code: the scales and both nibbles are under test
  std::set<float> distinct(w.layers[1].moe->experts[2].gate.data.begin(), w.layers[1].moe->experts[2].gate.data.end());
  EXPECT_GE(distinct.size(), 10u);
}

// The release and transformers' names of the same rounded values give the same logits bitwise:
// every tensor of the release maps to the slot transformers' name fills. And the GPU's file-typed
// loader holds the FP8 and FP4 matrices as the BF16 values they decode to (E8M0 scales are powers
// of two), the same numbers.
TEST(Dsv4Release, LoadsLikeTransformersNamesOfTheSameValues) {
  const ModelConfig c = dsv4_wide();
  const MemorySource rel = to_dsv4_release_source(c, random_weights(c, 3));
  const ModelWeights w = load_weights(rel, c);
  const ModelWeights back = load_weights(to_hf_source(c, w), c);
  const auto a = logits(c, w), b = logits(c, back);
  for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(bit_equal(a[i], b[i])) << "position " << i;

  const RawWeights raw = load_raw_weights(rel, c);
  auto as_f32 = [](const RawMatrix& m) {
    std::vector<float> v(static_cast<size_t>(m.rows * m.cols));
    for (int64_t r = 0; r < m.rows; ++r)
      dequantize_row(m.type, m.data.data() + r * m.row_bytes(), v.data() + r * m.cols, m.cols);
    return v;
  };
  EXPECT_EQ(raw.layers[0].dsv4->wq_a.type, DType::BF16);
  EXPECT_TRUE(bit_equal(as_f32(raw.layers[0].dsv4->wq_a), w.layers[0].dsv4->wq_a.data));
  const RawMatrix& gate = raw.layers[1].moe->experts.gate;  // E slabs, expert e's rows in slab e
  EXPECT_EQ(gate.type, DType::BF16);
  const std::vector<float> g = as_f32(gate);
  for (int64_t e = 0; e < c.n_expert; ++e) {
    const std::vector<float>& want = w.layers[1].moe->experts[static_cast<size_t>(e)].gate.data;
    EXPECT_TRUE(bit_equal(std::vector<float>(g.begin() + e * static_cast<int64_t>(want.size()),
                                             g.begin() + (e + 1) * static_cast<int64_t>(want.size())),
                          want))
        << "expert " << e;
  }
}

// dsv4-flash-base keeps its E8M0 scales as powers of two in F32 containers; the MTP layers load
// and are not used.
TEST(Dsv4Release, F32ScaleContainersAndMtpTensors) {
  const ModelConfig c = dsv4_wide();
  const MemorySource rel = to_dsv4_release_source(c, random_weights(c, 3));
  const ModelWeights want = load_weights(rel, c);
  MemorySource f32 = to_dsv4_release_source(c, random_weights(c, 3));
  for (const std::string& n : rel.tensor_names()) {
    const TensorView& t = rel.tensor(n);
    if (!n.ends_with(".scale")) continue;
    std::vector<float> v(static_cast<size_t>(t.nelements()));
    for (size_t i = 0; i < v.size(); ++i) v[i] = std::ldexp(1.0f, static_cast<int>(bytes_of(rel, n)[i]) - 127);
    f32.add_f32(n, t.ne, v);
  }
  f32.add_f32("mtp.0.attn_norm.weight", {c.n_embd}, std::vector<float>(static_cast<size_t>(c.n_embd), 1.0f));
  const ModelWeights got = load_weights(f32, c);
  EXPECT_TRUE(bit_equal(got.layers[1].moe->experts[2].gate.data, want.layers[1].moe->experts[2].gate.data));
  EXPECT_TRUE(bit_equal(got.layers[0].dsv4->wo_b.data, want.layers[0].dsv4->wo_b.data));
}

TEST(Dsv4Release, BadTensorsAndConfigsAreNamed) {
  const ModelConfig c = dsv4_wide();
  const ModelWeights w = random_weights(c, 3);
  auto load_error = [&](const MemorySource& s) { return weights_error(s, c); };
  {  // an FP4 expert without its scales
    MemorySource s = to_dsv4_release_source(c, w);
    s.remove("layers.1.ffn.experts.3.w2.scale");
    EXPECT_THAT(load_error(s), HasSubstr("FP4 matrix 'layers.1.ffn.experts.3.w2.weight' without its scale tensor"));
  }
  {  // FP4 scales of another grid
    MemorySource s = to_dsv4_release_source(c, w);
    s.add("layers.1.ffn.experts.3.w1.scale", DType::F8_E8M0, {1, c.n_ff_exp},
          std::vector<std::byte>(static_cast<size_t>(c.n_ff_exp), std::byte{127}));
    EXPECT_THAT(load_error(s),
                HasSubstr("scale tensor 'layers.1.ffn.experts.3.w1.scale' has shape {1, 32}, expected {8, 32}"));
  }
  {  // FP8 scales of another grid: named under transformers' name, the two shapes given
    MemorySource s = to_dsv4_release_source(c, w);
    s.add("layers.0.attn.wq_a.scale", DType::F8_E8M0, {1, 1}, std::vector<std::byte>(1, std::byte{127}));
    EXPECT_THAT(load_error(s), AllOf(HasSubstr("model.layers.0.self_attn.q_a_proj.weight_scale_inv"),
                                     HasSubstr("shape {1, 1}, expected {2, 1}")));
  }
  {  // E8M0's NaN
    MemorySource s = to_dsv4_release_source(c, w);
    s.add("layers.0.attn.wkv.scale", DType::F8_E8M0, {2, 1}, std::vector<std::byte>(2, std::byte{0xff}));
    EXPECT_THAT(load_error(s), HasSubstr("scale tensor 'layers.0.attn.wkv.scale' value 0 is E8M0's NaN"));
  }
  {  // a scale beside a matrix that takes none
    MemorySource s = to_dsv4_release_source(c, w);
    s.add("head.scale", DType::F8_E8M0, {2, 4}, std::vector<std::byte>(8, std::byte{127}));
    EXPECT_THAT(load_error(s), HasSubstr("scale tensor 'head.scale' beside a bf16 matrix"));
  }
  {  // an F32 container holding a scale that is not a power of two
    MemorySource s = to_dsv4_release_source(c, w);
    const TensorView& t = s.tensor("layers.2.ffn.experts.0.w1.scale");
    s.add_f32("layers.2.ffn.experts.0.w1.scale", t.ne, std::vector<float>(static_cast<size_t>(t.nelements()), 0.75f));
    EXPECT_THAT(load_error(s), HasSubstr("value 0 = 0.75 is not a power of two"));
  }
  {  // quantization_config memra does not read
    MemorySource k = dsv4_keys();
    k.set("quantization_config.quant_method", std::string("fp8"));
    k.set("quantization_config.weight_block_size", std::vector<int64_t>{64, 64});
    EXPECT_THAT(config_error(k), HasSubstr("quantization_config.weight_block_size is not [128, 128]"));
    k.set("quantization_config.quant_method", std::string("awq"));
    EXPECT_THAT(config_error(k), HasSubstr("quantization_config.quant_method 'awq'"));
    MemorySource e = dsv4_keys();
    e.set("expert_dtype", std::string("int4"));
    EXPECT_THAT(config_error(e), HasSubstr("expert_dtype 'int4' (fp4 or fp8)"));
  }
}

// A directory as memra-mkfixture --release writes it: config.json with quantization_config and
// expert_dtype, read back to the same configuration and the same logits as its source.
TEST(Dsv4Release, ADirectoryLoadsToTheSameLogits) {
  const ModelConfig c = dsv4_wide();
  const ModelWeights w = random_weights(c, 5);
  const std::string dir = (std::filesystem::path(::testing::TempDir()) / "dsv4-release").string();
  fixture::write_fixture_dsv4_release_dir(dir, c, w, "");
  const auto src = open_weights(dir);
  const ModelConfig r = ModelConfig::from_source(*src);
  EXPECT_EQ(r, c) << config_difference(r, c);
  const auto a = logits(c, load_weights(to_dsv4_release_source(c, w), c)), b = logits(r, load_weights(*src, r));
  for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(bit_equal(a[i], b[i])) << "position " << i;
  std::filesystem::remove_all(dir);
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
