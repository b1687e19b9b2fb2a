// Op: DeepSeek-V4's own kernels (src/cuda/dsv4.cuh) and the DSA indexer's compress-ratio form
// (src/cuda/dsa.cuh: ratio, w_scale) against the CPU oracle's DeepSeek-V4 ops (src/oracle/ops.h,
// src/oracle/dsv4.cpp). The kernels compute in f64 where the oracle does (the hc weights,
// collapse and expand, the rotation, the compressor's pooling and norm, the router's scores), so
// those comparisons are near-bitwise: the only differences left are the device's libm (exp,
// cos, sin: an f64 ulp or two) and nvcc's fma contraction of a·b + c in f64, which flip a rare
// f32 rounding by one ulp. The f32 kernels (indexer scores, attention with sinks) are held to a
// relative bound against the f64 reference. Discrete outputs (the indexer's and the router's
// choices, stored copies, the broadcast) are exact. Inputs come from the harness's fixed seeds
// and a fresh one per run (op_harness.h: logged, MEMRA_SEED replays). What each case catches:
//   - HcMixMatchesTheOracle: a wrong sigmoid / softmax / Sinkhorn step (order, eps, iteration
//     count, rows vs columns, comb's source/destination layout), pre/post swapped, the collapse
//     weighting the wrong streams; the head form reading the wrong scale or z stride.
//   - HcExpandMatchesTheOracle: comb transposed, post missing, streams updated in place before
//     every stream is read; the broadcast not reaching every stream.
//   - RopeMatchesTheOracle: the wrong dims (leading instead of trailing), pairs (half-split
//     instead of interleaved), position (pos_dev / row0 / t), direction, or table; the stored row
//     at the wrong position, or other rows touched.
//   - CompressorMatchesTheOracle: a window closed by the wrong token, slots from the wrong
//     halves / tokens / ape rows, CSA's window 0 reading its empty first halves, a slot of an
//     earlier call read from the wrong place (history vs this call), a result that depends on
//     how the tokens are split into calls, the row rotated at the wrong position.
//   - IndexerSelectsTheOraclesTopkWithRatio: keys a query cannot see yet scored or selected
//     (ratio), w_scale not applied, queries with no key or fewer keys than topk, ties at the cut
//     not going to the lowest rows, -0 scores not written as +0.
//   - AttentionWithSinksMatchesTheOracle: the window's range, the compressed rows (every visible
//     one, or the selection), the sink's mass, keys read that no query may read (NaN there).
//   - RouteMatchesTheOracle: the sqrt-softplus score, the bias used for the choice but not for
//     the weights, ties not going to the lower expert, the hash table's row, the scaling.
//   - BadShapesAreRefusedByName: a shape a kernel cannot take is a memra::Error naming it.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <iomanip>
#include <iostream>
#include <limits>
#include <numeric>
#include <random>
#include <span>
#include <sstream>
#include <string>
#include <vector>

#include "cuda/dsa.cuh"
#include "cuda/dsv4.cuh"
#include "memra/engine.h"
#include "memra/error.h"
#include "memra/oracle.h"
#include "memra/rope_freq.h"
#include "memra/testing/gpu.h"
#include "memra/testing/matchers.h"
#include "memra/weights.h"
#include "ops/device_op_fixture.h"
#include "ops/op_harness.h"
#include "oracle/ops.h"

