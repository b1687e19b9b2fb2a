// memra/layer_schema.h — one decoder layer's tensors, described once.
//
// A layer is the same set of tensors whether it lives as f32 on the host (the oracle's
// LayerWeights, memra/weights.h), as the file's own blocks (RawLayer, memra/raw_weights.h) or
// on the device (src/cuda/device_weights.h): only the holder types differ. So the layer is a
// template over them:
//   M  a matrix (y = W x)          V  a vector of f32 (norm multipliers, ssm_a, dt_bias)
//   C  the GDN conv taps           E  the routed experts (stacked slabs, or one FFN per expert)
// and for_each_tensor visits every tensor of one layer — or of several layers in lock step —
// by its canonical name, in one fixed order. Uploads, byte counts, synthetic weights and
// whole-model comparisons walk it, so adding a tensor to a part adds it everywhere.
//
//   for_each_tensor([&](std::string_view name, const RawMatrix& r, DevMatrix& d) {...}, raw, dev);
//
// In lock step the first layer decides which optional parts exist; a non-const layer after it
// gets the missing parts emplaced (an upload fills a fresh device layer this way), a const one
// must have them. The callback is called with each field by reference; a generic lambda with
// `if constexpr` tells matrices from vectors.
//
// Adding a layer kind (docs/architecture.md "Adding a layer kind"): a part struct with its
// fields and a `visit` listing them, an optional of it in LayerT, one line in for_each_tensor.
//
// provides: AttnT, GdnT, KdaT, MlaT, DsaIndexerT, FfnT, MoeT, LayerT, for_each_tensor
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace memra {

// Full (softmax) attention: q/k RMSNorm, RoPE, GQA; wgate is the output gate of Next/3.5
// (empty for Qwen3).
template <class M, class V>
struct AttnT {
  M wq;              // [H*hd, D]  queries only
  M wgate;           // [H*hd, D]  output gate; empty for Qwen3
  M wk;              // [KV*hd, D]
  M wv;              // [KV*hd, D]
  M wo;              // [D, H*hd]
  V q_norm, k_norm;  // [hd] multipliers
  template <class F, class... S>
  static void visit(F&& f, S&... s) {
    f("wq", s.wq...);
    f("wgate", s.wgate...);
    f("wk", s.wk...);
    f("wv", s.wv...);
    f("wo", s.wo...);
    f("q_norm", s.q_norm...);
    f("k_norm", s.k_norm...);
  }
};

// Gated DeltaNet (linear attention).
template <class M, class V, class C>
struct GdnT {
  M wqkv;     // [2*nk*dk + nv*dv, D] rows [q | k | v]
  M wz;       // [nv*dv, D] output-gate input z
  M wb;       // [nv, D] beta logits
  M wa;       // [nv, D] decay input a
  C conv;     // [conv_dim, K] depthwise causal conv taps, tap K-1 multiplies the newest input
  V ssm_a;    // [nv] = -exp(A_log)
  V dt_bias;  // [nv]
  V norm;     // [dv] gated RMSNorm multiplier
  M wout;     // [D, nv*dv]
  template <class F, class... S>
  static void visit(F&& f, S&... s) {
    f("wqkv", s.wqkv...);
    f("wz", s.wz...);
    f("wb", s.wb...);
    f("wa", s.wa...);
    f("conv", s.conv...);
    f("ssm_a", s.ssm_a...);
    f("dt_bias", s.dt_bias...);
    f("norm", s.norm...);
    f("wout", s.wout...);
  }
};

// Multi-head latent attention (DeepSeek-V3 MLA, as GLM-5 uses it). Queries through a low-rank
// bottleneck: q = wq_b(rmsnorm(wq_a x)), per head [nope | rope]. Keys and values through the
// latent: wkv_a x = [c | k_rope]; k_nope, v = wkv_b(rmsnorm(c)) per head [k_nope | v]; k_rope (one
// head) is shared by all heads. The two latent norms use eps 1e-6 whatever rms_eps is.
template <class M, class V>
struct MlaT {
  M wq_a;       // [q_rank, D]
  V q_a_norm;   // [q_rank]
  M wq_b;       // [H*(d_nope+n_rot), q_rank]
  M wkv_a;      // [kv_rank+n_rot, D]  rows [latent c | shared rope key]
  V kv_a_norm;  // [kv_rank]
  M wkv_b;      // [H*(d_nope+d_v), kv_rank]
  M wo;         // [D, H*d_v]
  template <class F, class... S>
  static void visit(F&& f, S&... s) {
    f("wq_a", s.wq_a...);
    f("q_a_norm", s.q_a_norm...);
    f("wq_b", s.wq_b...);
    f("wkv_a", s.wkv_a...);
    f("kv_a_norm", s.kv_a_norm...);
    f("wkv_b", s.wkv_b...);
    f("wo", s.wo...);
  }
};

// DSA lightning indexer (DeepSeek sparse attention): scores every earlier token for a query,
//   score(t) = sum_h w_h * relu(q_h . k_t / sqrt(hd)),  w = weights x / sqrt(n_heads),
// q_h from the MLA query latent (wq_b), k_t = layernorm(wk x_t) (weight and bias), the first
// n_rot dims of each rotated; the query attends only to its dsa_topk best tokens. GLM-5's hybrid
// (ModelConfig::dsa_kpool = P) scores pools of P tokens instead: a pool's key is, per channel c,
// sum_s softmax_s(kpool_gate x_s + kpool_ape[s])[c] k_s[c] over its P tokens; empty otherwise.
template <class M, class V>
struct DsaIndexerT {
  M wq_b;         // [n_heads*hd, q_rank]
  M wk;           // [hd, D]
  V k_norm;       // [hd] LayerNorm weight
  V k_norm_bias;  // [hd] LayerNorm bias
  M weights;      // [n_heads, D] per-head weights (weights_proj)
  M kpool_gate;   // [hd, D]  pool gate logits (index_kpool_compress_gate)
  V kpool_ape;    // [P*hd]   their bias per slot of a pool (index_kpool_compress_ape)
  template <class F, class... S>
  static void visit(F&& f, S&... s) {
    f("wq_b", s.wq_b...);
    f("wk", s.wk...);
    f("k_norm", s.k_norm...);
    f("k_norm_bias", s.k_norm_bias...);
    f("weights", s.weights...);
    f("kpool_gate", s.kpool_gate...);
    f("kpool_ape", s.kpool_ape...);
  }
};

// DeepSeek-V4 attention (docs/deepseek-v4.md): queries through a low-rank bottleneck,
// q = wq_b(rmsnorm(wq_a x)) then an unweighted RMSNorm per head; one key-value head
// kv = rmsnorm(wkv x), K = V; the output grouped through wo_a (group g: rows g·o_rank..), then wo_b;
// a sink logit per head in the softmax.
template <class M, class V>
struct Dsv4AttnT {
  M wq_a;      // [q_rank, D]
  V q_a_norm;  // [q_rank]
  M wq_b;      // [H*hd, q_rank]
  M wkv;       // [hd, D]
  V kv_norm;   // [hd]
  M wo_a;      // [o_groups*o_rank, H*hd/o_groups]
  M wo_b;      // [D, o_groups*o_rank]
  V sinks;     // [H]
  template <class F, class... S>
  static void visit(F&& f, S&... s) {
    f("wq_a", s.wq_a...);
    f("q_a_norm", s.q_a_norm...);
    f("wq_b", s.wq_b...);
    f("wkv", s.wkv...);
    f("kv_norm", s.kv_norm...);
    f("wo_a", s.wo_a...);
    f("wo_b", s.wo_b...);
    f("sinks", s.sinks...);
  }
};

// A DeepSeek-V4 compressor: per token kv = wkv x and gate = wgate x of width cw (2w when windows
// overlap (CSA), else w), the position bias of the ratio slots, the rows' RMSNorm of width w.
template <class M, class V>
struct CompressorT {
  M wkv;    // [cw, D]
  M wgate;  // [cw, D]
  V ape;    // [ratio*cw]
  V norm;   // [w]
  template <class F, class... S>
  static void visit(F&& f, S&... s) {
    f("wkv", s.wkv...);
    f("wgate", s.wgate...);
    f("ape", s.ape...);
    f("norm", s.norm...);
  }
};

// The lightning indexer of a DeepSeek-V4 CSA layer: queries from the attention's query latent,
// per-head weights, and its own overlapping compressor of width dsa_head_dim.
template <class M, class V>
struct Dsv4IndexerT {
  M wq_b;     // [n_heads*hd, q_rank]
  M weights;  // [n_heads, D]
  CompressorT<M, V> comp;
  template <class F, class... S>
  static void visit(F&& f, S&... s) {
    f("wq_b", s.wq_b...);
    f("weights", s.weights...);
    auto g = [&f](std::string_view name, auto&... t) { f("comp." + std::string(name), t...); };
    CompressorT<M, V>::visit(g, s.comp...);
  }
};

// Kimi delta attention (KDA: GLM-5's hybrid, transformers' glm5_next / kimi_linear), H heads of
// d = head_dim: [q|k|v] = silu(causal depthwise conv_K([wq x | wk x | wv x])); a log decay per key
// channel g = bound * sigmoid(exp(A_log) * (f_b f_a x + dt_bias)) (or -exp(A_log) *
// softplus(...) without a bound); beta = sigmoid(wb x); the delta rule per head on L2-normed q, k;
// out = wo(rmsnorm(o) * norm * sigmoid(g_b g_a x)) per head.
template <class M, class V, class C>
struct KdaT {
  M wq, wk, wv;  // [H*d, D] each
  C conv;        // [3*H*d, K] depthwise causal conv taps of [q|k|v], tap K-1 on the newest input
  M f_a;         // [d, D]   forget gate, low rank
  M f_b;         // [H*d, d]
  V dt_bias;     // [H*d]
  V a_log;       // [H]
  M wb;          // [H, D]   beta logits
  M g_a;         // [d, D]   output gate, low rank
  M g_b;         // [H*d, d]
  V norm;        // [d]      gated RMSNorm multiplier
  M wo;          // [D, H*d]
  template <class F, class... S>
  static void visit(F&& f, S&... s) {
    f("wq", s.wq...);
    f("wk", s.wk...);
    f("wv", s.wv...);
    f("conv", s.conv...);
    f("f_a", s.f_a...);
    f("f_b", s.f_b...);
    f("dt_bias", s.dt_bias...);
    f("a_log", s.a_log...);
    f("wb", s.wb...);
    f("g_a", s.g_a...);
    f("g_b", s.g_b...);
    f("norm", s.norm...);
    f("wo", s.wo...);
  }
};

// A manifold-constrained hyper-connection (DeepSeek-V4): fn [(2+N)N, N·D], base [(2+N)N],
// scale [3]; the final hc_head has fn [N, N·D], base [N], scale [1].
template <class M, class V>
struct HyperT {
  M fn;
  V base;
  V scale;
  template <class F, class... S>
  static void visit(F&& f, S&... s) {
    f("fn", s.fn...);
    f("base", s.base...);
    f("scale", s.scale...);
  }
};

// SwiGLU: down(silu(gate x) * up x). As routed experts (stacked): E slabs of each.
template <class M>
struct FfnT {
  M gate;  // [F, D]
  M up;    // [F, D]
  M down;  // [D, F]
  bool empty() const { return gate.empty(); }
  template <class F, class... S>
  static void visit(F&& f, S&... s) {
    f("gate", s.gate...);
    f("up", s.up...);
    f("down", s.down...);
  }
};

// Routed experts (top-k of the router's logits, ModelConfig::moe_gating) plus an optional
// shared expert, scaled by sigmoid(shared_gate . x) in Qwen and added as is in GLM-5.
template <class M, class V, class E>
struct MoeT {
  M router;        // [E, D]
  V router_bias;   // [E] sigmoid-grouped gating's selection bias (e_score_correction_bias); else empty
  E experts;       // FfnT<M> of E slabs, or std::vector<FfnT<M>> of E experts
  FfnT<M> shared;  // empty when n_ff_shexp == 0
  V shared_gate;   // [D]; empty without a shared expert or in GLM-5
  V tid2eid;       // [n_vocab*top_k] a DeepSeek-V4 hash layer's expert ids (small integers, exact in f32); else empty
};

template <class M, class V, class C, class E>
struct LayerT {
  using Attn = AttnT<M, V>;
  using Gdn = GdnT<M, V, C>;
  using Ffn = FfnT<M>;
  using Moe = MoeT<M, V, E>;
  using Mla = MlaT<M, V>;
  using Dsa = DsaIndexerT<M, V>;
  using Dsv4 = Dsv4AttnT<M, V>;
  using Compressor = CompressorT<M, V>;
  using Dsv4Indexer = Dsv4IndexerT<M, V>;
  using Hyper = HyperT<M, V>;
  using Kda = KdaT<M, V, C>;
  V attn_norm;               // [D] pre-mixer norm
  V ffn_norm;                // [D] pre-FFN norm
  std::optional<Attn> attn;  // mixer: one of attn / gdn / mla
  std::optional<Gdn> gdn;
  std::optional<Kda> kda;  // Kimi delta attention (GLM-5's hybrid)
  std::optional<Mla> mla;
  std::optional<Dsa> dsa;                   // with mla, unless the layer reuses the previous layer's selection
  std::optional<Dsv4> dsv4;                 // DeepSeek-V4: the mixer,
  std::optional<Compressor> compressor;     // its compressor (CSA and HCA layers),
  std::optional<Dsv4Indexer> dsv4_indexer;  // its indexer (CSA layers),
  std::optional<Hyper> hc_attn, hc_ffn;     // the hyper-connections around the mixer and the FFN
  std::optional<Ffn> ffn;                   // feed-forward: one of ffn / moe
  std::optional<Moe> moe;
};

namespace schema_detail {

template <class T>
struct is_vector : std::false_type {};
template <class T, class A>
struct is_vector<std::vector<T, A>> : std::true_type {};

// Calls body(parts...) when the first optional is engaged, after engaging the others.
template <class Body, class First, class... Rest>
void with_part(Body&& body, First& first, Rest&... rest) {
  if (!first.has_value()) return;
  [[maybe_unused]] auto engage = [](auto& o) -> auto& {
    if constexpr (!std::is_const_v<std::remove_reference_t<decltype(o)>>)
      if (!o.has_value()) o.emplace();
    return *o;  // a const layer without the part: std::bad_optional_access, a programming error
  };
  body(*first, engage(rest)...);
}

template <class F>
auto prefixed(F& f, std::string prefix) {
  return [&f, prefix = std::move(prefix)](std::string_view name, auto&... t) { f(prefix + std::string(name), t...); };
}

// One part (AttnT, GdnT, FfnT) of each layer, names under `prefix`.
template <class F, class First, class... Rest>
void visit_part(F& f, std::string prefix, First& first, Rest&... rest) {
  auto g = prefixed(f, std::move(prefix));
  std::remove_cvref_t<First>::visit(g, first, rest...);
}

template <class F, class First, class... Rest>
void visit_experts(F&& f, First& first, Rest&... rest) {
  using T = std::remove_const_t<First>;
  if constexpr (is_vector<T>::value) {  // one FFN per expert: "experts.<e>.gate"
    auto fit = [&](auto& v) {
      if constexpr (!std::is_const_v<std::remove_reference_t<decltype(v)>>) v.resize(first.size());
    };
    (fit(rest), ...);
    for (size_t e = 0; e < first.size(); ++e) {
      auto g = prefixed(f, "experts." + std::to_string(e) + ".");
      std::remove_cvref_t<typename T::value_type>::visit(g, first[e], rest[e]...);
    }
  } else {  // stacked slabs: "experts.gate"
    visit_part(f, "experts.", first, rest...);
  }
}

}  // namespace schema_detail

// Visits every tensor of `layers` (one or more LayerT, possibly of different holder types) in
// lock step: f(name, field_of_layer0, field_of_layer1, ...). Names: attn_norm, ffn_norm,
// attn.wq, ..., gdn.conv, ..., mla.wq_a, ..., dsa.wk, ..., ffn.gate, ..., moe.router,
// moe.router_bias, moe.experts.gate (stacked) or
// moe.experts.<e>.gate (per expert), moe.shared.gate, ..., moe.shared_gate.
template <class F, class... L>
void for_each_tensor(F&& f, L&... layers) {
  using namespace schema_detail;
  f("attn_norm", layers.attn_norm...);
  f("ffn_norm", layers.ffn_norm...);
  with_part([&](auto&... p) { visit_part(f, "attn.", p...); }, layers.attn...);
  with_part([&](auto&... p) { visit_part(f, "gdn.", p...); }, layers.gdn...);
  with_part([&](auto&... p) { visit_part(f, "kda.", p...); }, layers.kda...);
  with_part([&](auto&... p) { visit_part(f, "mla.", p...); }, layers.mla...);
  with_part([&](auto&... p) { visit_part(f, "dsa.", p...); }, layers.dsa...);
  with_part([&](auto&... p) { visit_part(f, "dsv4.", p...); }, layers.dsv4...);
  with_part([&](auto&... p) { visit_part(f, "compressor.", p...); }, layers.compressor...);
  with_part([&](auto&... p) { visit_part(f, "dsv4_indexer.", p...); }, layers.dsv4_indexer...);
  with_part([&](auto&... p) { visit_part(f, "hc_attn.", p...); }, layers.hc_attn...);
  with_part([&](auto&... p) { visit_part(f, "hc_ffn.", p...); }, layers.hc_ffn...);
  with_part([&](auto&... p) { visit_part(f, "ffn.", p...); }, layers.ffn...);
  with_part(
      [&](auto&... p) {
        f("moe.router", p.router...);
        f("moe.router_bias", p.router_bias...);
        auto moe = prefixed(f, "moe.");
        visit_experts(moe, p.experts...);
        visit_part(f, "moe.shared.", p.shared...);
        f("moe.shared_gate", p.shared_gate...);
        f("moe.tid2eid", p.tid2eid...);
      },
      layers.moe...);
}

}  // namespace memra
