// Timing arms of the GPU model: decode at batch 1, at a 4096-token context in both MLA forms
// (DecodeLong/<shape>/<form>, GLM-5 shapes), batched decode (DecodeBatch/<shape>/B<n>, eager, and
// DecodeBatch/<shape>/graph/B<n>),
// prefill (Prefill<T>/<shape>/<arm>, T = 128, 512, 2048, 8192), one attention layer's prefill
// kernel alone (Attention<T>/<model>/<form>: split or flash), pipeline stages
// (PipelineDecode/<shape>/<arm>: per-stage time and hand-over cost) and the TeacherForced gate's
// step, on realistic-shape synthetic models (fixture presets' configs, weights filled on the
// device: Model::synthetic), plus the streaming-read probe that defines the card's read-bandwidth roofline.
//
//   bench_decode --benchmark_out=decode.json --benchmark_out_format=json
//
// GPU time through CUDA events (UseManualTime). Counters: items_per_second = tokens/s,
// bytes_per_token (weight bytes one decode step streams), bytes_per_second, hbm_fraction
// (streamed bytes/s over the read bandwidth the probe measures before any benchmark runs).
//
// A run identifies itself (the JSON's context): GPU, SM, SM count, clocks, driver and runtime,
// memra's commit (MEMRA_COMMIT, else `git describe` of the source tree, else the configure-time
// commit), memra's build type, the model source, and every arm of the Arms table as set by the
// environment (arm.<field>). Every benchmark's label names its model shape, dtype and the arms
// it actually ran with (to_string(Arms)).
//
// Paired arms (eager vs graph decode, W4A8 vs W4A4 prefill, the GEMM vs the mat-vec prefill)
// are compared on medians of 9 repetitions whose order is interleaved at random (Google
// Benchmark's --benchmark_enable_random_interleaving, on by default here; pass =false to turn it
// off), so a clock or thermal drift during the run falls on both arms alike. The JSON keeps
// every repetition (memra-dash compare runs its U test on them); the console shows aggregates.
#include <benchmark/benchmark.h>
#include <cuda_profiler_api.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "cuda/attention.cuh"
#include "cuda/stream_read.cuh"
#include "cuda/timeline.h"
#include "memra/cuda_check.h"
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

// CUDA events on the engine's stream, made and recorded with the engine's device current (a
// split model's step may leave another device current); a failing call is an error, never a
// silent 0 ms.
struct Timer {
  cudaEvent_t a, b;
  Timer() {
    MEMRA_CUDA_CHECK(cudaSetDevice(engine().device()));
    MEMRA_CUDA_CHECK(cudaEventCreate(&a));
    MEMRA_CUDA_CHECK(cudaEventCreate(&b));
  }
  ~Timer() {
    cudaEventDestroy(a);
    cudaEventDestroy(b);
  }
  void start() {
    MEMRA_CUDA_CHECK(cudaSetDevice(engine().device()));
    MEMRA_CUDA_CHECK(cudaEventRecord(a, stream()));
  }
  double stop_s() {
    MEMRA_CUDA_CHECK(cudaSetDevice(engine().device()));
    MEMRA_CUDA_CHECK(cudaEventRecord(b, stream()));
    MEMRA_CUDA_CHECK(cudaEventSynchronize(b));
    float ms = 0;
    MEMRA_CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
    return ms / 1e3;
  }
};

// One pass of 16-byte loads over a 4 GiB buffer (stream_read.cuh); bytes/s.
double read_pass(const DeviceBuffer<uint8_t>& buf, DeviceBuffer<float>& sink, Timer& t) {
  t.start();
  cuda::stream_read_run(buf.data(), buf.size(), sink.data(), engine().props().sm_count, stream());
  return static_cast<double>(buf.size()) / t.stop_s();
}

// The card's read roofline, measured before any benchmark runs (the best of 20 passes): with
// interleaved repetitions a decode arm may run before StreamRead, and its hbm_fraction needs it.
void measure_read_bw() {
  DeviceBuffer<uint8_t> buf(engine(), size_t{4} << 30);
  buf.fill_bytes(0);
  DeviceBuffer<float> sink(engine(), 8 * static_cast<size_t>(engine().props().sm_count));
  Timer t;
  for (int i = 0; i < 20; ++i) g_read_bw = std::max(g_read_bw, read_pass(buf, sink, t));
}

