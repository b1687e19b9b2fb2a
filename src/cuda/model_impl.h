// src/cuda/model_impl.h — the GPU model's parts (memra/model.h's Model::Impl and Cache::Impl).
//
// Model::Impl is a composition of named parts, each defined in its own file:
//   DeviceWeights  the layer schema on the device            device_weights.h / .cu
//   Workspace      the step's scratch, shapes below          workspace.cu
//   the layer walk one loop over the layers for any step     layer_walk.cu
//                  (T tokens of one sequence, or one token of each of B sequences)
//   decode graph   capture / replay of a decode step         decode_graph.cu
//   decode batch   B sequences per step, device sampling     decode_batch.cu
//   MoE ledger     route results recorded for a caller       selection_ledger.cu
//   the API        memra/model.h's entry points              model.cu
// and Cache::Impl (cache.cu) is one sequence's K/V, conv and recurrent state.
//
// Block (all families, pre-norm):  x += mixer(norm1(x));  x += ffn(norm2(x)).
//   attention: q,k,v(,gate) = W h; q/k norm + RoPE + K/V store; split-KV attention (+gate);
//              x += Wo o                               (rope.cu, attention.cu, mmvq.cu)
//   GDN:       qkv,z,b,a = W h; conv + SiLU; recurrence; gated norm; x += Wout o   (gdn.cu)
//   MLA:       q latent, kv latent (| rope key), indexer key and weights = W h; latent norms;
//              q, indexer q = W q latent; k_nope|v = W kv latent; RoPE + expanded K/V and
//              indexer key store (mla.cu); indexer scores + top-k selection, or the previous
//              layer's (dsa.cu); attention over the selection (dsa.cu); x += Wo o
//   FFN:       x += Wdown (silu(Wgate h) * Wup h)
//   DeepSeek-V4 (dsv4_walk.cu): N residual streams per token; around each block a hyper-connection
//              collapses them into the block's input and expands its output back (no residual
//              add); the attention over a sliding window of raw keys plus compressed rows (every
//              one, or the indexer's top-k), with sinks and the grouped output; sqrt-softplus or
//              hash routing, clamped SwiGLU experts; the final hc_head collapse into x   (dsv4.cu)
//   MoE:       router → route on device → expert mat-vecs indexed by the device-side ids →
//              x += Σ w_j y_j + sigmoid(sg.h) shared(h)  (GLM-5: + shared(h))   (moe.cu)
// The residual adds are fused into the producing mat-vec (add_to_y) or the MoE combine, with
// the same two roundings as a separate add.
//
// Adding a layer kind: docs/architecture.md "Adding a layer kind".
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <optional>
#include <span>
#include <tuple>
#include <utility>
#include <vector>

#include "cuda/argmax.cuh"
#include "cuda/attention.cuh"
#include "cuda/device_weights.h"
#include "cuda/dmat.h"
#include "cuda/dsa.cuh"
#include "cuda/gdn.cuh"
#include "cuda/mmvq.cuh"
#include "cuda/moe.cuh"
#include "cuda/norm.cuh"
#include "memra/cuda_check.h"
#include "memra/model.h"
#include "memra/selection_ledger.h"