namespace memra::ops {
namespace {

namespace oo = memra::oracle::ops;

// DeepSeek-V4's constants (docs/deepseek-v4.md).
constexpr double kHcEps = 1e-6, kRmsEps = 1e-6;
constexpr int kSinkhornIters = 20;
const Yarn kCompressYarn{.factor = 16, .orig_ctx = 65536, .beta_fast = 32, .beta_slow = 1};

// Distance in units in the last place between two floats (+0 and -0 are 0 apart); a NaN on
// either side is as far as it gets.
int64_t ulp_distance(float a, float b) {
  if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<int64_t>::max();
  auto ordered = [](float x) {
    int32_t i;
    std::memcpy(&i, &x, sizeof i);
    return i < 0 ? -static_cast<int64_t>(i & 0x7fffffff) : static_cast<int64_t>(i);
  };
  const int64_t d = ordered(a) - ordered(b);
  return d < 0 ? -d : d;
}

// How far a comparison's elements were apart (printed, so a run on a new arch shows the margin).
struct Spread {
  int64_t max_ulp = 0;
  double max_abs = 0;
  int64_t differing = 0;  // elements not bit-identical
  int64_t n = 0;
};

// Every element of got within `max_ulp` ulp of ref, or within allow(i) of it (an absolute floor
// for values that come out of a cancellation, where an f64 ulp of the terms is many f32 ulp of
// the result). `spread` (when set) accumulates the distances.
::testing::AssertionResult within_ulps(std::span<const float> got, std::span<const float> ref, int64_t max_ulp,
                                       const std::function<double(size_t)>& allow = {}, Spread* spread = nullptr) {
  if (got.size() != ref.size())
    return ::testing::AssertionFailure() << got.size() << " elements, expected " << ref.size();
  Spread sp;
  int64_t bad = 0;
  size_t first_bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const int64_t u = ulp_distance(got[i], ref[i]);
    const double a = std::isnan(got[i]) ? INFINITY : std::fabs(static_cast<double>(got[i]) - ref[i]);
    if (u != 0) ++sp.differing;
    sp.max_ulp = std::max(sp.max_ulp, u);
    sp.max_abs = std::max(sp.max_abs, a);
    if (u > max_ulp && !(allow && a <= allow(i))) {
      if (bad++ == 0) first_bad = i;
    }
  }
  sp.n = static_cast<int64_t>(got.size());
  if (spread) {
    spread->max_ulp = std::max(spread->max_ulp, sp.max_ulp);
    spread->max_abs = std::max(spread->max_abs, sp.max_abs);
    spread->differing += sp.differing;
    spread->n += sp.n;
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  std::ostringstream os;
  os << bad << " of " << got.size() << " elements beyond " << max_ulp << " ulp; first at " << first_bad << ": got "
     << std::setprecision(9) << got[first_bad] << " (" << std::hexfloat << got[first_bad] << std::defaultfloat
     << "), expected " << ref[first_bad] << " (" << std::hexfloat << ref[first_bad] << std::defaultfloat << "), "
     << ulp_distance(got[first_bad], ref[first_bad]) << " ulp; max " << sp.max_ulp << " ulp, max |diff| " << sp.max_abs;
  return ::testing::AssertionFailure() << os.str();
}

// Every element of got within rel·|ref| + abs of ref (doubles).
::testing::AssertionResult within_rel(std::span<const double> got, std::span<const double> ref, double rel,
                                      double abs) {
  if (got.size() != ref.size())
    return ::testing::AssertionFailure() << got.size() << " elements, expected " << ref.size();
  for (size_t i = 0; i < got.size(); ++i) {
    const double d = std::fabs(got[i] - ref[i]);
    if (!(d <= rel * std::fabs(ref[i]) + abs))
      return ::testing::AssertionFailure()
             << "element " << i << ": got " << std::setprecision(17) << got[i] << ", expected " << ref[i] << " (|diff| "
             << d << ", allowed " << rel * std::fabs(ref[i]) + abs << ")";
  }
  return ::testing::AssertionSuccess();
}

void print_spread(const char* what, const Spread& sp) {
  std::cout << "[ measured ] " << what << ": " << sp.differing << " of " << sp.n << " elements not bit-identical, max "
            << sp.max_ulp << " ulp, max |diff| " << sp.max_abs << "\n";
}

// ops::hc_mix's equations from a given f32 z (the kernel's input) instead of the f64 fn·h the
// oracle computes itself: [pre N | post N | comb N·N], the same operations in the same order.
std::vector<double> mix_from_z(const float* z, const float* base, const float* scale, int N, int iters, double eps) {
  const int M = (2 + N) * N;
  std::vector<double> m(static_cast<size_t>(M));
  const double s0 = scale[0], s1 = scale[1], s2 = scale[2];
  for (int n = 0; n < N; ++n) {
    m[n] = oo::sigmoid(static_cast<double>(z[n]) * s0 + base[n]) + eps;
    m[N + n] = 2.0 * oo::sigmoid(static_cast<double>(z[N + n]) * s1 + base[N + n]);
  }
  double* comb = m.data() + 2 * N;
  for (int i = 0; i < N; ++i) {
    double* row = comb + i * N;
    double mx = -INFINITY;
    for (int j = 0; j < N; ++j)
      mx = std::max(mx, row[j] = static_cast<double>(z[2 * N + i * N + j]) * s2 + base[2 * N + i * N + j]);
    double sum = 0;
    for (int j = 0; j < N; ++j) sum += (row[j] = std::exp(row[j] - mx));
    for (int j = 0; j < N; ++j) row[j] = row[j] / sum + eps;
  }
  auto columns = [&] {
    for (int j = 0; j < N; ++j) {
      double s = 0;
      for (int i = 0; i < N; ++i) s += comb[i * N + j];
      for (int i = 0; i < N; ++i) comb[i * N + j] /= s + eps;
    }
  };
  columns();
  for (int it = 1; it < iters; ++it) {
    for (int i = 0; i < N; ++i) {
      double s = 0;
      for (int j = 0; j < N; ++j) s += comb[i * N + j];
      for (int j = 0; j < N; ++j) comb[i * N + j] /= s + eps;
    }
    columns();
  }
  return m;
}

// The mHC input norm of ops::hc_mix: X / rms(X) over all N·D values, in f64, rounded to f32.
std::vector<float> unit_rms(const float* x, int64_t n, double eps) {
  double ss = 0;
  for (int64_t i = 0; i < n; ++i) ss += static_cast<double>(x[i]) * static_cast<double>(x[i]);
  const double r = 1.0 / std::sqrt(ss / static_cast<double>(n) + eps);
  std::vector<float> y(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) y[static_cast<size_t>(i)] = static_cast<float>(static_cast<double>(x[i]) * r);
  return y;
}

class Dsv4Kernels : public DeviceOpTest {
 protected:
  std::vector<double> rnd_d(size_t n, double lo, double hi) {
    std::uniform_real_distribution<double> U(lo, hi);
    std::vector<double> v(n);
    for (double& x : v) x = U(rng);
    return v;
  }
};

bool is_poison(float x) {
  uint32_t b;
  std::memcpy(&b, &x, sizeof b);
  return b == 0xFFFFFFFFu;
}

// --- hyper-connections ----------------------------------------------------------------------------

// hc_mix_run against ops::hc_mix's equations fed the kernel's own f32 z (fn·(X / rms X) computed
// here as the oracle does, in f64 with ops::dot, then rounded): pre, post and the Sinkhorn comb
// within 1e-12 relative (f64 both sides: only the device's exp and fma contraction differ); the
// collapse f32(Σ_n pre[n] X[n][d]) within 1 ulp of ops::hc_collapse. The host equations are tied
// to ops::hc_mix itself (which computes z in f64 from fn) within 1e-6, the f32 rounding of z.
// Property: after the final column pass every column of comb sums to s / (s + eps) ≈ 1. The head
// form (pre only, scale [1], z of N per token) against ops::hc_head_pre's formula the same way.
// Shapes: N = 4 (DeepSeek-V4's hc_mult) at D = 64 over 40 tokens and D = 4096 (its width), N = 8
// (kHcMaxStreams) at D = 300 (a partial block), N = 1.
TEST_F(Dsv4Kernels, HcMixMatchesTheOracle) {
  struct Shape {
    int N;
    int64_t D, T;
  };
  seeded([&] {
    Spread collapse_spread;
    for (auto [N, D, T] : {Shape{4, 64, 40}, Shape{8, 300, 7}, Shape{1, 64, 3}, Shape{4, 4096, 5}}) {
      SCOPED_TRACE(::testing::Message() << N << " streams of " << D << ", " << T << " tokens");
      const int M = (2 + N) * N;
      const int64_t ND = N * D;
      const float fscale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(ND)));
      Matrix fn(M, ND), fh(N, ND);
      fn.data = rnd(fn.data.size(), -fscale, fscale);
      fh.data = rnd(fh.data.size(), -fscale, fscale);
      const auto X = rnd(static_cast<size_t>(T * ND), -2, 2);
      const auto base = rnd(M), scale = rnd(3, 0.5f, 1.5f), base_h = rnd(N), scale_h = rnd(1, 0.5f, 1.5f);
      std::vector<float> z(static_cast<size_t>(T * M)), zh(static_cast<size_t>(T * N));
      for (int64_t t = 0; t < T; ++t) {
        const auto h = unit_rms(X.data() + t * ND, ND, kRmsEps);
        for (int r = 0; r < M; ++r) z[t * M + r] = static_cast<float>(oo::dot(fn.row(r), h.data(), ND));
        for (int n = 0; n < N; ++n) zh[t * N + n] = static_cast<float>(oo::dot(fh.row(n), h.data(), ND));
      }
      auto dz = up(z), dzh = up(zh), dbase = up(base), dscale = up(scale), dbase_h = up(base_h), dscale_h = up(scale_h),
           dX = up(X);
      auto mix = poisoned<double>(static_cast<size_t>(T * M));
      auto out = poisoned<float>(static_cast<size_t>(T * D)), out_h = poisoned<float>(static_cast<size_t>(T * D));
      cuda::HcMixParams p;
      p.z = dz.data();
      p.base = dbase.data();
      p.scale = dscale.data();
      p.X = dX.data();
      p.mix = mix.data();
      p.out = out.data();
      p.T = T;
      p.D = D;
      p.N = N;
      p.iters = kSinkhornIters;
      p.eps = kHcEps;
      cuda::hc_mix_run(p, s());
      cuda::HcMixParams ph = p;
      ph.z = dzh.data();
      ph.base = dbase_h.data();
      ph.scale = dscale_h.data();
      ph.mix = nullptr;
      ph.out = out_h.data();
      ph.head = true;
      cuda::hc_mix_run(ph, s());
      e().synchronize();
      const auto gmix = mix.download();
      const auto gout = out.download(), gout_h = out_h.download();
      for (int64_t t = 0; t < T; ++t) {
        SCOPED_TRACE(::testing::Message() << "token " << t);
        const float* Xt = X.data() + t * ND;
        const auto want = mix_from_z(z.data() + t * M, base.data(), scale.data(), N, kSinkhornIters, kHcEps);
        const std::span<const double> got(gmix.data() + t * M, static_cast<size_t>(M));
        EXPECT_TRUE(within_rel(got.subspan(0, N), std::span(want).subspan(0, N), 1e-12, 0)) << "pre";
        EXPECT_TRUE(within_rel(got.subspan(N, N), std::span(want).subspan(N, N), 1e-12, 0)) << "post";
        EXPECT_TRUE(within_rel(got.subspan(2 * N), std::span(want).subspan(2 * N), 1e-12, 0)) << "comb";
        // the host equations are the oracle's (up to z's f32 rounding)
        const oo::HcMix om = oo::hc_mix(Xt, N, D, fn, base, scale, kSinkhornIters, kHcEps, kRmsEps);
        EXPECT_TRUE(within_rel(std::span(want).subspan(0, N), om.pre, 0, 1e-6)) << "host pre vs ops::hc_mix";
        EXPECT_TRUE(within_rel(std::span(want).subspan(N, N), om.post, 0, 1e-6)) << "host post vs ops::hc_mix";
        EXPECT_TRUE(within_rel(std::span(want).subspan(2 * N), om.comb, 0, 1e-6)) << "host comb vs ops::hc_mix";
        // Sinkhorn ends on columns: each sums to s / (s + eps)
        for (int j = 0; j < N; ++j) {
          double col = 0;
          for (int i = 0; i < N; ++i) {
            EXPECT_GT(got[2 * N + i * N + j], 0.0) << "comb[" << i << "][" << j << "]";
            col += got[2 * N + i * N + j];
          }
          EXPECT_NEAR(col, 1.0, 1e-5) << "column " << j << " of comb";
        }
        // the collapse with the host's pre (the kernel's differs by ~1e-16 relative)
        std::vector<float> want_c(static_cast<size_t>(D)), want_h(static_cast<size_t>(D));
        oo::hc_collapse(std::span(want).subspan(0, N), Xt, D, want_c.data());
        std::vector<double> abs_terms(static_cast<size_t>(D), 0.0);
        for (int64_t d = 0; d < D; ++d)
          for (int n = 0; n < N; ++n) abs_terms[d] += std::fabs(want[n] * Xt[n * D + d]);
        const auto allow = [&](size_t d) { return 1e-12 * abs_terms[d]; };
        EXPECT_TRUE(within_ulps(std::span(gout).subspan(t * D, D), want_c, 1, allow, &collapse_spread)) << "collapse";
        // the head: pre = sigmoid(z·scale + base) + eps, then the same collapse
        std::vector<double> pre_h(static_cast<size_t>(N));
        for (int n = 0; n < N; ++n)
          pre_h[n] = oo::sigmoid(static_cast<double>(zh[t * N + n]) * scale_h[0] + base_h[n]) + kHcEps;
        const auto opre = oo::hc_head_pre(Xt, N, D, fh, base_h, scale_h, kHcEps, kRmsEps);
        EXPECT_TRUE(within_rel(pre_h, opre, 0, 1e-6)) << "host head pre vs ops::hc_head_pre";
        oo::hc_collapse(pre_h, Xt, D, want_h.data());
        std::fill(abs_terms.begin(), abs_terms.end(), 0.0);
        for (int64_t d = 0; d < D; ++d)
          for (int n = 0; n < N; ++n) abs_terms[d] += std::fabs(pre_h[n] * Xt[n * D + d]);
        EXPECT_TRUE(within_ulps(std::span(gout_h).subspan(t * D, D), want_h, 1, allow, &collapse_spread))
            << "head collapse";
      }
    }
    print_spread("hc collapse", collapse_spread);
  });
}

