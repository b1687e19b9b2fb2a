// memra/backend.h — which engine runs a model for the tools: the CPU oracle or the GPU Model.
//
//   auto b = memra::open_backend(memra::parse_backend_request("auto"), *src);
//   std::cerr << "backend: " << b->describe() << "\n";   // "gpu (NVIDIA H200, sm_90)" / "cpu oracle"
//   auto seq = b->new_sequence(max_ctx);
//   std::vector<float> l = seq->prime(prompt);          // prefill; the last position's logits
//   int32_t t = memra::sample_token(l, spec);
//   l = seq->decode(t);                                   // or: t = seq->decode_greedy(t)
//
// Selection. `auto` takes the GPU when this build has the CUDA part (the memra_backend layer is
// compiled with MEMRA_HAVE_CUDA=1 only then) AND device_count() > 0 at run time; otherwise the
// CPU oracle. `gpu` insists: without the CUDA part or without a visible device it fails, naming
// which of the two is missing (gpu_backend_unavailable). `cpu` is always the oracle. A model the
// GPU cannot load (a storage type it lacks) is an error under `auto` too, not a silent fallback:
// the user asked for the default engine and should learn that it cannot run this file.
//
// What the GPU backend runs (memra/model.h):
//   forward_last  Model::forward_last;
//   forward_all   prime_cache(tokens[0]) then decode_step(tokens[i]) teacher-forced, one row per
//                 position. With the default arms prime_cache + decode_step == forward_last
//                 bitwise (model.h), so row i equals forward_last(tokens[:i+1]) and the last row
//                 equals forward_last(tokens);
//   Sequence      prime = prime_cache, decode = decode_step, decode_greedy = Model::decode_greedy
//                 (the argmax on the device, lowest index on ties: the same pick as
//                 argmax_lowest / sample_token at temperature 0 on the host).
// The CPU backend is memra::oracle::Model with the same calls (decode_greedy = argmax_lowest of
// decode_step's logits).
//
// A Sequence belongs to the Backend that made it and must not outlive it.
//
// provides: BackendRequest, parse_backend_request, gpu_backend_unavailable, BackendOptions,
//           Sequence, Backend, open_backend
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "memra/arms.h"
#include "memra/config.h"
#include "memra/source.h"

namespace memra {

enum class BackendRequest { Auto, Cpu, Gpu };

// "auto" | "cpu" | "gpu"; anything else fails naming the value.
BackendRequest parse_backend_request(std::string_view s);

// Why the GPU backend cannot run here, or nullopt when it can: the build has no CUDA part, or
// the CUDA runtime sees no device (no driver, no GPU, CUDA_VISIBLE_DEVICES hiding them).
std::optional<std::string> gpu_backend_unavailable();

struct BackendOptions {
  int threads = 0;  // CPU oracle worker threads (0: hardware concurrency); the GPU ignores it
  int device = 0;   // CUDA device index for the GPU backend
  Arms arms;        // the model's arms (tools pass Arms::from_env()); the oracle reads gdn_prefill
};

// One sequence's state (a KV/GDN cache) on a backend.
class Sequence {
 public:
  virtual ~Sequence() = default;
  virtual int64_t pos() const = 0;  // tokens already written
  // Runs `tokens` from pos() on; the last position's logits.
  virtual std::vector<float> prime(std::span<const int32_t> tokens) = 0;
  // One token at pos(); its logits (the distribution of the token after it).
  virtual std::vector<float> decode(int32_t token) = 0;
  // One token at pos(); the greedy next token (largest logit, lowest index on ties).
  virtual int32_t decode_greedy(int32_t token) = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual bool is_gpu() const = 0;
  virtual std::string name() const = 0;      // "cpu" / "gpu" (the JSON field of memra-logits)
  virtual std::string describe() const = 0;  // "cpu oracle" / "gpu (NVIDIA H200, sm_90)"
  virtual const ModelConfig& config() const = 0;
  virtual std::vector<float> forward_last(std::span<const int32_t> tokens) = 0;
  virtual std::vector<std::vector<float>> forward_all(std::span<const int32_t> tokens) = 0;
  virtual std::unique_ptr<Sequence> new_sequence(int64_t max_ctx) = 0;
};

// Loads the model from `src` on the requested backend (see the header comment). Errors:
// `gpu` where gpu_backend_unavailable() says why; any load error, prefixed with the backend.
std::unique_ptr<Backend> open_backend(BackendRequest req, const WeightSource& src,
                                      const BackendOptions& opt = {});

}  // namespace memra
