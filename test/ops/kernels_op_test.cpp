// Op: the model's non-mat-vec kernel families against the CPU oracle's ops (src/oracle/ops.h,
// f64) — q/k norm + RoPE + K/V store, split-KV attention and its flash form, GDN conv + recurrence, MoE routing and
// combine, argmax ties. Each kernel computes in f32 with fixed-order reductions, so the
// comparison is NMSE against the f64 reference (bounds per op and arch in NmseCase, with the
// reasoning), except where the contract is exact (routing ids, argmax, K/V copies). Inputs are
// drawn from the harness's fixed seeds and a fresh one per run (op_harness.h: logged, MEMRA_SEED
// replays).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <iostream>
#include <numeric>
#include <optional>
#include <random>

#include "cuda/argmax.cuh"
#include "cuda/attention.cuh"
#include "cuda/dsa.cuh"
#include "cuda/gdn.cuh"
#include "cuda/mla.cuh"
#include "cuda/moe.cuh"
#include "cuda/norm.cuh"
#include "cuda/planar.cuh"
#include "cuda/rope.cuh"
#include "memra/engine.h"
#include "memra/quant.h"
#include "memra/sampling.h"
#include "memra/testing/gpu.h"
#include "memra/testing/matchers.h"
#include "memra/testing/records.h"
#include "ops/device_op_fixture.h"
#include "ops/op_harness.h"
#include "oracle/ops.h"

namespace memra::ops {
namespace {

namespace oo = memra::oracle::ops;

// The comparisons of this file against an f64 reference, each with its NMSE bound per arch (the
// harness's OpCase::tolerance hook), as measured so far: on sm_90 (h100) only. Another family
// fails the comparison by name until its bound is measured there (measured_nmse).
enum class NmseOp {
  qk_prep,
  split_attention,
  gdn_conv,
  gdn_recurrent,
  gdn_chunked,
  moe,
  dsa_score,
  sparse_attention,
  mla_prep,
  kda_recurrent,
  mla_kpool,
  kda_chunked,
  mla_latent,
  flash_attention
};

struct NmseCase : OpCase {
  NmseOp op;
  explicit NmseCase(NmseOp o) : op(o) {}
  std::string vars() const override {
    const char* names[] = {"qk_prep",   "split_attention", "gdn_conv",         "gdn_recurrent",  "gdn_chunked",
                           "moe",       "dsa_score",       "sparse_attention", "mla_prep",       "kda_recurrent",
                           "mla_kpool", "kda_chunked",     "mla_latent",       "flash_attention"};
    return Vars()("op", names[static_cast<int>(op)]).str();
  }
  Tolerance tolerance(std::string_view arch) const override {
    switch (op) {
      case NmseOp::qk_prep: return measured_nmse(vars(), arch, {{"h100", 1e-12}});          // f32 norm vs f64: a few ulp per element
      case NmseOp::split_attention: return measured_nmse(vars(), arch, {{"h100", 1e-10}});  // f32 exp/accumulation over ~600 keys: ~1e-6 relative per element
      case NmseOp::gdn_conv: return measured_nmse(vars(), arch, {{"h100", 1e-12}});         // a 4-tap f32 dot and silu per element
      case NmseOp::gdn_recurrent: return measured_nmse(vars(), arch, {{"h100", 1e-9}});     // f32 state over 70 steps vs f64: relative error ~1e-6
      case NmseOp::gdn_chunked: return measured_nmse(vars(), arch, {{"h100", 1e-8}});       // f32 WY solve vs f64: relative rms error ~1e-5 at most
      case NmseOp::moe: return measured_nmse(vars(), arch, {{"h100", 1e-12}});              // f32 routing weights and k=8 weighted sums vs f64
      case NmseOp::dsa_score:  // f32 dots of <= 128 terms over <= 32 heads vs f64
        return measured_nmse(vars(), arch, {{"h100", 1e-11}});
      case NmseOp::sparse_attention:  // f32 scores of <= 576 terms, exp and <= 2048-term sums vs f64
        return measured_nmse(vars(), arch, {{"h100", 1e-10}});
      case NmseOp::mla_prep:  // the oracle's f64 rotation and LayerNorm; the device's f64 angle at
                              // 128k positions is a few ulp off (~1e-11 rad): rare 1-ulp f32 flips
        return measured_nmse(vars(), arch, {{"h100", 1e-13}});
      case NmseOp::kda_recurrent:  // GDN's f32 recurrence with a decay per row, 70 steps vs f64
        return measured_nmse(vars(), arch, {{"h100", 1e-9}});
      case NmseOp::mla_kpool:  // f64 softmax-weighted sums of 4..16 slots, rounded once: f32 ulps
        return measured_nmse(vars(), arch, {{"h100", 1e-13}});
      case NmseOp::kda_chunked:  // the f32 WY solve with the decays per channel vs f64 and vs the f32
                                 // step: measured <= 1.5e-12 (T up to 1100, d 16 and 128)
        return measured_nmse(vars(), arch, {{"h100", 1e-11}});
      case NmseOp::mla_latent:  // f32 absorptions of <= 512-term dots, 576-wide scores, 2048-term sums vs f64:
                                // measured <= 5.2e-13 (H100, 3 seeds, both shapes, every storage type,
                                // the attention one block per head)
        return measured_nmse(vars(), arch, {{"h100", 5e-12}});
      case NmseOp::flash_attention:  // f32 scores of <= 256-term chains, the online softmax's rescales
                                     // and <= 900-key sums vs f64: measured <= 3.3e-13 (H100, 3 seeds,
                                     // every case of FlashAttentionMatchesF64Softmax)
        return measured_nmse(vars(), arch, {{"h100", 5e-12}});
    }
    return Tolerance::exact();
  }
};

class Kernels : public DeviceOpTest {
 protected:
  // The bound of `op` on the device this test runs on.
  static Tolerance nmse_bound(NmseOp op) { return NmseCase(op).tolerance(test_arch()); }
  // moe_route_run over T rows of E logits with `rp`'s gating (ids, weights and the row count set
  // here); the outputs are poisoned first, so a slot the kernel leaves unwritten shows.
  struct Routed {
    std::vector<int32_t> ids;
    std::vector<float> weights;
  };
  Routed route_on_device(const std::vector<float>& logits, int64_t T, cuda::MoeRouteParams rp,
                         const std::vector<float>& bias = {}) {
    auto dl = up(logits);
    DeviceBuffer<float> db(e(), bias.empty() ? 1 : bias.size());
    if (!bias.empty()) db.upload(bias);
    DeviceBuffer<int32_t> ids(e(), static_cast<size_t>(T * rp.k));
    DeviceBuffer<float> w(e(), static_cast<size_t>(T * rp.k));
    ids.fill_bytes(0xFF);
    w.fill_bytes(0xFF);
    rp.logits = dl.data();
    rp.ids = ids.data();
    rp.weights = w.data();
    rp.T = T;
    rp.bias = bias.empty() ? nullptr : db.data();
    cuda::moe_route_run(rp, s());
    e().synchronize();
    return {ids.download(), w.download()};
  }
  // Causal GQA softmax attention in f64 for T queries at positions pos0.. over a cache of K / V
  // rows [ctx, KV * hd]: softmax(q.k / sqrt(hd)) v, times sigmoid(gate) when `gate` is given.
  static std::vector<float> f64_attention(const std::vector<float>& q, const std::vector<float>& kc,
                                          const std::vector<float>& vc, const std::vector<float>* gate, int64_t T,
                                          int H, int KV, int hd, int64_t pos0) {
    std::vector<float> ref(static_cast<size_t>(T * H * hd));
    for (int64_t t = 0; t < T; ++t)
      for (int h = 0; h < H; ++h) {
        const int kvh = h / (H / KV);
        const int64_t n = pos0 + t + 1;
        std::vector<double> sc(static_cast<size_t>(n));
        double mx = -INFINITY, sum = 0;
        for (int64_t j = 0; j < n; ++j) {
          sc[j] = oo::dot(q.data() + (t * H + h) * hd, kc.data() + (j * KV + kvh) * hd, hd) / std::sqrt(double(hd));
          mx = std::max(mx, sc[j]);
        }
        for (auto& x : sc) sum += (x = std::exp(x - mx));
        for (int d = 0; d < hd; ++d) {
          double acc = 0;
          for (int64_t j = 0; j < n; ++j) acc += sc[j] / sum * vc[(j * KV + kvh) * hd + d];
          if (gate) acc *= oo::sigmoid((*gate)[(t * H + h) * hd + d]);
          ref[(t * H + h) * hd + d] = static_cast<float>(acc);
        }
      }
    return ref;
  }
  // The AttnParams of T queries q at device position *pos0 over a cache of ctx rows k / v, with
  // the heads and 1/sqrt(hd); the caller sets gate, out, out_q and work.
  static cuda::AttnParams attn_params(const float* q, const float* k, const float* v, const int64_t* pos0, int64_t T,
                                      int64_t ctx, int H, int KV, int hd) {
    cuda::AttnParams p;
    p.q = q;
    p.k_cache = k;
    p.v_cache = v;
    p.pos0 = pos0;
    p.ctx_bound = ctx;
    p.T = T;
    p.H = H;
    p.KV = KV;
    p.hd = hd;
    p.scale = static_cast<float>(1.0 / std::sqrt(double(hd)));
    return p;
  }
  // An attention's q8_1 output (its finish's) against quant.h's quantizer of its own f32 output,
  // block for block.
  static void expect_q81_of(const std::vector<BlockQ8_1>& got_q, const std::vector<float>& out) {
    std::vector<BlockQ8_1> want(got_q.size());
    quantize_row_q8_1(out.data(), want.data(), static_cast<int64_t>(out.size()));
    for (size_t b = 0; b < got_q.size(); ++b)
      if (std::memcmp(&got_q[b], &want[b], sizeof(BlockQ8_1)) != 0) {
        ADD_FAILURE() << "q8_1 block " << b << " differs";
        return;
      }
  }
  // DecodeAttentionInOneLaunchBitwiseEqualsPrepThenAttention's case
  void check_one_launch(int H, int KV, int hd, int n_rot, int64_t pos, int64_t ctx);
  // The sparse attention's selections for T queries over ctx positions: each row a random
  // subset, ascending, row 0 fewer than topk; as lists (rows), as the kernel reads them (sel
  // [T, topk] with -1 past n_sel), and which positions some row selected (used).
  struct Selections {
    std::vector<std::vector<int32_t>> rows;
    std::vector<int32_t> sel, n_sel;
    std::vector<char> used;
  };
  Selections random_selections(int64_t T, int topk, int64_t ctx) {
    Selections s{std::vector<std::vector<int32_t>>(static_cast<size_t>(T)),
                 std::vector<int32_t>(static_cast<size_t>(T * topk), -1), std::vector<int32_t>(static_cast<size_t>(T)),
                 std::vector<char>(static_cast<size_t>(ctx), 0)};
    for (int64_t t = 0; t < T; ++t) {
      std::vector<int32_t>& all = s.rows[static_cast<size_t>(t)];
      all.resize(static_cast<size_t>(ctx));
      std::iota(all.begin(), all.end(), 0);
      std::shuffle(all.begin(), all.end(), rng);
      all.resize(static_cast<size_t>(std::min<int64_t>(t == 0 ? topk / 2 + 1 : topk, ctx)));
      std::sort(all.begin(), all.end());
      std::copy(all.begin(), all.end(), s.sel.begin() + t * topk);
      s.n_sel[static_cast<size_t>(t)] = static_cast<int32_t>(all.size());
      for (int32_t x : all) s.used[static_cast<size_t>(x)] = 1;
    }
    return s;
  }
};

// MLA's per-token preparation (mla.cuh) against the oracle's mla(): the queries' rope parts and
// the shared rope key rotated (interleaved pairs), the expanded key rows [k_nope_h | rope key] and
// value rows stored at pos0 + t, the indexer's queries rotated, its weights scaled, its key
// LayerNorm'd (weight, bias, eps 1e-6) and rotated into index_k. Shapes: the tiny fixture's
// (4 heads of [16 | 8], values 16, latent 32, indexer 8 x 16) at positions 3, 4093 and 131066, and
// GLM-5's (64 heads of [192 | 64], values 256, latent 512, indexer 32 x 128) at 3 and 4093. The
// copies and the weight scale are exact; rotated and normed values within the mla_prep bound.
TEST_F(Kernels, MlaPrepMatchesTheOracle) {
  struct Shape {
    int H, dn, dr, dv, kvr, ni, hi;
  };
  seeded([&] {
    for (Shape sh : {Shape{4, 16, 8, 16, 32, 8, 16}, Shape{64, 192, 64, 256, 512, 32, 128}})
      for (int64_t pos0 : {int64_t{3}, int64_t{4093}, int64_t{131066}}) {
        if (sh.H == 64 && pos0 > 4096) continue;  // a 128k cache of GLM-5's expanded rows: 17 GB
        SCOPED_TRACE(::testing::Message() << sh.H << " heads, pos0 " << pos0);
        const int T = 3, hd = sh.dn + sh.dr, kvw = sh.dn + sh.dv;
        const int64_t ctx = pos0 + T;
        const double theta = 1e6;
        auto q = rnd(T * sh.H * hd), kva = rnd(T * (sh.kvr + sh.dr)), kvb = rnd(T * sh.H * kvw),
             iq = rnd(T * sh.ni * sh.hi), iw = rnd(T * sh.ni), ik = rnd(T * sh.hi, -3, 3), kn = rnd(sh.hi, 0.5f, 1.5f),
             kb = rnd(sh.hi);
        auto dq = up(q), dkva = up(kva), dkvb = up(kvb), diq = up(iq), diw = up(iw), dik = up(ik), dkn = up(kn),
             dkb = up(kb);
        auto dpos = up(std::vector<int64_t>{pos0});
        // only the rows at the step's positions: the caches' earlier rows are not touched
        DeviceBuffer<float> kc(e(), ctx * sh.H * hd), vc(e(), ctx * sh.H * sh.dv), xk(e(), ctx * sh.hi);
        kc.fill_bytes(0xFF);
        vc.fill_bytes(0xFF);
        xk.fill_bytes(0xFF);
        cuda::MlaPrepParams p;
        p.q = dq.data();
        p.kva = dkva.data();
        p.kvb = dkvb.data();
        p.k_cache = kc.data();
        p.v_cache = vc.data();
        p.pos0 = dpos.data();
        p.T = T;
        p.H = sh.H;
        p.dn = sh.dn;
        p.n_rot = sh.dr;
        p.dv = sh.dv;
        p.kv_rank = sh.kvr;
        p.theta = theta;
        p.iq = diq.data();
        p.iw = diw.data();
        p.ik = dik.data();
        p.k_norm = dkn.data();
        p.k_bias = dkb.data();
        p.index_k = xk.data();
        p.ni = sh.ni;
        p.hi = sh.hi;
        p.w_scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(sh.ni)));
        p.eps = 1e-6;
        cuda::mla_prep_run(p, s());
        e().synchronize();
        const auto gq = dq.download(), gk = kc.download(), gv = vc.download(), giq = diq.download(),
                   giw = diw.download(), gx = xk.download();
        std::vector<float> rq = q, riq = iq, rope_got, rope_want, copy_got, copy_want;
        for (int t = 0; t < T; ++t) {
          const int64_t pos = pos0 + t;
          for (int h = 0; h < sh.H; ++h) oo::rope_pairs(rq.data() + (t * sh.H + h) * hd + sh.dn, sh.dr, pos, theta);
          for (int h = 0; h < sh.ni; ++h) oo::rope_pairs(riq.data() + (t * sh.ni + h) * sh.hi, sh.dr, pos, theta);
          std::vector<float> kr(kva.begin() + t * (sh.kvr + sh.dr) + sh.kvr, kva.begin() + (t + 1) * (sh.kvr + sh.dr));
          oo::rope_pairs(kr.data(), sh.dr, pos, theta);
          std::vector<float> key(static_cast<size_t>(sh.hi));
          oo::layernorm(ik.data() + t * sh.hi, kn.data(), kb.data(), sh.hi, 1e-6, key.data());
          oo::rope_pairs(key.data(), sh.dr, pos, theta);
          for (int i = 0; i < sh.hi; ++i) {
            rope_got.push_back(gx[pos * sh.hi + i]);
            rope_want.push_back(key[i]);
          }
          for (int h = 0; h < sh.H; ++h) {
            for (int d = 0; d < hd; ++d) {
              const float g = gk[(pos * sh.H + h) * hd + d];
              if (d < sh.dn) {
                copy_got.push_back(g);
                copy_want.push_back(kvb[(t * sh.H + h) * kvw + d]);
              } else {
                rope_got.push_back(g);
                rope_want.push_back(kr[d - sh.dn]);
              }
            }
            for (int d = 0; d < sh.dv; ++d) {
              copy_got.push_back(gv[(pos * sh.H + h) * sh.dv + d]);
              copy_want.push_back(kvb[(t * sh.H + h) * kvw + sh.dn + d]);
            }
          }
          for (int h = 0; h < sh.ni; ++h) {
            copy_got.push_back(giw[t * sh.ni + h]);
            copy_want.push_back(iw[t * sh.ni + h] * p.w_scale);
          }
        }
        rope_got.insert(rope_got.end(), gq.begin(), gq.end());
        rope_want.insert(rope_want.end(), rq.begin(), rq.end());
        rope_got.insert(rope_got.end(), giq.begin(), giq.end());
        rope_want.insert(rope_want.end(), riq.begin(), riq.end());
        EXPECT_TRUE(compare_to_contract(rope_got, rope_want, nmse_bound(NmseOp::mla_prep)));
        EXPECT_TRUE(compare_to_contract(copy_got, copy_want, Tolerance::exact()));
        // the untouched parts of q (its nope dims) come back exactly
        for (int t = 0; t < T; ++t)
          for (int h = 0; h < sh.H; ++h)
            for (int d = 0; d < sh.dn; ++d)
              ASSERT_EQ(std::bit_cast<uint32_t>(gq[(t * sh.H + h) * hd + d]),
                        std::bit_cast<uint32_t>(q[(t * sh.H + h) * hd + d]));
      }
  });
}

