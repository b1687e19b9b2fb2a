// memra-bank — bank the CPU oracle's greedy trajectory for the TeacherForced gate (GATES.md §3).
//
//   memra-bank --model FILE|DIR (--prompt TEXT | --tokens 1,2,3) [-n STEPS] [-k K]
//              [--activations f32|q8_1] --out BANK.json
//
// Runs the CPU oracle (never the GPU: the bank is the reference) greedily for STEPS tokens
// (default 32) after the prompt and writes, per step, the picked token and the oracle's top-K
// (default 8) ids and logits (memra/bank.h has the format). Also recorded:
//   - model_sha256: sha256 of the model file. For an HF directory: of model.safetensors, or when
//     the checkpoint is sharded, of model.safetensors.index.json (the index names every shard, but
//     the shards' bytes are then NOT covered: a gate that needs them must hash them itself);
//   - calibration: the reference-vs-reference noise C_ref, the oracle teacher-forced along the
//     banked tokens with chunked vs recurrent delta-rule prefill (Gated DeltaNet, Kimi delta
//     attention), max over steps of max|diff| / |top1| (0 for a model without such layers: the
//     two forms are the same computation, and the note says so; with them it is usually 0 as
//     well: the oracle's recurrent state is f64), and
//     band_coeff = 3*sqrt(2)*max(C_ref, 2^-23), the relative band for an arm with no noise of its
//     own; 2^-23 is the f32 resolution of the banked logits (a gate adds its arm's C_arm:
//     band_coeff_for in memra/bank.h).
// --activations q8_1 banks the oracle under the GPU's activation contract for quantised matrices
// (oracle::Options::q8_1_activations: inputs of Q8_0 / NVFP4 products rounded to q8_1), the
// reference a quantised GPU arm is judged against; the arm tag says which (default f32).
// stderr gets one summary line. Bad input (a missing model, a token id outside the vocabulary,
// STEPS or K out of range) prints "memra-bank: <what>" and exits 1; bad usage exits 2.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "cli.h"
#include "memra/bank.h"
#include "memra/error.h"
#include "memra/gguf.h"
#include "memra/hash.h"
#include "memra/oracle.h"
#include "memra/source.h"
#include "memra/tokenizer.h"

namespace {

using namespace memra;
namespace fs = std::filesystem;

int usage(const std::string& msg) {
  std::cerr << "memra-bank: " << msg << "\n"
            << "usage: memra-bank --model FILE|DIR (--prompt TEXT | --tokens 1,2,3) [-n STEPS] [-k K]\n"
               "                  [--activations f32|q8_1] --out BANK.json\n";
  return 2;
}

// The file whose hash identifies the model (see the header comment).
fs::path identity_file(const fs::path& model) {
  if (!fs::is_directory(model)) return model;
  for (const char* name : {"model.safetensors", "model.safetensors.index.json"})
    if (fs::exists(model / name)) return model / name;
  fail(model.string(), ": no model.safetensors or model.safetensors.index.json to hash");
}

}  // namespace

int main(int argc, char** argv) {
  std::string model, tokens, prompt, out, steps_s = "32", k_s = "8", acts = "f32";
  bool have_tokens = false, have_prompt = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool more = i + 1 < argc;
    if (a == "--model" && more) model = argv[++i];
    else if (a == "--tokens" && more) tokens = argv[++i], have_tokens = true;
    else if (a == "--prompt" && more) prompt = argv[++i], have_prompt = true;
    else if (a == "--out" && more) out = argv[++i];
    else if (a == "-n" && more) steps_s = argv[++i];
    else if (a == "-k" && more) k_s = argv[++i];
    else if (a == "--activations" && more)
      acts = argv[++i];
    else if (a == "-h" || a == "--help") {
      usage("bank the CPU oracle's greedy trajectory");
      return 0;
    } else {
      return usage("unknown or incomplete argument '" + a + "'");
    }
  }
  if (model.empty() || out.empty()) return usage("--model and --out are required");
  if (have_tokens == have_prompt) return usage("give exactly one of --tokens and --prompt");
  if (acts != "f32" && acts != "q8_1") return usage("--activations must be f32 or q8_1, not '" + acts + "'");

  try {
    const long long steps = cli::parse_int("-n", steps_s);
    const long long k = cli::parse_int("-k", k_s);
    if (steps < 1 || steps > 1 << 20) fail("-n ", steps, ": need at least 1 step");
    if (!fs::exists(model)) fail("model ", model, ": no such file or directory");
    const auto src = open_weights(model);
    oracle::Model m = oracle::Model::load(*src);
    const ModelConfig& c = m.config();
    if (k < 2 || k > c.n_vocab) fail("-k ", k, ": need 2 <= k <= the vocabulary size (", c.n_vocab, ")");

    const std::vector<int32_t> ids = cli::sequence_ids(have_tokens, tokens, prompt, *src, c.n_vocab);
    if (ids.empty()) fail("the prompt has no tokens");

    // The bank is produced with the oracle's default (chunked) GDN prefill.
    oracle::Options opt = m.options();
    opt.gdn_prefill = GdnPrefill::chunked;
    opt.q8_1_activations = acts == "q8_1";
    m.set_options(opt);
    Bank b = make_bank(m, ids, static_cast<int>(steps), static_cast<int>(k));
    b.model_sha256 = sha256_file_hex(identity_file(model).string());
    b.model_name = fs::path(model).filename().string();
    if (b.model_name.empty()) b.model_name = fs::path(model).parent_path().filename().string();
    b.arm_tag = "cpu-oracle/" + acts + "/gdn-chunked";
    if (c.has_linear() || c.has_kda()) {  // Gated DeltaNet or Kimi delta attention: two prefill forms
      b.measured_noise_rel = reference_noise_rel(m, b.prompt, b.tokens);
      b.calibration_note = std::string("C_ref = max over steps of max|chunked - recurrent ") +
                           (c.has_kda() ? "KDA" : "GDN") +
                           " prefill logits| / |top1|, teacher-forced along the banked tokens";
    } else {
      b.measured_noise_rel = 0;
      b.calibration_note =
          "model has no GDN layers: chunked and recurrent prefill are the same computation, C_ref = 0";
    }
    b.band_coeff = band_coeff_for(b.measured_noise_rel);
    write_bank(b, out);
    std::cerr << "memra-bank: " << b.tokens.size() << " steps, top-" << k << ", model sha256 "
              << b.model_sha256.substr(0, 16) << "..., C_ref " << b.measured_noise_rel
              << ", band_coeff " << b.band_coeff << " -> " << out << "\n";
  } catch (const std::exception& e) {
    std::cerr << "memra-bank: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
