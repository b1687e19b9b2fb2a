// memra/rope_freq.h — a rope table's per-pair frequencies, plain or YaRN: the one definition the
// CPU oracle and the GPU engine both rotate with (DeepSeek-V4's sliding and compressed tables).
//
// provides: Yarn, rope_inv_freq, dsv4_rope_freq
#pragma once

#include <cstdint>
#include <vector>

namespace memra {

struct ModelConfig;

// YaRN's parameters as transformers reads them (the attention factor is 1 in DeepSeek-V4, so it
// has no field); factor 0 means plain rope.
struct Yarn {
  double factor = 0;
  int64_t orig_ctx = 0;
  double beta_fast = 32, beta_slow = 1;
};

// theta^(-2i/n_rot) for i < n_rot/2 in f64, or with YaRN (factor > 0) blended towards
// theta^(-2i/n_rot)/factor for the slow dims (transformers' _compute_yarn_parameters with
// truncation).
std::vector<double> rope_inv_freq(int64_t n_rot, double theta, const Yarn& yarn);

// DeepSeek-V4's two tables (docs/deepseek-v4.md): the sliding layers' (rope_theta, plain) or the
// compressed layers' (compress_rope_theta, with the config's YaRN), which their compressors and
// indexer use too.
std::vector<double> dsv4_rope_freq(const ModelConfig& c, bool compressed);

}  // namespace memra
