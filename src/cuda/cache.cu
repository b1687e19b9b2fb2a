// src/cuda/cache.cu — one sequence's state on the device (model_impl.h Cache::Impl): per
// attention layer K and V [max_ctx, KV*hd] (MLA: the expanded keys and values, and the DSA
// indexer's keys where the layer has an indexer; DeepSeek-V4: the raw keys and its compressors'
// projections and rows), per GDN layer the conv ring [K, conv_dim] and the
// recurrent state [nv, dk, dv] (f32), the position (host mirror and device copy), the greedy
// history, and the cache's captured decode graph; re-seating a layer's state and growing the
// context (Cache::reseat / grow: fresh allocations holding the same bytes).
#include "cuda/model_impl.h"
#include "memra/cuda_check.h"
#include "memra/error.h"

namespace memra {

void Cache::Impl::reset() {
  has_last_logits = false;
  pos = 0;
  for (auto& p : pos_dev) p.fill_bytes(0);
  for (auto& b : conv) b.fill_bytes(0);
  for (auto& b : state) b.fill_bytes(0);
}

uint64_t Cache::Impl::pointer_signature(const Model::Impl& m) const {
  uint64_t h = 0xcbf29ce484222325ull;
  auto mix = [&h](const void* p) {
    auto v = reinterpret_cast<uintptr_t>(p);
    for (int i = 0; i < 8; ++i, v >>= 8) h = (h ^ (v & 0xff)) * 0x100000001b3ull;
  };
  mix(pos_dev[static_cast<size_t>(m.stage)].data());
  if (!m.next) mix(greedy_hist.data());
  for (const auto* bufs : layer_buffers())
    for (int64_t li = m.l0; li < m.l1; ++li) mix((*bufs)[static_cast<size_t>(li)].data());
  return h;
}

namespace {

// A fresh allocation of `n` elements holding the first `keep` of `old`'s (stream-ordered copy).
template <class T>
DeviceBuffer<T> moved_copy(const Engine& e, cudaStream_t s, const DeviceBuffer<T>& old, size_t n, size_t keep) {
  DeviceBuffer<T> fresh(e, n);
  if (keep) MEMRA_CUDA_CHECK(cudaMemcpyAsync(fresh.data(), old.data(), keep * sizeof(T), cudaMemcpyDeviceToDevice, s));
  return fresh;
}

// The allocations a re-seat replaced (on stage m), once the copies out of them ran: freed, or
// under Break::graph_ignore_reseat kept alive and zeroed (model.h says why).
void retire(Cache::Impl& ci, const Model::Impl& m, std::vector<DeviceBuffer<float>> old) {
  MEMRA_CUDA_CHECK(cudaStreamSynchronize(m.s));
  if (!m.brk.graph_ignore_reseat) return;
  for (auto& b : old) {
    b.fill_bytes(0);
    ci.retired.push_back(std::move(b));
  }
  MEMRA_CUDA_CHECK(cudaStreamSynchronize(m.s));
}

}  // namespace

Cache::Impl::~Impl() {
  for (Graph& g : graphs)
    if (g.exec) cudaGraphExecDestroy(g.exec);
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

void Cache::reseat(int64_t layer) {
  if (!impl_) fail("Cache::reseat: empty cache (not made by Model::new_cache)");
  Impl& ci = *impl_;
  if (layer < 0 || layer >= ci.owner->c.n_layer)
    fail("Cache::reseat: layer ", layer, " is not a layer (0..", ci.owner->c.n_layer - 1, ")");
  const Model::Impl& m = ci.owner->stage_of(layer);  // the layer's state lives on its stage's device
  const size_t li = static_cast<size_t>(layer);
  std::vector<DeviceBuffer<float>> old;
  for (auto* bufs : ci.layer_buffers()) {
    DeviceBuffer<float>& b = (*bufs)[li];
    if (!b.data()) continue;
    DeviceBuffer<float> fresh = moved_copy(*m.e, m.s, b, b.size(), b.size());
    std::swap(b, fresh);
    old.push_back(std::move(fresh));
  }
  retire(ci, m, std::move(old));
}

void Cache::grow(int64_t max_ctx) {
  if (!impl_) fail("Cache::grow: empty cache (not made by Model::new_cache)");
  Impl& ci = *impl_;
  if (max_ctx < ci.max_ctx) fail("Cache::grow: max_ctx ", max_ctx, " is below the cache's ", ci.max_ctx);
  if (max_ctx == ci.max_ctx) return;
  const size_t pos = static_cast<size_t>(ci.pos);
  std::vector<DeviceBuffer<float>> old;
  for (auto* bufs : ci.layer_buffers()) {
    if (bufs == &ci.conv || bufs == &ci.state) continue;  // fixed size: a ring and a state
    for (size_t li = 0; li < bufs->size(); ++li) {
      DeviceBuffer<float>& b = (*bufs)[li];
      if (!b.data()) continue;
      const Model::Impl& m = ci.owner->stage_of(static_cast<int64_t>(li));
      const size_t width = b.size() / static_cast<size_t>(ci.max_ctx);  // one position's floats
      DeviceBuffer<float> fresh = moved_copy(*m.e, m.s, b, static_cast<size_t>(max_ctx) * width, pos * width);
      std::swap(b, fresh);
      old.push_back(std::move(fresh));
    }
  }
  const Model::Impl& t = ci.owner->last();
  DeviceBuffer<int32_t> hist = moved_copy(*t.e, t.s, ci.greedy_hist, static_cast<size_t>(max_ctx), pos);
  std::swap(ci.greedy_hist, hist);
  ci.max_ctx = max_ctx;
  // the copies read the old allocations: done before they go
  for (const Model::Impl* st = ci.owner; st; st = st->next) MEMRA_CUDA_CHECK(cudaStreamSynchronize(st->s));
}

Cache Model::new_cache(int64_t max_ctx) const {
  if (max_ctx <= 0) fail("new_cache: max_ctx ", max_ctx, " must be > 0");
  const ModelConfig& c = impl_->c;
  auto ci = std::make_unique<Cache::Impl>();
  ci->owner = impl_.get();
  ci->max_ctx = max_ctx;
  for (const Impl* st = impl_.get(); st; st = st->next) ci->pos_dev.emplace_back(*st->e, 1);
  ci->graphs.resize(ci->pos_dev.size());
  ci->greedy_hist = DeviceBuffer<int32_t>(*impl_->last().e, static_cast<size_t>(max_ctx));
  for (auto* bufs : ci->layer_buffers()) bufs->resize(static_cast<size_t>(c.n_layer));
  const size_t n = static_cast<size_t>(max_ctx);
  for (int64_t i = 0; i < c.n_layer; ++i) {
    Engine& e = *impl_->stage_of(i).e;  // a layer's state on its stage's device
    auto per_pos = [&](int64_t width) { return DeviceBuffer<float>(e, n * static_cast<size_t>(width)); };
    const size_t li = static_cast<size_t>(i);
    const LayerKind kind = c.layer_kind[li];
    if (kind == LayerKind::Dsv4) {
      ci->k[li] = per_pos(c.head_dim);  // the raw keys (= values)
      const Dsv4Attn form = c.dsv4_attn[li];
      if (form != Dsv4Attn::Sliding) {
        const int64_t cw = form == Dsv4Attn::Csa ? 2 * c.head_dim : c.head_dim;
        ci->comp_kv[li] = per_pos(cw);
        ci->comp_gate[li] = per_pos(cw);
        ci->comp_rows[li] = per_pos(c.head_dim);
      }
      if (form == Dsv4Attn::Csa) {
        ci->idx_kv[li] = per_pos(2 * c.dsa_head_dim);
        ci->idx_gate[li] = per_pos(2 * c.dsa_head_dim);
        ci->idx_rows[li] = per_pos(c.dsa_head_dim);
      }
    } else if (kind == LayerKind::Attention || kind == LayerKind::Mla) {
      ci->k[li] = per_pos(c.kv_k_width());
      ci->v[li] = per_pos(c.kv_v_width());
      if (kind == LayerKind::Mla) ci->lat[li] = per_pos(c.mla_kv_rank + c.n_rot);
      if (kind == LayerKind::Mla && !c.dsa_shared[li]) {
        ci->index_k[li] = per_pos(c.dsa_head_dim);
        if (c.dsa_kpool > 0) {  // GLM-5's hybrid: the pool gates per position, a key per closed pool
          ci->index_gate[li] = per_pos(c.dsa_head_dim);
          ci->pool_rows[li] = per_pos(c.dsa_head_dim);  // sized per position, as grow() copies
        }
      }
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