namespace memra {

// --- one sequence's state ------------------------------------------------------------------------

// The arms a one-token step's launches depend on (the prefill arms never reach it): a decode
// graph captured under other values of these is stale (decode_graph.cu, decode_batch.cu).
inline auto decode_arms(const Arms& a) {
  return std::tuple{a.decode_matvec, a.fuse_norm_quant, a.launch_overlap, a.mla_decode, a.nvfp4_dot};
}

struct Cache::Impl {
  const Model::Impl* owner = nullptr;  // the model's first stage
  int64_t max_ctx = 0, pos = 0;        // pos: host mirror of every pos_dev
  // [stages] of [1]: the position, one copy per pipeline stage on its device (Model::Impl::pos_of),
  // each advanced by its stage at the end of its part of a step
  std::vector<DeviceBuffer<int64_t>> pos_dev;
  DeviceBuffer<int32_t> greedy_hist;  // [max_ctx] on the last stage: a greedy step's token at the position it followed
  // A layer's buffers live on the device of the stage that holds the layer.
  std::vector<DeviceBuffer<float>> k, v;         // [n_layer] of [max_ctx, KV*hd]; empty for GDN layers
  std::vector<DeviceBuffer<float>> conv, state;  // [n_layer] of [K, conv_dim] ring / [nv, dk, dv]; empty for attention
  // [n_layer] of [max_ctx, index_head_dim]: the DSA indexer's keys of an MLA layer with an
  // indexer; empty otherwise. MLA layers' k / v hold the expanded keys and values
  // (ModelConfig::kv_k_width / kv_v_width per position) and lat each position's latent row
  // [c | rotated rope key] (kv_rank + n_rot), which the mla_decode = latent arm attends over.
  std::vector<DeviceBuffer<float>> index_k, lat;
  // GLM-5's hybrid's pooled indexer (ModelConfig::dsa_kpool), on the layers with an indexer: each
  // position's pool-gate logits [max_ctx, hi] and the closed pools' keys (row j: pool j; sized
  // [max_ctx, hi] like every per-position buffer, which Cache::grow relies on).
  std::vector<DeviceBuffer<float>> index_gate, pool_rows;
  // DeepSeek-V4 ([n_layer] each, empty where a layer has no such compressor; k holds the raw
  // keys [max_ctx, head_dim]): a compressor's per-token projections [max_ctx, cw] and its
  // closed rows [max_ctx, width] (row w at w·width: a row per ratio positions, sized per position
  // so growth keeps them), for the attention's compressor (comp_*) and the CSA indexer's (idx_*).
  std::vector<DeviceBuffer<float>> comp_kv, comp_gate, comp_rows, idx_kv, idx_gate, idx_rows;
  // Every per-layer buffer, for re-seats, growth and the pointer signature.
  std::array<std::vector<DeviceBuffer<float>>*, 14> layer_buffers() {
    return {&k,       &v,         &conv,      &state,  &index_k,  &index_gate, &pool_rows,
            &comp_kv, &comp_gate, &comp_rows, &idx_kv, &idx_gate, &idx_rows,   &lat};
  }
  std::array<const std::vector<DeviceBuffer<float>>*, 14> layer_buffers() const {
    return {&k,       &v,         &conv,      &state,  &index_k,  &index_gate, &pool_rows,
            &comp_kv, &comp_gate, &comp_rows, &idx_kv, &idx_gate, &idx_rows,   &lat};
  }
  // The captured decode step of this cache (decode_graph arm), one graph per pipeline stage:
  // valid while the stage's workspace keeps the generation it was captured with.
  struct Graph {
    cudaGraphExec_t exec = nullptr;
    uint64_t gen = 0;
    uint64_t sig = 0;     // pointer_signature(stage) at capture
    int64_t max_ctx = 0;  // the max_ctx its attention grid was sized for
    bool greedy = false;
    Arms arms;  // the arms it was captured under: one that shapes a decode step changed = stale
  };
  std::vector<Graph> graphs;       // [stages]
  bool graph_latched_off = false;  // graph_recapture off + an invalidation: eager from then on
  // A lean sampled step's logits of this sequence (decode_step_batch_sampled), valid while
  // has_last_logits: any later step of the cache clears it.
  DeviceBuffer<float> last_logits;
  bool has_last_logits = false;
  // Allocations reseat() retired under Break::graph_ignore_reseat: alive and zeroed until the
  // cache dies, so the canary's stale graph reads wrong numbers, never freed memory.
  std::vector<DeviceBuffer<float>> retired;
  void reset();
  // FNV-1a over every device pointer stage `m`'s part of a decode step bakes into its graph (its
  // position, the greedy history on the last stage, its layers' K/V, conv ring and state): any
  // re-seat of one of its layers changes it.
  uint64_t pointer_signature(const Model::Impl& m) const;
  ~Impl();
};

// --- the step's scratch ----------------------------------------------------------------------------

// Buffers of a step over T rows (T tokens of one sequence, or one token of each of T sequences),
// grown on demand and never shrunk. D = n_embd, qd = H*hd, kvd = KV*hd, cd = conv_dim, vd = nv*dv,
// K = experts per token, F = the widest FFN (dense, K routed experts, shared).
struct Workspace {
  int64_t cap_T = 0, cap_work = 0;
  uint64_t gen = 1;               // bumped when a buffer moves or by set_break: captured graphs go stale
  DeviceBuffer<float> x;          // [T, D]   the residual stream
  DeviceBuffer<float> h;          // [T, D]   normed input of the mixer / FFN
  DeviceBuffer<float> q, gate;    // [T, qd]  queries, attention output gate
  DeviceBuffer<float> k, v;       // [T, kvd]
  DeviceBuffer<float> o;          // [T, max(qd, vd)]  mixer output (before its projection)
  DeviceBuffer<float> qkv, qkvc;  // [T, cd]  GDN q|k|v projections before / after the conv
  DeviceBuffer<float> z;          // [T, vd]  GDN output-gate input
  DeviceBuffer<float> b, a;       // [T, nv]  GDN beta / decay inputs
  DeviceBuffer<float> fg, fu;     // [T*F]    SwiGLU gate (then the product) / up
  DeviceBuffer<float> ye;         // [T*K, D] routed experts' outputs
  DeviceBuffer<float> ysh;        // [T, D]   shared expert's output
  DeviceBuffer<float> rl;         // [T, E]   router logits
  DeviceBuffer<float> sg;         // [T]      shared-expert gate logit
  DeviceBuffer<float> wts;        // [T*K]    routing weights
  DeviceBuffer<cuda::Q81> hq;     // [T, D/32]   q8_1 of h
  DeviceBuffer<cuda::Q81> oq;     // [T, max(qd, vd)/32]  q8_1 of o
  DeviceBuffer<cuda::Q81> fq;     // [T*F/32]    q8_1 of the SwiGLU product
  DeviceBuffer<int32_t> ids;      // [T*K]    routed expert ids
  DeviceBuffer<int32_t> tok;      // [T]      token ids
  // MLA layers (qr, kvr = the latent ranks, r = n_rot, dn / dv = nope / value head widths,
  // ni x hi = the indexer's heads, topk its selection); the indexer's scores live in `work`
  DeviceBuffer<float> ql;             // [T, qr]        query latent, normed in place
  DeviceBuffer<float> kva;            // [T, kvr + r]   kv latent | rope key
  DeviceBuffer<float> lat;            // [T, kvr]       normed kv latent
  DeviceBuffer<float> kvb;            // [T, H*(dn+dv)] per head [k_nope | v]
  DeviceBuffer<float> iq, ik, iw;     // [T, ni*hi], [T, hi], [T, ni]  indexer queries, key, weights
  DeviceBuffer<cuda::Q81> qlq, latq;  // q8_1 of ql / lat
  DeviceBuffer<int32_t> sel, n_sel;   // [T, sel width], [T]  each row's selected positions and their count
  // GLM-5's hybrid: the pool-gate projections [T, hi], each row's selected pools and their count
  // [T, topk / kpool], [T] (expanded into sel / n_sel with the open tail); KDA's forget-gate and
  // output-gate low-rank rows [T, d] (and their q8_1), then their full rows [T, H*d]
  DeviceBuffer<float> pig;
  DeviceBuffer<int32_t> psel, n_psel;
  DeviceBuffer<float> kfa, kga, kf, kg;
  DeviceBuffer<cuda::Q81> kfaq, kgaq;
  // DeepSeek-V4 (N streams, M = (2+N)N mix weights, hd = head_dim, cw / icw the compressor's and
  // the indexer compressor's projection widths, G x R the grouped output); iq / iw / sel / n_sel
  // above serve its indexer, ql its query latent, q / k / o its queries, raw key and output
  DeviceBuffer<float> hcx;           // [T, N, D]  the residual streams
  DeviceBuffer<float> hcn;           // [T, N*D]   the streams / rms (the mix's input)
  DeviceBuffer<cuda::Q81> hcnq;      // q8_1 of hcn (a block-quantised fn)
  DeviceBuffer<float> hz;            // [T, M]     fn · hcn
  DeviceBuffer<double> hmix;         // [T, M]     pre | post | comb of the current block
  DeviceBuffer<float> yb;            // [T, D]     the current block's output
  DeviceBuffer<float> ckv, cg;       // [T, cw]    the attention compressor's projections
  DeviceBuffer<float> ikv, ig;       // [T, icw]   the indexer compressor's
  DeviceBuffer<float> og;            // [T, G*R]   the grouped output's low-rank rows
  DeviceBuffer<cuda::Q81> ogq;       // q8_1 of og
  DeviceBuffer<int32_t> group_slab;  // [T*G]      a % G: wo_a's group of output vector a
  DeviceBuffer<float> ones;          // unweighted RMSNorms' multiplier, max(N*D, hd) ones
  // Rows of one indexer score launch over contexts up to ctx: the scores of a chunk of queries
  // ([rows, ctx] f32 in `work`) stay within kMlaScoreFloats, so a long prompt's prefill does not
  // need a [T, ctx] block (and at most 1024 rows, whatever the context).
  static constexpr int64_t kMlaScoreFloats = int64_t{1} << 26;
  static int64_t mla_score_rows(int64_t T, int64_t ctx) {
    return std::max<int64_t>(1, std::min({T, int64_t{1024}, kMlaScoreFloats / std::max<int64_t>(ctx, 1)}));
  }
  // routed expert GEMMs: vectors grouped by expert, and the groups' tiles (cuda/moe.cuh)
  DeviceBuffer<int32_t> group_order;                     // [T*K]
  DeviceBuffer<int32_t> group_start;                     // [E+1]
  DeviceBuffer<int32_t> tile_slab, tile_start, n_tiles;  // [moe_group_tile_bound], [1]
  DeviceBuffer<float> work;                              // [cap_work] split-KV attention partials / chunked GDN
  // one row, sized once
  DeviceBuffer<float> logits;            // [V]      a single-sequence step's logits
  DeviceBuffer<float> hn;                // [D]      its final-normed hidden
  DeviceBuffer<cuda::Q81> hnq;           // [D/32]
  DeviceBuffer<int32_t> amax;            // [1]      a greedy step's token
  DeviceBuffer<cuda::RowBest> row_best;  // [SMs*64] the greedy lm_head's per-warp bests
  DeviceBuffer<uint32_t> attn_arrivals;  // [H] the one-launch decode attention's counters
  // W4A4 activations of the current call (prefill_act = w4a4), sized for its widest rows
  DeviceBuffer<cuda::A4> x4;
  // Sizes every buffer for T rows and attention / GDN over contexts up to ctx (gdn_chunked: the
  // chunked GDN prefill's workspace too).
  // mla_latent: the call's MLA layers attend in the latent form (its T rows' latent queries and
  // outputs live in `work`).
  void ensure(Engine& e, const ModelConfig& c, int64_t T, int64_t ctx, bool gdn_chunked, bool mla_latent = false);
};

// --- the model -----------------------------------------------------------------------------------

struct Model::Impl {
  std::unique_ptr<Engine> own_engine;  // a stage after the first: its engine (declared first: freed last)
  Engine* e = nullptr;
  cudaStream_t s = nullptr;
  ModelConfig c;
  Arms arms;
  cuda::DeviceWeights weights;
  Workspace ws;
  Counters counters;
  // The one token ws.tok[0] holds when the host knows it (a one-token copy, or a greedy step's
  // token once read back), else -1: a decode call whose token is already there copies nothing.
  int64_t tok_dev = -1;
  std::vector<int32_t> tok_host;  // the token upload's host copy (alive until the copy ran)
  // prefill_act = w4a4: on for the current call when it has more than one token (run()); the
  // NVFP4 mat-muls then read W4A4 activations from ws.x4, quantized per call from the f32 rows.
  bool w4a4_on = false;
  int64_t gemm_min_tokens = 32;
  // The canaries' deliberate defects (memra/model.h Break; set_break). Read when a step's
  // launches are built: walk() (scale_layer), w4a4_acts() (w4a4_drop_block_scale), body() (bias).
  Break brk;
  // A batched decode step is running (decode_batch): its mat-muls stay on the mat-vec, whose
  // per-vector chain is the same for any number of output vectors (a GEMM above
  // gemm_min_tokens sequences would change a sequence's bits with B: DESIGN.md law 2).
  bool batch_step = false;
  // a batched step's sequence tables (upload_seq_tables) and their host copies (alive until the
  // uploads ran), and the batched attention's arrival counters
  struct {
    DeviceBuffer<cuda::GdnSeq> gdn;
    DeviceBuffer<cuda::AttnSeq> attn;
    DeviceBuffer<cuda::MlaSeq> mla;
    std::vector<cuda::GdnSeq> gdn_host;
    std::vector<cuda::AttnSeq> attn_host;
    std::vector<cuda::MlaSeq> mla_host;
  } seq_tables;
  DeviceBuffer<uint32_t> batch_arrivals;
  struct SeqTables {
    const cuda::GdnSeq* gdn = nullptr;
    const cuda::AttnSeq* attn = nullptr;
    const cuda::MlaSeq* mla = nullptr;
  };
  // decode batch: per-row token selections and their results
  DeviceBuffer<float> logits_batch;        // [B, V]
  DeviceBuffer<cuda::RowSelect> row_jobs;  // [B]
  DeviceBuffer<int32_t> row_tokens;        // [B]
  std::vector<cuda::RowSelect> jobs_host;  // the jobs' host copy (alive until the upload ran)
  // A batched step's graph for B sequences (decode_graph arm, decode_batch.cu), [B]: whatever
  // sequences a step serves, their tables and selection jobs are uploaded before the replay. Stale
  // when the workspace moved (gen), the grid bound or a decode-shaping arm changed, or a buffer
  // the launches read moved (bufs).
  struct BatchGraph {
    cudaGraphExec_t exec = nullptr;
    uint64_t gen = 0;
    int64_t bound = 0;                  // the context bound its grids were sized for
    Arms arms;                          // captured under
    std::array<const void*, 7> bufs{};  // the tables, arrival counters, jobs, tokens and logits it reads
    int64_t cores = 0;                  // batched_cores per replay
    bool never = false;                 // a layer took its sequences one by one (pointers baked in): B stays eager
  };
  std::vector<BatchGraph> batch_graphs;

