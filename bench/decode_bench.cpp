// Timing arms of the GPU model: decode at batch 1, batched decode (DecodeBatch/<shape>/B<n>) and
// prefill of 512 tokens, on realistic-shape
// synthetic models (fixture presets' configs, weights filled on the device: Model::synthetic),
// plus the streaming-read probe that defines the card's read-bandwidth roofline.
//
//   bench_decode --benchmark_out=decode.json --benchmark_out_format=json
//
// GPU time through CUDA events (UseManualTime). Counters: items_per_second = tokens/s,
// bytes_per_token (weight bytes one decode step streams), bytes_per_second, hbm_fraction
// (streamed bytes/s over the probe's measured read bandwidth, run first in the same program).
// Context (GPU, SM, driver, commit $MEMRA_COMMIT) goes into the JSON.
#include <benchmark/benchmark.h>
#include <cuda_profiler_api.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cuda/stream_read.cuh"
#include "cuda/timeline.h"
#include "memra/engine.h"
#include "memra/fixture.h"
#include "memra/model.h"

namespace {

using namespace memra;

Engine& engine() {
  static Engine e = Engine::open(0);
  return e;
}
cudaStream_t stream() { return reinterpret_cast<cudaStream_t>(engine().stream()); }

double g_read_bw = 0;  // bytes/s, from BM_StreamRead

struct Timer {
  cudaEvent_t a, b;
  Timer() { cudaEventCreate(&a); cudaEventCreate(&b); }
  ~Timer() { cudaEventDestroy(a); cudaEventDestroy(b); }
  void start() { cudaEventRecord(a, stream()); }
  double stop_s() {
    cudaEventRecord(b, stream());
    cudaEventSynchronize(b);
    float ms = 0;
    cudaEventElapsedTime(&ms, a, b);
    return ms / 1e3;
  }
};

void BM_StreamRead(benchmark::State& st) {
  const size_t bytes = size_t{4} << 30;
  DeviceBuffer<uint8_t> buf(engine(), bytes);
  buf.fill_bytes(0);
  DeviceBuffer<float> sink(engine(), 8 * static_cast<size_t>(engine().props().sm_count));
  Timer t;
  double best = 0;
  for (auto _ : st) {
    t.start();
    cuda::stream_read_run(buf.data(), bytes, sink.data(), engine().props().sm_count, stream());
    const double s = t.stop_s();
    st.SetIterationTime(s);
    best = std::max(best, static_cast<double>(bytes) / s);
  }
  g_read_bw = std::max(g_read_bw, best);
  st.SetBytesProcessed(static_cast<int64_t>(st.iterations() * bytes));
  st.counters["read_bw_GBps"] = best / 1e9;
}

struct Shape {
  const char* name;
  Family family;
  fixture::Preset preset;
  DType type;
};

const Shape kShapes[] = {
    {"qwen35-9b/q8_0", Family::Qwen35, fixture::Preset::Qwen35_9B, DType::Q8_0},
    {"qwen35-9b/nvfp4", Family::Qwen35, fixture::Preset::Qwen35_9B, DType::NVFP4},
    {"qwen35-35b-a3b/nvfp4", Family::Qwen35Moe, fixture::Preset::Qwen35_35B_A3B, DType::NVFP4},
    {"qwen3-0.6b/q8_0", Family::Qwen3, fixture::Preset::Qwen3_0_6B, DType::Q8_0},
};

// One model resident at a time (the 35B-A3B shape alone is ~20 GB).
Model& model_for(const Shape& s) {
  static std::string key;
  static std::unique_ptr<Model> m;
  if (key != s.name) {
    m.reset();
    fixture::FixtureSpec spec;
    spec.family = s.family;
    spec.preset = s.preset;
    m = std::make_unique<Model>(Model::synthetic(engine(), fixture::fixture_config(spec), s.type, 42));
    key = s.name;
  }
  return *m;
}

// "mmvq", "dp4a": eager decode with that mat-vec family; "graph": mmvq replayed as a CUDA graph
// ("graph_ctx32k": in a cache of 32768 positions; "graph_stream": through decode_greedy_n, 16
// tokens per call, each step's token fed on the device and one host wait per 16 — "graph" waits
// for every token on the host, as a loop of decode_greedy does);
// "graph_serial": the same graph with launch_overlap off (no programmatic dependent launch: each
// kernel starts after the previous one has drained). Every other arm as the environment sets it
// (Arms::from_env: MEMRA_FUSE_GDN_DECODE=off bench_decode ... times the unfused form), else its
// default.
void set_arm(Model& m, const char* arm) {
  const std::string a_name = arm;
  Arms a = Arms::from_env();
  a.decode_matvec = a_name == "dp4a" ? DecodeMatvec::dp4a : DecodeMatvec::mmvq;
  a.decode_graph = a_name == "graph" || a_name == "graph_serial" || a_name == "graph_ctx32k" || a_name == "graph_stream";
  a.launch_overlap = a_name != "graph_serial";
  m.set_arms(a);
}

void BM_Decode(benchmark::State& st, Shape s, const char* arm) {
  Model& m = model_for(s);
  set_arm(m, arm);
  const int64_t steps = st.max_iterations;
  // "graph_ctx32k": the same short context in a cache of 32768 positions (a server's cache): the
  // captured attention grid is sized for max_ctx, so this times what the splits past the context
  // cost
  const bool long_cache = std::string(arm) == "graph_ctx32k";
  constexpr int kStreamBatch = 16;
  const bool stream = std::string(arm) == "graph_stream";
  Cache c = m.new_cache(long_cache ? 32768 : 16 + steps + kStreamBatch + 9);
  std::vector<int32_t> prompt(16);
  for (int i = 0; i < 16; ++i) prompt[i] = 100 + i;
  m.prime_cache(prompt, c);
  int32_t tok = m.decode_greedy(1, c);  // outside the timing: a graph arm captures here
  Timer t;
  if (stream) {
    while (st.KeepRunningBatch(kStreamBatch)) {  // manual time per batch: the report is per token
      t.start();
      tok = m.decode_greedy_n(tok, kStreamBatch, c).back();
      st.SetIterationTime(t.stop_s());
    }
  } else {
    for (auto _ : st) {
      t.start();
      tok = m.decode_greedy(tok, c);
      st.SetIterationTime(t.stop_s());
    }
  }
  const double bpt = static_cast<double>(m.decode_bytes_per_token());
  st.SetItemsProcessed(st.iterations());
  st.SetBytesProcessed(static_cast<int64_t>(bpt * static_cast<double>(st.iterations())));
  st.counters["bytes_per_token"] = bpt;
  st.counters["tok_per_s"] = benchmark::Counter(static_cast<double>(st.iterations()), benchmark::Counter::kIsRate);
  st.counters["hbm_fraction"] = benchmark::Counter(g_read_bw > 0 ? bpt / g_read_bw : 0, benchmark::Counter::kIsIterationInvariantRate);
  st.counters["read_bw_GBps"] = g_read_bw / 1e9;
}

// B sequences decoded together: decode_step_batch_sampled with greedy specs, lean (the tokens
// come back, the logits stay on the device), eager, b1_fast on (B = 1 is decode_step). Each
// sequence primed with its own 16-token prompt. items_per_second = tokens/s over all sequences;
// us_per_step = the time of one batched step.
void BM_DecodeBatch(benchmark::State& st, Shape s, int B) {
  Model& m = model_for(s);
  set_arm(m, "mmvq");
  const int64_t steps = st.max_iterations;
  std::vector<Cache> caches;
  std::vector<Cache*> ptrs;
  std::vector<int32_t> toks;
  for (int b = 0; b < B; ++b) {
    caches.push_back(m.new_cache(16 + steps + 8));
    std::vector<int32_t> prompt(16);
    for (int i = 0; i < 16; ++i) prompt[i] = 100 + 37 * b + i;
    m.prime_cache(prompt, caches.back());
    toks.push_back(1 + b);
  }
  for (Cache& c : caches) ptrs.push_back(&c);
  const std::vector<std::optional<SampleSpec>> greedy(static_cast<size_t>(B), SampleSpec{});
  toks = m.decode_step_batch_sampled(toks, ptrs, greedy, true).tokens;  // outside the timing
  Timer t;
  for (auto _ : st) {
    t.start();
    toks = m.decode_step_batch_sampled(toks, ptrs, greedy, true).tokens;
    st.SetIterationTime(t.stop_s());
  }
  st.SetItemsProcessed(st.iterations() * B);
  st.counters["tok_per_s"] = benchmark::Counter(static_cast<double>(st.iterations() * B), benchmark::Counter::kIsRate);
  st.counters["batch"] = B;
}

// arm "mmvq": the default arms (token-tiled mat-vec, recurrent GDN: bit-identical to decode);
// "gemm": the fast prefill arms (tensor-core GEMM prefill_matmul = mma, chunked GDN);
// "mmvq_serial": mmvq with launch_overlap off
void BM_Prefill512(benchmark::State& st, Shape s, const char* arm) {
  Model& m = model_for(s);
  set_arm(m, "mmvq");
  Arms a = m.arms();
  const bool fast = std::string(arm) == "gemm";
  a.prefill_matmul = fast ? PrefillMatmul::mma : PrefillMatmul::mmvq;
  if (fast) a.gdn_prefill = GdnPrefill::chunked;
  a.launch_overlap = std::string(arm) != "mmvq_serial";
  m.set_arms(a);
  std::vector<int32_t> prompt(512);
  for (int i = 0; i < 512; ++i) prompt[i] = (i * 7919) % 100000;
  Timer t;
  for (auto _ : st) {
    t.start();
    auto l = m.forward_last(prompt);
    benchmark::DoNotOptimize(l.data());
    st.SetIterationTime(t.stop_s());
  }
  st.SetItemsProcessed(st.iterations() * 512);
  st.counters["tok_per_s"] = benchmark::Counter(static_cast<double>(st.iterations() * 512), benchmark::Counter::kIsRate);
}

void register_all() {
  benchmark::RegisterBenchmark("StreamRead/4GiB", BM_StreamRead)->UseManualTime()->Iterations(20)->Repetitions(3)
      ->Unit(benchmark::kMillisecond);
  for (const Shape& s : kShapes) {
    for (const char* arm : {"mmvq", "dp4a", "graph", "graph_serial", "graph_ctx32k", "graph_stream"})
      benchmark::RegisterBenchmark((std::string("Decode/") + s.name + "/" + arm).c_str(), BM_Decode, s, arm)
          ->UseManualTime()->Iterations(64)->Repetitions(9)->ReportAggregatesOnly(true)->Unit(benchmark::kMicrosecond);
    for (int B : {1, 4, 16, 32})
      benchmark::RegisterBenchmark((std::string("DecodeBatch/") + s.name + "/B" + std::to_string(B)).c_str(), BM_DecodeBatch, s, B)
          ->UseManualTime()->Iterations(16)->Repetitions(3)->ReportAggregatesOnly(true)->Unit(benchmark::kMicrosecond);
    for (const char* arm : {"mmvq", "mmvq_serial", "gemm"})
      benchmark::RegisterBenchmark((std::string("Prefill512/") + s.name + "/" + arm).c_str(), BM_Prefill512, s, arm)
          ->UseManualTime()->Iterations(1)->Repetitions(3)->ReportAggregatesOnly(true)->Unit(benchmark::kMillisecond);
  }
}

}  // namespace

