// DeepSeek-V4's oracle pieces (src/oracle/dsv4.cpp) against values worked out here from the
// equations of docs/deepseek-v4.md: the mHC mix and its Sinkhorn, YaRN's frequency blend, the
// inverse rotation, gated pooling, indexer scores, sink attention, the grouped output, routing
// and the clamped SwiGLU. Each case is built so that a plausible mistake (rows for columns in the
// Sinkhorn, the mix's direction, the sink scaled like a score, the bias in the weights) changes
// the expected value.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "memra/error.h"
#include "memra/oracle.h"
#include "memra/quant.h"
#include "memra/weights.h"
#include "oracle/ops.h"

namespace memra::oracle {
namespace {

using ops::HcMix;

Matrix mat(int64_t r, int64_t c, std::vector<float> v) {
  Matrix m(r, c);
  m.data = std::move(v);
  return m;
}

double sig(double x) { return 1.0 / (1.0 + std::exp(-x)); }

TEST(Dsv4Hc, MixMatchesTheEquationsOnOneStream) {
  // N = 1, D = 2: h = X / rms(X); z = fn h (3 rows: pre, post, comb).
  const float X[2] = {3.0f, 4.0f};
  const double rms = std::sqrt((9.0 + 16.0) / 2.0 + 1e-6);
  const float h0 = static_cast<float>(3.0 / rms), h1 = static_cast<float>(4.0 / rms);
  const Matrix fn = mat(3, 2, {1.0f, 0.0f, 0.0f, 1.0f, 0.5f, 0.5f});
  const std::vector<float> base = {0.125f, -0.25f, 0.375f}, scale = {2.0f, 0.5f, 1.0f};
  const HcMix m = ops::hc_mix(X, 1, 2, fn, base, scale, 3, 1e-6, 1e-6);
  EXPECT_NEAR(m.pre[0], sig(h0 * 2.0 + 0.125) + 1e-6, 1e-12);
  EXPECT_NEAR(m.post[0], 2.0 * sig(h1 * 0.5 - 0.25), 1e-12);
  // comb: softmax of one entry is 1, + eps; column then (row, column) twice, each / (sum + eps)
  double c = 1.0 + 1e-6;
  for (int i = 0; i < 5; ++i) c = c / (c + 1e-6);
  EXPECT_NEAR(m.comb[0], c, 1e-15);
}

TEST(Dsv4Hc, SinkhornLeavesRowsAndColumnsSummingToOne) {
  // N = 4 with a comb block far from doubly stochastic: after 20 iterations every row and column
  // sums to 1 (rows within 1e-4 here: 7.5e-5 by a separate f64 computation); after 1 only the
  // columns do (columns are normalised last).
  const int64_t N = 4, D = 3, M = (2 + N) * N;
  std::vector<float> X(static_cast<size_t>(N * D));
  for (size_t i = 0; i < X.size(); ++i) X[i] = static_cast<float>(std::sin(1.0 + static_cast<double>(i)));
  Matrix fn(M, N * D);
  for (size_t i = 0; i < fn.data.size(); ++i) fn.data[i] = static_cast<float>(std::cos(0.7 * static_cast<double>(i)));
  std::vector<float> base(static_cast<size_t>(M));
  for (int64_t i = 0; i < M; ++i)
    base[static_cast<size_t>(i)] = static_cast<float>(0.3 * static_cast<double>(i % 5) - 0.6);
  const std::vector<float> scale = {1.0f, 1.0f, 1.0f};
  auto sums = [&](const HcMix& m, bool rows) {
    std::vector<double> s(static_cast<size_t>(N), 0.0);
    for (int64_t i = 0; i < N; ++i)
      for (int64_t j = 0; j < N; ++j) s[static_cast<size_t>(rows ? i : j)] += m.comb[static_cast<size_t>(i * N + j)];
    return s;
  };
  const HcMix m20 = ops::hc_mix(X.data(), N, D, fn, base, scale, 20, 1e-6, 1e-6);
  for (double s : sums(m20, true)) EXPECT_NEAR(s, 1.0, 1e-4);
  for (double s : sums(m20, false)) EXPECT_NEAR(s, 1.0, 1e-5);
  const HcMix m1 = ops::hc_mix(X.data(), N, D, fn, base, scale, 1, 1e-6, 1e-6);
  for (double s : sums(m1, false)) EXPECT_NEAR(s, 1.0, 1e-5);
  double worst_row = 0;
  for (double s : sums(m1, true)) worst_row = std::max(worst_row, std::abs(s - 1.0));
  EXPECT_GT(worst_row, 0.05) << "one iteration normalises the columns only; rows came out balanced";
}

TEST(Dsv4Hc, ExpandCarriesSourceStreamsIntoDestinations) {
  // comb[j][k] carries source j into destination k: comb = [[0, 1], [0, 0]] moves stream 0 into
  // stream 1 and leaves stream 0 with the block output only.
  HcMix m;
  m.n = 2;
  m.pre = {0.25, 0.75};
  m.post = {2.0, 0.5};
  m.comb = {0.0, 1.0, 0.0, 0.0};
  std::vector<float> X = {1.0f, 2.0f, 10.0f, 20.0f};  // streams [1, 2] and [10, 20]
  float c[2];
  ops::hc_collapse(m.pre, X.data(), 2, c);
  EXPECT_FLOAT_EQ(c[0], 0.25f * 1.0f + 0.75f * 10.0f);
  EXPECT_FLOAT_EQ(c[1], 0.25f * 2.0f + 0.75f * 20.0f);
  const float out[2] = {5.0f, 7.0f};
  ops::hc_expand(m, out, X.data(), 2);
  EXPECT_FLOAT_EQ(X[0], 10.0f);  // 2 * 5
  EXPECT_FLOAT_EQ(X[1], 14.0f);  // 2 * 7
  EXPECT_FLOAT_EQ(X[2], 3.5f);   // 0.5 * 5 + stream 0's 1
  EXPECT_FLOAT_EQ(X[3], 5.5f);   // 0.5 * 7 + stream 0's 2
}

TEST(Dsv4Hc, ShapeMismatchFailsNamingTheShapes) {
  const float X[4] = {1, 2, 3, 4};
  const Matrix fn(7, 4);  // (2 + 2) * 2 = 8 rows expected
  const std::vector<float> base(8), scale(3);
  try {
    ops::hc_mix(X, 2, 2, fn, base, scale, 3, 1e-6, 1e-6);
    FAIL() << "a 7-row fn was accepted";
  } catch (const Error& e) { EXPECT_NE(std::string(e.what()).find("fn [7, 4]"), std::string::npos) << e.what(); }
}

TEST(Dsv4Rope, YarnKeepsFastDimsAndInterpolatesSlowOnes) {
  // DeepSeek-V4 Flash's compress table: 64 rotated dims, theta 160000, factor 16 over an original
  // 65536 positions, betas 32 / 1: the ramp runs from dim pair 15 to 25.
  const ops::Yarn y{.factor = 16, .orig_ctx = 65536, .beta_fast = 32, .beta_slow = 1};
  const std::vector<double> plain = ops::rope_inv_freq(64, 160000.0, {});
  const std::vector<double> f = ops::rope_inv_freq(64, 160000.0, y);
  ASSERT_EQ(f.size(), 32u);
  for (int i = 0; i <= 15; ++i) EXPECT_DOUBLE_EQ(f[i], plain[i]) << i;
  for (int i = 25; i < 32; ++i) EXPECT_NEAR(f[i], plain[i] / 16.0, 1e-18) << i;
  const double r = (20.0 - 15.0) / (25.0 - 15.0);  // pair 20: halfway
  EXPECT_NEAR(f[20], plain[20] / 16.0 * r + plain[20] * (1.0 - r), 1e-18);
  EXPECT_DOUBLE_EQ(plain[1], std::pow(160000.0, -2.0 / 64.0));
}

TEST(Dsv4Rope, InterleavedPairsAndTheInverseRotation) {
  const std::vector<double> f = {0.5, 0.01};
  float x[4] = {1.0f, 0.0f, 0.0f, 2.0f};
  ops::rope_pairs_freq(x, f, 3, false);
  EXPECT_NEAR(x[0], std::cos(1.5), 1e-7);
  EXPECT_NEAR(x[1], std::sin(1.5), 1e-7);  // (x0, x1) is a pair: NEOX would pair x0 with x2
  EXPECT_NEAR(x[2], -2.0 * std::sin(0.03), 1e-7);
  EXPECT_NEAR(x[3], 2.0 * std::cos(0.03), 1e-7);
  ops::rope_pairs_freq(x, f, 3, true);
  EXPECT_NEAR(x[0], 1.0, 1e-7);
  EXPECT_NEAR(x[1], 0.0, 1e-7);
  EXPECT_NEAR(x[2], 0.0, 1e-7);
  EXPECT_NEAR(x[3], 2.0, 1e-7);
}

TEST(Dsv4Compressor, PoolsPerChannelAndEmptySlotsWeighNothing) {
  // 3 slots x 2 channels. Channel 0: gates 0, 0, -inf -> the mean of slots 0 and 1. Channel 1:
  // gates ln 1, ln 3, 0 -> weights 1/5, 3/5, 1/5.
  const float ninf = -INFINITY;
  const float kv[6] = {2.0f, 10.0f, 4.0f, 20.0f, 100.0f, 30.0f};
  const float gate[6] = {0.0f, 0.0f, 0.0f, static_cast<float>(std::log(3.0)), ninf, 0.0f};
  float out[2];
  ops::pool_window(kv, gate, 3, 2, out);
  EXPECT_FLOAT_EQ(out[0], 3.0f);
  EXPECT_NEAR(out[1], 0.2 * 10 + 0.6 * 20 + 0.2 * 30, 1e-5);
  const float all_empty[2] = {ninf, ninf};
  EXPECT_THROW(ops::pool_window(kv, all_empty, 1, 2, out), Error);
}

// A compressor state with projections that differ per token and channel, fed in pieces.
struct CompressorCase {
  int64_t ratio, width;
  bool overlap;
  std::vector<float> kv, gate, ape, norm;
  std::vector<double> freq = {0.3};  // the last 2 dims rotated
  int64_t cw() const { return overlap ? 2 * width : width; }
  CompressorCase(int64_t r, int64_t w, bool o, int64_t tokens) : ratio(r), width(w), overlap(o) {
    for (int64_t i = 0; i < tokens * cw(); ++i) {
      kv.push_back(static_cast<float>(std::sin(0.37 * static_cast<double>(i) + 0.1)));
      gate.push_back(static_cast<float>(std::cos(1.3 * static_cast<double>(i))));
    }
    for (int64_t i = 0; i < r * cw(); ++i) ape.push_back(static_cast<float>(0.05 * static_cast<double>(i % 7)));
    for (int64_t i = 0; i < w; ++i) norm.push_back(1.0f + 0.125f * static_cast<float>(i));
  }
  ops::CompressorState feed(std::initializer_list<int64_t> pieces) const {
    ops::CompressorState s;
    s.ratio = ratio;
    s.width = width;
    s.overlap = overlap;
    int64_t t = 0;
    for (int64_t n : pieces) {
      ops::compressor_append(s, kv.data() + t * cw(), gate.data() + t * cw(), n, ape, norm, 1e-6, freq);
      t += n;
    }
    return s;
  }
};

TEST(Dsv4Compressor, RowsCloseWithTheirWindowsLastTokenWhateverThePieces) {
  for (bool overlap : {false, true}) {
    const CompressorCase c(4, 6, overlap, 13);
    const ops::CompressorState all = c.feed({13}), one = c.feed({1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1}),
                               mixed = c.feed({3, 5, 1, 4});
    EXPECT_EQ(all.n_rows(), 3) << "13 tokens close windows 0..2";
    EXPECT_EQ(all.rows, one.rows) << "overlap " << overlap;
    EXPECT_EQ(all.rows, mixed.rows) << "overlap " << overlap;
    EXPECT_EQ(c.feed({7}).n_rows(), 1);
    EXPECT_EQ(c.feed({8}).n_rows(), 2);
  }
  EXPECT_EQ(ops::visible_rows(6, 4), 1);
  EXPECT_EQ(ops::visible_rows(7, 4), 2);
}

TEST(Dsv4Compressor, SlotsAsTheEquationsSay) {
  // Window 1 of each form, assembled here slot by slot and pooled, normed, rotated at position 4.
  for (bool overlap : {false, true}) {
    const CompressorCase c(4, 6, overlap, 8);
    const ops::CompressorState s = c.feed({8});
    const int64_t m = 4, w = 6, cw = c.cw(), S = overlap ? 8 : 4;
    std::vector<float> skv, sg;
    auto slot = [&](int64_t t, int64_t off, int64_t j) {
      for (int64_t k = 0; k < w; ++k) {
        skv.push_back(c.kv[static_cast<size_t>(t * cw + off + k)]);
        sg.push_back(c.gate[static_cast<size_t>(t * cw + off + k)] + c.ape[static_cast<size_t>(j * cw + off + k)]);
      }
    };
    if (overlap)
      for (int64_t j = 0; j < m; ++j) slot(j, 0, j);  // window 0's first halves
    for (int64_t j = 0; j < m; ++j) slot(m + j, overlap ? w : 0, j);
    std::vector<float> pooled(static_cast<size_t>(w)), row(static_cast<size_t>(w));
    ops::pool_window(skv.data(), sg.data(), S, w, pooled.data());
    ops::rmsnorm(pooled.data(), c.norm.data(), w, 1e-6, row.data());
    ops::rope_pairs_freq(row.data() + w - 2, c.freq, 4, false);
    const std::vector<float> got(s.rows.begin() + w, s.rows.begin() + 2 * w);
    EXPECT_EQ(got, row) << "overlap " << overlap;
  }
  // CSA's window 0 has no previous window: its first slots weigh nothing, so its row depends only
  // on window 0's second halves.
  CompressorCase c(4, 6, true, 4);
  const std::vector<float> r0 = c.feed({4}).rows;
  for (int64_t t = 0; t < 4; ++t)
    for (int64_t k = 0; k < 6; ++k) c.kv[static_cast<size_t>(t * 12 + k)] += 100.0f;  // first halves
  EXPECT_EQ(c.feed({4}).rows, r0);
}

TEST(Dsv4Indexer, ReluPerHeadThenWeightedSum) {
  // 2 heads of 2 dims, 2 keys. Key 0: head 0 dot 3, head 1 dot -1 (clipped). Key 1: 1 and 2.
  const float q[4] = {1.0f, 1.0f, 1.0f, -1.0f};
  const float w[2] = {2.0f, 4.0f};
  const float K[4] = {1.0f, 2.0f, 0.5f, 0.5f};
  const std::vector<double> s = ops::indexer_scores(q, w, K, 2, 2, 2);
  const double ks = 1.0 / std::sqrt(2.0), ws = 1.0 / std::sqrt(2.0);
  // key 0: head 0 q.K = 3, head 1 q.K = 1 - 2 = -1 -> 0
  EXPECT_NEAR(s[0], 2 * ws * 3 * ks, 1e-12);
  // key 1: head 0 = 1, head 1 = 0
  EXPECT_NEAR(s[1], 2 * ws * 1 * ks, 1e-12);
}

TEST(Dsv4Indexer, TiesAtTheCutFollowTheChosenRule) {
  // Six rows, top 4, rows 1..5 tied at 0 (every head's ReLU clipped): the contract keeps the
  // lowest rows; torch's order keeps four distinct rows including the one clear winner.
  const std::vector<double> s = {0.0, 0.0, 0.0, 0.0, 0.0, 0.0};
  EXPECT_EQ(ops::select_top(s, 4), (std::vector<int32_t>{0, 1, 2, 3}));
  const std::vector<double> t = {0.0, 0.0, 0.0, 0.0, 2.0, 0.0};
  EXPECT_EQ(ops::select_top(t, 4), (std::vector<int32_t>{0, 1, 2, 4}));
  const std::vector<int32_t> torch = ops::select_top_torch_cpu(t, 6, 4);
  ASSERT_EQ(torch.size(), 4u);
  EXPECT_TRUE(std::is_sorted(torch.begin(), torch.end()));
  EXPECT_TRUE(std::adjacent_find(torch.begin(), torch.end()) == torch.end());
  EXPECT_TRUE(std::binary_search(torch.begin(), torch.end(), 4));
  // Without ties both rules keep the same rows, and rows not closed yet (-inf past the scores)
  // are never returned, even when fewer than k rows are closed.
  const std::vector<double> u = {0.5, -1.0, 3.0, 0.25, 2.0, 1.0, -0.5};
  EXPECT_EQ(ops::select_top_torch_cpu(u, 9, 4), ops::select_top(u, 4));
  EXPECT_EQ(ops::select_top_torch_cpu(std::vector<double>{1.0, 2.0}, 8, 4), (std::vector<int32_t>{0, 1}));
  // torch's partial-sort branch (k·64 <= row length) is not reproduced: refused, not guessed.
  EXPECT_THROW(ops::select_top_torch_cpu(std::vector<double>(256, 0.0), 256, 4), Error);
}

TEST(Dsv4Attention, TheSinkTakesMassUnscaled) {
  // One head of 4 dims, one key: out = K * e^l / (e^l + e^sink), l = q.K / 2. A sink scaled by
  // 1/sqrt(hd) like a score, or one that contributes a value, gives another number.
  const float q[4] = {1.0f, 0.0f, 1.0f, 0.0f};
  const float k0[4] = {2.0f, 1.0f, 0.0f, -1.0f};
  const float* keys[1] = {k0};
  const float sink = 1.5f;
  float out[4];
  ops::sink_attention(q, keys, &sink, 1, 4, out);
  const double l = 2.0 / 2.0, p = std::exp(l) / (std::exp(l) + std::exp(1.5));
  for (int d = 0; d < 4; ++d) EXPECT_NEAR(out[d], p * k0[d], 1e-6) << d;
}

TEST(Dsv4Attention, GroupedOutputTakesEachGroupsOwnRows) {
  // 2 groups of 2 input values, R = 1: y[g] = wo_a.row(g) . o[group g].
  const Matrix wo_a = mat(2, 2, {1.0f, 2.0f, 3.0f, 4.0f});
  const float o[4] = {1.0f, 1.0f, 10.0f, 100.0f};
  float y[2];
  ops::grouped_out(wo_a, 2, o, y);
  EXPECT_FLOAT_EQ(y[0], 3.0f);
  EXPECT_FLOAT_EQ(y[1], 430.0f);
  EXPECT_THROW(ops::grouped_out(wo_a, 3, o, y), Error);
}

// Under the GPU's activation contract (a block-quantised wo_a: Matrix::q8_1_input) each group's
// slice is rounded to q8_1 as its own row before the product, as the GPU's grouped mat-vec reads
// it: the same as the plain product over the slices rounded beforehand, and not the f32 one.
TEST(Dsv4Attention, GroupedOutRoundsEachGroupUnderTheQ8_1Contract) {
  constexpr int64_t kIn = 32, kR = 3, kG = 2;
  std::vector<float> w(static_cast<size_t>(kG * kR * kIn)), o(static_cast<size_t>(kG * kIn));
  for (size_t i = 0; i < w.size(); ++i) w[i] = 0.01f * static_cast<float>((i * 37) % 23) - 0.1f;
  for (size_t i = 0; i < o.size(); ++i) o[i] = (i < kIn ? 1.0f : 100.0f) * std::sin(0.7f * static_cast<float>(i));
  Matrix wo_a = mat(kG * kR, kIn, w);
  float plain[kG * kR], contract[kG * kR], rounded[kG * kR];
  ops::grouped_out(wo_a, kG, o.data(), plain);
  std::vector<float> q(o.size());
  std::vector<BlockQ8_1> blk(1);
  for (int64_t g = 0; g < kG; ++g) {
    quantize_row_q8_1(o.data() + g * kIn, blk.data(), kIn);
    dequantize_row(DType::Q8_1, blk.data(), q.data() + g * kIn, kIn);
  }
  ops::grouped_out(wo_a, kG, q.data(), rounded);
  wo_a.q8_1_input = true;
  ops::grouped_out(wo_a, kG, o.data(), contract);
  bool differs = false;
  for (int i = 0; i < kG * kR; ++i) {
    EXPECT_EQ(std::bit_cast<uint32_t>(contract[i]), std::bit_cast<uint32_t>(rounded[i])) << "row " << i;
    differs = differs || contract[i] != plain[i];
  }
  EXPECT_TRUE(differs) << "the q8_1 rounding changed nothing: the case does not tell the contracts apart";
}

TEST(Dsv4Route, BiasChoosesButDoesNotWeigh) {
  const std::vector<float> logits = {0.0f, 1.0f, 2.0f, 25.0f};
  auto s = [](double l) { return std::sqrt(l > 20 ? l : std::log1p(std::exp(l))); };
  // no bias: experts 3 and 2
  auto a = ops::route_sqrt_softplus(logits, {}, {}, 2, 1.5);
  ASSERT_EQ(a.size(), 2u);
  EXPECT_EQ(a[0].first, 3);
  EXPECT_EQ(a[1].first, 2);
  EXPECT_NEAR(a[0].second, s(25) / (s(25) + s(2)) * 1.5, 1e-12);  // softplus(25) is 25 (threshold 20)
  // a bias on expert 0 selects it; its weight is still its own score's share
  const std::vector<float> bias = {10.0f, 0.0f, 0.0f, 0.0f};
  auto b = ops::route_sqrt_softplus(logits, bias, {}, 2, 1.5);
  EXPECT_EQ(b[0].first, 0);
  EXPECT_EQ(b[1].first, 3);
  EXPECT_NEAR(b[0].second, s(0) / (s(0) + s(25)) * 1.5, 1e-12);
  EXPECT_NEAR(b[0].second + b[1].second, 1.5, 1e-12);
  // a hash layer takes the table's experts, weighted the same way
  const std::vector<int32_t> fixed = {1, 0};
  auto h = ops::route_sqrt_softplus(logits, {}, fixed, 2, 1.0);
  EXPECT_EQ(h[0].first, 1);
  EXPECT_EQ(h[1].first, 0);
  EXPECT_NEAR(h[0].second, s(1) / (s(1) + s(0)), 1e-12);
  const std::vector<int32_t> bad = {1, 4};
  EXPECT_THROW(ops::route_sqrt_softplus(logits, {}, bad, 2, 1.0), Error);
}

TEST(Dsv4Ffn, GateClampedAboveUpClampedBothWays) {
  // D = F = 1: gate 30 -> 10 (an unclamped gate gives 3x more), up -40 -> -10.
  FfnWeights f;
  f.gate = mat(1, 1, {30.0f});
  f.up = mat(1, 1, {-40.0f});
  f.down = mat(1, 1, {1.0f});
  const float x = 1.0f;
  float out;
  ops::ffn_clamped(f, &x, 1, 10.0, &out, 1);
  EXPECT_NEAR(out, 10.0 / (1.0 + std::exp(-10.0)) * -10.0, 1e-4);
  f.gate = mat(1, 1, {-30.0f});  // no lower clamp on the gate
  ops::ffn_clamped(f, &x, 1, 10.0, &out, 1);
  EXPECT_NEAR(out, -30.0 / (1.0 + std::exp(30.0)) * -10.0, 1e-15);
}

}  // namespace
}  // namespace memra::oracle

