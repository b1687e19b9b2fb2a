// memra/testing/fixtures.h — what the oracle tests and the GPU gates share about their models:
// the unit preset's configuration (memra/fixture.h Preset::Unit: the one fixture system), seeded
// prompts, whole-row error and bit equality, and a whole model flattened by tensor name (the
// layer schema's walk, memra/layer_schema.h).
//
// provides: unit_config, prompt, rel_err, bit_equal, Flat, flatten
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "memra/config.h"
#include "memra/fixture.h"
#include "memra/weights.h"

namespace memra::testing_fixtures {

// The unit preset (D = 64, 4 layers of the hybrids or 2 of qwen3, untied) with `vocab` tokens.
inline ModelConfig unit_config(Family f, int64_t vocab = 512) {
  return fixture::fixture_config({.family = f, .preset = fixture::Preset::Unit, .n_vocab = vocab});
}

inline std::vector<int32_t> prompt(int64_t n, int64_t vocab, uint32_t seed = 1) {
  std::vector<int32_t> p(static_cast<size_t>(n));
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 7;
  for (auto& t : p) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    t = static_cast<int32_t>((s >> 33) % static_cast<uint64_t>(vocab));
  }
  return p;
}

// max |a - b| / max |b|: the relative error of a whole logit row.
inline double rel_err(std::span<const float> a, std::span<const float> b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    num = std::max(num, std::abs(static_cast<double>(a[i]) - b[i]));
    den = std::max(den, std::abs(static_cast<double>(b[i])));
  }
  return den > 0 ? num / den : num;
}

inline bool bit_equal(std::span<const float> a, std::span<const float> b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](float x, float y) {
           return std::bit_cast<uint32_t>(x) == std::bit_cast<uint32_t>(y);
         });
}

// Every tensor of a canonical weight set with a readable name, for whole-model comparisons.
using Flat = std::vector<std::pair<std::string, std::span<const float>>>;
inline void flatten_layer(const LayerWeights& L, const std::string& p, Flat& out) {
  for_each_tensor(
      [&](std::string_view name, const auto& t) {
        if constexpr (std::is_same_v<std::remove_cvref_t<decltype(t)>, Matrix>)
          out.emplace_back(p + std::string(name), t.data);
        else
          out.emplace_back(p + std::string(name), t);
      },
      L);
}
inline Flat flatten(const ModelWeights& w) {
  Flat out;
  out.emplace_back("embed", w.embed.data);
  out.emplace_back("output_norm", w.output_norm);
  out.emplace_back("output", w.output.data);
  for (size_t i = 0; i < w.layers.size(); ++i) flatten_layer(w.layers[i], "layer" + std::to_string(i) + ".", out);
  if (w.mtp) {
    out.emplace_back("mtp.eh_proj", w.mtp->eh_proj.data);
    out.emplace_back("mtp.enorm", w.mtp->enorm);
    out.emplace_back("mtp.hnorm", w.mtp->hnorm);
    out.emplace_back("mtp.final_norm", w.mtp->final_norm);
    flatten_layer(w.mtp->layer, "mtp.layer.", out);
  }
  return out;
}

}  // namespace memra::testing_fixtures