  int64_t k_used() const { return std::max<int64_t>(c.n_expert_used, 1); }
  void check_arms() const;
  void check_cache(const Cache& cache) const;

  // --- mat-muls and row ops (layer_walk.cu)
  const cuda::A4* w4a4_acts(DType type, const float* xf, int64_t ld, int64_t n, int64_t n_out, int x_div);
  bool use_gemm(const cuda::DMat& w, int64_t n_out, const int32_t* slab) const;
  void gemm(const cuda::DMat& w, const float* xf, int64_t ld, const cuda::Q81* xq, float* y, int64_t ld_y, int64_t T,
            bool add);
  // y[a] (+)= W x[a / x_div]: f32 or q8_1 activations by the weight type.
  void mv(const cuda::DMat& w, const float* xf, int64_t ld, const cuda::Q81* xq, float* y, int64_t ld_y, int64_t n_out,
          bool add, int x_div = 1, const int32_t* slab = nullptr);
  // Counters::nvfp4_pair32_launches: a launch of NVFP4 weights against q8_1 activations under pair32.
  void count_pair32(const cuda::MatvecParams& p) {
    if (p.w.type == DType::NVFP4 && !p.x4 && p.nvfp4_dot == Nvfp4Dot::pair32) ++counters.nvfp4_pair32_launches;
  }
  struct Job {
    const cuda::DevMatrix* w;
    float* y;
  };
  void mv_group(std::initializer_list<Job> jobs, const float* xf, int64_t ld, const cuda::Q81* xq, int64_t n_out,
                int x_div = 1, const int32_t* slab = nullptr);
  // A row op of rows of n (x at stride ld_x, z at ld_z) into y (stride n) and q (q8_1 when
  // n % 32 == 0); a norm's eps is the model's rms_eps unless given.
  void rowop(cuda::RowOp op, const float* x, int64_t ld_x, const float* zz, int64_t ld_z, const float* wt, float* y,
             cuda::Q81* qq, int64_t rows, int64_t n, std::optional<double> eps = std::nullopt);
  void norm_quant(const float* x, const float* wt, float* y, cuda::Q81* qq, int64_t rows, int64_t n);
  // RMSNorm of an MLA latent (eps ModelConfig::kMlaNormEps): rows of n at stride ld_x into y
  // (stride n) and q (q8_1 when n % 32 == 0).
  void latent_norm(const float* x, int64_t ld_x, const float* wt, float* y, cuda::Q81* qq, int64_t rows, int64_t n);