// hc_expand_run against ops::hc_expand (X'[k][d] = f32(post[k] y[d] + Σ_j comb[j][k] X[j][d]),
// f64, j in order) on random weights: within 1 ulp (f64 both sides; nvcc contracts the sum into
// fmas, which moves an f32 rounding by one ulp in roughly one element of 10^8 — the count that
// is not bit-identical is printed). The broadcast form (mix null) writes y into every stream,
// bit for bit. Shapes as HcMixMatchesTheOracle's.
TEST_F(Dsv4Kernels, HcExpandMatchesTheOracle) {
  struct Shape {
    int N;
    int64_t D, T;
  };
  seeded([&] {
    Spread spread;
    for (auto [N, D, T] : {Shape{4, 64, 40}, Shape{8, 300, 7}, Shape{1, 64, 3}, Shape{4, 4096, 5}}) {
      SCOPED_TRACE(::testing::Message() << N << " streams of " << D << ", " << T << " tokens");
      const int M = (2 + N) * N;
      const int64_t ND = N * D;
      std::vector<double> mix(static_cast<size_t>(T * M));
      for (int64_t t = 0; t < T; ++t) {
        const auto pre = rnd_d(N, 0, 1), post = rnd_d(N, 0, 2), comb = rnd_d(static_cast<size_t>(N * N), 0, 1);
        std::copy(pre.begin(), pre.end(), mix.begin() + t * M);
        std::copy(post.begin(), post.end(), mix.begin() + t * M + N);
        std::copy(comb.begin(), comb.end(), mix.begin() + t * M + 2 * N);
      }
      const auto X = rnd(static_cast<size_t>(T * ND), -2, 2), y = rnd(static_cast<size_t>(T * D), -2, 2);
      auto dmix = up(mix);
      auto dX = up(X), dy = up(y);
      auto dB = poisoned<float>(static_cast<size_t>(T * ND));
      cuda::HcExpandParams p;
      p.mix = dmix.data();
      p.y = dy.data();
      p.X = dX.data();
      p.T = T;
      p.D = D;
      p.N = N;
      cuda::hc_expand_run(p, s());
      cuda::HcExpandParams pb = p;
      pb.mix = nullptr;
      pb.X = dB.data();
      cuda::hc_expand_run(pb, s());
      e().synchronize();
      const auto got = dX.download(), gotb = dB.download();
      std::vector<float> want = X, wantb(static_cast<size_t>(T * ND));
      std::vector<double> abs_terms(static_cast<size_t>(T * ND));
      for (int64_t t = 0; t < T; ++t) {
        oo::HcMix m;
        m.n = N;
        m.pre.assign(mix.begin() + t * M, mix.begin() + t * M + N);
        m.post.assign(mix.begin() + t * M + N, mix.begin() + t * M + 2 * N);
        m.comb.assign(mix.begin() + t * M + 2 * N, mix.begin() + (t + 1) * M);
        const float* Xt = X.data() + t * ND;
        for (int k = 0; k < N; ++k)
          for (int64_t d = 0; d < D; ++d) {
            double a = std::fabs(m.post[k] * y[t * D + d]);
            for (int j = 0; j < N; ++j) a += std::fabs(m.comb[j * N + k] * Xt[j * D + d]);
            abs_terms[t * ND + k * D + d] = a;
            wantb[t * ND + k * D + d] = y[t * D + d];
          }
        oo::hc_expand(m, y.data() + t * D, want.data() + t * ND, D);
      }
      EXPECT_TRUE(within_ulps(
          got, want, 1, [&](size_t i) { return 1e-12 * abs_terms[i]; }, &spread))
          << "expand";
      EXPECT_THAT(gotb, testing::BitIdentical(wantb)) << "broadcast";
    }
    print_spread("hc expand", spread);
  });
}

// --- rotation ---------------------------------------------------------------------------------------

