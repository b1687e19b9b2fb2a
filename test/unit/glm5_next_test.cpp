// GLM-5's hybrid (transformers 5.17 glm5_next) pieces the whole-model bank test (hf_bank_test:
// the oracle within 1e-4 of transformers' logits) cannot localise: the config reader's defaults
// and refusals, the HF writer/reader round trip of every tensor, the pooled DSA selection
// (whole pools of the best scores plus the open tail, tokens dropped past dsa_topk + the tail)
// against a transcription of transformers' indexer, and what the walk's pieces change: the mean
// collapse of the streams, the SwiGLU clamp and the latent norms' eps each move the logits.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>
#include <vector>

#include "memra/config.h"
#include "memra/error.h"
#include "memra/fixture.h"
#include "memra/hf_config.h"
#include "memra/memory_source.h"
#include "memra/oracle.h"
#include "memra/testing/fixtures.h"
#include "memra/weights.h"
#include "oracle/ops.h"

namespace memra {
namespace {

using ::testing::HasSubstr;
using testing_fixtures::bit_equal;
using testing_fixtures::prompt;
using testing_fixtures::rel_err;
using testing_fixtures::unit_config;

ModelConfig g5() { return unit_config(Family::Glm5Next); }

MemorySource g5_keys() {
  MemorySource s(MetaStyle::Hf, "<glm5-next test config>");
  write_hf_keys(g5(), s);
  return s;
}

std::string error_of(const MemorySource& s) {
  try {
    ModelConfig::from_hf_keys(*memory_meta_keys(s)).validate();
  } catch (const Error& e) { return e.what(); }
  return "no error";
}

TEST(Glm5NextConfig, HfKeysAndTensorsRoundTrip) {
  const ModelConfig c = g5();
  const ModelWeights w = random_weights(c, 3);
  MemorySource h = to_hf_source(c, w);
  const ModelConfig r = ModelConfig::from_source(h);
  EXPECT_EQ(r, c) << config_difference(r, c);
  EXPECT_EQ(c.layer_kind, (std::vector<LayerKind>{LayerKind::Kda, LayerKind::Kda, LayerKind::Mla, LayerKind::Mla}));
  EXPECT_EQ(c.dsa_shared, (std::vector<uint8_t>{0, 0, 0, 1}));
  EXPECT_NE(h.find("model.language_model.layers.0.self_attn.forget_gate.A_log"), nullptr);
  EXPECT_NE(h.find("model.language_model.layers.0.self_attn.conv1d.weight"), nullptr);
  EXPECT_NE(h.find("model.language_model.layers.2.self_attn.indexer.index_kpool_compress_ape"), nullptr);
  EXPECT_EQ(h.find("model.language_model.layers.3.self_attn.indexer.wk.weight"), nullptr);
  EXPECT_NE(h.find("model.language_model.layers.1.attn_hc.fn"), nullptr);
  EXPECT_NE(h.find("model.language_model.layers.1.mlp.experts.gate_up_proj"), nullptr);
  EXPECT_NE(h.find("model.language_model.layers.1.mlp.shared_experts.up_proj.weight"), nullptr);
  EXPECT_EQ(h.find("model.language_model.hc_head.hc_fn"), nullptr);  // the streams collapse by their mean
  // every tensor read back as written: the loaded model computes the same logits
  oracle::Options o;
  o.threads = 1;
  const oracle::Model a = oracle::Model::from_weights(c, w, o), b = oracle::Model::load(h, o);
  const auto p = prompt(27, c.n_vocab, 1);
  EXPECT_TRUE(bit_equal(a.forward_last(p), b.forward_last(p)));
}

TEST(Glm5NextConfig, TransformersDefaultsFillWhatTheConfigOmits) {
  const HfConfig j =
      HfConfig::parse(R"({"model_type": "glm5_next", "text_config": {"num_hidden_layers": 6}})", "<minimal glm5_next>");
  const ModelConfig c = ModelConfig::from_hf(j);
  EXPECT_EQ(c.family, Family::Glm5Next);
  EXPECT_EQ(c.n_embd, 4096);
  EXPECT_EQ(c.n_vocab, 154880);
  EXPECT_EQ(c.rms_eps, 1e-5);
  EXPECT_EQ(c.n_rot, 0);
  EXPECT_EQ(c.head_dim, 256);
  EXPECT_EQ(c.mla_q_rank, 1536);
  // layer_types: KDA except every fourth; indexer_types: every layer full
  EXPECT_EQ(c.layer_kind, (std::vector<LayerKind>{LayerKind::Kda, LayerKind::Kda, LayerKind::Kda, LayerKind::Mla,
                                                  LayerKind::Kda, LayerKind::Kda}));
  EXPECT_EQ(c.dsa_shared, (std::vector<uint8_t>(6, 0)));
  EXPECT_EQ(c.ffn_kind, (std::vector<FfnKind>{FfnKind::Dense, FfnKind::Dense, FfnKind::Dense, FfnKind::Moe,
                                              FfnKind::Moe, FfnKind::Moe}));
  EXPECT_EQ(c.dsa_kpool, 16);
  EXPECT_EQ(c.dsa_topk, 2048);
  EXPECT_EQ(c.kda_gate_bound, -5.0);
  EXPECT_EQ(c.ssm_n_v_heads, 64);
  EXPECT_EQ(c.ssm_d_v, 128);
  EXPECT_EQ(c.n_expert, 288);
  EXPECT_EQ(c.n_ff_shexp, 2048);
  EXPECT_EQ(c.swiglu_limit, 10.0);
  EXPECT_EQ(c.hc_mult, 4);
  EXPECT_EQ(c.mla_latent_eps(), 1e-5);  // glm_moe_dsa's latent norms use 1e-6 instead
  // an explicit null lower bound is "no bound" (the softplus gate), not the default
  const HfConfig n = HfConfig::parse(
      R"({"model_type": "glm5_next_text", "num_hidden_layers": 4, "linear_lower_bound": null})", "<null bound>");
  EXPECT_EQ(ModelConfig::from_hf(n).kda_gate_bound, 0.0);
}

TEST(Glm5NextConfig, UnsupportedOrInconsistentFieldsAreNamed) {
  MemorySource s = g5_keys();
  s.set("qk_rope_head_dim", int64_t{8});
  EXPECT_THAT(error_of(s), HasSubstr("qk_rope_head_dim = 8"));
  s = g5_keys();
  s.set("index_kpool_always_select_tail", false);
  EXPECT_THAT(error_of(s), HasSubstr("index_kpool_always_select_tail = false"));
  s = g5_keys();
  s.set("index_kpool", int64_t{5});
  EXPECT_THAT(error_of(s), HasSubstr("dsa_topk 16 is not a multiple of dsa_kpool 5"));
  s = g5_keys();  // a shared layer after a KDA layer: transformers has no selection to hand it
  s.set("indexer_types", std::vector<std::string>{"full", "full", "shared", "full"});
  EXPECT_THAT(error_of(s), HasSubstr("layer 2's indexer is 'shared' but layer 1 is not an MLA layer"));
  s = g5_keys();
  s.set("layer_types", std::vector<std::string>{"linear_attention", "mamba", "linear_attention", "linear_attention"});
  EXPECT_THAT(error_of(s), HasSubstr("layer_types[1] = 'mamba'"));
  s = g5_keys();
  s.set("linear_lower_bound", 2.0);
  EXPECT_THAT(error_of(s), HasSubstr("linear_lower_bound = 2"));
}

// memra's GGUF form of it (docs/gguf.md: llama.cpp has no glm5_next): glm-dsa's keys and MLA /
// indexer / MoE names, the layer kinds in head_count_kv as kimi-linear writes them (1 MLA, 0 KDA),
// kimi-linear's KDA names, deepseek4's hyper-connection names. Config and every tensor read back:
// the same config, the same logits as the HF form, bit for bit.
TEST(Glm5NextGguf, KeysAndTensorsRoundTripToTheHfModel) {
  const ModelConfig c = g5();
  const ModelWeights w = random_weights(c, 3);
  MemorySource g = to_gguf_source(c, w);
  const ModelConfig r = ModelConfig::from_source(g);
  EXPECT_EQ(r, c) << config_difference(r, c);
  EXPECT_EQ(std::get<std::string>(*g.meta("general.architecture")), "glm5-next");
  EXPECT_EQ(std::get<std::vector<int64_t>>(*g.meta("glm5-next.attention.head_count_kv")),
            (std::vector<int64_t>{0, 0, 1, 1}));
  for (const char* name :
       {"blk.0.ssm_a_log", "blk.0.ssm_conv1d.weight", "blk.0.ssm_f_a.weight", "blk.1.ssm_g_b.weight",
        "blk.0.attn_q.weight", "blk.0.attn_output.weight", "blk.2.attn_k_b.weight", "blk.2.indexer.kpool_ape.weight",
        "blk.2.hc_attn_fn.weight", "blk.1.ffn_norm.weight", "blk.1.ffn_gate_exps.weight", "blk.1.exp_probs_b.bias"})
    EXPECT_NE(g.find(name), nullptr) << name;
  EXPECT_EQ(g.find("blk.3.indexer.proj.weight"), nullptr);  // the layer that reuses the selection
  oracle::Options o;
  o.threads = 1;
  const oracle::Model a = oracle::Model::load(to_hf_source(c, w), o), b = oracle::Model::load(g, o);
  const auto p = prompt(27, c.n_vocab, 1);
  EXPECT_TRUE(bit_equal(a.forward_last(p), b.forward_last(p)));
}

TEST(Glm5NextGguf, BadKeysAndTensorsAreNamed) {
  const ModelConfig c = g5();
  const ModelWeights w = random_weights(c, 3);
  auto load_error = [](const MemorySource& s) -> std::string {
    try {
      ModelConfig::from_source(s).validate();
    } catch (const Error& e) { return e.what(); }
    return "no error";
  };
  MemorySource g = to_gguf_source(c, w);
  g.set("glm5-next.attention.head_count_kv", std::vector<int64_t>{0, 2, 1, 1});
  EXPECT_THAT(load_error(g), HasSubstr("glm5-next.attention.head_count_kv[1] = 2"));
  g = to_gguf_source(c, w);
  g.set("glm5-next.attention.head_count_kv", std::vector<int64_t>{0, 1, 1});
  EXPECT_THAT(load_error(g), HasSubstr("head_count_kv has 3 entries, 4 layers"));
  g = to_gguf_source(c, w);
  g.set("glm5-next.kda.gate_lower_bound", 1.5);
  EXPECT_THAT(load_error(g), HasSubstr("glm5-next.kda.gate_lower_bound = 1.5"));
  g = to_gguf_source(c, w);
  g.set("glm5-next.rope.dimension_count", int64_t{8});
  g.set("glm5-next.attention.key_length", int64_t{40});
  EXPECT_THAT(load_error(g), HasSubstr("glm5-next.rope.dimension_count = 8"));
  g = to_gguf_source(c, w);
  g.set("glm5-next.attention.indexer.types", std::vector<int64_t>{1, 1, 0, 0});  // layer 2 has its indexer
  EXPECT_THAT(load_error(g), HasSubstr("glm5-next.attention.indexer.types says layer 2 is shared"));
}

// transformers' Glm5NextTextIndexer, transcribed for one query at position p over a cache of
// n >= p + 1 tokens (no padding): pools of P from token 0 are candidates when complete; a pool
// is selectable when its last token is <= p; topk(min(topk / P, complete pools)) over the
// scores with the unselectable at -inf, a selected unselectable pool dropped; the tail
// ((p + 1) / P) P .. p appended.
std::set<int32_t> literal_selection(const std::vector<double>& pool_scores, int64_t p, int64_t n, int64_t P,
                                    int64_t topk) {
  const int64_t complete = n / P, k = std::min(topk / P, complete);
  std::vector<int64_t> order(static_cast<size_t>(complete));
  std::iota(order.begin(), order.end(), 0);
  auto score = [&](int64_t j) { return (j + 1) * P - 1 <= p ? pool_scores[j] : -INFINITY; };
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return score(a) > score(b); });
  std::set<int32_t> out;
  for (int64_t i = 0; i < k; ++i)
    if (score(order[i]) != -INFINITY)
      for (int64_t s = 0; s < P; ++s) out.insert(static_cast<int32_t>(order[i] * P + s));
  const int64_t visible = p + 1, tail = visible % P;
  for (int64_t s = visible - tail; s <= p; ++s) out.insert(static_cast<int32_t>(s));
  return out;
}