// --- the model walk ---------------------------------------------------------------------------

namespace memra::oracle {
namespace {

// A DeepSeek-V4 of the upstream tiny CI's layer pattern (sliding, sliding, CSA, HCA) at rates
// small enough that a 20-token prompt closes windows of both compressors (CSA every 2 tokens,
// HCA every 4) and the indexer (top 2) drops rows; the window (4) is shorter than the prompt.
ModelConfig dsv4_tiny() {
  ModelConfig c;
  c.family = Family::DeepseekV4;
  c.n_vocab = 64;
  c.n_embd = 32;
  c.n_layer = 4;
  c.n_ctx_train = 4096;
  c.n_head = 4;
  c.n_head_kv = 1;
  c.head_dim = 16;
  c.n_rot = 4;
  c.rope_theta = 10000;
  c.layer_kind.assign(4, LayerKind::Dsv4);
  c.ffn_kind.assign(4, FfnKind::Moe);
  c.dsv4_attn = {Dsv4Attn::Sliding, Dsv4Attn::Sliding, Dsv4Attn::Csa, Dsv4Attn::Hca};
  c.csa_ratio = 2;
  c.hca_ratio = 4;
  c.sliding_window = 4;
  c.compress_rope_theta = 160000;
  c.yarn_factor = 4;
  c.yarn_orig_ctx = 16;
  c.mla_q_rank = 16;
  c.o_groups = 2;
  c.o_rank = 8;
  c.hc_mult = 2;
  c.hc_iters = 3;
  c.hc_eps = 1e-6;
  c.dsa_n_head = 2;
  c.dsa_head_dim = 8;
  c.dsa_topk = 2;
  c.n_expert = 4;
  c.n_expert_used = 2;
  c.n_ff_exp = 16;
  c.n_ff_shexp = 16;
  c.moe_gating = MoeGating::SqrtSoftplus;
  c.expert_weights_scale = 1.5;
  c.n_hash_layers = 1;
  c.swiglu_limit = 10;
  return c;
}

std::vector<int32_t> prompt20() {
  std::vector<int32_t> p;
  for (int i = 0; i < 20; ++i) p.push_back((i * 37 + 11) % 64);
  return p;
}

bool bit_equal(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), sizeof(float) * a.size()) == 0;
}

