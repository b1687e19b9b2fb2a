// memra/model.h — the GPU model: the Qwen3 family, GLM-5 and DeepSeek-V4 on a CUDA device, or
// split into pipeline stages over several (LoadOptions).
//
//   memra::Engine e = memra::Engine::open(0);
//   auto src = memra::open_weights("x.gguf");
//   memra::Model m = memra::Model::load(e, *src);
//   memra::Cache c = m.new_cache(4096);
//   memra::Prime p = m.prime_cache(prompt, c);   // prefill, writes every position's state
//   memra::Step s = m.decode_step(tok, c);       // one token: logits + final hidden
//
// Weights stay in the file's storage type (F32, F16, BF16, Q8_0, NVFP4; memra/raw_weights.h);
// activations entering a Q8_0/NVFP4 mat-vec are quantised to q8_1 (the W8A8 / W4A8 contract
// of memra/quant.h). Everything between the mat-vecs is f32.
//
// Consistency (the model's own laws: test/exactness/gpu_oracle_test.cpp; graph vs eager:
// decode_graph_test.cpp; against the CPU oracle: teacher_forced_test.cpp; docs/testing.md):
//   - prime_cache(p[:n-1]) + decode_step(p[n-1]) == forward_last(p) bitwise with
//     gdn_prefill = recurrent and prefill_matmul = mmvq (the model's defaults): every kernel
//     computes a token's values by the same operations whatever the number of tokens in the
//     call (mat-vec tiles keep per-token accumulators, attention splits have a fixed size, the
//     GDN recurrence walks tokens in order);
//   - the same inputs and arms give the same bits run after run (no atomics, launch shapes
//     from problem shapes only);
//   - a replayed decode graph gives eager decode's logits and MoE routing decisions, bit for bit;
//   - teacher-forced along a CPU-oracle bank, each pick is the bank's or within the band
//     3·√2·(C_gpu + C_cpu)·|top1| of it (C_gpu calibrated per fixture and arm).
// Arms honoured: decode_matvec (mmvq, dp4a), fuse_norm_quant, prefill_act (w4a8; w4a4: the
// NVFP4 mat-muls of a call of more than one token take e2m1 activations with per-16 ue4m3
// scales, quant.h's W4A4 contract, on the token-tiled mat-vec — an error with prefill_matmul =
// mma, which has no W4A4 GEMM; decode and the lm_head row stay W4A8),
// decode_graph (decode_step / decode_greedy replay a CUDA graph captured per cache; the cache
// position lives on the device, so replays need no parameter update; a scratch reallocation, a
// re-seated or grown cache (Cache::reseat / grow: the graph's pointer signature) invalidates
// it: re-capture, or with graph_recapture = off latch that cache to eager).
// gdn_prefill: recurrent (the model's default: the form the oracle gate was calibrated with)
// or chunked (the WY form over 64-token chunks, for calls of more than one token), for Gated
// DeltaNet and Kimi delta attention layers alike.
// prefill_matmul: mmvq (the default: the token-tiled mat-vec, bit-identical to decode) or mma
// (the int8 tensor-core GEMM for Q8_0 / NVFP4 matrices in calls of >= 32 tokens).
//
// provides: LoadOptions, StageInfo, Step, Counters, Break, Sampled, Prime, Model
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "memra/arms.h"
#include "memra/cache.h"
#include "memra/config.h"
#include "memra/dtype.h"
#include "memra/engine.h"
#include "memra/raw_weights.h"
#include "memra/sampling.h"
#include "memra/selection_ledger.h"
#include "memra/source.h"

