// memra-logits — a model's logits for a token sequence, as JSON.
//
//   memra-logits --model FILE|DIR (--tokens 1,2,3 | --prompt TEXT) [--all-positions]
//                [--backend auto|cpu|gpu] [--ctx N] --out FILE.json
//
// Output: {"model": path, "backend": "cpu"|"gpu", "arms": {field: value, ...}, "tokens": [...],
//          "positions": [...], "logits": [[...], ...]} (arms: what the backend ran with, every
// field of memra/arms.h; the CPU oracle reads gdn_prefill) with one row per position listed (the last one, or every one
// with --all-positions), each value printed with 9 significant digits (exact for f32).
// --out - writes to stdout.
//
// Backend (memra/backend.h): auto (the default) runs the GPU model when the build has the CUDA
// part and a device is visible, else the CPU oracle; gpu without either exits 1 naming which is
// missing; cpu is the oracle. stderr names the one that ran ("backend: gpu (NVIDIA H200, sm_90)"
// / "backend: cpu oracle"). On the GPU, the last row is Model::forward_last and --all-positions
// is prime_cache(first token) + teacher-forced decode_step per token, whose last row equals
// forward_last bitwise with the default arms (memra/model.h).
// Bad input (a missing model, a token id outside the vocabulary, a sequence over the context)
// prints "memra-logits: <what>" and exits 1.
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "cli.h"
#include "memra/backend.h"
#include "memra/error.h"
#include "memra/gguf.h"
#include "memra/source.h"
#include "memra/tokenizer.h"

namespace {

using namespace memra;
namespace fs = std::filesystem;

int usage(const std::string& msg) {
  std::cerr << "memra-logits: " << msg << "\n"
            << "usage: memra-logits --model FILE|DIR (--tokens 1,2,3 | --prompt TEXT) [--all-positions]\n"
               "                    [--backend auto|cpu|gpu] [--ctx N] --out FILE.json\n";
  return 2;
}

std::string json_string(const std::string& s) {
  std::string o = "\"";
  for (unsigned char ch : s) {
    if (ch == '"' || ch == '\\') o += '\\', o += static_cast<char>(ch);
    else if (ch < 0x20) {
      char b[8];
      std::snprintf(b, sizeof b, "\\u%04x", ch);
      o += b;
    } else o += static_cast<char>(ch);
  }
  return o + "\"";
}

}  // namespace

int main(int argc, char** argv) {
  std::string model, tokens, prompt, out, backend = "auto";
  bool have_tokens = false, have_prompt = false, all = false;
  long long ctx = 0;
  std::string ctx_s;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool more = i + 1 < argc;
    if (a == "--model" && more) model = argv[++i];
    else if (a == "--tokens" && more) tokens = argv[++i], have_tokens = true;
    else if (a == "--prompt" && more) prompt = argv[++i], have_prompt = true;
    else if (a == "--out" && more) out = argv[++i];
    else if (a == "--backend" && more) backend = argv[++i];
    else if (a == "--ctx" && more) ctx_s = argv[++i];
    else if (a == "--all-positions") all = true;
    else if (a == "-h" || a == "--help") {
      usage("logits as JSON");
      return 0;
    } else {
      return usage("unknown or incomplete argument '" + a + "'");
    }
  }
  if (model.empty() || out.empty()) return usage("--model and --out are required");
  if (have_tokens == have_prompt) return usage("give exactly one of --tokens and --prompt");
  BackendRequest req;
  try {
    req = parse_backend_request(backend);
  } catch (const Error& e) {
    return usage(e.what());
  }

  try {
    if (!ctx_s.empty()) ctx = cli::parse_int("--ctx", ctx_s);
    // Before touching the model: a GPU that cannot be had is the first thing to say.
    if (req == BackendRequest::Gpu)
      if (auto why = gpu_backend_unavailable()) fail("--backend gpu: ", *why);
    if (!fs::exists(model)) fail("model ", model, ": no such file or directory");
    const auto src = open_weights(model);
    BackendOptions opt;
    opt.arms = Arms::from_env();  // the model's arms from MEMRA_* variables; a bad value is an error
    const std::unique_ptr<Backend> m = open_backend(req, *src, opt);
    std::cerr << "memra-logits: backend: " << m->describe() << "\n";
    const ModelConfig& c = m->config();
    const std::vector<int32_t> ids = cli::sequence_ids(have_tokens, tokens, prompt, *src, c.n_vocab);
    if (ids.empty()) fail("no tokens");
    const int64_t max_ctx = ctx > 0 ? ctx : c.n_ctx_train;
    if (static_cast<int64_t>(ids.size()) > max_ctx)
      fail("the sequence has ", ids.size(), " tokens, over the context of ", max_ctx);

    std::vector<std::vector<float>> rows;
    std::vector<size_t> positions;
    if (all) {
      rows = m->forward_all(ids);
      for (size_t i = 0; i < ids.size(); ++i) positions.push_back(i);
    } else {
      rows.push_back(m->forward_last(ids));
      positions.push_back(ids.size() - 1);
    }

    std::FILE* f = out == "-" ? stdout : std::fopen(out.c_str(), "wb");
    if (!f) fail(out, ": cannot open for writing");
    std::string head = "{\"model\":" + json_string(model) + ",\"backend\":\"" + m->name() + "\",\"arms\":{";
    bool first = true;
    for (const auto& [field, value] : opt.arms.fields()) {
      head += (first ? "\"" : ",\"") + std::string(field) + "\":\"" + std::string(value) + "\"";
      first = false;
    }
    head += "},\"tokens\":[";
    for (size_t i = 0; i < ids.size(); ++i) head += (i ? "," : "") + std::to_string(ids[i]);
    head += "],\"positions\":[";
    for (size_t i = 0; i < positions.size(); ++i) head += (i ? "," : "") + std::to_string(positions[i]);
    head += "],\"logits\":[";
    std::fputs(head.c_str(), f);
    for (size_t r = 0; r < rows.size(); ++r) {
      std::fputs(r ? ",[" : "[", f);
      for (size_t i = 0; i < rows[r].size(); ++i) std::fprintf(f, i ? ",%.9g" : "%.9g", static_cast<double>(rows[r][i]));
      std::fputs("]", f);
    }
    std::fputs("]}\n", f);
    const bool bad = std::ferror(f) != 0;
    if (f != stdout && std::fclose(f) != 0) fail(out, ": write failed");
    if (bad) fail(out, ": write failed");
  } catch (const std::exception& e) {
    std::cerr << "memra-logits: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