void BM_StreamRead(benchmark::State& st) {
  DeviceBuffer<uint8_t> buf(engine(), size_t{4} << 30);
  buf.fill_bytes(0);
  DeviceBuffer<float> sink(engine(), 8 * static_cast<size_t>(engine().props().sm_count));
  Timer t;
  double best = 0;
  for (auto _ : st) {
    const double bw = read_pass(buf, sink, t);
    st.SetIterationTime(static_cast<double>(buf.size()) / bw);
    best = std::max(best, bw);
  }
  g_read_bw = std::max(g_read_bw, best);
  st.SetBytesProcessed(static_cast<int64_t>(st.iterations() * buf.size()));
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
    {"glm-5/nvfp4", Family::GlmDsa, fixture::Preset::Glm5, DType::NVFP4},
    {"deepseek-v4-flash/nvfp4", Family::DeepseekV4, fixture::Preset::Dsv4Flash, DType::NVFP4},
    {"glm-5.3-flash/nvfp4", Family::Glm5Next, fixture::Preset::Glm5Flash, DType::NVFP4},
};

// Every shape's model stays resident once built (~55 GB for the five: the 35B-A3B shape alone is
// ~20 GB, GLM-5's four layers ~18 GB), so interleaved repetitions of different shapes do not
// rebuild models between them.
Model& model_for(const Shape& s) {
  static std::map<std::string, std::unique_ptr<Model>> models;
  std::unique_ptr<Model>& m = models[s.name];
  if (!m) {
    fixture::FixtureSpec spec;
    spec.family = s.family;
    spec.preset = s.preset;
    m = std::make_unique<Model>(Model::synthetic(engine(), fixture::fixture_config(spec), s.type, 42));
  }
  return *m;
}

// "qwen35-9b/q8_0 prefill_act=w4a8 decode_matvec=mmvq ...": what one benchmark ran.
void label(benchmark::State& st, const Shape& s, const Model& m) {
  st.SetLabel(std::string(s.name) + " " + to_string(m.arms()));
}

// "mmvq", "dp4a": eager decode with that mat-vec family; "graph": mmvq replayed as a CUDA graph
// ("graph_ctx32k": in a cache of 32768 positions; "graph_stream": through decode_greedy_n, 16
// tokens per call, each step's token fed on the device and one host wait per 16 — "graph" waits
// for every token on the host, as a loop of decode_greedy does);
// "graph_serial": the same graph with launch_overlap off (no programmatic dependent launch: each
// kernel starts after the previous one has drained); "graph_stream_pair32": graph_stream under
// nvfp4_dot = pair32 (NVFP4 shapes). Every other arm as the environment sets it
// (Arms::from_env: MEMRA_FUSE_GDN_DECODE=off bench_decode ... times the unfused form), else its
// default.
void set_arm(Model& m, const char* arm) {
  const std::string a_name = arm;
  Arms a = Arms::from_env();
  a.decode_matvec = a_name == "dp4a" ? DecodeMatvec::dp4a : DecodeMatvec::mmvq;
  a.decode_graph = a_name.starts_with("graph");
  a.launch_overlap = a_name != "graph_serial";
  if (a_name.ends_with("_pair32")) a.nvfp4_dot = Nvfp4Dot::pair32;
  m.set_arms(a);
}

