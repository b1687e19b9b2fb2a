// memra/cache.h — Cache: one sequence's state on the GPU, made by Model::new_cache.
//
// Per full-attention layer K and V [max_ctx, n_head_kv * head_dim] f32 (post-norm, post-RoPE
// keys, as the oracle's cache); per Gated-DeltaNet layer the conv state [K, conv_dim] (a ring:
// slot p % K holds the conv input of position p, the same last K-1 inputs the oracle keeps
// oldest first; src/cuda/gdn.cuh says why) and the recurrent state [n_v, d_k, d_v] f32; the
// position (tokens already written). A cache belongs to the model that made it: using it with
// another model is an error.
//
// provides: Cache
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

namespace memra {

class Model;

class Cache {
 public:
  Cache();
  Cache(Cache&&) noexcept;
  Cache& operator=(Cache&&) noexcept;
  ~Cache();

  int64_t max_ctx() const;
  int64_t pos() const;  // tokens already written
  // Back to position 0 with zeroed conv and recurrent state (K/V beyond pos are never read).
  void reset();
  // The logits a lean sampled step left on the device for this sequence
  // (Model::decode_step_batch_sampled with lean), copied to the host; empty when there are none
  // (a later step of any other kind drops them).
  std::vector<float> last_logits() const;

  struct Impl;
  Impl* impl() const { return impl_.get(); }

 private:
  friend class Model;
  explicit Cache(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace memra
