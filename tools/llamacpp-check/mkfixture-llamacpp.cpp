// mkfixture-llamacpp — memra's tiny/bank fixtures reshaped to what llama.cpp can load.
//
// NOT part of the memra build: tools/llamacpp-crosscheck.sh compiles it against the memra
// headers and a memra build's static libraries (docs/interop.md).
//
//   mkfixture-llamacpp --family F --preset tiny|bank --type T[,T...] --gguf FILE_WITH_{type}
//                      [--repo DIR]
//
// memra-mkfixture's own files follow HF semantics, and two of their shapes are outside what
// llama.cpp's qwen3next/qwen35/qwen35moe loaders accept (docs/interop.md, "Findings"):
//   1. linear-attention key head dim != value head dim (tiny: d_k 8, d_v 16). llama.cpp sizes
//      attn_qkv/attn_gate/ssm_norm/ssm_out with ssm.state_size as the value head dim too.
//      Here d_k := d_v (16), keeping the 2 key heads / 4 value heads (tiled V heads stay tested).
//   2. qwen3next's dense layer among MoE layers (mlp_only_layers): llama.cpp requires the MoE
//      tensors in every layer. Here every qwen3next layer is MoE.
// and one NVFP4 convention differs:
//   3. write_fixture_gguf gives every NVFP4 tensor a "<base>.scale", but llama.cpp loads a
//      .scale only for the tensors of its generic list (llama-model.cpp, "generic pass") and
//      output.weight. Two memra NVFP4 tensors are outside it: token_embd (its get_rows and the
//      tied lm_head read the NVFP4 rows as they are) and qwen3next's blk.N.ssm_ba; llama.cpp
//      rejects such a file ("done_getting_tensors: wrong number of tensors"). Here those are
//      re-quantized from the f32 rows with tensor scale 1 and written without a .scale.
//   4. llama.cpp's qwen3next graph (models/qwen3next.cpp) loads blk.N.attn_qkv/attn_gate/
//      ssm_out .scale through the generic pass but never applies them (build_lora_mm without
//      the scale; its qwen35/qwen35moe graphs do apply theirs), so for qwen3next those tensors
//      are written at tensor scale 1 without a .scale too. This is a llama.cpp bug; memra's
//      y = (W x) * scale is what llama.cpp does everywhere else.
// Everything else (weights' draw, names, metadata, tokenizer) is write_fixture_gguf's, so the
// check still covers memra's writer and conventions; memra's oracle reads these same files.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "memra/error.h"
#include "memra/fixture.h"
#include "memra/gguf.h"
#include "memra/quant.h"
#include "memra/weights.h"

namespace {

using namespace memra;

DType type_from_name(const std::string& s) {
  if (s == "f32") return DType::F32;
  if (s == "bf16") return DType::BF16;
  if (s == "q8_0") return DType::Q8_0;
  if (s == "nvfp4") return DType::NVFP4;
  fail("unknown --type '", s, "' (f32, bf16, q8_0, nvfp4)");
}

// NVFP4 tensors whose "<base>.scale" llama.cpp does not load or does not apply (3 and 4 above).
bool llamacpp_has_no_scale(const std::string& arch, const std::string& name) {
  if (name == "token_embd.weight") return true;
  if (!name.starts_with("blk.")) return false;
  if (name.ends_with(".ssm_ba.weight")) return true;
  return arch == "qwen3next" && (name.ends_with(".attn_qkv.weight") || name.ends_with(".attn_gate.weight") ||
                                 name.ends_with(".ssm_out.weight"));
}

std::string scale_of(const std::string& weight) { return weight.substr(0, weight.size() - 7) + ".scale"; }

// Rewrites `path` with those tensors re-quantized to NVFP4 at tensor scale 1 from the canonical
// f32 rows, and their .scale tensors dropped.
void drop_unloaded_scales(const std::string& path, const MemorySource& canonical) {
  std::vector<std::byte> bytes;
  {
    const auto in = GgufFile::open(path);
    const std::string arch = in->architecture();
    auto no_scale = [&](const std::string& n) { return llamacpp_has_no_scale(arch, n); };
    std::vector<std::string> dropped;
    for (const TensorView& t : in->tensors())
      if (t.type == DType::NVFP4 && no_scale(t.name) && in->find(scale_of(t.name)))
        dropped.push_back(scale_of(t.name));
    if (dropped.empty()) return;
    GgufWriter out;
    for (const std::string& k : in->keys()) out.set(k, *in->kv(k));
    for (const TensorView& t : in->tensors()) {
      if (std::find(dropped.begin(), dropped.end(), t.name) != dropped.end()) continue;
      if (t.type != DType::NVFP4 || !no_scale(t.name)) {
        out.add_tensor(t.name, t.type, t.ne, t.data);
        continue;
      }
      const TensorView& f = canonical.tensor(t.name);
      if (f.type != DType::F32 || f.ne != t.ne) fail(path, ": canonical ", t.name, " is not the f32 twin of the stored one");
      const int64_t ncols = t.ne[0], nrows = t.nelements() / ncols;
      const int64_t rb = row_bytes(DType::NVFP4, ncols);
      std::vector<std::byte> q(static_cast<size_t>(rb * nrows));
      std::vector<float> row(static_cast<size_t>(ncols));
      for (int64_t r = 0; r < nrows; ++r) {
        std::memcpy(row.data(), f.data.data() + r * ncols * sizeof(float), row.size() * sizeof(float));
        quantize_row_nvfp4(row.data(), reinterpret_cast<BlockNvfp4*>(q.data() + r * rb), ncols, 1.0f);
      }
      out.add_tensor(t.name, t.type, t.ne, q);
    }
    bytes = out.to_bytes();
  }  // the input mapping is closed before the file is replaced
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f || std::fwrite(bytes.data(), 1, bytes.size(), f) != bytes.size() || std::fclose(f) != 0)
    fail(path, ": rewrite failed");
}

}  // namespace

