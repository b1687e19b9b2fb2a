// memra-mkfixture — deterministic seeded fixture models (include/memra/fixture.h).
//
//   memra-mkfixture --family qwen3|qwen3next|qwen35|qwen35moe|glm-dsa|deepseek4|glm5-next [--preset tiny|bank|qwen3-0.6b|
//                   qwen35-9b|qwen35-35b-a3b] [--seed S] [--layers N] [--vocab N] [--width D]
//                   [--type T[,T...]] [--gguf FILE] [--hf DIR [--fp8]] [--release DIR]
//                   [--tokenizer auto|bytes|PATH] [--repo DIR] [--threads N] [--dry-run]
//                   [--measure STEPS]
//
// T is f32, bf16, q8_0 or nvfp4 (the matrices' storage type; norms and the like stay f32).
// Several types write several GGUFs from one draw of the weights: FILE must then contain
// "{type}", replaced by each type's name.
// tiny and bank models are built in memory and can be written as GGUF (--gguf) and
// as an HF directory (--hf: config.json + model.safetensors in f32 + tokenizer.json). The
// realistic presets do not fit in memory as f32: they are streamed straight into the GGUF, and
// into the HF directory (--hf: BF16 safetensors, or F32 when --type is f32); --dry-run prints
// their sizes without writing. --release DIR (deepseek4, tiny and bank) writes the model as
// DeepSeek releases it: the release's names, FP8 projections with E8M0 block scales, FP4
// experts. --fp8 writes --hf's projections block-scaled FP8 (E4M3, an F32 weight_scale_inv per
// 128 x 128 block) as GLM-5's FP8 release stores them. --width overrides the hidden width D.
// --tokenizer auto looks for the real Qwen3 tokenizer.json in the npm cache ($MEMRA_CACHE_DIR,
// ~/.cache/memra, <--repo>/.cache/memra) and falls back to a byte-level vocabulary with a
// warning. --measure runs STEPS greedy decode steps on the CPU oracle and prints the
// degeneracy statistics docs/fixtures.md reports (distinct tokens, longest run, top-2 margins).
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "memra/error.h"
#include "memra/fixture.h"
#include "memra/oracle.h"
#include "memra/tokenizer.h"

namespace {

using namespace memra;

int usage(const std::string& msg) {
  std::cerr << "memra-mkfixture: " << msg << "\n"
            << "usage: memra-mkfixture --family qwen3|qwen3next|qwen35|qwen35moe|glm-dsa|deepseek4|glm5-next [--preset "
               "P] [--seed S]\n"
               "         [--layers N] [--vocab N] [--width D] [--moe-every-layer] [--type f32|bf16|q8_0|nvfp4[,...]]\n"
               "         [--gguf FILE] [--hf DIR [--fp8]] [--release DIR]\n"
               "         [--tokenizer auto|bytes|PATH] [--repo DIR] [--threads N] [--dry-run] [--measure STEPS]\n";
  return 2;
}

DType type_from_name(const std::string& s) {
  if (s == "f32") return DType::F32;
  if (s == "bf16") return DType::BF16;
  if (s == "q8_0") return DType::Q8_0;
  if (s == "nvfp4") return DType::NVFP4;
  fail("unknown --type '", s, "' (f32, bf16, q8_0, nvfp4)");
}

int64_t to_int(const std::string& flag, const std::string& v) {
  try {
    size_t n = 0;
    const long long x = std::stoll(v, &n);
    if (n == v.size()) return x;
  } catch (...) {
  }
  fail(flag, ": '", v, "' is not an integer");
}

double quantile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  const double pos = q * static_cast<double>(v.size() - 1);
  const auto i = static_cast<size_t>(pos);
  const double f = pos - static_cast<double>(i);
  return i + 1 < v.size() ? v[i] * (1 - f) + v[i + 1] * f : v[i];
}

