// memra-run — generate text: tokenise, prefill, decode, stream the text, report tokens/s.
//
//   memra-run [--model FILE|DIR] [--prompt TEXT | --chat TEXT] [-n N] [--temp T --seed S]
//             [--ctx N] [--threads N]
//
// Without --model it runs the embedded default fixture model (tiny qwen3 with the real Qwen3
// tokenizer, generated at build time into <build>/fixtures/default.gguf; $MEMRA_DEFAULT_MODEL
// overrides). Without a prompt it continues a fixed default prompt. --chat wraps the text in
// Qwen's chat template and stops at <|im_end|>. Greedy unless --temp > 0 (Gumbel-max over
// softmax(logits/T), keyed by --seed and the position: memra/sampling.h).
//
// Backend: the CPU oracle (the GPU engine plugs in here and is chosen when a GPU is present).
// Text goes to stdout as it is decoded; the summary (model, backend, tokens/s) to stderr.
// Errors (missing model, prompt over the context, ...) print "memra-run: <what>" and exit 1.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "memra/error.h"
#include "memra/gguf.h"
#include "memra/oracle.h"
#include "memra/sampling.h"
#include "memra/source.h"
#include "memra/tokenizer.h"

namespace {

using namespace memra;
namespace fs = std::filesystem;

constexpr const char* kDefaultPrompt = "The quick brown fox jumps over the lazy dog. Once upon a time";

int usage(const std::string& msg) {
  std::cerr << "memra-run: " << msg << "\n"
            << "usage: memra-run [--model FILE|DIR] [--prompt TEXT | --chat TEXT] [-n N] [--temp T --seed S]\n"
               "                 [--ctx N] [--threads N]\n";
  return 2;
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

double to_float(const std::string& flag, const std::string& v) {
  try {
    size_t n = 0;
    const double x = std::stod(v, &n);
    if (n == v.size()) return x;
  } catch (...) {
  }
  fail(flag, ": '", v, "' is not a number");
}

// <build>/tools/memra-run -> <build>/fixtures/default.gguf
std::string default_model() {
  if (const char* e = std::getenv("MEMRA_DEFAULT_MODEL"); e && *e) return e;
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (ec) fail("cannot locate the default model: /proc/self/exe: ", ec.message());
  return (exe.parent_path().parent_path() / "fixtures" / "default.gguf").string();
}

// The model's tokenizer: the GGUF's own, or tokenizer.json beside the safetensors.
Tokenizer model_tokenizer(const WeightSource& src, const std::string& path) {
  if (const GgufFile* g = src.gguf()) return Tokenizer::from_gguf(*g);
  fs::path dir = fs::is_directory(path) ? fs::path(path) : fs::path(path).parent_path();
  const fs::path tj = dir / "tokenizer.json";
  if (!fs::exists(tj)) fail(path, ": no tokenizer (the directory has no tokenizer.json)");
  return Tokenizer::from_hf_json(tj.string());
}

// Writes the longest prefix of `pending` that ends on a UTF-8 character boundary (a token may
// end inside a character).
void flush_utf8(std::string& pending, bool all) {
  size_t n = pending.size();
  if (!all) {
    size_t i = n, back = 0;
    while (i > 0 && back < 4 && (static_cast<unsigned char>(pending[i - 1]) & 0xC0) == 0x80) --i, ++back;
    if (i > 0) {
      const auto lead = static_cast<unsigned char>(pending[i - 1]);
      const size_t need = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 1;
      if (need > 1 && (n - (i - 1)) < need) n = i - 1;
    }
  }
  std::fwrite(pending.data(), 1, n, stdout);
  std::fflush(stdout);
  pending.erase(0, n);
}

}  // namespace

int main(int argc, char** argv) {
  std::string model, prompt, chat;
  bool have_prompt = false, have_chat = false;
  int64_t n_gen = 32, ctx = 0, threads = 0;
  SampleSpec spec;
  try {
    for (int i = 1; i < argc; ++i) {
      const std::string a = argv[i];
      auto value = [&]() -> std::string {
        if (i + 1 >= argc) fail(a, " needs a value");
        return argv[++i];
      };
      if (a == "--model") model = value();
      else if (a == "--prompt") prompt = value(), have_prompt = true;
      else if (a == "--chat") chat = value(), have_chat = true;
      else if (a == "-n") n_gen = to_int(a, value());
      else if (a == "--temp") spec.temperature = static_cast<float>(to_float(a, value()));
      else if (a == "--seed") spec.seed = static_cast<uint64_t>(to_int(a, value()));
      else if (a == "--ctx") ctx = to_int(a, value());
      else if (a == "--threads") threads = to_int(a, value());
      else if (a == "-h" || a == "--help") {
        usage("generate text");
        return 0;
      } else {
        return usage("unknown argument '" + a + "'");
      }
    }
    if (have_prompt && have_chat) return usage("--prompt and --chat exclude each other");
    if (n_gen < 0) return usage("-n must be >= 0");
    if (!(spec.temperature >= 0)) return usage("--temp must be >= 0");
  } catch (const Error& e) {
    return usage(e.what());
  }

  try {
    if (model.empty()) {
      model = default_model();
      if (!fs::exists(model))
        fail("no --model given and the default fixture model ", model,
             " does not exist (it is generated by the build: ./dev build)");
    }
    if (!fs::exists(model)) fail("model ", model, ": no such file or directory");
    const auto src = open_weights(model);
    oracle::Options opt;
    opt.threads = static_cast<int>(threads);
    const oracle::Model m = oracle::Model::load(*src, opt);
    const ModelConfig& c = m.config();
    const Tokenizer tok = model_tokenizer(*src, model);

    std::string text = have_chat ? "<|im_start|>user\n" + chat + "<|im_end|>\n<|im_start|>assistant\n"
                                 : have_prompt ? prompt : std::string(kDefaultPrompt);
    const std::vector<int32_t> ids = tok.encode(text);
    if (ids.empty()) fail("the prompt is empty after tokenisation");
    for (size_t i = 0; i < ids.size(); ++i)
      if (ids[i] >= c.n_vocab)
        fail("prompt token ", i, " has id ", ids[i], ", outside the model's vocabulary (", c.n_vocab, ")");
    const int64_t max_ctx = ctx > 0 ? ctx : c.n_ctx_train;
    if (static_cast<int64_t>(ids.size()) > max_ctx)
      fail("the prompt has ", ids.size(), " tokens, over the context of ", max_ctx);
    const int64_t n = std::min<int64_t>(n_gen, max_ctx - static_cast<int64_t>(ids.size()));

    std::optional<int32_t> stop;
    if (have_chat) stop = tok.find_token("<|im_end|>");
    const int32_t eos = tok.eos_id();

    std::fprintf(stderr, "memra-run: %s\nmemra-run: backend cpu (oracle), %s\n", model.c_str(), c.summary().c_str());
    if (!have_chat) {
      std::fwrite(text.data(), 1, text.size(), stdout);
      std::fflush(stdout);
    }
    oracle::Cache cache = m.new_cache(static_cast<int64_t>(ids.size()) + n);
    using clock = std::chrono::steady_clock;
    const auto t0 = clock::now();
    std::vector<float> logits = m.prime(ids, cache);
    const auto t1 = clock::now();
    std::string pending;
    int64_t generated = 0;
    for (int64_t s = 0; s < n; ++s) {
      spec.counter = static_cast<uint64_t>(cache.pos);
      const int32_t t = sample_token(logits, spec);
      ++generated;
      if (t == eos || (stop && t == *stop)) break;
      pending += tok.token_bytes(t);
      flush_utf8(pending, false);
      if (s + 1 < n) logits = m.decode_step(t, cache).logits;
    }
    flush_utf8(pending, true);
    const auto t2 = clock::now();
    std::printf("\n");
    const double pre = std::chrono::duration<double>(t1 - t0).count();
    const double dec = std::chrono::duration<double>(t2 - t1).count();
    std::fprintf(stderr, "memra-run: prompt %zu tokens in %.3f s (%.1f tokens/s); generated %lld tokens in %.3f s (%.1f tokens/s)\n",
                 ids.size(), pre, pre > 0 ? static_cast<double>(ids.size()) / pre : 0.0,
                 static_cast<long long>(generated), dec, dec > 0 ? static_cast<double>(generated) / dec : 0.0);
  } catch (const std::exception& e) {
    std::fflush(stdout);
    std::cerr << "memra-run: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