  // --- the layer walk (layer_walk.cu): every layer kind in three parts — the projections of all
  // rows, the sequence-local core of each sequence over its own cache, the output projection.
  struct Seq {
    Cache::Impl* ci;
    int64_t ctx_bound;  // attention grid bound (pos + rows, or max_ctx under a graph)
  };
  void attention_project(cuda::DevLayer& L, int64_t T);
  void attention_core(cuda::DevLayer& L, Cache::Impl* ci, int64_t li, int64_t T, int64_t ctx_bound, int64_t r0,
                      const cuda::AttnSeq* batch = nullptr);
  void attention_output(cuda::DevLayer& L, int64_t T);
  void gdn_project(cuda::DevLayer& L, int64_t T);
  void gdn_core(cuda::DevLayer& L, Cache::Impl* ci, int64_t li, int64_t T, int64_t r0,
                const cuda::GdnSeq* batch = nullptr, int n_seq = 1);
  SeqTables upload_seq_tables(std::span<const Seq> seqs, int64_t rows);
  void gdn_output(cuda::DevLayer& L, int64_t T);
  // The DSA indexer's scores and top-k over the keys each query row sees (layer_walk.cu).
  struct IndexerRows {
    const float* q;     // [T, n_head, head_dim] rotated queries
    const float* w;     // [T, n_head] head weights (times w_scale)
    const float* keys;  // [keys, head_dim]
    int n_head, head_dim;
    float w_scale = 1.0f;
    int ratio = 1;   // positions per key (DeepSeek-V4: the CSA compress rate; GLM-5's hybrid: the pool)
    int32_t* sel;    // [T, topk] out
    int32_t* n_sel;  // [T] out
    int topk = 0;    // keys kept per query (0: dsa_topk)
    // a batched step's MLA layer: row t is sequence t's token, its keys that sequence's pool_rows
    // (pooled) or index_k (keys unused)
    const cuda::MlaSeq* seqs = nullptr;
    bool pooled = false;
  };
  void indexer_topk(const IndexerRows& x, const int64_t* pos_dev, int64_t T, int64_t ctx_bound);
  void mla_project(cuda::DevLayer& L, int64_t T);
  void mla_core(cuda::DevLayer& L, Cache::Impl* ci, int64_t li, int64_t T, int64_t ctx_bound, int64_t r0,
                const cuda::MlaSeq* batch = nullptr);
  void mla_latent_attention(cuda::DevLayer& L, Cache::Impl* ci, int64_t li, cuda::SparseAttnParams ap);
  // The output projection added into y (ws.x), or written into a hyper-connected block's output
  // (ws.yb, add = false).
  void mla_output(cuda::DevLayer& L, int64_t T, float* y, bool add);
  // Kimi delta attention (GLM-5's hybrid) in the same three parts (layer_walk.cu).
  void kda_project(cuda::DevLayer& L, int64_t T);
  void kda_core(cuda::DevLayer& L, Cache::Impl* ci, int64_t li, int64_t T, int64_t r0,
                const cuda::GdnSeq* batch = nullptr, int n_seq = 1);
  void kda_output(cuda::DevLayer& L, int64_t T, float* y, bool add);
  // DeepSeek-V4 (dsv4_walk.cu): the tables of rotation frequencies (sliding, compressed), the
  // hyper-connections around a block, the attention in three parts, the whole walk.
  DeviceBuffer<double> dsv4_freq[2];
  // head: the final collapse (DeepSeek-V4: hc_head's weights; hc == nullptr: the streams' mean).
  void hc_collapse(const cuda::DevHyper* hc, int64_t T, bool head);
  void hc_enter(const cuda::DevHyper& hc, const cuda::DevVec& norm, int64_t T);
  void hc_leave(int64_t T);
  void dsv4_project(cuda::DevLayer& L, int64_t T);
  void dsv4_core(cuda::DevLayer& L, Cache::Impl& ci, int64_t li, int64_t T, int64_t ctx_bound, int64_t r0);
  void dsv4_output(cuda::DevLayer& L, int64_t T);
  // The hyper-connected walk: DeepSeek-V4's layers, or GLM-5's hybrid's (KDA / MLA mixers, dense
  // or MoE FFN, the mean collapse at the end).
  void hyper_walk(std::span<const Seq> seqs, int64_t rows, const SeqTables* pre = nullptr);
  void glu(int64_t rows, int64_t n);
  void swiglu(const cuda::DevMatrix& g, const cuda::DevMatrix& u, const cuda::DevMatrix& d, int64_t n_out, int x_div,
              const int32_t* slab, float* y, bool add);
  bool use_routed_gemm(const cuda::DevMatrix& m, int64_t T) const;
  void routed_gemm(std::initializer_list<std::pair<const cuda::DMat*, float*>> ms, const cuda::Q81* xq, int x_div,
                   int64_t ld_y, int64_t n);
  void expert_swiglu(const cuda::DevLayer& L, int64_t T, int K);
  void ffn_layer(cuda::DevLayer& L, int64_t T);  // dense or MoE, added into ws.x
  // The MoE block added into `out` (ws.x, or DeepSeek-V4's zeroed block output ws.yb): the
  // router, the family's routing (softmax, sigmoid-grouped, or DeepSeek-V4's sqrt-softplus /
  // hash in dsv4.cuh), the experts (clamped where swiglu_limit says), the shared expert (gated
  // in Qwen), the combine.
  void moe_layer(cuda::DevLayer& L, int64_t T, float* out);
  // The embedding of ws.tok and every layer, leaving the residual stream in ws.x: seqs.size()
  // sequences of `rows` rows each (row r of the step belongs to sequence r / rows). The one loop
  // of single-sequence steps (one sequence of T rows) and batched steps (B sequences of one).
  // pre: a batched step's tables uploaded by the caller (a graph replays them), else walk uploads them.
  void walk(std::span<const Seq> seqs, int64_t rows, const SeqTables* pre = nullptr);
  void embed(int64_t T);  // ws.x = the embedding rows of ws.tok[0, T)
  // Break::scale_layer's defect: x[i] *= brk.scale_factor over n values (a canary's; layer_walk.cu).
  void break_scale(float* x, int64_t n);

