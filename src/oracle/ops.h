// The CPU oracle's building blocks (internal to the oracle layer; tests include it to check each
// op against a hand computation). Numeric contract, everywhere:
//   - storage f32 (weights, activations between ops, KV cache, conv state);
//   - every dot product, norm, softmax and the GDN state in f64, rounded to f32 once at the end;
//   - a dot product sums in a FIXED order (8 interleaved partial sums, combined pairwise), so a
//     value never depends on thread count, batch size or which entry point computed it.
// Shapes are row-major; [T, X] means T rows of X contiguous floats.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <vector>

#include "memra/config.h"
#include "memra/oracle.h"
#include "memra/rope_freq.h"
#include "memra/selection_ledger.h"
#include "memra/weights.h"

namespace memra::oracle {

namespace ops {

// Runs fn(begin, end) over [0, n) split into contiguous ranges, one per thread. Threads only
// change which core computes a row, never how: every row is computed by the same code in the
// same order, so results are identical for any thread count (determinism law 1).
// `work` is the total multiply-adds; below a threshold everything runs on the calling thread.
void parallel_rows(int64_t n, int64_t work, int threads, const std::function<void(int64_t, int64_t)>& fn);
// The work below which parallel_rows stays on one thread (default 2^20); returns the old value.
// Tests lower it so tiny models take the threaded path too.
int64_t set_min_parallel_work(int64_t work);

double dot(const float* a, const float* b, int64_t n);        // f64, fixed order
double dot_f64(const double* a, const double* b, int64_t n);  // plain sequential f64
// y[r] = f32(dot(W.row(r), x)) for every row. With W.q8_1_input, x is first rounded to q8_1
// (the GPU's activation contract for a quantised matrix; memra/weights.h Matrix).
void matvec(const Matrix& w, const float* x, float* y, int threads);
// Y[t, r] = f32(dot(W.row(r), X[t])) for T inputs: bit-identical to T matvec calls.
void matmul(const Matrix& w, const float* x, int64_t T, float* y, int threads);
// The T rows of w.cols values that a product with `w` reads: x itself, or (w.q8_1_input: the GPU's
// activation contract for a block-quantised matrix) each row rounded to q8_1 and dequantised into
// `buf`. Every product of a Matrix goes through it, matvec / matmul and the ops that take rows
// themselves (DeepSeek-V4's grouped output, its hyper-connection mixers).
const float* input_rows(const Matrix& w, const float* x, int64_t T, std::vector<float>& buf);

double silu(double x);
double sigmoid(double x);
double softplus(double x);  // log(1 + e^x); x for x > 20 (torch's threshold)

// y = f32(x * rsqrt(mean(x^2) + eps) * w), all in f64. `w` is the canonical multiplier.
void rmsnorm(const float* x, const float* w, int64_t n, double eps, float* y);
// Gated output norms: y = f32(w * x * rsqrt(mean(x^2) + eps) * gate(z)), gate silu (GDN) or
// sigmoid (KDA).
enum class NormGate { silu, sigmoid };
void rmsnorm_gated(const float* x, const float* z, const float* w, int64_t n, double eps, float* y,
                   NormGate gate = NormGate::silu);
// NEOX (half-split) rotation of the first n_rot dims of one head at position pos:
// pair (x_i, x_{i+n_rot/2}) rotated by pos * theta^(-2i/n_rot); dims >= n_rot unchanged.
void rope_neox(float* x, int64_t n_rot, int64_t pos, double theta);
// Interleaved (GPT-J / DeepSeek) rotation of the first n_rot dims: pair (x_2i, x_2i+1) rotated by
// pos * theta^(-2i/n_rot). transformers 5.17's glm_moe_dsa writes the rotated pairs de-interleaved
// ([evens | odds]) into q and k alike, which leaves every q . k the same as this in-place form.
void rope_pairs(float* x, int64_t n_rot, int64_t pos, double theta);
// y = f32((x - mean) / sqrt(var + eps) * w + b), all in f64 (torch LayerNorm, biased variance).
void layernorm(const float* x, const float* w, const float* b, int64_t n, double eps, float* y);
// The positions of the k largest scores in increasing position order (all of them when there are
// at most k); ties at the cut go to the lowest position.
std::vector<int32_t> select_top(std::span<const double> scores, int64_t k);
// The same choice as torch.topk(largest, sorted) on the CPU (ATen's topk loop: (f32 value,
// index) pairs, nth_element at k - 1 then a sort of the first k - 1, NaN first) over a row of
// n_total scores whose entries past scores.size() are -inf; the chosen entries below
// scores.size() in increasing position order. Only the nth_element branch (k·64 > n_total) is
// reproduced; a longer row is refused rather than approximated.
std::vector<int32_t> select_top_torch_cpu(std::span<const double> scores, int64_t n_total, int64_t k);

// Softmax in f64 of the router logits, the top-k by probability (ties: lowest expert index),
// renormalised to sum 1 when `renorm`. Returns (expert, weight) in selection order.
std::vector<std::pair<int64_t, double>> route(std::span<const float> router_logits, int64_t k, bool renorm);
// Sigmoid-grouped gating (ModelConfig::MoeGating::SigmoidGrouped) in f64: choice = sigmoid(l) +
// bias; groups ranked by the sum of their two best choices; top-k choices inside the best
// n_group_used groups (ties: lowest group, lowest expert); weights sigmoid(l), renormalised when
// `renorm` (sum + 1e-20, as transformers), times `scale`. Returns (expert, weight), best first.
std::vector<std::pair<int64_t, double>> route_grouped(std::span<const float> router_logits, std::span<const float> bias,
                                                      int64_t k, int64_t n_group, int64_t n_group_used, bool renorm,
                                                      double scale);

// --- layer mixers and FFNs over T consecutive tokens; x [T, D] normed input, out [T, D] ----------

// Full attention at positions pos0..pos0+T-1: writes K/V of these positions into `cache`
// (which must hold positions < pos0 already) and attends causally over 0..pos.
void attention(const ModelConfig& c, const AttnWeights& w, const float* x, int64_t T, int64_t pos0,
               AttnCacheLayer& cache, float* out, int threads);

// The linear-attention layers' input conv: silu(causal depthwise conv_K) of T rows of cd channels
// over [the K-1 inputs in `state` | x]; taps [cd, K], tap K-1 on the newest input. `state` then
// holds the last K-1 inputs.
std::vector<float> causal_conv_silu(const Matrix& taps, const float* x, int64_t T, int64_t cd, int64_t K,
                                    std::vector<float>& state);

// Gated DeltaNet over T tokens continuing the conv and recurrent state in `cache`.
void gdn(const ModelConfig& c, const GdnWeights& w, const float* x, int64_t T, GdnPrefill form, GdnCacheLayer& cache,
         float* out, int threads);

// The delta rule alone (one head, T steps), exposed for the recurrent-vs-chunked tests.
// q,k [T, dk] (already L2-normed, q scaled), v [T, dv], g (log decay) and beta [T];
// state [dk, dv] in and out; o [T, dv].
void delta_rule_recurrent(const double* q, const double* k, const double* v, const double* g,
                          const double* beta, int64_t T, int64_t dk, int64_t dv, double* state, double* o);
void delta_rule_chunked(const double* q, const double* k, const double* v, const double* g,
                        const double* beta, int64_t T, int64_t dk, int64_t dv, int64_t chunk,
                        double* state, double* o);
// Kimi delta attention's layer (memra/layer_schema.h KdaT) over T tokens continuing `cache`
// (conv: the last K-1 inputs [K-1, 3*H*d]; state: [H, d, d]). gate_bound: the safe gate's lower
// bound (g = bound * sigmoid(exp(A_log) * f)); without one, g = -exp(A_log) * softplus(f).
struct KdaShape {
  int64_t n_head = 0, head_dim = 0, conv_kernel = 0;
  std::optional<double> gate_bound;
  double rms_eps = 1e-6;  // the output norm's
};
void kda(const KdaShape& s, const KdaWeights& w, const float* x, int64_t T, GdnPrefill form, GdnCacheLayer& cache,
         float* out, int threads);

// Kimi delta attention's rule (GLM-5's hybrid, kimi_linear): the same recurrence with a log
// decay per key channel, g [T, dk] (state row i decays by exp(g_t[i])), in both forms; the
// chunked one is the WY form above with every decay taken per channel.
void kda_delta_rule_recurrent(const double* q, const double* k, const double* v, const double* g, const double* beta,
                              int64_t T, int64_t dk, int64_t dv, double* state, double* o);
void kda_delta_rule_chunked(const double* q, const double* k, const double* v, const double* g, const double* beta,
                            int64_t T, int64_t dk, int64_t dv, int64_t chunk, double* state, double* o);

// Multi-head latent attention with the DSA indexer (src/oracle/mla.cpp) at positions
// pos0..pos0+T-1: writes these positions' expanded keys/values, latent rows (and, with `dsa`,
// indexer keys) into `cache`. With `dsa` it computes each token's selection into `selection`;
// without, it reuses `selection` as the layer before it left it (a "shared" layer), which must
// hold T rows. form = latent: a one-token call attends in the absorbed form (mla_attend_latent);
// every other call, and form = expanded, over the expanded rows.
void mla(const ModelConfig& c, const MlaWeights& w, const DsaWeights* dsa, const float* x, int64_t T, int64_t pos0,
         AttnCacheLayer& cache, std::vector<std::vector<int32_t>>& selection, float* out, int threads,
         MlaDecode form = MlaDecode::expanded);

// The absorbed latent form of MLA's attention (the mla_decode = latent contract; the GPU's
// mla_absorb_q_run / sparse attention / mla_absorb_o_run). Query head h of token t over the
// selected positions s of the latent rows lat[s] = [c_s (kv_rank) | kr_s (n_rot, rotated)]:
//   qa_h = f32(sum_i q_h[i] W[h(dn+dv) + i])              i < dn: W_UK_h^T times the query's nope part
//   score_s = [qa_h | q_h[dn..]] . lat[s] / sqrt(dn + n_rot)
//   ol_h = f32(sum_s softmax(score)_s c_s)
//   o_h[d] = f32(W[h(dn+dv) + dn + d] . ol_h)              W_UV_h
// with W = wkv_b's values ([H (dn + dv), kv_rank]) and f32 inputs: no q8_1 rounding of q or ol,
// whatever wkv_b's storage (it is the expanded form's q8_1-rounded latent that differs). Sums
// in f64, rounded once where written f32. Equal to the expanded form in exact arithmetic.
// q [T, H, dn + n_rot], lat [positions, kv_rank + n_rot], o [T, H, dv].
void mla_attend_latent(const Matrix& wkv_b, int64_t H, int64_t dn, int64_t n_rot, int64_t dv, const float* q, int64_t T,
                       const float* lat, const std::vector<std::vector<int32_t>>& selection, float* o, int threads);

void ffn(const FfnWeights& w, const float* x, int64_t T, float* out, int threads);
// record (when set): one Selection per token, at position pos0 + t, in `layer`.
void moe(const ModelConfig& c, const MoeWeights& w, const float* x, int64_t T, float* out, int threads,
         std::vector<Selection>* record = nullptr, int64_t pos0 = 0, int32_t layer = 0);

// --- DeepSeek-V4 (src/oracle/dsv4.cpp; equations in docs/deepseek-v4.md) ---------------------

// One token's manifold-constrained hyper-connection weights over its N residual streams X [N, D]
// (stream-major): h = X / rms(X) over all N·D values; z = fn h, split [pre N | post N | comb N²];
// pre = sigmoid(z·s0 + b) + hc_eps; post = 2 sigmoid(z·s1 + b); comb[i][j] = softmax_j(z·s2 + b)
// + hc_eps, then Sinkhorn: columns, then (rows, columns) iters - 1 times, each sum + hc_eps.
// comb[i][j] carries source stream i into destination stream j.
struct HcMix {
  int64_t n = 0;
  std::vector<double> pre, post, comb;  // [N], [N], [N*N] row-major
};
HcMix hc_mix(const float* X, int64_t N, int64_t D, const Matrix& fn, std::span<const float> base,
             std::span<const float> scale, int64_t iters, double hc_eps, double rms_eps);
// The block's input: c[d] = f32(sum_n pre[n] X[n][d]).
void hc_collapse(std::span<const double> pre, const float* X, int64_t D, float* c);
// The streams after the block (the mix replaces the residual add):
// X[k][d] = f32(post[k] out[d] + sum_j comb[j][k] X[j][d]).
void hc_expand(const HcMix& m, const float* out, float* X, int64_t D);
// The final collapse's weights (hc_head): pre[n] = sigmoid((fn h)[n]·scale[0] + base[n]) + hc_eps.
std::vector<double> hc_head_pre(const float* X, int64_t N, int64_t D, const Matrix& fn, std::span<const float> base,
                                std::span<const float> scale, double hc_eps, double rms_eps);

// A rope table's frequencies, plain or YaRN (memra/rope_freq.h: shared with the GPU engine).
using memra::rope_inv_freq;
using memra::Yarn;
// Interleaved rotation of the 2·inv_freq.size() values at x (pair 2i, 2i+1 by pos·inv_freq[i]);
// inverse rotates by -angle (DeepSeek-V4 undoes the query's rotation on the attention output).
void rope_pairs_freq(float* x, std::span<const double> inv_freq, int64_t pos, bool inverse);
// Gated pooling of S slots (kv, gate [S, width], the position bias already in gate; -inf: an empty
// slot of weight 0): out[c] = sum_s softmax_s(gate[., c]) kv[s][c].
void pool_window(const float* kv, const float* gate, int64_t S, int64_t width, float* out);
// One compressor's state over a sequence (a CSA or HCA layer's, or a CSA indexer's): every
// token's projections kv and gate ([tokens, cw], cw = 2·width with overlap, else width; gate
// without the position bias) and the rows closed so far ([rows, width]). Window w (tokens
// w·ratio .. w·ratio + ratio - 1) closes with its last token. Its slots: without overlap (HCA)
// token w·ratio + j with gate + ape[j]; with overlap (CSA) first the previous window's tokens'
// first halves (gate[:width] + ape[j][:width]; empty slots for w = 0), then this window's
// tokens' second halves (gate[width:] + ape[j][width:]). The row: pool_window over the slots,
// RMSNorm with `norm`, rotated at position w·ratio on its last 2·inv_freq.size() dims.
using oracle::CompressorState;  // memra/oracle.h
// Appends T tokens' projections (kv, gate [T, cw]) and closes the windows they complete.
// ape [ratio, cw], norm [width].
void compressor_append(CompressorState& s, const float* kv, const float* gate, int64_t T, std::span<const float> ape,
                       std::span<const float> norm, double eps, std::span<const double> inv_freq);
// The closed rows a query at position p may read: (p + 1) / ratio (whole windows at or before p).
inline int64_t visible_rows(int64_t p, int64_t ratio) { return (p + 1) / ratio; }
// The lightning indexer's score of T keys K [T, hd] for one query q [n_head, hd] with per-head
// weights w [n_head]: sum_h w_h / sqrt(n_head) * relu(q_h . K_t) / sqrt(hd).
std::vector<double> indexer_scores(const float* q, const float* w, const float* K, int64_t T, int64_t n_head,
                                   int64_t head_dim);
// Attention of q [n_head, hd] over `keys` (rows of hd; K = V) with a sink logit per head: softmax
// over [q.K_j / sqrt(hd) ..., sinks[h]], the sink's share dropped. out [n_head, hd].
void sink_attention(const float* q, std::span<const float* const> keys, const float* sinks, int64_t n_head,
                    int64_t head_dim, float* out);
// The grouped low-rank output: o [groups · wo_a.cols] in groups of wo_a.cols, group g through rows
// g·R .. g·R + R - 1 of wo_a (R = wo_a.rows / groups); y [wo_a.rows].
void grouped_out(const Matrix& wo_a, int64_t groups, const float* o, float* y);
// Score routing: s = sqrt(softplus(logit)); the top-k of s + bias (ties: lowest expert), or the
// hash layer's `fixed` experts; weights s / (sum + 1e-20) * scale, in selection order.
std::vector<std::pair<int64_t, double>> route_sqrt_softplus(std::span<const float> logits, std::span<const float> bias,
                                                            std::span<const int32_t> fixed, int64_t k, double scale);
// SwiGLU with the gate clamped from above and the up projection on both sides at `limit`.
void ffn_clamped(const FfnWeights& w, const float* x, int64_t T, double limit, float* out, int threads);

}  // namespace ops
}  // namespace memra::oracle