// MEMRA_BENCH_PROFILE=<shape name>: no benchmarks; build that shape, prime it, then run 2 eager
// decode steps between cudaProfilerStart/Stop (for `ncu --profile-from-start off`: per-kernel
// times of exactly those launches, without the setup's). With MEMRA_BENCH_PROFILE_PREFILL=mmvq
// or gemm: one 512-token forward_last instead.
int profile_decode(const std::string& name) {
  for (const Shape& s : kShapes) {
    if (name != s.name) continue;
    Model& m = model_for(s);
    set_arm(m, "mmvq");
    if (const char* what = std::getenv("MEMRA_BENCH_PROFILE_PREFILL")) {  // "mmvq" or "gemm"
      Arms a = m.arms();
      a.prefill_matmul = std::string(what) == "gemm" ? PrefillMatmul::mma : PrefillMatmul::mmvq;
      m.set_arms(a);
      std::vector<int32_t> prompt(512);
      for (int i = 0; i < 512; ++i) prompt[i] = (i * 7919) % 100000;
      m.forward_last(prompt);  // warm-up (scratch allocation)
      engine().synchronize();
      cudaProfilerStart();
      m.forward_last(prompt);
      engine().synchronize();
      cudaProfilerStop();
      return 0;
    }
    Cache c = m.new_cache(64);
    std::vector<int32_t> prompt(16);
    for (int i = 0; i < 16; ++i) prompt[i] = 100 + i;
    m.prime_cache(prompt, c);
    int32_t tok = m.decode_greedy(1, c);
    engine().synchronize();
    cudaProfilerStart();
    for (int i = 0; i < 2; ++i) tok = m.decode_greedy(tok, c);
    engine().synchronize();
    cudaProfilerStop();
    return 0;
  }
  std::fprintf(stderr, "MEMRA_BENCH_PROFILE: no shape named %s\n", name.c_str());
  return 2;
}

