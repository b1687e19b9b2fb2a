// The release-name view of a DeepSeek-V4 checkpoint (dsv4_release.h).
#include "model/dsv4_release.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>

#include "memra/error.h"
#include "memra/quant.h"
#include "memra/weights.h"
#include "model/names.h"
#include "model/weight_map.h"

namespace memra::detail {

namespace {

struct Rename {
  const char* release;  // after "layers.N."
  const char* hf;       // after "model.layers.N."
};
// transformers 5.17 conversion_mapping.py "deepseek_v4", its regex renames applied in order,
// written out per tensor.
constexpr Rename kLayer[] = {
    {"attn_norm.weight", "input_layernorm.weight"},
    {"ffn_norm.weight", "post_attention_layernorm.weight"},
    {"attn.wq_a.weight", "self_attn.q_a_proj.weight"},
    {"attn.q_norm.weight", "self_attn.q_a_norm.weight"},
    {"attn.wq_b.weight", "self_attn.q_b_proj.weight"},
    {"attn.wkv.weight", "self_attn.kv_proj.weight"},
    {"attn.kv_norm.weight", "self_attn.kv_norm.weight"},
    {"attn.wo_a.weight", "self_attn.o_a_proj.weight"},
    {"attn.wo_b.weight", "self_attn.o_b_proj.weight"},
    {"attn.attn_sink", "self_attn.sinks"},
    {"attn.compressor.wkv.weight", "self_attn.compressor.kv_proj.weight"},
    {"attn.compressor.wgate.weight", "self_attn.compressor.gate_proj.weight"},
    {"attn.compressor.ape", "self_attn.compressor.position_bias"},
    {"attn.compressor.norm.weight", "self_attn.compressor.kv_norm.weight"},
    {"attn.indexer.compressor.wkv.weight", "self_attn.compressor.indexer.kv_proj.weight"},
    {"attn.indexer.compressor.wgate.weight", "self_attn.compressor.indexer.gate_proj.weight"},
    {"attn.indexer.compressor.ape", "self_attn.compressor.indexer.position_bias"},
    {"attn.indexer.compressor.norm.weight", "self_attn.compressor.indexer.kv_norm.weight"},
    {"attn.indexer.wq_b.weight", "self_attn.compressor.indexer.q_b_proj.weight"},
    {"attn.indexer.weights_proj.weight", "self_attn.compressor.indexer.scorer.weights_proj.weight"},
    {"hc_attn_fn", "attn_hc.fn"},
    {"hc_attn_base", "attn_hc.base"},
    {"hc_attn_scale", "attn_hc.scale"},
    {"hc_ffn_fn", "ffn_hc.fn"},
    {"hc_ffn_base", "ffn_hc.base"},
    {"hc_ffn_scale", "ffn_hc.scale"},
    {"ffn.gate.weight", "mlp.gate.weight"},
    {"ffn.gate.bias", "mlp.gate.e_score_correction_bias"},
    {"ffn.gate.tid2eid", "mlp.gate.tid2eid"},
    {"ffn.shared_experts.w1.weight", "mlp.shared_experts.gate_proj.weight"},
    {"ffn.shared_experts.w3.weight", "mlp.shared_experts.up_proj.weight"},
    {"ffn.shared_experts.w2.weight", "mlp.shared_experts.down_proj.weight"},
};
constexpr Rename kModel[] = {
    {"embed.weight", "model.embed_tokens.weight"}, {"head.weight", "lm_head.weight"},
    {"norm.weight", "model.norm.weight"},          {"hc_head_fn", "model.hc_head.hc_fn"},
    {"hc_head_base", "model.hc_head.hc_base"},     {"hc_head_scale", "model.hc_head.hc_scale"},
};

// "layers.<N>.<rest>" -> {N, rest}; nullopt for other names.
bool split_layer(const std::string& n, std::string& index, std::string& rest) {
  if (!n.starts_with("layers.")) return false;
  const size_t dot = n.find('.', 7);
  if (dot == std::string::npos || dot == 7) return false;
  index = n.substr(7, dot - 7);
  for (char ch : index)
    if (ch < '0' || ch > '9') return false;
  rest = n.substr(dot + 1);
  return true;
}

// "ffn.experts.<E>.w<k>.weight" -> "mlp.experts.<E>.<gate|down|up>_proj.weight".
bool expert_name(const std::string& rest, std::string& hf) {
  static const std::string head = "ffn.experts.";
  if (!rest.starts_with(head)) return false;
  const size_t dot = rest.find('.', head.size());
  if (dot == std::string::npos) return false;
  const std::string e = rest.substr(head.size(), dot - head.size()), w = rest.substr(dot + 1);
  const char* proj = w == "w1.weight"   ? "gate_proj"
                     : w == "w3.weight" ? "up_proj"
                     : w == "w2.weight" ? "down_proj"
                                        : nullptr;
  if (!proj || e.empty()) return false;
  hf = "mlp.experts." + e + "." + proj + ".weight";
  return true;
}

// The E8M0 exponent of a scale value: its byte (F8_E8M0, or U8 as transformers reads raw
// exponents), or the exponent of a power of two in an F32 container.
uint8_t e8m0_of(const TensorView& s, int64_t i) {
  const auto* p = reinterpret_cast<const uint8_t*>(s.data.data());
  uint8_t e = 0;
  if (s.type == DType::F8_E8M0 || s.type == DType::U8) {
    e = p[i];
  } else if (s.type == DType::F32) {
    float v;
    std::memcpy(&v, p + 4 * i, 4);
    int exp = 0;
    const float m = std::frexp(v, &exp);  // v = m * 2^exp, m in [0.5, 1)
    if (!(v > 0) || m != 0.5f || exp - 1 < -127 || exp - 1 > 127)
      fail("scale tensor '", s.name, "' value ", i, " = ", v, " is not a power of two in [2^-127, 2^127]");
    e = static_cast<uint8_t>(exp - 1 + 127);
  } else {
    fail("scale tensor '", s.name, "' of type ", dtype_name(s.type), " (F8_E8M0, U8 or F32)");
  }
  if (e == 0xff) fail("scale tensor '", s.name, "' value ", i, " is E8M0's NaN (0xFF)");
  return e;
}

}  // namespace

bool is_dsv4_release(const WeightSource& src, const ModelConfig& c) {
  return c.family == Family::DeepseekV4 && src.find("embed.weight") != nullptr;
}

std::string dsv4_hf_name(const std::string& n) {
  for (const Rename& r : kModel)
    if (n == r.release) return r.hf;
  std::string index, rest, hf;
  if (!split_layer(n, index, rest)) return n;
  const std::string prefix = "model.layers." + index + ".";
  if (expert_name(rest, hf)) return prefix + hf;
  for (const Rename& r : kLayer)
    if (rest == r.release) return prefix + r.hf;
  return n;
}

std::string dsv4_release_name(const std::string& hf) {
  for (const Rename& r : kModel)
    if (hf == r.hf) return r.release;
  static const std::string head = "model.layers.";
  if (!hf.starts_with(head)) return {};
  const size_t dot = hf.find('.', head.size());
  if (dot == std::string::npos) return {};
  const std::string index = hf.substr(head.size(), dot - head.size()), rest = hf.substr(dot + 1);
  const std::string prefix = "layers." + index + ".";
  for (const Rename& r : kLayer)
    if (rest == r.hf) return prefix + r.release;
  static const std::string experts = "mlp.experts.";
  if (rest.starts_with(experts)) {
    const size_t d = rest.find('.', experts.size());
    if (d == std::string::npos) return {};
    const std::string e = rest.substr(experts.size(), d - experts.size()), w = rest.substr(d + 1);
    const char* k = w == "gate_proj.weight"   ? "w1"
                    : w == "up_proj.weight"   ? "w3"
                    : w == "down_proj.weight" ? "w2"
                                              : nullptr;
    if (k) return prefix + "ffn.experts." + e + "." + k + ".weight";
  }
  return {};
}

Dsv4ReleaseView::Dsv4ReleaseView(const WeightSource& src) : src_(src) {
  auto add = [&](TensorView v) {
    const std::string name = v.name;
    if (!views_.emplace(name, std::move(v)).second) fail(src_.path(), ": two release tensors map to '", name, "'");
    names_.push_back(name);
  };
  for (const std::string& n : src_.tensor_names()) {
    if (n.starts_with("mtp.")) continue;
    const TensorView& t = *src_.find(n);
    if (n.ends_with(".scale")) {
      const std::string weight = n.substr(0, n.size() - 6) + ".weight";
      const TensorView* w = src_.find(weight);
      if (!w) fail(src_.path(), ": scale tensor '", n, "' without its matrix '", weight, "'");
      if (w->type == DType::I8) continue;  // folded into the MXFP4 tensor below
      if (w->type != DType::F8_E4M3)
        fail(src_.path(), ": scale tensor '", n, "' beside a ", dtype_name(w->type),
             " matrix (FP8 E4M3 matrices and FP4 experts carry scales)");
      TensorView v = t;
      v.name = names::block_scale_of(dsv4_hf_name(weight));
      if (t.type == DType::F8_E8M0 || t.type == DType::U8) {  // exponents (U8: as transformers reads them)
        for (int64_t i = 0; i < t.nelements(); ++i) e8m0_of(t, i);
        v.type = DType::F8_E8M0;
      }
      add(std::move(v));
      continue;
    }
    TensorView v = t;
    v.name = dsv4_hf_name(n);
    if (t.type == DType::I8 && n.ends_with(".weight")) {  // FP4: two E2M1 codes per byte
      const std::string sn = n.substr(0, n.size() - 7) + ".scale";
      const TensorView* s = src_.find(sn);
      if (!s) fail(src_.path(), ": FP4 matrix '", n, "' without its scale tensor '", sn, "'");
      if (t.ne.size() != 2) fail(src_.path(), ": FP4 matrix '", n, "' of ", t.ne.size(), " dimensions (2 expected)");
      const int64_t rows = t.ne[1], cols = 2 * t.ne[0];
      if (cols % kMxfp4BlockSize != 0)
        fail(src_.path(), ": FP4 matrix '", n, "': ", cols, " columns are not whole blocks of ", kMxfp4BlockSize);
      const int64_t nb = cols / kMxfp4BlockSize;
      if (s->ne.size() != 2 || s->ne[0] != nb || s->ne[1] != rows)
        fail(src_.path(), ": scale tensor '", sn, "' has shape ", shape_str(s->ne), ", expected ",
             shape_str({nb, rows}), " (one per 32 values of a [", rows, ", ", cols, "] FP4 matrix)");
      std::vector<std::byte>& out = owned_.emplace_back(static_cast<size_t>(rows * nb) * sizeof(BlockMxfp4));
      auto* blocks = reinterpret_cast<BlockMxfp4*>(out.data());
      const auto* packed = reinterpret_cast<const uint8_t*>(t.data.data());
      auto code = [&](int64_t r, int64_t c) {
        return static_cast<uint8_t>((packed[r * (cols / 2) + c / 2] >> (4 * (c & 1))) & 0xf);
      };
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t b = 0; b < nb; ++b) {
          BlockMxfp4& blk = blocks[r * nb + b];
          blk.e = e8m0_of(*s, r * nb + b);
          for (int64_t j = 0; j < 16; ++j)
            blk.qs[j] = static_cast<uint8_t>(code(r, b * 32 + j) | (code(r, b * 32 + j + 16) << 4));
        }
      v.type = DType::MXFP4;
      v.ne = {cols, rows};
      v.data = std::span<const std::byte>(out);
    }
    add(std::move(v));
  }
}

