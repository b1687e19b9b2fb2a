// src/cuda/pipeline.cu — a model split into pipeline stages (memra/model.h LoadOptions;
// model_impl.h "pipeline stages").
//
// A stage is a Model::Impl over a layer range with its own engine (device and stream), weights
// and workspace; every cache keeps each layer's state on the device of the layer's stage and one
// copy of the position per stage. A step runs the stages in order: stage i's part is its layers'
// launches (the first stage's begin with the embedding, the last's end with the output norm, the
// lm_head and the token selection), then hand_over copies the rows' residual stream into stage
// i+1's workspace on stage i's stream and records an event that stage i+1's stream waits on.
// The launches of a stage's part are exactly the unsplit model's launches for those layers, on
// the same operand values, so a split changes no bit of any result (gate Pipeline); what it adds
// is the copies and, for a step, join(): the first stage waits for the last stage's previous
// work before it may overwrite a next stage's input again.
//
// Device selection: kernels launch only into a stream of the current device, so each stage's
// part begins with cudaSetDevice (StageDevice); copies and event waits work across devices.
#include <cuda_runtime.h>

#include <cmath>

#include "cuda/launch.cuh"
#include "cuda/model_impl.h"
#include "memra/cuda_check.h"
#include "memra/error.h"
#include "memra/rope_freq.h"