// dsv4_rope_run against ops::rope_pairs_freq on each head's trailing n_rot dims: forward and
// inverse, at positions 0, 7, 4093 and 131066 (the position from pos_dev + row0 + t), with the
// sliding layers' plain table (theta 1e4) and the compressed layers' YaRN table (theta 1.6e5,
// factor 16 over 65536). The angle is the same f64 product on both sides; cos / sin are the
// device's (an f64 ulp or two from the host's), so rotated values are within 1 ulp (the
// non-bit-identical count is printed); the leading dims are untouched. The store form (one head):
// the rotated row also at its position in the cache, bit for bit, the rows around it untouched.
// Shapes: 4 heads of 32 with 8 rotated, one head of 32 (store), DeepSeek-V4's 64 heads of 512
// with 64 rotated, and its one key head of 512 (store).
TEST_F(Dsv4Kernels, RopeMatchesTheOracle) {
  struct Shape {
    int heads, width, n_rot;
    int64_t T;
  };
  seeded([&] {
    Spread spread;
    for (auto [heads, width, n_rot, T] :
         {Shape{4, 32, 8, 5}, Shape{1, 32, 8, 7}, Shape{64, 512, 64, 3}, Shape{1, 512, 64, 4}})
      for (bool yarn : {false, true})
        for (int64_t pos0 : {int64_t{0}, int64_t{7}, int64_t{4093}, int64_t{131066}})
          for (bool inverse : {false, true}) {
            SCOPED_TRACE(::testing::Message()
                         << heads << " heads of " << width << " (" << n_rot << " rotated), "
                         << (yarn ? "YaRN" : "plain") << ", pos0 " << pos0 << (inverse ? ", inverse" : ""));
            const auto inv = yarn ? rope_inv_freq(n_rot, 160000, kCompressYarn) : rope_inv_freq(n_rot, 10000, {});
            const auto x = rnd(static_cast<size_t>(T * heads * width), -2, 2);
            const int64_t row0 = std::min<int64_t>(pos0, 3);
            auto dx = up(x);
            auto dinv = up(inv);
            auto dpos = up(std::vector<int64_t>{pos0 - row0});
            // the store form: one head, and (the 512-wide rows) not a 268 MB cache at 128k
            const bool store = heads == 1 && (width == 32 || pos0 < 5000);
            const int64_t positions = pos0 + T + 1;
            auto cache = poisoned<float>(store ? static_cast<size_t>(positions * width) : 0);
            cuda::Dsv4RopeParams p;
            p.x = dx.data();
            p.T = T;
            p.heads = heads;
            p.width = width;
            p.n_rot = n_rot;
            p.inv_freq = dinv.data();
            p.pos_dev = dpos.data();
            p.row0 = row0;
            p.inverse = inverse;
            p.store = store ? cache.data() : nullptr;
            cuda::dsv4_rope_run(p, s());
            e().synchronize();
            const auto got = dx.download();
            std::vector<float> want = x;
            for (int64_t t = 0; t < T; ++t)
              for (int h = 0; h < heads; ++h)
                oo::rope_pairs_freq(want.data() + (t * heads + h) * width + width - n_rot, inv, pos0 + t, inverse);
            EXPECT_TRUE(within_ulps(got, want, 1, {}, &spread)) << "rotated rows";
            for (int64_t t = 0; t < T; ++t)
              for (int h = 0; h < heads; ++h)
                for (int i = 0; i < width - n_rot; ++i) {
                  const size_t at = static_cast<size_t>((t * heads + h) * width + i);
                  ASSERT_EQ(ulp_distance(got[at], x[at]), 0) << "token " << t << " head " << h << " dim " << i;
                }
            if (!store) continue;
            const auto gc = cache.download();
            for (int64_t r = std::max<int64_t>(0, pos0 - 1); r < positions; ++r) {
              const std::vector<float> row(gc.begin() + r * width, gc.begin() + (r + 1) * width);
              if (r >= pos0 && r < pos0 + T) {
                const std::vector<float> rotated(got.begin() + (r - pos0) * width,
                                                 got.begin() + (r - pos0 + 1) * width);
                EXPECT_THAT(row, testing::BitIdentical(rotated)) << "stored row at position " << r;
              } else {
                EXPECT_TRUE(std::all_of(row.begin(), row.end(), is_poison)) << "row at position " << r << " written";
              }
            }
          }
    print_spread("rope", spread);
  });
}

// --- the compressor -----------------------------------------------------------------------------------

// dsv4_compress_run against oracle::ops::compressor_append over the same tokens, fed in pieces
// (the position uploaded to pos_dev before each call, or held in row0), in both forms: HCA
// (no overlap: ratio 8, width 32; DeepSeek-V4's ratio 128, width 512 over 260 tokens) and CSA
// (overlap: ratio 4, width 32 so cw 64; width 512), 8 or 64 dims rotated with the compressed
// layers' YaRN table. The splits put a window's slots in two or more calls (1 | 3 | 8 | 25: HCA's
// window 0 spans three calls, CSA's window 2 reads window 1's first halves from the history),
// one call, and one token per call (decode). Every closed row within 2 ulp of the oracle's, or
// 1e-6 of the row's largest value (the rotation of a value one ulp apart can cancel): both pool
// and norm in f64, so only the device's exp / cos / sin and the norm's sum order differ (the
// spread is printed). CSA's window 0 has empty first halves (weight 0). The rows are bitwise the
// same whatever the split, and every token's projections are stored at its position.
TEST_F(Dsv4Kernels, CompressorMatchesTheOracle) {
  struct Form {
    bool overlap;
    int m, w, n_rot;
    int64_t P;
    std::vector<std::vector<int64_t>> splits;
  };
  const std::vector<int64_t> ones37(37, 1), ones260(260, 1);
  const std::vector<Form> forms = {
      {false, 8, 32, 8, 37, {{1, 3, 8, 25}, {37}, ones37, {5, 11, 21}}},
      {true, 4, 32, 8, 37, {{1, 3, 8, 25}, {37}, ones37, {2, 7, 28}}},
      {true, 4, 512, 64, 37, {{1, 3, 8, 25}, {37}, ones37}},
      {false, 128, 512, 64, 260, {{1, 130, 129}, {260}, {127, 1, 132}, ones260}},
  };
  seeded([&] {
    Spread spread;
    for (const Form& f : forms) {
      SCOPED_TRACE(::testing::Message() << (f.overlap ? "CSA" : "HCA") << " ratio " << f.m << ", width " << f.w << ", "
                                        << f.P << " tokens");
      const int cw = f.overlap ? 2 * f.w : f.w;
      const int64_t rows_n = f.P / f.m;
      const auto inv = rope_inv_freq(f.n_rot, 160000, kCompressYarn);
      const auto kv = rnd(static_cast<size_t>(f.P * cw), -2, 2), gate = rnd(static_cast<size_t>(f.P * cw), -3, 3),
                 ape = rnd(static_cast<size_t>(f.m * cw)), norm = rnd(static_cast<size_t>(f.w), 0.5f, 1.5f);
      auto dape = up(ape), dnorm = up(norm);
      auto dinv = up(inv);
      std::vector<float> first_rows;
      for (size_t si = 0; si < f.splits.size(); ++si) {
        const auto& split = f.splits[si];
        ASSERT_EQ(std::accumulate(split.begin(), split.end(), int64_t{0}), f.P);
        // the decode split (a token per call): pos_dev stays 0, the position in row0
        const bool use_row0 = static_cast<int64_t>(split.size()) == f.P;
        SCOPED_TRACE(::testing::Message()
                     << "split " << si << " (" << split.size() << " calls" << (use_row0 ? ", position in row0)" : ")"));
        auto hist_kv = poisoned<float>(static_cast<size_t>(f.P * cw)),
             hist_gate = poisoned<float>(static_cast<size_t>(f.P * cw));
        auto rows = poisoned<float>(static_cast<size_t>(rows_n * f.w));
        auto dpos = up(std::vector<int64_t>{0});
        std::vector<DeviceBuffer<float>> pieces;  // alive until the launches are done
        oo::CompressorState st;
        st.ratio = f.m;
        st.width = f.w;
        st.overlap = f.overlap;
        int64_t start = 0;
        for (int64_t n : split) {
          const std::vector<float> pkv(kv.begin() + start * cw, kv.begin() + (start + n) * cw),
              pgate(gate.begin() + start * cw, gate.begin() + (start + n) * cw);
          pieces.push_back(up(pkv));
          pieces.push_back(up(pgate));
          if (!use_row0) dpos.upload(std::vector<int64_t>{start});
          cuda::Dsv4CompressParams p;
          p.kv = pieces[pieces.size() - 2].data();
          p.gate = pieces.back().data();
          p.hist_kv = hist_kv.data();
          p.hist_gate = hist_gate.data();
          p.ape = dape.data();
          p.norm = dnorm.data();
          p.rows = rows.data();
          p.inv_freq = dinv.data();
          p.n_rot = f.n_rot;
          p.pos_dev = dpos.data();
          p.row0 = use_row0 ? start : 0;
          p.T = n;
          p.m = f.m;
          p.w = f.w;
          p.overlap = f.overlap;
          p.eps = kRmsEps;
          cuda::dsv4_compress_run(p, s());
          oo::compressor_append(st, pkv.data(), pgate.data(), n, ape, norm, kRmsEps, inv);
          start += n;
        }
        e().synchronize();
        const auto got = rows.download();
        ASSERT_EQ(st.n_rows(), rows_n);
        EXPECT_THAT(hist_kv.download(), testing::BitIdentical(kv)) << "stored kv";
        EXPECT_THAT(hist_gate.download(), testing::BitIdentical(gate)) << "stored gate";
        for (int64_t r = 0; r < rows_n; ++r) {
          const std::span<const float> g(got.data() + r * f.w, static_cast<size_t>(f.w)),
              want(st.rows.data() + r * f.w, static_cast<size_t>(f.w));
          float mx = 0;
          for (float v : want) mx = std::max(mx, std::fabs(v));
          EXPECT_TRUE(within_ulps(
              g, want, 2, [&](size_t) { return 1e-6 * mx; }, &spread))
              << "row " << r;
        }
        if (si == 0)
          first_rows = got;
        else
          EXPECT_THAT(got, testing::BitIdentical(first_rows)) << "rows differ from the first split's";
      }
    }
    print_spread("compressor rows", spread);
  });
}