const TensorView* Dsv4ReleaseView::find(std::string_view name) const {
  auto it = views_.find(name);
  return it == views_.end() ? nullptr : &it->second;
}

namespace {

// The E8M0 exponent of the smallest power of two s with amax / s <= limit (1 for an all-zero
// block).
uint8_t e8m0_for(float amax, float limit) {
  if (amax == 0) return 127;
  int ex = 0;
  const float m = std::frexp(amax / limit, &ex);  // amax / limit = m * 2^ex, m in [0.5, 1)
  const int k = m == 0.5f ? ex - 1 : ex;
  if (k < -127 || k > 127) fail("to_dsv4_release: block maximum ", amax, " out of E8M0's range");
  return static_cast<uint8_t>(k + 127);
}

std::vector<float> f32_values(const TensorView& t) {
  if (t.type != DType::F32) fail("to_dsv4_release: tensor '", t.name, "' is ", dtype_name(t.type), ", not F32");
  std::vector<float> v(static_cast<size_t>(t.nelements()));
  std::memcpy(v.data(), t.data.data(), v.size() * sizeof(float));
  return v;
}

template <typename T>
std::vector<std::byte> bytes_of(const std::vector<T>& v) {
  std::vector<std::byte> b(v.size() * sizeof(T));
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

// w [rows, cols] as E4M3 codes and E8M0 scales per 128 x 128 block.
void add_fp8(MemorySource& out, const std::string& base, const float* w, int64_t rows, int64_t cols) {
  constexpr int64_t B = 128;
  const int64_t br = (rows + B - 1) / B, bc = (cols + B - 1) / B;
  std::vector<uint8_t> e(static_cast<size_t>(br * bc)), q(static_cast<size_t>(rows * cols));
  for (int64_t i = 0; i < br; ++i)
    for (int64_t j = 0; j < bc; ++j) {
      float amax = 0;
      for (int64_t r = i * B; r < std::min(rows, (i + 1) * B); ++r)
        for (int64_t c = j * B; c < std::min(cols, (j + 1) * B); ++c) amax = std::max(amax, std::abs(w[r * cols + c]));
      e[static_cast<size_t>(i * bc + j)] = e8m0_for(amax, 448.0f);
    }
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      q[static_cast<size_t>(r * cols + c)] =
          f32_to_e4m3(w[r * cols + c] / e8m0_to_f32(e[static_cast<size_t>((r / B) * bc + c / B)]));
  out.add(base + ".weight", DType::F8_E4M3, {cols, rows}, bytes_of(q));
  out.add(base + ".scale", DType::F8_E8M0, {bc, br}, bytes_of(e));
}

// w [rows, cols] as E2M1 codes, two per byte (the even column low), and E8M0 scales per 32.
void add_fp4(MemorySource& out, const std::string& base, const float* w, int64_t rows, int64_t cols) {
  if (cols % 32 != 0) fail("to_dsv4_release: '", base, "' has ", cols, " columns, not whole blocks of 32");
  std::vector<uint8_t> e(static_cast<size_t>(rows * cols / 32)), packed(static_cast<size_t>(rows * cols / 2));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t b = 0; b < cols / 32; ++b) {
      const float* x = w + r * cols + b * 32;
      float amax = 0;
      for (int j = 0; j < 32; ++j) amax = std::max(amax, std::abs(x[j]));
      const uint8_t ex = e8m0_for(amax, 6.0f);
      e[static_cast<size_t>(r * cols / 32 + b)] = ex;
      for (int j = 0; j < 32; ++j) {
        const uint8_t code = f32_to_e2m1(x[j] / e8m0_to_f32(ex));
        packed[static_cast<size_t>((r * cols + b * 32 + j) / 2)] |= static_cast<uint8_t>(code << (4 * (j & 1)));
      }
    }
  out.add(base + ".weight", DType::I8, {cols / 2, rows}, bytes_of(packed));
  out.add(base + ".scale", DType::F8_E8M0, {cols / 32, rows}, bytes_of(e));
}

bool fp8_projection(const std::string& release) {
  for (const char* p : {".attn.wq_a.", ".attn.wq_b.", ".attn.wkv.", ".attn.wo_a.", ".attn.wo_b.", ".compressor.wkv.",
                        ".compressor.wgate.", ".indexer.wq_b.", ".shared_experts."})
    if (release.find(p) != std::string::npos) return true;
  return false;
}

}  // namespace

