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
  // Moves layer `layer`'s state (K and V of an attention layer; conv ring and recurrent state of
  // a Gated-DeltaNet layer) to fresh device allocations holding the same bytes and frees the old
  // ones: what a snapshot restore or a reuse pool's rehydrate does to a live sequence. Nothing a
  // step computes changes; a captured decode graph baked the old pointers in, sees its pointer
  // signature change and re-captures (graph_recapture on; Counters::recaptures) or latches this
  // cache to eager (off). Errors: an empty cache, a layer outside [0, n_layer).
  void reseat(int64_t layer);
  // A larger context: K/V and the greedy history move to allocations of `max_ctx` positions
  // holding the positions written so far; the state and the position are unchanged. A captured
  // decode graph re-captures (or latches), its attention grid having been sized for the old
  // max_ctx. Errors: an empty cache, max_ctx below the current one (equal: nothing happens).
  void grow(int64_t max_ctx);
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