namespace memra {

// A model split into pipeline stages (src/cuda/pipeline.cu): stage i holds a contiguous range of
// layers, their weights and every cache's state of them on devices[i]; the first stage also
// holds the embedding, the last the output norm and lm_head. Between stages the residual stream
// (DeepSeek-V4: its hyper-connection streams) and the token ids hand over by a device-to-device
// copy ordered by an event, never through the host. A step computes every value by the same
// launches as the unsplit model, so the split model's logits, tokens and MoE selections are
// bit-identical to it (gate Pipeline).
struct LoadOptions {
  // One stage per entry, in layer order. devices[0] must be the engine's; a later stage opens
  // its own Engine (its own stream). A device may repeat: stages on one device run on their own
  // streams, the same code path as over several devices (peer access enabled where the devices
  // differ and allow it).
  std::vector<int> devices = {0};
  // The first layer of each stage after the first (devices.size() - 1 ascending values in
  // [1, n_layer), every stage at least one layer); empty: an automatic split that balances the
  // stages' weight bytes (embedding and lm_head included).
  std::vector<int64_t> split;
};

// One pipeline stage of a loaded model (Model::stages).
struct StageInfo {
  int device = 0;
  int64_t first_layer = 0, end_layer = 0;  // layers [first_layer, end_layer)
  int64_t weight_bytes = 0;                // its matrices on its device
};

struct Step {
  std::vector<float> logits;  // [n_vocab]
  std::vector<float> hidden;  // [n_embd] final-normed hidden state (the lm_head input)
};

// Counters a gate reads to prove an arm engaged (a vacuous gate must fail).
struct Counters {
  int64_t captures = 0;       // decode graphs instantiated
  int64_t replays = 0;        // decode steps served by a graph
  int64_t recaptures = 0;     // of the captures, those that replaced a stale graph (graph_recapture on)
  int64_t latched = 0;        // caches latched to eager (graph_recapture off)
  int64_t gemm_launches = 0;  // tensor-core prefill GEMM launches
  int64_t gemm_routed_launches = 0;  // of which MoE expert GEMMs grouped by expert
  int64_t gdn_chunked_launches = 0;  // chunked (WY) GDN / KDA prefill launches
  int64_t w4a4_launches = 0;  // NVFP4 mat-mul launches under prefill_act = w4a4
  int64_t mla_latent_launches = 0;    // MLA attentions taken in the absorbed latent form (mla_decode = latent)
  int64_t flash_attn_launches = 0;    // attentions taken in the flash form (prefill_attn = flash)
  int64_t nvfp4_pair32_launches = 0;  // NVFP4 x q8_1 mat-vec launches under nvfp4_dot = pair32
  // mat-vec launches taken by the bulk-fed tensor-core tiles (sm_90 on: more than 4 output
  // vectors over Q8_0 / NVFP4 rows of 4 steps or more, i.e. >= 4096 / 2048 values, docs/gpu.md)
  int64_t bulk_tile_launches = 0;
  int64_t batch_steps = 0;    // decode_step_batch calls served by the batched body
  int64_t handovers = 0;      // stage-to-stage hand-overs of a split model (one per stage boundary per call)
  // layers of batched steps (B >= 2) whose attention, GDN, KDA or MLA core took every sequence in
  // one launch per kernel (DeepSeek-V4's run a launch per sequence)
  int64_t batched_cores = 0;
  int64_t batch_replays = 0;  // of the batch_steps, those served by a batch size's graph (decode_graph arm)
};
// A split model sums its stages' counters: a decode step of n stages captures or replays n graphs.

// Deliberate defects for the gates' canaries (docs/testing.md "Canaries": every gate has a canary
// that must FAIL). A test-only hook compiled into the library: off by default, and while off
// nothing extra is launched (a host-side branch when a step's launches are built). Model::set_break
// validates it and marks every captured decode graph stale, so the next graph step re-captures
// with the break (graph_recapture on) or latches that cache to eager (off; counted in `latched`).
// Breaks are numerics only: counters and launch shapes of the arms are unchanged.
struct Break {
  // Multiply the residual stream after layer `scale_layer` (0-based; -1 = off) by `scale_factor`
  // in every step (prefill, decode, batched, graph): a wrong layer the TeacherForced gate must put
  // out of band. One extra launch per step (over all the step's rows) after that layer's FFN.
  // The last layer's scale is all but undone by the output RMSNorm: break an earlier one.
  int64_t scale_layer = -1;
  float scale_factor = 1.0f;
  // The W4A4 activation quantiser (prefill_act = w4a4: the NVFP4 mat-muls of calls of more than
  // one token) writes every sub-block's scale code as if amax were 6 (scale 1.0) instead of the
  // sub-block's own, q = e2m1(x / 1): the ArmFork canary. No extra launch (the quantiser's other
  // instantiation); does nothing while the W4A4 arm is not engaged.
  bool w4a4_drop_block_scale = false;
  // Single-sequence steps of one token that leave the logits row (decode_step, its graph, a
  // one-token prime_cache / forward_last, and decode_step_batch(_sampled) at B = 1 with b1_fast
  // on, which is decode_step) add `bias_value` to logit `bias_id` (-1 = off) on the device, after
  // the lm_head and before the logits are copied back: the ArgmaxMargin canary (a biased decode
  // arm). One extra one-thread launch per such step. Greedy steps (decode_greedy / _n, whose
  // argmax is fused into the lm_head) and the batched body (B >= 2, or b1_fast off) are not
  // biased.
  int32_t bias_id = -1;
  float bias_value = 0.0f;
  // A captured decode graph ignores its cache's pointer signature, so after Cache::reseat it
  // replays on the allocations it was captured with instead of re-capturing (or latching): the
  // DecodeGraph re-seat canary. So that the defect shows as wrong numbers and never as a
  // use-after-free, Cache::reseat then keeps the retired allocations alive (until the cache is
  // destroyed) and zeroes them, as memory freed and reused by someone else could read. A change
  // of max_ctx (Cache::grow) still re-captures: the attention grid is sized for it.
  bool graph_ignore_reseat = false;
  // A split model's hand-over no longer makes the next stage wait for the copy of the hidden
  // state (the event wait is dropped), and the handing stage spins a few milliseconds before
  // copying, so the next stage reads its input before it lands: the Pipeline canary (a race
  // that must show as wrong logits). One extra one-thread launch per hand-over; nothing on an
  // unsplit model.
  bool pipeline_drop_wait = false;
  // MLA's absorbed latent form (mla_decode = latent) takes head h's latent query through head
  // h+1's W_UK (mod H): the latent arm's canary (a wrong-head absorption the oracle comparison
  // must reject). No extra launch; nothing while the latent form is not engaged.
  bool mla_latent_wrong_head = false;
  // The bulk-fed mat-vec tiles (Counters::bulk_tile_launches) join their epilogue tree's last
  // two levels as (t0 + t1) + (t2 + t3) instead of (t0 + t2) + (t1 + t3) for a tile's vectors 8
  // and up: a reduction order that depends on an output vector's place in its tile, so that a
  // sequence's bits depend on how many batch-mates precede it. The DecodeBatch canary on the wide
  // fixtures (the tiny fixtures' rows are too short for these tiles). No extra launch (the
  // kernel's other instantiation); nothing where the bulk tiles are not engaged.
  bool bulk_tile_reorder = false;
  bool any() const;  // some break is set (the defaults above are all off)
};

// A batched step's selections (decode_step_batch_sampled): per sequence the drawn token (-1 for
// a row without a spec) and its logits on the host (empty for a sampled row of a lean step: they
// stay on the device, Cache::last_logits).
struct Sampled {
  std::vector<int32_t> tokens;
  std::vector<std::vector<float>> logits;
};

struct Prime {
  std::vector<float> logits;  // last prompt position
  std::vector<float> hidden;
};

class Model {
 public:
  // Config from the source's metadata (ModelConfig::from_source), raw weights, upload.
  static Model load(Engine& e, const WeightSource& src, const LoadOptions& opt = {});
  static Model from_raw(Engine& e, const ModelConfig& c, const RawWeights& w, const LoadOptions& opt = {});
  // Benchmark model: every matrix of `c` in `matrix_type` (Q8_0, NVFP4, BF16, F32), filled on
  // the device with valid random blocks derived from `seed` (no host copy of the weights); norms
  // 1, small GDN gates. Numerically meaningless, shape- and byte-exact.
  static Model synthetic(Engine& e, const ModelConfig& c, DType matrix_type, uint64_t seed,
                         const LoadOptions& opt = {});
  // Why the GPU model cannot run a model of this configuration (a shape past a kernel's limits,
  // a layer kind without kernels: GLM-5's MLA/DSA so far), or nullopt when it can. Host-only: no
  // device needed. Backend selection "auto" uses it to fall back to the CPU oracle.
  static std::optional<std::string> unsupported(const ModelConfig& c);