// A batched decode step's MLA layer (mla.cuh and dsa.cuh with an MlaSeq table): three sequences at
// positions 7, 2 and 11 (with pools of 4: the first and the last close a pool, the middle one
// does not), each with its own caches holding a random history, the chain of mla_core — prep,
// pool keys, indexer scores and top-k, pool expansion, the sparse attention over the expanded rows
// and (its split form) over the latent rows — one launch per kernel for all three, against the same launches per
// sequence: every cache, the in-place queries and weights, the selections and both attentions'
// outputs bitwise. The pooled indexer (kpool 4, 2 pools kept) and the plain one (ratio 1, 4 of up
// to 12 keys kept, so selections drop tokens).
TEST_F(Kernels, MlaCoreBatchedEqualsOneLaunchPerSequence) {
  constexpr int B = 3, H = 4, dn = 16, dr = 8, dv = 16, kvr = 32, ni = 8, hi = 16, hd = dn + dr, kvw = dn + dv;
  constexpr int lw = kvr + dr;
  constexpr int64_t ctx = 16;
  const std::vector<int64_t> positions = {7, 2, 11};
  seeded([&] {
    for (int P : {4, 0}) {
      SCOPED_TRACE(::testing::Message() << "kpool " << P);
      const int pools = 2, topk = P > 0 ? pools * P + P - 1 : 4;  // the selection's width
      // the caches of each sequence, in MlaSeq's order: k, v, lat, index_k, index_gate, pool_rows
      const int64_t widths[6] = {H * hd, H * dv, lw, hi, hi, hi};
      std::vector<std::vector<float>> hist;  // [B * 6] random history
      for (int i = 0; i < B * 6; ++i) hist.push_back(rnd(static_cast<size_t>(ctx * widths[i % 6])));
      auto q = rnd(B * H * hd), kva = rnd(B * lw), kvb = rnd(B * H * kvw), lat = rnd(B * kvr), iq = rnd(B * ni * hi),
           iw = rnd(B * ni), ik = rnd(B * hi, -3, 3), ig = rnd(B * hi, -2, 2), ape = rnd(4 * hi),
           kn = rnd(hi, 0.5f, 1.5f), kb = rnd(hi), ql = rnd(B * H * lw);
      auto dkva = up(kva), dkvb = up(kvb), dlat = up(lat), dik = up(ik), dig = up(ig), dape = up(ape), dkn = up(kn),
           dkb = up(kb), dql = up(ql);
      auto dpos = up(positions);
      struct Out {
        std::vector<std::vector<float>> caches;
        std::vector<float> q, iq, iw, o, ol;
        std::vector<int32_t> sel, n_sel;
      };
      auto run = [&](bool batched) {
        std::vector<DeviceBuffer<float>> caches;
        for (const auto& h : hist) caches.push_back(up(h));
        auto cache = [&](int i, int which) { return caches[static_cast<size_t>(i * 6 + which)].data(); };
        std::vector<cuda::MlaSeq> table;
        for (int i = 0; i < B; ++i)
          table.push_back({cache(i, 0), cache(i, 1), cache(i, 2), cache(i, 3), P > 0 ? cache(i, 4) : nullptr,
                           P > 0 ? cache(i, 5) : nullptr, dpos.data() + i});
        auto dtable = up(table);
        auto dq = up(q), diq = up(iq), diw = up(iw);
        DeviceBuffer<float> scores(e(), B * ctx), o(e(), B * H * dv), ol(e(), B * H * kvr);
        DeviceBuffer<int32_t> sel(e(), B * topk), n_sel(e(), B), psel(e(), B * pools), n_psel(e(), B);
        o.fill_bytes(0xFF);
        ol.fill_bytes(0xFF);
        auto split = poisoned<float>(static_cast<size_t>(cuda::sparse_attention_split_floats(B, H, topk, kvr)));
        for (int i = 0; i < (batched ? 1 : B); ++i) {
          const int r = batched ? 0 : i, T = batched ? B : 1;  // the launch's first row, its rows
          const cuda::MlaSeq* seqs = batched ? dtable.data() : nullptr;
          const int64_t* pos = batched ? nullptr : dpos.data() + i;
          auto own = [&](int which) { return batched ? nullptr : cache(i, which); };
          cuda::MlaPrepParams pp;
          pp.q = dq.data() + r * H * hd;
          pp.kva = dkva.data() + r * lw;
          pp.kvb = dkvb.data() + r * H * kvw;
          pp.k_cache = own(0);
          pp.v_cache = own(1);
          pp.lat = dlat.data() + r * kvr;
          pp.lat_cache = own(2);
          pp.pos0 = pos;
          pp.T = T;
          pp.H = H;
          pp.dn = dn;
          pp.n_rot = dr;
          pp.dv = dv;
          pp.kv_rank = kvr;
          pp.theta = 1e4;
          pp.iq = diq.data() + r * ni * hi;
          pp.iw = diw.data() + r * ni;
          pp.ik = dik.data() + r * hi;
          pp.k_norm = dkn.data();
          pp.k_bias = dkb.data();
          pp.index_k = own(3);
          pp.ni = ni;
          pp.hi = hi;
          pp.w_scale = 0.25f;
          if (P > 0) {
            pp.ig = dig.data() + r * hi;
            pp.ape = dape.data();
            pp.index_gate = own(4);
            pp.kpool = P;
          }
          pp.seqs = seqs;
          cuda::mla_prep_run(pp, s());
          cuda::DsaScoreParams sp;
          sp.q = pp.iq;
          sp.w = pp.iw;
          sp.scores = scores.data();
          sp.T = T;
          sp.pos0 = ctx - T;  // a bound on every row's position + 1
          sp.pos_dev = pos;
          sp.ld = ctx;
          sp.n_head = ni;
          sp.head_dim = hi;
          sp.qk_scale = 0.25f;
          sp.seqs = seqs;
          cuda::DsaSelectParams xp;
          xp.scores = scores.data();
          xp.T = T;
          xp.pos0 = sp.pos0;
          xp.pos_dev = pos;
          xp.ld = ctx;
          xp.seqs = seqs;
          if (P > 0) {
            cuda::mla_kpool_run({.index_k = own(3),
                                 .index_gate = own(4),
                                 .rows = own(5),
                                 .pos0 = pos,
                                 .T = T,
                                 .hi = hi,
                                 .kpool = P,
                                 .seqs = seqs},
                                s());
            sp.k = own(5);
            sp.ratio = xp.ratio = P;
            sp.pooled = true;
            xp.sel = psel.data() + r * pools;
            xp.n_sel = n_psel.data() + r;
            xp.topk = pools;
            cuda::dsa_score_run(sp, s());
            cuda::dsa_select_run(xp, s());
            cuda::dsa_expand_pools_run({.psel = xp.sel,
                                        .n_psel = xp.n_sel,
                                        .pools = pools,
                                        .kpool = P,
                                        .sel = sel.data() + r * topk,
                                        .n_sel = n_sel.data() + r,
                                        .width = topk,
                                        .pos_dev = pos,
                                        .T = T,
                                        .seqs = seqs},
                                       s());
          } else {
            sp.k = own(3);
            xp.sel = sel.data() + r * topk;
            xp.n_sel = n_sel.data() + r;
            xp.topk = topk;
            cuda::dsa_score_run(sp, s());
            cuda::dsa_select_run(xp, s());
          }
          cuda::SparseAttnParams ap;  // the expanded form
          ap.q = pp.q;
          ap.k_cache = own(0);
          ap.v_cache = own(1);
          ap.sel = sel.data() + r * topk;
          ap.n_sel = n_sel.data() + r;
          ap.out = o.data() + r * H * dv;
          ap.T = T;
          ap.topk = topk;
          ap.H = ap.KVH = H;
          ap.dk = hd;
          ap.dv = dv;
          ap.scale = 0.2f;
          ap.seqs = seqs;
          cuda::sparse_attention_run(ap, s());
          ap.q = dql.data() + r * H * lw;  // the latent form: one kv head, the rows' first kvr values
          ap.k_cache = ap.v_cache = own(2);
          ap.latent = true;
          ap.out = ol.data() + r * H * kvr;
          ap.KVH = 1;
          ap.dk = lw;
          ap.dv = kvr;
          ap.ld_k = ap.ld_v = lw;
          ap.split_work = split.data();  // its split form, as the model runs it
          ap.split_work_floats = static_cast<int64_t>(split.size());
          cuda::sparse_attention_run(ap, s());
        }
        e().synchronize();
        Out out;
        for (auto& c : caches) out.caches.push_back(c.download());
        out.q = dq.download();
        out.iq = diq.download();
        out.iw = diw.download();
        out.o = o.download();
        out.ol = ol.download();
        out.sel = sel.download();
        out.n_sel = n_sel.download();
        return out;
      };
      const Out ref = run(false), got = run(true);
      for (size_t c = 0; c < ref.caches.size(); ++c)
        EXPECT_THAT(got.caches[c], testing::BitIdentical(ref.caches[c])) << "sequence " << c / 6 << " cache " << c % 6;
      EXPECT_THAT(got.q, testing::BitIdentical(ref.q)) << "rotated queries";
      EXPECT_THAT(got.iq, testing::BitIdentical(ref.iq)) << "rotated indexer queries";
      EXPECT_THAT(got.iw, testing::BitIdentical(ref.iw)) << "scaled indexer weights";
      EXPECT_EQ(got.sel, ref.sel) << "selections";
      EXPECT_EQ(got.n_sel, ref.n_sel) << "selection counts";
      EXPECT_THAT(got.o, testing::BitIdentical(ref.o)) << "expanded attention";
      EXPECT_THAT(got.ol, testing::BitIdentical(ref.ol)) << "latent attention";
      // non-vacuity: the rows were written at each sequence's own position, and the plain indexer
      // dropped keys of the sequence at 11 (12 keys, 4 kept)
      EXPECT_NE(ref.caches[0], hist[0]) << "no key row written";
      if (P == 0) { EXPECT_EQ(ref.n_sel[2], topk); }
      for (float x : ref.o) ASSERT_TRUE(std::isfinite(x)) << "an attention output is not finite";
    }
  });
}

// q/k: per-head RMSNorm then NEOX RoPE on n_rot dims at pos0 + t; K into the cache; V copied.
// Positions up to 128k (131070), partial and full rotation: the contract takes the angles'
// cos/sin in f64 on both sides (rope.cuh rope_angles, oracle rope_neox), so the angle's error is
// a few f64 ulp of pos * inv_freq (~3e-11 rad at 128k) and the result still differs from the
// oracle only by the f32 RMSNorm: the bound does not grow with the position, and is not allowed to.
// Head shapes: a whole number of the kernel's 4-head blocks at head_dim 64 (128-thread blocks),
// and 7 heads at head_dim 256 (256-thread blocks), whose second block holds a query, the key and
// the value of one token.
TEST_F(Kernels, QkPrepMatchesOracleNormRope) {
  struct Heads {
    int H, KV, hd;
  };
  seeded([&] {
    for (const Heads hs : {Heads{4, 2, 64}, Heads{5, 1, 256}})
      for (int64_t pos0 : {int64_t{37}, int64_t{32766}, int64_t{131066}})
        for (int n_rot : {16, 64}) {
          SCOPED_TRACE(::testing::Message()
                       << "H=" << hs.H << " KV=" << hs.KV << " hd=" << hs.hd << " pos0=" << pos0 << " n_rot=" << n_rot);
          const int T = 5, H = hs.H, KV = hs.KV, hd = hs.hd;
          const int64_t ctx = pos0 + T;
          auto q = rnd(T * H * hd), k = rnd(T * KV * hd), v = rnd(T * KV * hd), qn = rnd(hd, 0.5f, 1.5f),
               kn = rnd(hd, 0.5f, 1.5f);
          auto dq = up(q), dk = up(k), dv = up(v), dqn = up(qn), dkn = up(kn);
          DeviceBuffer<float> kc(e(), ctx * KV * hd), vc(e(), ctx * KV * hd);
          kc.fill_bytes(0xFF);
          vc.fill_bytes(0xFF);
          auto dpos = up(std::vector<int64_t>{pos0});
          cuda::QkPrepParams p;
          p.q = dq.data();
          p.k = dk.data();
          p.v = dv.data();
          p.q_norm = dqn.data();
          p.k_norm = dkn.data();
          p.k_cache = kc.data();
          p.v_cache = vc.data();
          p.pos0 = dpos.data();
          p.T = T;
          p.H = H;
          p.KV = KV;
          p.hd = hd;
          p.n_rot = n_rot;
          p.eps = 1e-6f;
          p.theta = 1e6;
          cuda::qk_prep_run(p, s());
          e().synchronize();
          auto gq = dq.download(), gk = kc.download(), gv = vc.download();
          std::vector<float> rq = q, rk(T * KV * hd), got_k(T * KV * hd), got_v(T * KV * hd);
          for (int t = 0; t < T; ++t) {
            for (int h = 0; h < H; ++h) {
              float* x = rq.data() + (t * H + h) * hd;
              oo::rmsnorm(x, qn.data(), hd, 1e-6, x);
              oo::rope_neox(x, n_rot, pos0 + t, 1e6);
            }
            for (int h = 0; h < KV; ++h) {
              float* x = rk.data() + (t * KV + h) * hd;
              std::memcpy(x, k.data() + (t * KV + h) * hd, hd * 4);
              oo::rmsnorm(x, kn.data(), hd, 1e-6, x);
              oo::rope_neox(x, n_rot, pos0 + t, 1e6);
            }
            std::memcpy(got_k.data() + t * KV * hd, gk.data() + (pos0 + t) * KV * hd, KV * hd * 4);
            std::memcpy(got_v.data() + t * KV * hd, gv.data() + (pos0 + t) * KV * hd, KV * hd * 4);
          }
          EXPECT_TRUE(compare_to_contract(gq, rq, nmse_bound(NmseOp::qk_prep)));
          EXPECT_TRUE(compare_to_contract(got_k, rk, nmse_bound(NmseOp::qk_prep)));
          EXPECT_TRUE(compare_to_contract(got_v, v, Tolerance::exact()));
        }
  });
}

// Causal GQA attention over a cache, queries at pos0..pos0+T-1, contexts crossing the 256-key
// split size and contexts of a few keys; gated and ungated, head_dim 128 and 256. Reference: softmax(q.k/sqrt(hd)) v in f64.
TEST_F(Kernels, SplitAttentionMatchesF64Softmax) {
  seeded([&] {
    for (int T : {3, 1})  // 1: the decode form of the split kernel (wide batches, L2 prefetch)
      // 5: fewer keys than one batch of the value pass; 254..256 and 510..512: the queries' key counts
      // end one before, on, and one past the split edges (256 and 512 keys)
      for (int64_t pos0 : {600, 5, 254, 255, 256, 510, 511, 512})
        for (int hd : {128, 256})  // 256: the Qwen3.5 heads, two dims per thread in the value pass
          for (bool gated : {false, true}) {
            const int H = 4, KV = 2;
            const int64_t ctx = pos0 + T;
            auto q = rnd(T * H * hd, -0.3f, 0.3f), kc = rnd(ctx * KV * hd), vc = rnd(ctx * KV * hd),
                 g = rnd(T * H * hd, -3, 3);
            auto dq = up(q), dk = up(kc), dv = up(vc), dg = up(g);
            auto dpos = up(std::vector<int64_t>{pos0});
            DeviceBuffer<float> out(e(), T * H * hd), work(e(), cuda::attention_workspace_floats(T, ctx, H, hd));
            out.fill_bytes(0xFF);
            DeviceBuffer<BlockQ8_1> out_q(e(), T * H * hd / 32);  // the gated case also quantises (out_q)
            out_q.fill_bytes(0xFF);
            cuda::AttnParams p = attn_params(dq.data(), dk.data(), dv.data(), dpos.data(), T, ctx, H, KV, hd);
            p.gate = gated ? dg.data() : nullptr;
            p.out = out.data();
            p.work = work.data();
            p.out_q = gated ? reinterpret_cast<cuda::Q81*>(out_q.data()) : nullptr;
            cuda::attention_run(p, s());
            e().synchronize();
            auto got = out.download();
            if (gated) expect_q81_of(out_q.download(), got);  // the gated case also quantises
            const std::vector<float> ref = f64_attention(q, kc, vc, gated ? &g : nullptr, T, H, KV, hd, pos0);
            EXPECT_TRUE(compare_to_contract(got, ref, nmse_bound(NmseOp::split_attention)))
                << "gated=" << gated << " hd=" << hd << " pos0=" << pos0 << " T=" << T;
          }
  });
}

