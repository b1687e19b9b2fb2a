// oracle::Model: the decoder walk (embedding -> layers -> final norm -> lm_head), the cache, the
// entry points and their input checks.
//
// Block (all families, pre-norm):  h = x + mixer(norm1(x));  x' = h + ffn(norm2(h)).
// Every entry point funnels into run(), so forward_last, forward_all, prime and decode_step
// perform the same per-token operations in the same order (see the consistency notes in
// memra/oracle.h).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <sstream>
#include <type_traits>

#include "memra/error.h"
#include "memra/finite.h"
#include "memra/oracle.h"
#include "oracle/ops.h"

namespace memra::oracle {

namespace {

void need(bool ok, const std::string& what) {
  if (!ok) fail("oracle weights: ", what);
}

void check_mat(const Matrix& m, int64_t rows, int64_t cols, const std::string& name) {
  need(m.rows == rows && m.cols == cols && static_cast<int64_t>(m.data.size()) == rows * cols,
       name + ": shape [" + std::to_string(m.rows) + ", " + std::to_string(m.cols) + "], expected [" +
           std::to_string(rows) + ", " + std::to_string(cols) + "]");
}
void check_vec(const std::vector<float>& v, int64_t n, const std::string& name) {
  need(static_cast<int64_t>(v.size()) == n,
       name + ": " + std::to_string(v.size()) + " values, expected " + std::to_string(n));
}
void check_ffn(const FfnWeights& f, int64_t D, int64_t F, const std::string& p) {
  check_mat(f.gate, F, D, p + ".gate");
  check_mat(f.up, F, D, p + ".up");
  check_mat(f.down, D, F, p + ".down");
}

void check_layer(const ModelConfig& c, const LayerWeights& L, LayerKind kind, const std::string& p, int64_t layer = 0) {
  const int64_t D = c.n_embd;
  check_vec(L.attn_norm, D, p + ".attn_norm");
  check_vec(L.ffn_norm, D, p + ".ffn_norm");
  if (kind == LayerKind::Dsv4) {
    need(L.dsv4.has_value() && !L.attn && !L.gdn && !L.mla, p + ": DeepSeek-V4 layer without its attention weights");
    const Dsv4AttnWeights& a = *L.dsv4;
    const int64_t H = c.n_head, hd = c.head_dim, qr = c.mla_q_rank, G = c.o_groups, R = c.o_rank;
    check_mat(a.wq_a, qr, D, p + ".dsv4.wq_a");
    check_vec(a.q_a_norm, qr, p + ".dsv4.q_a_norm");
    check_mat(a.wq_b, H * hd, qr, p + ".dsv4.wq_b");
    check_mat(a.wkv, hd, D, p + ".dsv4.wkv");
    check_vec(a.kv_norm, hd, p + ".dsv4.kv_norm");
    check_mat(a.wo_a, G * R, H * hd / G, p + ".dsv4.wo_a");
    check_mat(a.wo_b, D, G * R, p + ".dsv4.wo_b");
    check_vec(a.sinks, H, p + ".dsv4.sinks");
    auto check_comp = [&](const CompressorWeights& k, int64_t width, int64_t ratio, bool overlap,
                          const std::string& n) {
      const int64_t cw = overlap ? 2 * width : width;
      check_mat(k.wkv, cw, D, n + ".wkv");
      check_mat(k.wgate, cw, D, n + ".wgate");
      check_vec(k.ape, ratio * cw, n + ".ape");
      check_vec(k.norm, width, n + ".norm");
    };
    const Dsv4Attn form = c.dsv4_attn[static_cast<size_t>(layer)];
    need(L.compressor.has_value() == (form != Dsv4Attn::Sliding),
         p + ": compressor presence differs from the layer's form");
    need(L.dsv4_indexer.has_value() == (form == Dsv4Attn::Csa), p + ": indexer presence differs from the layer's form");
    if (L.compressor)
      check_comp(*L.compressor, hd, form == Dsv4Attn::Csa ? c.csa_ratio : c.hca_ratio, form == Dsv4Attn::Csa,
                 p + ".compressor");
    if (L.dsv4_indexer) {
      check_mat(L.dsv4_indexer->wq_b, c.dsa_n_head * c.dsa_head_dim, qr, p + ".dsv4_indexer.wq_b");
      check_mat(L.dsv4_indexer->weights, c.dsa_n_head, D, p + ".dsv4_indexer.weights");
      check_comp(L.dsv4_indexer->comp, c.dsa_head_dim, c.csa_ratio, true, p + ".dsv4_indexer.comp");
    }
  } else if (kind == LayerKind::Kda) {
    need(L.kda.has_value() && !L.attn && !L.gdn && !L.mla, p + ": KDA layer without KDA weights");
    const KdaWeights& k = *L.kda;
    const int64_t H = c.ssm_n_v_heads, d = c.ssm_d_v, hd = H * d;
    check_mat(k.wq, hd, D, p + ".kda.wq");
    check_mat(k.wk, hd, D, p + ".kda.wk");
    check_mat(k.wv, hd, D, p + ".kda.wv");
    check_mat(k.conv, c.ssm_conv_dim(), c.ssm_conv_kernel, p + ".kda.conv");
    check_mat(k.f_a, d, D, p + ".kda.f_a");
    check_mat(k.f_b, hd, d, p + ".kda.f_b");
    check_vec(k.dt_bias, hd, p + ".kda.dt_bias");
    check_vec(k.a_log, H, p + ".kda.a_log");
    check_mat(k.wb, H, D, p + ".kda.wb");
    check_mat(k.g_a, d, D, p + ".kda.g_a");
    check_mat(k.g_b, hd, d, p + ".kda.g_b");
    check_vec(k.norm, d, p + ".kda.norm");
    check_mat(k.wo, D, hd, p + ".kda.wo");
  } else if (kind == LayerKind::Mla) {
    need(L.mla.has_value() && !L.attn && !L.gdn, p + ": MLA layer without MLA weights");
    const MlaWeights& a = *L.mla;
    const int64_t H = c.n_head;
    check_mat(a.wq_a, c.mla_q_rank, D, p + ".mla.wq_a");
    check_vec(a.q_a_norm, c.mla_q_rank, p + ".mla.q_a_norm");
    check_mat(a.wq_b, H * c.head_dim, c.mla_q_rank, p + ".mla.wq_b");
    check_mat(a.wkv_a, c.mla_kv_rank + c.n_rot, D, p + ".mla.wkv_a");
    check_vec(a.kv_a_norm, c.mla_kv_rank, p + ".mla.kv_a_norm");
    check_mat(a.wkv_b, H * (c.mla_d_nope + c.mla_d_v), c.mla_kv_rank, p + ".mla.wkv_b");
    check_mat(a.wo, D, H * c.mla_d_v, p + ".mla.wo");
    if (L.dsa) {
      const DsaWeights& x = *L.dsa;
      check_mat(x.wq_b, c.dsa_n_head * c.dsa_head_dim, c.mla_q_rank, p + ".dsa.wq_b");
      check_mat(x.wk, c.dsa_head_dim, D, p + ".dsa.wk");
      check_vec(x.k_norm, c.dsa_head_dim, p + ".dsa.k_norm");
      check_vec(x.k_norm_bias, c.dsa_head_dim, p + ".dsa.k_norm_bias");
      check_mat(x.weights, c.dsa_n_head, D, p + ".dsa.weights");
      if (c.dsa_kpool > 0) {
        check_mat(x.kpool_gate, c.dsa_head_dim, D, p + ".dsa.kpool_gate");
        check_vec(x.kpool_ape, c.dsa_kpool * c.dsa_head_dim, p + ".dsa.kpool_ape");
      } else {
        need(x.kpool_gate.empty() && x.kpool_ape.empty(), p + ".dsa.kpool_*: present without pooled scoring");
      }
    }
  } else if (kind == LayerKind::Attention) {
    need(L.attn.has_value() && !L.gdn, p + ": attention layer without attention weights");
    const AttnWeights& a = *L.attn;
    const int64_t qd = c.n_head * c.head_dim, kvd = c.n_head_kv * c.head_dim;
    check_mat(a.wq, qd, D, p + ".wq");
    if (c.attn_gated()) check_mat(a.wgate, qd, D, p + ".wgate");
    else need(a.wgate.empty(), p + ".wgate: present in an ungated family");
    check_mat(a.wk, kvd, D, p + ".wk");
    check_mat(a.wv, kvd, D, p + ".wv");
    check_mat(a.wo, D, qd, p + ".wo");
    check_vec(a.q_norm, c.head_dim, p + ".q_norm");
    check_vec(a.k_norm, c.head_dim, p + ".k_norm");
  } else {
    need(L.gdn.has_value() && !L.attn, p + ": linear layer without GDN weights");
    const GdnWeights& g = *L.gdn;
    const int64_t nv = c.ssm_n_v_heads;
    check_mat(g.wqkv, c.ssm_conv_dim(), D, p + ".wqkv");
    check_mat(g.wz, c.ssm_value_dim(), D, p + ".wz");
    check_mat(g.wb, nv, D, p + ".wb");
    check_mat(g.wa, nv, D, p + ".wa");
    check_mat(g.conv, c.ssm_conv_dim(), c.ssm_conv_kernel, p + ".conv");
    check_vec(g.ssm_a, nv, p + ".ssm_a");
    check_vec(g.dt_bias, nv, p + ".dt_bias");
    check_vec(g.norm, c.ssm_d_v, p + ".norm");
    check_mat(g.wout, D, c.ssm_value_dim(), p + ".wout");
  }
  if (c.is_hyper()) {
    const int64_t N = c.hc_mult;
    for (const auto* hc : {&L.hc_attn, &L.hc_ffn}) {
      need(hc->has_value(), p + ": hyper-connection weights missing");
      check_mat((*hc)->fn, (2 + N) * N, N * D, p + ".hc.fn");
      check_vec((*hc)->base, (2 + N) * N, p + ".hc.base");
      check_vec((*hc)->scale, 3, p + ".hc.scale");
    }
  } else {
    need(!L.hc_attn && !L.hc_ffn, p + ": hyper-connection weights in a family without them");
  }
  need(L.ffn.has_value() != L.moe.has_value(), p + ": needs exactly one of dense FFN / MoE");
  if (L.ffn) check_ffn(*L.ffn, D, c.n_ff, p + ".ffn");
  if (L.moe) {
    const MoeWeights& m = *L.moe;
    check_mat(m.router, c.n_expert, D, p + ".router");
    const bool hash = c.moe_gating == MoeGating::SqrtSoftplus && layer < c.n_hash_layers;
    if (c.moe_gating == MoeGating::SigmoidGrouped || (c.moe_gating == MoeGating::SqrtSoftplus && !hash))
      check_vec(m.router_bias, c.n_expert, p + ".router_bias");
    else
      need(m.router_bias.empty(), p + ".router_bias: present with softmax gating or in a hash layer");
    if (hash) {
      check_vec(m.tid2eid, c.n_vocab * c.n_expert_used, p + ".tid2eid");
      for (float e : m.tid2eid)
        need(e >= 0 && e < static_cast<float>(c.n_expert) && e == std::floor(e),
             p + ".tid2eid: expert id " + std::to_string(e) + " is not one of the " + std::to_string(c.n_expert));
    } else {
      need(m.tid2eid.empty(), p + ".tid2eid: present in a layer that routes by score");
    }
    need(static_cast<int64_t>(m.experts.size()) == c.n_expert, p + ": expert count");
    for (size_t e = 0; e < m.experts.size(); ++e)
      check_ffn(m.experts[e], D, c.n_ff_exp, p + ".experts." + std::to_string(e));
    if (c.n_ff_shexp > 0) {
      check_ffn(m.shared, D, c.n_ff_shexp, p + ".shared");
      if (c.shared_expert_gated())
        check_vec(m.shared_gate, D, p + ".shared_gate");
      else
        need(m.shared_gate.empty(), p + ".shared_gate: present in a family whose shared expert is ungated");
    }
  }
}

void check_weights(const ModelConfig& c, const ModelWeights& w) {
  c.validate();
  check_mat(w.embed, c.n_vocab, c.n_embd, "embed");
  check_vec(w.output_norm, c.n_embd, "output_norm");
  if (c.tied_embeddings) need(w.output.empty(), "output: present although embeddings are tied");
  else check_mat(w.output, c.n_vocab, c.n_embd, "output");
  need(static_cast<int64_t>(w.layers.size()) == c.n_layer,
       "layers: " + std::to_string(w.layers.size()) + ", config has " + std::to_string(c.n_layer));
  for (int64_t i = 0; i < c.n_layer; ++i) {
    const LayerWeights& L = w.layers[static_cast<size_t>(i)];
    check_layer(c, L, c.layer_kind[static_cast<size_t>(i)], "layer " + std::to_string(i), i);
    if (c.layer_kind[static_cast<size_t>(i)] == LayerKind::Mla)
      need(L.dsa.has_value() == !c.dsa_shared[static_cast<size_t>(i)],
           "layer " + std::to_string(i) + ": DSA indexer " + (L.dsa ? "present" : "absent") + " but the config says " +
               (c.dsa_shared[static_cast<size_t>(i)] ? "shared" : "full"));
    need((c.ffn_kind[static_cast<size_t>(i)] == FfnKind::Moe) == L.moe.has_value(),
         "layer " + std::to_string(i) + ": FFN kind differs from the config");
  }
  need(w.mtp.has_value() == (c.n_mtp > 0), "mtp: presence differs from the config");
  need(w.hc_head.has_value() == (c.family == Family::DeepseekV4), "hc_head: presence differs from the family");
  if (w.hc_head) {
    const int64_t N = c.hc_mult;
    check_mat(w.hc_head->fn, N, N * c.n_embd, "hc_head.fn");
    check_vec(w.hc_head->base, N, "hc_head.base");
    check_vec(w.hc_head->scale, 1, "hc_head.scale");
  }
  if (w.mtp) {
    check_mat(w.mtp->eh_proj, c.n_embd, 2 * c.n_embd, "mtp.eh_proj");
    check_vec(w.mtp->enorm, c.n_embd, "mtp.enorm");
    check_vec(w.mtp->hnorm, c.n_embd, "mtp.hnorm");
    check_vec(w.mtp->final_norm, c.n_embd, "mtp.final_norm");
    check_layer(c, w.mtp->layer, LayerKind::Attention, "mtp layer");
  }
}

const char* kind_name(LayerKind k) {
  return k == LayerKind::Attention ? "attention"
         : k == LayerKind::Mla     ? "MLA"
         : k == LayerKind::Dsv4    ? "DeepSeek-V4 attention"
         : k == LayerKind::Kda     ? "Kimi delta attention"
                                   : "linear attention";
}

std::string layer_name(int64_t layer) {
  return layer < 0 ? std::string("MTP layer") : "layer " + std::to_string(layer);
}

}  // namespace

Model::Model(ModelConfig c, ModelWeights w, Options o) : cfg_(std::move(c)), w_(std::move(w)) {
  check_weights(cfg_, w_);
  set_options(o);
}

// Marks every matrix whose products take q8_1 inputs under o (Options::q8_1_activations).
void Model::set_options(const Options& o) {
  opt_ = o;
  auto mark = [&](Matrix& m) {
    m.q8_1_input = o.q8_1_activations && (m.stored == DType::Q8_0 || m.stored == DType::NVFP4);
  };
  auto visit = [&](std::string_view, auto& t) {  // experts arrive one matrix at a time
    if constexpr (std::is_same_v<std::remove_cvref_t<decltype(t)>, Matrix>) mark(t);
  };
  mark(w_.embed);
  mark(w_.output);
  for (LayerWeights& L : w_.layers) for_each_tensor(visit, L);
  if (w_.mtp) {
    mark(w_.mtp->eh_proj);
    for_each_tensor(visit, w_.mtp->layer);
  }
}

Model Model::load(const WeightSource& src, Options opt) {
  ModelConfig c = ModelConfig::from_source(src);
  ModelWeights w = load_weights(src, c);
  return Model(std::move(c), std::move(w), opt);
}

Model Model::from_weights(ModelConfig c, ModelWeights w, Options opt) {
  return Model(std::move(c), std::move(w), opt);
}

Cache Model::new_cache(int64_t max_ctx) const {
  if (max_ctx <= 0) fail("new_cache: max_ctx ", max_ctx, " must be > 0");
  const ModelConfig& c = cfg_;
  Cache k;
  k.max_ctx = max_ctx;
  k.attn.resize(static_cast<size_t>(c.n_layer));
  k.gdn.resize(static_cast<size_t>(c.n_layer));
  const size_t kv = static_cast<size_t>(max_ctx * c.n_head_kv * c.head_dim);
  for (int64_t i = 0; i < c.n_layer; ++i) {
    const LayerKind kind = c.layer_kind[static_cast<size_t>(i)];
    if (kind == LayerKind::Dsv4) {
      AttnCacheLayer& a = k.attn[static_cast<size_t>(i)];
      a.k.assign(static_cast<size_t>(max_ctx * c.head_dim), 0.0f);  // its one head's rows, K = V
      const Dsv4Attn form = c.dsv4_attn[static_cast<size_t>(i)];
      if (form != Dsv4Attn::Sliding) {
        a.comp.ratio = form == Dsv4Attn::Csa ? c.csa_ratio : c.hca_ratio;
        a.comp.width = c.head_dim;
        a.comp.overlap = form == Dsv4Attn::Csa;
      }
      if (form == Dsv4Attn::Csa) {
        a.index_comp.ratio = c.csa_ratio;
        a.index_comp.width = c.dsa_head_dim;
        a.index_comp.overlap = true;
      }
    } else if (kind == LayerKind::Attention || kind == LayerKind::Mla) {
      AttnCacheLayer& a = k.attn[static_cast<size_t>(i)];
      a.k.assign(static_cast<size_t>(max_ctx * c.kv_k_width()), 0.0f);
      a.v.assign(static_cast<size_t>(max_ctx * c.kv_v_width()), 0.0f);
      if (kind == LayerKind::Mla) a.lat.assign(static_cast<size_t>(max_ctx * (c.mla_kv_rank + c.n_rot)), 0.0f);
      if (kind == LayerKind::Mla && !c.dsa_shared[static_cast<size_t>(i)]) {
        a.index_k.assign(static_cast<size_t>(max_ctx * c.dsa_head_dim), 0.0f);
        if (c.dsa_kpool > 0) a.index_gate.assign(static_cast<size_t>(max_ctx * c.dsa_head_dim), 0.0f);
      }
    } else {
      k.gdn[static_cast<size_t>(i)].conv.assign(static_cast<size_t>((c.ssm_conv_kernel - 1) * c.ssm_conv_dim()), 0.0f);
      k.gdn[static_cast<size_t>(i)].state.assign(static_cast<size_t>(c.ssm_n_v_heads * c.ssm_d_k * c.ssm_d_v), 0.0);
    }
  }
  if (w_.mtp) {
    k.mtp.k.assign(kv, 0.0f);
    k.mtp.v.assign(kv, 0.0f);
  }
  return k;
}

void Model::check_cache(const Cache& k) const {
  if (static_cast<int64_t>(k.attn.size()) != cfg_.n_layer || static_cast<int64_t>(k.gdn.size()) != cfg_.n_layer)
    fail("cache has ", k.attn.size(), " layers, model has ", cfg_.n_layer, " (cache from another model?)");
  const size_t kv = static_cast<size_t>(k.max_ctx * cfg_.kv_k_width());
  for (int64_t i = 0; i < cfg_.n_layer; ++i)
    if (cfg_.layer_kind[static_cast<size_t>(i)] != LayerKind::Linear &&
        cfg_.layer_kind[static_cast<size_t>(i)] != LayerKind::Kda && k.attn[static_cast<size_t>(i)].k.size() != kv)
      fail("cache layer ", i, " K/V size does not match max_ctx ", k.max_ctx, " (cache from another model?)");
}

void Model::check_tokens(std::span<const int32_t> tokens, const Cache& k) const {
  cfg_.check_prompt(tokens, k.pos, k.max_ctx);
}

void Model::run_layer(const LayerWeights& L, LayerKind kind, int64_t layer, std::vector<float>& x, int64_t T,
                      int64_t pos0, AttnCacheLayer* ac, GdnCacheLayer* gc, GdnPrefill form,
                      std::vector<std::vector<int32_t>>* selection) const {
  const int64_t D = cfg_.n_embd;
  const int th = opt_.threads;
  std::vector<float> h(static_cast<size_t>(T * D)), o(static_cast<size_t>(T * D));
  for (int64_t t = 0; t < T; ++t) ops::rmsnorm(x.data() + t * D, L.attn_norm.data(), D, cfg_.rms_eps, h.data() + t * D);
  if (kind == LayerKind::Attention) ops::attention(cfg_, *L.attn, h.data(), T, pos0, *ac, o.data(), th);
  else if (kind == LayerKind::Mla) {
    if (!selection) fail("oracle: MLA layer ", layer, " run without a selection buffer");
    ops::mla(cfg_, *L.mla, L.dsa ? &*L.dsa : nullptr, h.data(), T, pos0, *ac, *selection, o.data(), th,
             opt_.mla_decode);
  } else
    ops::gdn(cfg_, *L.gdn, h.data(), T, form, *gc, o.data(), th);
  for (int64_t i = 0; i < T * D; ++i) x[i] += o[i];
  check_finite(x, D, {.call = "oracle", .layer = layer_name(layer) + " (" + kind_name(kind) + ")", .pos0 = pos0});
  for (int64_t t = 0; t < T; ++t) ops::rmsnorm(x.data() + t * D, L.ffn_norm.data(), D, cfg_.rms_eps, h.data() + t * D);
  if (L.moe)
    ops::moe(cfg_, *L.moe, h.data(), T, o.data(), th, ledger_ ? &ledger_->rows : nullptr, pos0,
             static_cast<int32_t>(layer));
  else ops::ffn(*L.ffn, h.data(), T, o.data(), th);
  for (int64_t i = 0; i < T * D; ++i) x[i] += o[i];
  check_finite(x, D, {.call = "oracle", .layer = layer_name(layer) + (L.moe ? " (MoE)" : " (FFN)"), .pos0 = pos0});
}

std::vector<float> Model::logits_of(const float* hn, int64_t pos) const {
  std::vector<float> logits(static_cast<size_t>(cfg_.n_vocab));
  ops::matvec(w_.lm_head(), hn, logits.data(), opt_.threads);
  check_finite(logits, cfg_.n_vocab, {.call = "oracle", .layer = "lm_head", .pos0 = pos});
  return logits;
}

Model::Run Model::run(std::span<const int32_t> tokens, Cache& cache, bool all_logits, GdnPrefill form) const {
  check_cache(cache);
  check_tokens(tokens, cache);
  if (cfg_.is_hyper()) return run_hyper(tokens, cache, all_logits, form);
  const int64_t T = static_cast<int64_t>(tokens.size()), D = cfg_.n_embd, pos0 = cache.pos;
  std::vector<float> x(static_cast<size_t>(T * D));
  for (int64_t t = 0; t < T; ++t) std::memcpy(x.data() + t * D, w_.embed.row(tokens[t]), sizeof(float) * D);
  check_finite(x, D, {.call = "oracle", .layer = "the token embedding", .pos0 = pos0});
  std::vector<std::vector<int32_t>> selection;  // DSA: from an MLA layer with an indexer to the next
  for (int64_t i = 0; i < cfg_.n_layer; ++i) {
    const size_t li = static_cast<size_t>(i);
    run_layer(w_.layers[li], cfg_.layer_kind[li], i, x, T, pos0, &cache.attn[li], &cache.gdn[li], form, &selection);
  }
  cache.pos += T;
  Run r;
  std::vector<float> hn(static_cast<size_t>(D));
  for (int64_t t = all_logits ? 0 : T - 1; t < T; ++t) {
    ops::rmsnorm(x.data() + t * D, w_.output_norm.data(), D, cfg_.rms_eps, hn.data());
    r.logits.push_back(logits_of(hn.data(), pos0 + t));
  }
  r.last_hidden = hn;
  return r;
}

std::vector<float> Model::forward_last(std::span<const int32_t> tokens) const {
  Cache c = new_cache(std::max<int64_t>(1, static_cast<int64_t>(tokens.size())));
  return std::move(run(tokens, c, false, opt_.gdn_prefill).logits.back());
}

std::vector<std::vector<float>> Model::forward_all(std::span<const int32_t> tokens) const {
  Cache c = new_cache(std::max<int64_t>(1, static_cast<int64_t>(tokens.size())));
  return run(tokens, c, true, opt_.gdn_prefill).logits;
}

std::vector<float> Model::prime(std::span<const int32_t> tokens, Cache& cache) const {
  return std::move(run(tokens, cache, false, opt_.gdn_prefill).logits.back());
}

Step Model::decode_step(int32_t token, Cache& cache) const {
  const int32_t one[1] = {token};
  Run r = run(one, cache, false, GdnPrefill::recurrent);
  return Step{std::move(r.logits.back()), std::move(r.last_hidden)};
}

std::vector<std::vector<float>> Model::decode_step_batch(std::span<const int32_t> tokens,
                                                        std::span<Cache* const> caches) const {
  if (tokens.empty()) fail("decode_step_batch: no sequences");
  if (caches.size() != tokens.size())
    fail("decode_step_batch: ", tokens.size(), " tokens for ", caches.size(), " caches (one token per sequence)");
  for (size_t b = 0; b < tokens.size(); ++b) {
    try {
      if (!caches[b]) fail("null cache");
      check_cache(*caches[b]);
      check_tokens(tokens.subspan(b, 1), *caches[b]);
    } catch (const Error& err) {
      fail("decode_step_batch: sequence ", b, ": ", err.what());
    }
    for (size_t a = 0; a < b; ++a)
      if (caches[a] == caches[b]) fail("decode_step_batch: sequences ", a, " and ", b, " share one cache");
  }
  std::vector<std::vector<float>> rows;
  rows.reserve(tokens.size());
  for (size_t b = 0; b < tokens.size(); ++b) rows.push_back(decode_step(tokens[b], *caches[b]).logits);
  return rows;
}

Step Model::mtp_step(std::span<const float> hidden, int32_t next_token, Cache& cache) const {
  if (!w_.mtp) fail("mtp_step: the model has no MTP head");
  const int64_t D = cfg_.n_embd;
  if (static_cast<int64_t>(hidden.size()) != D) fail("mtp_step: hidden has ", hidden.size(), " values, n_embd ", D);
  if (next_token < 0 || next_token >= cfg_.n_vocab)
    fail("token id ", next_token, " at MTP position ", cache.mtp_pos, " out of range (vocab ", cfg_.n_vocab, ")");
  if (cache.mtp.k.empty()) fail("mtp_step: cache has no MTP K/V (made by another model?)");
  if (cache.mtp_pos >= cache.max_ctx)
    fail("MTP position ", cache.mtp_pos, " reaches the cache's max_ctx ", cache.max_ctx);
  const MtpWeights& m = *w_.mtp;
  // z = eh_proj([enorm(embed(x_{t+1})) | hnorm(h_t)])
  std::vector<float> cat(static_cast<size_t>(2 * D));
  ops::rmsnorm(w_.embed.row(next_token), m.enorm.data(), D, cfg_.rms_eps, cat.data());
  ops::rmsnorm(hidden.data(), m.hnorm.data(), D, cfg_.rms_eps, cat.data() + D);
  std::vector<float> x(static_cast<size_t>(D));
  ops::matvec(m.eh_proj, cat.data(), x.data(), opt_.threads);
  run_layer(m.layer, LayerKind::Attention, -1, x, 1, cache.mtp_pos, &cache.mtp, nullptr, GdnPrefill::recurrent);
  ++cache.mtp_pos;
  Step s;
  s.hidden.resize(static_cast<size_t>(D));
  ops::rmsnorm(x.data(), m.final_norm.data(), D, cfg_.rms_eps, s.hidden.data());
  s.logits = with_context("MTP", [&] { return logits_of(s.hidden.data(), cache.mtp_pos - 1); });
  return s;
}

std::vector<std::pair<int32_t, float>> top_k(std::span<const float> logits, int k) {
  if (k < 0) fail("top_k: k = ", k);
  std::vector<int32_t> idx(logits.size());
  for (size_t i = 0; i < idx.size(); ++i) {
    if (std::isnan(logits[i])) fail("top_k: logit ", i, " is NaN");
    idx[i] = static_cast<int32_t>(i);
  }
  const size_t n = std::min(idx.size(), static_cast<size_t>(k));
  std::partial_sort(idx.begin(), idx.begin() + static_cast<std::ptrdiff_t>(n), idx.end(), [&](int32_t a, int32_t b) {
    return logits[a] != logits[b] ? logits[a] > logits[b] : a < b;
  });
  std::vector<std::pair<int32_t, float>> out;
  for (size_t i = 0; i < n; ++i) out.emplace_back(idx[i], logits[idx[i]]);
  return out;
}

}  // namespace memra::oracle
