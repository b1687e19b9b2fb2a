// The tools' backends (memra/backend.h): the CPU oracle always; the GPU Model only in a build
// with the CUDA part (MEMRA_HAVE_CUDA=1 is set on this layer alone, so no other host code needs
// to know whether CUDA was built).
#include "memra/backend.h"

#include <string>
#include <utility>

#include "memra/error.h"
#include "memra/oracle.h"
#include "memra/sampling.h"

#if MEMRA_HAVE_CUDA
#include "memra/cache.h"
#include "memra/engine.h"
#include "memra/model.h"
#endif

namespace memra {

BackendRequest parse_backend_request(std::string_view s) {
  if (s == "auto") return BackendRequest::Auto;
  if (s == "cpu") return BackendRequest::Cpu;
  if (s == "gpu") return BackendRequest::Gpu;
  fail("--backend must be auto, cpu or gpu, not '", s, "'");
}

std::optional<std::string> gpu_backend_unavailable() {
#if MEMRA_HAVE_CUDA
  if (device_count() == 0)
    return std::string("no CUDA device found (this build has the CUDA part, but the CUDA runtime sees 0 devices: "
                       "no GPU, no driver, or CUDA_VISIBLE_DEVICES hides them)");
  return std::nullopt;
#else
  return std::string("this build has no CUDA part (it was configured without nvcc or with MEMRA_CUDA=OFF)");
#endif
}

namespace {

// --- CPU: the oracle ---------------------------------------------------------------------

class CpuSequence final : public Sequence {
 public:
  CpuSequence(const oracle::Model& m, int64_t max_ctx) : m_(m), cache_(m.new_cache(max_ctx)) {}
  int64_t pos() const override { return cache_.pos; }
  std::vector<float> prime(std::span<const int32_t> tokens) override { return m_.prime(tokens, cache_); }
  std::vector<float> decode(int32_t token) override { return m_.decode_step(token, cache_).logits; }
  int32_t decode_greedy(int32_t token) override { return argmax_lowest(decode(token)); }

 private:
  const oracle::Model& m_;
  oracle::Cache cache_;
};

class CpuBackend final : public Backend {
 public:
  // `note`: why the CPU serves a request that would have preferred the GPU (empty otherwise).
  CpuBackend(oracle::Model m, std::string note) : m_(std::move(m)), note_(std::move(note)) {}
  bool is_gpu() const override { return false; }
  std::string name() const override { return "cpu"; }
  std::string describe() const override { return note_.empty() ? "cpu oracle" : "cpu oracle (" + note_ + ")"; }
  const ModelConfig& config() const override { return m_.config(); }
  std::vector<float> forward_last(std::span<const int32_t> tokens) override { return m_.forward_last(tokens); }
  std::vector<std::vector<float>> forward_all(std::span<const int32_t> tokens) override {
    return m_.forward_all(tokens);
  }
  std::unique_ptr<Sequence> new_sequence(int64_t max_ctx) override {
    return std::make_unique<CpuSequence>(m_, max_ctx);
  }

 private:
  oracle::Model m_;
  std::string note_;
};

std::unique_ptr<Backend> open_cpu(const WeightSource& src, const BackendOptions& opt, std::string note = "") {
  oracle::Options o;
  o.threads = opt.threads;
  o.gdn_prefill = opt.arms.gdn_prefill;  // the one arm the oracle has
  return with_context("cpu backend",
                      [&] { return std::make_unique<CpuBackend>(oracle::Model::load(src, o), std::move(note)); });
}

// --- GPU: memra::Model ---------------------------------------------------------------------

#if MEMRA_HAVE_CUDA
class GpuSequence final : public Sequence {
 public:
  GpuSequence(Model& m, int64_t max_ctx) : m_(m), cache_(m.new_cache(max_ctx)) {}
  int64_t pos() const override { return cache_.pos(); }
  std::vector<float> prime(std::span<const int32_t> tokens) override {
    return std::move(m_.prime_cache(tokens, cache_).logits);
  }
  std::vector<float> decode(int32_t token) override { return std::move(m_.decode_step(token, cache_).logits); }
  int32_t decode_greedy(int32_t token) override { return m_.decode_greedy(token, cache_); }

 private:
  Model& m_;
  Cache cache_;
};

class GpuBackend final : public Backend {
 public:
  // The Model keeps a pointer to the Engine: both live here, and the Backend never moves (it is
  // only handed out behind a unique_ptr).
  GpuBackend(const BackendOptions& opt, const WeightSource& src)
      : engine_(Engine::open(opt.device)), model_(Model::load(engine_, src)) {
    model_.set_arms(opt.arms);
  }
  GpuBackend(const GpuBackend&) = delete;
  GpuBackend& operator=(const GpuBackend&) = delete;

  bool is_gpu() const override { return true; }
  std::string name() const override { return "gpu"; }
  std::string describe() const override {
    const DeviceProps& p = engine_.props();
    return "gpu (" + p.name + ", sm_" + std::to_string(p.sm) + ")";
  }
  const ModelConfig& config() const override { return model_.config(); }
  std::vector<float> forward_last(std::span<const int32_t> tokens) override { return model_.forward_last(tokens); }
  // Teacher-forced rows (see the header): one prime of the first token, then one decode step per
  // token, so every row is computed by the production decode path.
  std::vector<std::vector<float>> forward_all(std::span<const int32_t> tokens) override {
    if (tokens.empty()) fail("forward_all: no tokens");
    std::vector<std::vector<float>> rows;
    Cache c = model_.new_cache(static_cast<int64_t>(tokens.size()));
    rows.reserve(tokens.size());
    rows.push_back(std::move(model_.prime_cache(tokens.first(1), c).logits));
    for (size_t i = 1; i < tokens.size(); ++i) rows.push_back(std::move(model_.decode_step(tokens[i], c).logits));
    return rows;
  }
  std::unique_ptr<Sequence> new_sequence(int64_t max_ctx) override {
    return std::make_unique<GpuSequence>(model_, max_ctx);
  }

 private:
  Engine engine_;
  Model model_;
};

std::unique_ptr<Backend> open_gpu(const WeightSource& src, const BackendOptions& opt) {
  return with_context("gpu backend (device " + std::to_string(opt.device) + ")",
                      [&] { return std::make_unique<GpuBackend>(opt, src); });
}
#endif

}  // namespace

std::unique_ptr<Backend> open_backend(BackendRequest req, const WeightSource& src, const BackendOptions& opt) {
  if (req == BackendRequest::Cpu) return open_cpu(src, opt);
  const std::optional<std::string> why = gpu_backend_unavailable();
  if (why) {
    if (req == BackendRequest::Gpu) fail("--backend gpu: ", *why);
    return open_cpu(src, opt);
  }
#if MEMRA_HAVE_CUDA
  if (req == BackendRequest::Auto) {
    // A model the GPU kernels do not run (GLM-5's MLA so far) is served by the oracle.
    if (auto no = Model::unsupported(ModelConfig::from_source(src))) return open_cpu(src, opt, "the GPU: " + *no);
  }
  return open_gpu(src, opt);
#else
  fail("unreachable: gpu_backend_unavailable() said yes in a build without CUDA");
#endif
}

}  // namespace memra
