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
// provides: AttnT, GdnT, FfnT, MoeT, LayerT, for_each_tensor
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

// Routed experts (top-k of the router's logits) plus an optional shared expert whose output is
// scaled by sigmoid(shared_gate . x).
template <class M, class V, class E>
struct MoeT {
  M router;        // [E, D]
  E experts;       // FfnT<M> of E slabs, or std::vector<FfnT<M>> of E experts
  FfnT<M> shared;  // empty when n_ff_shexp == 0
  V shared_gate;   // [D]
};

template <class M, class V, class C, class E>
struct LayerT {
  using Attn = AttnT<M, V>;
  using Gdn = GdnT<M, V, C>;
  using Ffn = FfnT<M>;
  using Moe = MoeT<M, V, E>;
  V attn_norm;               // [D] pre-mixer norm
  V ffn_norm;                // [D] pre-FFN norm
  std::optional<Attn> attn;  // mixer: one of attn / gdn
  std::optional<Gdn> gdn;
  std::optional<Ffn> ffn;  // feed-forward: one of ffn / moe
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
// attn.wq, ..., gdn.conv, ..., ffn.gate, ..., moe.router, moe.experts.gate (stacked) or
// moe.experts.<e>.gate (per expert), moe.shared.gate, ..., moe.shared_gate.
template <class F, class... L>
void for_each_tensor(F&& f, L&... layers) {
  using namespace schema_detail;
  f("attn_norm", layers.attn_norm...);
  f("ffn_norm", layers.ffn_norm...);
  with_part([&](auto&... p) { visit_part(f, "attn.", p...); }, layers.attn...);
  with_part([&](auto&... p) { visit_part(f, "gdn.", p...); }, layers.gdn...);
  with_part([&](auto&... p) { visit_part(f, "ffn.", p...); }, layers.ffn...);
  with_part(
      [&](auto&... p) {
        f("moe.router", p.router...);
        auto moe = prefixed(f, "moe.");
        visit_experts(moe, p.experts...);
        visit_part(f, "moe.shared.", p.shared...);
        f("moe.shared_gate", p.shared_gate...);
      },
      layers.moe...);
}

}  // namespace memra