// --- the indexer with a compress ratio -------------------------------------------------------------

// dsa_score_run / dsa_select_run in DeepSeek-V4's form: a key per closed compressor row (ratio 4:
// a query at p sees ops::visible_rows(p, 4) = (p + 1) / 4 rows), the head weights unscaled and
// w_scale = 1 / sqrt(n_head). Scores against ops::indexer_scores over the visible rows, within
// 1e-5 of Σ_h |w_h| / sqrt(nh) relu(q_h·k) / sqrt(hd) (the sum's magnitude: f32 dots and fmas vs
// f64); the selection exactly ops::select_top's on the device's own scores (the discrete choice
// apart from the float contract), n_sel = min(visible, topk), -1 past it. Shapes: the first
// queries of a sequence (positions 0..2 see no row: n_sel 0, all -1; then fewer rows than topk:
// all kept), a call where no query sees a row at all (nothing scored), a call starting mid-window
// (pos0 21), DeepSeek-V4's 64 heads of 128 with top 512 over 750 rows and over 250 (all kept);
// positions from pos0 or from pos_dev + row0. Key rows repeat (bit-equal scores) and zero rows
// score exactly 0; rows past the last visible one hold NaN. Ties at the cut: 100 visible rows
// whose every head's dot is negative (score exactly +0) around 5 positive rows, top 10: the 5 and
// the lowest zero rows; with every head weight negative the positive rows score below 0 and the
// top 10 are the 10 lowest of the others, all +0.
TEST_F(Dsv4Kernels, IndexerSelectsTheOraclesTopkWithRatio) {
  constexpr int kRatio = 4;
  struct Selected {
    std::vector<float> scores;
    std::vector<int32_t> sel, n_sel;
  };
  // T queries at positions pos0.. over the rows of k ([>= (pos0 + T) / 4, hd]), row stride ld.
  auto select_on_device = [&](const std::vector<float>& q, const std::vector<float>& w, const std::vector<float>& k,
                              int64_t T, int64_t pos0, int64_t ld, int nh, int hd, int topk, bool dev) {
    auto dq = up(q), dw = up(w), dk = up(k);
    auto scores = poisoned<float>(static_cast<size_t>(T * ld));
    auto sel = poisoned<int32_t>(static_cast<size_t>(T * topk)), nsel = poisoned<int32_t>(static_cast<size_t>(T));
    const int64_t row0 = std::min<int64_t>(pos0, 2);
    auto dpos = up(std::vector<int64_t>{pos0 - row0});
    cuda::DsaScoreParams sp;
    sp.q = dq.data();
    sp.w = dw.data();
    sp.k = dk.data();
    sp.scores = scores.data();
    sp.T = T;
    sp.pos0 = pos0;
    sp.ld = ld;
    sp.pos_dev = dev ? dpos.data() : nullptr;
    sp.row0 = dev ? row0 : 0;
    sp.n_head = nh;
    sp.head_dim = hd;
    sp.qk_scale = 1.0f / std::sqrt(static_cast<float>(hd));
    sp.w_scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(nh)));
    sp.ratio = kRatio;
    cuda::dsa_score_run(sp, s());
    cuda::DsaSelectParams lp;
    lp.scores = scores.data();
    lp.sel = sel.data();
    lp.n_sel = nsel.data();
    lp.T = T;
    lp.pos0 = pos0;
    lp.ld = ld;
    lp.pos_dev = sp.pos_dev;
    lp.row0 = sp.row0;
    lp.topk = topk;
    lp.ratio = kRatio;
    cuda::dsa_select_run(lp, s());
    e().synchronize();
    return Selected{scores.download(), sel.download(), nsel.download()};
  };
  struct Shape {
    int nh, hd, topk;
    int64_t pos0, T;
    bool dev;
  };
  seeded([&] {
    for (auto [nh, hd, topk, pos0, T, dev] :
         {Shape{8, 16, 5, 0, 40, false}, Shape{4, 32, 3, 0, 3, true}, Shape{8, 16, 4, 21, 6, true},
          Shape{64, 128, 512, 2997, 3, false}, Shape{64, 128, 512, 997, 3, true}}) {
      SCOPED_TRACE(::testing::Message() << nh << " heads of " << hd << ", top " << topk << ", positions " << pos0 << "+"
                                        << T << (dev ? " (pos_dev)" : ""));
      const int64_t R = oo::visible_rows(pos0 + T - 1, kRatio), ld = R + 3;
      auto q = rnd(static_cast<size_t>(T * nh * hd)), w = rnd(static_cast<size_t>(T * nh));
      auto k = rnd(static_cast<size_t>(R * hd));
      for (int64_t r = 1; r < R; r += 3)  // every third row repeats the one before it
        std::copy(k.begin() + (r - 1) * hd, k.begin() + r * hd, k.begin() + r * hd);
      for (int64_t r = 5; r < R; r += 7) std::fill(k.begin() + r * hd, k.begin() + (r + 1) * hd, 0.0f);
      k.resize(static_cast<size_t>((R + 2) * hd), std::nanf(""));  // rows nobody sees yet
      const Selected g = select_on_device(q, w, k, T, pos0, ld, nh, hd, topk, dev);
      for (int64_t t = 0; t < T; ++t) {
        const int64_t vis = oo::visible_rows(pos0 + t, kRatio);
        SCOPED_TRACE(::testing::Message() << "query " << t << " (" << vis << " rows)");
        const float* qt = q.data() + t * nh * hd;
        const float* wt = w.data() + t * nh;
        const auto want = oo::indexer_scores(qt, wt, k.data(), vis, nh, hd);
        std::vector<double> own(static_cast<size_t>(vis));
        for (int64_t x = 0; x < vis; ++x) {
          // the error scale of f32 sums: every product's magnitude (a relu'd dot that cancels to
          // near 0 keeps the rounding of its terms: relative to the score alone it was 3.6e-5)
          double mag = 0;
          for (int h = 0; h < nh; ++h) {
            double terms = 0;
            for (int64_t i = 0; i < hd; ++i) terms += std::fabs(double(qt[h * hd + i]) * double(k[x * hd + i]));
            mag += std::fabs(wt[h]) / std::sqrt(static_cast<double>(nh)) * terms / std::sqrt(static_cast<double>(hd));
          }
          const float gs = g.scores[t * ld + x];
          own[x] = gs;
          ASSERT_LE(std::fabs(static_cast<double>(gs) - want[x]), 1e-5 * mag)
              << "row " << x << ": got " << gs << ", oracle " << want[x];
        }
        const auto expect = oo::select_top(own, topk);
        ASSERT_EQ(static_cast<int64_t>(expect.size()), std::min<int64_t>(vis, topk));
        ASSERT_EQ(g.n_sel[t], static_cast<int32_t>(expect.size()));
        for (size_t j = 0; j < expect.size(); ++j) ASSERT_EQ(g.sel[t * topk + j], expect[j]) << "slot " << j;
        for (int64_t j = static_cast<int64_t>(expect.size()); j < topk; ++j)
          EXPECT_EQ(g.sel[t * topk + j], -1) << "slot " << j;
      }
    }
    // Ties at the cut: 100 visible rows (a query at 399), every row's entries negative against
    // all-positive query heads (each head's dot < 0: score exactly 0) but 5 positive rows.
    const int nh = 4, hd = 16, topk = 10;
    const int64_t pos0 = 399, R = 100;
    const std::vector<int64_t> positive = {7, 30, 31, 64, 99};
    const auto q = rnd(static_cast<size_t>(nh * hd), 0.1f, 1.0f);
    auto k = rnd(static_cast<size_t>(R * hd), -1.0f, -0.1f);
    for (int64_t r : positive) {
      const auto pos_row = rnd(static_cast<size_t>(hd), 0.1f, 1.0f);
      std::copy(pos_row.begin(), pos_row.end(), k.begin() + r * hd);
    }
    for (bool negative_w : {false, true}) {
      SCOPED_TRACE(negative_w ? "every head weight negative" : "positive head weights");
      auto w = rnd(static_cast<size_t>(nh), 0.1f, 1.0f);
      if (negative_w)
        for (float& x : w) x = -x;
      const Selected g = select_on_device(q, w, k, 1, pos0, R, nh, hd, topk, false);
      std::vector<int32_t> want_sel;
      if (!negative_w) {
        want_sel = {0, 1, 2, 3, 4, 7, 30, 31, 64, 99};
      } else {
        for (int32_t r = 0; static_cast<int>(want_sel.size()) < topk; ++r)
          if (std::find(positive.begin(), positive.end(), r) == positive.end()) want_sel.push_back(r);
      }
      EXPECT_EQ(g.n_sel[0], topk);
      EXPECT_EQ(g.sel, want_sel);
      for (int64_t r = 0; r < R; ++r) {
        if (std::find(positive.begin(), positive.end(), r) != positive.end()) continue;
        uint32_t bits;
        std::memcpy(&bits, &g.scores[r], sizeof bits);
        EXPECT_EQ(bits, 0u) << "row " << r << " scores " << g.scores[r] << ", not +0";
      }
      const auto want = oo::indexer_scores(q.data(), w.data(), k.data(), R, nh, hd);
      EXPECT_EQ(oo::select_top(want, topk), want_sel) << "the oracle's own choice";
    }
  });
}

