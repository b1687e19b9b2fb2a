// llamacpp-logits — llama.cpp's logits for a token sequence, in memra-logits' JSON shape.
//
// NOT part of the memra build. It is compiled by tools/llamacpp-crosscheck.sh against an
// external llama.cpp checkout and build (its include/ and ggml/include/ headers, libllama),
// so that memra's GGUF writer and CPU oracle can be checked against an independent
// implementation (docs/interop.md). Nothing of llama.cpp is vendored here.
//
//   llamacpp-logits --model FILE.gguf (--tokens 1,2,3 | --prompt TEXT) [--all-positions]
//                   [--threads N] [--verbose] [--dump NAME] --out FILE.json
//
// --dump NAME prints every f32 graph tensor whose name starts with NAME (for example
// "ffn_moe_probs" for the MoE router probabilities, named "ffn_moe_probs-<layer>") to stderr,
// one line per row: "dump <name> row <i>: v0 v1 ...". Used to look at router near-ties.
//
// --prompt tokenizes TEXT with llama.cpp's own tokenizer built from the GGUF's tokenizer.ggml.*
// keys (no BOS/EOS added, special-token text such as <|im_end|> parsed), so the ids in the
// output's "tokens" can be compared with memra's tokenizer on the same text.
//
// The whole sequence is decoded in ONE batch (one ubatch), every position marked as an output.
// Settings chosen to remove differences that are not the model's math:
//   - K/V cache in F32 (llama.cpp's default F16 cache would round K and V to half precision);
//   - flash attention off (a different softmax/accumulation order);
//   - no extra buffer types (no weight repacking), CPU only.
// What remains is llama.cpp's own summation order, and its activation conversion for
// quantized/bf16 weights (the CPU matmul converts activations to the weight type's
// vec_dot_type: BF16 for bf16 weights, Q8_0 for q8_0 weights, ...).
//
// Exit status: 0 ok, 1 load or decode failure (the llama.cpp error lines are on stderr,
// prefixed "llama.cpp: "), 2 bad arguments.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "llama.h"

