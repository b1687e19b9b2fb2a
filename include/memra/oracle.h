// memra/oracle.h — the CPU reference model: the semantic truth the GPU engine is tested against.
//
// Same shapes as the serving API (DESIGN.md): load, new_cache, forward_last, prime, decode_step,
// plus forward_all (every position's logits) and the MTP head. Numeric contract (docs/oracle.md):
// f32 storage, f64 accumulation in dot products, norms, softmax and the Gated-DeltaNet state,
// dot products in one fixed summation order, deterministic for any thread count.
//
// Consistency the tests hold it to:
//   - prime(p[:n-1]) + decode_step(p[n-1]) == forward_last(p) BITWISE when the GDN prefill form is
//     recurrent (the default; the same per-token operations in the same order), and within 1e-5 relative with
//     the chunked form (a different but algebraically identical summation of the delta rule);
//   - forward_all(p)[i] == forward_last(p[:i+1]) bitwise, in both GDN forms (chunks start at the
//     same positions, and a position's chunked output never reads later tokens of its chunk);
//   - chunked and recurrent GDN agree to <= 1e-5 relative.
//
// provides: Options, CompressorState, AttnCacheLayer, GdnCacheLayer, Cache, Step, Model, top_k
#pragma once

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "memra/arms.h"
#include "memra/config.h"
#include "memra/selection_ledger.h"
#include "memra/source.h"
#include "memra/weights.h"

namespace memra::oracle {

inline constexpr int64_t kGdnChunk = 64;

struct Options {
  // prime / forward_*; decode_step is one recurrent step. The arm's one default (memra/arms.h):
  // recurrent, the form bit-identical to decode.
  GdnPrefill gdn_prefill = Arms{}.gdn_prefill;
  int threads = 0;  // 0: std::thread::hardware_concurrency(); results do not depend on it
  // The GPU's activation contract (memra/quant.h W8A8 / W4A8): every input row of a product with
  // a matrix stored as Q8_0 or NVFP4 is rounded to q8_1 first, as the GPU model does. The
  // oracle's value is then the exact value of the GPU's integer dot products, and GPU and
  // oracle differ only by the GPU's f32 accumulation (and the rare q8_1 rounding that this
  // tips), not by the quantisation of every activation. Off (the default): f32 activations,
  // the model's own value; float matrices (F32, F16, BF16) are unaffected either way.
  bool q8_1_activations = false;
  // Which rows a DeepSeek-V4 lightning indexer keeps when scores tie at its top-k cut. Its
  // scores are sums of ReLUs, so with few indexer heads exact zeros (every head negative) tie
  // often. LowestPosition, the contract (the GPU's too): the earliest rows, whatever the call.
  // TorchCpu: the rows torch.topk (torch 2.11, CPU) returns over the call's whole score row,
  // rows not yet closed at -inf, as transformers' prefill and decode build it. Not a contract
  // (it depends on how many rows the call closed, so a prompt and its decode can differ): it
  // exists so a transformers bank can be compared row by row (hf_bank_test).
  enum class TopkTies { LowestPosition, TorchCpu };
  TopkTies topk_ties = TopkTies::LowestPosition;
  // MLA attention of one-token calls (decode_step, a one-token prime): expanded (the default,
  // the arm's) or the absorbed latent form, the GPU's mla_decode = latent contract
  // (ops::mla_attend_latent).
  MlaDecode mla_decode = Arms{}.mla_decode;
};

// A DeepSeek-V4 compressor's state over a sequence (src/oracle/dsv4.cpp compressor_append):
// every token's projections kv and gate ([tokens, cw], cw = 2·width with overlap, else width;
// gate without the position bias) and the rows closed so far ([rows, width]).
struct CompressorState {
  int64_t ratio = 0, width = 0;
  bool overlap = false;
  std::vector<float> kv, gate, rows;
  int64_t cw() const { return overlap ? 2 * width : width; }
  int64_t tokens() const { return cw() ? static_cast<int64_t>(kv.size()) / cw() : 0; }
  int64_t n_rows() const { return width ? static_cast<int64_t>(rows.size()) / width : 0; }
};

struct AttnCacheLayer {
  // [max_ctx, kv_k_width] post-norm, post-RoPE keys; [max_ctx, kv_v_width] values (GQA: per KV
  // head; MLA: every head's expanded key and value; DeepSeek-V4: k only, its one head, K = V)
  std::vector<float> k, v;
  std::vector<float> index_k;        // [max_ctx, dsa_head_dim]: an MLA layer's own DSA indexer keys
  std::vector<float> index_gate;     // [max_ctx, dsa_head_dim]: their pool gate logits (dsa_kpool > 0)
  CompressorState comp, index_comp;  // DeepSeek-V4: the layer's compressor and its CSA indexer's
  std::vector<float> lat;  // [max_ctx, mla_kv_rank + n_rot]: an MLA layer's [normed latent | rotated rope key]
};
struct GdnCacheLayer {
  std::vector<float> conv;    // [K-1, conv_dim]: the last K-1 conv inputs, oldest first
  std::vector<double> state;  // [n_v_heads, d_k, d_v]: S per value head (o = S^T q)
};

// One sequence's state. Entries for layers of the other kind are empty.
struct Cache {
  int64_t max_ctx = 0;
  int64_t pos = 0;  // tokens already written
  std::vector<AttnCacheLayer> attn;
  std::vector<GdnCacheLayer> gdn;
  AttnCacheLayer mtp;   // the MTP layer's own K/V (when the model has one)
  int64_t mtp_pos = 0;  // MTP steps taken (the position the next mtp_step attends at)
};

struct Step {
  std::vector<float> logits;  // [n_vocab]
  std::vector<float> hidden;  // [n_embd] final-normed hidden state (the lm_head input)
};

class Model {
 public:
  // Config from the source's metadata, weights through load_weights.
  static Model load(const WeightSource& src, Options opt = {});
  static Model from_weights(ModelConfig c, ModelWeights w, Options opt = {});