// Prefill attention (T > 1: several queries per block, keys and values staged) against the decode
// form (T = 1, one launch per query at its own position), bit for bit: the prefill-equals-decode
// law (DESIGN.md) at the kernel. T = 37 spans three 16-query blocks; pos0 = 240 puts the split
// boundary (256 keys) inside the block's queries, pos0 = 0 starts from a single key; GQA heads,
// head_dim 128 and 256, gated (so the combine also quantises).
// The last case, 64 heads at 4000 positions, gives the decode grid fewer blocks per head than
// splits, so each block takes several (a decode grid is one wave: attention.cu) while the prefill
// grid keeps a block per split.
TEST_F(Kernels, PrefillAttentionEqualsDecodeStepsBitwise) {
  seeded([&] {
    struct Case {
      int64_t pos0;
      int hd, T, H, KV;
    };
    for (const Case& cs : {Case{240, 128, 37, 4, 2}, Case{240, 256, 37, 4, 2}, Case{0, 128, 37, 4, 2},
                           Case{0, 256, 37, 4, 2}, Case{4000, 128, 3, 64, 16}}) {
      SCOPED_TRACE(::testing::Message() << "pos0=" << cs.pos0 << " hd=" << cs.hd << " H=" << cs.H);
      const int64_t pos0 = cs.pos0;
      const int hd = cs.hd, T = cs.T, H = cs.H, KV = cs.KV;
      const int64_t ctx = pos0 + T;
      auto q = rnd(T * H * hd, -0.3f, 0.3f), kc = rnd(ctx * KV * hd), vc = rnd(ctx * KV * hd),
           g = rnd(T * H * hd, -3, 3);
      auto dq = up(q), dk = up(kc), dv = up(vc), dg = up(g);
      DeviceBuffer<float> out(e(), T * H * hd), out1(e(), T * H * hd),
          work(e(), cuda::attention_workspace_floats(T, ctx, H, hd));
      DeviceBuffer<BlockQ8_1> oq(e(), T * H * hd / 32), oq1(e(), T * H * hd / 32);
      out.fill_bytes(0xFF);
      out1.fill_bytes(0xFF);
      auto dpos = up(std::vector<int64_t>{pos0});
      cuda::AttnParams p = attn_params(dq.data(), dk.data(), dv.data(), dpos.data(), T, ctx, H, KV, hd);
      p.gate = dg.data();
      p.out = out.data();
      p.out_q = reinterpret_cast<cuda::Q81*>(oq.data());
      p.work = work.data();
      cuda::attention_run(p, s());
      e().synchronize();
      std::vector<DeviceBuffer<int64_t>> poss;
      for (int t = 0; t < T; ++t) {
        poss.push_back(up(std::vector<int64_t>{pos0 + t}));
        cuda::AttnParams p1 = p;
        p1.T = 1;
        p1.pos0 = poss.back().data();
        p1.q = dq.data() + t * H * hd;
        p1.gate = dg.data() + t * H * hd;
        p1.out = out1.data() + t * H * hd;
        p1.out_q = reinterpret_cast<cuda::Q81*>(oq1.data()) + t * H * hd / 32;
        cuda::attention_run(p1, s());
        e().synchronize();  // the workspace is shared by the calls
      }
      const auto a = out.download(), b = out1.download();
      double norm = 0;
      for (float v : a) norm += std::abs(v);
      ASSERT_GT(norm, 0.0) << "vacuous: zero output";
      EXPECT_TRUE(compare_to_contract(a, b, Tolerance::exact())) << "pos0=" << pos0 << " hd=" << hd;
      const auto qa = oq.download(), qb = oq1.download();
      EXPECT_EQ(std::memcmp(qa.data(), qb.data(), qa.size() * sizeof(BlockQ8_1)), 0) << "pos0=" << pos0 << " hd=" << hd;
    }
  });
}

// --- the flash form (attention.cuh; arm prefill_attn = flash) --------------------------------------

// One flash call's inputs and outputs on the device: T queries at pos0.. over a cache of ctx rows.
struct FlashCase {
  int64_t T, pos0;
  int hd, H, KV;
};

// The flash form against softmax in f64: query tiles of 64 (T = 100, 130: a full and a partial
// tile; 37: one partial), key tiles of 32 (pos0 = 0, 31, 600: contexts starting on, before and far
// past a tile edge), GQA 2:1 and 8:1 and none, every head dim it takes (16: the tiny fixtures;
// 256: Qwen3.5), one query alone (T = 1: the form is callable for it, the arm never routes it
// there), ungated and gated (the gated case also quantises: out_q, bitwise against quant.h's
// quantizer of the f32 output, as the combine's is). Prints the measured NMSE per case.
TEST_F(Kernels, FlashAttentionMatchesF64Softmax) {
  seeded([&] {
    for (const FlashCase& cs : {FlashCase{100, 0, 128, 4, 2}, FlashCase{37, 600, 256, 4, 2},
                                FlashCase{130, 31, 64, 8, 1}, FlashCase{64, 32, 128, 2, 2},
                                FlashCase{1, 900, 128, 4, 2}, FlashCase{70, 5, 16, 4, 2}, FlashCase{70, 40, 32, 4, 4}})
      for (bool gated : {false, true}) {
        const int64_t T = cs.T, pos0 = cs.pos0, ctx = pos0 + T;
        const int hd = cs.hd, H = cs.H, KV = cs.KV;
        SCOPED_TRACE(::testing::Message() << "T=" << T << " pos0=" << pos0 << " hd=" << hd << " H=" << H << " KV=" << KV
                                          << " gated=" << gated);
        const bool quantised = gated && hd % 32 == 0;
        auto q = rnd(T * H * hd, -0.3f, 0.3f), kc = rnd(ctx * KV * hd), vc = rnd(ctx * KV * hd),
             g = rnd(T * H * hd, -3, 3);
        auto dq = up(q), dk = up(kc), dv = up(vc), dg = up(g);
        auto dpos = up(std::vector<int64_t>{pos0});
        DeviceBuffer<float> out(e(), T * H * hd);
        out.fill_bytes(0xFF);
        DeviceBuffer<BlockQ8_1> out_q(e(), std::max<int64_t>(T * H * hd / 32, 1));
        out_q.fill_bytes(0xFF);
        cuda::AttnParams p = attn_params(dq.data(), dk.data(), dv.data(), dpos.data(), T, ctx, H, KV, hd);
        p.gate = gated ? dg.data() : nullptr;
        p.out = out.data();
        p.out_q = quantised ? reinterpret_cast<cuda::Q81*>(out_q.data()) : nullptr;
        ASSERT_TRUE(cuda::flash_attention_supports(hd));
        cuda::flash_attention_run(p, s());
        e().synchronize();
        const std::vector<float> got = out.download();
        if (quantised) expect_q81_of(out_q.download(), got);
        const std::vector<float> ref = f64_attention(q, kc, vc, gated ? &g : nullptr, T, H, KV, hd, pos0);
        double num = 0, den = 0;
        for (size_t i = 0; i < ref.size(); ++i) {
          num += (double(got[i]) - ref[i]) * (double(got[i]) - ref[i]);
          den += double(ref[i]) * ref[i];
        }
        ASSERT_GT(den, 0.0) << "vacuous: zero reference";
        std::cout << "[ measured ] flash attention T " << T << " pos0 " << pos0 << " hd " << hd << " H/KV " << H << "/"
                  << KV << (gated ? " gated" : "") << ": NMSE " << num / den << "\n";
        EXPECT_TRUE(compare_to_contract(got, ref, nmse_bound(NmseOp::flash_attention)));
      }
  });
}

// DESIGN.md law 2 within the arm: a query's bits depend only on its own keys, never on the other
// queries of its block or call. A prompt of 150 queries in one call against the same queries in
// calls of 1, 63, 64 and 22 (each at its own pos0: block edges fall elsewhere, and the 63-query
// call ends inside a key tile), bitwise, output and q8_1 output; gated (the finish's gate and
// quantisation run per query too). And the flash form is not the split one: their outputs differ
// in some bit (a different reduction order), which is what makes it an arm.
TEST_F(Kernels, FlashAttentionInChunksEqualsOneCallBitwise) {
  seeded([&] {
    for (int hd : {128, 256, 16}) {
      SCOPED_TRACE(::testing::Message() << "hd=" << hd);
      const int H = 4, KV = 2;
      const int64_t pos0 = 20, T = 150, ctx = pos0 + T;
      const bool quantised = hd % 32 == 0;
      auto q = rnd(T * H * hd, -0.3f, 0.3f), kc = rnd(ctx * KV * hd), vc = rnd(ctx * KV * hd),
           g = rnd(T * H * hd, -3, 3);
      auto dq = up(q), dk = up(kc), dv = up(vc), dg = up(g);
      const int64_t nq = std::max<int64_t>(T * H * hd / 32, 1);
      DeviceBuffer<float> whole(e(), T * H * hd), parts(e(), T * H * hd), split(e(), T * H * hd),
          work(e(), cuda::attention_workspace_floats(T, ctx, H, hd));
      DeviceBuffer<BlockQ8_1> whole_q(e(), nq), parts_q(e(), nq);
      whole.fill_bytes(0xFF);
      parts.fill_bytes(0xFF);
      auto dpos = up(std::vector<int64_t>{pos0});
      cuda::AttnParams p = attn_params(dq.data(), dk.data(), dv.data(), dpos.data(), T, ctx, H, KV, hd);
      p.gate = dg.data();
      p.out = whole.data();
      p.out_q = quantised ? reinterpret_cast<cuda::Q81*>(whole_q.data()) : nullptr;
      cuda::flash_attention_run(p, s());
      std::vector<DeviceBuffer<int64_t>> poss;
      int64_t t0 = 0;
      for (int64_t n : {1, 63, 64, 22}) {
        poss.push_back(up(std::vector<int64_t>{pos0 + t0}));
        cuda::AttnParams c = p;
        c.T = n;
        c.pos0 = poss.back().data();
        c.q = dq.data() + t0 * H * hd;
        c.gate = dg.data() + t0 * H * hd;
        c.out = parts.data() + t0 * H * hd;
        c.out_q = quantised ? reinterpret_cast<cuda::Q81*>(parts_q.data()) + t0 * H * hd / 32 : nullptr;
        cuda::flash_attention_run(c, s());
        t0 += n;
      }
      ASSERT_EQ(t0, T);
      cuda::AttnParams sp = p;  // the split form on the same inputs
      sp.out = split.data();
      sp.out_q = nullptr;
      sp.work = work.data();
      cuda::attention_run(sp, s());
      e().synchronize();
      const auto a = whole.download(), b = parts.download(), c = split.download();
      double norm = 0;
      for (float v : a) norm += std::abs(v);
      ASSERT_GT(norm, 0.0) << "vacuous: zero output";
      EXPECT_TRUE(compare_to_contract(b, a, Tolerance::exact())) << "a query's bits moved with its call";
      if (quantised) {
        const auto qa = whole_q.download(), qb = parts_q.download();
        EXPECT_EQ(std::memcmp(qa.data(), qb.data(), qa.size() * sizeof(BlockQ8_1)), 0);
      }
      EXPECT_NE(std::memcmp(a.data(), c.data(), a.size() * sizeof(float)), 0)
          << "the flash form gave the split form's bits on every output: is it running?";
    }
  });
}

// What the flash form refuses, naming it: a head dim it has no instantiation for, the one-launch
// decode form's fields, heads that are not a multiple of the key-value heads, a q8_1 output of a
// head that is not whole q8_1 blocks.
TEST_F(Kernels, FlashAttentionRefusesWhatItDoesNotTake) {
  using ::testing::HasSubstr;
  using ::testing::ThrowsMessage;
  DeviceBuffer<float> buf(e(), 4096);
  auto dpos = up(std::vector<int64_t>{0});
  cuda::AttnParams p;
  p.q = p.k_cache = p.v_cache = buf.data();
  p.out = buf.data();
  p.pos0 = dpos.data();
  p.ctx_bound = 4;
  p.T = 4;
  p.H = 4;
  p.KV = 2;
  p.hd = 96;
  p.scale = 0.1f;
  EXPECT_FALSE(cuda::flash_attention_supports(96));
  EXPECT_THAT([&] { cuda::flash_attention_run(p, s()); }, ThrowsMessage<Error>(HasSubstr("head_dim 96 unsupported")));
  p.hd = 16;
  p.H = 3;
  EXPECT_THAT([&] { cuda::flash_attention_run(p, s()); }, ThrowsMessage<Error>(HasSubstr("H 3 KV 2")));
  p.H = 4;
  cuda::AttnParams prep = p;
  prep.prep.q = buf.data();
  EXPECT_THAT([&] { cuda::flash_attention_run(prep, s()); }, ThrowsMessage<Error>(HasSubstr("one-launch decode form")));
  cuda::AttnParams q81 = p;
  DeviceBuffer<BlockQ8_1> oq(e(), 16);
  q81.out_q = reinterpret_cast<cuda::Q81*>(oq.data());
  EXPECT_THAT([&] { cuda::flash_attention_run(q81, s()); }, ThrowsMessage<Error>(HasSubstr("head_dim % 32")));
}

// A decode token's attention in one launch (AttnParams::prep: the split kernel prepares the
// token's q / k, stores its K / V and finishes the heads itself) against qk_prep_run then the
// three-launch attention_run, bitwise: output, q8_1 output, and the whole K / V cache after the
// call. The one-launch run's cache row at the token's position starts as NaN (a block that read it
// instead of its own key would turn the output NaN), its raw q must stay unwritten, and the arrival
// counters must be zero again after every call. Positions: inside the first split, its last key
// (one split, finished in the split block), the first key of the second split (whose only key is
// the token's own), further on (three splits, finished by the last block to arrive); each
// one-launch call runs twice on the same counters. Partial and full rotation, GQA 4:1, gated
// with q8_1 output. Negative control: another RoPE base must change the bits.
// One case of the test below: H query heads over KV cache heads of hd dims, n_rot rotated, the
// token at pos of a cache of ctx positions.
void Kernels::check_one_launch(int H, int KV, int hd, int n_rot, int64_t pos, int64_t ctx) {
  Kernels& k = *this;
  SCOPED_TRACE(::testing::Message() << "H=" << H << " KV=" << KV << " hd=" << hd << " n_rot=" << n_rot << " pos=" << pos
                                    << " ctx=" << ctx);
  const int kvd = KV * hd;
  auto q = k.rnd(H * hd, -2, 2), kk = k.rnd(kvd, -2, 2), v = k.rnd(kvd), g = k.rnd(H * hd, -3, 3);
  auto qn = k.rnd(hd, 0.5f, 1.5f), kn = k.rnd(hd, 0.5f, 1.5f), kc = k.rnd(ctx * kvd), vc = k.rnd(ctx * kvd);
  auto dg = k.up(g), dqn = k.up(qn), dkn = k.up(kn), dk = k.up(kk), dv = k.up(v);
  auto dpos = k.up(std::vector<int64_t>{pos});
  DeviceBuffer<unsigned> arrivals(k.e(), H);
  arrivals.fill_bytes(0);
  struct Out { std::vector<float> out, kc, vc, q; std::vector<BlockQ8_1> oq; };
  auto run = [&](bool one_launch, double theta) {
    auto dq = k.up(q);
    std::vector<float> kc0 = kc, vc0 = vc;
    if (one_launch)
      for (int d = 0; d < kvd; ++d) kc0[pos * kvd + d] = vc0[pos * kvd + d] = std::nanf("");
    auto dkc = k.up(kc0), dvc = k.up(vc0);
    DeviceBuffer<float> out(k.e(), H * hd), work(k.e(), cuda::attention_workspace_floats(1, ctx, H, hd));
    out.fill_bytes(0xFF);
    work.fill_bytes(0xFF);
    DeviceBuffer<BlockQ8_1> oq(k.e(), H * hd / 32);
    oq.fill_bytes(0xFF);
    cuda::QkPrepParams qp;
    qp.q = dq.data(); qp.k = dk.data(); qp.v = dv.data(); qp.q_norm = dqn.data(); qp.k_norm = dkn.data();
    qp.k_cache = dkc.data(); qp.v_cache = dvc.data(); qp.pos0 = dpos.data(); qp.T = 1; qp.H = H; qp.KV = KV;
    qp.hd = hd; qp.n_rot = n_rot; qp.eps = 1e-6f; qp.theta = theta;
    cuda::AttnParams p;
    p.q = dq.data(); p.k_cache = dkc.data(); p.v_cache = dvc.data(); p.gate = dg.data(); p.out = out.data();
    p.out_q = reinterpret_cast<cuda::Q81*>(oq.data()); p.work = work.data(); p.pos0 = dpos.data(); p.ctx_bound = ctx;
    p.T = 1; p.H = H; p.KV = KV; p.hd = hd; p.scale = static_cast<float>(1.0 / std::sqrt(double(hd)));
    if (one_launch) {
      p.prep = qp;
      p.arrivals = arrivals.data();
      cuda::attention_run(p, k.s());
      k.e().synchronize();
      EXPECT_THAT(arrivals.download(), ::testing::Each(0u)) << "arrival counters left set";
    } else {
      cuda::qk_prep_run(qp, k.s());
    }
    cuda::attention_run(p, k.s());  // one-launch: again on the same counters and cache
    k.e().synchronize();
    if (one_launch) { EXPECT_THAT(arrivals.download(), ::testing::Each(0u)) << "arrival counters left set"; }
    return Out{out.download(), dkc.download(), dvc.download(), dq.download(), oq.download()};
  };
  const Out ref = run(false, 1e6), got = run(true, 1e6);
  double norm = 0;
  for (float x : ref.out) norm += std::abs(x);
  ASSERT_GT(norm, 0.0) << "vacuous: zero output";
  EXPECT_THAT(got.out, testing::BitIdentical(ref.out)) << "attention output";
  EXPECT_THAT(got.kc, testing::BitIdentical(ref.kc)) << "K cache";
  EXPECT_THAT(got.vc, testing::BitIdentical(ref.vc)) << "V cache";
  EXPECT_THAT(got.q, testing::BitIdentical(q)) << "the raw q was written";
  for (size_t b = 0; b < ref.oq.size(); ++b)
    ASSERT_EQ(std::memcmp(&got.oq[b], &ref.oq[b], sizeof(BlockQ8_1)), 0) << "q8_1 block " << b;
  EXPECT_FALSE(compare_to_contract(run(true, 1e4).out, ref.out, Tolerance::exact())) << "another RoPE base gave the same bits";
}

