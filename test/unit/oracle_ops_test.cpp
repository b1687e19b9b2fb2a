// The oracle's ops against values worked out here: by hand for the small cases (RoPE, 2-token
// attention, routing, MoE, norms), and against literal scalar re-implementations of the HF
// formulas (shared/reference/qwen-models.md) for GQA attention and a whole GDN layer.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <numbers>
#include <optional>
#include <random>

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "memra/config.h"
#include "memra/oracle.h"
#include "memra/testing/fixtures.h"
#include "oracle/ops.h"

namespace memra::oracle {
namespace {

using testing_fixtures::rel_err;

Matrix mat(int64_t r, int64_t c, std::vector<float> v) {
  Matrix m(r, c);
  m.data = std::move(v);
  return m;
}

Matrix rand_mat(std::mt19937& g, int64_t r, int64_t c, float s = 0.5f) {
  std::uniform_real_distribution<float> u(-s, s);
  Matrix m(r, c);
  for (float& x : m.data) x = u(g);
  return m;
}
std::vector<float> rand_vec(std::mt19937& g, int64_t n, float lo, float hi) {
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = u(g);
  return v;
}
// The literal references' arithmetic: y = m v in f64, and the logistic function.
std::vector<double> lin(const Matrix& m, const double* v) {
  std::vector<double> y(static_cast<size_t>(m.rows));
  for (int64_t r = 0; r < m.rows; ++r)
    for (int64_t k = 0; k < m.cols; ++k) y[static_cast<size_t>(r)] += m.at(r, k) * v[k];
  return y;
}
double sig(double v) { return 1 / (1 + std::exp(-v)); }

TEST(OracleDot, F64AccumulationAndThreadIndependentMatvec) {
  std::mt19937 g(1);
  Matrix w = rand_mat(g, 4096, 515);  // odd width exercises the tail lanes
  std::vector<float> x = rand_vec(g, 515, -1, 1);
  // f64 result within f64 rounding of a long-double sum (f32 accumulation would be ~1e-7 off)
  long double ref = 0;
  for (int64_t i = 0; i < 515; ++i) ref += static_cast<long double>(w.at(7, i)) * x[i];
  EXPECT_NEAR(ops::dot(w.row(7), x.data(), 515), static_cast<double>(ref), 1e-14);
  std::vector<float> y1(4096), y2(4096), y3(4096), ym(4096 * 2);
  ops::matvec(w, x.data(), y1.data(), 1);
  ops::matvec(w, x.data(), y2.data(), 2);
  ops::matvec(w, x.data(), y3.data(), 3);
  EXPECT_TRUE(testing_fixtures::bit_equal(y1, y2));
  EXPECT_TRUE(testing_fixtures::bit_equal(y1, y3));
  // matmul over two inputs == two matvecs, bitwise
  std::vector<float> xx = x;
  xx.insert(xx.end(), x.begin(), x.end());
  ops::matmul(w, xx.data(), 2, ym.data(), 2);
  EXPECT_TRUE(testing_fixtures::bit_equal(std::span<const float>(ym).subspan(4096), y1));
}

TEST(OracleNorm, RmsNormAndGatedNormByHand) {
  const float x[4] = {1, 2, 3, 4}, w[4] = {1, 0.5f, 2, 1}, z[4] = {0, 1, -1, 2};
  float y[4];
  ops::rmsnorm(x, w, 4, 1e-6, y);
  const double r = 1.0 / std::sqrt((1 + 4 + 9 + 16) / 4.0 + 1e-6);
  for (int i = 0; i < 4; ++i) EXPECT_FLOAT_EQ(y[i], static_cast<float>(x[i] * r * w[i]));
  ops::rmsnorm_gated(x, z, w, 4, 1e-6, y);
  for (int i = 0; i < 4; ++i) {
    const double silu = z[i] / (1.0 + std::exp(-static_cast<double>(z[i])));
    EXPECT_FLOAT_EQ(y[i], static_cast<float>(x[i] * r * w[i] * silu));
  }
}

TEST(OracleRope, PartialNeoxByHand) {
  // head_dim 8, n_rot 4, theta 100, position 3: pairs (0,2) at freq 100^0 = 1 and (1,3) at
  // freq 100^(-2/4) = 0.1; dims 4..7 untouched.
  float x[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  ops::rope_neox(x, 4, 3, 100.0);
  const double a0 = 3.0, a1 = 0.3;
  EXPECT_FLOAT_EQ(x[0], static_cast<float>(1 * std::cos(a0) - 3 * std::sin(a0)));
  EXPECT_FLOAT_EQ(x[2], static_cast<float>(3 * std::cos(a0) + 1 * std::sin(a0)));
  EXPECT_FLOAT_EQ(x[1], static_cast<float>(2 * std::cos(a1) - 4 * std::sin(a1)));
  EXPECT_FLOAT_EQ(x[3], static_cast<float>(4 * std::cos(a1) + 2 * std::sin(a1)));
  for (int i = 4; i < 8; ++i) EXPECT_EQ(x[i], static_cast<float>(i + 1));
  float y[4] = {1, 2, 3, 4};
  ops::rope_neox(y, 4, 0, 100.0);  // position 0 is the identity
  EXPECT_EQ(y[0], 1.0f);
  EXPECT_EQ(y[3], 4.0f);
}

ModelConfig attn_config(int64_t D, int64_t H, int64_t KV, int64_t hd, int64_t rot, Family f) {
  ModelConfig c;
  c.family = f;
  c.n_embd = D;
  c.n_head = H;
  c.n_head_kv = KV;
  c.head_dim = hd;
  c.n_rot = rot;
  c.rope_theta = 10000;
  c.rms_eps = 1e-6;
  return c;
}

TEST(OracleAttention, TwoTokensByHandPlainAndGated) {
  // D = hd = 2, one head, identity projections and norms, rope over both dims.
  ModelConfig c = attn_config(2, 1, 1, 2, 2, Family::Qwen3);
  AttnWeights w;
  w.wq = w.wk = w.wv = w.wo = mat(2, 2, {1, 0, 0, 1});
  w.q_norm = w.k_norm = {1, 1};
  const float x[4] = {1, 0, 0, 1};  // token 0 = e0, token 1 = e1
  AttnCacheLayer cache{std::vector<float>(4), std::vector<float>(4), {}, {}, {}, {}, {}};
  float out[4];
  ops::attention(c, w, x, 2, 0, cache, out, 1);
  // q/k after RMSNorm: n e_i with n = 1/sqrt(1/2 + eps). Position 1 rotates by 1 rad:
  // k1 = q1 = n (-sin1, cos1). t=0 sees only itself: out = v0 = e0.
  // t=1: s0 = q1.k0/sqrt2 = -n^2 sin1/sqrt2, s1 = n^2/sqrt2.
  EXPECT_FLOAT_EQ(out[0], 1.0f);
  EXPECT_FLOAT_EQ(out[1], 0.0f);
  const double n = 1.0 / std::sqrt(0.5 + 1e-6);
  const double s0 = -n * n * std::sin(1.0) / std::sqrt(2.0), s1 = n * n / std::sqrt(2.0);
  const double p0 = std::exp(s0) / (std::exp(s0) + std::exp(s1)), p1 = 1 - p0;
  EXPECT_NEAR(out[2], p0, 1e-7);
  EXPECT_NEAR(out[3], p1, 1e-7);
  // the cache holds the rotated, normed keys
  EXPECT_NEAR(cache.k[2], -n * std::sin(1.0), 1e-6);
  EXPECT_NEAR(cache.k[3], n * std::cos(1.0), 1e-6);
  // gated: o *= sigmoid(Wgate x) with Wgate = identity -> sigmoid of token 1's (0, 1)
  ModelConfig cg = c;
  cg.family = Family::Qwen3Next;
  w.wgate = mat(2, 2, {1, 0, 0, 1});
  AttnCacheLayer cache2{std::vector<float>(4), std::vector<float>(4), {}, {}, {}, {}, {}};
  ops::attention(cg, w, x, 2, 0, cache2, out, 1);
  EXPECT_NEAR(out[2], p0 * 0.5, 1e-7);
  EXPECT_NEAR(out[3], p1 / (1 + std::exp(-1.0)), 1e-7);
  EXPECT_NEAR(out[0], 1 / (1 + std::exp(-1.0)), 1e-7);
}

// A literal reference: per head, norm, rope, scores over 0..t, softmax, weighted V (HF order).
TEST(OracleAttention, GqaPartialRopeMatchesLiteralReference) {
  std::mt19937 g(2);
  ModelConfig c = attn_config(8, 4, 2, 8, 4, Family::Qwen35);
  AttnWeights w;
  w.wq = rand_mat(g, 32, 8);
  w.wgate = rand_mat(g, 32, 8);
  w.wk = rand_mat(g, 16, 8);
  w.wv = rand_mat(g, 16, 8);
  w.wo = rand_mat(g, 8, 32);
  w.q_norm = rand_vec(g, 8, 0.5f, 1.5f);
  w.k_norm = rand_vec(g, 8, 0.5f, 1.5f);
  const int T = 5;
  std::vector<float> x = rand_vec(g, T * 8, -1, 1), out(T * 8);
  AttnCacheLayer cache{std::vector<float>(T * 16), std::vector<float>(T * 16), {}, {}, {}, {}, {}};
  ops::attention(c, w, x.data(), T, 0, cache, out.data(), 1);

  auto lin = [&](const Matrix& m, const float* v) {
    std::vector<double> y(static_cast<size_t>(m.rows));
    for (int64_t r = 0; r < m.rows; ++r)
      for (int64_t k = 0; k < m.cols; ++k) y[r] += static_cast<double>(m.at(r, k)) * v[k];
    return y;
  };
  auto norm_rope = [&](double* h, const std::vector<float>& nw, int pos) {
    double ss = 0;
    for (int i = 0; i < 8; ++i) ss += h[i] * h[i];
    for (int i = 0; i < 8; ++i) h[i] = h[i] / std::sqrt(ss / 8 + 1e-6) * nw[i];
    for (int i = 0; i < 2; ++i) {  // rot 4: pairs (0,2), (1,3), inv_freq = 1e4^(-2i/4)
      const double a = pos * std::pow(10000.0, -2.0 * i / 4), u = h[i], v = h[i + 2];
      h[i] = u * std::cos(a) - v * std::sin(a);
      h[i + 2] = v * std::cos(a) + u * std::sin(a);
    }
  };
  std::vector<std::vector<double>> K(T), V(T), Q(T), G(T);
  for (int t = 0; t < T; ++t) {
    Q[t] = lin(w.wq, &x[t * 8]);
    G[t] = lin(w.wgate, &x[t * 8]);
    K[t] = lin(w.wk, &x[t * 8]);
    V[t] = lin(w.wv, &x[t * 8]);
    for (int h = 0; h < 4; ++h) norm_rope(&Q[t][h * 8], w.q_norm, t);
    for (int h = 0; h < 2; ++h) norm_rope(&K[t][h * 8], w.k_norm, t);
  }
  for (int t = 0; t < T; ++t) {
    std::vector<float> o(32);
    for (int h = 0; h < 4; ++h) {
      const int kv = h / 2;  // query heads 0,1 -> kv 0; 2,3 -> kv 1
      std::vector<double> s(t + 1);
      double mx = -1e300, sum = 0;
      for (int j = 0; j <= t; ++j) {
        for (int d = 0; d < 8; ++d) s[j] += Q[t][h * 8 + d] * K[j][kv * 8 + d];
        s[j] /= std::sqrt(8.0);
        mx = std::max(mx, s[j]);
      }
      for (int j = 0; j <= t; ++j) sum += (s[j] = std::exp(s[j] - mx));
      for (int d = 0; d < 8; ++d) {
        double acc = 0;
        for (int j = 0; j <= t; ++j) acc += s[j] / sum * V[j][kv * 8 + d];
        o[h * 8 + d] = static_cast<float>(acc / (1 + std::exp(-G[t][h * 8 + d])));
      }
    }
    auto want = lin(w.wo, o.data());
    for (int d = 0; d < 8; ++d) EXPECT_NEAR(out[t * 8 + d], want[d], 2e-6) << "t " << t << " d " << d;
  }
}

TEST(OracleMoe, RoutingSoftmaxTopkRenormaliseTiesToLowestIndex) {
  const float logits[4] = {1.0f, 3.0f, 2.0f, 3.0f};
  const double z = std::exp(1.0) + 2 * std::exp(3.0) + std::exp(2.0);
  auto r = ops::route(logits, 2, false);
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].first, 1);  // experts 1 and 3 tie: the lower index first
  EXPECT_EQ(r[1].first, 3);
  EXPECT_NEAR(r[0].second, std::exp(3.0) / z, 1e-15);
  auto n = ops::route(logits, 3, true);
  EXPECT_EQ(n[2].first, 2);
  const double tot = (2 * std::exp(3.0) + std::exp(2.0)) / z;
  EXPECT_NEAR(n[2].second, std::exp(2.0) / z / tot, 1e-15);
  EXPECT_NEAR(n[0].second + n[1].second + n[2].second, 1.0, 1e-15);
  // a tie straddling the last place: the lowest of the tied experts takes it; +0 and -0 tie
  const float straddle[5] = {2.0f, 5.0f, -0.0f, 2.0f, 2.0f};
  auto s2 = ops::route(straddle, 2, true);
  EXPECT_EQ(s2[0].first, 1);
  EXPECT_EQ(s2[1].first, 0);
  const float zeros[3] = {-0.0f, 0.0f, -1.0f};
  EXPECT_EQ(ops::route(zeros, 1, false)[0].first, 0);
}

TEST(OracleMoe, TinyLayerByHand) {
  // D 2, E 3, top-2, expert width 1, shared expert width 1.
  ModelConfig c;
  c.family = Family::Qwen3Next;
  c.n_embd = 2;
  c.n_expert = 3;
  c.n_expert_used = 2;
  c.n_ff_exp = 1;
  c.n_ff_shexp = 1;
  c.norm_topk = true;
  MoeWeights w;
  w.router = mat(3, 2, {1, 0, 0, 1, 0.5f, 0.5f});
  for (int e = 0; e < 3; ++e)
    w.experts.push_back({mat(1, 2, {1.0f + e, 0}), mat(1, 2, {0, 1}), mat(2, 1, {1, -static_cast<float>(e)})});
  w.shared = {mat(1, 2, {1, 1}), mat(1, 2, {1, -1}), mat(2, 1, {2, 3})};
  w.shared_gate = {0.25f, -0.5f};
  const float x[2] = {0.8f, -0.3f};
  float out[2];
  ops::moe(c, w, x, 1, out, 1);
  // router logits (0.8, -0.3, 0.25): top-2 = experts 0 and 2, weights renormalised over them
  const double e0 = std::exp(0.8), e2 = std::exp(0.25);
  const double w0 = e0 / (e0 + e2), w2 = e2 / (e0 + e2);
  auto silu = [](double v) { return v / (1 + std::exp(-v)); };
  // expert e: h = silu((1+e) x0) * x1; y = (h, -e h)
  const double h0 = silu(1.0 * 0.8) * -0.3, h2 = silu(3.0 * 0.8) * -0.3;
  const double hs = silu(0.8 - 0.3) * (0.8 + 0.3);
  const double sg = 1 / (1 + std::exp(-(0.25 * 0.8 + 0.5 * 0.3)));
  EXPECT_NEAR(out[0], w0 * h0 + w2 * h2 + sg * 2 * hs, 1e-6);
  EXPECT_NEAR(out[1], w0 * 0 + w2 * (-2 * h2) + sg * 3 * hs, 1e-6);
}

TEST(OracleFfn, SwiGluByHand) {
  FfnWeights f{mat(2, 2, {1, 0, 0, 1}), mat(2, 2, {2, 0, 0, -1}), mat(1, 2, {1, 1})};
  const float x[2] = {0.5f, 1.5f};
  float y[1];
  ops::ffn(f, x, 1, y, 1);
  auto silu = [](double v) { return v / (1 + std::exp(-v)); };
  EXPECT_NEAR(y[0], silu(0.5) * 1.0 + silu(1.5) * -1.5, 1e-6);
}

// S_t = (I - beta k k^T) alpha S_{t-1} + beta k v^T, o_t = S_t^T q_t: the closed form of the
// delta rule, evaluated with explicit matrices.
TEST(OracleGdn, RecurrentStepIsTheClosedFormDeltaRule) {
  std::mt19937 g(3);
  const int dk = 3, dv = 2, T = 4;
  std::uniform_real_distribution<double> u(-1, 1);
  std::vector<double> q(T * dk), k(T * dk), v(T * dv), gg(T), beta(T), S(dk * dv), o(T * dv);
  for (auto* a : {&q, &k, &v, &S}) for (double& x : *a) x = u(g);
  for (int t = 0; t < T; ++t) { gg[t] = -std::abs(u(g)); beta[t] = 0.5 + 0.4 * u(g); }
  std::vector<double> M = S;  // reference state
  ops::delta_rule_recurrent(q.data(), k.data(), v.data(), gg.data(), beta.data(), T, dk, dv, S.data(), o.data());
  for (int t = 0; t < T; ++t) {
    const double al = std::exp(gg[t]);
    std::vector<double> N(dk * dv, 0.0);
    for (int i = 0; i < dk; ++i)
      for (int j = 0; j < dv; ++j) {
        double acc = 0;
        for (int m = 0; m < dk; ++m) acc += ((i == m) - beta[t] * k[t * dk + i] * k[t * dk + m]) * al * M[m * dv + j];
        N[i * dv + j] = acc + beta[t] * k[t * dk + i] * v[t * dv + j];
      }
    M = N;
    for (int j = 0; j < dv; ++j) {
      double oj = 0;
      for (int i = 0; i < dk; ++i) oj += M[i * dv + j] * q[t * dk + i];
      EXPECT_NEAR(o[t * dv + j], oj, 1e-13);
    }
  }
  for (int i = 0; i < dk * dv; ++i) EXPECT_NEAR(S[i], M[i], 1e-13);
}

class OracleGdnForms : public ::testing::TestWithParam<int> {};

TEST_P(OracleGdnForms, ChunkedEqualsRecurrent) {
  const int T = GetParam(), dk = 8, dv = 12;
  std::mt19937 g(100 + T);
  std::uniform_real_distribution<double> u(-1, 1);
  std::vector<double> q(T * dk), k(T * dk), v(T * dv), gg(T), beta(T), S0(dk * dv);
  for (auto* a : {&v, &S0}) for (double& x : *a) x = u(g);
  // unit-norm k and q, as after the in-kernel L2 norm; decays from slow to fast
  for (auto* a : {&q, &k})
    for (int t = 0; t < T; ++t) {
      double ss = 0;
      for (int i = 0; i < dk; ++i) ss += ((*a)[t * dk + i] = u(g)) * (*a)[t * dk + i];
      for (int i = 0; i < dk; ++i) (*a)[t * dk + i] /= std::sqrt(ss);
    }
  for (int t = 0; t < T; ++t) { gg[t] = -3.0 * std::abs(u(g)); beta[t] = 1 / (1 + std::exp(-2 * u(g))); }
  std::vector<double> Sr = S0, Sc = S0, orr(T * dv), oc(T * dv);
  ops::delta_rule_recurrent(q.data(), k.data(), v.data(), gg.data(), beta.data(), T, dk, dv, Sr.data(), orr.data());
  ops::delta_rule_chunked(q.data(), k.data(), v.data(), gg.data(), beta.data(), T, dk, dv, kGdnChunk, Sc.data(), oc.data());
  double num = 0, den = 0;
  for (int i = 0; i < T * dv; ++i) { num = std::max(num, std::abs(orr[i] - oc[i])); den = std::max(den, std::abs(orr[i])); }
  EXPECT_LE(num / den, 1e-5);
  EXPECT_GT(den, 0.1);  // not vacuous
  for (int i = 0; i < dk * dv; ++i) EXPECT_NEAR(Sc[i], Sr[i], 1e-5 * (1 + std::abs(Sr[i])));
}

INSTANTIATE_TEST_SUITE_P(Lengths, OracleGdnForms, ::testing::Values(1, 63, 64, 65, 130));

// Kimi delta attention's rule (a log decay per key channel) against transformers 5.17's own KDA
// functions (test/fixtures/kda_ref.py: 70 tokens, 2 heads, dk 8, dv 6, decays in the safe gate's
// [-5, 0]): the oracle's recurrent and chunked forms, each against transformers' chunked and
// recurrent outputs, and a 67-token prefill continued by 3 decode steps from its state. The
// inputs are L2-normed (x / sqrt(sum x^2 + 1e-6)) and q scaled by 1/sqrt(dk) here, as the
// reference kernels do. Bound: 2e-5 of the largest output (the reference runs in fp32).
TEST(OracleKda, BothFormsMatchTransformers) {
  std::ifstream f(std::string(MEMRA_SOURCE_DIR) + "/test/fixtures/banks/ops/kda_delta_rule.json");
  ASSERT_TRUE(f) << "test/fixtures/banks/ops/kda_delta_rule.json";
  const nlohmann::json j = nlohmann::json::parse(f);
  const int64_t T = j.at("T"), H = j.at("H"), dk = j.at("dk"), dv = j.at("dv"), P = j.at("prefill");
  const auto q = j.at("q").get<std::vector<double>>(), k = j.at("k").get<std::vector<double>>(),
             v = j.at("v").get<std::vector<double>>(), g = j.at("g").get<std::vector<double>>(),
             beta = j.at("beta").get<std::vector<double>>();
  auto l2 = [&](const std::vector<double>& x, int64_t t, int64_t h, double scale, double* out) {
    const double* r = x.data() + (t * H + h) * dk;
    double ss = 0;
    for (int64_t i = 0; i < dk; ++i) ss += r[i] * r[i];
    for (int64_t i = 0; i < dk; ++i) out[i] = r[i] / std::sqrt(ss + 1e-6) * scale;
  };
  enum class Form { recurrent, chunked, prefill_then_decode };
  auto run = [&](Form form) {
    std::vector<double> out(static_cast<size_t>(T * H * dv));
    for (int64_t h = 0; h < H; ++h) {
      std::vector<double> qh(T * dk), kh(T * dk), vh(T * dv), gh(T * dk), bh(T), oh(T * dv), S(dk * dv, 0.0);
      for (int64_t t = 0; t < T; ++t) {
        l2(q, t, h, 1.0 / std::sqrt(static_cast<double>(dk)), qh.data() + t * dk);
        l2(k, t, h, 1.0, kh.data() + t * dk);
        for (int64_t d = 0; d < dv; ++d) vh[t * dv + d] = v[(t * H + h) * dv + d];
        for (int64_t i = 0; i < dk; ++i) gh[t * dk + i] = g[(t * H + h) * dk + i];
        bh[t] = beta[t * H + h];
      }
      if (form == Form::recurrent) {
        ops::kda_delta_rule_recurrent(qh.data(), kh.data(), vh.data(), gh.data(), bh.data(), T, dk, dv, S.data(),
                                      oh.data());
      } else if (form == Form::chunked) {
        ops::kda_delta_rule_chunked(qh.data(), kh.data(), vh.data(), gh.data(), bh.data(), T, dk, dv, kGdnChunk,
                                    S.data(), oh.data());
      } else {
        ops::kda_delta_rule_chunked(qh.data(), kh.data(), vh.data(), gh.data(), bh.data(), P, dk, dv, kGdnChunk,
                                    S.data(), oh.data());
        ops::kda_delta_rule_recurrent(qh.data() + P * dk, kh.data() + P * dk, vh.data() + P * dv, gh.data() + P * dk,
                                      bh.data() + P, T - P, dk, dv, S.data(), oh.data() + P * dv);
      }
      for (int64_t t = 0; t < T; ++t)
        for (int64_t d = 0; d < dv; ++d) out[(t * H + h) * dv + d] = oh[t * dv + d];
    }
    return out;
  };
  auto sci = [](double x) {
    char b[32];
    std::snprintf(b, sizeof b, "%.3g", x);
    return std::string(b);
  };
  auto worst = [](const std::vector<double>& a, const std::vector<double>& ref) {
    double err = 0, top = 0;
    for (size_t i = 0; i < ref.size(); ++i) {
      err = std::max(err, std::abs(a[i] - ref[i]));
      top = std::max(top, std::abs(ref[i]));
    }
    return err / top;
  };
  const auto ref_chunked = j.at("out_chunked").get<std::vector<double>>();
  const auto ref_recurrent = j.at("out_recurrent").get<std::vector<double>>();
  const auto ref_split = j.at("out_prefill_then_decode").get<std::vector<double>>();
  const std::vector<double> rec = run(Form::recurrent), chk = run(Form::chunked),
                            split = run(Form::prefill_then_decode);
  for (const auto* ref : {&ref_chunked, &ref_recurrent}) {
    EXPECT_LE(worst(rec, *ref), 2e-5);
    EXPECT_LE(worst(chk, *ref), 2e-5);
  }
  EXPECT_LE(worst(split, ref_split), 2e-5);
  RecordProperty("recurrent_vs_transformers", sci(worst(rec, ref_recurrent)));
  RecordProperty("chunked_vs_transformers", sci(worst(chk, ref_chunked)));
  RecordProperty("prefill_then_decode_vs_transformers", sci(worst(split, ref_split)));
  // Not vacuous: the scalar-decay rule (GDN's, the channels' mean) is far from the reference.
  std::vector<double> gmean(static_cast<size_t>(T * H));
  for (int64_t t = 0; t < T * H; ++t) {
    double m = 0;
    for (int64_t i = 0; i < dk; ++i) m += g[t * dk + i];
    gmean[static_cast<size_t>(t)] = m / static_cast<double>(dk);
  }
  std::vector<double> scalar(static_cast<size_t>(T * H * dv));
  for (int64_t h = 0; h < H; ++h) {
    std::vector<double> qh(T * dk), kh(T * dk), vh(T * dv), gh(T), bh(T), oh(T * dv), S(dk * dv, 0.0);
    for (int64_t t = 0; t < T; ++t) {
      l2(q, t, h, 1.0 / std::sqrt(static_cast<double>(dk)), qh.data() + t * dk);
      l2(k, t, h, 1.0, kh.data() + t * dk);
      for (int64_t d = 0; d < dv; ++d) vh[t * dv + d] = v[(t * H + h) * dv + d];
      gh[t] = gmean[static_cast<size_t>(t * H + h)];
      bh[t] = beta[t * H + h];
    }
    ops::delta_rule_recurrent(qh.data(), kh.data(), vh.data(), gh.data(), bh.data(), T, dk, dv, S.data(), oh.data());
    for (int64_t t = 0; t < T; ++t)
      for (int64_t d = 0; d < dv; ++d) scalar[(t * H + h) * dv + d] = oh[t * dv + d];
  }
  EXPECT_GT(worst(scalar, ref_recurrent), 1e-2);
  RecordProperty("scalar_decay_vs_transformers", sci(worst(scalar, ref_recurrent)));
}

// A whole GDN layer against a literal scalar implementation of the HF formulas (conv with zero
// history, SiLU, L2 norms with eps 1e-6, q scale, GVA head map h -> h / (nv/nk), gates, gated
// norm, out proj). n_k = 2, n_v = 4: value heads 0,1 read key head 0 and 2,3 key head 1.
TEST(OracleGdn, LayerMatchesLiteralReference) {
  std::mt19937 g(4);
  const int D = 6, nk = 2, nv = 4, dk = 2, dv = 3, K = 3, T = 4;
  const int kd = nk * dk, vd = nv * dv, cd = 2 * kd + vd;
  ModelConfig c;
  c.family = Family::Qwen35;
  c.n_embd = D;
  c.rms_eps = 1e-6;
  c.ssm_n_k_heads = nk;
  c.ssm_n_v_heads = nv;
  c.ssm_d_k = dk;
  c.ssm_d_v = dv;
  c.ssm_conv_kernel = K;
  GdnWeights w;
  w.wqkv = rand_mat(g, cd, D);
  w.wz = rand_mat(g, vd, D);
  w.wb = rand_mat(g, nv, D);
  w.wa = rand_mat(g, nv, D);
  w.conv = rand_mat(g, cd, K, 0.8f);
  w.ssm_a = {-0.7f, -3.0f, -1.5f, -0.3f};
  w.dt_bias = {0.9f, 1.2f, 0.6f, 1.0f};
  w.norm = rand_vec(g, dv, 0.5f, 1.5f);
  w.wout = rand_mat(g, D, vd);
  std::vector<float> x = rand_vec(g, T * D, -1, 1), out(T * D);
  GdnCacheLayer cache{std::vector<float>((K - 1) * cd, 0.0f), std::vector<double>(nv * dk * dv, 0.0)};
  ops::gdn(c, w, x.data(), T, GdnPrefill::recurrent, cache, out.data(), 1);

  std::vector<std::vector<double>> mixed(T);
  std::vector<double> xd(x.begin(), x.end());
  for (int t = 0; t < T; ++t) mixed[t] = lin(w.wqkv, &xd[t * D]);
  std::vector<double> S(nv * dk * dv, 0.0);  // S[h][i][j]
  for (int t = 0; t < T; ++t) {
    std::vector<double> y(cd);
    for (int ch = 0; ch < cd; ++ch) {  // y_t = silu(sum_j W[c,j] x_{t-K+1+j}), zero before t=0
      double s = 0;
      for (int j = 0; j < K; ++j) {
        const int src = t - K + 1 + j;
        if (src >= 0) s += w.conv.at(ch, j) * mixed[src][ch];
      }
      y[ch] = s * sig(s);
    }
    auto b = lin(w.wb, &xd[t * D]), a = lin(w.wa, &xd[t * D]), z = lin(w.wz, &xd[t * D]);
    std::vector<double> o(vd, 0.0);
    for (int h = 0; h < nv; ++h) {
      const int kh = h / (nv / nk);  // repeat_interleave: grouped value heads
      double q[dk], k[dk], qn = 0, kn = 0;
      for (int i = 0; i < dk; ++i) { qn += y[kh * dk + i] * y[kh * dk + i]; kn += y[kd + kh * dk + i] * y[kd + kh * dk + i]; }
      for (int i = 0; i < dk; ++i) {
        q[i] = y[kh * dk + i] / std::sqrt(qn + 1e-6) / std::sqrt(double(dk));
        k[i] = y[kd + kh * dk + i] / std::sqrt(kn + 1e-6);
      }
      const double beta = sig(b[h]), gdec = w.ssm_a[h] * std::log1p(std::exp(a[h] + w.dt_bias[h]));
      double* Sh = &S[h * dk * dv];
      double kvmem[dv] = {};
      for (int i = 0; i < dk; ++i) for (int j = 0; j < dv; ++j) { Sh[i * dv + j] *= std::exp(gdec); kvmem[j] += Sh[i * dv + j] * k[i]; }
      for (int i = 0; i < dk; ++i) for (int j = 0; j < dv; ++j) Sh[i * dv + j] += k[i] * beta * (y[2 * kd + h * dv + j] - kvmem[j]);
      double ss = 0;
      for (int j = 0; j < dv; ++j) for (int i = 0; i < dk; ++i) o[h * dv + j] += Sh[i * dv + j] * q[i];
      for (int j = 0; j < dv; ++j) ss += o[h * dv + j] * o[h * dv + j];
      for (int j = 0; j < dv; ++j) {
        const double zz = z[h * dv + j];
        o[h * dv + j] = w.norm[j] * o[h * dv + j] / std::sqrt(ss / dv + 1e-6) * zz * sig(zz);
      }
    }
    auto want = lin(w.wout, o.data());
    for (int d = 0; d < D; ++d) EXPECT_NEAR(out[t * D + d], want[d], 1e-5) << "t " << t << " d " << d;
  }
  // the conv state keeps the last K-1 = 2 inputs
  for (int ch = 0; ch < cd; ++ch) EXPECT_NEAR(cache.conv[cd + ch], mixed[T - 1][ch], 1e-6);
}

// A whole KDA layer against a literal scalar implementation of transformers' Glm5NextText-
// LinearAttention (q, k, v projected separately and concatenated before the conv, the per-channel
// forget gate through its low-rank projection, the sigmoid-gated output norm): both gate forms
// (the safe bound, and softplus without one), both prefill forms, and a prefill continued by
// decode steps through the cache equal to one pass.
TEST(OracleKda, LayerMatchesLiteralReference) {
  std::mt19937 g(5);
  const int D = 6, H = 2, d = 4, K = 3, T = 5, hd = H * d, cd = 3 * hd;
  KdaWeights w;
  w.wq = rand_mat(g, hd, D);
  w.wk = rand_mat(g, hd, D);
  w.wv = rand_mat(g, hd, D);
  w.conv = rand_mat(g, cd, K, 0.8f);
  w.f_a = rand_mat(g, d, D);
  w.f_b = rand_mat(g, hd, d);
  w.dt_bias = rand_vec(g, hd, -1, 1);
  w.a_log = {0.3f, -0.5f};
  w.wb = rand_mat(g, H, D);
  w.g_a = rand_mat(g, d, D);
  w.g_b = rand_mat(g, hd, d);
  w.norm = rand_vec(g, d, 0.5f, 1.5f);
  w.wo = rand_mat(g, D, hd);
  const std::vector<float> x = rand_vec(g, T * D, -1, 1);
  auto fresh = [&] {
    return GdnCacheLayer{std::vector<float>((K - 1) * cd, 0.0f), std::vector<double>(H * d * d, 0.0)};
  };
  for (const std::optional<double> bound : {std::optional<double>(-5.0), std::optional<double>()}) {
    ops::KdaShape s{H, d, K, bound, 1e-5};
    std::vector<float> out(T * D);
    GdnCacheLayer cache = fresh();
    ops::kda(s, w, x.data(), T, GdnPrefill::recurrent, cache, out.data(), 1);

    std::vector<double> xd(x.begin(), x.end());
    std::vector<std::vector<double>> mixed(T);
    for (int t = 0; t < T; ++t) {
      auto q = lin(w.wq, &xd[t * D]), k = lin(w.wk, &xd[t * D]), v = lin(w.wv, &xd[t * D]);
      mixed[t] = q;
      mixed[t].insert(mixed[t].end(), k.begin(), k.end());
      mixed[t].insert(mixed[t].end(), v.begin(), v.end());
    }
    std::vector<double> S(H * d * d, 0.0);
    for (int t = 0; t < T; ++t) {
      std::vector<double> y(cd);
      for (int ch = 0; ch < cd; ++ch) {
        double a = 0;
        for (int j = 0; j < K; ++j)
          if (t - K + 1 + j >= 0) a += w.conv.at(ch, j) * mixed[t - K + 1 + j][ch];
        y[ch] = a * sig(a);
      }
      auto fa = lin(w.f_a, &xd[t * D]);
      auto f = lin(w.f_b, fa.data());
      auto b = lin(w.wb, &xd[t * D]);
      auto ga = lin(w.g_a, &xd[t * D]);
      auto gate = lin(w.g_b, ga.data());
      std::vector<double> o(hd, 0.0);
      for (int h = 0; h < H; ++h) {
        double q[d], k[d], qn = 0, kn = 0;
        for (int i = 0; i < d; ++i) {
          qn += y[h * d + i] * y[h * d + i];
          kn += y[hd + h * d + i] * y[hd + h * d + i];
        }
        for (int i = 0; i < d; ++i) {
          q[i] = y[h * d + i] / std::sqrt(qn + 1e-6) / std::sqrt(double(d));
          k[i] = y[hd + h * d + i] / std::sqrt(kn + 1e-6);
        }
        const double rate = std::exp(w.a_log[h]), beta = sig(b[h]);
        double* Sh = &S[h * d * d];
        double kvmem[d] = {};
        for (int i = 0; i < d; ++i) {
          const double fi = f[h * d + i] + w.dt_bias[h * d + i];
          const double gi = bound ? *bound * sig(rate * fi) : -rate * std::log1p(std::exp(fi));
          for (int j = 0; j < d; ++j) {
            Sh[i * d + j] *= std::exp(gi);
            kvmem[j] += Sh[i * d + j] * k[i];
          }
        }
        for (int i = 0; i < d; ++i)
          for (int j = 0; j < d; ++j) Sh[i * d + j] += k[i] * beta * (y[2 * hd + h * d + j] - kvmem[j]);
        for (int j = 0; j < d; ++j)
          for (int i = 0; i < d; ++i) o[h * d + j] += Sh[i * d + j] * q[i];
        double ss = 0;
        for (int j = 0; j < d; ++j) ss += o[h * d + j] * o[h * d + j];
        for (int j = 0; j < d; ++j)
          o[h * d + j] = w.norm[j] * o[h * d + j] / std::sqrt(ss / d + 1e-5) * sig(gate[h * d + j]);
      }
      auto want = lin(w.wo, o.data());
      for (int e = 0; e < D; ++e) EXPECT_NEAR(out[t * D + e], want[e], 1e-5) << "t " << t << " d " << e;
    }
    // the chunked prefill, and 3 + 2 tokens through the cache, give the same outputs
    std::vector<float> chunked(T * D), split(T * D);
    GdnCacheLayer c2 = fresh(), c3 = fresh();
    ops::kda(s, w, x.data(), T, GdnPrefill::chunked, c2, chunked.data(), 1);
    ops::kda(s, w, x.data(), 3, GdnPrefill::chunked, c3, split.data(), 1);
    ops::kda(s, w, x.data() + 3 * D, T - 3, GdnPrefill::recurrent, c3, split.data() + 3 * D, 1);
    for (int i = 0; i < T * D; ++i) {
      EXPECT_NEAR(chunked[i], out[i], 1e-5) << i;
      EXPECT_NEAR(split[i], out[i], 1e-5) << i;
    }
  }
}

TEST(OracleTopK, LargestFirstTiesToLowestIndex) {
  const float l[6] = {0.5f, 2.0f, -1.0f, 2.0f, 1.0f, 2.0f};
  auto t = top_k(l, 4);
  ASSERT_EQ(t.size(), 4u);
  EXPECT_EQ(t[0].first, 1);
  EXPECT_EQ(t[1].first, 3);
  EXPECT_EQ(t[2].first, 5);
  EXPECT_EQ(t[3].first, 4);
  EXPECT_EQ(top_k(l, 10).size(), 6u);
}

}  // namespace
}  // namespace memra::oracle