TEST(Dsv4Model, PrimeDecodeAndForwardAllAgreeBitwise) {
  const ModelConfig c = dsv4_tiny();
  Options o;
  o.threads = 1;
  const Model m = Model::from_weights(c, random_weights(c, 5), o);
  const std::vector<int32_t> p = prompt20();
  const std::vector<std::vector<float>> all = m.forward_all(p);
  ASSERT_EQ(all.size(), p.size());
  for (size_t n : {1u, 4u, 7u, 12u, 20u}) {
    const std::span<const int32_t> head(p.data(), n);
    const std::vector<float> last = m.forward_last(head);
    EXPECT_TRUE(bit_equal(last, all[n - 1])) << "forward_all row " << n - 1;
    if (n < 2) continue;
    Cache k = m.new_cache(32);
    m.prime(head.first(n - 1), k);
    EXPECT_TRUE(bit_equal(m.decode_step(p[n - 1], k).logits, last)) << "prime " << n - 1 << " + decode";
  }
  // token by token over the whole prompt
  Cache k = m.new_cache(32);
  std::vector<float> l = m.prime(std::span<const int32_t>(p.data(), 1), k);
  for (size_t i = 1; i < p.size(); ++i) l = m.decode_step(p[i], k).logits;
  EXPECT_TRUE(bit_equal(l, all.back()));
  Options o2 = o;
  o2.threads = 2;
  ops::set_min_parallel_work(1);
  EXPECT_TRUE(bit_equal(Model::from_weights(c, random_weights(c, 5), o2).forward_last(p), all.back()))
      << "the thread count changed a bit";
  ops::set_min_parallel_work(1 << 20);
}