TEST_F(Kernels, DecodeAttentionInOneLaunchBitwiseEqualsPrepThenAttention) {
  seeded([&] {
    for (int hd : {128, 256})
      for (int n_rot : {hd / 4, hd})
        for (int64_t pos : {5, 255, 256, 600}) check_one_launch(8, 2, hd, n_rot, pos, 1000);
    // 64 heads over a 4096-position cache: more splits than one wave of blocks holds, so a block
    // takes several splits (a decode grid is one wave: attention.cu) in both forms; the token in the last split, and in a
    // split that is not its block's first
    for (int64_t pos : {4000, 2100}) check_one_launch(64, 16, 128, 32, pos, 4096);
  });
}

// A batched decode step's attention (AttnParams::seqs): three sequences in their own caches at
// positions 5, 600 and 255 (one split, three splits finished by the last block to arrive, one
// split ending at its last key), rows 0..2 of q / k / v / gate / out, in one launch, against one
// one-launch call per sequence: outputs, q8_1 outputs and every cache bitwise, the [3, H] arrival
// counters zero after each call. GQA 4:1, partial rotation, gated.
TEST_F(Kernels, DecodeAttentionBatchedEqualsOneLaunchPerSequence) {
  seeded([&] {
    const int H = 8, KV = 2, hd = 128, n_rot = 32, B = 3;
    const int64_t ctx = 1000, kvd = KV * hd;
    const std::vector<int64_t> pos = {5, 600, 255};
    auto q = rnd(B * H * hd, -2, 2), kk = rnd(B * kvd, -2, 2), v = rnd(B * kvd), g = rnd(B * H * hd, -3, 3);
    auto qn = rnd(hd, 0.5f, 1.5f), kn = rnd(hd, 0.5f, 1.5f), kc = rnd(B * ctx * kvd), vc = rnd(B * ctx * kvd);
    auto dg = up(g), dqn = up(qn), dkn = up(kn), dk = up(kk), dv = up(v);
    auto dpos = up(pos);
    DeviceBuffer<unsigned> arrivals(e(), B * H);
    arrivals.fill_bytes(0);
    struct Out {
      std::vector<float> out, kc, vc;
      std::vector<BlockQ8_1> oq;
    };
    auto run = [&](bool batched) {
      auto dq = up(q), dkc = up(kc), dvc = up(vc);
      DeviceBuffer<float> out(e(), B * H * hd), work(e(), cuda::attention_workspace_floats(B, ctx, H, hd));
      out.fill_bytes(0xFF);
      DeviceBuffer<BlockQ8_1> oq(e(), B * H * hd / 32);
      oq.fill_bytes(0xFF);
      std::vector<cuda::AttnSeq> table;
      for (int i = 0; i < B; ++i)
        table.push_back({dkc.data() + i * ctx * kvd, dvc.data() + i * ctx * kvd, dpos.data() + i});
      auto dtable = up(table);
      for (int i = 0; i < (batched ? 1 : B); ++i) {
        const int r = batched ? 0 : i;
        cuda::QkPrepParams qp;
        qp.q = dq.data() + r * H * hd;
        qp.k = dk.data() + r * kvd;
        qp.v = dv.data() + r * kvd;
        qp.q_norm = dqn.data();
        qp.k_norm = dkn.data();
        qp.k_cache = batched ? nullptr : table[i].k_cache;
        qp.v_cache = batched ? nullptr : table[i].v_cache;
        qp.pos0 = batched ? nullptr : dpos.data() + i;
        qp.T = batched ? B : 1;
        qp.H = H;
        qp.KV = KV;
        qp.hd = hd;
        qp.n_rot = n_rot;
        qp.eps = 1e-6f;
        qp.theta = 1e6;
        cuda::AttnParams p;
        p.q = qp.q;
        p.k_cache = qp.k_cache;
        p.v_cache = qp.v_cache;
        p.gate = dg.data() + r * H * hd;
        p.out = out.data() + r * H * hd;
        p.out_q = reinterpret_cast<cuda::Q81*>(oq.data()) + r * H * hd / 32;
        p.work = work.data();
        p.pos0 = qp.pos0;
        p.ctx_bound = ctx;
        p.T = qp.T;
        p.H = H;
        p.KV = KV;
        p.hd = hd;
        p.scale = static_cast<float>(1.0 / std::sqrt(double(hd)));
        p.prep = qp;
        p.arrivals = arrivals.data();
        p.seqs = batched ? dtable.data() : nullptr;
        cuda::attention_run(p, s());
        e().synchronize();  // the workspace is shared by the calls
        EXPECT_THAT(arrivals.download(), ::testing::Each(0u)) << "arrival counters left set";
      }
      return Out{out.download(), dkc.download(), dvc.download(), oq.download()};
    };
    const Out ref = run(false), got = run(true);
    EXPECT_THAT(got.out, testing::BitIdentical(ref.out)) << "attention outputs";
    EXPECT_THAT(got.kc, testing::BitIdentical(ref.kc)) << "K caches";
    EXPECT_THAT(got.vc, testing::BitIdentical(ref.vc)) << "V caches";
    EXPECT_NE(got.kc, kc) << "no K row stored";
    for (size_t b = 0; b < ref.oq.size(); ++b)
      ASSERT_EQ(std::memcmp(&got.oq[b], &ref.oq[b], sizeof(BlockQ8_1)), 0) << "q8_1 block " << b;
  });
}

// Shared memory past 48 KB on a fresh process: head_dim 256 with a 21-23 key context stages
// 21-23 keys, 42-46 KB of dynamic shared memory beside ~5 KB of static arrays, past what a
// kernel gets without opting in: the launch fails 'invalid argument' unless something has raised
// the kernel's limit (an eager 9B decode at positions ~21-22 is this shape). launch_kernel raises
// it itself (allow_dynamic_smem), so the launch must not depend on an earlier one. CTest runs each
// case in its own process, so these launches are the process's first of this kernel.
TEST_F(Kernels, DecodeAttentionStagesPast48KBOfSharedMemoryInAFreshProcess) {
  seeded([&] {
    for (int64_t ctx : {21, 22, 23}) check_one_launch(8, 2, 256, 64, ctx - 1, ctx);
  });
}

// The one-launch decode attention refuses what it cannot do, by name: more than one token, heads
// or a position other than the attention's own, and no arrival counters.
TEST_F(Kernels, DecodeAttentionInOneLaunchRefusesMismatchedPrep) {
  const int H = 4, KV = 2, hd = 64;
  DeviceBuffer<float> q(e(), 2 * H * hd), kc(e(), 64 * KV * hd), vc(e(), 64 * KV * hd), out(e(), 2 * H * hd);
  DeviceBuffer<float> work(e(), cuda::attention_workspace_floats(2, 64, H, hd));
  DeviceBuffer<unsigned> arrivals(e(), H);
  auto dpos = up(std::vector<int64_t>{3});
  cuda::QkPrepParams qp;
  qp.q = q.data(); qp.k = q.data(); qp.v = q.data(); qp.q_norm = q.data(); qp.k_norm = q.data();
  qp.k_cache = kc.data(); qp.v_cache = vc.data(); qp.pos0 = dpos.data(); qp.T = 1; qp.H = H; qp.KV = KV; qp.hd = hd;
  qp.n_rot = 16;
  cuda::AttnParams p;
  p.q = q.data(); p.k_cache = kc.data(); p.v_cache = vc.data(); p.out = out.data(); p.work = work.data();
  p.pos0 = dpos.data(); p.ctx_bound = 64; p.T = 1; p.H = H; p.KV = KV; p.hd = hd; p.scale = 0.125f;
  p.prep = qp;
  p.arrivals = arrivals.data();
  auto refuses = [&](cuda::AttnParams bad, const char* what) {
    try {
      cuda::attention_run(bad, s());
      ADD_FAILURE() << what << ": accepted";
    } catch (const Error& err) {
      EXPECT_THAT(err.what(), ::testing::HasSubstr("attention")) << what;
    }
  };
  cuda::AttnParams two = p;
  two.T = 2;
  refuses(two, "two tokens");
  cuda::AttnParams heads = p;
  heads.prep.H = 8;
  refuses(heads, "other heads");
  cuda::AttnParams none = p;
  none.arrivals = nullptr;
  refuses(none, "no arrival counters");
  cuda::AttnParams odd = p;
  odd.prep.n_rot = 15;
  refuses(odd, "odd n_rot");
}

// The decode token's conv + recurrence + gated output norm in one launch (gdn_step_norm_run with
// the conv) against the three launches it replaces (the conv kernel, the step kernel, then the
// RmsNormGated row op in place with its q8_1 blocks): conv ring, state, f32 output and q8_1
// bitwise, on the Qwen3.5 head shape (128 x 128) and the tiny fixtures' (8 x 16, no q8_1: d_v %
// 32 != 0), grouped and tiled head maps, at a position whose window wraps the ring; and the
// recurrence + norm launch without the conv against the last two.
TEST_F(Kernels, GdnStepNormBitwiseEqualsStepThenNorm) {
  seeded([&] {
    struct Shape {
      int nk, nv, dk, dv;
    };
    constexpr int K = 4;
    for (const Shape sh : {Shape{4, 8, 128, 128}, Shape{2, 4, 8, 16}})
      for (bool tiled : {false, true})
        for (bool with_conv : {true, false}) {
          SCOPED_TRACE(::testing::Message()
                       << "dk=" << sh.dk << " dv=" << sh.dv << " tiled=" << tiled << " conv=" << with_conv);
          const int kd = sh.nk * sh.dk, cd = 2 * kd + sh.nv * sh.dv, vd = sh.nv * sh.dv;
          const bool with_q = sh.dv % 32 == 0;
          auto x = rnd(cd), b = rnd(sh.nv, -2, 2), a = rnd(sh.nv, -2, 2), A = rnd(sh.nv, -4, -0.5f),
               dt = rnd(sh.nv, 0, 1);
          auto S0 = rnd(static_cast<size_t>(sh.nv) * sh.dk * sh.dv, -0.1f, 0.1f), z = rnd(vd, -3, 3),
               w = rnd(sh.dv, 0.5f, 1.5f);
          auto taps = rnd(static_cast<size_t>(cd) * K, -0.5f, 0.5f), ring0 = rnd(static_cast<size_t>(K) * cd);
          auto dx = up(x), db = up(b), da = up(a), dA = up(A), ddt = up(dt), dz = up(z), dw = up(w), dtaps = up(taps);
          auto dpos = up(std::vector<int64_t>{5});
          struct Out {
            std::vector<float> S, y, ring;
            std::vector<BlockQ8_1> q;
          };
          auto run = [&](bool fused) {
            auto dS = up(S0), dring = up(ring0);
            DeviceBuffer<float> o(e(), vd), xc(e(), cd);
            o.fill_bytes(0xFF);
            xc.fill_bytes(0xFF);
            DeviceBuffer<BlockQ8_1> q(e(), with_q ? vd / 32 : 1);
            q.fill_bytes(0xFF);
            cuda::GdnConvParams cp;
            cp.x = dx.data();
            cp.taps = dtaps.data();
            cp.state = dring.data();
            cp.pos0 = dpos.data();
            cp.y = xc.data();
            cp.T = 1;
            cp.cd = cd;
            cp.K = K;
            cuda::GdnParams gp;
            gp.qkv = with_conv ? xc.data() : dx.data();
            gp.b = db.data();
            gp.a = da.data();
            gp.ssm_a = dA.data();
            gp.dt_bias = ddt.data();
            gp.state = dS.data();
            gp.o = o.data();
            gp.T = 1;
            gp.nk = sh.nk;
            gp.nv = sh.nv;
            gp.dk = sh.dk;
            gp.dv = sh.dv;
            gp.tiled = tiled;
            cuda::Q81* qp = with_q ? reinterpret_cast<cuda::Q81*>(q.data()) : nullptr;
            if (fused) {
              EXPECT_TRUE(cuda::gdn_step_norm_run(gp, cuda::GdnOutNorm{dz.data(), dw.data(), 1e-6f, o.data(), qp}, s(),
                                                  with_conv ? &cp : nullptr));
            } else {
              if (with_conv) cuda::gdn_conv_run(cp, s());
              cuda::gdn_recurrent_run(gp, s());
              cuda::RowOpParams rp;
              rp.op = cuda::RowOp::RmsNormGated;
              rp.x = o.data();
              rp.ld_x = sh.dv;
              rp.z = dz.data();
              rp.ld_z = sh.dv;
              rp.w = dw.data();
              rp.eps = 1e-6f;
              rp.y = o.data();
              rp.ld_y = sh.dv;
              rp.q = qp;
              rp.rows = sh.nv;
              rp.n = sh.dv;
              cuda::rowop_run(rp, s());
            }
            e().synchronize();
            return Out{dS.download(), o.download(), dring.download(), q.download()};
          };
          const Out ref = run(false), got = run(true);
          EXPECT_THAT(got.S, testing::BitIdentical(ref.S)) << "state";
          EXPECT_THAT(got.y, testing::BitIdentical(ref.y)) << "gated norm output";
          EXPECT_THAT(got.ring, testing::BitIdentical(ref.ring)) << "conv ring";
          if (with_conv) { EXPECT_NE(got.ring, ring0) << "the conv never wrote its ring slot"; }
          for (size_t i = 0; with_q && i < ref.q.size(); ++i)
            ASSERT_EQ(std::memcmp(&got.q[i], &ref.q[i], sizeof(BlockQ8_1)), 0) << "q8_1 block " << i;
        }
  });
}

// The conv of a batched-step test's launch i: sequence i's own launch (row i, its ring and position)
// or, batched, the one launch over rows 0..n_seq-1 through `table` (their rings, positions).
cuda::GdnConvParams step_conv(bool batched, int i, const float* x, const float* taps, float* rings, const int64_t* pos,
                              float* y, int cd, int K, const cuda::GdnSeq* table, int n_seq) {
  const int r = batched ? 0 : i;  // the launch's first row
  cuda::GdnConvParams cp;
  cp.x = x + r * cd;
  cp.taps = taps;
  cp.state = batched ? nullptr : rings + static_cast<int64_t>(i) * K * cd;
  cp.pos0 = batched ? nullptr : pos + i;
  cp.y = y + r * cd;
  cp.T = 1;
  cp.cd = cd;
  cp.K = K;
  cp.seqs = batched ? table : nullptr;
  cp.n_seq = batched ? n_seq : 1;
  return cp;
}

// The batched-step tests' [sequence] table: sequence i's state, ring and position.
std::vector<cuda::GdnSeq> seq_table(float* states, size_t state_floats, float* rings, int64_t ring_floats,
                                    const int64_t* pos, int n_seq) {
  std::vector<cuda::GdnSeq> table;
  for (int i = 0; i < n_seq; ++i) table.push_back({states + i * state_floats, rings + i * ring_floats, pos + i});
  return table;
}

// A batched decode step's GDN layer (gdn_step_norm_run with GdnParams::seqs): three sequences,
// each with its own state, conv ring and position (two of them wrapping the ring), their rows
// 0..2 of every operand, in one launch, against one fused launch per sequence: states, rings,
// outputs and q8_1 blocks bitwise. Both head shapes, grouped and tiled head maps.
TEST_F(Kernels, GdnStepNormBatchedEqualsOneLaunchPerSequence) {
  seeded([&] {
    struct Shape {
      int nk, nv, dk, dv;
    };
    constexpr int K = 4, B = 3;
    for (const Shape sh : {Shape{4, 8, 128, 128}, Shape{2, 4, 8, 16}})
      for (bool tiled : {false, true}) {
        SCOPED_TRACE(::testing::Message() << "dk=" << sh.dk << " dv=" << sh.dv << " tiled=" << tiled);
        const int kd = sh.nk * sh.dk, cd = 2 * kd + sh.nv * sh.dv, vd = sh.nv * sh.dv;
        const bool with_q = sh.dv % 32 == 0;
        const size_t ns = static_cast<size_t>(sh.nv) * sh.dk * sh.dv;
        auto x = rnd(B * cd), b = rnd(B * sh.nv, -2, 2), a = rnd(B * sh.nv, -2, 2), A = rnd(sh.nv, -4, -0.5f),
             dt = rnd(sh.nv, 0, 1), z = rnd(B * vd, -3, 3), w = rnd(sh.dv, 0.5f, 1.5f);
        auto taps = rnd(static_cast<size_t>(cd) * K, -0.5f, 0.5f);
        auto S0 = rnd(B * ns, -0.1f, 0.1f), ring0 = rnd(static_cast<size_t>(B) * K * cd);
        auto dx = up(x), db = up(b), da = up(a), dA = up(A), ddt = up(dt), dz = up(z), dw = up(w), dtaps = up(taps);
        auto dpos = up(std::vector<int64_t>{5, 0, 9});
        struct Out {
          std::vector<float> S, y, ring;
          std::vector<BlockQ8_1> q;
        };
        auto run = [&](bool batched) {
          auto dS = up(S0), dring = up(ring0);
          DeviceBuffer<float> o(e(), B * vd), xc(e(), B * cd);
          o.fill_bytes(0xFF);
          DeviceBuffer<BlockQ8_1> q(e(), with_q ? B * vd / 32 : 1);
          q.fill_bytes(0xFF);
          auto dtable = up(seq_table(dS.data(), ns, dring.data(), K * cd, dpos.data(), B));
          for (int i = 0; i < (batched ? 1 : B); ++i) {
            const int r = batched ? 0 : i;  // the launch's first row
            const cuda::GdnConvParams cp = step_conv(batched, i, dx.data(), dtaps.data(), dring.data(), dpos.data(),
                                                     xc.data(), cd, K, dtable.data(), B);
            cuda::GdnParams gp;
            gp.qkv = cp.y;
            gp.b = db.data() + r * sh.nv;
            gp.a = da.data() + r * sh.nv;
            gp.ssm_a = dA.data();
            gp.dt_bias = ddt.data();
            gp.state = batched ? nullptr : dS.data() + i * ns;
            gp.o = o.data() + r * vd;
            gp.T = 1;
            gp.nk = sh.nk;
            gp.nv = sh.nv;
            gp.dk = sh.dk;
            gp.dv = sh.dv;
            gp.tiled = tiled;
            gp.seqs = batched ? dtable.data() : nullptr;
            gp.n_seq = batched ? B : 1;
            cuda::Q81* qp = with_q ? reinterpret_cast<cuda::Q81*>(q.data()) + r * vd / 32 : nullptr;
            EXPECT_TRUE(cuda::gdn_step_norm_run(gp, cuda::GdnOutNorm{dz.data() + r * vd, dw.data(), 1e-6f, gp.o, qp},
                                                s(), &cp));
          }
          e().synchronize();
          return Out{dS.download(), o.download(), dring.download(), q.download()};
        };
        const Out ref = run(false), got = run(true);
        EXPECT_THAT(got.S, testing::BitIdentical(ref.S)) << "states";
        EXPECT_THAT(got.y, testing::BitIdentical(ref.y)) << "gated norm outputs";
        EXPECT_THAT(got.ring, testing::BitIdentical(ref.ring)) << "conv rings";
        EXPECT_NE(got.S, S0) << "no state moved";
        for (size_t i = 0; with_q && i < ref.q.size(); ++i)
          ASSERT_EQ(std::memcmp(&got.q[i], &ref.q[i], sizeof(BlockQ8_1)), 0) << "q8_1 block " << i;
      }
  });
}