  Model(Model&&) noexcept;
  Model& operator=(Model&&) noexcept;
  ~Model();

  const ModelConfig& config() const;
  const Arms& arms() const;
  void set_arms(const Arms& a);  // validated on the next call

  Cache new_cache(int64_t max_ctx) const;

  // Last position's logits of a prompt, without a cache (a scratch cache of the prompt's size).
  std::vector<float> forward_last(std::span<const int32_t> tokens);
  // Runs the prompt from cache.pos() on, writing every position's K/V and GDN state.
  Prime prime_cache(std::span<const int32_t> tokens, Cache& cache);
  // One token at cache.pos(): logits and final hidden, copied to the host.
  Step decode_step(int32_t token, Cache& cache);
  // One decode step of B sequences: token b at caches[b]'s position, logits per sequence (host).
  // Each weight matrix is streamed once for all B; attention and Gated DeltaNet run per
  // sequence. A sequence's logits are bit-identical whatever its batch-mates, its row and B
  // (B >= 2, and B = 1 with the b1_fast arm off; DESIGN.md law 2). With b1_fast on (default),
  // B = 1 is decode_step itself. Eager (the decode_graph arm does not apply). Errors name the
  // sequence: token out of range, a cache at max_ctx, a cache of another model, one cache
  // twice, token / cache counts that differ, non-finite logits.
  std::vector<std::vector<float>> decode_step_batch(std::span<const int32_t> tokens, std::span<Cache* const> caches);
  // decode_step_batch with the token chosen on the device: specs[b] (memra/sampling.h: temperature
  // 0 = greedy, ties to the lowest index; > 0 = the Gumbel-max draw of (seed, counter), a pure
  // function of the row's logits and its spec, so never of its batch-mates) or none (the row is
  // only returned). lean: a sampled row's logits stay on the device (caches[b]->last_logits())
  // instead of being copied back; rows without a spec always come back in full. Errors as
  // decode_step_batch, plus a spec count that differs from the sequences', a temperature that is
  // negative or not finite, and a sampled row whose logits are not finite (naming the sequence).
  Sampled decode_step_batch_sampled(std::span<const int32_t> tokens, std::span<Cache* const> caches,
                                    std::span<const std::optional<SampleSpec>> specs, bool lean = false);
  // One token, greedy: the argmax (lowest index on ties) computed on the device; only the
  // token id comes back. The generation loop of benchmarks and memra-run.
  int32_t decode_greedy(int32_t token, Cache& cache);
  // n greedy tokens in a row from `token`: the same tokens as n chained decode_greedy calls (the
  // same launches; gate DeviceGreedy.MatchesHostArgmax), but each step's embedding reads the previous
  // step's token on the device, so all n steps are enqueued before the host waits once for the
  // n ids: no host round trip between steps. Needs cache.pos() + n <= cache.max_ctx().
  std::vector<int32_t> decode_greedy_n(int32_t token, int64_t n, Cache& cache);