MemorySource to_dsv4_release(const MemorySource& hf) {
  MemorySource out(MetaStyle::Hf, hf.path());
  for (const auto& [k, v] : hf.all_meta()) out.set(k, v);
  for (const std::string& name : hf.tensor_names()) {
    if (name.starts_with("mtp.")) continue;
    const TensorView& t = *hf.find(name);
    if (name.ends_with("mlp.experts.gate_up_proj") || name.ends_with("mlp.experts.down_proj")) {
      const bool gate_up = name.ends_with("gate_up_proj");
      const size_t at = std::string("model.layers.").size();
      const std::string prefix = "layers." + name.substr(at, name.find('.', at) - at) + ".";
      const std::vector<float> w = f32_values(t);
      const int64_t cols = t.ne[0], rows = t.ne[1], E = t.ne[2];
      for (int64_t e = 0; e < E; ++e) {
        const float* slab = w.data() + e * rows * cols;
        const std::string base = prefix + "ffn.experts." + std::to_string(e) + ".";
        if (gate_up) {
          add_fp4(out, base + "w1", slab, rows / 2, cols);
          add_fp4(out, base + "w3", slab + (rows / 2) * cols, rows / 2, cols);
        } else {
          add_fp4(out, base + "w2", slab, rows, cols);
        }
      }
      continue;
    }
    const std::string rel = dsv4_release_name(name);
    if (rel.empty()) fail("to_dsv4_release: no release name for '", name, "'");
    if (fp8_projection(rel)) {
      const std::vector<float> w = f32_values(t);
      add_fp8(out, rel.substr(0, rel.size() - 7), w.data(), t.ne[1], t.ne[0]);
    } else if (rel == "embed.weight" || rel == "head.weight" || rel.ends_with("ffn.gate.weight") ||
               rel.ends_with("indexer.weights_proj.weight")) {
      const std::vector<float> w = f32_values(t);
      std::vector<uint16_t> b(w.size());
      for (size_t i = 0; i < w.size(); ++i) b[i] = f32_to_bf16(w[i]);
      out.add(rel, DType::BF16, t.ne, bytes_of(b));
    } else {
      out.add(rel, t.type, t.ne, std::vector<std::byte>(t.data.begin(), t.data.end()));
    }
  }
  return out;
}

}  // namespace memra::detail

namespace memra {
MemorySource to_dsv4_release_source(const ModelConfig& c, const ModelWeights& w) {
  if (c.family != Family::DeepseekV4) fail("to_dsv4_release_source: a ", family_arch(c.family), " model");
  return detail::to_dsv4_release(to_hf_source(c, w));
}
}  // namespace memra