// The selection ledger on DeepSeek-V4 (every layer MoE; layer 0 hash-routed): one row per token
// and layer, prefill and token-by-token decode recording the same decisions bit for bit; hash
// rows hold the token's tid2eid entries, score rows k distinct experts; each row's weights in the
// ledger's order and summing to routed_scaling_factor.
TEST(Dsv4Model, LedgerRecordsEveryRoutingDecision) {
  const ModelConfig c = dsv4_tiny();
  Options o;
  o.threads = 1;
  const ModelWeights w = random_weights(c, 5);
  Model m = Model::from_weights(c, w, o);
  const std::vector<int32_t> p = prompt20();
  SelectionLedger prefill, decoded;
  m.attach_ledger(&prefill);
  Cache a = m.new_cache(32);
  m.prime(p, a);
  m.attach_ledger(&decoded);
  Cache b = m.new_cache(32);
  m.prime(std::span<const int32_t>(p.data(), 12), b);
  for (size_t i = 12; i < p.size(); ++i) m.decode_step(p[i], b);
  m.attach_ledger(nullptr);
  m.decode_step(p[0], b);  // detached: records nothing
  ASSERT_EQ(prefill.rows.size(), p.size() * size_t(c.n_layer));
  EXPECT_EQ(first_ledger_difference(prefill, decoded), std::nullopt)
      << describe_ledger_difference(prefill, decoded, first_ledger_difference(prefill, decoded).value_or(0));
  const SelectionLedger rows = ordered(prefill);
  for (const Selection& r : rows.rows) {
    SCOPED_TRACE("position " + std::to_string(r.pos) + ", layer " + std::to_string(r.layer));
    ASSERT_EQ(r.experts.size(), size_t(c.n_expert_used));
    double sum = 0;
    for (size_t j = 0; j < r.experts.size(); ++j) {
      const float wj = std::bit_cast<float>(r.weight_bits[j]);
      sum += wj;
      if (j > 0) {
        const float wp = std::bit_cast<float>(r.weight_bits[j - 1]);
        EXPECT_TRUE(wp > wj || (wp == wj && r.experts[j - 1] < r.experts[j])) << "rank " << j;
      }
    }
    EXPECT_NEAR(sum, c.expert_weights_scale, 1e-6);
    std::vector<int32_t> got = r.experts;
    std::sort(got.begin(), got.end());
    EXPECT_EQ(std::adjacent_find(got.begin(), got.end()), got.end()) << "an expert chosen twice";
    if (r.layer < c.n_hash_layers) {
      std::vector<int32_t> table;
      for (int64_t j = 0; j < c.n_expert_used; ++j)
        table.push_back(static_cast<int32_t>(
            w.layers[0].moe->tid2eid[static_cast<size_t>(p[static_cast<size_t>(r.pos)] * c.n_expert_used + j)]));
      std::sort(table.begin(), table.end());
      EXPECT_EQ(got, table) << "a hash layer routes by the token's row of tid2eid";
    }
  }
}