  // Bytes of weight matrices read by one decode step (embedding: one row; MoE: k of E experts
  // plus router and shared expert), for the bandwidth fraction of benchmarks.
  int64_t decode_bytes_per_token() const;
  int64_t weight_bytes() const;  // every matrix on the device(s)
  Counters counters() const;
  // The pipeline stages (one for an unsplit model), in layer order.
  std::vector<StageInfo> stages() const;
  // Per-stage timing (benchmarks): while on, each stage's part of a single-sequence step (its
  // launches or its graph; the hand-over after it excluded) is bracketed by CUDA events on its
  // stream; stage_ms() waits for them and gives each stage's milliseconds in the last such step
  // (empty before one ran).
  void time_stages(bool on);
  std::vector<double> stage_ms() const;

  // Arm prefill_matmul = mma: calls of >= `min_tokens` tokens (default 32) run Q8_0 / NVFP4
  // matrices through the int8 tensor-core GEMM (src/cuda/gemm.cuh, DotOrder::sequential)
  // instead of the token-tiled mat-vec (warp32 order); prime_cache + decode_step and
  // forward_last then differ by floating-point composition instead of being bit-identical.
  // Tests set 1 to drive whole streams through it.
  void set_gemm_min_tokens(int64_t min_tokens);

  // Test-only: the canaries' deliberate defects (Break above); Break{} turns them off. Throws
  // memra::Error naming the field for a scale_layer outside [-1, n_layer), a bias_id outside
  // [-1, n_vocab), or a non-finite scale_factor / bias_value. Marks captured decode graphs stale
  // when the break changes.
  void set_break(const Break& b);
  const Break& breaks() const;

  // The MoE selection ledger (memra/selection_ledger.h): while `ledger` is attached, every call
  // appends one row per (token, MoE layer) it ran — the experts the route kernel selected, in
  // selection order, and their f32 routing weights' bits — copied on the device from the step's
  // own route results after each MoE layer (one small launch per MoE layer per step, eager and
  // graph alike; nothing else changes), and moved to `ledger` when the call's results are on the
  // host. A decode step records in token order, a prime layer by layer (compare through
  // ordered()). nullptr detaches. Attaching or detaching re-captures decode graphs on their next
  // step (or latches them to eager with graph_recapture off). Dense models record nothing.
  void attach_ledger(SelectionLedger* ledger);

  struct Impl;

 private:
  explicit Model(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace memra