// A batched decode step's GDN layer where the fused kernel does not serve it (a head shape without
// it, or a conv of K != 4): gdn_conv_run and gdn_recurrent_run with their seqs, three sequences at
// their own positions, one launch each, against the same two launches per sequence: states, rings,
// conv outputs and outputs bitwise. d_k 8 (the step kernel) and 24 (the recurrent kernel), d_v 12,
// K 4 and 3, grouped and tiled head maps.
TEST_F(Kernels, GdnStepBatchedEqualsOneLaunchPerSequence) {
  seeded([&] {
    constexpr int B = 3, nk = 2, nv = 4, dv = 12;
    for (int dk : {8, 24})
      for (int K : {4, 3})
        for (bool tiled : {false, true}) {
          SCOPED_TRACE(::testing::Message() << "dk=" << dk << " K=" << K << " tiled=" << tiled);
          const int kd = nk * dk, cd = 2 * kd + nv * dv, vd = nv * dv;
          const size_t ns = static_cast<size_t>(nv) * dk * dv;
          auto x = rnd(B * cd), b = rnd(B * nv, -2, 2), a = rnd(B * nv, -2, 2), A = rnd(nv, -4, -0.5f),
               dt = rnd(nv, 0, 1);
          auto taps = rnd(static_cast<size_t>(cd) * K, -0.5f, 0.5f);
          auto S0 = rnd(B * ns, -0.1f, 0.1f), ring0 = rnd(static_cast<size_t>(B) * K * cd);
          auto dx = up(x), db = up(b), da = up(a), dA = up(A), ddt = up(dt), dtaps = up(taps);
          auto dpos = up(std::vector<int64_t>{5, 0, 9});
          struct Out {
            std::vector<float> S, o, ring, xc;
          };
          auto run = [&](bool batched) {
            auto dS = up(S0), dring = up(ring0);
            DeviceBuffer<float> o(e(), B * vd), xc(e(), B * cd);
            o.fill_bytes(0xFF);
            xc.fill_bytes(0xFF);
            auto dtable = up(seq_table(dS.data(), ns, dring.data(), K * cd, dpos.data(), B));
            for (int i = 0; i < (batched ? 1 : B); ++i) {
              const int r = batched ? 0 : i;  // the launch's first row
              const cuda::GdnConvParams cp = step_conv(batched, i, dx.data(), dtaps.data(), dring.data(), dpos.data(),
                                                       xc.data(), cd, K, dtable.data(), B);
              cuda::gdn_conv_run(cp, s());
              cuda::GdnParams gp;
              gp.qkv = cp.y;
              gp.b = db.data() + r * nv;
              gp.a = da.data() + r * nv;
              gp.ssm_a = dA.data();
              gp.dt_bias = ddt.data();
              gp.state = batched ? nullptr : dS.data() + i * ns;
              gp.o = o.data() + r * vd;
              gp.T = 1;
              gp.nk = nk;
              gp.nv = nv;
              gp.dk = dk;
              gp.dv = dv;
              gp.tiled = tiled;
              gp.seqs = cp.seqs;
              gp.n_seq = cp.n_seq;
              cuda::gdn_recurrent_run(gp, s());
            }
            e().synchronize();
            return Out{dS.download(), o.download(), dring.download(), xc.download()};
          };
          const Out ref = run(false), got = run(true);
          EXPECT_THAT(got.S, testing::BitIdentical(ref.S)) << "states";
          EXPECT_THAT(got.o, testing::BitIdentical(ref.o)) << "outputs";
          EXPECT_THAT(got.ring, testing::BitIdentical(ref.ring)) << "conv rings";
          EXPECT_THAT(got.xc, testing::BitIdentical(ref.xc)) << "conv outputs";
          EXPECT_NE(got.S, S0) << "no state moved";
          EXPECT_NE(got.ring, ring0) << "no ring slot written";
        }
  });
}

// GDN conv (K=4, state carried in the position-indexed ring, from position 6 so the window wraps)
// then the recurrence over T=70 tokens (crosses 64 and the conv's 16-token ranges) and T=2 (fewer
// than K-1: the ring keeps an older input) with grouped and tiled head maps, against the oracle's
// conv formula and delta_rule_recurrent (f64).
TEST_F(Kernels, GdnConvAndRecurrenceMatchOracle) {
  seeded([&] {
    for (int T : {70, 2})
      for (bool tiled : {false, true}) {
        const int nk = 2, nv = 4, dk = 32, dv = 16, K = 4;
        const int64_t pos0 = 6;
        const int kd = nk * dk, cd = 2 * kd + nv * dv;
        auto x = rnd(T * cd), taps = rnd(cd * K, -0.5f, 0.5f), st0 = rnd((K - 1) * cd);
        auto b = rnd(T * nv, -2, 2), a = rnd(T * nv, -2, 2), A = rnd(nv, -4, -0.5f), dt = rnd(nv, 0, 1);
        auto S0 = rnd(nv * dk * dv, -0.1f, 0.1f);
        // the ring: positions pos0-3..pos0-1 hold st0's rows; the slot of pos0 holds NaN (never read)
        std::vector<float> ring(K * cd, std::nanf(""));
        auto slot = [&](int64_t p) { return ((p % K) + K) % K; };
        for (int j = 0; j < K - 1; ++j)
          std::memcpy(ring.data() + slot(pos0 - (K - 1) + j) * cd, st0.data() + j * cd, cd * 4);
        auto dx = up(x), dtaps = up(taps), dst = up(ring), db = up(b), da = up(a), dA = up(A), ddt = up(dt),
             dS = up(S0);
        auto dpos = up(std::vector<int64_t>{pos0});
        DeviceBuffer<float> y(e(), T * cd), o(e(), T * nv * dv);
        cuda::GdnConvParams cp;
        cp.x = dx.data();
        cp.taps = dtaps.data();
        cp.state = dst.data();
        cp.pos0 = dpos.data();
        cp.y = y.data();
        cp.T = T;
        cp.cd = cd;
        cp.K = K;
        cuda::gdn_conv_run(cp, s());
        cuda::GdnParams gp;
        gp.qkv = y.data();
        gp.b = db.data();
        gp.a = da.data();
        gp.ssm_a = dA.data();
        gp.dt_bias = ddt.data();
        gp.state = dS.data();
        gp.o = o.data();
        gp.T = T;
        gp.nk = nk;
        gp.nv = nv;
        gp.dk = dk;
        gp.dv = dv;
        gp.tiled = tiled;
        cuda::gdn_recurrent_run(gp, s());
        e().synchronize();
        auto gy = y.download(), go = o.download(), gS = dS.download(), gst = dst.download();
        std::printf("[gdn-conv] T=%d tiled=%d sha256 %s\n", T, int(tiled),
                    testing::logits_stream_sha256(std::vector<std::vector<float>>{gy, gst}).c_str());
        // conv reference
        std::vector<float> xin((K - 1 + T) * cd), ry(T * cd);
        std::memcpy(xin.data(), st0.data(), (K - 1) * cd * 4);
        std::memcpy(xin.data() + (K - 1) * cd, x.data(), T * cd * 4);
        for (int t = 0; t < T; ++t)
          for (int ch = 0; ch < cd; ++ch) {
            double acc = 0;
            for (int j = 0; j < K; ++j) acc += double(taps[ch * K + j]) * xin[(t + j) * cd + ch];
            ry[t * cd + ch] = static_cast<float>(oo::silu(acc));
          }
        EXPECT_TRUE(compare_to_contract(gy, ry, nmse_bound(NmseOp::gdn_conv))) << "T=" << T;
        std::vector<float> last(K - 1 > 0 ? (K - 1) * cd : 0);  // the ring's last K-1 inputs, oldest first
        for (int j = 0; j < K - 1; ++j)
          std::memcpy(last.data() + j * cd, gst.data() + slot(pos0 + T - (K - 1) + j) * cd, cd * 4);
        EXPECT_TRUE(
            compare_to_contract(last, std::vector<float>(xin.end() - (K - 1) * cd, xin.end()), Tolerance::exact()));
        // recurrence reference from the GPU's conv output (isolates the recurrence)
        std::vector<float> ro(T * nv * dv), rS(nv * dk * dv);
        for (int h = 0; h < nv; ++h) {
          const int key = tiled ? h % nk : h / (nv / nk);
          std::vector<double> q(T * dk), k(T * dk), v(T * dv), g(T), be(T), out(T * dv),
              S(S0.begin() + h * dk * dv, S0.begin() + (h + 1) * dk * dv);
          for (int t = 0; t < T; ++t) {
            const float* row = gy.data() + t * cd;
            double qq = 0, kk = 0;
            for (int i = 0; i < dk; ++i) {
              qq += double(row[key * dk + i]) * row[key * dk + i];
              kk += double(row[kd + key * dk + i]) * row[kd + key * dk + i];
            }
            for (int i = 0; i < dk; ++i) {
              q[t * dk + i] = row[key * dk + i] / std::sqrt(qq + 1e-6) / std::sqrt(double(dk));
              k[t * dk + i] = row[kd + key * dk + i] / std::sqrt(kk + 1e-6);
            }
            for (int j = 0; j < dv; ++j) v[t * dv + j] = row[2 * kd + h * dv + j];
            be[t] = oo::sigmoid(b[t * nv + h]);
            g[t] = double(A[h]) * oo::softplus(double(a[t * nv + h]) + dt[h]);
          }
          oo::delta_rule_recurrent(q.data(), k.data(), v.data(), g.data(), be.data(), T, dk, dv, S.data(), out.data());
          for (int t = 0; t < T; ++t)
            for (int j = 0; j < dv; ++j) ro[(t * nv + h) * dv + j] = static_cast<float>(out[t * dv + j]);
          for (int i = 0; i < dk * dv; ++i) rS[h * dk * dv + i] = static_cast<float>(S[i]);
        }
        EXPECT_TRUE(compare_to_contract(go, ro, nmse_bound(NmseOp::gdn_recurrent))) << "T=" << T << " tiled=" << tiled;
        EXPECT_TRUE(compare_to_contract(gS, rS, nmse_bound(NmseOp::gdn_recurrent))) << "T=" << T << " tiled=" << tiled;
      }
  });
}

// Kimi delta attention's recurrence (gdn.cuh kda_recurrent_run) against the oracle's
// kda_delta_rule_recurrent: the gates from their inputs (the safe gate with bound -5, and the
// softplus form), q and k unit-normed, a decay per state row, T = 1 and 70 tokens from a random
// state, heads of 16 (the tiny fixture's) and 128 (GLM-5.3-Flash's); outputs and final state.
// One KDA head's oracle inputs from the kernels' (kda_recurrent_run's) operands: q, k unit-normed
// (q by 1/sqrt(d)), v, the log decays per channel and beta, in f64.
struct KdaHeadInputs {
  std::vector<double> q, k, v, g, beta;
};
KdaHeadInputs kda_head_inputs(const std::vector<float>& qkv, const std::vector<float>& f, const std::vector<float>& b,
                              const std::vector<float>& dt, float a_log, float bound, int T, int H, int d, int h) {
  const int hd = H * d;
  KdaHeadInputs in{std::vector<double>(T * d), std::vector<double>(T * d), std::vector<double>(T * d),
                   std::vector<double>(T * d), std::vector<double>(T)};
  const double rate = std::exp(double(a_log));
  for (int t = 0; t < T; ++t) {
    const float* row = qkv.data() + t * 3 * hd;
    double qq = 0, kk = 0;
    for (int i = 0; i < d; ++i) {
      qq += double(row[h * d + i]) * row[h * d + i];
      kk += double(row[hd + h * d + i]) * row[hd + h * d + i];
    }
    for (int i = 0; i < d; ++i) {
      in.q[t * d + i] = row[h * d + i] / std::sqrt(qq + 1e-6) / std::sqrt(double(d));
      in.k[t * d + i] = row[hd + h * d + i] / std::sqrt(kk + 1e-6);
      in.v[t * d + i] = row[2 * hd + h * d + i];
      const double x = double(f[t * hd + h * d + i]) + dt[h * d + i];
      in.g[t * d + i] = bound != 0 ? bound * oo::sigmoid(rate * x) : -rate * oo::softplus(x);
    }
    in.beta[t] = oo::sigmoid(b[t * H + h]);
  }
  return in;
}

// The KDA kernels' parameters: T tokens of H heads of d over device operands.
cuda::KdaParams kda_params(const float* qkv, const float* f, const float* b, const float* dt, const float* a_log,
                           float bound, float* state, float* o, int T, int H, int d) {
  return {.qkv = qkv,
          .f = f,
          .b = b,
          .dt_bias = dt,
          .a_log = a_log,
          .bound = bound,
          .state = state,
          .o = o,
          .T = T,
          .H = H,
          .d = d};
}

TEST_F(Kernels, KdaRecurrentMatchesTheOracle) {
  seeded([&] {
    for (int d : {16, 128})
      for (float bound : {-5.0f, 0.0f})
        for (int T : {1, 70}) {
          const int H = 3, hd = H * d;
          auto qkv = rnd(T * 3 * hd), f = rnd(T * hd, -2, 2), b = rnd(T * H, -2, 2), dt = rnd(hd, -1, 1),
               al = rnd(H, -1, 1), S0 = rnd(H * d * d, -0.1f, 0.1f);
          auto dq = up(qkv), df = up(f), db = up(b), ddt = up(dt), dal = up(al), dS = up(S0);
          DeviceBuffer<float> o(e(), T * hd);
          o.fill_bytes(0xFF);
          cuda::kda_recurrent_run(
              kda_params(dq.data(), df.data(), db.data(), ddt.data(), dal.data(), bound, dS.data(), o.data(), T, H, d),
              s());
          e().synchronize();
          const auto go = o.download(), gS = dS.download();
          std::vector<float> ro(T * hd), rS(H * d * d);
          for (int h = 0; h < H; ++h) {
            const KdaHeadInputs in = kda_head_inputs(qkv, f, b, dt, al[h], bound, T, H, d, h);
            std::vector<double> out(T * d), S(S0.begin() + h * d * d, S0.begin() + (h + 1) * d * d);
            oo::kda_delta_rule_recurrent(in.q.data(), in.k.data(), in.v.data(), in.g.data(), in.beta.data(), T, d, d,
                                         S.data(), out.data());
            for (int t = 0; t < T; ++t)
              for (int j = 0; j < d; ++j) ro[t * hd + h * d + j] = static_cast<float>(out[t * d + j]);
            for (int i = 0; i < d * d; ++i) rS[h * d * d + i] = static_cast<float>(S[i]);
          }
          EXPECT_TRUE(compare_to_contract(go, ro, nmse_bound(NmseOp::kda_recurrent)))
              << "d=" << d << " bound=" << bound << " T=" << T;
          EXPECT_TRUE(compare_to_contract(gS, rS, nmse_bound(NmseOp::kda_recurrent)))
              << "d=" << d << " bound=" << bound << " T=" << T;
        }
  });
}

// KDA's decode path (T == 1: GDN's step kernel with the decay per key channel) against the
// multi-token recurrent kernel, bitwise: three one-token calls vs one three-token call from the
// same state. Heads of 8, 16, 128 (step kernels) and 24 (no step kernel: the recurrent kernel),
// both gate forms.
TEST_F(Kernels, KdaDecodeStepsEqualRecurrentBitwise) {
  seeded([&] {
    for (int d : {8, 16, 24, 128})
      for (float bound : {-5.0f, 0.0f}) {
        SCOPED_TRACE(::testing::Message() << "d=" << d << " bound=" << bound);
        const int T = 3, H = 3, hd = H * d;
        auto qkv = rnd(T * 3 * hd), f = rnd(T * hd, -2, 2), b = rnd(T * H, -2, 2), dt = rnd(hd, -1, 1),
             al = rnd(H, -1, 1), S0 = rnd(H * d * d, -0.1f, 0.1f);
        auto dq = up(qkv), df = up(f), db = up(b), ddt = up(dt), dal = up(al), dS1 = up(S0), dS2 = up(S0);
        DeviceBuffer<float> o1(e(), T * hd), o2(e(), T * hd);
        o1.fill_bytes(0xFF);
        o2.fill_bytes(0xFF);
        cuda::kda_recurrent_run(
            kda_params(dq.data(), df.data(), db.data(), ddt.data(), dal.data(), bound, dS1.data(), o1.data(), T, H, d),
            s());
        for (int t = 0; t < T; ++t)
          cuda::kda_recurrent_run(kda_params(dq.data() + t * 3 * hd, df.data() + t * hd, db.data() + t * H, ddt.data(),
                                             dal.data(), bound, dS2.data(), o2.data() + t * hd, 1, H, d),
                                  s());
        e().synchronize();
        EXPECT_THAT(o2.download(), testing::BitIdentical(o1.download())) << "outputs";
        const auto S1 = dS1.download();
        EXPECT_THAT(dS2.download(), testing::BitIdentical(S1)) << "states";
        EXPECT_NE(S1, S0) << "no state moved";
      }
  });
}

