// oracle::Model's hyper-connected walk, DeepSeek-V4's (docs/deepseek-v4.md) and GLM-5's hybrid's
// (docs/oracle.md): each token carries hc_mult residual streams; around each block a
// hyper-connection collapses them into the block's input and expands the block's output back
// (no residual add).
//   DeepSeek-V4: the attention reads its sliding window of raw keys plus compressed rows (every
//   closed row in HCA layers, the indexer's choice in CSA layers); the MoE routes by
//   sqrt-softplus score or by the token's row of the hash table; the final hc_head collapses the
//   streams by learned weights.
//   GLM-5's hybrid (glm5_next): the mixer is Kimi delta attention or MLA with the pooled DSA
//   indexer (ops::kda, ops::mla), the FFN a clamped SwiGLU or the sigmoid-grouped MoE (ops::moe);
//   the streams collapse at the end by their plain mean.
// Before the output norm and the lm_head; an attached selection ledger gets every routing
// decision. Like run(), every entry point funnels here, so prime + decode_step and forward_last
// do the same per-token operations in the same order.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

#include "memra/error.h"
#include "memra/finite.h"
#include "memra/oracle.h"
#include "memra/rope_freq.h"
#include "oracle/ops.h"

namespace memra::oracle {

namespace {

// Unweighted RMSNorm of each head of x [n_head, hd] in place (DeepSeek-V4's per-head query norm).
void head_rmsnorm(float* x, int64_t n_head, int64_t hd, double eps) {
  const std::vector<float> ones(static_cast<size_t>(hd), 1.0f);
  for (int64_t h = 0; h < n_head; ++h) ops::rmsnorm(x + h * hd, ones.data(), hd, eps, x + h * hd);
}

// Rotates (or, inverse, rotates back) the trailing 2·freq.size() dims of each head of x [n_head, hd].
void rope_heads(float* x, int64_t n_head, int64_t hd, std::span<const double> freq, int64_t pos, bool inverse) {
  const int64_t rot = 2 * static_cast<int64_t>(freq.size());
  for (int64_t h = 0; h < n_head; ++h) ops::rope_pairs_freq(x + h * hd + hd - rot, freq, pos, inverse);
}

// One routing decision into the selection ledger (memra/selection_ledger.h): the experts in the
// ledger's order, highest weight first and ties to the lower id — for a score layer that is not
// always the bias-corrected choice order, and for a hash layer not the table's — with each f64
// weight rounded to f32.
void record_selection(SelectionLedger& ledger, int64_t pos, int32_t layer,
                      std::vector<std::pair<int64_t, double>> sel) {
  std::stable_sort(sel.begin(), sel.end(), [](const auto& a, const auto& b) {
    return a.second != b.second ? a.second > b.second : a.first < b.first;
  });
  Selection r;
  r.pos = pos;
  r.layer = layer;
  for (const auto& [e, wt] : sel) {
    r.experts.push_back(static_cast<int32_t>(e));
    r.weight_bits.push_back(std::bit_cast<uint32_t>(static_cast<float>(wt)));
  }
  ledger.rows.push_back(std::move(r));
}

}  // namespace

Model::Run Model::run_hyper(std::span<const int32_t> tokens, Cache& cache, bool all_logits, GdnPrefill form) const {
  const ModelConfig& c = cfg_;
  const int th = opt_.threads;
  const int64_t T = static_cast<int64_t>(tokens.size()), D = c.n_embd, N = c.hc_mult, pos0 = cache.pos;
  const int64_t H = c.n_head, hd = c.head_dim, qr = c.mla_q_rank, IH = c.dsa_n_head, ihd = c.dsa_head_dim;
  const double eps = c.rms_eps;
  const bool dsv4 = c.family == Family::DeepseekV4;
  const std::vector<double> main_freq = dsv4 ? dsv4_rope_freq(c, false) : std::vector<double>{},
                            comp_freq = dsv4 ? dsv4_rope_freq(c, true) : std::vector<double>{};
  const double limit = c.swiglu_limit > 0 ? c.swiglu_limit : std::numeric_limits<double>::infinity();

  // X [T, N, D]: the embedding in every stream
  std::vector<float> X(static_cast<size_t>(T * N * D));
  for (int64_t t = 0; t < T; ++t)
    for (int64_t n = 0; n < N; ++n) std::memcpy(X.data() + (t * N + n) * D, w_.embed.row(tokens[t]), sizeof(float) * D);
  check_finite(X, D, {.call = "oracle", .layer = "the token embedding", .pos0 = pos0});

  std::vector<float> h(static_cast<size_t>(T * D)), o(static_cast<size_t>(T * D)), cin(static_cast<size_t>(D));
  std::vector<ops::HcMix> mix(static_cast<size_t>(T));
  // One block between hyper-connections: the streams collapse into its input (then its norm),
  // `block` maps h [T, D] to o [T, D], the output expands back into the streams.
  auto hyper_block = [&](const HyperWeights& hc, const std::vector<float>& norm, auto&& block,
                         const std::string& what) {
    for (int64_t t = 0; t < T; ++t) {
      float* Xt = X.data() + t * N * D;
      mix[static_cast<size_t>(t)] = ops::hc_mix(Xt, N, D, hc.fn, hc.base, hc.scale, c.hc_iters, c.hc_eps, eps);
      ops::hc_collapse(mix[static_cast<size_t>(t)].pre, Xt, D, cin.data());
      ops::rmsnorm(cin.data(), norm.data(), D, eps, h.data() + t * D);
    }
    block();
    for (int64_t t = 0; t < T; ++t)
      ops::hc_expand(mix[static_cast<size_t>(t)], o.data() + t * D, X.data() + t * N * D, D);
    check_finite(X, D, {.call = "oracle", .layer = what, .pos0 = pos0});
  };

  std::vector<std::vector<int32_t>> selection;  // GLM-5: the DSA selection, from a full MLA layer to the next
  for (int64_t li = 0; li < c.n_layer; ++li) {
    const LayerWeights& L = w_.layers[static_cast<size_t>(li)];
    AttnCacheLayer& ac = cache.attn[static_cast<size_t>(li)];
    const std::string name = "layer " + std::to_string(li);
    if (!dsv4) {
      const bool kda = c.layer_kind[static_cast<size_t>(li)] == LayerKind::Kda;
      hyper_block(
          *L.hc_attn, L.attn_norm,
          [&] {
            if (kda) {
              const ops::KdaShape shape{
                  .n_head = c.ssm_n_v_heads,
                  .head_dim = c.ssm_d_v,
                  .conv_kernel = c.ssm_conv_kernel,
                  .gate_bound = c.kda_gate_bound != 0 ? std::optional<double>(c.kda_gate_bound) : std::nullopt,
                  .rms_eps = eps};
              ops::kda(shape, *L.kda, h.data(), T, form, cache.gdn[static_cast<size_t>(li)], o.data(), th);
            } else {
              ops::mla(c, *L.mla, L.dsa ? &*L.dsa : nullptr, h.data(), T, pos0, ac, selection, o.data(), th,
                       opt_.mla_decode);
            }
          },
          name + (kda ? " (Kimi delta attention)" : " (MLA)"));
      hyper_block(
          *L.hc_ffn, L.ffn_norm,
          [&] {
            if (L.moe)
              ops::moe(c, *L.moe, h.data(), T, o.data(), th, ledger_ ? &ledger_->rows : nullptr, pos0,
                       static_cast<int32_t>(li));
            else
              ops::ffn_clamped(*L.ffn, h.data(), T, limit, o.data(), th);
          },
          name + (L.moe ? " (MoE)" : " (FFN)"));
      continue;
    }
    const Dsv4AttnWeights& a = *L.dsv4;
    const Dsv4Attn attn_form = c.dsv4_attn[static_cast<size_t>(li)];
    const std::vector<double>& freq = attn_form == Dsv4Attn::Sliding ? main_freq : comp_freq;

    hyper_block(
        *L.hc_attn, L.attn_norm,
        [&] {
          std::vector<float> qlat(static_cast<size_t>(T * qr)), q(static_cast<size_t>(T * H * hd)),
              kv(static_cast<size_t>(T * hd));
          ops::matmul(a.wq_a, h.data(), T, qlat.data(), th);
          for (int64_t t = 0; t < T; ++t)
            ops::rmsnorm(qlat.data() + t * qr, a.q_a_norm.data(), qr, eps, qlat.data() + t * qr);
          ops::matmul(a.wq_b, qlat.data(), T, q.data(), th);
          ops::matmul(a.wkv, h.data(), T, kv.data(), th);
          for (int64_t t = 0; t < T; ++t) {
            head_rmsnorm(q.data() + t * H * hd, H, hd, eps);
            rope_heads(q.data() + t * H * hd, H, hd, freq, pos0 + t, false);
            ops::rmsnorm(kv.data() + t * hd, a.kv_norm.data(), hd, eps, kv.data() + t * hd);
            rope_heads(kv.data() + t * hd, 1, hd, freq, pos0 + t, false);
            std::memcpy(ac.k.data() + (pos0 + t) * hd, kv.data() + t * hd, sizeof(float) * hd);
          }
          // the compressors take this call's tokens first: a query reads only the rows its own
          // position has closed (visible_rows)
          auto compress = [&](const CompressorWeights& k, CompressorState& st) {
            const int64_t cw = st.cw();
            std::vector<float> kvc(static_cast<size_t>(T * cw)), gc(static_cast<size_t>(T * cw));
            ops::matmul(k.wkv, h.data(), T, kvc.data(), th);
            ops::matmul(k.wgate, h.data(), T, gc.data(), th);
            ops::compressor_append(st, kvc.data(), gc.data(), T, k.ape, k.norm, eps, comp_freq);
          };
          if (L.compressor) compress(*L.compressor, ac.comp);
          std::vector<float> qi, wi;
          if (L.dsv4_indexer) {
            compress(L.dsv4_indexer->comp, ac.index_comp);
            qi.resize(static_cast<size_t>(T * IH * ihd));
            wi.resize(static_cast<size_t>(T * IH));
            ops::matmul(L.dsv4_indexer->wq_b, qlat.data(), T, qi.data(), th);
            ops::matmul(L.dsv4_indexer->weights, h.data(), T, wi.data(), th);
            for (int64_t t = 0; t < T; ++t) rope_heads(qi.data() + t * IH * ihd, IH, ihd, comp_freq, pos0 + t, false);
          }
          std::vector<float> att(static_cast<size_t>(H * hd)), grouped(static_cast<size_t>(c.o_groups * c.o_rank));
          for (int64_t t = 0; t < T; ++t) {
            const int64_t p = pos0 + t;
            std::vector<const float*> keys;
            for (int64_t j = std::max<int64_t>(0, p - c.sliding_window + 1); j <= p; ++j)
              keys.push_back(ac.k.data() + j * hd);
            if (attn_form == Dsv4Attn::Hca) {
              for (int64_t r = 0; r < ops::visible_rows(p, ac.comp.ratio); ++r)
                keys.push_back(ac.comp.rows.data() + r * hd);
            } else if (attn_form == Dsv4Attn::Csa) {
              const int64_t nvis = ops::visible_rows(p, ac.comp.ratio);
              const std::vector<double> score = ops::indexer_scores(qi.data() + t * IH * ihd, wi.data() + t * IH,
                                                                    ac.index_comp.rows.data(), nvis, IH, ihd);
              const std::vector<int32_t> chosen =
                  opt_.topk_ties == Options::TopkTies::TorchCpu
                      ? ops::select_top_torch_cpu(score, ac.index_comp.n_rows(), c.dsa_topk)
                      : ops::select_top(score, c.dsa_topk);
              for (int32_t r : chosen) keys.push_back(ac.comp.rows.data() + r * hd);
            }
            ops::sink_attention(q.data() + t * H * hd, keys, a.sinks.data(), H, hd, att.data());
            rope_heads(att.data(), H, hd, freq, p, true);
            ops::grouped_out(a.wo_a, c.o_groups, att.data(), grouped.data());
            ops::matvec(a.wo_b, grouped.data(), o.data() + t * D, th);
          }
        },
        name + " (DeepSeek-V4 attention)");

    hyper_block(
        *L.hc_ffn, L.ffn_norm,
        [&] {
          const MoeWeights& m = *L.moe;
          const bool hash = li < c.n_hash_layers;
          std::vector<float> logits(static_cast<size_t>(c.n_expert)), e_out(static_cast<size_t>(D)),
              s_out(static_cast<size_t>(D));
          for (int64_t t = 0; t < T; ++t) {
            const float* ht = h.data() + t * D;
            ops::matvec(m.router, ht, logits.data(), th);
            std::vector<int32_t> fixed;
            if (hash)
              for (int64_t j = 0; j < c.n_expert_used; ++j)
                fixed.push_back(static_cast<int32_t>(m.tid2eid[static_cast<size_t>(tokens[t] * c.n_expert_used + j)]));
            auto sel = ops::route_sqrt_softplus(logits, m.router_bias, fixed, c.n_expert_used, c.expert_weights_scale);
            if (ledger_) record_selection(*ledger_, pos0 + t, static_cast<int32_t>(li), sel);
            std::sort(sel.begin(), sel.end());  // experts added in ascending id, as transformers does
            std::vector<double> acc(static_cast<size_t>(D), 0.0);
            for (const auto& [e, wgt] : sel) {
              ops::ffn_clamped(m.experts[static_cast<size_t>(e)], ht, 1, limit, e_out.data(), th);
              for (int64_t d = 0; d < D; ++d) acc[static_cast<size_t>(d)] += wgt * static_cast<double>(e_out[d]);
            }
            if (c.n_ff_shexp > 0) {
              ops::ffn_clamped(m.shared, ht, 1, limit, s_out.data(), th);
              for (int64_t d = 0; d < D; ++d) acc[static_cast<size_t>(d)] += static_cast<double>(s_out[d]);
            }
            for (int64_t d = 0; d < D; ++d) o[t * D + d] = static_cast<float>(acc[static_cast<size_t>(d)]);
          }
        },
        name + " (MoE)");
  }
  cache.pos += T;

  Run r;
  std::vector<float> hn(static_cast<size_t>(D));
  for (int64_t t = all_logits ? 0 : T - 1; t < T; ++t) {
    const float* Xt = X.data() + t * N * D;
    // DeepSeek-V4: hc_head's learned weights; GLM-5's hybrid: the streams' mean
    const std::vector<double> pre =
        dsv4 ? ops::hc_head_pre(Xt, N, D, w_.hc_head->fn, w_.hc_head->base, w_.hc_head->scale, c.hc_eps, eps)
             : std::vector<double>(static_cast<size_t>(N), 1.0 / static_cast<double>(N));
    ops::hc_collapse(pre, Xt, D, cin.data());
    ops::rmsnorm(cin.data(), w_.output_norm.data(), D, eps, hn.data());
    r.logits.push_back(logits_of(hn.data(), pos0 + t));
  }
  r.last_hidden = hn;
  return r;
}

}  // namespace memra::oracle