  // --- the MoE selection ledger (Model::attach_ledger; selection_ledger.cu): while attached, the walk
  // copies each MoE layer's route results into a device ring after the layer (one small launch
  // per MoE layer per step); every entry point drains the ring into *ledger once its results
  // are on the host. Attaching or detaching marks captured graphs stale (the launches change).
  SelectionLedger* ledger = nullptr;
  DeviceBuffer<cuda::LedgerRow> ledger_ring;
  DeviceBuffer<unsigned long long> ledger_count;  // [1] rows written since attach
  unsigned long long ledger_read = 0;             // rows drained so far
  int64_t moe_layers() const;
  void ledger_reserve(int64_t rows);  // the ring holds `rows` more rows before the next drain
  void ledger_record(int64_t li, std::span<const Seq> seqs, int64_t rows);
  void ledger_drain();

  // --- a single-sequence step (layer_walk.cu): prepare on the host (every stage's scratch, the
  // tokens up), then body: each stage's part (its launches, capturable) and after_part (its
  // hand-over, outside any graph)
  void prepare(std::span<const int32_t> toks, Cache::Impl& ci, int64_t ctx_bound, bool device_token = false);
  void part(Cache::Impl& ci, int64_t T, int64_t ctx_bound, bool greedy);
  void after_part(int64_t T, bool greedy);
  void body(Cache::Impl& ci, int64_t T, int64_t ctx_bound, bool greedy = false);
  void run(std::span<const int32_t> toks, Cache::Impl& ci, bool greedy = false, bool device_token = false);