void measure(const ModelConfig& c, ModelWeights w, const Tokenizer& tok, int64_t steps) {
  const oracle::Model m = oracle::Model::from_weights(c, std::move(w));
  std::vector<int32_t> prompt = tok.encode("The quick brown fox jumps over the lazy dog. Once upon a time");
  oracle::Cache cache = m.new_cache(static_cast<int64_t>(prompt.size()) + steps + 1);
  std::vector<float> logits = m.prime(prompt, cache);
  std::vector<double> margins;
  std::vector<int32_t> out;
  std::map<int32_t, int> count;
  int64_t run = 0, longest = 0;
  for (int64_t s = 0; s < steps; ++s) {
    const auto top = oracle::top_k(logits, 2);
    margins.push_back(static_cast<double>(top[0].second) - top[1].second);
    const int32_t t = top[0].first;
    run = !out.empty() && out.back() == t ? run + 1 : 1;
    longest = std::max(longest, run);
    out.push_back(t);
    ++count[t];
    logits = m.decode_step(t, cache).logits;
  }
  int top_count = 0;
  for (auto& [t, n] : count) top_count = std::max(top_count, n);
  std::printf("steps %lld distinct %zu longest_run %lld most_frequent %d\n",
              static_cast<long long>(steps), count.size(), static_cast<long long>(longest), top_count);
  std::printf("margin min %.4f p10 %.4f p50 %.4f p90 %.4f max %.4f\n", quantile(margins, 0),
              quantile(margins, 0.1), quantile(margins, 0.5), quantile(margins, 0.9), quantile(margins, 1));
  std::printf("first tokens:");
  for (size_t i = 0; i < std::min<size_t>(out.size(), 24); ++i) std::printf(" %d", out[i]);
  std::printf("\n");
}

}  // namespace