namespace {

bool g_verbose = false;

// llama.cpp reports why a load fails only through its log; keep warnings and errors (the
// rejection message is the point of the check) and drop the info chatter unless --verbose.
void log_cb(enum ggml_log_level level, const char* text, void*) {
  if (g_verbose || level == GGML_LOG_LEVEL_ERROR || level == GGML_LOG_LEVEL_WARN) {
    std::fprintf(stderr, "llama.cpp: %s", text);
  }
}

std::string g_dump;  // --dump prefix; empty: no dump

// Graph evaluation callback: asked first whether a tensor is wanted, then called with its data.
bool dump_cb(struct ggml_tensor* t, bool ask, void*) {
  const bool want = t->type == GGML_TYPE_F32 && std::strncmp(t->name, g_dump.c_str(), g_dump.size()) == 0;
  if (ask) return want;
  if (!want) return true;
  const int64_t ncols = t->ne[0], nrows = ggml_nelements(t) / ncols;
  std::vector<float> v(static_cast<size_t>(ggml_nelements(t)));
  ggml_backend_tensor_get(t, v.data(), 0, v.size() * sizeof(float));
  for (int64_t r = 0; r < nrows; ++r) {
    std::fprintf(stderr, "dump %s row %lld:", t->name, static_cast<long long>(r));
    for (int64_t c = 0; c < ncols; ++c) std::fprintf(stderr, " %.9g", static_cast<double>(v[r * ncols + c]));
    std::fprintf(stderr, "\n");
  }
  return true;
}

int usage(const char* msg) {
  std::fprintf(stderr,
               "llamacpp-logits: %s\nusage: llamacpp-logits --model FILE.gguf --tokens 1,2,3 "
               "(--tokens 1,2,3 | --prompt TEXT) [--all-positions] [--threads N] [--verbose] [--dump NAME] --out FILE.json\n",
               msg);
  return 2;
}

bool parse_tokens(const std::string& s, std::vector<llama_token>& out) {
  size_t start = 0;
  while (start <= s.size()) {
    size_t comma = s.find(',', start);
    std::string item = s.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    char* end = nullptr;
    long v = std::strtol(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0') return false;
    out.push_back(static_cast<llama_token>(v));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return !out.empty();
}

}  // namespace

int main(int argc, char** argv) {
  std::string model_path, out_path, prompt;
  bool have_prompt = false;
  std::vector<llama_token> tokens;
  bool all_positions = false;
  int threads = 2;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> const char* { return i + 1 < argc ? argv[++i] : nullptr; };
    if (a == "--model") {
      const char* v = value();
      if (!v) return usage("--model needs a value");
      model_path = v;
    } else if (a == "--tokens") {
      const char* v = value();
      if (!v || !parse_tokens(v, tokens)) return usage("--tokens needs a comma-separated list of integers");
    } else if (a == "--prompt") {
      const char* v = value();
      if (!v) return usage("--prompt needs a value");
      prompt = v;
      have_prompt = true;
    } else if (a == "--out") {
      const char* v = value();
      if (!v) return usage("--out needs a value");
      out_path = v;
    } else if (a == "--threads") {
      const char* v = value();
      if (!v) return usage("--threads needs a value");
      threads = std::atoi(v);
    } else if (a == "--all-positions") {
      all_positions = true;
    } else if (a == "--dump") {
      const char* v = value();
      if (!v) return usage("--dump needs a tensor name prefix");
      g_dump = v;
    } else if (a == "--verbose") {
      g_verbose = true;
    } else {
      return usage(("unknown argument " + a).c_str());
    }
  }
  if (model_path.empty() || out_path.empty()) return usage("--model and --out are required");
  if (tokens.empty() == !have_prompt) return usage("give exactly one of --tokens and --prompt");

  llama_log_set(log_cb, nullptr);
  llama_backend_init();

  llama_model_params mp = llama_model_default_params();
  mp.n_gpu_layers = 0;
  mp.use_extra_bufts = false;
  llama_model* model = llama_model_load_from_file(model_path.c_str(), mp);
  if (!model) {
    std::fprintf(stderr, "llamacpp-logits: %s: llama.cpp failed to load the model\n", model_path.c_str());
    return 1;
  }
  const llama_vocab* vocab = llama_model_get_vocab(model);
  const int32_t n_vocab = llama_vocab_n_tokens(vocab);
  if (have_prompt) {
    // A first call with no room returns minus the number of tokens needed.
    const int32_t need = -llama_tokenize(vocab, prompt.data(), static_cast<int32_t>(prompt.size()), nullptr, 0,
                                         /*add_special=*/false, /*parse_special=*/true);
    tokens.resize(static_cast<size_t>(need > 0 ? need : 0));
    const int32_t got = llama_tokenize(vocab, prompt.data(), static_cast<int32_t>(prompt.size()), tokens.data(),
                                       static_cast<int32_t>(tokens.size()), false, true);
    if (got <= 0) {
      std::fprintf(stderr, "llamacpp-logits: the prompt gave no tokens (llama_tokenize returned %d)\n", got);
      return 1;
    }
    tokens.resize(static_cast<size_t>(got));
  }
  const int32_t n = static_cast<int32_t>(tokens.size());
  for (int32_t i = 0; i < n; ++i) {
    if (tokens[i] < 0 || tokens[i] >= n_vocab) {
      std::fprintf(stderr, "llamacpp-logits: token %d has id %d, outside the vocabulary of %d\n", i, tokens[i], n_vocab);
      return 1;
    }
  }

  llama_context_params cp = llama_context_default_params();
  const uint32_t n_ctx = static_cast<uint32_t>((n + 255) / 256 * 256);
  cp.n_ctx = n_ctx;
  cp.n_batch = n_ctx;   // one llama_decode call ...
  cp.n_ubatch = n_ctx;  // ... computed as one physical batch (the GDN chunked path sees all tokens)
  cp.n_seq_max = 1;
  cp.n_threads = threads;
  cp.n_threads_batch = threads;
  cp.type_k = GGML_TYPE_F32;
  cp.type_v = GGML_TYPE_F32;
  cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
  cp.no_perf = true;
  if (!g_dump.empty()) {
    cp.cb_eval = dump_cb;
    cp.cb_eval_user_data = nullptr;
  }
  llama_context* ctx = llama_init_from_model(model, cp);
  if (!ctx) {
    std::fprintf(stderr, "llamacpp-logits: %s: llama.cpp failed to create a context\n", model_path.c_str());
    return 1;
  }

  llama_batch batch = llama_batch_init(n, 0, 1);
  for (int32_t i = 0; i < n; ++i) {
    batch.token[i] = tokens[i];
    batch.pos[i] = i;
    batch.n_seq_id[i] = 1;
    batch.seq_id[i][0] = 0;
    batch.logits[i] = 1;
  }
  batch.n_tokens = n;
  if (int rc = llama_decode(ctx, batch); rc != 0) {
    std::fprintf(stderr, "llamacpp-logits: %s: llama_decode returned %d\n", model_path.c_str(), rc);
    return 1;
  }

  FILE* f = out_path == "-" ? stdout : std::fopen(out_path.c_str(), "w");
  if (!f) {
    std::fprintf(stderr, "llamacpp-logits: %s: cannot open for writing\n", out_path.c_str());
    return 1;
  }
  std::fprintf(f, "{\"model\": \"%s\", \"backend\": \"llama.cpp-cpu\", \"tokens\": [", model_path.c_str());
  for (int32_t i = 0; i < n; ++i) std::fprintf(f, "%s%d", i ? ", " : "", tokens[i]);
  std::fprintf(f, "], \"positions\": [");
  const int32_t first = all_positions ? 0 : n - 1;
  for (int32_t p = first; p < n; ++p) std::fprintf(f, "%s%d", p > first ? ", " : "", p);
  std::fprintf(f, "], \"logits\": [");
  for (int32_t p = first; p < n; ++p) {
    const float* row = llama_get_logits_ith(ctx, p);
    if (!row) {
      std::fprintf(stderr, "llamacpp-logits: no logits for position %d\n", p);
      return 1;
    }
    std::fprintf(f, "%s[", p > first ? ",\n" : "\n");
    // %.9g round-trips an f32 exactly, as memra-logits prints.
    for (int32_t v = 0; v < n_vocab; ++v) std::fprintf(f, "%s%.9g", v ? "," : "", static_cast<double>(row[v]));
    std::fprintf(f, "]");
  }
  std::fprintf(f, "]}\n");
  if (f != stdout) std::fclose(f);

  llama_batch_free(batch);
  llama_free(ctx);
  llama_model_free(model);
  llama_backend_free();
  return 0;
}