  // --- one decode token, eager or replayed from the cache's graphs, one per stage (decode_graph.cu)
  void decode(int32_t token, Cache::Impl& ci, bool greedy, bool device_token = false);
  bool graph_stale(const Cache::Impl& ci, bool greedy) const;
  void capture(Cache::Impl& ci, bool greedy);

  // --- B sequences, one token each (decode_batch.cu)
  void decode_batch(std::span<const int32_t> toks, std::span<Cache::Impl* const> cis,
                    std::span<const std::optional<SampleSpec>> specs);
  // The step's layers, output norm, lm_head and selection (after the tokens' upload).
  void batch_body(std::span<const Seq> seqs, const SeqTables* pre);
  // The step from batch_graphs[B], captured or re-captured first; false: B has no graph (eager).
  bool batch_graph(std::span<const Seq> seqs, std::span<Cache::Impl* const> cis,
                   std::span<const std::optional<SampleSpec>> specs);
  void select_rows(const float* x, std::span<const std::optional<SampleSpec>> specs, std::span<int64_t* const> pos);
  void upload_row_jobs(std::span<const std::optional<SampleSpec>> specs, std::span<int64_t* const> pos);

  // --- results (model.cu)
  [[noreturn]] void fail_nonfinite(const char* what, int64_t pos, int64_t sequence = -1);
  std::vector<float> fetch_logits(const char* what, int64_t pos);

