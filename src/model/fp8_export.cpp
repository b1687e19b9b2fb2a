// to_hf_fp8_source (memra/weights.h): an HF source with its projections block-scaled FP8, the
// form DeepSeek-V3 and GLM-5 release (the loaders read it back through detail::tensor_values).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "memra/dtype.h"
#include "memra/error.h"
#include "memra/weights.h"
#include "model/names.h"

namespace memra {

namespace {

// A projection as transformers builds it (an nn.Linear the FP8 quantizer replaces): a 2-D
// ".weight" that is not the embedding, the lm_head or the router.
bool fp8_projection(const std::string& name, const TensorView& t) {
  if (t.ne.size() != 2 || t.ne[1] == 1 || t.type != DType::F32 || !name.ends_with(".weight")) return false;
  for (const char* keep : {"embed_tokens.weight", "lm_head.weight", "mlp.gate.weight"})
    if (name.ends_with(keep)) return false;
  return true;
}

}  // namespace

MemorySource to_hf_fp8_source(const ModelConfig& c, const ModelWeights& w) {
  if (c.family == Family::DeepseekV4)
    fail("to_hf_fp8_source: DeepSeek-V4's FP8 form is its release (to_dsv4_release_source)");
  MemorySource s = to_hf_source(c, w);
  constexpr int64_t B = 128;
  for (const std::string& name : s.tensor_names()) {
    const TensorView t = *s.find(name);
    if (!fp8_projection(name, t)) continue;
    const int64_t cols = t.ne[0], rows = t.ne[1], bc = (cols + B - 1) / B, br = (rows + B - 1) / B;
    std::vector<float> v(static_cast<size_t>(rows * cols));
    std::memcpy(v.data(), t.data.data(), v.size() * sizeof(float));
    std::vector<float> scale(static_cast<size_t>(bc * br), 0.0f);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t k = 0; k < cols; ++k) {
        float& m = scale[static_cast<size_t>((r / B) * bc + k / B)];
        m = std::max(m, std::abs(v[static_cast<size_t>(r * cols + k)]));
      }
    for (float& m : scale) m = m == 0 ? 1.0f : m / 448.0f;
    std::vector<std::byte> codes(v.size());
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t k = 0; k < cols; ++k)
        codes[static_cast<size_t>(r * cols + k)] = static_cast<std::byte>(
            f32_to_e4m3(v[static_cast<size_t>(r * cols + k)] / scale[static_cast<size_t>((r / B) * bc + k / B)]));
    const std::vector<int64_t> ne = t.ne;
    s.add(name, DType::F8_E4M3, ne, std::move(codes));
    s.add_f32(names::block_scale_of(name), {bc, br}, scale);
  }
  return s;
}

}  // namespace memra
