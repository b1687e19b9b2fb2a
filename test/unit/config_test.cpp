// ModelConfig from llama.cpp GGUF keys and HF config keys: every field, the layer-pattern rules,
// the shapes llama.cpp rejects (d_k != d_v, dense layers among MoE), and errors that name the
// key or architecture. Keys are written by hand here (not by write_*_keys) so the parser is
// checked against the documented key names, then round trips check the writers.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "memra/config.h"
#include "memra/error.h"
#include "memra/gguf.h"
#include "memra/hf_config.h"
#include "memra/memory_source.h"
#include "memra/testing/fixtures.h"
#include "memra/weights.h"

namespace memra {
namespace {

using ::testing::HasSubstr;
using testing_fixtures::unit_config;

MemorySource gguf_next_keys() {
  MemorySource s(MetaStyle::Gguf, "next.gguf");
  s.set("general.architecture", std::string("qwen3next"));
  s.set("qwen3next.block_count", int64_t{4});
  s.set("qwen3next.context_length", int64_t{262144});
  s.set("qwen3next.embedding_length", int64_t{64});
  s.set("qwen3next.vocab_size", int64_t{128});
  s.set("qwen3next.feed_forward_length", int64_t{96});
  s.set("qwen3next.attention.head_count", int64_t{4});
  s.set("qwen3next.attention.head_count_kv", int64_t{2});
  s.set("qwen3next.attention.key_length", int64_t{16});
  s.set("qwen3next.attention.value_length", int64_t{16});
  s.set("qwen3next.attention.layer_norm_rms_epsilon", 1e-6);
  s.set("qwen3next.rope.dimension_count", int64_t{4});
  s.set("qwen3next.rope.freq_base", 1e7);
  s.set("qwen3next.full_attention_interval", int64_t{4});
  s.set("qwen3next.ssm.conv_kernel", int64_t{4});
  s.set("qwen3next.ssm.state_size", int64_t{8});
  s.set("qwen3next.ssm.group_count", int64_t{2});
  s.set("qwen3next.ssm.time_step_rank", int64_t{4});
  s.set("qwen3next.ssm.inner_size", int64_t{48});
  s.set("qwen3next.expert_count", int64_t{4});
  s.set("qwen3next.expert_used_count", int64_t{2});
  s.set("qwen3next.expert_feed_forward_length", int64_t{32});
  s.set("qwen3next.expert_shared_feed_forward_length", int64_t{48});
  return s;
}

TEST(ConfigGguf, Qwen3NextFieldsFromLlamaCppKeys) {
  MemorySource s = gguf_next_keys();
  ModelConfig c = ModelConfig::from_gguf_keys(*memory_meta_keys(s));
  EXPECT_EQ(c.family, Family::Qwen3Next);
  EXPECT_EQ(c.n_layer, 4);
  EXPECT_EQ(c.n_embd, 64);
  EXPECT_EQ(c.n_vocab, 128);
  EXPECT_EQ(c.head_dim, 16);
  EXPECT_EQ(c.n_rot, 4);
  EXPECT_EQ(c.rope_theta, 1e7);
  // (i+1) % 4 != 0 -> linear: [L, L, L, F]
  EXPECT_EQ(c.layer_kind, (std::vector<LayerKind>{LayerKind::Linear, LayerKind::Linear,
                                                  LayerKind::Linear, LayerKind::Attention}));
  // key head dim is ssm.state_size; value head dim is inner_size / time_step_rank = 48 / 4.
  EXPECT_EQ(c.ssm_d_k, 8);
  EXPECT_EQ(c.ssm_d_v, 12);
  EXPECT_EQ(c.ssm_n_k_heads, 2);
  EXPECT_EQ(c.ssm_n_v_heads, 4);
  EXPECT_EQ(c.n_expert, 4);
  EXPECT_EQ(c.n_expert_used, 2);
  EXPECT_EQ(c.n_ff_exp, 32);
  EXPECT_EQ(c.n_ff_shexp, 48);
  EXPECT_TRUE(c.norm_topk);
  EXPECT_EQ(c.n_mtp, 0);
  for (FfnKind k : c.ffn_kind) EXPECT_EQ(k, FfnKind::Moe);
}

TEST(ConfigGguf, RecurrentLayersArrayOverridesIntervalAndNextnIsAppended) {
  MemorySource s = gguf_next_keys();
  s.set("qwen3next.block_count", int64_t{5});
  s.set("qwen3next.nextn_predict_layers", int64_t{1});
  s.set("qwen3next.attention.recurrent_layers", std::vector<int64_t>{0, 1, 0, 1, 0});
  ModelConfig c = ModelConfig::from_gguf_keys(*memory_meta_keys(s));
  EXPECT_EQ(c.n_layer, 4);  // the MTP block comes after the main layers
  EXPECT_EQ(c.n_mtp, 1);
  EXPECT_EQ(c.layer_kind, (std::vector<LayerKind>{LayerKind::Attention, LayerKind::Linear,
                                                  LayerKind::Attention, LayerKind::Linear}));
}

TEST(ConfigGguf, Qwen3DefaultsRotToHeadDimAndHeadDimToEmbdOverHeads) {
  MemorySource s(MetaStyle::Gguf, "q3.gguf");
  s.set("general.architecture", std::string("qwen3"));
  s.set("qwen3.block_count", int64_t{2});
  s.set("qwen3.embedding_length", int64_t{64});
  s.set("qwen3.feed_forward_length", int64_t{96});
  s.set("qwen3.attention.head_count", int64_t{4});
  s.set("qwen3.attention.layer_norm_rms_epsilon", 1e-6);
  ModelConfig c = ModelConfig::from_gguf_keys(*memory_meta_keys(s));
  EXPECT_EQ(c.family, Family::Qwen3);
  EXPECT_EQ(c.n_head_kv, 4);   // head_count_kv defaults to head_count
  EXPECT_EQ(c.head_dim, 16);   // n_embd / n_head without key_length
  EXPECT_EQ(c.n_rot, 16);      // rope.dimension_count defaults to head_dim
  EXPECT_EQ(c.rope_theta, 10000.0);
}

TEST(ConfigGguf, UnknownArchitectureIsNamed) {
  MemorySource s = gguf_next_keys();
  s.set("general.architecture", std::string("llama"));
  try {
    ModelConfig::from_gguf_keys(*memory_meta_keys(s));
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("'llama'"));
    EXPECT_THAT(e.what(), HasSubstr("next.gguf"));
  }
}

TEST(ConfigGguf, MissingKeyIsNamed) {
  MemorySource s = gguf_next_keys();
  s.erase_meta("qwen3next.ssm.state_size");
  EXPECT_THAT([&] { ModelConfig::from_gguf_keys(*memory_meta_keys(s)); },
              ::testing::ThrowsMessage<Error>(HasSubstr("qwen3next.ssm.state_size")));
}

TEST(ConfigHf, Qwen3NextMlpOnlyLayersAndSparseStep) {
  MemorySource s(MetaStyle::Hf, "next-dir");
  s.set("architectures", std::vector<std::string>{"Qwen3NextForCausalLM"});
  s.set("vocab_size", int64_t{128});
  s.set("hidden_size", int64_t{64});
  s.set("num_hidden_layers", int64_t{6});
  s.set("num_attention_heads", int64_t{4});
  s.set("num_key_value_heads", int64_t{2});
  s.set("head_dim", int64_t{16});
  s.set("intermediate_size", int64_t{96});
  s.set("linear_key_head_dim", int64_t{8});
  s.set("linear_value_head_dim", int64_t{12});
  s.set("linear_num_key_heads", int64_t{2});
  s.set("linear_num_value_heads", int64_t{4});
  s.set("num_experts", int64_t{4});
  s.set("num_experts_per_tok", int64_t{2});
  s.set("moe_intermediate_size", int64_t{32});
  s.set("shared_expert_intermediate_size", int64_t{48});
  s.set("norm_topk_prob", false);
  s.set("decoder_sparse_step", int64_t{2});
  s.set("mlp_only_layers", std::vector<int64_t>{3});
  s.set("rope_parameters.rope_theta", 1e7);
  s.set("rope_parameters.partial_rotary_factor", 0.25);
  ModelConfig c = ModelConfig::from_hf_keys(*memory_meta_keys(s));
  // MoE iff i not in mlp_only_layers and (i+1) % step == 0: layers 1 and 5 (3 is excluded).
  std::vector<FfnKind> want(6, FfnKind::Dense);
  want[1] = want[5] = FfnKind::Moe;
  EXPECT_EQ(c.ffn_kind, want);
  EXPECT_FALSE(c.norm_topk);
  EXPECT_EQ(c.n_rot, 4);  // int(16 * 0.25)
  EXPECT_EQ(c.rope_theta, 1e7);
  EXPECT_EQ(c.ssm_conv_kernel, 4);  // class default
  // default layer_types: interval 4 -> [L, L, L, F, L, L]
  EXPECT_EQ(c.layer_kind[3], LayerKind::Attention);
  EXPECT_EQ(c.layer_kind[4], LayerKind::Linear);
  EXPECT_NO_THROW(c.validate());
}

TEST(ConfigHf, Qwen35MoeAlwaysRenormalisesAndReadsLayerTypes) {
  MemorySource s(MetaStyle::Hf, "q35moe");
  s.set("model_type", std::string("qwen3_5_moe_text"));
  s.set("vocab_size", int64_t{128});
  s.set("hidden_size", int64_t{64});
  s.set("num_hidden_layers", int64_t{2});
  s.set("num_attention_heads", int64_t{4});
  s.set("num_key_value_heads", int64_t{2});
  s.set("head_dim", int64_t{16});
  s.set("layer_types", std::vector<std::string>{"full_attention", "linear_attention"});
  s.set("num_experts", int64_t{4});
  s.set("num_experts_per_tok", int64_t{2});
  s.set("moe_intermediate_size", int64_t{32});
  s.set("norm_topk_prob", false);  // ignored: Qwen3.5-MoE's router always renormalises
  ModelConfig c = ModelConfig::from_hf_keys(*memory_meta_keys(s));
  EXPECT_EQ(c.family, Family::Qwen35Moe);
  EXPECT_TRUE(c.norm_topk);
  EXPECT_EQ(c.layer_kind, (std::vector<LayerKind>{LayerKind::Attention, LayerKind::Linear}));
  EXPECT_EQ(c.n_ff, 0);
  EXPECT_EQ(c.n_ff_shexp, 0);
}

TEST(ConfigHf, ArchitectureNamesAndUnknownArchitecture) {
  MemorySource s(MetaStyle::Hf, "dir");
  s.set("architectures", std::vector<std::string>{"Qwen3_5ForConditionalGeneration"});
  EXPECT_THAT([&] { ModelConfig::from_hf_keys(*memory_meta_keys(s)); },
              ::testing::ThrowsMessage<Error>(HasSubstr("vocab_size")));  // got past the family
  s.set("architectures", std::vector<std::string>{"LlamaForCausalLM"});
  EXPECT_THAT([&] { ModelConfig::from_hf_keys(*memory_meta_keys(s)); },
              ::testing::ThrowsMessage<Error>(HasSubstr("'LlamaForCausalLM'")));
}

TEST(ConfigValidate, InconsistentDimensionsNameTheField) {
  ModelConfig c = unit_config(Family::Qwen35);
  c.n_head_kv = 3;
  EXPECT_THAT([&] { c.validate(); }, ::testing::ThrowsMessage<Error>(HasSubstr("n_head_kv 3")));
  c = unit_config(Family::Qwen35);
  c.n_rot = 5;
  EXPECT_THAT([&] { c.validate(); }, ::testing::ThrowsMessage<Error>(HasSubstr("n_rot 5")));
  c = unit_config(Family::Qwen35);
  c.ssm_n_v_heads = 3;
  EXPECT_THAT([&] { c.validate(); }, ::testing::ThrowsMessage<Error>(HasSubstr("value heads 3")));
  c = unit_config(Family::Qwen35Moe);
  c.n_expert_used = 5;
  EXPECT_THAT([&] { c.validate(); }, ::testing::ThrowsMessage<Error>(HasSubstr("n_expert_used 5")));
}

class ConfigRoundTrip : public ::testing::TestWithParam<Family> {};

TEST_P(ConfigRoundTrip, GgufAndHfKeysReadBackEqual) {
  ModelConfig c = unit_config(GetParam());
  c.validate();
  // through a full source, so from_source's completion from tensors takes part
  ModelWeights w = random_weights(c, 3);
  MemorySource g = to_gguf_source(c, w);
  MemorySource h = to_hf_source(c, w);
  ModelConfig cg = ModelConfig::from_source(g);
  ModelConfig ch = ModelConfig::from_source(h);
  EXPECT_TRUE(cg == c) << cg.summary() << "\nvs\n" << c.summary();
  EXPECT_TRUE(ch == c) << ch.summary() << "\nvs\n" << c.summary();
}

INSTANTIATE_TEST_SUITE_P(Families, ConfigRoundTrip,
                         ::testing::Values(Family::Qwen3, Family::Qwen3Next, Family::Qwen35, Family::Qwen35Moe),
                         [](const auto& i) { return std::string(family_arch(i.param)); });

TEST(ConfigSource, GgufTiedOutputAndDenseLayerDetectedFromTensors) {
  ModelConfig c = unit_config(Family::Qwen3Next);
  c.tied_embeddings = true;
  MemorySource g = to_gguf_source(c, random_weights(c, 4));
  ASSERT_EQ(g.find("output.weight"), nullptr);
  ASSERT_EQ(g.find("blk.2.ffn_gate_inp.weight"), nullptr);
  ModelConfig r = ModelConfig::from_source(g);
  EXPECT_TRUE(r.tied_embeddings);
  EXPECT_EQ(r.ffn_kind[2], FfnKind::Dense);
  EXPECT_EQ(r.ffn_kind[1], FfnKind::Moe);
}

TEST(ConfigSource, HfMtpCountDroppedWhenNotSaved) {
  ModelConfig c = unit_config(Family::Qwen35);
  c.n_mtp = 1;
  MemorySource h = to_hf_source(c, random_weights(c, 5));
  EXPECT_EQ(ModelConfig::from_source(h).n_mtp, 1);
  h.remove("mtp.fc.weight");
  EXPECT_EQ(ModelConfig::from_source(h).n_mtp, 0);  // transformers' save_pretrained drops mtp.*
}

// Through the real GGUF writer/reader: the adapter reads llama.cpp's bool-array
// attention.recurrent_layers and unsigned/float key types.
TEST(ConfigGgufFile, ReadsWriterOutput) {
  GgufWriter w;
  w.set_string("general.architecture", "qwen35");
  w.set_u32("qwen35.block_count", 2);
  w.set_u32("qwen35.embedding_length", 64);
  w.set_u32("qwen35.feed_forward_length", 96);
  w.set_u32("qwen35.attention.head_count", 4);
  w.set_u32("qwen35.attention.head_count_kv", 2);
  w.set_u32("qwen35.attention.key_length", 16);
  w.set_f32("qwen35.attention.layer_norm_rms_epsilon", 1e-6f);
  w.set_u32("qwen35.rope.dimension_count", 4);
  w.set_f32("qwen35.rope.freq_base", 1e7f);
  w.set_bool_array("qwen35.attention.recurrent_layers", {true, false});
  w.set_u32("qwen35.ssm.conv_kernel", 4);
  w.set_u32("qwen35.ssm.state_size", 8);
  w.set_u32("qwen35.ssm.group_count", 2);
  w.set_u32("qwen35.ssm.time_step_rank", 4);
  w.set_u32("qwen35.ssm.inner_size", 48);
  std::vector<float> emb(64 * 32, 0.0f);
  w.add_tensor("token_embd.weight", DType::F32, {64, 32},
               std::as_bytes(std::span<const float>(emb)));
  auto f = GgufFile::from_bytes(w.to_bytes(), "w.gguf");
  ModelConfig c = ModelConfig::from_source(*f);
  EXPECT_EQ(c.family, Family::Qwen35);
  EXPECT_EQ(c.layer_kind, (std::vector<LayerKind>{LayerKind::Linear, LayerKind::Attention}));
  EXPECT_EQ(c.n_vocab, 32);  // from token_embd, as no vocab_size key
  EXPECT_EQ(c.ssm_d_v, 12);
  EXPECT_TRUE(c.tied_embeddings);
  EXPECT_FLOAT_EQ(static_cast<float>(c.rope_theta), 1e7f);
}

// Through the real config.json parser: a VLM-style Qwen3.5 config nests the text fields.
TEST(ConfigHfJson, TextConfigNestingAndRopeParameters) {
  const char* json = R"({
    "architectures": ["Qwen3_5MoeForConditionalGeneration"],
    "tie_word_embeddings": false,
    "text_config": {
      "model_type": "qwen3_5_moe_text", "vocab_size": 248320, "hidden_size": 2048,
      "num_hidden_layers": 40, "num_attention_heads": 16, "num_key_value_heads": 2,
      "head_dim": 256, "rms_norm_eps": 1e-6, "max_position_embeddings": 262144,
      "full_attention_interval": 4, "linear_conv_kernel_dim": 4, "linear_key_head_dim": 128,
      "linear_value_head_dim": 128, "linear_num_key_heads": 16, "linear_num_value_heads": 32,
      "num_experts": 256, "num_experts_per_tok": 8, "moe_intermediate_size": 512,
      "shared_expert_intermediate_size": 512, "mtp_num_hidden_layers": 1,
      "rope_parameters": {"rope_type": "default", "rope_theta": 10000000, "partial_rotary_factor": 0.25,
                          "mrope_section": [11, 11, 10], "mrope_interleaved": true}
    }
  })";
  ModelConfig c = ModelConfig::from_hf(HfConfig::parse(json, "config.json"));
  EXPECT_EQ(c.family, Family::Qwen35Moe);
  EXPECT_EQ(c.n_layer, 40);
  EXPECT_EQ(c.n_rot, 64);
  EXPECT_EQ(c.rope_theta, 1e7);
  EXPECT_EQ(c.n_expert, 256);
  EXPECT_EQ(c.layer_kind[3], LayerKind::Attention);
  EXPECT_EQ(c.layer_kind[38], LayerKind::Linear);
  EXPECT_EQ(c.n_mtp, 1);
  EXPECT_NO_THROW(c.validate());
}

// == and its explanation come from one field list: every difference is named with both values,
// and equal configs explain nothing (a test failing on == prints this instead of two structs).
TEST(ConfigDifference, NamesEachDifferingFieldWithBothValues) {
  ModelConfig a;
  a.family = Family::Qwen35;
  a.n_ff = 128;
  a.rms_eps = 1e-6;
  a.ffn_kind = {FfnKind::Dense, FfnKind::Moe};
  ModelConfig b = a;
  EXPECT_EQ(a, b);
  EXPECT_EQ(config_difference(a, b), "");
  b.n_ff = 0;
  b.rms_eps = static_cast<float>(1e-6);
  b.ffn_kind[0] = FfnKind::Moe;
  EXPECT_NE(a, b);
  EXPECT_EQ(config_difference(a, b),
            "rms_eps 9.9999999999999995e-07 vs 9.9999999747524271e-07, ffn_kind 01 vs 11, n_ff 128 vs 0");
  EXPECT_EQ(::testing::PrintToString(a), a.summary());
}

}  // namespace
}  // namespace memra