  // --- pipeline stages (pipeline.cu; memra/model.h LoadOptions). A split model is a chain of
  // Impls, one per stage, each holding layers [l0, l1) on its own engine: the first (Model's
  // impl_) owns the others and is the one the entry points drive; a step runs each stage's part
  // on its stream in turn (walk over its layers; the first embeds, the last adds the output norm
  // and lm_head), and hand_over passes the residual stream to the next. An unsplit model is the
  // chain of one: l0 = 0, l1 = n_layer, no next, and none of the calls below launch anything.
  int stage = 0;
  int64_t l0 = 0, l1 = 0;
  Impl* next = nullptr;
  Impl* head = this;                          // the first stage
  std::vector<std::unique_ptr<Impl>> others;  // the first stage's: stages 1.. (owned)
  cudaEvent_t handed = nullptr;               // this stage's hand-over copies done (next waits on it)
  cudaEvent_t done = nullptr;                 // the last stage: recorded where a step begins (join)
  // Model::time_stages: events around this stage's part of each single-sequence step
  bool timing = false, timed = false;
  cudaEvent_t t_begin = nullptr, t_end = nullptr;
  void mark(bool end) {
    if (!timing) return;
    MEMRA_CUDA_CHECK(cudaEventRecord(end ? t_end : t_begin, s));
    timed = true;
  }
  Impl& last() { return next ? next->last() : *this; }
  const Impl& last() const { return next ? next->last() : *this; }
  int n_stages() const { return static_cast<int>(head->others.size()) + 1; }
  bool split() const { return head->next != nullptr; }
  template <class F>
  void each_stage(F&& f) {
    for (Impl* st = head; st; st = st->next) f(*st);
  }
  int64_t* pos_of(Cache::Impl& ci) const { return ci.pos_dev[static_cast<size_t>(stage)].data(); }
  // The stage that holds layer li.
  const Impl& stage_of(int64_t li) const;
  // Before a step's first launch (first stage): its stream waits for everything the last stage
  // enqueued so far, so a hand-over never overwrites a next stage's input while it still reads it.
  void join();
  // After this stage's part of a step over `rows` rows: the residual stream (DeepSeek-V4: the
  // hyper-connection streams) and the token ids into the next stage's workspace on this stream,
  // then the next stage's stream waits for the copies (Break::pipeline_drop_wait drops the wait).
  void hand_over(int64_t rows);
  // A non-last stage's positions advance at the end of its part (the last stage's advance in the
  // lm_head's launches): one sequence by `rows`, or each of the batch by one.
  void advance_pos(Cache::Impl& ci, int64_t rows);
  void advance_pos_batch(std::span<Cache::Impl* const> cis);
  ~Impl();
};

// The stages of a model of config c (pipeline.cu): each one's device and layers [l0, l1), from
// opt.split or balanced by weight bytes. Errors name the option: devices[0] not the engine's,
// more stages than layers, a split of the wrong length, not ascending or out of range.
struct StagePlan {
  int device;
  int64_t l0, l1;
};
std::vector<StagePlan> plan_stages(const ModelConfig& c, const LoadOptions& opt, int engine_device,
                                   std::span<const int64_t> layer_bytes, int64_t embed_bytes, int64_t head_bytes);

// The model's chain of stages as `opt` asks (the first on e, the others on engines of their own),
// each stage's weights made by `weights` (upload or synthetic) on its engine for its layers.
using StageWeights = std::function<cuda::DeviceWeights(Engine&, cuda::LayerRange)>;
std::unique_ptr<Model::Impl> make_model(Engine& e, const ModelConfig& c, const LoadOptions& opt,
                                        const cuda::ModelBytes& bytes, const StageWeights& weights);

// The current device set for a stage's launches (kernels launch only into a stream of the
// current device) and the caller's restored at the end of the scope; the default form only
// restores.
struct StageDevice {
  int prev = 0;
  StageDevice() { cudaGetDevice(&prev); }
  explicit StageDevice(int device) : StageDevice() { MEMRA_CUDA_CHECK(cudaSetDevice(device)); }
  StageDevice(const StageDevice&) = delete;
  StageDevice& operator=(const StageDevice&) = delete;
  ~StageDevice() { cudaSetDevice(prev); }
};

inline cudaStream_t stream_of(const Engine& e) { return reinterpret_cast<cudaStream_t>(e.stream()); }

}  // namespace memra