TEST(Dsv4Model, CompressedRowsArriveWithTheirWindowsLastToken) {
  // The HCA layer's compressor closes its first row with token 4 (position 3): a change to its
  // weights leaves positions 0..2 alone and moves position 3.
  const ModelConfig c = dsv4_tiny();
  Options o;
  o.threads = 1;
  ModelWeights w = random_weights(c, 5);
  const Model a = Model::from_weights(c, w, o);
  for (float& x : w.layers[3].compressor->wkv.data) x *= 2.0f;
  const Model b = Model::from_weights(c, w, o);
  const std::vector<int32_t> p = prompt20();
  const auto la = a.forward_all(p), lb = b.forward_all(p);
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(bit_equal(la[i], lb[i])) << "position " << i << " read an open window";
  EXPECT_FALSE(bit_equal(la[3], lb[3])) << "position 3 did not read the row its token closed";
}

TEST(Dsv4Model, TheIndexerDropsRows) {
  // CSA: 10 rows closed by 20 tokens, the indexer keeps 2 per query; keeping every row changes the
  // last position's logits (so the selection is not a no-op), not the first ones' (< 3 rows).
  ModelConfig c = dsv4_tiny();
  Options o;
  o.threads = 1;
  const ModelWeights w = random_weights(c, 5);
  const auto sparse = Model::from_weights(c, w, o).forward_all(prompt20());
  c.dsa_topk = 100;
  const auto dense = Model::from_weights(c, w, o).forward_all(prompt20());
  EXPECT_TRUE(bit_equal(sparse[4], dense[4])) << "with 2 rows closed the top 2 are all of them";
  EXPECT_FALSE(bit_equal(sparse[19], dense[19]));
}