// A batched decode step's KDA layer (gdn_conv_run and kda_recurrent_run with their seqs tables):
// three sequences, each with its own state, conv ring and position (two of them wrapping the ring),
// their rows 0..2 of every operand, the conv and the recurrence one launch each, against the same
// two launches per sequence: states, rings, conv outputs and outputs bitwise. Heads of 16 and 128
// (the step kernel) and 24 (the recurrent kernel), both gate forms.
TEST_F(Kernels, KdaStepBatchedEqualsOneLaunchPerSequence) {
  seeded([&] {
    constexpr int K = 4, B = 3, H = 2;
    for (int d : {16, 24, 128})  // 16, 128: GDN's step kernel; 24: the recurrent kernel
      for (float bound : {-5.0f, 0.0f}) {
        SCOPED_TRACE(::testing::Message() << "d=" << d << " bound=" << bound);
        const int hd = H * d, cd = 3 * hd;
        const size_t ns = static_cast<size_t>(H) * d * d;
        auto x = rnd(B * cd), f = rnd(B * hd, -2, 2), b = rnd(B * H, -2, 2), dt = rnd(hd, -1, 1), al = rnd(H, -1, 1);
        auto taps = rnd(static_cast<size_t>(cd) * K, -0.5f, 0.5f);
        auto S0 = rnd(B * ns, -0.1f, 0.1f), ring0 = rnd(static_cast<size_t>(B) * K * cd);
        auto dx = up(x), df = up(f), db = up(b), ddt = up(dt), dal = up(al), dtaps = up(taps);
        auto dpos = up(std::vector<int64_t>{5, 0, 9});
        struct Out {
          std::vector<float> S, o, ring, xc;
        };
        auto run = [&](bool batched) {
          auto dS = up(S0), dring = up(ring0);
          DeviceBuffer<float> o(e(), B * hd), xc(e(), B * cd);
          o.fill_bytes(0xFF);
          xc.fill_bytes(0xFF);
          auto dtable = up(seq_table(dS.data(), ns, dring.data(), K * cd, dpos.data(), B));
          for (int i = 0; i < (batched ? 1 : B); ++i) {
            const int r = batched ? 0 : i;  // the launch's first row
            const cuda::GdnConvParams cp = step_conv(batched, i, dx.data(), dtaps.data(), dring.data(), dpos.data(),
                                                     xc.data(), cd, K, dtable.data(), B);
            cuda::gdn_conv_run(cp, s());
            cuda::KdaParams kp = kda_params(cp.y, df.data() + r * hd, db.data() + r * H, ddt.data(), dal.data(), bound,
                                            batched ? nullptr : dS.data() + i * ns, o.data() + r * hd, 1, H, d);
            kp.seqs = cp.seqs;
            kp.n_seq = cp.n_seq;
            cuda::kda_recurrent_run(kp, s());
          }
          e().synchronize();
          return Out{dS.download(), o.download(), dring.download(), xc.download()};
        };
        const Out ref = run(false), got = run(true);
        EXPECT_THAT(got.S, testing::BitIdentical(ref.S)) << "states";
        EXPECT_THAT(got.o, testing::BitIdentical(ref.o)) << "outputs";
        EXPECT_THAT(got.ring, testing::BitIdentical(ref.ring)) << "conv rings";
        EXPECT_THAT(got.xc, testing::BitIdentical(ref.xc)) << "conv outputs";
        EXPECT_NE(got.S, S0) << "no state moved";
        EXPECT_NE(got.ring, ring0) << "no ring slot written";
      }
  });
}

// A batched step refuses what it cannot take, by name and before any launch: more than one token
// per sequence (KDA's recurrence, the conv, GDN's recurrence).
TEST_F(Kernels, KdaStepBatchedRefusesMultiTokenCalls) {
  using ::testing::HasSubstr;
  using ::testing::ThrowsMessage;
  cuda::GdnSeq one{};
  auto dtable = up(std::vector<cuda::GdnSeq>{one});
  cuda::KdaParams kp;
  kp.T = 2;
  kp.H = 1;
  kp.d = 16;
  kp.seqs = dtable.data();
  kp.n_seq = 1;
  EXPECT_THAT([&] { cuda::kda_recurrent_run(kp, s()); },
              ThrowsMessage<Error>(HasSubstr("kda: a batched step takes one token (T = 2)")));
  cuda::GdnConvParams cp;
  cp.T = 2;
  cp.cd = 8;
  cp.K = 4;
  cp.seqs = dtable.data();
  EXPECT_THAT([&] { cuda::gdn_conv_run(cp, s()); },
              ThrowsMessage<Error>(HasSubstr("gdn conv: a batched step takes one token (T = 2)")));
  cuda::GdnParams gp;
  gp.T = 2;
  gp.nk = gp.nv = 1;
  gp.dk = gp.dv = 16;
  gp.seqs = dtable.data();
  EXPECT_THAT([&] { cuda::gdn_recurrent_run(gp, s()); },
              ThrowsMessage<Error>(HasSubstr("gdn: a batched step takes one token (T = 2)")));
}

// GLM-5's hybrid's pooled indexer keys (mla.cuh mla_kpool_run) against the oracle's pool_window:
// the pools a call's tokens close (tokens at positions 5..41 with pools of 4: pools 1..9; of 16:
// pools 0..1 — the call's first pool partly from earlier positions), each channel's gate softmax
// over the pool's slots weighting its keys; pools the call does not close left untouched.
TEST_F(Kernels, KpoolRowsMatchTheOracle) {
  seeded([&] {
    for (int P : {4, 16})
      for (int hi : {16, 128}) {
        const int64_t pos0 = 5, T = 37, n = pos0 + T;
        auto keys = rnd(n * hi), gates = rnd(n * hi, -3, 3);
        auto dk = up(keys), dg = up(gates);
        auto dpos = up(std::vector<int64_t>{pos0});
        DeviceBuffer<float> rows(e(), n * hi);
        rows.fill_bytes(0xFF);  // NaN: a row the kernel should not write stays NaN
        cuda::mla_kpool_run({.index_k = dk.data(),
                             .index_gate = dg.data(),
                             .rows = rows.data(),
                             .pos0 = dpos.data(),
                             .T = T,
                             .hi = hi,
                             .kpool = P},
                            s());
        e().synchronize();
        const auto g = rows.download();
        std::vector<float> got, want(hi);
        std::vector<float> ref;
        for (int64_t j = 0; j < n / P; ++j) {
          const bool closed_here = (j + 1) * P - 1 >= pos0;
          const float* row = g.data() + j * hi;
          if (!closed_here) {
            EXPECT_TRUE(std::isnan(row[0])) << "pool " << j << " closed before the call was written";
            continue;
          }
          oo::pool_window(keys.data() + j * P * hi, gates.data() + j * P * hi, P, hi, want.data());
          got.insert(got.end(), row, row + hi);
          ref.insert(ref.end(), want.begin(), want.end());
        }
        ASSERT_FALSE(ref.empty());
        EXPECT_TRUE(compare_to_contract(got, ref, nmse_bound(NmseOp::mla_kpool))) << "P=" << P << " hi=" << hi;
      }
  });
}

// The decode path (T == 1: gdn_step_kernel, the state column in registers) against the
// multi-token recurrent kernel, bitwise: three one-token calls vs one three-token call from the
// same state (the same per-column operations in the same order).
TEST_F(Kernels, GdnDecodeStepsEqualRecurrentBitwise) {
  seeded([&] {
    for (auto [dk, dv] : {std::pair{32, 16}, std::pair{128, 128}, std::pair{8, 40}})
      for (bool tiled : {false, true}) {
        const int T = 3, nk = 2, nv = 4;
        const int kd = nk * dk, cd = 2 * kd + nv * dv;
        auto x = rnd(T * cd), b = rnd(T * nv, -2, 2), a = rnd(T * nv, -2, 2), A = rnd(nv, -4, -0.5f),
             dt = rnd(nv, 0, 1);
        auto S0 = rnd(nv * dk * dv, -0.1f, 0.1f);
        auto dx = up(x), db = up(b), da = up(a), dA = up(A), ddt = up(dt), dS1 = up(S0), dS2 = up(S0);
        DeviceBuffer<float> o1(e(), T * nv * dv), o2(e(), T * nv * dv);
        o1.fill_bytes(0xFF);
        o2.fill_bytes(0xFF);
        cuda::GdnParams gp;
        gp.qkv = dx.data();
        gp.b = db.data();
        gp.a = da.data();
        gp.ssm_a = dA.data();
        gp.dt_bias = ddt.data();
        gp.state = dS1.data();
        gp.o = o1.data();
        gp.T = T;
        gp.nk = nk;
        gp.nv = nv;
        gp.dk = dk;
        gp.dv = dv;
        gp.tiled = tiled;
        cuda::gdn_recurrent_run(gp, s());
        for (int t = 0; t < T; ++t) {
          cuda::GdnParams g1 = gp;
          g1.qkv = dx.data() + t * cd;
          g1.b = db.data() + t * nv;
          g1.a = da.data() + t * nv;
          g1.state = dS2.data();
          g1.o = o2.data() + t * nv * dv;
          g1.T = 1;
          cuda::gdn_recurrent_run(g1, s());
        }
        e().synchronize();
        const auto go1 = o1.download(), go2 = o2.download(), gS1 = dS1.download(), gS2 = dS2.download();
        double norm = 0;
        for (float v : go1) norm += std::abs(v);
        ASSERT_GT(norm, 0.0) << "vacuous: zero output";
        EXPECT_TRUE(compare_to_contract(go2, go1, Tolerance::exact()))
            << "dk=" << dk << " dv=" << dv << " tiled=" << tiled;
        EXPECT_TRUE(compare_to_contract(gS2, gS1, Tolerance::exact()))
            << "dk=" << dk << " dv=" << dv << " tiled=" << tiled;
      }
  });
}

// The chunked (WY, 64) GDN prefill against the oracle's f64 delta_rule_chunked on the same conv
// output: outputs and the final state. T = 1, 63, 64, 65, 130, 200: one token, a chunk's edges
// (one short, exact, one over), two chunks and a tail, three and a ragged tail; T = 150 at the
// real head sizes; T = 1100 crosses a segment (1024 tokens: the state leaves one state launch
// and enters the next through memory); d_v = 48 leaves a partial 32-column slice.
TEST_F(Kernels, GdnChunkedMatchesOracleChunkedForm) {
  seeded([&] {
    struct Shape {
      int T, dk, dv;
    };
    for (auto [T, dk, dv] : {Shape{1, 32, 16}, Shape{63, 32, 16}, Shape{64, 32, 16}, Shape{65, 32, 16},
                             Shape{130, 32, 16}, Shape{200, 32, 16}, Shape{150, 128, 128}, Shape{1100, 16, 48}}) {
      SCOPED_TRACE(::testing::Message() << "T=" << T << " dk=" << dk << " dv=" << dv);
      const int nk = 2, nv = 4;
      const int kd = nk * dk, cd = 2 * kd + nv * dv;
      auto y = rnd(T * cd), b = rnd(T * nv, -2, 2), a = rnd(T * nv, -2, 2), A = rnd(nv, -4, -0.5f), dt = rnd(nv, 0, 1);
      auto S0 = rnd(nv * dk * dv, -0.1f, 0.1f);
      auto dy = up(y), db = up(b), da = up(a), dA = up(A), ddt = up(dt), dS = up(S0);
      DeviceBuffer<float> o(e(), T * nv * dv);
      o.fill_bytes(0xFF);
      const int64_t wf = cuda::gdn_chunked_workspace_floats(T, nv, dk, dv);
      DeviceBuffer<float> work(e(), static_cast<size_t>(wf));
      work.fill_bytes(0xFF);  // NaN: a slot entry read before it is written shows
      cuda::GdnParams gp;
      gp.qkv = dy.data();
      gp.b = db.data();
      gp.a = da.data();
      gp.ssm_a = dA.data();
      gp.dt_bias = ddt.data();
      gp.state = dS.data();
      gp.o = o.data();
      gp.T = T;
      gp.nk = nk;
      gp.nv = nv;
      gp.dk = dk;
      gp.dv = dv;
      gp.tiled = false;
      cuda::gdn_chunked_run(gp, work.data(), wf, s());
      e().synchronize();
      auto go = o.download(), gS = dS.download();
      // the bits, for comparing kernel versions run on the same inputs
      std::printf("[gdn-chunked] T=%d dk=%d dv=%d sha256 %s\n", T, dk, dv,
                  testing::logits_stream_sha256(std::vector<std::vector<float>>{go, gS}).c_str());
      std::vector<float> ro(T * nv * dv), rS(nv * dk * dv);
      for (int h = 0; h < nv; ++h) {
        const int key = h / (nv / nk);
        std::vector<double> q(T * dk), k(T * dk), v(T * dv), g(T), be(T), out(T * dv),
            S(S0.begin() + h * dk * dv, S0.begin() + (h + 1) * dk * dv);
        for (int t = 0; t < T; ++t) {
          const float* row = y.data() + t * cd;
          double qq = 0, kk = 0;
          for (int i = 0; i < dk; ++i) {
            qq += double(row[key * dk + i]) * row[key * dk + i];
            kk += double(row[kd + key * dk + i]) * row[kd + key * dk + i];
          }
          for (int i = 0; i < dk; ++i) {
            q[t * dk + i] = row[key * dk + i] / std::sqrt(qq + 1e-6) / std::sqrt(double(dk));
            k[t * dk + i] = row[kd + key * dk + i] / std::sqrt(kk + 1e-6);
          }
          for (int j = 0; j < dv; ++j) v[t * dv + j] = row[2 * kd + h * dv + j];
          be[t] = oo::sigmoid(b[t * nv + h]);
          g[t] = double(A[h]) * oo::softplus(double(a[t * nv + h]) + dt[h]);
        }
        oo::delta_rule_chunked(q.data(), k.data(), v.data(), g.data(), be.data(), T, dk, dv, 64, S.data(), out.data());
        for (int t = 0; t < T; ++t)
          for (int j = 0; j < dv; ++j) ro[(t * nv + h) * dv + j] = static_cast<float>(out[t * dv + j]);
        for (int i = 0; i < dk * dv; ++i) rS[h * dk * dv + i] = static_cast<float>(S[i]);
      }
      EXPECT_TRUE(compare_to_contract(go, ro, nmse_bound(NmseOp::gdn_chunked)))
          << "T=" << T << " dk=" << dk << " dv=" << dv;
      EXPECT_TRUE(compare_to_contract(gS, rS, nmse_bound(NmseOp::gdn_chunked)))
          << "T=" << T << " dk=" << dk << " dv=" << dv;
    }
  });
}

// A workspace smaller than a segment's slots, and a head shape the kernels do not take, are
// refused with the sizes, not run past.
TEST_F(Kernels, GdnChunkedRefusesShortWorkspaceAndOddShapes) {
  cuda::GdnParams gp;
  gp.T = 200; gp.nk = 2; gp.nv = 4; gp.dk = 32; gp.dv = 32;
  const int64_t wf = cuda::gdn_chunked_workspace_floats(gp.T, gp.nv, gp.dk, gp.dv);
  DeviceBuffer<float> work(e(), static_cast<size_t>(wf));
  EXPECT_THAT([&] { cuda::gdn_chunked_run(gp, work.data(), wf - 1, s()); },
              ::testing::ThrowsMessage<Error>(::testing::HasSubstr("workspace of")));
  gp.dk = 30;
  EXPECT_THAT([&] { cuda::gdn_chunked_run(gp, work.data(), wf, s()); },
              ::testing::ThrowsMessage<Error>(::testing::HasSubstr("unsupported")));
}