int main(int argc, char** argv) {
  std::string family, preset = "tiny", type = "f32", gguf, hf, release, tokenizer = "auto", repo;
  fixture::FixtureSpec spec;
  int threads = 0;
  bool dry = false, fp8 = false;
  int64_t measure_steps = 0;
  try {
    for (int i = 1; i < argc; ++i) {
      const std::string a = argv[i];
      auto value = [&]() -> std::string {
        if (i + 1 >= argc) fail(a, " needs a value");
        return argv[++i];
      };
      // clang-format off
      if (a == "--family") family = value();
      else if (a == "--preset") preset = value();
      else if (a == "--seed") spec.seed = static_cast<uint64_t>(to_int(a, value()));
      else if (a == "--layers") spec.n_layer = to_int(a, value());
      else if (a == "--vocab") spec.n_vocab = to_int(a, value());
      else if (a == "--width") spec.n_embd = to_int(a, value());
      else if (a == "--moe-every-layer") spec.moe_every_layer = true;
      else if (a == "--type") type = value();
      else if (a == "--gguf") gguf = value();
      else if (a == "--hf") hf = value();
      else if (a == "--release") release = value();
      else if (a == "--fp8") fp8 = true;
      else if (a == "--tokenizer") tokenizer = value();
      else if (a == "--repo") repo = value();
      else if (a == "--threads") threads = static_cast<int>(to_int(a, value()));
      else if (a == "--measure") measure_steps = to_int(a, value());
      else if (a == "--dry-run") dry = true;
      // clang-format on
      else if (a == "-h" || a == "--help") {
        usage("write a fixture model");
        return 0;
      } else {
        return usage("unknown argument '" + a + "'");
      }
    }
  } catch (const Error& e) {
    return usage(e.what());
  }
  if (family.empty()) return usage("--family is required");
  if (gguf.empty() && hf.empty() && release.empty() && !dry && measure_steps == 0)
    return usage("nothing to do: give --gguf, --hf, --release, --dry-run or --measure");

  try {
    spec.family = fixture::family_from_name(family);
    spec.preset = fixture::preset_from_name(preset);
    std::vector<std::string> types;
    for (size_t a = 0, b; a <= type.size(); a = b + 1) {
      b = type.find(',', a);
      if (b == std::string::npos) b = type.size();
      types.push_back(type.substr(a, b - a));
    }
    for (const auto& t : types) (void)type_from_name(t);
    if (types.size() > 1 && gguf.find("{type}") == std::string::npos && !gguf.empty())
      fail("--gguf ", gguf, ": several --type values need a {type} placeholder in the file name");
    auto gguf_for = [&](const std::string& t) {
      std::string p = gguf;
      if (const size_t k = p.find("{type}"); k != std::string::npos) p.replace(k, 6, t);
      return p;
    };
    const DType mtype = type_from_name(types[0]);
    const ModelConfig c = fixture::fixture_config(spec);
    const uint64_t seed = fixture::fixture_seed(spec);

    std::string tok_json;
    if (tokenizer == "auto") {
      if (auto p = fixture::find_qwen3_tokenizer(repo)) tok_json = *p;
      else
        std::cerr << "memra-mkfixture: warning: no Qwen3 tokenizer.json in the npm cache "
                     "(tools/fetch-tokenizers.sh); using a byte-level vocabulary\n";
    } else if (tokenizer != "bytes") {
      tok_json = tokenizer;
    }
    const TokenizerSpec tspec = fixture::fixture_tokenizer_spec(c, tok_json);
    const std::string name = std::string(family_arch(c.family)) + "-" + preset + "-seed" + std::to_string(seed);

    const bool realistic = spec.preset != fixture::Preset::Tiny && spec.preset != fixture::Preset::Bank;
    if (realistic) {
      if (measure_steps) fail("--measure: preset ", preset, " does not fit the CPU oracle");
      if (!release.empty())
        fail("--release: preset ", preset, " is streamed; release directories are written in memory");
      fixture::StreamOptions o;
      o.matrix_type = mtype;
      o.threads = threads;
      o.dry_run = dry || gguf.empty();
      o.tokenizer = &tspec;
      o.name = name;
      if (types.size() > 1) fail("--type: streamed presets take one type");
      auto report = [&](const char* what, const fixture::StreamResult& r, bool dry_run) {
        std::fprintf(stderr, "memra-mkfixture: %s %s %s: %llu tensors, %.3f B params, %.3f GB, %.1f s%s\n",
                     name.c_str(), what, type.c_str(), static_cast<unsigned long long>(r.n_tensors),
                     static_cast<double>(r.n_params) * 1e-9, static_cast<double>(r.file_bytes) * 1e-9,
                     r.seconds, dry_run ? " (dry run)" : "");
      };
      if (!gguf.empty() || hf.empty()) report("gguf", fixture::write_gguf_streamed(gguf_for(types[0]), c, seed, o), o.dry_run);
      if (!hf.empty()) {
        o.matrix_type = mtype == DType::F32 ? DType::F32 : DType::BF16;
        o.dry_run = dry;
        o.tokenizer_json = tok_json;
        report("hf", fixture::write_hf_dir_streamed(hf, c, seed, o), dry);
      }
      std::printf("%s\n", c.summary().c_str());
      return 0;
    }

    ModelWeights w = fixture::fixture_weights(c, seed);
    if (!gguf.empty())
      for (const auto& t : types) fixture::write_fixture_gguf(gguf_for(t), c, w, &tspec, type_from_name(t), name);
    // The real tokenizer.json only describes the model when the vocabulary was not truncated.
    const bool whole =
        !tok_json.empty() && static_cast<int64_t>(read_hf_tokenizer_spec(tok_json).tokens.size()) <= c.n_vocab;
    if (!hf.empty()) fixture::write_fixture_hf_dir(hf, c, w, whole ? tok_json : "", fp8);
    if (!release.empty()) fixture::write_fixture_dsv4_release_dir(release, c, w, whole ? tok_json : "");
    if (dry) std::printf("%s\n", c.summary().c_str());
    if (measure_steps > 0) measure(c, std::move(w), Tokenizer(tspec), measure_steps);
  } catch (const std::exception& e) {
    std::cerr << "memra-mkfixture: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