void BM_Decode(benchmark::State& st, Shape s, const char* arm) {
  Model& m = model_for(s);
  set_arm(m, arm);
  label(st, s, m);
  const int64_t steps = st.max_iterations;
  // "graph_ctx32k": the same short context in a cache of 32768 positions (a server's cache): the
  // captured attention grid is sized for max_ctx, so this times what the splits past the context
  // cost
  const bool long_cache = std::string(arm) == "graph_ctx32k";
  constexpr int kStreamBatch = 16;
  const bool stream = std::string(arm).starts_with("graph_stream");
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

// DecodeLong/<shape>/<form> (MLA shapes): graph decode steps after a 4096-token prompt (primed
// with the tensor-core GEMM prefill, outside the timing), MLA's attention in the expanded or the
// absorbed latent form (mla_decode). The selection keeps index_topk positions, so each step's
// attention reads that many rows per MLA layer: n_head (head_dim + d_v) floats each expanded,
// kv_rank + n_rot latent.
void BM_DecodeLong(benchmark::State& st, Shape s, const char* form) {
  Model& m = model_for(s);
  set_arm(m, "graph");
  Arms a = m.arms();
  a.mla_decode = std::string(form) == "latent" ? MlaDecode::latent : MlaDecode::expanded;
  a.prefill_matmul = PrefillMatmul::mma;
  m.set_arms(a);
  label(st, s, m);
  constexpr int kContext = 4096;
  const int64_t latent0 = m.counters().mla_latent_launches;  // the model outlives this benchmark
  Cache c = m.new_cache(kContext + st.max_iterations + 8);
  std::vector<int32_t> prompt(kContext);
  for (int i = 0; i < kContext; ++i) prompt[i] = static_cast<int32_t>((int64_t{i} * 7919) % m.config().n_vocab);
  m.prime_cache(prompt, c);
  int32_t tok = m.decode_greedy(1, c);  // captures
  Timer t;
  for (auto _ : st) {
    t.start();
    tok = m.decode_greedy(tok, c);
    st.SetIterationTime(t.stop_s());
  }
  st.SetItemsProcessed(st.iterations());
  st.counters["tok_per_s"] = benchmark::Counter(static_cast<double>(st.iterations()), benchmark::Counter::kIsRate);
  st.counters["context"] = kContext;
  // this benchmark's latent attentions (a graph counts its layers once, at capture): 0 expanded
  st.counters["mla_latent_launches"] = static_cast<double>(m.counters().mla_latent_launches - latent0);
}

// B sequences, each primed with its own 16-token prompt in a cache of 16 + `steps` + 8 positions,
// and their next tokens; step() is one lean greedy batched step.
struct PrimedBatch {
  std::vector<Cache> caches;
  std::vector<Cache*> ptrs;
  std::vector<int32_t> toks;
  std::vector<std::optional<SampleSpec>> greedy;
  PrimedBatch(Model& m, int B, int64_t steps) : greedy(static_cast<size_t>(B), SampleSpec{}) {
    for (int b = 0; b < B; ++b) {
      caches.push_back(m.new_cache(16 + steps + 8));
      std::vector<int32_t> prompt(16);
      for (int i = 0; i < 16; ++i) prompt[i] = 100 + 37 * b + i;
      m.prime_cache(prompt, caches.back());
      toks.push_back(1 + b);
    }
    for (Cache& c : caches) ptrs.push_back(&c);
  }
  void step(Model& m) { toks = m.decode_step_batch_sampled(toks, ptrs, greedy, true).tokens; }
};

// B sequences decoded together: decode_step_batch_sampled with greedy specs, lean (the tokens
// come back, the logits stay on the device), eager or (arm "graph", B >= 2) replayed from the
// batch size's graph, b1_fast on (B = 1 is decode_step). Each sequence primed with its own
// 16-token prompt; the untimed first step captures the graph. items_per_second = tokens/s over
// all sequences; us_per_step = the time of one batched step.
void BM_DecodeBatch(benchmark::State& st, Shape s, const char* arm, int B) {
  Model& m = model_for(s);
  set_arm(m, arm);
  label(st, s, m);
  PrimedBatch batch(m, B, st.max_iterations);
  batch.step(m);  // outside the timing
  Timer t;
  for (auto _ : st) {
    t.start();
    batch.step(m);
    st.SetIterationTime(t.stop_s());
  }
  st.SetItemsProcessed(st.iterations() * B);
  st.counters["tok_per_s"] = benchmark::Counter(static_cast<double>(st.iterations() * B), benchmark::Counter::kIsRate);
  st.counters["batch"] = B;
}

// arm "mmvq": the default arms (token-tiled mat-vec, recurrent GDN, W4A8: bit-identical to
// decode); "gemm": the fast prefill arms (tensor-core GEMM prefill_matmul = mma, chunked GDN);
// "flash": gemm with the flash attention (prefill_attn = flash; the Qwen shapes, whose attention
// layers it serves);
// "mmvq_serial": mmvq with launch_overlap off; "w4a4" (NVFP4 shapes): mmvq with the W4A4
// activation contract (prefill_act = w4a4), the test arm of the ArmFork gate.
void set_prefill_arm(Model& m, const std::string& name) {
  set_arm(m, "mmvq");
  Arms a = m.arms();
  const bool fast = name == "gemm" || name == "flash";
  a.prefill_matmul = fast ? PrefillMatmul::mma : PrefillMatmul::mmvq;
  if (fast) a.gdn_prefill = GdnPrefill::chunked;
  a.prefill_attn = name == "flash" ? PrefillAttn::flash : PrefillAttn::split;
  a.launch_overlap = name != "mmvq_serial";
  a.prefill_act = name == "w4a4" ? PrefillAct::w4a4 : PrefillAct::w4a8;
  m.set_arms(a);
}

void BM_Prefill(benchmark::State& st, Shape s, const char* arm, int T) {
  Model& m = model_for(s);
  set_prefill_arm(m, arm);
  label(st, s, m);
  std::vector<int32_t> prompt(static_cast<size_t>(T));
  for (int i = 0; i < T; ++i) prompt[i] = (i * 7919) % 100000;
  // One cache for every iteration, reset outside the timed span (as llama-bench clears its KV
  // cache between repetitions): the figure is the prefill, not the allocation of a new cache.
  Cache c = m.new_cache(T);
  Timer t;
  for (auto _ : st) {
    c.reset();
    t.start();
    Prime p = m.prime_cache(prompt, c);
    benchmark::DoNotOptimize(p.logits.data());
    st.SetIterationTime(t.stop_s());
  }
  st.SetItemsProcessed(st.iterations() * T);
  st.counters["tok_per_s"] = benchmark::Counter(static_cast<double>(st.iterations() * T), benchmark::Counter::kIsRate);
  st.counters["prompt_tokens"] = T;
}

// One step of the TeacherForced gate (GATES.md 3): decode_step of the banked token (never the
// model's own pick) with the whole logits row back on the host, where the gate compares it with
// the bank. Eager, default arms.
void BM_TeacherForcedStep(benchmark::State& st, Shape s) {
  Model& m = model_for(s);
  set_arm(m, "mmvq");
  label(st, s, m);
  Cache c = m.new_cache(16 + st.max_iterations + 1);
  std::vector<int32_t> prompt(16);
  for (int i = 0; i < 16; ++i) prompt[i] = 100 + i;
  m.prime_cache(prompt, c);
  int32_t forced = 1000;
  Timer t;
  for (auto _ : st) {
    t.start();
    Step step = m.decode_step(forced, c);
    benchmark::DoNotOptimize(step.logits.data());
    st.SetIterationTime(t.stop_s());
    forced = (forced * 7 + 13) % 100000;  // a banked trajectory's next token
  }
  st.SetItemsProcessed(st.iterations());
  st.counters["tok_per_s"] = benchmark::Counter(static_cast<double>(st.iterations()), benchmark::Counter::kIsRate);
}

// Pipeline stages (memra/model.h LoadOptions): greedy graph decode of the model whole
// ("whole"), split in two stages on this GPU ("stages1gpu": two streams, the hand-over a
// device-local copy) and over GPUs 0 and 1 ("stages2gpu": a peer copy; registered where two are
// visible), at the automatic split. Counters: tok_per_s; stage<i>_us, each stage's part of a step
// (its graph, CUDA events on its stream); handover_us, the step's time outside the stages' parts
// (the hand-overs, join and the host's launches between them).
Model& pipeline_model(const Shape& s, const std::string& arm) {
  static std::map<std::string, std::unique_ptr<Model>> models;
  std::unique_ptr<Model>& m = models[std::string(s.name) + "/" + arm];
  if (!m) {
    fixture::FixtureSpec spec;
    spec.family = s.family;
    spec.preset = s.preset;
    LoadOptions o;
    if (arm == "stages1gpu") o.devices = {0, 0};
    if (arm == "stages2gpu") o.devices = {0, 1};
    m = std::make_unique<Model>(Model::synthetic(engine(), fixture::fixture_config(spec), s.type, 42, o));
  }
  return *m;
}

void BM_PipelineDecode(benchmark::State& st, Shape s, const char* arm) {
  Model& m = pipeline_model(s, arm);
  set_arm(m, "graph");
  label(st, s, m);
  const std::vector<StageInfo> stages = m.stages();
  Cache c = m.new_cache(16 + st.max_iterations + 9);
  std::vector<int32_t> prompt(16);
  for (int i = 0; i < 16; ++i) prompt[i] = 100 + i;
  m.prime_cache(prompt, c);
  int32_t tok = m.decode_greedy(1, c);  // captures the graphs outside the timing
  m.time_stages(true);
  std::vector<double> stage_s(stages.size(), 0.0);
  double total_s = 0;
  Timer t;
  for (auto _ : st) {
    t.start();
    tok = m.decode_greedy(tok, c);
    const double step = t.stop_s();
    st.SetIterationTime(step);
    total_s += step;
    const std::vector<double> ms = m.stage_ms();
    for (size_t i = 0; i < ms.size(); ++i) stage_s[i] += ms[i] / 1e3;
  }
  m.time_stages(false);
  const double n = static_cast<double>(st.iterations());
  double inside = 0;
  for (size_t i = 0; i < stages.size(); ++i) {
    st.counters["stage" + std::to_string(i) + "_us"] = stage_s[i] / n * 1e6;
    st.counters["stage" + std::to_string(i) + "_layers"] =
        static_cast<double>(stages[i].end_layer - stages[i].first_layer);
    inside += stage_s[i];
  }
  st.counters["handover_us"] = (total_s - inside) / n * 1e6;
  st.SetItemsProcessed(st.iterations());
  st.counters["tok_per_s"] = benchmark::Counter(n, benchmark::Counter::kIsRate);
}

// One layer's prefill attention alone (cuda/attention.cuh) over T queries at positions 0..T-1 of a
// T-row cache, with the shape's heads (n_head, n_head_kv, head_dim) and random q, K and V:
// "split" (attention_run, the default arm's split-KV kernel and combine) or "flash"
// (flash_attention_run, the prefill_attn = flash arm's kernel). What Prefill<T>/<shape>/flash
// gains over gemm is this difference times the model's attention layers. Counter tflops: the
// causal q.k and p.v multiply-adds (2 flops each) per second of kernel time.
void BM_Attention(benchmark::State& st, Shape s, const char* form, int T) {
  fixture::FixtureSpec spec;
  spec.family = s.family;
  spec.preset = s.preset;
  const ModelConfig c = fixture::fixture_config(spec);
  const int H = static_cast<int>(c.n_head), KV = static_cast<int>(c.n_head_kv), hd = static_cast<int>(c.head_dim);
  const bool flash = std::string(form) == "flash";
  if (flash && !cuda::flash_attention_supports(hd)) {
    st.SkipWithError(("the flash form has no head_dim " + std::to_string(hd)).c_str());
    return;
  }
  const size_t nq = static_cast<size_t>(T) * H * hd, nkv = static_cast<size_t>(T) * KV * hd;
  std::mt19937 rng(17);
  auto random = [&](size_t n, float r) {
    std::uniform_real_distribution<float> u(-r, r);
    std::vector<float> v(n);
    for (float& x : v) x = u(rng);
    return v;
  };
  DeviceBuffer<float> q(engine(), nq), k(engine(), nkv), v(engine(), nkv), out(engine(), nq),
      work(engine(), static_cast<size_t>(cuda::attention_workspace_floats(T, T, H, hd)));
  DeviceBuffer<int64_t> pos0(engine(), 1);
  q.upload(random(nq, 0.3f));
  k.upload(random(nkv, 1.0f));
  v.upload(random(nkv, 1.0f));
  pos0.upload(std::vector<int64_t>{0});
  cuda::AttnParams p;
  p.q = q.data();
  p.k_cache = k.data();
  p.v_cache = v.data();
  p.out = out.data();
  p.work = work.data();
  p.pos0 = pos0.data();
  p.ctx_bound = T;
  p.T = T;
  p.H = H;
  p.KV = KV;
  p.hd = hd;
  p.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(hd)));
  st.SetLabel(std::string(s.name) + " H " + std::to_string(H) + " KV " + std::to_string(KV) + " head_dim " +
              std::to_string(hd) + " " + form);
  Timer t;
  for (auto _ : st) {
    t.start();
    if (flash)
      cuda::flash_attention_run(p, stream());
    else
      cuda::attention_run(p, stream());
    st.SetIterationTime(t.stop_s());
  }
  const double n = static_cast<double>(st.iterations());
  const double fmas = 2.0 * H * hd * (static_cast<double>(T) * (T + 1) / 2);  // q.k and p.v per visible key
  st.SetItemsProcessed(st.iterations() * T);
  st.counters["tok_per_s"] = benchmark::Counter(n * T, benchmark::Counter::kIsRate);
  st.counters["tflops"] = benchmark::Counter(n * 2 * fmas / 1e12, benchmark::Counter::kIsRate);
}