// --- attention with sinks ---------------------------------------------------------------------------

// dsv4_attention_run against ops::sink_attention over the same key list: the raw keys of
// positions max(0, p - W + 1)..p in order, then the compressed rows — none (sliding), every
// visible row 0..(p + 1) / ratio - 1 (HCA), or the query's selection (CSA: ascending, n_sel per
// query, some 0) — K = V, a sink logit per head (one head's sink large enough to take nearly all
// the mass). Within 1e-5 of the case's max |out|: f32 scores, exp and sums against f64. Keys no
// query may read (cache positions before every window, rows past the visible ones, rows no query
// selected) hold NaN, so reading one shows. max_keys is exactly window + the most rows a query
// reads. Shapes: 4 heads of 32, window 8, 40 queries from position 0 (windows and rows growing
// from nothing), HCA ratio 8, CSA ratio 4 top 6; DeepSeek-V4's 64 heads of 512, window 128, 3
// queries at 1000, HCA ratio 128, CSA ratio 4 top 512 and top 64 of 250 rows.
TEST_F(Dsv4Kernels, AttentionWithSinksMatchesTheOracle) {
  enum Kind { sliding, hca, csa };
  struct Shape {
    int H, hd, window;
    int64_t pos0, T;
    Kind kind;
    int ratio, topk;
  };
  seeded([&] {
    for (const Shape& sh :
         {Shape{4, 32, 8, 0, 40, sliding, 0, 0}, Shape{4, 32, 8, 0, 40, hca, 8, 0}, Shape{4, 32, 8, 0, 40, csa, 4, 6},
          Shape{64, 512, 128, 1000, 3, sliding, 0, 0}, Shape{64, 512, 128, 1000, 3, hca, 128, 0},
          Shape{64, 512, 128, 1000, 3, csa, 4, 512}, Shape{64, 512, 128, 1000, 3, csa, 4, 64}}) {
      const char* kinds[] = {"sliding", "HCA", "CSA"};
      SCOPED_TRACE(::testing::Message() << kinds[sh.kind] << ": " << sh.H << " heads of " << sh.hd << ", window "
                                        << sh.window << ", ratio " << sh.ratio << ", top " << sh.topk << ", positions "
                                        << sh.pos0 << "+" << sh.T);
      const int H = sh.H, hd = sh.hd, W = sh.window;
      const int64_t T = sh.T, P = sh.pos0 + T;
      const int64_t R = sh.kind == sliding ? 0 : oo::visible_rows(P - 1, sh.ratio);
      const auto q = rnd(static_cast<size_t>(T * H * hd), -4, 4);
      auto kc = rnd(static_cast<size_t>(P * hd));
      const int64_t first_read = std::max<int64_t>(0, sh.pos0 - W + 1);
      std::fill(kc.begin(), kc.begin() + first_read * hd, std::nanf(""));
      auto rows = rnd(static_cast<size_t>((R + 2) * hd));
      std::fill(rows.begin() + R * hd, rows.end(), std::nanf(""));
      auto sinks = rnd(static_cast<size_t>(H), -1, 3);
      sinks[0] = 20.0f;
      // the CSA selection: per query an ascending subset of its visible rows (some queries none)
      const int topk = std::max(sh.topk, 1);
      std::vector<int32_t> sel(static_cast<size_t>(T * topk), -1), n_sel(static_cast<size_t>(T), 0);
      std::vector<std::vector<int32_t>> keys_rows(static_cast<size_t>(T));
      int max_rows = 0;
      std::vector<char> read(static_cast<size_t>(R), 0);
      for (int64_t t = 0; t < T; ++t) {
        const int64_t vis = sh.kind == sliding ? 0 : oo::visible_rows(sh.pos0 + t, sh.ratio);
        auto& kr = keys_rows[t];
        if (sh.kind == hca) {
          for (int32_t r = 0; r < vis; ++r) kr.push_back(r);
        } else if (sh.kind == csa) {
          std::vector<int32_t> all(static_cast<size_t>(vis));
          std::iota(all.begin(), all.end(), 0);
          std::shuffle(all.begin(), all.end(), rng);
          int64_t c = std::min<int64_t>(vis, sh.topk);
          if (t % 5 == 1) {
            c = 0;  // a query that reads no row
          } else if (t % 5 == 3) {
            c = std::min<int64_t>(c, 1 + t % 3);  // a few
          }
          kr.assign(all.begin(), all.begin() + c);
          std::sort(kr.begin(), kr.end());
          n_sel[t] = static_cast<int32_t>(c);
          std::copy(kr.begin(), kr.end(), sel.begin() + t * topk);
        }
        for (int32_t r : kr) read[r] = 1;
        max_rows = std::max(max_rows, static_cast<int>(kr.size()));
      }
      for (int64_t r = 0; r < R; ++r)
        if (!read[r]) std::fill(rows.begin() + r * hd, rows.begin() + (r + 1) * hd, std::nanf(""));
      auto dq = up(q), dkc = up(kc), drows = up(rows), dsinks = up(sinks);
      auto dsel = up(sel), dnsel = up(n_sel);
      const int64_t row0 = std::min<int64_t>(sh.pos0, 1);
      auto dpos = up(std::vector<int64_t>{sh.pos0 - row0});
      auto out = poisoned<float>(static_cast<size_t>(T * H * hd));
      cuda::Dsv4AttnParams p;
      p.q = dq.data();
      p.k_cache = dkc.data();
      p.rows = sh.kind == sliding ? nullptr : drows.data();
      p.sel = sh.kind == csa ? dsel.data() : nullptr;
      p.n_sel = sh.kind == csa ? dnsel.data() : nullptr;
      p.topk = sh.kind == csa ? sh.topk : 0;
      p.sinks = dsinks.data();
      p.out = out.data();
      p.pos_dev = dpos.data();
      p.row0 = row0;
      p.T = T;
      p.H = H;
      p.hd = hd;
      p.window = W;
      p.ratio = sh.ratio;
      p.max_keys = W + max_rows;
      p.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(hd)));
      cuda::dsv4_attention_run(p, s());
      e().synchronize();
      const auto got = out.download();
      std::vector<float> want(static_cast<size_t>(T * H * hd));
      for (int64_t t = 0; t < T; ++t) {
        const int64_t pos = sh.pos0 + t;
        std::vector<const float*> keys;
        for (int64_t j = std::max<int64_t>(0, pos - W + 1); j <= pos; ++j) keys.push_back(kc.data() + j * hd);
        for (int32_t r : keys_rows[t]) keys.push_back(rows.data() + static_cast<int64_t>(r) * hd);
        oo::sink_attention(q.data() + t * H * hd, keys, sinks.data(), H, hd, want.data() + t * H * hd);
      }
      float mx = 0;
      for (float v : want) mx = std::max(mx, std::fabs(v));
      ASSERT_GT(mx, 0.0f);
      size_t bad = 0, first = 0;
      double worst = 0;
      for (size_t i = 0; i < want.size(); ++i) {
        const double d = std::isnan(got[i]) ? INFINITY : std::fabs(static_cast<double>(got[i]) - want[i]);
        worst = std::max(worst, d);
        if (!(d <= 1e-5 * mx) && bad++ == 0) first = i;
      }
      EXPECT_EQ(bad, 0u) << "first at query " << first / (H * hd) << " head " << (first / hd) % H << " dim "
                         << first % hd << ": got " << got[first] << ", expected " << want[first] << "; max |diff| "
                         << worst << " of max |out| " << mx;
      std::cout << "[ measured ] attention " << kinds[sh.kind] << " hd " << hd << ": max |diff| / max |out| "
                << worst / mx << "\n";
    }
  });
}