  const ModelConfig& config() const { return cfg_; }
  const ModelWeights& weights() const { return w_; }
  const Options& options() const { return opt_; }
  void set_options(const Options& o);
  // Every later call appends its MoE routing decisions to `ledger` (memra/selection_ledger.h);
  // nullptr detaches. The ledger must outlive the attachment.
  void attach_ledger(SelectionLedger* ledger) { ledger_ = ledger; }

  Cache new_cache(int64_t max_ctx) const;

  // Last position's logits of a prompt, without a cache.
  std::vector<float> forward_last(std::span<const int32_t> tokens) const;
  // Every position's logits.
  std::vector<std::vector<float>> forward_all(std::span<const int32_t> tokens) const;
  // Runs the prompt from cache.pos on, writing every position's K/V and GDN state into `cache`;
  // returns the last position's logits. Input errors (token ids, length, empty) are found before
  // anything is written; after a numeric error (NaN/Inf) the cache content is unspecified.
  std::vector<float> prime(std::span<const int32_t> tokens, Cache& cache) const;
  // One token at cache.pos (a one-token recurrent GDN step).
  Step decode_step(int32_t token, Cache& cache) const;
  // One decode step of B sequences (the GPU's decode_step_batch shape): token b at caches[b]'s
  // position, logits per sequence — each exactly decode_step's, so the oracle side of the batched
  // decode gates needs no calibration. All inputs are checked before any cache is written;
  // errors name the sequence.
  std::vector<std::vector<float>> decode_step_batch(std::span<const int32_t> tokens, std::span<Cache* const> caches) const;
  // The MTP head: from the main model's final hidden state h_t (Step::hidden at position t) and
  // the next token x_{t+1}, logits for x_{t+2}. Attends over earlier MTP steps at position
  // cache.mtp_pos, so call it once per position in order. Fails when the model has no MTP head.
  Step mtp_step(std::span<const float> hidden, int32_t next_token, Cache& cache) const;

 private:
  Model(ModelConfig c, ModelWeights w, Options o);
  struct Run {
    std::vector<std::vector<float>> logits;  // all positions, or only the last
    std::vector<float> last_hidden;
  };
  Run run(std::span<const int32_t> tokens, Cache& cache, bool all_logits, GdnPrefill form) const;
  // The hyper-connected walk of DeepSeek-V4 and GLM-5's hybrid (src/oracle/hyper_model.cpp): N
  // residual streams per token.
  Run run_hyper(std::span<const int32_t> tokens, Cache& cache, bool all_logits, GdnPrefill form) const;
  void check_tokens(std::span<const int32_t> tokens, const Cache& cache) const;
  void check_cache(const Cache& cache) const;
  // `selection`: the DSA selection of the T tokens, passed from an MLA layer to the next.
  void run_layer(const LayerWeights& L, LayerKind kind, int64_t layer, std::vector<float>& x, int64_t T, int64_t pos0,
                 AttnCacheLayer* ac, GdnCacheLayer* gc, GdnPrefill form,
                 std::vector<std::vector<int32_t>>* selection = nullptr) const;
  std::vector<float> logits_of(const float* hidden_normed, int64_t pos) const;

  ModelConfig cfg_;
  ModelWeights w_;
  Options opt_;
  SelectionLedger* ledger_ = nullptr;
};

// The k largest logits, largest first; ties go to the lowest index (as greedy sampling does).
std::vector<std::pair<int32_t, float>> top_k(std::span<const float> logits, int k);

}  // namespace memra::oracle