void register_all() {
  benchmark::RegisterBenchmark("StreamRead/4GiB", BM_StreamRead)->UseManualTime()->Iterations(20)->Repetitions(3)
      ->Unit(benchmark::kMillisecond);
  for (const Shape& s : kShapes) {
    const std::string shape = s.name;
    std::vector<const char*> decode_arms = {"mmvq", "dp4a", "graph", "graph_serial", "graph_ctx32k", "graph_stream"};
    if (s.type == DType::NVFP4) decode_arms.push_back("graph_stream_pair32");
    for (const char* arm : decode_arms)
      benchmark::RegisterBenchmark(("Decode/" + shape + "/" + arm).c_str(), BM_Decode, s, arm)
          ->UseManualTime()
          ->Iterations(64)
          ->Repetitions(9)
          ->DisplayAggregatesOnly(true)
          ->Unit(benchmark::kMicrosecond);
    for (const char* arm : {"mmvq", "graph"})
      for (int B : {1, 4, 8, 16, 32, 64}) {
        const bool graph = std::string(arm) == "graph";
        if (graph && B == 1) continue;  // B = 1 is decode_step: Decode/<shape>/graph
        const std::string name = "DecodeBatch/" + shape + (graph ? "/graph" : "") + "/B" + std::to_string(B);
        benchmark::RegisterBenchmark(name.c_str(), BM_DecodeBatch, s, arm, B)
            ->UseManualTime()
            ->Iterations(16)
            ->Repetitions(9)
            ->DisplayAggregatesOnly(true)
            ->Unit(benchmark::kMicrosecond);
      }
    // Prefill<T>: every arm at 512 tokens; the default and the fast arms at 128 and 2048, the fast
    // arms alone at 8192 (the prefill length curve; the default arm is flat in T).
    const bool qwen_attention = s.family == Family::Qwen3 || s.family == Family::Qwen3Next ||
                                s.family == Family::Qwen35 || s.family == Family::Qwen35Moe;
    std::vector<const char*> prefill_arms = {"mmvq", "mmvq_serial", "gemm"};
    if (qwen_attention) prefill_arms.push_back("flash");
    if (s.type == DType::NVFP4) prefill_arms.push_back("w4a4");
    for (int T : {128, 512, 2048, 8192})
      for (const char* arm : prefill_arms) {
        const std::string arm_name = arm;
        const bool fast = arm_name == "gemm" || arm_name == "flash";
        if (T != 512 && arm_name != "mmvq" && !fast) continue;
        if (T == 8192 && !fast) continue;
        benchmark::RegisterBenchmark(("Prefill" + std::to_string(T) + "/" + shape + "/" + arm).c_str(), BM_Prefill, s,
                                     arm, T)
            ->UseManualTime()
            ->Iterations(1)
            ->Repetitions(9)
            ->DisplayAggregatesOnly(true)
            ->Unit(benchmark::kMillisecond);
      }
    if (s.family == Family::Qwen35 || s.family == Family::Qwen3)
      for (const char* arm : {"whole", "stages1gpu", "stages2gpu"}) {
        if (std::string(arm) == "stages2gpu" && device_count() < 2) continue;
        benchmark::RegisterBenchmark(("PipelineDecode/" + shape + "/" + arm).c_str(), BM_PipelineDecode, s, arm)
            ->UseManualTime()
            ->Iterations(64)
            ->Repetitions(9)
            ->DisplayAggregatesOnly(true)
            ->Unit(benchmark::kMicrosecond);
      }
    if (s.family == Family::GlmDsa || s.family == Family::Glm5Next)
      for (const char* form : {"expanded", "latent"})
        benchmark::RegisterBenchmark(("DecodeLong/" + shape + "/" + form).c_str(), BM_DecodeLong, s, form)
            ->UseManualTime()
            ->Iterations(64)
            ->Repetitions(5)
            ->DisplayAggregatesOnly(true)
            ->Unit(benchmark::kMicrosecond);
    // Attention<T>/<model>/<form>: one attention layer's prefill kernel alone, once per model (its
    // dtypes share the heads)
    const bool first_of_model = std::find_if(std::begin(kShapes), std::end(kShapes),
                                             [&](const Shape& o) { return o.preset == s.preset; }) == &s;
    if (qwen_attention && first_of_model)
      for (int T : {512, 2048, 8192})
        for (const char* form : {"split", "flash"}) {
          const std::string model = shape.substr(0, shape.find('/'));
          benchmark::RegisterBenchmark(("Attention" + std::to_string(T) + "/" + model + "/" + form).c_str(),
                                       BM_Attention, s, form, T)
              ->UseManualTime()
              ->Iterations(8)
              ->Repetitions(5)
              ->DisplayAggregatesOnly(true)
              ->Unit(benchmark::kMicrosecond);
        }
    benchmark::RegisterBenchmark(("TeacherForcedStep/" + shape).c_str(), BM_TeacherForcedStep, s)
        ->UseManualTime()
        ->Iterations(32)
        ->Repetitions(9)
        ->DisplayAggregatesOnly(true)
        ->Unit(benchmark::kMicrosecond);
  }
}

