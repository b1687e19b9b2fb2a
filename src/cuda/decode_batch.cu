// src/cuda/decode_batch.cu — one decode step of B sequences (model_impl.h; memra/model.h
// decode_step_batch and decode_step_batch_sampled).
//
// The mat-muls, norms, FFN / MoE and lm_head run over B rows (each weight streamed once per
// step), each attention, Gated DeltaNet, KDA and MLA layer over all sequences' caches in one launch
// per kernel (DeepSeek-V4's a launch per sequence): the layer walk with B sequences of one row.
// Every kernel computes a row's values by the same operations whatever B and whatever the other
// rows hold (mat-vec tiles keep per-vector accumulators in the dot contract's order, row ops
// reduce per row, an attention, GDN, KDA or MLA block serves one sequence as its own launch
// would), so a sequence's logits do not depend on its batch-mates, its row or B (law 2; gate
// DecodeBatch). Under decode_graph a one-stage model's step of B >= 2 replays the graph captured
// for B (batch_graph). Logits land in logits_batch; token selection (greedy or seeded sampling)
// runs on the device, one select_rows launch for all rows. A split model walks each stage's layers over
// the B rows in turn, a stage before the last advancing its copies of the positions and handing
// the rows over; the lm_head and the selection run on the last stage.
#include <cmath>

#include "cuda/launch.cuh"
#include "cuda/model_impl.h"
#include "memra/cuda_check.h"
#include "memra/error.h"
#include "memra/finite.h"

namespace memra {

// specs: per row, the token selection (none: the row only advances its position).
void Model::Impl::decode_batch(std::span<const int32_t> toks, std::span<Cache::Impl* const> cis,
                               std::span<const std::optional<SampleSpec>> specs) {
  const cuda::ScopedLaunchOverlap overlap(arms.launch_overlap);
  check_arms();
  const int64_t B = static_cast<int64_t>(toks.size());
  // The graph arm serves B >= 2 sequences of a one-stage model (no ledger to record on the host;
  // DeepSeek-V4's layers take their sequences one by one): its grids are sized for the caches'
  // max_ctx, as a single sequence's decode graph is, so one capture serves every later step.
  const bool graphed = arms.decode_graph && B >= 2 && !next && !ledger && c.family != Family::DeepseekV4;
  int64_t ctx_bound = 1;
  for (Cache::Impl* ci : cis) ctx_bound = std::max(ctx_bound, graphed ? ci->max_ctx : ci->pos + 1);
  std::vector<Seq> seqs;
  for (Cache::Impl* ci : cis) seqs.push_back({ci, graphed ? ctx_bound : ci->pos + 1});
  if (B > ws.cap_T) tok_dev = -1;  // the token buffer moves
  each_stage([&](Impl& st) {
    st.ws.ensure(*st.e, c, B, ctx_bound, arms.gdn_prefill == GdnPrefill::chunked, arms.mla_decode == MlaDecode::latent);
    st.ledger_reserve(B * st.moe_layers());
  });
  Impl& t = last();
  if (static_cast<int64_t>(t.logits_batch.size()) < B * c.n_vocab)
    t.logits_batch = DeviceBuffer<float>(*t.e, static_cast<size_t>(B * c.n_vocab));
  tok_host.assign(toks.begin(), toks.end());
  copy_to_device(ws.tok.data(), tok_host.data(), sizeof(int32_t) * static_cast<size_t>(B), e->stream());
  tok_dev = -1;
  struct Flag {
    Impl& m;
    ~Flag() {
      m.each_stage([](Impl& st) { st.batch_step = false; });
    }
  } flag{*this};
  each_stage([](Impl& st) { st.batch_step = true; });
  join();
  if (!graphed || !batch_graph(seqs, cis, specs)) {
    for (Impl* st = this; st; st = st->next) {
      const StageDevice on(st->e->device());
      if (!st->next) break;
      st->walk(seqs, 1);
      st->advance_pos_batch(cis);
      st->hand_over(B);
    }
    const StageDevice on(t.e->device());
    std::vector<int64_t*> pos;
    for (Cache::Impl* ci : cis) pos.push_back(t.pos_of(*ci));
    t.upload_row_jobs(specs, pos);
    t.batch_body(seqs, nullptr);
  }
  for (Cache::Impl* ci : cis) {
    ci->pos += 1;
    ci->has_last_logits = false;
  }
  ++counters.batch_steps;
}

// The last stage's part of a batched step: its layers, the output norm, the lm_head over B rows
// and one select_rows launch (the jobs uploaded: upload_row_jobs).
void Model::Impl::batch_body(std::span<const Seq> seqs, const SeqTables* pre) {
  const int64_t B = static_cast<int64_t>(seqs.size()), D = c.n_embd;
  walk(seqs, 1, pre);
  norm_quant(ws.x.data(), weights.output_norm.data(), ws.h.data(), ws.hq.data(), B, D);
  mv(weights.lm_head(), ws.h.data(), D, ws.hq.data(), logits_batch.data(), c.n_vocab, B, false);
  cuda::select_rows_run(logits_batch.data(), c.n_vocab, row_jobs.data(), static_cast<int>(B), row_tokens.data(), s);
}

// The step from batch_graphs[B] (a one-stage model). Per step, outside the graph: the sequences'
// tables and selection jobs, uploaded into the buffers the graph reads. A capture whose layers did
// not all take their sequences in one launch per kernel (a GDN head shape without the batched
// kernel: pointers of this step's caches baked in) is dropped, and B stays eager.
bool Model::Impl::batch_graph(std::span<const Seq> seqs, std::span<Cache::Impl* const> cis,
                              std::span<const std::optional<SampleSpec>> specs) {
  const size_t B = seqs.size();
  if (batch_graphs.size() <= B) batch_graphs.resize(B + 1);
  BatchGraph& g = batch_graphs[B];
  if (g.never) return false;
  const SeqTables tables = upload_seq_tables(seqs, 1);
  std::vector<int64_t*> pos;
  for (Cache::Impl* ci : cis) pos.push_back(pos_of(*ci));
  upload_row_jobs(specs, pos);
  const std::array<const void*, 7> bufs = {
      tables.gdn,      tables.attn,       tables.mla,         batch_arrivals.data(),
      row_jobs.data(), row_tokens.data(), logits_batch.data()};
  const int64_t bound = seqs[0].ctx_bound;
  if (!g.exec || g.gen != ws.gen || g.bound != bound || g.bufs != bufs || decode_arms(g.arms) != decode_arms(arms)) {
    const bool recapture = g.exec != nullptr;
    if (g.exec) cudaGraphExecDestroy(g.exec);
    g.exec = nullptr;
    const int64_t cores0 = counters.batched_cores;
    cudaGraph_t graph = nullptr;
    MEMRA_CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed));
    try {
      batch_body(seqs, &tables);
    } catch (...) {
      cudaStreamEndCapture(s, &graph);
      if (graph) cudaGraphDestroy(graph);
      counters.batched_cores = cores0;
      throw;
    }
    MEMRA_CUDA_CHECK(cudaStreamEndCapture(s, &graph));
    const int64_t cores = counters.batched_cores - cores0;
    counters.batched_cores = cores0;  // counted per replay
    if (cores != l1 - l0) {
      cudaGraphDestroy(graph);
      g.never = true;
      return false;
    }
    const cudaError_t ie = cudaGraphInstantiate(&g.exec, graph, 0);
    cudaGraphDestroy(graph);
    MEMRA_CUDA_CHECK(ie);
    g.gen = ws.gen;
    g.bound = bound;
    g.arms = arms;
    g.bufs = bufs;
    g.cores = cores;
    ++counters.captures;
    if (recapture) ++counters.recaptures;
  }
  MEMRA_CUDA_CHECK(cudaGraphLaunch(g.exec, s));
  ++counters.batch_replays;
  counters.batched_cores += g.cores;
  return true;
}