namespace memra {

namespace {

// Break::pipeline_drop_wait: a stall of the handing stage before its copies (clock64 cycles; a
// few milliseconds on any current GPU), so that a next stage that does not wait reads its input
// before it lands, every time.
__global__ void pipeline_stall_kernel(long long cycles) {
  const long long t0 = clock64();
  while (clock64() - t0 < cycles) {}
}

}  // namespace

std::vector<StagePlan> plan_stages(const ModelConfig& c, const LoadOptions& opt, int engine_device,
                                   std::span<const int64_t> layer_bytes, int64_t embed_bytes, int64_t head_bytes) {
  const std::vector<int> devices = opt.devices.empty() ? std::vector<int>{engine_device} : opt.devices;
  const int64_t n = static_cast<int64_t>(devices.size()), L = c.n_layer;
  if (devices[0] != engine_device)
    fail("LoadOptions: devices[0] = ", devices[0], " must be the engine's device (", engine_device, ")");
  for (int d : devices)
    if (d < 0) fail("LoadOptions: device ", d, " is not a device index");
  if (n > L) fail("LoadOptions: ", n, " stages for ", L, " layers (every stage holds at least one layer)");
  std::vector<int64_t> first(1, 0);
  if (!opt.split.empty()) {
    if (static_cast<int64_t>(opt.split.size()) != n - 1)
      fail("LoadOptions: split has ", opt.split.size(), " entries for ", n, " devices (want ", n - 1,
           ": the first layer of every stage after the first)");
    for (size_t i = 0; i < opt.split.size(); ++i) {
      const int64_t b = opt.split[i];
      if (b <= first.back() || b >= L)
        fail("LoadOptions: split[", i, "] = ", b, " (want ascending first layers in [1, ", L,
             "), every stage at least one layer)");
      first.push_back(b);
    }
  } else if (n > 1) {
    // Balance the weight bytes: stage k ends at the boundary whose running total (embedding,
    // layers) is nearest k/n of the whole (lm_head included), each stage keeping a layer.
    std::vector<int64_t> cum(static_cast<size_t>(L) + 1, embed_bytes);
    for (int64_t i = 0; i < L; ++i) cum[static_cast<size_t>(i) + 1] = cum[static_cast<size_t>(i)] + layer_bytes[i];
    const double total = static_cast<double>(cum.back() + head_bytes);
    for (int64_t k = 1; k < n; ++k) {
      const double want = total * static_cast<double>(k) / static_cast<double>(n);
      int64_t best = first.back() + 1;
      for (int64_t b = best; b <= L - (n - k); ++b)
        if (std::abs(static_cast<double>(cum[static_cast<size_t>(b)]) - want) <
            std::abs(static_cast<double>(cum[static_cast<size_t>(best)]) - want))
          best = b;
      first.push_back(best);
    }
  }
  std::vector<StagePlan> plan;
  for (int64_t k = 0; k < n; ++k)
    plan.push_back({devices[static_cast<size_t>(k)], first[static_cast<size_t>(k)],
                    k + 1 < n ? first[static_cast<size_t>(k) + 1] : L});
  return plan;
}

Model::Impl::~Impl() {
  for (cudaEvent_t ev : {handed, done, t_begin, t_end})
    if (ev) cudaEventDestroy(ev);
  for (BatchGraph& g : batch_graphs)
    if (g.exec) cudaGraphExecDestroy(g.exec);
}

const Model::Impl& Model::Impl::stage_of(int64_t li) const {
  const Impl* st = head;
  while (li >= st->l1 && st->next) st = st->next;
  return *st;
}

void Model::Impl::join() {
  if (!next) return;
  Impl& t = last();
  MEMRA_CUDA_CHECK(cudaEventRecord(t.done, t.s));
  MEMRA_CUDA_CHECK(cudaStreamWaitEvent(s, t.done, 0));
}

void Model::Impl::hand_over(int64_t rows) {
  Impl& n = *next;
  const int src = e->device(), dst = n.e->device();
  auto copy = [&](void* to, const void* from, size_t bytes) {
    MEMRA_CUDA_CHECK(cudaMemcpyPeerAsync(to, dst, from, src, bytes, s));
  };
  const size_t T = static_cast<size_t>(rows), D = static_cast<size_t>(c.n_embd);
  if (brk.pipeline_drop_wait)  // a canary's defect (Break): the copies land late
    cuda::launch_kernel("pipeline_stall_kernel", pipeline_stall_kernel, 1, 1, 0, s, 20'000'000LL);
  if (c.is_hyper())  // the hyper-connection streams are the residual
    copy(n.ws.hcx.data(), ws.hcx.data(), sizeof(float) * T * static_cast<size_t>(c.hc_mult) * D);
  else
    copy(n.ws.x.data(), ws.x.data(), sizeof(float) * T * D);
  copy(n.ws.tok.data(), ws.tok.data(), sizeof(int32_t) * T);  // DeepSeek-V4's hash routing reads them
  const size_t l = static_cast<size_t>(n.l0);
  if (c.layer_kind[l] == LayerKind::Mla && c.dsa_shared[l]) {  // its first layer reuses our last selection
    const size_t topk = static_cast<size_t>(c.dsa_sel_width());
    copy(n.ws.sel.data(), ws.sel.data(), sizeof(int32_t) * T * topk);
    copy(n.ws.n_sel.data(), ws.n_sel.data(), sizeof(int32_t) * T);
  }
  MEMRA_CUDA_CHECK(cudaEventRecord(handed, s));
  if (!brk.pipeline_drop_wait) MEMRA_CUDA_CHECK(cudaStreamWaitEvent(n.s, handed, 0));
  ++counters.handovers;
}

void Model::Impl::advance_pos_batch(std::span<Cache::Impl* const> cis) {
  // select_rows without specs: each row's position advanced, nothing selected (its x not read)
  const std::vector<std::optional<SampleSpec>> none(cis.size());
  std::vector<int64_t*> pos;
  for (Cache::Impl* ci : cis) pos.push_back(pos_of(*ci));
  select_rows(ws.x.data(), none, pos);
}

std::unique_ptr<Model::Impl> make_model(Engine& e, const ModelConfig& c, const LoadOptions& opt,
                                        const cuda::ModelBytes& bytes, const StageWeights& weights) {
  c.validate();
  cuda::check_kernel_limits(c);
  const std::vector<StagePlan> plan = plan_stages(c, opt, e.device(), bytes.layers, bytes.embed, bytes.head);
  const StageDevice keep;
  std::unique_ptr<Model::Impl> head;
  Model::Impl* prev = nullptr;
  for (size_t k = 0; k < plan.size(); ++k) {
    auto m = std::make_unique<Model::Impl>();
    if (k == 0) {
      m->e = &e;
    } else {
      m->own_engine = std::make_unique<Engine>(Engine::open(plan[k].device));
      m->e = m->own_engine.get();
    }
    m->s = stream_of(*m->e);
    m->c = c;
    m->stage = static_cast<int>(k);
    m->l0 = plan[k].l0;
    m->l1 = plan[k].l1;
    const StageDevice on(m->e->device());
    if (c.family == Family::DeepseekV4)  // the rotation tables, f64 as the oracle rotates (memra/rope_freq.h)
      for (bool compressed : {false, true}) {
        const std::vector<double> f = dsv4_rope_freq(c, compressed);
        DeviceBuffer<double>& d = m->dsv4_freq[compressed ? 1 : 0];
        d = DeviceBuffer<double>(*m->e, f.size());
        d.upload(f);
      }
    m->weights = weights(*m->e, {m->l0, m->l1});
    if (plan.size() > 1) {
      MEMRA_CUDA_CHECK(cudaEventCreateWithFlags(&m->handed, cudaEventDisableTiming));
      MEMRA_CUDA_CHECK(cudaEventCreateWithFlags(&m->done, cudaEventDisableTiming));
    }
    // m->arms stays Arms{}: the one default per arm (memra/arms.h), the same the tools and the
    // oracle start from.
    Model::Impl* raw = m.get();
    if (prev) {
      // peer access both ways between neighbours on different devices (the hand-over forward,
      // join's event back); where it is not possible the copies still run, staged by the driver
      const int a = prev->e->device(), b = raw->e->device();
      if (a != b)
        for (auto [from, to] : {std::pair{a, b}, std::pair{b, a}}) {
          int ok = 0;
          MEMRA_CUDA_CHECK(cudaDeviceCanAccessPeer(&ok, from, to));
          if (!ok) continue;
          MEMRA_CUDA_CHECK(cudaSetDevice(from));
          const cudaError_t err = cudaDeviceEnablePeerAccess(to, 0);
          if (err == cudaErrorPeerAccessAlreadyEnabled)
            cudaGetLastError();
          else
            MEMRA_CUDA_CHECK(err);
        }
      prev->next = raw;
      raw->head = head.get();
      head->others.push_back(std::move(m));
    } else {
      head = std::move(m);
    }
    prev = raw;
  }
  return head;
}

void Model::time_stages(bool on) {
  impl_->each_stage([&](Impl& st) {
    if (on && !st.t_begin) {
      const StageDevice dev(st.e->device());  // an event belongs to the device current at its creation
      MEMRA_CUDA_CHECK(cudaEventCreate(&st.t_begin));
      MEMRA_CUDA_CHECK(cudaEventCreate(&st.t_end));
    }
    st.timing = on;
    st.timed = false;
  });
}

std::vector<double> Model::stage_ms() const {
  std::vector<double> ms;
  for (const Impl* st = impl_.get(); st; st = st->next) {
    if (!st->timed) return {};
    MEMRA_CUDA_CHECK(cudaEventSynchronize(st->t_end));
    float t = 0;
    MEMRA_CUDA_CHECK(cudaEventElapsedTime(&t, st->t_begin, st->t_end));
    ms.push_back(t);
  }
  return ms;
}

std::vector<StageInfo> Model::stages() const {
  std::vector<StageInfo> out;
  for (const Impl* st = impl_.get(); st; st = st->next)
    out.push_back({st->e->device(), st->l0, st->l1, st->weights.weight_bytes()});
  return out;
}

}  // namespace memra