// --- routing ----------------------------------------------------------------------------------------

// dsv4_route_run against ops::route_sqrt_softplus: the ids identical and in the same order (score
// routing: the top-k of s + bias in selection order, ties to the lower expert; hash routing: the
// token's tid2eid row), the weights s / (Σ s + 1e-20) · scale within 1 ulp of the oracle's f64
// rounded to f32 (the device's log1p / exp / sqrt are an f64 ulp off at most). E = 16 and
// DeepSeek-V4's 256, k = 6, routed_scaling_factor 1.5. Exact ties in s + bias (equal logits and
// equal bias): a whole row tied (experts 0..5), a tied group larger than k at the top (its 6
// lowest), and a tied group straddling the cut after 4 clear winners (its 2 lowest); without
// bias too.
TEST_F(Dsv4Kernels, RouteMatchesTheOracle) {
  seeded([&] {
    constexpr int k = 6, T = 8, V = 50;
    constexpr double scale = 1.5;
    Spread spread;
    for (int E : {16, 256}) {
      const std::vector<int> group = {1, 3, 5, 9, 12, 14, E - 1, E / 2 + 1};  // equal bias
      // ids, weights on the device; ids and weights of the oracle
      auto check = [&](const std::vector<float>& logits, const std::vector<float>& bias,
                       const std::vector<float>& table, const std::vector<int32_t>& tokens) {
        auto dl = up(logits), db = up(bias.empty() ? std::vector<float>{0} : bias),
             dt = up(table.empty() ? std::vector<float>{0} : table);
        auto dtok = up(tokens.empty() ? std::vector<int32_t>{0} : tokens);
        auto ids = poisoned<int32_t>(T * k);
        auto wts = poisoned<float>(T * k);
        cuda::Dsv4RouteParams p;
        p.logits = dl.data();
        p.bias = bias.empty() ? nullptr : db.data();
        p.tid2eid = table.empty() ? nullptr : dt.data();
        p.tokens = tokens.empty() ? nullptr : dtok.data();
        p.ids = ids.data();
        p.weights = wts.data();
        p.T = T;
        p.E = E;
        p.k = k;
        p.scale = scale;
        cuda::dsv4_route_run(p, s());
        e().synchronize();
        const auto gid = ids.download();
        const auto gw = wts.download();
        std::vector<int32_t> want_ids;
        std::vector<float> want_w;
        for (int t = 0; t < T; ++t) {
          std::vector<int32_t> fixed;
          if (!table.empty())
            for (int j = 0; j < k; ++j) fixed.push_back(static_cast<int32_t>(table[tokens[t] * k + j]));
          auto sel = oo::route_sqrt_softplus({logits.data() + t * E, static_cast<size_t>(E)}, bias, fixed, k, scale);
          // the selection ledger's order (memra/selection_ledger.h): highest weight first, ties to
          // the lower expert — not the choice order of a biased score layer nor the hash table's
          std::stable_sort(sel.begin(), sel.end(), [](const auto& a, const auto& b) {
            return a.second != b.second ? a.second > b.second : a.first < b.first;
          });
          for (const auto& [ex, wt] : sel) {
            want_ids.push_back(static_cast<int32_t>(ex));
            want_w.push_back(static_cast<float>(wt));
          }
        }
        EXPECT_EQ(gid, want_ids) << "expert ids";
        EXPECT_TRUE(within_ulps(gw, want_w, 1, {}, &spread)) << "weights";
        return gid;
      };
      auto logits = rnd(static_cast<size_t>(T * E), -4, 4);
      auto bias = rnd(static_cast<size_t>(E), -0.5f, 0.5f);
      for (int ex : group) bias[ex] = 0.25f;
      // token 0: every logit equal (with bias: the group's ties among the others)
      std::fill(logits.begin(), logits.begin() + E, 1.0f);
      // token 1: the group tied at the top, above everything else
      for (int ex : group) logits[E + ex] = 6.0f;
      // token 2: 4 clear winners outside the group, then the group tied across the cut
      for (int x = 0; x < E; ++x) logits[2 * E + x] = std::min(logits[2 * E + x], -2.0f);
      for (int j = 0; j < 4; ++j) {  // winners well apart (s 3.5 .. 3.0), without bias: in this order
        logits[2 * E + 2 * j + 2] = 12.0f - static_cast<float>(j);
        bias[2 * j + 2] = 0.0f;
      }
      for (int ex : group) logits[2 * E + ex] = 4.0f;
      {
        SCOPED_TRACE(::testing::Message() << "score routing, E " << E << ", with bias");
        const auto gid = check(logits, bias, {}, {});
        std::vector<int> sorted_group = group;
        std::sort(sorted_group.begin(), sorted_group.end());
        sorted_group.erase(std::unique(sorted_group.begin(), sorted_group.end()), sorted_group.end());
        EXPECT_THAT(std::vector<int32_t>(gid.begin() + k, gid.begin() + 2 * k),
                    ::testing::ElementsAreArray(sorted_group.begin(), sorted_group.begin() + k))
            << "token 1: the tied group's lowest experts, in order";
        std::vector<int32_t> want2 = {2, 4, 6, 8};
        for (int ex : sorted_group)
          if (static_cast<int>(want2.size()) < k && std::find(want2.begin(), want2.end(), ex) == want2.end())
            want2.push_back(ex);
        EXPECT_THAT(std::vector<int32_t>(gid.begin() + 2 * k, gid.begin() + 3 * k), ::testing::ElementsAreArray(want2))
            << "token 2: the winners, then the tied group's lowest";
      }
      {
        SCOPED_TRACE(::testing::Message() << "score routing, E " << E << ", no bias");
        const auto gid = check(logits, {}, {}, {});
        EXPECT_THAT(std::vector<int32_t>(gid.begin(), gid.begin() + k), ::testing::ElementsAre(0, 1, 2, 3, 4, 5))
            << "token 0: every expert tied";
      }
      {
        SCOPED_TRACE(::testing::Message() << "hash routing, E " << E);
        std::vector<float> table(static_cast<size_t>(V * k));
        std::vector<int> experts(static_cast<size_t>(E));
        std::iota(experts.begin(), experts.end(), 0);
        for (int v = 0; v < V; ++v) {
          std::shuffle(experts.begin(), experts.end(), rng);
          for (int j = 0; j < k; ++j) table[v * k + j] = static_cast<float>(experts[j]);
        }
        std::vector<int32_t> tokens(T);
        std::uniform_int_distribution<int32_t> tok(0, V - 1);
        for (auto& x : tokens) x = tok(rng);
        const auto gid = check(rnd(static_cast<size_t>(T * E), -4, 4), {}, table, tokens);
        for (int t = 0; t < T; ++t) {  // the token's table row, in the ledger's order
          std::vector<int32_t> row(table.begin() + tokens[t] * k, table.begin() + (tokens[t] + 1) * k);
          EXPECT_THAT(std::vector<int32_t>(gid.begin() + t * k, gid.begin() + (t + 1) * k),
                      ::testing::UnorderedElementsAreArray(row))
              << "token " << t;
        }
      }
    }
    print_spread("route weights", spread);
  });
}

