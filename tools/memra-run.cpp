// memra-run — generate text: tokenise, prefill, decode, stream the text, report tokens/s.
//
//   memra-run [--model FILE|DIR] [--prompt TEXT | --chat TEXT] [-n N] [--temp T --seed S]
//             [--ctx N] [--threads N] [--backend auto|cpu|gpu]
//
// Without --model it runs the embedded default fixture model (tiny qwen3 with the real Qwen3
// tokenizer, generated at build time into <build>/fixtures/default.gguf; $MEMRA_DEFAULT_MODEL
// overrides). Without a prompt it continues a fixed default prompt. --chat wraps the text in
// Qwen's chat template and stops at <|im_end|>. Greedy unless --temp > 0 (Gumbel-max over
// softmax(logits/T), keyed by --seed and the position: memra/sampling.h).
//
// Backend (memra/backend.h): auto (the default) runs the GPU model when the build has the CUDA
// part and a device is visible, else the CPU oracle; gpu without either exits 1 naming which is
// missing; cpu is the oracle (--threads applies to it only). Both run the same loop: prefill the
// prompt (GPU: prime_cache), then one decode per generated token; greedy on the GPU takes
// Model::decode_greedy (argmax on the device, only the id comes back), sampling takes the full
// logit row to the host and draws with sample_token, so a seed selects the same text on both
// backends unless two candidates are within the GPU's logit noise of each other.
// The GPU model's arms come from MEMRA_* variables (Arms::from_env): MEMRA_DECODE_GRAPH=on
// replays each decode step as a CUDA graph, the fastest decode (docs/PERF.md).
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

#include "cli.h"
#include "memra/backend.h"
#include "memra/error.h"
#include "memra/gguf.h"
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
               "                 [--ctx N] [--threads N] [--backend auto|cpu|gpu]\n";
  return 2;
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
  BackendRequest req = BackendRequest::Auto;
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
      else if (a == "-n") n_gen = cli::parse_int(a, value());
      else if (a == "--temp") spec.temperature = static_cast<float>(to_float(a, value()));
      else if (a == "--seed") spec.seed = static_cast<uint64_t>(cli::parse_int(a, value()));
      else if (a == "--ctx") ctx = cli::parse_int(a, value());
      else if (a == "--threads") threads = cli::parse_int(a, value());
      else if (a == "--backend") req = parse_backend_request(value());
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
    // Before touching the model: a GPU that cannot be had is the first thing to say.
    if (req == BackendRequest::Gpu)
      if (auto why = gpu_backend_unavailable()) fail("--backend gpu: ", *why);
    if (model.empty()) {
      model = default_model();
      if (!fs::exists(model))
        fail("no --model given and the default fixture model ", model,
             " does not exist (it is generated by the build: ./dev build)");
    }
    if (!fs::exists(model)) fail("model ", model, ": no such file or directory");
    const auto src = open_weights(model);
    BackendOptions opt;
    opt.threads = static_cast<int>(threads);
    opt.arms = Arms::from_env();  // MEMRA_DECODE_GRAPH=on etc. for the GPU model; a bad value is an error
    const std::unique_ptr<Backend> m = open_backend(req, *src, opt);
    const ModelConfig& c = m->config();
    const Tokenizer tok = Tokenizer::for_model(*src);

    std::string text = have_chat ? "<|im_start|>user\n" + chat + "<|im_end|>\n<|im_start|>assistant\n"
                                 : have_prompt ? prompt : std::string(kDefaultPrompt);
    const std::vector<int32_t> ids = cli::prompt_ids(tok, text, c.n_vocab);
    if (ids.empty()) fail("the prompt is empty after tokenisation");
    const int64_t max_ctx = ctx > 0 ? ctx : c.n_ctx_train;
    if (static_cast<int64_t>(ids.size()) > max_ctx)
      fail("the prompt has ", ids.size(), " tokens, over the context of ", max_ctx);
    const int64_t n = std::min<int64_t>(n_gen, max_ctx - static_cast<int64_t>(ids.size()));
    if (n < n_gen)  // said up front: a run that stops early must not look like an EOS
      std::fprintf(stderr, "memra-run: -n %lld but only %lld tokens fit after the %zu-token prompt in a context of %lld\n",
                   static_cast<long long>(n_gen), static_cast<long long>(n), ids.size(),
                   static_cast<long long>(max_ctx));

    std::optional<int32_t> stop;
    if (have_chat) stop = tok.find_token("<|im_end|>");
    const int32_t eos = tok.eos_id();

    std::fprintf(stderr, "memra-run: %s\nmemra-run: backend: %s\nmemra-run: %s\n", model.c_str(), m->describe().c_str(),
                 c.summary().c_str());
    if (!have_chat) {
      std::fwrite(text.data(), 1, text.size(), stdout);
      std::fflush(stdout);
    }
    const std::unique_ptr<Sequence> seq = m->new_sequence(static_cast<int64_t>(ids.size()) + n);
    using clock = std::chrono::steady_clock;
    const auto t0 = clock::now();
    const std::vector<float> prompt_logits = seq->prime(ids);
    const auto t1 = clock::now();
    // The token after position p-1 is drawn with counter = p (the position it will occupy).
    auto pick = [&](const std::vector<float>& logits) {
      spec.counter = static_cast<uint64_t>(seq->pos());
      return sample_token(logits, spec);
    };
    const bool greedy = spec.temperature == 0;
    std::string pending;
    int64_t generated = 0;
    int32_t t = -1;
    // The first token comes from the prompt's logits; decode speed counts decode steps only,
    // timed from that first token on.
    auto t_first = t1;
    for (int64_t s = 0; s < n; ++s) {
      if (s == 0) t = pick(prompt_logits), t_first = clock::now();
      else if (greedy) t = seq->decode_greedy(t);  // == sample_token at temperature 0 (lowest-index ties)
      else t = pick(seq->decode(t));
      ++generated;
      if (t == eos || (stop && t == *stop)) break;
      pending += tok.token_bytes(t);
      flush_utf8(pending, false);
    }
    flush_utf8(pending, true);
    const auto t2 = clock::now();
    std::printf("\n");
    std::fflush(stdout);  // the text ends before the stderr summary when both go to one file
    const double pre = std::chrono::duration<double>(t1 - t0).count();
    const double dec = std::chrono::duration<double>(t2 - t_first).count();
    const int64_t steps = std::max<int64_t>(generated - 1, 0);
    std::fprintf(stderr,
                 "memra-run: prompt %zu tokens in %.3f s (%.1f tokens/s); generated %lld tokens, "
                 "%lld decode steps in %.3f s (%.1f tokens/s)\n",
                 ids.size(), pre, pre > 0 ? static_cast<double>(ids.size()) / pre : 0.0,
                 static_cast<long long>(generated), static_cast<long long>(steps), dec,
                 dec > 0 ? static_cast<double>(steps) / dec : 0.0);
  } catch (const std::exception& e) {
    std::fflush(stdout);
    std::cerr << "memra-run: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