TEST(Glm5NextIndexer, PooledSelectionIsTransformersSelection) {
  const ModelConfig c = g5();
  const ModelWeights w = random_weights(c, 11);
  const LayerWeights& L = w.layers[2];  // an MLA layer with its own indexer
  ASSERT_TRUE(L.dsa.has_value());
  const int64_t T = 41, D = c.n_embd, P = c.dsa_kpool, hi = c.dsa_head_dim, ni = c.dsa_n_head;
  std::vector<float> x(static_cast<size_t>(T * D));
  uint64_t s = 5;
  for (float& v : x)
    v = static_cast<float>(((s = s * 6364136223846793005ull + 1442695040888963407ull) >> 40) % 2001) / 1000.0f - 1.0f;
  oracle::Model m = oracle::Model::from_weights(c, w);
  oracle::Cache cache = m.new_cache(T);
  std::vector<std::vector<int32_t>> sel;
  std::vector<float> out(static_cast<size_t>(T * D));
  oracle::ops::mla(c, *L.mla, &*L.dsa, x.data(), T, 0, cache.attn[2], sel, out.data(), 1);
  ASSERT_EQ(static_cast<int64_t>(sel.size()), T);

  // the pool scores by hand from the layer's inputs: query latent, indexer q / k / gates
  std::vector<float> qlat(static_cast<size_t>(c.mla_q_rank)), qi(static_cast<size_t>(ni * hi)),
      wi(static_cast<size_t>(ni));
  const auto& ik = cache.attn[2].index_k;  // the keys as the layer wrote them (LayerNorm'd)
  std::vector<std::vector<double>> pool_key(static_cast<size_t>(T / P), std::vector<double>(hi));
  for (int64_t j = 0; j < T / P; ++j)
    for (int64_t ch = 0; ch < hi; ++ch) {
      double mx = -INFINITY, den = 0, num = 0;
      std::vector<double> g(static_cast<size_t>(P));
      for (int64_t t = 0; t < P; ++t) {
        double acc = 0;
        for (int64_t d = 0; d < D; ++d)
          acc += static_cast<double>(L.dsa->kpool_gate.row(ch)[d]) * x[(j * P + t) * D + d];
        g[t] = static_cast<float>(static_cast<float>(acc) + L.dsa->kpool_ape[t * hi + ch]);
        mx = std::max(mx, g[t]);
      }
      for (int64_t t = 0; t < P; ++t) {
        den += std::exp(g[t] - mx);
        num += std::exp(g[t] - mx) * ik[(j * P + t) * hi + ch];
      }
      pool_key[j][ch] = num / den;
    }
  int dropped_queries = 0;
  for (int64_t p = 0; p < T; ++p) {
    oracle::ops::matvec(L.mla->wq_a, x.data() + p * D, qlat.data(), 1);
    oracle::ops::rmsnorm(qlat.data(), L.mla->q_a_norm.data(), c.mla_q_rank, c.mla_latent_eps(), qlat.data());
    oracle::ops::matvec(L.dsa->wq_b, qlat.data(), qi.data(), 1);
    oracle::ops::matvec(L.dsa->weights, x.data() + p * D, wi.data(), 1);
    std::vector<double> score(static_cast<size_t>(T / P));
    for (int64_t j = 0; j < T / P; ++j) {
      double acc = 0;
      for (int64_t h = 0; h < ni; ++h) {
        double qk = 0;
        for (int64_t ch = 0; ch < hi; ++ch) qk += static_cast<double>(qi[h * hi + ch]) * pool_key[j][ch];
        acc += wi[h] / std::sqrt(static_cast<double>(ni)) * std::max(qk / std::sqrt(static_cast<double>(hi)), 0.0);
      }
      score[j] = acc;
    }
    const std::set<int32_t> want = literal_selection(score, p, T, P, c.dsa_topk);
    const std::set<int32_t> got(sel[p].begin(), sel[p].end());
    EXPECT_EQ(got, want) << "query " << p;
    EXPECT_TRUE(std::is_sorted(sel[p].begin(), sel[p].end()));
    dropped_queries += static_cast<int64_t>(got.size()) < p + 1;
  }
  // past 16 + 3 tokens the selection drops some: the test is about a sparse selection
  EXPECT_GE(dropped_queries, 20);
}