int main(int argc, char** argv) {
  std::string family, preset = "tiny", types = "f32", gguf, repo;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) {
      std::cerr << "mkfixture-llamacpp: " << a << " needs a value\n";
      return 2;
    }
    const std::string v = argv[++i];
    if (a == "--family") family = v;
    else if (a == "--preset") preset = v;
    else if (a == "--type") types = v;
    else if (a == "--gguf") gguf = v;
    else if (a == "--repo") repo = v;
    else {
      std::cerr << "mkfixture-llamacpp: unknown argument '" << a << "'\n";
      return 2;
    }
  }
  if (family.empty() || gguf.find("{type}") == std::string::npos) {
    std::cerr << "usage: mkfixture-llamacpp --family F --preset tiny|bank --type T[,T...] --gguf FILE_WITH_{type} [--repo DIR]\n";
    return 2;
  }
  try {
    fixture::FixtureSpec spec;
    spec.family = fixture::family_from_name(family);
    spec.preset = fixture::preset_from_name(preset);
    if (spec.preset != fixture::Preset::Tiny && spec.preset != fixture::Preset::Bank)
      fail("--preset ", preset, ": only tiny and bank are built in memory");
    ModelConfig c = fixture::fixture_config(spec);
    if (c.has_linear()) c.ssm_d_k = c.ssm_d_v;                                   // finding 1
    if (c.family == Family::Qwen3Next) c.ffn_kind.assign(c.ffn_kind.size(), FfnKind::Moe);  // finding 2
    c.validate();
    const uint64_t seed = fixture::fixture_seed(spec);
    const auto tok_json = fixture::find_qwen3_tokenizer(repo);
    if (!tok_json) fail("no Qwen3 tokenizer.json in the npm cache (tools/fetch-tokenizers.sh)");
    const TokenizerSpec tspec = fixture::fixture_tokenizer_spec(c, *tok_json);
    const ModelWeights w = fixture::fixture_weights(c, seed);
    const MemorySource canonical = to_gguf_source(c, w);
    const std::string name = std::string(family_arch(c.family)) + "-" + preset + "-llamacpp-seed" + std::to_string(seed);
    for (size_t a = 0, b; a <= types.size(); a = b + 1) {
      b = types.find(',', a);
      if (b == std::string::npos) b = types.size();
      const std::string t = types.substr(a, b - a);
      std::string path = gguf;
      path.replace(path.find("{type}"), 6, t);
      const DType dt = type_from_name(t);
      fixture::write_fixture_gguf(path, c, w, &tspec, dt, name);
      if (dt == DType::NVFP4) drop_unloaded_scales(path, canonical);  // findings 3 and 4
    }
    std::printf("%s\n", c.summary().c_str());
  } catch (const std::exception& e) {
    std::cerr << "mkfixture-llamacpp: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