// KDA's chunked (WY, 64) prefill (gdn.cuh kda_chunked_run) against the oracle's f64
// kda_delta_rule_chunked on the same conv output and gate inputs, and against the GPU's own
// recurrence (kda_recurrent_run: the step form decode runs) on the same inputs: outputs and final
// state. The safe gate (bound -5: over a chunk the decays reach e^-320, where a factored
// e^(-gamma) would overflow) and the softplus form; T = 1, 63, 65, 130 (a chunk's edges, two
// chunks and a tail) at heads of 16, 150 at GLM-5.3-Flash's 128, and 1100 across a segment.
TEST_F(Kernels, KdaChunkedMatchesTheOracleAndTheStep) {
  seeded([&] {
    struct Shape {
      int T, d;
    };
    for (auto [T, d] : {Shape{1, 16}, Shape{63, 16}, Shape{65, 16}, Shape{130, 16}, Shape{150, 128}, Shape{1100, 16}})
      for (float bound : {-5.0f, 0.0f}) {
        SCOPED_TRACE(::testing::Message() << "T=" << T << " d=" << d << " bound=" << bound);
        const int H = 3, hd = H * d;
        auto qkv = rnd(T * 3 * hd), f = rnd(T * hd, -2, 2), b = rnd(T * H, -2, 2), dt = rnd(hd, -1, 1),
             al = rnd(H, -1, 1), S0 = rnd(H * d * d, -0.1f, 0.1f);
        auto dq = up(qkv), df = up(f), db = up(b), ddt = up(dt), dal = up(al), dS = up(S0), dSr = up(S0);
        DeviceBuffer<float> o(e(), T * hd), orec(e(), T * hd);
        o.fill_bytes(0xFF);
        const int64_t wf = cuda::gdn_chunked_workspace_floats(T, H, d, d);
        DeviceBuffer<float> work(e(), static_cast<size_t>(wf));
        work.fill_bytes(0xFF);  // NaN: a slot entry read before it is written shows
        cuda::KdaParams kp =
            kda_params(dq.data(), df.data(), db.data(), ddt.data(), dal.data(), bound, dS.data(), o.data(), T, H, d);
        cuda::kda_chunked_run(kp, work.data(), wf, s());
        kp.state = dSr.data();
        kp.o = orec.data();
        cuda::kda_recurrent_run(kp, s());
        e().synchronize();
        const auto go = o.download(), gS = dS.download(), gor = orec.download(), gSr = dSr.download();
        std::vector<float> ro(T * hd), rS(H * d * d);
        for (int h = 0; h < H; ++h) {
          const KdaHeadInputs in = kda_head_inputs(qkv, f, b, dt, al[h], bound, T, H, d, h);
          std::vector<double> out(T * d), S(S0.begin() + h * d * d, S0.begin() + (h + 1) * d * d);
          oo::kda_delta_rule_chunked(in.q.data(), in.k.data(), in.v.data(), in.g.data(), in.beta.data(), T, d, d, 64,
                                     S.data(), out.data());
          for (int t = 0; t < T; ++t)
            for (int j = 0; j < d; ++j) ro[t * hd + h * d + j] = static_cast<float>(out[t * d + j]);
          for (int i = 0; i < d * d; ++i) rS[h * d * d + i] = static_cast<float>(S[i]);
        }
        std::printf("[kda-chunked] T=%d d=%d bound=%g nmse vs oracle %.3e / %.3e, vs the step %.3e / %.3e\n", T, d,
                    bound, nmse(go, ro), nmse(gS, rS), nmse(go, gor), nmse(gS, gSr));
        const Tolerance tol = nmse_bound(NmseOp::kda_chunked);
        EXPECT_TRUE(compare_to_contract(go, ro, tol)) << "outputs vs the oracle's chunked form";
        EXPECT_TRUE(compare_to_contract(gS, rS, tol)) << "state vs the oracle's chunked form";
        EXPECT_TRUE(compare_to_contract(go, gor, tol)) << "outputs vs the recurrent step";
        EXPECT_TRUE(compare_to_contract(gS, gSr, tol)) << "state vs the recurrent step";
      }
  });
}

// Routing: ids exactly the oracle's top-k (distinct logits), weights renormalised; combine adds
// Σ w y + sigmoid(sg) y_shared onto the residual.
TEST_F(Kernels, MoeRouteAndCombineMatchOracle) {
  seeded([&] {
    const int T = 6, E = 256, k = 8, D = 64;
    auto logits = rnd(T * E, -4, 4);
    auto dl = up(logits);
    DeviceBuffer<int32_t> ids(e(), T * k);
    DeviceBuffer<float> w(e(), T * k);
    cuda::MoeRouteParams rp;
    rp.logits = dl.data();
    rp.ids = ids.data();
    rp.weights = w.data();
    rp.T = T;
    rp.E = E;
    rp.k = k;
    rp.renorm = true;
    cuda::moe_route_run(rp, s());
    auto y = rnd(T * k * D), ys = rnd(T * D), sg = rnd(T, -2, 2), x = rnd(T * D);
    auto dy = up(y), dys = up(ys), dsg = up(sg), dx = up(x);
    cuda::MoeCombineParams cp;
    cp.y = dy.data();
    cp.weights = w.data();
    cp.y_shared = dys.data();
    cp.sg = dsg.data();
    cp.x = dx.data();
    cp.T = T;
    cp.D = D;
    cp.k = k;
    cuda::moe_combine_run(cp, s());
    e().synchronize();
    auto gid = ids.download();
    auto gw = w.download(), gx = dx.download();
    std::vector<float> rw(T * k), rx(T * D);
    for (int t = 0; t < T; ++t) {
      auto sel = oo::route({logits.data() + t * E, size_t(E)}, k, true);
      for (int j = 0; j < k; ++j) {
        EXPECT_EQ(gid[t * k + j], sel[j].first) << "token " << t << " slot " << j;
        rw[t * k + j] = static_cast<float>(sel[j].second);
      }
      for (int d = 0; d < D; ++d) {
        double acc = 0;
        for (int j = 0; j < k; ++j) acc += sel[j].second * y[(t * k + j) * D + d];
        acc += oo::sigmoid(sg[t]) * ys[t * D + d];
        rx[t * D + d] = static_cast<float>(x[t * D + d] + acc);
      }
    }
    EXPECT_TRUE(compare_to_contract(gw, rw, nmse_bound(NmseOp::moe)));
    EXPECT_TRUE(compare_to_contract(gx, rx, nmse_bound(NmseOp::moe)));
  });
}

// Exact ties in the router logits, for every routing function the models use (softmax top-k,
// renormalised for Qwen3.5-MoE / Qwen3-Next's norm_topk, and not): the selection is the
// oracle's, ties to the lowest expert index, whether the tied experts share a lane (e, e + 32,
// ...) or not, fill the top-k or straddle its last place; +0 and -0 tie. Tied experts get
// bit-equal weights. E and k: the tiny fixtures', Qwen3.5-MoE's (256, 8) and Qwen3-Next's
// (512, 10).
TEST_F(Kernels, MoeRouteTiesToLowestExpert) {
  struct Shape {
    int E, k;
  };
  seeded([&] {
    for (auto [E, k] : {Shape{8, 2}, Shape{64, 8}, Shape{256, 8}, Shape{512, 10}})
      for (bool renorm : {true, false}) {
        SCOPED_TRACE(::testing::Message() << "E=" << E << " k=" << k << " renorm=" << renorm);
        constexpr int T = 5;
        std::vector<float> logits = rnd(static_cast<size_t>(T) * E, -4, -1);
        std::vector<std::vector<int>> tied(T);  // per row: the experts holding the tied value
        const auto tie = [&](int t, float v, std::initializer_list<int> es) {
          for (int ex : es) {
            const int x = ((ex % E) + E) % E;
            if (std::find(tied[t].begin(), tied[t].end(), x) != tied[t].end()) continue;
            logits[static_cast<size_t>(t) * E + x] = v;
            tied[t].push_back(x);
          }
        };
        // 0: every expert tied
        for (int x = 0; x < E; ++x) logits[x] = 0.5f, tied[0].push_back(x);
        // 1: k - 1 clear winners, then a tied group straddling the last place (in one lane and across)
        for (int j = 0; j < k - 1; ++j) logits[E + (E - 1 - 3 * j)] = 3.0f - 0.1f * j;
        tie(1, 1.0f, {E - 2, 1, 33, 65, E / 2, 4});
        // 2: the whole top-k tied, spread over lanes (selection order = index order)
        tie(2, 2.0f, {E - 1, 0, 32, 31, 63, 95, 127, 7, 9, 200, 300, 511});
        // 3: +0 and -0 are equal
        logits[3 * E + 5] = -0.0f;
        logits[3 * E + 2] = 0.0f;
        tied[3] = {2, 5};
        // 4: no constructed tie (the random draw)
        cuda::MoeRouteParams rp;
        rp.E = E;
        rp.k = k;
        rp.renorm = renorm;
        const auto [gid, gw] = route_on_device(logits, T, rp);
        std::vector<float> rw(T * k);
        for (int t = 0; t < T; ++t) {
          const auto sel = oo::route({logits.data() + t * E, size_t(E)}, k, renorm);
          for (int j = 0; j < k; ++j) {
            EXPECT_EQ(gid[t * k + j], sel[j].first) << "row " << t << " slot " << j;
            rw[t * k + j] = static_cast<float>(sel[j].second);
          }
          // tied experts that were both selected: the same weight bits
          for (int j = 0; j < k; ++j)
            for (int j2 = j + 1; j2 < k; ++j2) {
              const bool both = std::count(tied[t].begin(), tied[t].end(), gid[t * k + j]) &&
                                std::count(tied[t].begin(), tied[t].end(), gid[t * k + j2]);
              if (both) {
                EXPECT_THAT(std::vector<float>{gw[t * k + j]},
                            testing::BitIdentical(std::vector<float>{gw[t * k + j2]}))
                    << "row " << t << ": tied experts " << gid[t * k + j] << " and " << gid[t * k + j2];
              }
            }
        }
        // non-vacuity: row 1's last place went to the tied group's lowest member
        EXPECT_EQ(gid[1 * k + k - 1], *std::min_element(tied[1].begin(), tied[1].end()));
        EXPECT_TRUE(compare_to_contract(gw, rw, nmse_bound(NmseOp::moe)));
      }
  });
}

// Sigmoid-grouped gating (GLM-5 / DeepSeek-V3 "noaux_tc"): the ids are exactly the oracle's
// route_grouped (distinct values), weights within the MoE contract; exact ties go to the lowest
// group and the lowest expert like the oracle's, and tied selected experts get bit-equal weights.
// Shapes: GLM-5's (256 experts in 1 group, top-8), DeepSeek-V3's (256 in 8 groups, 4 chosen),
// the tiny fixture's (8 in 4 groups of 2, 2 chosen) and 64 groups of 2 (group masks past 32 lanes).
TEST_F(Kernels, MoeRouteGroupedMatchesOracleAndTiesToLowest) {
  struct Shape {
    int E, k, n_group, topk_group;
  };
  seeded([&] {
    for (auto [E, k, G, TG] : {Shape{256, 8, 1, 1}, Shape{256, 8, 8, 4}, Shape{8, 2, 4, 2}, Shape{128, 8, 64, 10}})
      for (bool renorm : {true, false}) {
        SCOPED_TRACE(::testing::Message()
                     << "E=" << E << " k=" << k << " groups " << TG << "/" << G << " renorm=" << renorm);
        constexpr int T = 5;
        const int per = E / G;
        // Rows 0 and 4 random. Under the random bias, rows 1-3 are distinct values too; under the
        // flat bias they are ties: row 1 every choice (so every group) tied, row 2 a tie
        // straddling the last place (within and across groups), row 3 +0 against -0.
        std::vector<float> logits = rnd(static_cast<size_t>(T) * E, -4, 4), bias = rnd(E, -0.2f, 0.2f);
        const std::vector<float> flat_bias(E, 0.05f);
        for (int x = 0; x < E; ++x) logits[E + x] = 0.25f;
        // row 2: k-1 clear winners in group 0, then expert 1, per-1 (group 0) and per (group 1)
        for (int x = 0; x < E; ++x) logits[2 * E + x] = -3.0f;
        for (int j = 0; j < k - 1 && j + 2 < per; ++j) logits[2 * E + 2 + j] = 3.0f - 0.1f * j;
        logits[2 * E + 1] = 1.0f;
        logits[2 * E + per - 1] = 1.0f;
        if (G > 1) logits[2 * E + per] = 1.0f;
        logits[3 * E + 1] = -0.0f;
        logits[3 * E + 0] = 0.0f;
        for (const auto& b : {bias, flat_bias}) {
          cuda::MoeRouteParams rp;
          rp.E = E;
          rp.k = k;
          rp.renorm = renorm;
          rp.n_group = G;
          rp.topk_group = TG;
          rp.scale = 2.5f;
          const auto [gid, gw] = route_on_device(logits, T, rp, b);
          std::vector<float> rw(T * k);
          for (int t = 0; t < T; ++t) {
            const auto sel = oo::route_grouped({logits.data() + t * E, size_t(E)}, b, k, G, TG, renorm, 2.5);
            for (int j = 0; j < k; ++j) {
              EXPECT_EQ(gid[t * k + j], sel[j].first) << "row " << t << " slot " << j;
              rw[t * k + j] = static_cast<float>(sel[j].second);
            }
          }
          if (b == flat_bias) {
            // non-vacuity: row 1 takes the lowest experts of the lowest groups, in index order,
            // and its tied experts carry bit-equal weights
            for (int j = 0; j < k; ++j) EXPECT_EQ(gid[k + j], j) << "flat row slot " << j;
            for (int j = 1; j < k; ++j)
              EXPECT_THAT(std::vector<float>{gw[k + j]}, testing::BitIdentical(std::vector<float>{gw[k]}));
          }
          EXPECT_TRUE(compare_to_contract(gw, rw, nmse_bound(NmseOp::moe)));
        }
      }
  });
}

// The DSA indexer (GLM-5): scores against the oracle's f64 formula, and the selection exactly
// the oracle's select_top on the device's OWN scores (the float contract and the discrete choice
// checked apart). Shapes: the tiny fixture's (8 heads of 16, top 16), GLM-5's (32 of 128, top
// 2048) at a 3000-token context and at 70000 (radix select over many digits), a query window
// starting at 0 (positions with fewer candidates than topk keep them all). Ties: duplicated key
// rows give bit-equal scores, zero keys give exact zeros; a constructed row puts the cut inside
// a run of zeros, which must go to the lowest positions.
TEST_F(Kernels, DsaIndexerSelectsTheOraclesTopk) {
  struct Selected {
    std::vector<float> scores;  // [T, pos0 + T]
    std::vector<int32_t> sel, n_sel;
  };
  // dsa_score_run then dsa_select_run; outputs poisoned first.
  auto select_on_device = [&](const std::vector<float>& q, const std::vector<float>& k, const std::vector<float>& w,
                              int64_t T, int64_t pos0, int nh, int hd, float qk_scale, int topk) {
    const int64_t n = pos0 + T;
    auto dq = up(q), dk = up(k), dw = up(w);
    DeviceBuffer<float> scores(e(), static_cast<size_t>(T * n));
    DeviceBuffer<int32_t> sel(e(), static_cast<size_t>(T * topk)), nsel(e(), static_cast<size_t>(T));
    scores.fill_bytes(0xFF);
    sel.fill_bytes(0xFF);
    nsel.fill_bytes(0xFF);
    cuda::DsaScoreParams sp;
    sp.q = dq.data();
    sp.w = dw.data();
    sp.k = dk.data();
    sp.scores = scores.data();
    sp.T = T;
    sp.pos0 = pos0;
    sp.ld = n;
    sp.n_head = nh;
    sp.head_dim = hd;
    sp.qk_scale = qk_scale;
    cuda::dsa_score_run(sp, s());
    cuda::DsaSelectParams lp;
    lp.scores = scores.data();
    lp.sel = sel.data();
    lp.n_sel = nsel.data();
    lp.T = T;
    lp.pos0 = pos0;
    lp.ld = n;
    lp.topk = topk;
    cuda::dsa_select_run(lp, s());
    e().synchronize();
    return Selected{scores.download(), sel.download(), nsel.download()};
  };
  struct Shape {
    int nh, hd, topk;
    int64_t pos0, T;
  };
  seeded([&] {
    for (auto [nh, hd, topk, pos0, T] : {Shape{8, 16, 16, 0, 40}, Shape{32, 128, 2048, 3000, 3},
                                         Shape{32, 128, 64, 70000, 1}, Shape{4, 16, 5, 20, 6}}) {
      SCOPED_TRACE(::testing::Message() << nh << " heads of " << hd << ", top " << topk << ", positions " << pos0 << "+"
                                        << T);
      const int64_t n = pos0 + T;
      auto q = rnd(static_cast<size_t>(T * nh * hd)), k = rnd(static_cast<size_t>(n * hd)),
           w = rnd(static_cast<size_t>(T * nh));
      for (int64_t r = 1; r < n; r += 3)  // every third key row repeats the one before it
        std::copy(k.begin() + (r - 1) * hd, k.begin() + r * hd, k.begin() + r * hd);
      for (int64_t r = 5; r < n; r += 11) std::fill(k.begin() + r * hd, k.begin() + (r + 1) * hd, 0.0f);
      const float qk_scale = 1.0f / std::sqrt(static_cast<float>(hd));
      const Selected g = select_on_device(q, k, w, T, pos0, nh, hd, qk_scale, topk);
      std::vector<float> got, want;
      for (int64_t t = 0; t < T; ++t) {
        const int64_t m = pos0 + t + 1;
        std::vector<double> own(static_cast<size_t>(m));
        for (int64_t x = 0; x < m; ++x) {
          double ref = 0;
          for (int h = 0; h < nh; ++h) {
            const double d = oo::dot(q.data() + (t * nh + h) * hd, k.data() + x * hd, hd) * qk_scale;
            ref += w[t * nh + h] * std::max(d, 0.0);
          }
          got.push_back(g.scores[t * n + x]);
          want.push_back(static_cast<float>(ref));
          own[x] = g.scores[t * n + x];
        }
        const auto expect = oo::select_top(own, topk);
        ASSERT_EQ(g.n_sel[t], static_cast<int32_t>(expect.size())) << "query " << t;
        for (size_t j = 0; j < expect.size(); ++j)
          ASSERT_EQ(g.sel[t * topk + j], expect[j]) << "query " << t << " slot " << j;
        for (int64_t j = static_cast<int64_t>(expect.size()); j < topk; ++j) EXPECT_EQ(g.sel[t * topk + j], -1);
      }
      EXPECT_TRUE(compare_to_contract(got, want, nmse_bound(NmseOp::dsa_score)));
    }
    // The cut inside a run of exact zeros: 5 keys along head 0's query score > 0, 95 zero keys
    // score 0; the top 10 are the 5 and the 5 lowest zero positions.
    const int nh = 4, hd = 16;
    const int64_t n = 100;
    auto q = rnd(static_cast<size_t>(nh * hd));
    std::vector<float> k(static_cast<size_t>(n * hd), 0.0f);
    for (int64_t r : {7, 30, 31, 64, 99})
      for (int i = 0; i < hd; ++i) k[r * hd + i] = q[i];  // q_0 . k = |q_0|^2 > 0
    const Selected g = select_on_device(q, k, std::vector<float>(nh, 1.0f), 1, n - 1, nh, hd, 0.25f, 10);
    EXPECT_THAT(g.sel, ::testing::ElementsAre(0, 1, 2, 3, 4, 7, 30, 31, 64, 99));
  });
}