TEST(Dsv4Model, RawKeysOnlyWithinTheWindow) {
  // Window 4: up to position 3 every raw key is in the window, so a longer window changes nothing
  // there; at position 19 it does.
  ModelConfig c = dsv4_tiny();
  Options o;
  o.threads = 1;
  const ModelWeights w = random_weights(c, 5);
  const auto narrow = Model::from_weights(c, w, o).forward_all(prompt20());
  c.sliding_window = 64;
  const auto wide = Model::from_weights(c, w, o).forward_all(prompt20());
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(bit_equal(narrow[i], wide[i])) << i;
  EXPECT_FALSE(bit_equal(narrow[19], wide[19]));
}

TEST(Dsv4Model, BadWeightsAndConfigsFailNamingTheField) {
  const ModelConfig c = dsv4_tiny();
  auto message = [](auto&& f) -> std::string {
    try {
      f();
    } catch (const Error& e) { return e.what(); }
    return "";
  };
  ModelWeights w = random_weights(c, 5);
  w.layers[0].moe->tid2eid[3] = 7.0f;  // 4 experts
  EXPECT_NE(message([&] { Model::from_weights(c, w, {}); }).find("tid2eid"), std::string::npos);
  w = random_weights(c, 5);
  w.layers[2].dsv4_indexer->comp.ape.pop_back();
  EXPECT_NE(message([&] { Model::from_weights(c, w, {}); }).find("dsv4_indexer.comp.ape"), std::string::npos);
  w = random_weights(c, 5);
  w.hc_head.reset();
  EXPECT_NE(message([&] { Model::from_weights(c, w, {}); }).find("hc_head"), std::string::npos);
  ModelConfig bad = c;
  bad.n_head_kv = 2;
  EXPECT_NE(message([&] { bad.validate(); }).find("n_head_kv 2"), std::string::npos);
  bad = c;
  bad.o_groups = 3;
  EXPECT_NE(message([&] { bad.validate(); }).find("o_groups 3"), std::string::npos);
  const Model m = Model::from_weights(c, random_weights(c, 5), {});
  Cache k = m.new_cache(4);
  const std::vector<int32_t> five = {1, 2, 3, 4, 5};
  EXPECT_NE(message([&] { m.prime(five, k); }).find("exceeds the cache's max_ctx 4"), std::string::npos);
}

}  // namespace
}  // namespace memra::oracle
