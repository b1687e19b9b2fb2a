// src/cuda/decode_graph.cu — one decode token, eager or replayed from the cache's captured CUDA
// graph (arm decode_graph; model_impl.h).
//
// The graph launches the same kernels on the same operands in the same order as eager (DESIGN.md
// law 3): only the attention grid is sized for max_ctx instead of pos + 1, and its extra splits
// exit before computing anything. A graph is stale when the workspace moved since its capture
// (Workspace::gen; Model::set_break bumps it too: the break's launches change), when the cache's
// own buffers moved (Cache::reseat / grow: the pointer signature) or its max_ctx changed, or when
// the step's form changed (greedy or not; an arm a one-token step's launches depend on:
// decode_matvec, fuse_norm_quant, launch_overlap, mla_decode, nvfp4_dot): it is then re-captured (graph_recapture on) or the
// cache latches to eager for good (off). Counters: captures (of which recaptures), replays,
// latched. A split model (pipeline.cu) captures one graph per stage, its part of the step; the
// hand-overs run between the launches (enqueued by the host, no wait on the host), and only a
// stage whose own graph is stale re-captures (a re-seat of a layer re-captures its stage's graph).
#include "cuda/launch.cuh"
#include "cuda/model_impl.h"
#include "memra/cuda_check.h"

namespace memra {

// A stage's captured graph for this cache is stale (its workspace moved, the break changed, its
// layers' buffers were re-seated, the cache grew, or the step's form changed: decode_arms).
bool Model::Impl::graph_stale(const Cache::Impl& ci, bool greedy) const {
  const Cache::Impl::Graph& g = ci.graphs[static_cast<size_t>(stage)];
  // Break::graph_ignore_reseat (a canary's defect): the signature is not looked at.
  const uint64_t sig = brk.graph_ignore_reseat ? g.sig : ci.pointer_signature(*this);
  return g.exec && (g.gen != ws.gen || g.greedy != greedy || g.sig != sig || g.max_ctx != ci.max_ctx ||
                    decode_arms(g.arms) != decode_arms(arms));
}

// This stage's part of a decode step captured into the cache's graph for the stage.
void Model::Impl::capture(Cache::Impl& ci, bool greedy) {
  Cache::Impl::Graph& g = ci.graphs[static_cast<size_t>(stage)];
  const bool recapture = g.exec != nullptr;
  if (g.exec) cudaGraphExecDestroy(g.exec);
  g.exec = nullptr;
  cudaGraph_t graph = nullptr;
  MEMRA_CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed));
  try {
    part(ci, 1, ci.max_ctx, greedy);
  } catch (...) {
    cudaStreamEndCapture(s, &graph);
    if (graph) cudaGraphDestroy(graph);
    throw;
  }
  MEMRA_CUDA_CHECK(cudaStreamEndCapture(s, &graph));
  const cudaError_t ie = cudaGraphInstantiate(&g.exec, graph, 0);
  cudaGraphDestroy(graph);
  MEMRA_CUDA_CHECK(ie);
  g.gen = ws.gen;
  g.sig = ci.pointer_signature(*this);
  g.max_ctx = ci.max_ctx;
  g.greedy = greedy;
  g.arms = arms;
  ++counters.captures;
  if (recapture) ++counters.recaptures;
}

// greedy: the token lands in amax and tok[0] (the last stage's part; the first stage's tok[0]
// by after_part), so the host's copy of tok[0] is stale until it reads the token back.
// device_token: see prepare().
void Model::Impl::decode(int32_t token, Cache::Impl& ci, bool greedy, bool device_token) {
  const cuda::ScopedLaunchOverlap overlap(arms.launch_overlap);
  ci.has_last_logits = false;
  const int32_t one[1] = {token};
  struct Stale {
    int64_t& tok_dev;
    bool greedy;
    ~Stale() {
      if (greedy) tok_dev = -1;
    }
  } stale_tok{tok_dev, greedy};
  if (!arms.decode_graph || ci.graph_latched_off) return run(one, ci, greedy, device_token);
  prepare(one, ci, ci.max_ctx, device_token);
  bool stale = false;
  each_stage([&](Impl& st) { stale = stale || st.graph_stale(ci, greedy); });
  if (stale && !arms.graph_recapture) {
    ci.graph_latched_off = true;  // latch to eager, as the arm says
    for (Cache::Impl::Graph& g : ci.graphs) {
      if (g.exec) cudaGraphExecDestroy(g.exec);
      g.exec = nullptr;
    }
    ++counters.latched;
    body(ci, 1, ci.pos + 1, greedy);
    ci.pos += 1;
    return;
  }
  join();
  for (Impl* st = this; st; st = st->next) {  // one graph per stage, each followed by its hand-over
    const StageDevice on(st->e->device());
    Cache::Impl::Graph& g = ci.graphs[static_cast<size_t>(st->stage)];
    if (!g.exec || st->graph_stale(ci, greedy)) st->capture(ci, greedy);
    st->mark(false);
    MEMRA_CUDA_CHECK(cudaGraphLaunch(g.exec, st->s));
    st->mark(true);
    ++st->counters.replays;
    st->after_part(1, greedy);
  }
  ci.pos += 1;
}

}  // namespace memra
