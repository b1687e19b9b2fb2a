// Fixture models (include/memra/fixture.h): presets, determinism, the GGUF/safetensors writers
// (the same weights through either give bit-identical oracle logits), quantized storage
// types, the streamed realistic-shape writers (GGUF and HF), the tokenizer fitting, and
// non-degenerate greedy decoding (with a negative control showing the check fails on plain
// random weights).
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "memra/error.h"
#include "memra/fixture.h"
#include "memra/gguf.h"
#include "memra/oracle.h"
#include "memra/source.h"
#include "memra/tokenizer.h"
#include "unit/safetensors_test_util.h"

namespace memra {
namespace {

using fixture::FixtureSpec;
using fixture::Preset;

const Family kFamilies[] = {Family::Qwen3, Family::Qwen3Next, Family::Qwen35, Family::Qwen35Moe};

std::string fam(Family f) { return std::string(family_arch(f)); }

std::vector<int32_t> ids(int64_t n, int64_t vocab, uint64_t seed) {
  std::vector<int32_t> p(static_cast<size_t>(n));
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
  for (auto& t : p) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    t = static_cast<int32_t>((s >> 33) % static_cast<uint64_t>(vocab));
  }
  return p;
}

bool bit_equal(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (std::bit_cast<uint32_t>(a[i]) != std::bit_cast<uint32_t>(b[i])) return false;
  return true;
}

std::string read_file(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

TEST(FixturePresets, NamesRoundTripAndBadNamesFail) {
  for (Preset p : {Preset::Tiny, Preset::Bank, Preset::Qwen3_0_6B, Preset::Qwen35_9B, Preset::Qwen35_35B_A3B,
                   Preset::Glm5, Preset::Dsv4Flash, Preset::Glm5Flash})
    EXPECT_EQ(fixture::preset_from_name(fixture::preset_name(p)), p);
  for (Family f : kFamilies) EXPECT_EQ(fixture::family_from_name(fam(f)), f);
  EXPECT_THROW(fixture::preset_from_name("huge"), Error);
  EXPECT_THROW(fixture::family_from_name("llama"), Error);
  // A realistic preset belongs to one family.
  EXPECT_THROW(fixture::fixture_config({Family::Qwen35, Preset::Qwen3_0_6B}), Error);
  EXPECT_THROW(fixture::fixture_config({Family::Qwen35Moe, Preset::Glm5}), Error);
  const ModelConfig glm = fixture::fixture_config({Family::GlmDsa, Preset::Glm5});
  EXPECT_NO_THROW(glm.validate());
  EXPECT_EQ(glm.head_dim, 256);
  EXPECT_EQ(glm.kv_k_width(), 64 * 256);
  const ModelConfig flash = fixture::fixture_config({Family::Glm5Next, Preset::Glm5Flash});
  EXPECT_NO_THROW(flash.validate());
  EXPECT_EQ(flash.dsa_sel_width(), 2048 + 15);  // 128 pools of 16 and the open tail
  EXPECT_THROW(fixture::fixture_config({Family::GlmDsa, Preset::Glm5Flash}), Error);
}

TEST(FixturePresets, TinyShapes) {
  for (Family f : kFamilies) {
    const ModelConfig c = fixture::fixture_config({f, Preset::Tiny});
    EXPECT_EQ(c.n_vocab, 151936) << fam(f);  // the real Qwen3 vocabulary
    EXPECT_TRUE(c.tied_embeddings);
    EXPECT_EQ(c.n_embd, 64);
    EXPECT_EQ(c.n_layer, 4);
    if (f != Family::Qwen3) {
      EXPECT_EQ(c.layer_kind[3], LayerKind::Attention);
      EXPECT_EQ(c.layer_kind[0], LayerKind::Linear);
      EXPECT_NE(c.ssm_d_k, c.ssm_d_v);
    }
  }
  const ModelConfig next = fixture::fixture_config({Family::Qwen3Next, Preset::Tiny});
  EXPECT_EQ(next.ffn_kind[2], FfnKind::Dense);  // a dense layer among MoE layers
  EXPECT_EQ(next.ffn_kind[1], FfnKind::Moe);
}

TEST(FixturePresets, RealisticShapesAreThePublicCheckpoints) {
  const ModelConfig a = fixture::fixture_config({Family::Qwen3, Preset::Qwen3_0_6B});
  EXPECT_EQ(a.n_embd, 1024);
  EXPECT_EQ(a.n_layer, 28);
  EXPECT_EQ(a.n_ff, 3072);
  EXPECT_EQ(a.head_dim, 128);
  const ModelConfig b = fixture::fixture_config({Family::Qwen35, Preset::Qwen35_9B});
  EXPECT_EQ(b.n_embd, 4096);
  EXPECT_EQ(b.n_layer, 32);
  EXPECT_EQ(b.n_vocab, 248320);
  EXPECT_EQ(b.ssm_n_v_heads, 32);
  const ModelConfig m = fixture::fixture_config({Family::Qwen35Moe, Preset::Qwen35_35B_A3B});
  EXPECT_EQ(m.n_expert, 256);
  EXPECT_EQ(m.n_expert_used, 8);
  EXPECT_EQ(m.n_layer, 40);
}

TEST(FixtureWeights, DeterministicInSeed) {
  const ModelConfig c = fixture::fixture_config({Family::Qwen35Moe, Preset::Bank});
  const ModelWeights a = fixture::fixture_weights(c, 5), b = fixture::fixture_weights(c, 5);
  const ModelWeights d = fixture::fixture_weights(c, 6);
  EXPECT_TRUE(bit_equal(a.embed.data, b.embed.data));
  EXPECT_TRUE(bit_equal(a.layers[3].attn->wq.data, b.layers[3].attn->wq.data));
  EXPECT_FALSE(bit_equal(a.embed.data, d.embed.data));
}

// --- GGUF and safetensors ---------------------------------------------------------------------

class FixtureFiles : public ::testing::TestWithParam<Family> {};

TEST_P(FixtureFiles, GgufAndSafetensorsGiveIdenticalLogits) {
  const Family f = GetParam();
  // tiny's rms_eps is f32-exact, so the GGUF (f32 key) and config.json describe one model.
  const ModelConfig c = fixture::fixture_config({f, Preset::Tiny, 0, 0, 4096});
  const ModelWeights w = fixture::fixture_weights(c, 77);
  st_test::TempDir dir("fixture");
  const std::string gguf = (dir.path() / "m.gguf").string(), hf = (dir.path() / "hf").string();
  fixture::write_fixture_gguf(gguf, c, w, nullptr, DType::F32, "t");
  fixture::write_fixture_hf_dir(hf, c, w);
  const auto gs = open_weights(gguf);
  const auto hs = open_weights(hf);
  const oracle::Model mg = oracle::Model::load(*gs), mh = oracle::Model::load(*hs);
  EXPECT_EQ(mg.config(), c);
  EXPECT_EQ(mh.config(), c);
  const auto p = ids(70, c.n_vocab, 3);  // past one GDN chunk
  const auto lg = mg.forward_last(p), lh = mh.forward_last(p);
  EXPECT_TRUE(bit_equal(lg, lh)) << fam(f);
  // And both are the canonical weights the fixture was generated from. (Hybrids are not: both
  // formats store the GDN decay as A_log = log(-ssm_a), and -exp(log(-a)) is not a bit for bit.)
  if (f == Family::Qwen3) {
    const oracle::Model mw = oracle::Model::from_weights(c, w);
    EXPECT_TRUE(bit_equal(lg, mw.forward_last(p))) << fam(f);
  }
}

TEST_P(FixtureFiles, QuantizedStorageTypes) {
  const Family f = GetParam();
  const ModelConfig c = fixture::fixture_config({f, Preset::Bank});
  const ModelWeights w = fixture::fixture_weights(c, 78);
  st_test::TempDir dir("fixtureq");
  for (DType t : {DType::BF16, DType::Q8_0, DType::NVFP4}) {
    const std::string path = (dir.path() / "m.gguf").string();
    fixture::write_fixture_gguf(path, c, w, nullptr, t, "t");
    const auto g = GgufFile::open(path);
    int quantized = 0;
    for (const TensorView& v : g->tensors()) {
      const bool is_scale = v.name.ends_with(".scale");
      const bool matrix = v.ne.size() >= 2 && v.name.find("ffn_gate_inp") == std::string::npos &&
                          v.name.find("ssm_conv1d") == std::string::npos;
      // In an NVFP4 model the embedding and ssm_ba are Q8_0: llama.cpp has no .scale for them.
      const bool q8_in_fp4 = t == DType::NVFP4 && (v.name == "token_embd.weight" ||
                                                   v.name.find("ssm_ba.") != std::string::npos);
      const DType want = !matrix ? DType::F32 : q8_in_fp4 ? DType::Q8_0 : t;
      EXPECT_EQ(v.type, want) << v.name;
      quantized += matrix;
      if (want == DType::NVFP4) {
        const std::string s = v.name.substr(0, v.name.size() - 7) + ".scale";
        const TensorView* sv = g->find(s);
        ASSERT_NE(sv, nullptr) << s;
        EXPECT_EQ(sv->nelements(), v.ne.size() == 3 ? v.ne[2] : 1) << s;
      }
      if (is_scale) { EXPECT_EQ(t, DType::NVFP4); }
    }
    EXPECT_GT(quantized, 8);
    EXPECT_EQ(g->find("token_embd.scale"), nullptr) << "llama.cpp rejects a file with it";
    // The file is a model: it loads, and its logits are finite.
    const oracle::Model m = oracle::Model::load(*g);
    for (float x : m.forward_last(ids(5, c.n_vocab, 1))) ASSERT_TRUE(std::isfinite(x));
  }
}

TEST_P(FixtureFiles, TensorPlanIsTheExportedTensorList) {
  const ModelConfig c = fixture::fixture_config({GetParam(), Preset::Tiny, 0, 0, 512});
  const MemorySource src = to_gguf_source(c, fixture::fixture_weights(c, 1));
  const auto plan = fixture::gguf_tensor_plan(c);
  const auto names = src.tensor_names();
  ASSERT_EQ(plan.size(), names.size());
  for (size_t i = 0; i < plan.size(); ++i) {
    EXPECT_EQ(plan[i].name, names[i]);
    EXPECT_EQ(plan[i].ne, src.find(names[i])->ne) << names[i];
  }
}

TEST_P(FixtureFiles, HfTensorPlanIsTheExportedTensorList) {
  const ModelConfig c = fixture::fixture_config({GetParam(), Preset::Bank});  // untied for MoE families
  const MemorySource src = to_hf_source(c, fixture::fixture_weights(c, 1));
  const auto plan = fixture::hf_tensor_plan(c);
  const auto names = src.tensor_names();
  ASSERT_EQ(plan.size(), names.size());
  for (size_t i = 0; i < plan.size(); ++i) {
    EXPECT_EQ(plan[i].name, names[i]);
    EXPECT_EQ(plan[i].ne, src.find(names[i])->ne) << names[i];
  }
}

INSTANTIATE_TEST_SUITE_P(Families, FixtureFiles, ::testing::ValuesIn(kFamilies),
                         [](const auto& info) { return fam(info.param); });

// --- streamed writer --------------------------------------------------------------------------

TEST(StreamedGguf, LoadsIsThreadCountIndependentAndMatchesDryRun) {
  for (Family f : kFamilies) {
    const ModelConfig c = fixture::fixture_config({f, Preset::Bank});
    st_test::TempDir dir("stream");
    for (DType t : {DType::Q8_0, DType::NVFP4}) {
      fixture::StreamOptions o;
      o.matrix_type = t;
      o.threads = 1;
      const std::string a = (dir.path() / "a.gguf").string(), b = (dir.path() / "b.gguf").string();
      const auto ra = fixture::write_gguf_streamed(a, c, 9, o);
      o.threads = 3;
      fixture::write_gguf_streamed(b, c, 9, o);
      o.dry_run = true;
      const auto rd = fixture::write_gguf_streamed("", c, 9, o);
      EXPECT_EQ(read_file(a), read_file(b)) << fam(f) << " " << dtype_name(t);
      EXPECT_EQ(rd.file_bytes, std::filesystem::file_size(a));
      EXPECT_EQ(ra.file_bytes, std::filesystem::file_size(a));
      const auto g = GgufFile::open(a);
      const oracle::Model m = oracle::Model::load(*g);
      ModelConfig want = c;
      want.rms_eps = static_cast<float>(c.rms_eps);  // a GGUF key of type f32
      EXPECT_EQ(m.config(), want);
      for (float x : m.forward_last(ids(4, c.n_vocab, 2))) ASSERT_TRUE(std::isfinite(x));
      if (t != DType::NVFP4) continue;
      // Scales as the converter writes them: one per expert slab of a stacked tensor (llama.cpp
      // checks "<base>.scale" of a *_exps tensor as {n_expert} and rejects the file otherwise).
      const auto src = open_weights(a);
      int stacked = 0;
      for (const std::string& n : src->tensor_names()) {
        if (!n.ends_with(".scale")) continue;
        const TensorView* wv = src->find(n.substr(0, n.size() - 6) + ".weight");
        ASSERT_NE(wv, nullptr) << fam(f) << " " << n;
        const std::vector<int64_t> want{wv->ne.size() == 3 ? wv->ne[2] : 1};
        EXPECT_EQ(src->find(n)->ne, want) << fam(f) << " " << n;
        stacked += wv->ne.size() == 3;
      }
      if (c.n_expert > 0) { EXPECT_GT(stacked, 0) << fam(f); }
    }
  }
}

// The loaded (canonical) values of a streamed model lie where the draw put them, whichever
// format: norm multipliers in [0.75, 1.25] (HF zero-centred w = m - 1 folded back), GDN decay
// ssm_a = -exp(A_log) in [-8, -0.5], dt_bias in [0.5, 1.5].
void expect_canonical_ranges(const ModelWeights& w, const std::string& what) {
  auto in = [&](const std::vector<float>& v, float lo, float hi, const char* name) {
    ASSERT_FALSE(v.empty()) << what << " " << name;
    const auto [a, b] = std::minmax_element(v.begin(), v.end());
    EXPECT_GE(*a, lo) << what << " " << name;
    EXPECT_LE(*b, hi) << what << " " << name;
  };
  in(w.output_norm, 0.75f, 1.25f, "output_norm");
  for (const LayerWeights& L : w.layers) {
    in(L.attn_norm, 0.75f, 1.25f, "attn_norm");
    if (L.gdn) {
      // BF16 rounds A_log (|A_log| <= ln 8) by <= 2^-9 relative: exp moves by <= e^0.0041.
      in(L.gdn->ssm_a, -8.0f * 1.005f, -0.5f / 1.005f, "ssm_a");
      in(L.gdn->dt_bias, 0.5f, 1.5f, "dt_bias");
      in(L.gdn->norm, 0.75f, 1.25f, "ssm_norm");
    }
    if (L.attn) in(L.attn->q_norm, 0.75f, 1.25f, "q_norm");
  }
}

TEST(StreamedHf, LoadsMatchesDryRunAndKeepsConventions) {
  for (Family f : kFamilies) {
    const ModelConfig c = fixture::fixture_config({f, Preset::Bank});
    st_test::TempDir dir("streamhf");
    for (DType t : {DType::F32, DType::BF16}) {
      fixture::StreamOptions o;
      o.matrix_type = t;
      o.threads = 2;
      const std::string d = (dir.path() / std::string(dtype_name(t))).string();
      const auto r = fixture::write_hf_dir_streamed(d, c, 4, o);
      EXPECT_EQ(r.file_bytes, std::filesystem::file_size(d + "/model.safetensors")) << fam(f);
      const auto src = open_weights(d);
      const oracle::Model m = oracle::Model::load(*src);
      EXPECT_EQ(m.config(), c) << fam(f);
      expect_canonical_ranges(m.weights(), fam(f) + " hf " + std::string(dtype_name(t)));
      for (float x : m.forward_last(ids(4, c.n_vocab, 2))) ASSERT_TRUE(std::isfinite(x));
    }
    fixture::StreamOptions o;
    o.matrix_type = DType::Q8_0;
    const std::string g = (dir.path() / "m.gguf").string();
    fixture::write_gguf_streamed(g, c, 4, o);
    const auto gs = GgufFile::open(g);
    expect_canonical_ranges(oracle::Model::load(*gs).weights(), fam(f) + " gguf");
  }
}

// Parameter counts worked out from the published shapes, against the dry run's count.
TEST(StreamedGguf, RealisticDryRunSizes) {
  struct Want {
    FixtureSpec spec;
    double params;
  };
  auto dense_layer = [](double D, double H, double KV, double hd, double F, bool gated) {
    return D * (gated ? 2 : 1) * H * hd + 2 * D * KV * hd + H * hd * D + 2 * hd + 3 * D * F + 2 * D;
  };
  // Qwen3-0.6B: tied 151936 x 1024 embedding, 28 layers.
  const double q3 = 151936.0 * 1024 + 1024 + 28 * dense_layer(1024, 16, 8, 128, 3072, false);
  for (const Want& wnt : {Want{{Family::Qwen3, Preset::Qwen3_0_6B}, q3}}) {
    fixture::StreamOptions o;
    o.dry_run = true;
    o.matrix_type = DType::Q8_0;
    const auto r = fixture::write_gguf_streamed("", fixture::fixture_config(wnt.spec), 1, o);
    EXPECT_EQ(static_cast<double>(r.n_params), wnt.params);
  }
  // The benchmark sizes (docs/fixtures.md).
  fixture::StreamOptions o;
  o.dry_run = true;
  o.matrix_type = DType::NVFP4;
  const auto r9 = fixture::write_gguf_streamed("", fixture::fixture_config({Family::Qwen35, Preset::Qwen35_9B}), 1, o);
  EXPECT_GT(r9.n_params, 8.5e9);
  EXPECT_LT(r9.n_params, 10.0e9);
  EXPECT_GT(r9.file_bytes, 5.0e9);
  EXPECT_LT(r9.file_bytes, 7.0e9);
  const auto r35 = fixture::write_gguf_streamed(
      "", fixture::fixture_config({Family::Qwen35Moe, Preset::Qwen35_35B_A3B}), 1, o);
  EXPECT_GT(r35.n_params, 33e9);
  EXPECT_LT(r35.n_params, 37e9);
}

// A realistic shape at reduced depth and vocabulary is written, read back and run.
TEST(StreamedGguf, RealisticShapeAtReducedDepthRuns) {
  const ModelConfig c = fixture::fixture_config({Family::Qwen3, Preset::Qwen3_0_6B, 0, 1, 2048});
  EXPECT_EQ(c.n_embd, 1024);
  st_test::TempDir dir("real");
  fixture::StreamOptions o;
  o.matrix_type = DType::Q8_0;
  const std::string path = (dir.path() / "r.gguf").string();
  fixture::write_gguf_streamed(path, c, 3, o);
  const auto g = GgufFile::open(path);
  const oracle::Model m = oracle::Model::load(*g);
  for (float x : m.forward_last(ids(3, c.n_vocab, 4))) ASSERT_TRUE(std::isfinite(x));
}

// --- tokenizer fitting ------------------------------------------------------------------------

TEST(FixtureTokenizer, ByteLevelFallbackRoundTrips) {
  const Tokenizer t(fixture::fit_vocab(fixture::byte_level_tokenizer_spec(), 1000));
  EXPECT_EQ(t.n_tokens(), 1000u);
  const std::string text = "h\xC3\xA9llo, \xE4\xB8\x96\xE7\x95\x8C \xF0\x9F\x99\x82";
  const auto e = t.encode(text);
  EXPECT_EQ(e.size(), text.size());  // no merges: one token per byte
  EXPECT_EQ(t.decode(e), text);
}

TEST(FixtureTokenizer, TruncatedQwen3StaysAValidBpe) {
  const auto path = fixture::find_qwen3_tokenizer(MEMRA_SOURCE_DIR);
  ASSERT_TRUE(path) << "no Qwen3 tokenizer.json in the npm cache (run tools/fetch-tokenizers.sh)";
  const TokenizerSpec full = read_hf_tokenizer_spec(*path);
  const TokenizerSpec small = fixture::fit_vocab(full, 4096);
  ASSERT_EQ(small.tokens.size(), 4096u);
  std::set<std::string> kept(small.tokens.begin(), small.tokens.end());
  for (const auto& [a, b] : small.merges) ASSERT_TRUE(kept.count(a) && kept.count(b) && kept.count(a + b));
  EXPECT_GT(small.merges.size(), 3000u);
  const Tokenizer t(small);
  const std::string text = "The quick brown fox, \xE4\xB8\x96\xE7\x95\x8C! \xF0\x9F\x99\x82";
  const auto e = t.encode(text);
  for (int32_t id : e) EXPECT_LT(id, 4096);
  EXPECT_EQ(t.decode(e), text);
  // Padding keeps every real token.
  const TokenizerSpec padded = fixture::fit_vocab(full, 151936);
  EXPECT_EQ(padded.tokens.size(), 151936u);
  EXPECT_EQ(padded.merges.size(), full.merges.size());
}

// --- non-degenerate greedy decoding -----------------------------------------------------------

struct Greedy {
  size_t distinct = 0;
  int64_t longest_run = 0;
};

Greedy greedy(const oracle::Model& m, int64_t steps) {
  const auto prompt = ids(12, m.config().n_vocab, 11);
  oracle::Cache cache = m.new_cache(static_cast<int64_t>(prompt.size()) + steps);
  std::vector<float> l = m.prime(prompt, cache);
  std::set<int32_t> seen;
  Greedy g;
  int32_t last = -1;
  int64_t run = 0;
  for (int64_t s = 0; s < steps; ++s) {
    const int32_t t = static_cast<int32_t>(std::max_element(l.begin(), l.end()) - l.begin());
    run = t == last ? run + 1 : 1;
    g.longest_run = std::max(g.longest_run, run);
    last = t;
    seen.insert(t);
    if (s + 1 < steps) l = m.decode_step(t, cache).logits;
  }
  g.distinct = seen.size();
  return g;
}

class FixtureDecode : public ::testing::TestWithParam<Family> {};

TEST_P(FixtureDecode, GreedyIsNotDegenerate) {
  const FixtureSpec spec{GetParam(), Preset::Tiny};
  const ModelConfig c = fixture::fixture_config(spec);
  const oracle::Model m = oracle::Model::from_weights(c, fixture::fixture_weights(c, fixture::fixture_seed(spec)));
  const Greedy g = greedy(m, 64);
  EXPECT_GE(g.distinct, 32u) << fam(GetParam());
  EXPECT_LT(g.longest_run, 8) << fam(GetParam());
}

INSTANTIATE_TEST_SUITE_P(Families, FixtureDecode, ::testing::ValuesIn(kFamilies),
                         [](const auto& info) { return fam(info.param); });

// Negative control: the same model with random_weights' plain scales repeats itself, and the
// check above catches it.
TEST(FixtureDecodeControl, PlainRandomWeightsAreDegenerate) {
  const ModelConfig c = fixture::fixture_config({Family::Qwen3, Preset::Tiny});
  const oracle::Model m = oracle::Model::from_weights(c, random_weights(c, 1000));
  const Greedy g = greedy(m, 64);
  EXPECT_TRUE(g.distinct < 32 || g.longest_run >= 8) << g.distinct << " distinct, run " << g.longest_run;
}

}  // namespace
}  // namespace memra