// memra's commit: MEMRA_COMMIT, else the source tree's `git describe --always --dirty` (a run
// from a checkout), else the commit CMake saw at configure time (a copied build).
std::string memra_commit() {
  if (const char* c = std::getenv("MEMRA_COMMIT"); c && *c) return c;
  const std::string cmd =
      std::string("git -C '") + MEMRA_SOURCE_DIR + "' describe --always --dirty --abbrev=7 2>/dev/null";
  if (std::FILE* p = popen(cmd.c_str(), "r")) {
    char buf[128] = {};
    const bool got = std::fgets(buf, sizeof buf, p) != nullptr;
    const int rc = pclose(p);
    std::string s = got ? buf : "";
    while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
    if (rc == 0 && !s.empty()) return s;
  }
  return std::string(MEMRA_CONFIGURED_COMMIT) + " (configure time)";
}

// A device attribute, or "unknown" where the driver does not report it.
std::string device_attribute(cudaDeviceAttr attr, int device, double scale, const char* unit) {
  int v = 0;
  if (cudaDeviceGetAttribute(&v, attr, device) != cudaSuccess || v <= 0) {
    cudaGetLastError();
    return "unknown";
  }
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.0f %s", v * scale, unit);
  return buf;
}

// Everything that identifies the run (see the header).
void add_context() {
  const DeviceProps& p = engine().props();
  int driver = 0, runtime = 0;
  cudaDriverGetVersion(&driver);
  cudaRuntimeGetVersion(&runtime);
  benchmark::AddCustomContext("gpu", p.name);
  benchmark::AddCustomContext("sm", std::to_string(p.sm));
  benchmark::AddCustomContext("sm_count", std::to_string(p.sm_count));
  benchmark::AddCustomContext("sm_clock_max", device_attribute(cudaDevAttrClockRate, engine().device(), 1e-3, "MHz"));
  benchmark::AddCustomContext("memory_clock_max",
                              device_attribute(cudaDevAttrMemoryClockRate, engine().device(), 1e-3, "MHz"));
  benchmark::AddCustomContext("driver", std::to_string(driver));
  benchmark::AddCustomContext("cuda_runtime", std::to_string(runtime));
  benchmark::AddCustomContext("commit", memra_commit());
  benchmark::AddCustomContext("memra_build_type", MEMRA_BUILD_TYPE);
  benchmark::AddCustomContext("model_source",
                              "Model::synthetic (fixture presets' shapes, seed 42; no file, no sha256)");
  const Arms env = Arms::from_env();
  for (const auto& [field, value] : env.fields())
    benchmark::AddCustomContext("arm." + std::string(field), std::string(value));
}

}  // namespace