// Each glm5_next-specific piece moves the logits: a reader or walk that skipped one would be
// seen by the bank test, and here it is seen without transformers.
TEST(Glm5NextWalk, MeanCollapseClampAndLatentEpsEachMatter) {
  ModelConfig c = g5();
  const ModelWeights w = random_weights(c, 4);
  oracle::Options o;
  o.threads = 1;
  const auto p = prompt(30, c.n_vocab, 2);
  const std::vector<float> base = oracle::Model::from_weights(c, w, o).forward_last(p);
  ModelConfig no_clamp = c;
  no_clamp.swiglu_limit = 0;
  EXPECT_GT(rel_err(oracle::Model::from_weights(no_clamp, w, o).forward_last(p), base), 1e-4);
  ModelConfig eps = c;
  eps.rms_eps = 1e-3;  // the latent norms, the block norms and the KDA output norm read it
  EXPECT_GT(rel_err(oracle::Model::from_weights(eps, w, o).forward_last(p), base), 1e-6);
  ModelConfig keep_all = c;
  keep_all.dsa_topk = 40;  // every token selected: the pools no longer drop anything
  EXPECT_GT(rel_err(oracle::Model::from_weights(keep_all, w, o).forward_last(p), base), 1e-4);
}

}  // namespace
}  // namespace memra