// Attention over the indexer's selection (GLM-5 MLA): against the f64 softmax over exactly the
// selected positions, in both MLA forms: expanded (every head its own key/value, the tiny
// fixture's 4 heads of [16 nope | 8 rope] keys and 16-wide values) and absorbed (one latent
// key/value shared by 16 heads: GLM-5's 512 + 64 wide keys, 512-wide values), top 2048 over a
// 3000-token context, grouped heads (2 and 4 per kv head), and rows with fewer positions than
// topk; each by the one-block-per-head kernel and by the split form (groups of 1, 8, 2 and 4
// heads; 16, 3 and 1 chunks, the last one partial). Unselected cache rows hold NaN, and so does
// the split form's workspace before the call: reading either would show.
TEST_F(Kernels, SparseAttentionMatchesF64SoftmaxOverTheSelection) {
  struct Shape {
    int H, KVH, dk, dv, topk;
    int64_t ctx, T;
  };
  seeded([&] {
    for (auto [H, KVH, dk, dv, topk, ctx, T] : {Shape{4, 4, 24, 16, 16, 40, 5}, Shape{16, 1, 576, 512, 2048, 3000, 2},
                                                Shape{4, 2, 32, 8, 7, 6, 3}, Shape{12, 3, 40, 24, 300, 500, 2}})
      for (bool split : {false, true}) {
        SCOPED_TRACE(::testing::Message() << H << " heads over " << KVH << ", dk " << dk << ", dv " << dv << ", top "
                                          << topk << ", context " << ctx << (split ? ", split" : ""));
        auto q = rnd(static_cast<size_t>(T * H * dk)), kc = rnd(static_cast<size_t>(ctx * KVH * dk)),
             vc = rnd(static_cast<size_t>(ctx * KVH * dv));
        auto [rows, sel, nsel, used] = random_selections(T, topk, ctx);
        for (int64_t x = 0; x < ctx; ++x)
          if (!used[x]) {
            std::fill(kc.begin() + x * KVH * dk, kc.begin() + (x + 1) * KVH * dk, NAN);
            std::fill(vc.begin() + x * KVH * dv, vc.begin() + (x + 1) * KVH * dv, NAN);
          }
        const float scale = 1.0f / std::sqrt(static_cast<float>(dk));
        auto dq = up(q), dk_ = up(kc), dv_ = up(vc);
        auto dsel = up(sel), dn = up(nsel);
        DeviceBuffer<float> out(e(), static_cast<size_t>(T * H * dv));
        out.fill_bytes(0xFF);
        cuda::SparseAttnParams ap;
        ap.q = dq.data();
        ap.k_cache = dk_.data();
        ap.v_cache = dv_.data();
        ap.sel = dsel.data();
        ap.n_sel = dn.data();
        ap.out = out.data();
        ap.T = T;
        ap.topk = topk;
        ap.H = H;
        ap.KVH = KVH;
        ap.dk = dk;
        ap.dv = dv;
        ap.scale = scale;
        // a chunk the combine reads but nothing wrote shows as NaN
        auto work = poisoned<float>(static_cast<size_t>(cuda::sparse_attention_split_floats(T, H, topk, dv)));
        if (split) {
          ap.split_work = work.data();
          ap.split_work_floats = static_cast<int64_t>(work.size());
        }
        cuda::sparse_attention_run(ap, s());
        e().synchronize();
        const auto got = out.download();
        std::vector<float> want(got.size());
        for (int64_t t = 0; t < T; ++t)
          for (int h = 0; h < H; ++h) {
            const int kvh = h / (H / KVH);
            const int n = nsel[t];
            std::vector<double> p(static_cast<size_t>(n));
            double mx = -INFINITY, sum = 0;
            for (int j = 0; j < n; ++j) {
              const int64_t x = sel[t * topk + j];
              p[j] = oo::dot(q.data() + (t * H + h) * dk, kc.data() + (x * KVH + kvh) * dk, dk) * scale;
              mx = std::max(mx, p[j]);
            }
            for (double& v : p) sum += (v = std::exp(v - mx));
            for (int d = 0; d < dv; ++d) {
              double acc = 0;
              for (int j = 0; j < n; ++j) acc += p[j] / sum * vc[(sel[t * topk + j] * KVH + kvh) * dv + d];
              want[(t * H + h) * dv + d] = static_cast<float>(acc);
            }
          }
        for (float v : got) ASSERT_TRUE(std::isfinite(v)) << "an unselected (NaN) cache row was read";
        EXPECT_TRUE(compare_to_contract(got, want, nmse_bound(NmseOp::sparse_attention)));
        // a count past topk (a corrupt selection) gives NaN for that query, not a read past its list
        nsel[0] = topk + 1;
        dn.upload(nsel);
        cuda::sparse_attention_run(ap, s());
        e().synchronize();
        const auto bad = out.download();
        EXPECT_TRUE(std::isnan(bad[0]) && std::isnan(bad[static_cast<size_t>(H * dv) - 1]));
        EXPECT_TRUE(std::isfinite(bad[static_cast<size_t>(T * H * dv) - 1]));
      }
  });
}

// MLA's absorbed latent form (mla_decode = latent): mla_absorb_q_run, the sparse attention over
// the latent rows (its split form; one kv head, values the rows' first kv_rank values, row stride
// kv_rank + n_rot) and mla_absorb_o_run against the oracle's contract (ops::mla_attend_latent), with wkv_b
// in every storage type the model uploads (planar Q8_0, NVFP4 with a tensor scale). Shapes: the
// tiny fixture's heads (4 heads of [16 nope | 8 rope], 16-wide values) over a latent of 64, one
// NVFP4 block, and GLM-5's (heads of [192 | 64], values 256, latent 512) at 16 heads, top 2048
// over 3000 positions. On the small shape the contract is itself checked against the expanded
// form in f64 (k_nope_h = W_UK_h c, v_h = W_UV_h c, attention over [k_nope_h | kr]): the
// absorption is the same math, the difference the contract's two f32 roundings (qa, ol).
TEST_F(Kernels, MlaLatentMatchesTheOracleAndTheExpandedForm) {
  struct Shape {
    int H, dn, dr, dv, kvr, topk;
    int64_t ctx, T;
  };
  seeded([&] {
    for (auto [H, dn, dr, dv, kvr, topk, ctx, T] :
         {Shape{4, 16, 8, 16, 64, 16, 40, 3}, Shape{16, 192, 64, 256, 512, 2048, 3000, 2}})
      for (DType type : {DType::F32, DType::BF16, DType::Q8_0, DType::NVFP4}) {
        SCOPED_TRACE(::testing::Message() << H << " heads of [" << dn << " | " << dr << "], dv " << dv << ", latent "
                                          << kvr << ", " << dtype_name(type));
        const int64_t R = int64_t{H} * (dn + dv), lw = kvr + dr, hd = dn + dr;
        // wkv_b through the storage type; the oracle reads the values it decodes to (times the
        // NVFP4 tensor scale), the device the stored blocks
        std::vector<float> wf = rnd(static_cast<size_t>(R * kvr), -0.1f, 0.1f);
        const int64_t rb = row_bytes(type, kvr);
        std::vector<uint8_t> wb(static_cast<size_t>(R * rb + 16));
        float tscale = 1.0f;
        if (type == DType::NVFP4)
          tscale = quantize_nvfp4_tensor(wf.data(), wb.data(), R, kvr);
        else
          for (int64_t r = 0; r < R; ++r) quantize_row(type, wf.data() + r * kvr, wb.data() + r * rb, kvr);
        Matrix w(R, kvr);
        for (int64_t r = 0; r < R; ++r) {
          dequantize_row(type, wb.data() + r * rb, w.row(r), kvr);
          for (int64_t j = 0; j < kvr; ++j) w.at(r, j) *= tscale;
        }
        auto dwb = up(wb);
        const int64_t stride = cuda::planar_row_stride(type, kvr);
        DeviceBuffer<uint8_t> dplanar(e(), static_cast<size_t>(stride * R + 16));
        cuda::to_planar(type, dwb.data(), dplanar.data(), R, kvr, stride, s());
        auto dscale = up(std::vector<float>{tscale});
        // queries, latent rows, selections (row 0 fewer than topk); unselected rows NaN
        auto q = rnd(static_cast<size_t>(T * H * hd)), lat = rnd(static_cast<size_t>(ctx * lw));
        const auto [selection, sel, nsel, used] = random_selections(T, topk, ctx);
        for (int64_t x = 0; x < ctx; ++x)
          if (!used[x]) std::fill(lat.begin() + x * lw, lat.begin() + (x + 1) * lw, NAN);
        auto dq = up(q), dlat = up(lat);
        auto dsel = up(sel), dn_ = up(nsel);
        auto ql = poisoned<float>(static_cast<size_t>(T * H * lw)),
             ol = poisoned<float>(static_cast<size_t>(T * H * kvr)),
             o = poisoned<float>(static_cast<size_t>(T * H * dv));
        cuda::MlaAbsorbParams ab{.wkv_b = {.type = type,
                                           .rows = R,
                                           .cols = kvr,
                                           .row_bytes = stride,
                                           .slab_rows = R,
                                           .data = dplanar.data(),
                                           .slab_scale = dscale.data()},
                                 .q = dq.data(),
                                 .ql = ql.data(),
                                 .ol = ol.data(),
                                 .o = o.data(),
                                 .T = T,
                                 .H = H,
                                 .dn = dn,
                                 .n_rot = dr,
                                 .dv = dv,
                                 .kv_rank = kvr};
        cuda::mla_absorb_q_run(ab, s());
        cuda::SparseAttnParams ap;
        ap.q = ql.data();
        ap.k_cache = ap.v_cache = dlat.data();
        ap.sel = dsel.data();
        ap.n_sel = dn_.data();
        ap.out = ol.data();
        ap.T = T;
        ap.topk = topk;
        ap.H = H;
        ap.KVH = 1;
        ap.dk = static_cast<int>(lw);
        ap.dv = kvr;
        ap.ld_k = ap.ld_v = lw;
        ap.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(hd)));
        auto split = poisoned<float>(static_cast<size_t>(cuda::sparse_attention_split_floats(T, H, topk, kvr)));
        ap.split_work = split.data();  // the split form, as the model runs it
        ap.split_work_floats = static_cast<int64_t>(split.size());
        cuda::sparse_attention_run(ap, s());
        cuda::mla_absorb_o_run(ab, s());
        e().synchronize();
        const auto got = o.download();
        std::vector<float> want(got.size());
        oo::mla_attend_latent(w, H, dn, dr, dv, q.data(), T, lat.data(), selection, want.data(), 1);
        for (float v : got) ASSERT_TRUE(std::isfinite(v)) << "an unselected (NaN) latent row was read";
        EXPECT_TRUE(compare_to_contract(got, want, nmse_bound(NmseOp::mla_latent)));
        std::printf("[mla_latent] %d heads, latent %d, %s: nmse %.3g vs the contract\n", H, kvr,
                    std::string(dtype_name(type)).c_str(), nmse(got, want));  // the measurement behind the bound
        // the contract vs the expanded form in f64: the same math up to its two f32 roundings
        // (on the small shape: the expanded sums cost heads x positions x (dn + dv) x kv_rank)
        std::vector<float> expanded(got.size());
        for (int64_t t = 0; t < T && ctx <= 64; ++t)
          for (int h = 0; h < H; ++h) {
            const std::vector<int32_t>& st = selection[static_cast<size_t>(t)];
            const float* qh = q.data() + (t * H + h) * hd;
            std::vector<double> p(st.size()), acc(static_cast<size_t>(dv), 0.0);
            double mx = -INFINITY, sum = 0;
            for (size_t j = 0; j < st.size(); ++j) {
              const float* c = lat.data() + st[j] * lw;
              double sc = oo::dot(qh + dn, c + kvr, dr);
              for (int i = 0; i < dn; ++i) sc += static_cast<double>(qh[i]) * oo::dot(w.row(h * (dn + dv) + i), c, kvr);
              p[j] = sc / std::sqrt(static_cast<double>(hd));
              mx = std::max(mx, p[j]);
            }
            for (double& v : p) sum += (v = std::exp(v - mx));
            for (size_t j = 0; j < st.size(); ++j)
              for (int d = 0; d < dv; ++d)
                acc[d] += p[j] / sum * oo::dot(w.row(h * (dn + dv) + dn + d), lat.data() + st[j] * lw, kvr);
            for (int d = 0; d < dv; ++d) expanded[(t * H + h) * dv + d] = static_cast<float>(acc[d]);
          }
        if (ctx <= 64) { EXPECT_TRUE(compare_to_contract(want, expanded, nmse_bound(NmseOp::mla_latent))); }
        // the canary's defect (the next head's W_UK) moves the result far outside the bound
        ab.head_shift = 1;
        cuda::mla_absorb_q_run(ab, s());
        cuda::sparse_attention_run(ap, s());
        cuda::mla_absorb_o_run(ab, s());
        e().synchronize();
        EXPECT_FALSE(compare_to_contract(o.download(), want, nmse_bound(NmseOp::mla_latent)))
            << "a wrong-head absorption passed the contract";
      }
  });
}

// The batched step's sampler (select_rows_run) at exact ties in the logits: greedy rows take the
// lowest tied index wherever the tie sits (neighbours, one thread's stride apart, first and last);
// Gumbel rows over all-equal or top-tied logits draw the host contract's token (sample_token); a
// row without a spec gives -1; every row's position advances by one.
TEST_F(Kernels, SelectRowsTiesMatchHostSampling) {
  seeded([&] {
    for (int64_t n : {int64_t{1000}, int64_t{151936}}) {
      SCOPED_TRACE(::testing::Message() << "n=" << n);
      struct Row {
        std::vector<float> l;
        std::optional<SampleSpec> spec;
      };
      std::vector<Row> rows;
      const auto greedy = [&](std::initializer_list<int64_t> at) {
        Row r{rnd(static_cast<size_t>(n), -4, 1), SampleSpec{}};
        for (int64_t i : at) r.l[static_cast<size_t>(i)] = 7.0f;
        rows.push_back(std::move(r));
      };
      greedy({n - 1, n / 3});
      greedy({8, 7});
      greedy(
          {5, (5 + 1024) % n, (5 + 2048) % n});  // one thread's stride apart (argmax.cu: 1024 threads) where n allows
      greedy({0, n - 1});
      rows.push_back({std::vector<float>(static_cast<size_t>(n), 0.25f), SampleSpec{}});  // all tied: 0
      rows.push_back({std::vector<float>(static_cast<size_t>(n), 0.25f), SampleSpec{1.0f, 42, 7}});
      {
        Row r{rnd(static_cast<size_t>(n), -4, 1), SampleSpec{0.7f, 9, 3}};
        for (int64_t i : {int64_t{3}, n / 2, n - 2}) r.l[static_cast<size_t>(i)] = 9.0f;
        rows.push_back(std::move(r));
      }
      rows.push_back({rnd(static_cast<size_t>(n)), std::nullopt});
      const int R = static_cast<int>(rows.size());
      std::vector<float> x;
      for (const Row& r : rows) x.insert(x.end(), r.l.begin(), r.l.end());
      auto dx = up(x);
      DeviceBuffer<int64_t> pos(e(), static_cast<size_t>(R));
      pos.upload(std::vector<int64_t>(static_cast<size_t>(R), 10));
      std::vector<cuda::RowSelect> jobs(static_cast<size_t>(R));
      for (int r = 0; r < R; ++r) {
        auto& j = jobs[static_cast<size_t>(r)];
        j.pos = pos.data() + r;
        if (const auto& sp = rows[static_cast<size_t>(r)].spec) {
          j.has_spec = 1;
          j.temperature = sp->temperature;
          j.seed = sp->seed;
          j.counter = sp->counter;
        }
      }
      DeviceBuffer<cuda::RowSelect> djobs(e(), jobs.size());
      djobs.upload(jobs);
      DeviceBuffer<int32_t> out(e(), static_cast<size_t>(R));
      out.fill_bytes(0xFF);
      cuda::select_rows_run(dx.data(), n, djobs.data(), R, out.data(), s());
      e().synchronize();
      const auto got = out.download();
      for (int r = 0; r < R; ++r) {
        const Row& row = rows[static_cast<size_t>(r)];
        const int32_t want = row.spec ? sample_token(row.l, *row.spec) : -1;
        EXPECT_EQ(got[static_cast<size_t>(r)], want) << "row " << r;
      }
      // the constructed ties were ties: the lowest index won
      EXPECT_EQ(got[0], n / 3);
      EXPECT_EQ(got[1], 7);
      EXPECT_EQ(got[2], 5);
      EXPECT_EQ(got[3], 0);
      EXPECT_EQ(got[4], 0);
      EXPECT_THAT(pos.download(), ::testing::Each(11));
    }
  });
}

// Greedy ties go to the lowest index (oracle::top_k's rule), wherever the tie sits; a non-finite
// logit makes the token -1 (argmax.cuh).
TEST_F(Kernels, ArgmaxTiesToLowestIndex) {
  for (int64_t n : {1, 1000, 151936}) {
    std::vector<float> l(n, -1.0f);
    const int64_t a = n / 3, b = n - 1;
    l[b] = 5.0f;
    l[a] = 5.0f;
    auto dl = up(l);
    DeviceBuffer<int32_t> out(e(), 1);
    cuda::argmax_run(dl.data(), n, out.data(), s());
    EXPECT_EQ(out.download()[0], std::min(a, b)) << "n=" << n;
    // a NaN or an infinity anywhere, winning or not: no token (-1)
    for (float poison : {std::nanf(""), -INFINITY}) {
      l[n / 2] = poison;
      auto dp = up(l);
      cuda::argmax_run(dp.data(), n, out.data(), s());
      EXPECT_EQ(out.download()[0], -1) << "n=" << n << " poison " << poison;
      l[n / 2] = -1.0f;
    }
  }
}

}  // namespace
}  // namespace memra::ops