// MEMRA_BENCH_PROFILE=<shape name>: no benchmarks; build that shape, prime it, then run 2 eager
// decode steps between cudaProfilerStart/Stop (for `ncu --profile-from-start off`: per-kernel
// times of exactly those launches, without the setup's). With MEMRA_BENCH_PROFILE_PREFILL=<a
// Prefill benchmark arm> (mmvq, gemm, flash, ...: the same arms): one 512-token forward_last instead; with MEMRA_BENCH_PROFILE_BATCH=<B>: one eager
// batched step of B sequences (BM_DecodeBatch's step, after one untimed step).
int profile_decode(const std::string& name) {
  for (const Shape& s : kShapes) {
    if (name != s.name) continue;
    Model& m = model_for(s);
    set_arm(m, "mmvq");
    if (const char* what = std::getenv("MEMRA_BENCH_PROFILE_PREFILL")) {  // a Prefill arm: mmvq, gemm, flash, ...
      set_prefill_arm(m, what);
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
    if (const char* batch = std::getenv("MEMRA_BENCH_PROFILE_BATCH")) {
      const int B = std::atoi(batch);
      if (B < 1 || B > 256) {
        std::fprintf(stderr, "MEMRA_BENCH_PROFILE_BATCH: %s is not a batch size in 1..256\n", batch);
        return 2;
      }
      PrimedBatch primed(m, B, 2);
      primed.step(m);
      engine().synchronize();
      cudaProfilerStart();
      primed.step(m);
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

// One launch of a recorded timeline: its first block resident (ready), its dependencies resolved
// (go: first and last block), its blocks, and how they lay over the SMs.
struct TimelineRow {
  uint64_t ready = UINT64_MAX, go = UINT64_MAX, last_go = 0;
  size_t blocks = 0;
  std::map<uint32_t, int> per_sm;  // blocks on each SM
  void add(const cuda::timeline::Mark& mk) {
    ready = std::min(ready, mk.t_ready);
    go = std::min(go, mk.t_go);
    last_go = std::max(last_go, mk.t_go);
    ++blocks;
    ++per_sm[mk.sm];
  }
  int max_per_sm() const {
    int most = 0;
    for (const auto& [sm, n] : per_sm) most = std::max(most, n);
    return most;
  }
};

// MEMRA_BENCH_TIMELINE=<shape name> (a build with -DMEMRA_TIMELINE=ON, cuda/timeline.h): no
// benchmarks; prime that shape, capture its decode step (arm MEMRA_BENCH_TIMELINE_ARM: graph, the
// default, or graph_serial), replay it 16 times while the kernels record, and print one CSV row
// per launch and replay: the launch's name and blocks, the SMs they ran on (sms) and the most on
// one (max_per_sm), when its first block was resident (ready), when its dependencies resolved (go:
// first and last block), in ns from the replay's first go. go of the next launch minus go of this
// one is this launch's share of the step.
//
// With MEMRA_BENCH_TIMELINE_PREFILL=<a Prefill arm> (mmvq, gemm, flash, ...): 4 eager 512-token
// prefills (prime_cache into a reset cache) instead of graph replays, one row per launch and run
// with host_ns, when the host was about to enqueue it (from the run's first launch; another clock
// than the GPU's). A grid of fewer blocks than SMs with max_per_sm 2 was packed two to an SM
// (launch.cuh spread_smem). A launch whose first block became resident (ready) only as its dependencies
// resolved (go), where its predecessor was short, was enqueued late: the host's share of a prefill.
int timeline_prefill(Model& m, const char* arm) {
  namespace tl = cuda::timeline;
  set_prefill_arm(m, arm);
  constexpr int kT = 512, kRuns = 4;
  std::vector<int32_t> prompt(kT);
  for (int i = 0; i < kT; ++i) prompt[i] = (i * 7919) % 100000;
  Cache c = m.new_cache(kT);
  m.prime_cache(prompt, c);  // warm-up (scratch allocation)
  std::vector<std::string> names;
  std::vector<uint64_t> host;
  std::vector<size_t> run_start;  // index of each run's first launch
  tl::start(1u << 23);
  for (int r = 0; r < kRuns; ++r) {
    c.reset();
    tl::launch_names().clear();
    tl::launch_host_ns().clear();
    tl::note_launches() = true;
    m.prime_cache(prompt, c);
    tl::note_launches() = false;
    run_start.push_back(names.size());
    names.insert(names.end(), tl::launch_names().begin(), tl::launch_names().end());
    const uint64_t h0 = tl::launch_host_ns().empty() ? 0 : tl::launch_host_ns().front();
    for (uint64_t h : tl::launch_host_ns()) host.push_back(h - h0);
  }
  run_start.push_back(names.size());
  std::vector<tl::Mark> marks = tl::stop();
  std::sort(marks.begin(), marks.end(),
            [](const tl::Mark& a, const tl::Mark& b) { return a.grid != b.grid ? a.grid < b.grid : a.t_go < b.t_go; });
  std::vector<TimelineRow> rows;
  for (size_t i = 0; i < marks.size(); ++i) {
    if (i == 0 || marks[i].grid != marks[i - 1].grid) rows.emplace_back();
    rows.back().add(marks[i]);
  }
  if (rows.size() != names.size()) {
    std::fprintf(stderr, "MEMRA_BENCH_TIMELINE_PREFILL: %zu grids recorded for %zu launches\n", rows.size(),
                 names.size());
    return 1;
  }
  std::printf("run,launch,name,blocks,sms,max_per_sm,host_ns,ready_ns,go_ns,last_go_ns\n");
  for (int r = 0; r < kRuns; ++r) {
    const uint64_t origin = rows[run_start[r]].go;
    for (size_t k = run_start[r]; k < run_start[r + 1]; ++k) {
      const TimelineRow& x = rows[k];
      std::printf("%d,%zu,%s,%zu,%zu,%d,%llu,%lld,%lld,%lld\n", r, k - run_start[r], names[k].c_str(), x.blocks,
                  x.per_sm.size(), x.max_per_sm(), static_cast<unsigned long long>(host[k]),
                  static_cast<long long>(x.ready) - static_cast<long long>(origin),
                  static_cast<long long>(x.go - origin), static_cast<long long>(x.last_go - origin));
    }
  }
  return 0;
}

int timeline_decode(const std::string& name) {
  namespace tl = cuda::timeline;
  if (!tl::available()) {
    std::fprintf(stderr, "MEMRA_BENCH_TIMELINE: this build has no timeline (configure with -DMEMRA_TIMELINE=ON)\n");
    return 2;
  }
  for (const Shape& s : kShapes) {
    if (name != s.name) continue;
    Model& m = model_for(s);
    if (const char* pre = std::getenv("MEMRA_BENCH_TIMELINE_PREFILL")) return timeline_prefill(m, pre);
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
    tl::start(1u << 24);  // 512 MB; the 35B-A3B's 16 replays overflowed 1 << 22 (~650 k marks a step)
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
    std::vector<std::vector<TimelineRow>> rows(kReplays, std::vector<TimelineRow>(nodes));
    for (size_t k = 0; k < nodes; ++k) {
      const size_t n = first[k + 1] - first[k];
      if (n % kReplays != 0) {
        std::fprintf(stderr, "MEMRA_BENCH_TIMELINE: launch %zu (%s) recorded %zu blocks over %d replays\n", k, names[k].c_str(), n,
                     kReplays);
        return 1;
      }
      for (size_t i = 0; i < n; ++i) { rows[i / (n / kReplays)][k].add(marks[first[k] + i]); }
    }
    std::printf("replay,launch,name,blocks,sms,max_per_sm,ready_ns,go_ns,last_go_ns\n");
    for (int r = 0; r < kReplays; ++r) {
      uint64_t origin = UINT64_MAX;
      for (const TimelineRow& x : rows[r]) origin = std::min(origin, x.go);
      for (size_t k = 0; k < nodes; ++k) {
        const TimelineRow& x = rows[r][k];
        std::printf("%d,%zu,%s,%zu,%zu,%d,%lld,%lld,%lld\n", r, k, names[k].c_str(), x.blocks, x.per_sm.size(),
                    x.max_per_sm(), static_cast<long long>(x.ready) - static_cast<long long>(origin),
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
  // Repetitions interleaved at random unless the command line says otherwise (see the header).
  std::vector<char*> args(argv, argv + argc);
  bool interleave_given = false;
  for (int i = 1; i < argc; ++i)
    if (std::string(argv[i]).rfind("--benchmark_enable_random_interleaving", 0) == 0) interleave_given = true;
  static char interleave[] = "--benchmark_enable_random_interleaving=true";
  if (!interleave_given) args.insert(args.begin() + 1, interleave);
  int n = static_cast<int>(args.size());
  benchmark::Initialize(&n, args.data());
  add_context();
  measure_read_bw();
  register_all();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
