// src/cuda/model.cu — the GPU model's entry points (memra/model.h); the parts they drive are
// listed in model_impl.h.
#include <cuda_runtime.h>

#include <cmath>
#include <cstring>

#include "cuda/model_impl.h"
#include "memra/error.h"
#include "memra/finite.h"
#include "memra/rope_freq.h"

namespace memra {

// --- results ----------------------------------------------------------------------------------------

// A greedy step whose logits held a NaN or Inf (argmax.cuh: the token -1). The cache holds that
// step; what follows it is not meaningful.
void Model::Impl::fail_nonfinite(const char* what, int64_t pos, int64_t sequence) {
  tok_dev = -1;
  fail_non_finite({.call = what, .layer = "lm_head", .sequence = sequence}, pos);
}

// The last single-sequence step's logits row; `pos` is the position of the token it follows.
std::vector<float> Model::Impl::fetch_logits(const char* what, int64_t pos) {
  std::vector<float> l = ws.logits.download();
  check_finite(l, c.n_vocab, {.call = what, .layer = "lm_head", .pos0 = pos});
  return l;
}

// --- construction -----------------------------------------------------------------------------------

Model::Model(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Model::Model(Model&&) noexcept = default;
Model& Model::operator=(Model&&) noexcept = default;
Model::~Model() = default;

const ModelConfig& Model::config() const { return impl_->c; }
const Arms& Model::arms() const { return impl_->arms; }
void Model::set_arms(const Arms& a) {
  impl_->each_stage([&](Impl& st) { st.arms = a; });
}

Model Model::from_raw(Engine& e, const ModelConfig& c, const RawWeights& w, const LoadOptions& opt) {
  return Model(make_model(e, c, opt, cuda::model_bytes(c, w),
                          [&](Engine& se, cuda::LayerRange r) { return cuda::upload_weights(se, c, w, r); }));
}

Model Model::load(Engine& e, const WeightSource& src, const LoadOptions& opt) {
  const ModelConfig c = ModelConfig::from_source(src);
  // before reading the weights: a shape the kernels cannot run fails fast, naming the field
  with_context(src.path(), [&] { cuda::check_kernel_limits(c); });
  const RawWeights w = load_raw_weights(src, c);
  return with_context(src.path(), [&] { return from_raw(e, c, w, opt); });
}

std::optional<std::string> Model::unsupported(const ModelConfig& c) {
  try {
    cuda::check_kernel_limits(c);
  } catch (const Error& err) { return std::string(err.what()); }
  return std::nullopt;
}

Model Model::synthetic(Engine& e, const ModelConfig& c, DType t, uint64_t seed, const LoadOptions& opt) {
  return Model(make_model(e, c, opt, cuda::model_bytes(c, t),
                          [&](Engine& se, cuda::LayerRange r) { return cuda::synthetic_weights(se, c, t, seed, r); }));
}

// --- steps -------------------------------------------------------------------------------------------
// The results of a step sit on the last stage (the only one of an unsplit model).

std::vector<float> Model::forward_last(std::span<const int32_t> tokens) {
  if (tokens.empty()) fail("forward_last: empty prompt");
  Cache c = new_cache(static_cast<int64_t>(tokens.size()));
  impl_->run(tokens, *c.impl());
  impl_->ledger_drain();
  return impl_->last().fetch_logits("forward_last", c.pos() - 1);
}

Prime Model::prime_cache(std::span<const int32_t> tokens, Cache& cache) {
  impl_->check_cache(cache);
  impl_->run(tokens, *cache.impl());
  impl_->ledger_drain();
  Prime p;
  p.logits = impl_->last().fetch_logits("prime_cache", cache.pos() - 1);
  p.hidden = impl_->last().ws.hn.download();
  return p;
}

Step Model::decode_step(int32_t token, Cache& cache) {
  impl_->check_cache(cache);
  impl_->decode(token, *cache.impl(), false);
  impl_->ledger_drain();
  Step s;
  s.logits = impl_->last().fetch_logits("decode_step", cache.pos() - 1);
  s.hidden = impl_->last().ws.hn.download();
  return s;
}

int32_t Model::decode_greedy(int32_t token, Cache& cache) {
  impl_->check_cache(cache);
  impl_->decode(token, *cache.impl(), true);
  int32_t out = 0;
  copy_to_host(&out, impl_->last().ws.amax.data(), sizeof(out), impl_->last().e->stream());
  impl_->ledger_drain();
  if (out < 0) impl_->fail_nonfinite("decode_greedy", cache.pos() - 1);
  impl_->tok_dev = out;
  return out;
}

std::vector<int32_t> Model::decode_greedy_n(int32_t token, int64_t n, Cache& cache) {
  impl_->check_cache(cache);
  Cache::Impl& ci = *cache.impl();
  if (n < 1) fail("decode_greedy_n: n = ", n, " (want >= 1)");
  if (ci.pos + n > ci.max_ctx)
    fail("decode_greedy_n: ", n, " tokens from position ", ci.pos, " exceed the cache (max_ctx ", ci.max_ctx, ")");
  const int64_t p0 = ci.pos;
  impl_->each_stage([&](Impl& st) { st.ledger_reserve(n * st.moe_layers()); });  // drained once, after all n steps
  int64_t i = 0;
  if (impl_->tok_dev != token) {  // else the device holds it already: every step is fed there
    impl_->decode(token, ci, true);
    i = 1;
  }
  // One graph launch per step: graphs of 4 or 8 captured steps measured slower (docs/PERF.md).
  for (; i < n; ++i) impl_->decode(0, ci, true, /*device_token=*/true);
  std::vector<int32_t> out(static_cast<size_t>(n));
  copy_to_host(out.data(), ci.greedy_hist.data() + p0, sizeof(int32_t) * static_cast<size_t>(n),
               impl_->last().e->stream());
  impl_->ledger_drain();
  for (int64_t k = 0; k < n; ++k)
    if (out[static_cast<size_t>(k)] < 0) impl_->fail_nonfinite("decode_greedy_n", p0 + k);
  impl_->tok_dev = out.back();
  return out;
}

Counters Model::counters() const {
  Counters n;
  for (const Impl* st = impl_.get(); st; st = st->next) {
    const Counters& c = st->counters;
    n.captures += c.captures;
    n.replays += c.replays;
    n.recaptures += c.recaptures;
    n.latched += c.latched;
    n.gemm_launches += c.gemm_launches;
    n.gemm_routed_launches += c.gemm_routed_launches;
    n.gdn_chunked_launches += c.gdn_chunked_launches;
    n.w4a4_launches += c.w4a4_launches;
    n.mla_latent_launches += c.mla_latent_launches;
    n.flash_attn_launches += c.flash_attn_launches;
    n.nvfp4_pair32_launches += c.nvfp4_pair32_launches;
    n.bulk_tile_launches += c.bulk_tile_launches;
    n.batch_steps += c.batch_steps;
    n.handovers += c.handovers;
    n.batched_cores += c.batched_cores;
    n.batch_replays += c.batch_replays;
  }
  return n;
}

void Model::set_gemm_min_tokens(int64_t min_tokens) {
  if (min_tokens < 1) fail("set_gemm_min_tokens: min_tokens ", min_tokens, " must be >= 1");
  impl_->each_stage([&](Impl& st) { st.gemm_min_tokens = min_tokens; });
}

// --- the canaries' breaks ------------------------------------------------------------------------------

bool Break::any() const {
  return scale_layer >= 0 || w4a4_drop_block_scale || bias_id >= 0 || graph_ignore_reseat || pipeline_drop_wait ||
         mla_latent_wrong_head || bulk_tile_reorder;
}

const Break& Model::breaks() const { return impl_->brk; }

void Model::set_break(const Break& b) {
  Impl& m = *impl_;
  if (b.scale_layer < -1 || b.scale_layer >= m.c.n_layer)
    fail("set_break: scale_layer ", b.scale_layer, " is not a layer (0..", m.c.n_layer - 1, ", or -1 = off)");
  if (!std::isfinite(b.scale_factor)) fail("set_break: scale_factor ", b.scale_factor, " is not finite");
  if (b.bias_id < -1 || b.bias_id >= m.c.n_vocab)
    fail("set_break: bias_id ", b.bias_id, " is not a token (0..", m.c.n_vocab - 1, ", or -1 = off)");
  if (!std::isfinite(b.bias_value)) fail("set_break: bias_value ", b.bias_value, " is not finite");
  const Break& o = m.brk;
  const bool same = o.scale_layer == b.scale_layer && o.scale_factor == b.scale_factor &&
                    o.w4a4_drop_block_scale == b.w4a4_drop_block_scale && o.bias_id == b.bias_id &&
                    o.bias_value == b.bias_value && o.graph_ignore_reseat == b.graph_ignore_reseat &&
                    o.pipeline_drop_wait == b.pipeline_drop_wait &&
                    o.mla_latent_wrong_head == b.mla_latent_wrong_head && o.bulk_tile_reorder == b.bulk_tile_reorder;
  // Captured decode graphs baked the old break's launches in: stale now (decode_graph.cu), so
  // re-captured on their next step, or, with graph_recapture off, that cache latches to eager.
  m.each_stage([&](Impl& st) {
    st.brk = b;
    if (!same) ++st.ws.gen;
  });
}

int64_t Model::weight_bytes() const {
  int64_t n = 0;
  for (const Impl* st = impl_.get(); st; st = st->next) n += st->weights.weight_bytes();
  return n;
}

int64_t Model::decode_bytes_per_token() const {
  int64_t n = 0;  // a stage holds the embedding and lm_head only where it runs them
  for (const Impl* st = impl_.get(); st; st = st->next)
    n += st->weights.decode_bytes_per_token(impl_->c.n_expert_used, st->l0 == 0, st->next == nullptr);
  return n;
}

}  // namespace memra