// MEMRA_BENCH_TIMELINE=<shape name> (a build with -DMEMRA_TIMELINE=ON, cuda/timeline.h): no
// benchmarks; prime that shape, capture its decode step (arm MEMRA_BENCH_TIMELINE_ARM: graph, the
// default, or graph_serial), replay it 16 times while the kernels record, and print one CSV row
// per launch and replay: the launch's name and blocks, when its first block was resident
// (ready), when its dependencies resolved (go: first and last block), in ns from the replay's
// first go. go of the next launch minus go of this one is this launch's share of the step.
int timeline_decode(const std::string& name) {
  namespace tl = cuda::timeline;
  if (!tl::available()) {
    std::fprintf(stderr, "MEMRA_BENCH_TIMELINE: this build has no timeline (configure with -DMEMRA_TIMELINE=ON)\n");
    return 2;
  }
  for (const Shape& s : kShapes) {
    if (name != s.name) continue;
    Model& m = model_for(s);
    const char* arm = std::getenv("MEMRA_BENCH_TIMELINE_ARM");
    set_arm(m, arm ? arm : "graph");
    Cache c = m.new_cache(64);
    std::vector<int32_t> prompt(16);
    for (int i = 0; i < 16; ++i) prompt[i] = 100 + i;
    m.prime_cache(prompt, c);
    tl::launch_names().clear();
    tl::note_launches() = true;
    int32_t tok = m.decode_greedy(1, c);  // captures: the graph's launches, in order
    tl::note_launches() = false;
    const std::vector<std::string> names = tl::launch_names();
    for (int i = 0; i < 4; ++i) tok = m.decode_greedy(tok, c);
    constexpr int kReplays = 16;
    tl::start(1u << 22);
    for (int i = 0; i < kReplays; ++i) tok = m.decode_greedy(tok, c);
    std::vector<tl::Mark> marks = tl::stop();
    // A graph node keeps its grid id across replays: group by grid id, then split each node's
    // marks into the replays in time order (replays do not overlap; every replay of a node runs
    // the same number of blocks).
    std::sort(marks.begin(), marks.end(), [](const tl::Mark& a, const tl::Mark& b) {
      return a.grid != b.grid ? a.grid < b.grid : a.t_go < b.t_go;
    });
    std::vector<size_t> first;  // index of each node's first mark
    for (size_t i = 0; i < marks.size(); ++i)
      if (i == 0 || marks[i].grid != marks[i - 1].grid) first.push_back(i);
    first.push_back(marks.size());
    const size_t nodes = first.size() - 1;
    std::fprintf(stderr, "timeline %s: %zu marks, %zu grids, %zu launches named per step\n", s.name, marks.size(), nodes,
                 names.size());
    if (nodes != names.size()) {
      std::fprintf(stderr, "MEMRA_BENCH_TIMELINE: %zu grids recorded for %zu captured launches\n", nodes, names.size());
      return 1;
    }
    struct Row { uint64_t ready = UINT64_MAX, go = UINT64_MAX, last_go = 0; size_t blocks = 0; };
    std::vector<std::vector<Row>> rows(kReplays, std::vector<Row>(nodes));
    for (size_t k = 0; k < nodes; ++k) {
      const size_t n = first[k + 1] - first[k];
      if (n % kReplays != 0) {
        std::fprintf(stderr, "MEMRA_BENCH_TIMELINE: launch %zu (%s) recorded %zu blocks over %d replays\n", k, names[k].c_str(), n,
                     kReplays);
        return 1;
      }
      for (size_t i = 0; i < n; ++i) {
        const tl::Mark& mk = marks[first[k] + i];
        Row& r = rows[i / (n / kReplays)][k];
        r.ready = std::min(r.ready, mk.t_ready);
        r.go = std::min(r.go, mk.t_go);
        r.last_go = std::max(r.last_go, mk.t_go);
        ++r.blocks;
      }
    }
    std::printf("replay,launch,name,blocks,ready_ns,go_ns,last_go_ns\n");
    for (int r = 0; r < kReplays; ++r) {
      uint64_t origin = UINT64_MAX;
      for (const Row& x : rows[r]) origin = std::min(origin, x.go);
      for (size_t k = 0; k < nodes; ++k) {
        const Row& x = rows[r][k];
        std::printf("%d,%zu,%s,%zu,%lld,%lld,%lld\n", r, k, names[k].c_str(), x.blocks,
                    static_cast<long long>(x.ready) - static_cast<long long>(origin),
                    static_cast<long long>(x.go - origin), static_cast<long long>(x.last_go - origin));
      }
    }
    (void)tok;
    return 0;
  }
  std::fprintf(stderr, "MEMRA_BENCH_TIMELINE: no shape named %s\n", name.c_str());
  return 2;
}

int main(int argc, char** argv) {
  if (const char* prof = std::getenv("MEMRA_BENCH_PROFILE")) return profile_decode(prof);
  if (const char* tl_shape = std::getenv("MEMRA_BENCH_TIMELINE")) return timeline_decode(tl_shape);
  benchmark::Initialize(&argc, argv);
  const DeviceProps& p = engine().props();
  int driver = 0;
  cudaDriverGetVersion(&driver);
  benchmark::AddCustomContext("gpu", p.name);
  benchmark::AddCustomContext("sm", std::to_string(p.sm));
  benchmark::AddCustomContext("sm_count", std::to_string(p.sm_count));
  benchmark::AddCustomContext("driver", std::to_string(driver));
  const char* commit = std::getenv("MEMRA_COMMIT");
  benchmark::AddCustomContext("commit", commit ? commit : "unknown");
  register_all();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