// One select_rows launch over B rows of x: each row's token (specs) into row_tokens, each
// pos[r] (when set) advanced by one.
void Model::Impl::select_rows(const float* x, std::span<const std::optional<SampleSpec>> specs,
                              std::span<int64_t* const> pos) {
  upload_row_jobs(specs, pos);
  cuda::select_rows_run(x, c.n_vocab, row_jobs.data(), static_cast<int>(specs.size()), row_tokens.data(), s);
}

// The B rows' selection jobs into row_jobs (row_tokens sized for their results).
void Model::Impl::upload_row_jobs(std::span<const std::optional<SampleSpec>> specs, std::span<int64_t* const> pos) {
  const size_t B = specs.size();
  if (row_jobs.size() < B) {
    row_jobs = DeviceBuffer<cuda::RowSelect>(*e, B);
    row_tokens = DeviceBuffer<int32_t>(*e, B);
  }
  jobs_host.assign(B, cuda::RowSelect{});
  for (size_t r = 0; r < B; ++r) {
    cuda::RowSelect& j = jobs_host[r];
    j.pos = pos[r];
    if (specs[r]) {
      j.has_spec = 1;
      j.temperature = specs[r]->temperature;
      j.seed = specs[r]->seed;
      j.counter = specs[r]->counter;
    }
  }
  copy_to_device(row_jobs.data(), jobs_host.data(), sizeof(cuda::RowSelect) * B, e->stream());
}

