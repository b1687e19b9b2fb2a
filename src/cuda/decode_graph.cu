// src/cuda/decode_graph.cu — one decode token, eager or replayed from the cache's captured CUDA
// graph (arm decode_graph; model_impl.h).
//
// The graph launches the same kernels on the same operands in the same order as eager (DESIGN.md
// law 3): only the attention grid is sized for max_ctx instead of pos + 1, and its extra splits
// exit before computing anything. A graph is stale when the workspace moved since its capture
// (Workspace::gen; Model::set_break bumps it too: the break's launches change), when the cache's
// own buffers moved (Cache::reseat / grow: the pointer signature) or its max_ctx changed, or when
// the step's form changed (greedy or not): it is then re-captured (graph_recapture on) or the
// cache latches to eager for good (off). Counters: captures (of which recaptures), replays,
// latched.
#include "cuda/launch.cuh"
#include "cuda/model_impl.h"
#include "memra/cuda_check.h"

namespace memra {

// greedy: the token lands in amax and tok[0] (body's end), so the host's copy of tok[0] is stale
// until it reads the token back. device_token: see prepare().
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
  // Break::graph_ignore_reseat (a canary's defect): the signature is not looked at.
  const uint64_t sig = brk.graph_ignore_reseat ? ci.exec_sig : ci.pointer_signature();
  const bool stale = ci.exec && (ci.exec_gen != ws.gen || ci.exec_greedy != greedy || ci.exec_sig != sig ||
                                 ci.exec_max_ctx != ci.max_ctx);
  if (stale && !arms.graph_recapture) {
    ci.graph_latched_off = true;  // latch to eager, as the arm says
    cudaGraphExecDestroy(ci.exec);
    ci.exec = nullptr;
    ++counters.latched;
    body(ci, 1, ci.pos + 1, greedy);
    ci.pos += 1;
    return;
  }
  if (!ci.exec || stale) {
    if (ci.exec) cudaGraphExecDestroy(ci.exec);
    ci.exec = nullptr;
    cudaGraph_t g = nullptr;
    MEMRA_CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed));
    try {
      body(ci, 1, ci.max_ctx, greedy);
    } catch (...) {
      cudaStreamEndCapture(s, &g);
      if (g) cudaGraphDestroy(g);
      throw;
    }
    MEMRA_CUDA_CHECK(cudaStreamEndCapture(s, &g));
    const cudaError_t ie = cudaGraphInstantiate(&ci.exec, g, 0);
    cudaGraphDestroy(g);
    MEMRA_CUDA_CHECK(ie);
    ci.exec_gen = ws.gen;
    ci.exec_sig = ci.pointer_signature();
    ci.exec_max_ctx = ci.max_ctx;
    ci.exec_greedy = greedy;
    ++counters.captures;
    if (stale) ++counters.recaptures;
  }
  MEMRA_CUDA_CHECK(cudaGraphLaunch(ci.exec, s));
  ++counters.replays;
  ci.pos += 1;
}

}  // namespace memra
