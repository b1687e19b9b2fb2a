// src/cuda/cache.cu — one sequence's state on the device (model_impl.h Cache::Impl): per
// attention layer K and V [max_ctx, KV*hd], per GDN layer the conv ring [K, conv_dim] and the
// recurrent state [nv, dk, dv] (f32), the position (host mirror and device copy), the greedy
// history, and the cache's captured decode graph.
#include "cuda/model_impl.h"
#include "memra/error.h"

namespace memra {

void Cache::Impl::reset() {
  has_last_logits = false;
  pos = 0;
  pos_dev.fill_bytes(0);
  for (auto& b : conv) b.fill_bytes(0);
  for (auto& b : state) b.fill_bytes(0);
}

Cache::Impl::~Impl() {
  if (exec) cudaGraphExecDestroy(exec);
}

Cache::Cache() = default;
Cache::Cache(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Cache::Cache(Cache&&) noexcept = default;
Cache& Cache::operator=(Cache&&) noexcept = default;
Cache::~Cache() = default;
int64_t Cache::max_ctx() const { return impl_ ? impl_->max_ctx : 0; }
int64_t Cache::pos() const { return impl_ ? impl_->pos : 0; }
std::vector<float> Cache::last_logits() const {
  if (!impl_ || !impl_->has_last_logits) return {};
  return impl_->last_logits.download();
}
void Cache::reset() {
  if (!impl_) fail("Cache::reset: empty cache (not made by Model::new_cache)");
  impl_->reset();
}

Cache Model::new_cache(int64_t max_ctx) const {
  if (max_ctx <= 0) fail("new_cache: max_ctx ", max_ctx, " must be > 0");
  const ModelConfig& c = impl_->c;
  Engine& e = *impl_->e;
  auto ci = std::make_unique<Cache::Impl>();
  ci->owner = impl_.get();
  ci->s = impl_->s;
  ci->max_ctx = max_ctx;
  ci->pos_dev = DeviceBuffer<int64_t>(e, 1);
  ci->greedy_hist = DeviceBuffer<int32_t>(e, static_cast<size_t>(max_ctx));
  ci->k.resize(static_cast<size_t>(c.n_layer));
  ci->v.resize(static_cast<size_t>(c.n_layer));
  ci->conv.resize(static_cast<size_t>(c.n_layer));
  ci->state.resize(static_cast<size_t>(c.n_layer));
  const size_t kv = static_cast<size_t>(max_ctx * c.n_head_kv * c.head_dim);
  for (int64_t i = 0; i < c.n_layer; ++i) {
    const size_t li = static_cast<size_t>(i);
    if (c.layer_kind[li] == LayerKind::Attention) {
      ci->k[li] = DeviceBuffer<float>(e, kv);
      ci->v[li] = DeviceBuffer<float>(e, kv);
    } else {
      ci->conv[li] =
          DeviceBuffer<float>(e, static_cast<size_t>(c.ssm_conv_kernel * c.ssm_conv_dim()));  // a ring (gdn.cuh)
      ci->state[li] = DeviceBuffer<float>(e, static_cast<size_t>(c.ssm_n_v_heads * c.ssm_d_k * c.ssm_d_v));
    }
  }
  ci->reset();
  return Cache(std::move(ci));
}

}  // namespace memra