namespace {

// A batched call's inputs, all checked before anything runs; errors name the call and sequence.
std::vector<Cache::Impl*> batch_caches(const char* what, const Model::Impl& m, std::span<const int32_t> tokens,
                                       std::span<Cache* const> caches) {
  const size_t B = tokens.size();
  if (B == 0) fail(what, ": no sequences");
  if (caches.size() != B) fail(what, ": ", B, " tokens for ", caches.size(), " caches (one token per sequence)");
  std::vector<Cache::Impl*> cis;
  for (size_t b = 0; b < B; ++b) {
    Cache* cache = caches[b];
    try {
      if (!cache) fail("null cache");
      m.check_cache(*cache);
      m.c.check_prompt(tokens.subspan(b, 1), cache->pos(), cache->max_ctx());
    } catch (const Error& err) { fail(what, ": sequence ", b, ": ", err.what()); }
    for (size_t a = 0; a < b; ++a)
      if (cis[a] == cache->impl()) fail(what, ": sequences ", a, " and ", b, " share one cache");
    cis.push_back(cache->impl());
  }
  return cis;
}

}  // namespace

std::vector<std::vector<float>> Model::decode_step_batch(std::span<const int32_t> tokens,
                                                         std::span<Cache* const> caches) {
  const std::vector<Cache::Impl*> cis = batch_caches("decode_step_batch", *impl_, tokens, caches);
  const int64_t B = static_cast<int64_t>(tokens.size());
  if (B == 1 && impl_->arms.b1_fast) return {decode_step(tokens[0], *caches[0]).logits};
  const std::vector<std::optional<SampleSpec>> none(static_cast<size_t>(B));
  impl_->decode_batch(tokens, cis, none);
  const int64_t V = impl_->c.n_vocab;
  std::vector<float> all(static_cast<size_t>(B * V));
  const Impl& t = impl_->last();
  copy_to_host(all.data(), t.logits_batch.data(), sizeof(float) * all.size(), t.e->stream());
  impl_->ledger_drain();
  std::vector<std::vector<float>> rows(static_cast<size_t>(B));
  for (int64_t b = 0; b < B; ++b) {
    const float* row = all.data() + b * V;
    check_finite({row, static_cast<size_t>(V)}, V,
                 {.call = "decode_step_batch",
                  .layer = "lm_head",
                  .pos0 = caches[static_cast<size_t>(b)]->pos() - 1,
                  .sequence = b});
    rows[static_cast<size_t>(b)].assign(row, row + V);
  }
  return rows;
}

Sampled Model::decode_step_batch_sampled(std::span<const int32_t> tokens, std::span<Cache* const> caches,
                                         std::span<const std::optional<SampleSpec>> specs, bool lean) {
  const char* what = "decode_step_batch_sampled";
  const std::vector<Cache::Impl*> cis = batch_caches(what, *impl_, tokens, caches);
  const size_t B = tokens.size();
  if (specs.size() != B) fail(what, ": ", specs.size(), " specs for ", B, " sequences (one, or none, per sequence)");
  for (size_t b = 0; b < B; ++b)
    if (specs[b] && !(std::isfinite(specs[b]->temperature) && specs[b]->temperature >= 0))
      fail(what, ": sequence ", b, ": temperature ", specs[b]->temperature, " (must be finite and >= 0)");
  Impl& m = *impl_;
  Impl& t = m.last();  // the logits and selections sit on the last stage
  const int64_t V = m.c.n_vocab;
  const float* x = nullptr;
  if (B == 1 && m.arms.b1_fast) {  // decode_step's launches (graph arm included), then the selection
    m.decode(tokens[0], *cis[0], false);
    int64_t* no_pos[1] = {nullptr};
    const StageDevice on(t.e->device());
    t.select_rows(t.ws.logits.data(), specs, no_pos);
    x = t.ws.logits.data();
  } else {
    m.decode_batch(tokens, cis, specs);
    x = t.logits_batch.data();
  }
  Sampled out;
  out.tokens.resize(B);
  copy_to_host(out.tokens.data(), t.row_tokens.data(), sizeof(int32_t) * B, t.e->stream());
  m.ledger_drain();
  out.logits.resize(B);
  for (size_t b = 0; b < B; ++b) {
    const float* row = x + static_cast<int64_t>(b) * V;
    if (specs[b] && out.tokens[b] < 0) m.fail_nonfinite(what, cis[b]->pos - 1, static_cast<int64_t>(b));
    if (specs[b] && lean) {
      Cache::Impl& ci = *cis[b];
      if (ci.last_logits.size() != static_cast<size_t>(V))
        ci.last_logits = DeviceBuffer<float>(*t.e, static_cast<size_t>(V));
      MEMRA_CUDA_CHECK(cudaMemcpyAsync(ci.last_logits.data(), row, sizeof(float) * static_cast<size_t>(V),
                                       cudaMemcpyDeviceToDevice, t.s));
      ci.has_last_logits = true;
      continue;
    }
    if (!specs[b]) out.tokens[b] = -1;
    std::vector<float>& h = out.logits[b];
    h.resize(static_cast<size_t>(V));
    copy_to_host(h.data(), row, sizeof(float) * h.size(), t.e->stream());
    if (!specs[b])
      check_finite(h, V,
                   {.call = what, .layer = "lm_head", .pos0 = cis[b]->pos - 1, .sequence = static_cast<int64_t>(b)});
  }
  return out;
}

}  // namespace memra