// --- refusals ---------------------------------------------------------------------------------------

// Shapes a kernel cannot take are refused before any launch with a memra::Error naming the
// kernel and the offending value: stream counts outside 1..kHcMaxStreams, an odd or oversized
// rotation, a stored rotation of several heads, a compressor ratio of 0 or narrower than its
// rotation, attention with no head dim / window, max_keys below the window, a compressed layer
// without a ratio, a selection without topk, more queries than the grid, more keys than shared
// memory holds, more experts chosen than exist, an indexer ratio of 0.
TEST_F(Dsv4Kernels, BadShapesAreRefusedByName) {
  using ::testing::HasSubstr;
  using ::testing::ThrowsMessage;
  cuda::HcMixParams mp;
  mp.T = 1;
  mp.D = 64;
  mp.N = cuda::kHcMaxStreams + 1;
  EXPECT_THAT([&] { cuda::hc_mix_run(mp, s()); }, ThrowsMessage<Error>(HasSubstr("hc mix: 9 streams")));
  mp.N = 0;
  EXPECT_THAT([&] { cuda::hc_mix_run(mp, s()); }, ThrowsMessage<Error>(HasSubstr("hc mix: 0 streams")));
  cuda::HcExpandParams ep;
  ep.T = 1;
  ep.D = 64;
  ep.N = cuda::kHcMaxStreams + 1;
  EXPECT_THAT([&] { cuda::hc_expand_run(ep, s()); }, ThrowsMessage<Error>(HasSubstr("hc expand: 9 streams")));

  cuda::Dsv4RopeParams rp;
  rp.T = 1;
  rp.heads = 1;
  rp.width = 32;
  rp.n_rot = 7;
  EXPECT_THAT([&] { cuda::dsv4_rope_run(rp, s()); }, ThrowsMessage<Error>(HasSubstr("dsv4 rope: 7 rotated")));
  rp.n_rot = 64;
  EXPECT_THAT([&] { cuda::dsv4_rope_run(rp, s()); }, ThrowsMessage<Error>(HasSubstr("64 rotated of 32 dims")));
  rp.n_rot = 8;
  rp.heads = 2;
  float dummy = 0;
  rp.store = &dummy;
  EXPECT_THAT([&] { cuda::dsv4_rope_run(rp, s()); }, ThrowsMessage<Error>(HasSubstr("2 heads (stored)")));

  cuda::Dsv4CompressParams cp;
  cp.T = 1;
  cp.m = 0;
  cp.w = 32;
  cp.n_rot = 8;
  EXPECT_THAT([&] { cuda::dsv4_compress_run(cp, s()); }, ThrowsMessage<Error>(HasSubstr("dsv4 compressor: ratio 0")));
  cp.m = 4;
  cp.w = 4;
  EXPECT_THAT([&] { cuda::dsv4_compress_run(cp, s()); }, ThrowsMessage<Error>(HasSubstr("width 4, rotated 8")));

  cuda::Dsv4AttnParams ap;
  ap.T = 1;
  ap.H = 4;
  ap.hd = 32;
  ap.window = 8;
  ap.max_keys = 8;
  const auto refuses = [&](cuda::Dsv4AttnParams bad, const char* what, const char* names) {
    EXPECT_THAT([&] { cuda::dsv4_attention_run(bad, s()); }, ThrowsMessage<Error>(HasSubstr(names))) << what;
  };
  cuda::Dsv4AttnParams bad = ap;
  bad.hd = 0;
  refuses(bad, "no head dim", "dsv4 attention: head dim 0");
  bad = ap;
  bad.window = 0;
  refuses(bad, "no window", "window 0");
  bad = ap;
  bad.max_keys = 7;
  refuses(bad, "max_keys below the window", "7 keys");
  bad = ap;
  bad.rows = &dummy;
  bad.ratio = 0;
  refuses(bad, "compressed rows without a ratio", "ratio 0");
  bad = ap;
  bad.rows = &dummy;
  bad.ratio = 4;
  int32_t isel = 0;
  bad.sel = &isel;
  bad.topk = 0;
  refuses(bad, "a selection without topk", "dsv4 attention");
  bad = ap;
  bad.T = 70000;
  refuses(bad, "more queries than the grid", "70000 queries exceed the grid");
  bad = ap;
  bad.hd = 512;
  bad.max_keys = 100000;
  refuses(bad, "more keys than shared memory", "exceed shared memory");

  cuda::Dsv4RouteParams op;
  op.T = 1;
  op.E = 4;
  op.k = 6;
  EXPECT_THAT([&] { cuda::dsv4_route_run(op, s()); }, ThrowsMessage<Error>(HasSubstr("dsv4 route: top 6 of 4")));

  cuda::DsaScoreParams sp;
  sp.T = 1;
  sp.n_head = 4;
  sp.head_dim = 16;
  sp.ld = 16;
  sp.ratio = 0;
  EXPECT_THAT([&] { cuda::dsa_score_run(sp, s()); }, ThrowsMessage<Error>(HasSubstr("dsa score: ratio 0")));
  cuda::DsaSelectParams lp;
  lp.T = 1;
  lp.ld = 16;
  lp.topk = 4;
  lp.ratio = 0;
  EXPECT_THAT([&] { cuda::dsa_select_run(lp, s()); }, ThrowsMessage<Error>(HasSubstr("ratio 0")));
}

}  // namespace
}  // namespace memra::ops
