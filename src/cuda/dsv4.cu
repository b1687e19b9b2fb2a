// src/cuda/dsv4.cu — DeepSeek-V4's kernels (see dsv4.cuh).
#include <algorithm>

#include "cuda/common.cuh"
#include "cuda/dsv4.cuh"
#include "cuda/launch.cuh"
#include "memra/error.h"

namespace memra::cuda {

namespace {

constexpr int kThreads = 256;

__device__ __forceinline__ double sigmoid_d(double x) { return 1.0 / (1.0 + exp(-x)); }
__device__ __forceinline__ double softplus_d(double x) { return x > 20.0 ? x : log1p(exp(x)); }

// A block's f64 sum of one value per thread: warp butterflies, then the warps in index order.
// `red` is 32 doubles of shared scratch; every thread gets the total.
__device__ double block_sum_d(double v, double* red) {
  for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
  if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = v;
  __syncthreads();
  double t = 0;
  for (int w = 0; w < static_cast<int>(blockDim.x >> 5); ++w) t += red[w];
  __syncthreads();
  return t;
}

// Rotates the pair (a, b) by ang, or back, in f64 without contraction (the oracle's a·cs − b·sn).
__device__ __forceinline__ void rotate_pair(float& a, float& b, double ang, bool inverse) {
  const double cs = cos(ang), sn = inverse ? -sin(ang) : sin(ang);
  const double x = a, y = b;
  a = static_cast<float>(__dsub_rn(__dmul_rn(x, cs), __dmul_rn(y, sn)));
  b = static_cast<float>(__dadd_rn(__dmul_rn(y, cs), __dmul_rn(x, sn)));
}

// --- hyper-connections ------------------------------------------------------------------------------

// Grid (D chunks, T). Every block computes its token's weights in shared memory (f64, a thread
// per weight: each sum over a row or a column is taken by every thread that needs it, in index
// order, so the values are the oracle's serial ones); block 0 of a token writes them out; each
// block then collapses its chunk of D.
__global__ void hc_mix_kernel(HcMixParams p) {
  __shared__ double m[(2 + kHcMaxStreams) * kHcMaxStreams];
  __shared__ double sums[kHcMaxStreams * kHcMaxStreams];
  pdl_wait();
  pdl_release();
  const int64_t t = blockIdx.y;
  const int N = p.N, NN = N * N, l = threadIdx.x;
  const float* z = p.mean ? nullptr : p.z + t * (p.head ? N : (2 + N) * N);
  if (p.mean) {
    if (l < N) m[l] = 1.0 / N;
  } else if (p.head) {
    if (l < N)
      m[l] = sigmoid_d(static_cast<double>(z[l]) * static_cast<double>(p.scale[0]) + static_cast<double>(p.base[l])) +
             p.eps;
  } else {
    const double s2 = p.scale[2];
    double* comb = m + 2 * N;
    if (l < N) {
      m[l] = sigmoid_d(static_cast<double>(z[l]) * static_cast<double>(p.scale[0]) + static_cast<double>(p.base[l])) +
             p.eps;
      m[N + l] = 2.0 * sigmoid_d(static_cast<double>(z[N + l]) * static_cast<double>(p.scale[1]) +
                                 static_cast<double>(p.base[N + l]));
    }
    if (l < NN) comb[l] = static_cast<double>(z[2 * N + l]) * s2 + static_cast<double>(p.base[2 * N + l]);
    __syncthreads();
    const int i = l / N, j = l % N;
    double v = 0;
    if (l < NN) {  // softmax over the row, + eps
      double mx = -INFINITY;
      for (int c = 0; c < N; ++c) mx = fmax(mx, comb[i * N + c]);
      double sum = 0;
      for (int c = 0; c < N; ++c) sum += exp(comb[i * N + c] - mx);
      v = exp(comb[l] - mx) / sum + p.eps;
    }
    __syncthreads();
    if (l < NN) comb[l] = v;
    __syncthreads();
    // Sinkhorn: columns first, then (rows, columns) iters - 1 times; each divides by its sum + eps
    for (int step = 0; step < 2 * p.iters - 1; ++step) {
      const bool columns = step % 2 == 0;
      if (l < NN) {
        double sm = 0;
        for (int c = 0; c < N; ++c) sm += columns ? comb[c * N + j] : comb[i * N + c];
        sums[l] = sm;
      }
      __syncthreads();
      if (l < NN) comb[l] /= sums[l] + p.eps;
      __syncthreads();
    }
  }
  __syncthreads();
  const int M = p.head ? N : (2 + N) * N;
  if (p.mix && blockIdx.x == 0)
    for (int k = threadIdx.x; k < M; k += blockDim.x) p.mix[t * M + k] = m[k];
  const int64_t d = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (d >= p.D) return;
  const float* X = p.X + t * N * p.D;
  double s = 0;
  for (int n = 0; n < N; ++n) s += m[n] * static_cast<double>(X[n * p.D + d]);
  p.out[t * p.D + d] = static_cast<float>(s);
}

// A thread per (token, dim): all N streams of that dim read first, then written.
__global__ void hc_expand_kernel(HcExpandParams p) {
  pdl_wait();
  pdl_release();
  const int64_t t = blockIdx.y;
  const int64_t d = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (d >= p.D) return;
  const int N = p.N;
  float* X = p.X + t * N * p.D;
  const float y = p.y[t * p.D + d];
  if (!p.mix) {
    for (int n = 0; n < N; ++n) X[n * p.D + d] = y;
    return;
  }
  const double* m = p.mix + t * (2 + N) * N;
  const double* post = m + N;
  const double* comb = m + 2 * N;
  float xs[kHcMaxStreams];
  for (int j = 0; j < N; ++j) xs[j] = X[j * p.D + d];
  for (int k = 0; k < N; ++k) {
    double s = post[k] * static_cast<double>(y);
    for (int j = 0; j < N; ++j) s += comb[j * N + k] * static_cast<double>(xs[j]);
    X[k * p.D + d] = static_cast<float>(s);
  }
}

// --- rotation -------------------------------------------------------------------------------------------

// Grid (T, chunks of the row's (head, pair)s): a thread per pair, then (store: one chunk) the
// rotated row copied out.
__global__ void dsv4_rope_kernel(Dsv4RopeParams p) {
  pdl_wait();
  pdl_release();
  const int64_t t = blockIdx.x;
  const int64_t pos = *p.pos_dev + p.row0 + t;
  const int half = p.n_rot / 2;
  float* row = p.x + t * p.heads * p.width;
  for (int i = blockIdx.y * blockDim.x + threadIdx.x; i < p.heads * half; i += gridDim.y * blockDim.x) {
    const int h = i / half, j = i % half;
    float* x = row + h * p.width + p.width - p.n_rot + 2 * j;
    rotate_pair(x[0], x[1], static_cast<double>(pos) * p.inv_freq[j], p.inverse);
  }
  if (!p.store) return;
  __syncthreads();  // the block's global writes above are visible to its threads after the barrier
  for (int i = threadIdx.x; i < p.width; i += blockDim.x) p.store[pos * p.width + i] = row[i];
}

// --- the compressor -------------------------------------------------------------------------------------

// One block per token: its projections stored at its position; if it closes window w, the window
// pooled into row w. A slot's token of this call is read from the call's rows (other blocks store
// them concurrently), an earlier one from the history.
__global__ void dsv4_compress_kernel(Dsv4CompressParams p) {
  extern __shared__ float pooled[];  // [w]
  __shared__ double red[32];
  pdl_wait();
  pdl_release();
  const int64_t t = blockIdx.x;
  const int64_t pos0 = *p.pos_dev + p.row0, pos = pos0 + t;
  const int cw = p.overlap ? 2 * p.w : p.w, m = p.m, w = p.w;
  for (int i = threadIdx.x; i < cw; i += blockDim.x) {
    p.hist_kv[pos * cw + i] = p.kv[t * cw + i];
    p.hist_gate[pos * cw + i] = p.gate[t * cw + i];
  }
  if ((pos + 1) % m != 0) return;  // whole block
  const int64_t win = (pos + 1) / m - 1;
  auto kv_of = [&](int64_t tok) { return tok >= pos0 ? p.kv + (tok - pos0) * cw : p.hist_kv + tok * cw; };
  auto gate_of = [&](int64_t tok) { return tok >= pos0 ? p.gate + (tok - pos0) * cw : p.hist_gate + tok * cw; };
  double ss_part = 0;
  for (int c = threadIdx.x; c < w; c += blockDim.x) {
    // the slots: (token, offset into its projections, ape row)
    double mx = -INFINITY;
    auto slot_gate = [&](int64_t tok, int off, int j) {
      return static_cast<double>(__fadd_rn(gate_of(tok)[off + c], p.ape[j * cw + off + c]));
    };
    for (int j = 0; j < m; ++j) {
      if (p.overlap && win > 0) mx = fmax(mx, slot_gate((win - 1) * m + j, 0, j));
      mx = fmax(mx, slot_gate(win * m + j, p.overlap ? w : 0, j));
    }
    double den = 0, num = 0;
    for (int j = 0; j < m; ++j) {  // the oracle's slot order: the first halves, then this window's
      if (!(p.overlap && win > 0)) break;
      const int64_t tok = (win - 1) * m + j;
      const double e = exp(slot_gate(tok, 0, j) - mx);
      den += e;
      num += e * static_cast<double>(kv_of(tok)[c]);
    }
    for (int j = 0; j < m; ++j) {
      const int64_t tok = win * m + j;
      const int off = p.overlap ? w : 0;
      const double e = exp(slot_gate(tok, off, j) - mx);
      den += e;
      num += e * static_cast<double>(kv_of(tok)[off + c]);
    }
    const float v = static_cast<float>(num / den);
    pooled[c] = v;
    ss_part += static_cast<double>(v) * static_cast<double>(v);
  }
  const double ss = block_sum_d(ss_part, red);  // also orders the pooled writes before the reads below
  const double r = 1.0 / sqrt(ss / static_cast<double>(w) + p.eps);
  for (int c = threadIdx.x; c < w; c += blockDim.x)
    pooled[c] = static_cast<float>(static_cast<double>(pooled[c]) * r * static_cast<double>(p.norm[c]));
  __syncthreads();
  const int half = p.n_rot / 2;
  for (int j = threadIdx.x; j < half; j += blockDim.x) {
    float* x = pooled + w - p.n_rot + 2 * j;
    rotate_pair(x[0], x[1], static_cast<double>(win * m) * p.inv_freq[j], false);
  }
  __syncthreads();
  for (int c = threadIdx.x; c < w; c += blockDim.x) p.rows[win * w + c] = pooled[c];
}

// --- attention with sinks ---------------------------------------------------------------------------------

constexpr int kAttnThreads = 128;

// One block per (head, query). Keys in order: the window's raw keys (oldest first), then the
// compressed rows (ascending visible rows, or the selection in its ascending order).
__global__ void dsv4_attention_kernel(Dsv4AttnParams p) {
  extern __shared__ float sh[];  // [hd] query, then [max_keys] scores / weights
  __shared__ float red[32];
  pdl_wait();
  pdl_release();
  const int h = blockIdx.x;
  const int64_t t = blockIdx.y;
  const int hd = p.hd;
  const int64_t pos = *p.pos_dev + p.row0 + t;
  float* qs = sh;
  float* ps = sh + hd;
  const float* qh = p.q + (t * p.H + h) * hd;
  for (int i = threadIdx.x; i < hd; i += blockDim.x) qs[i] = qh[i];
  __syncthreads();
  const int64_t first = pos - p.window + 1 > 0 ? pos - p.window + 1 : 0;
  const int nw = static_cast<int>(pos - first + 1);
  int nc = 0;
  if (p.rows) nc = p.sel ? p.n_sel[t] : static_cast<int>((pos + 1) / p.ratio);
  const int n = nw + nc;
  float* o = p.out + (t * p.H + h) * hd;
  if (nc < 0 || n > p.max_keys || (p.sel && nc > p.topk)) {  // a corrupt count: NaN out, never a stray read
    for (int d = threadIdx.x; d < hd; d += blockDim.x) o[d] = NAN;
    return;
  }
  auto key = [&](int j) {
    return j < nw ? p.k_cache + (first + j) * hd
                  : p.rows + static_cast<int64_t>(p.sel ? p.sel[t * p.topk + (j - nw)] : j - nw) * hd;
  };
  const float sink = p.sinks[h];
  // a warp per key: each lane's strided fma chain over the dims, then the butterfly
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  for (int j = warp; j < n; j += warps) {
    const float* kr = key(j);
    float d = 0.0f;
    for (int i = lane; i < hd; i += 32) d = fmaf(qs[i], kr[i], d);
    d = warp_sum_xor(d);
    if (lane == 0) ps[j] = __fmul_rn(d, p.scale);
  }
  __syncthreads();
  float mx = -INFINITY;
  for (int j = threadIdx.x; j < n; j += blockDim.x) mx = fmaxf(mx, ps[j]);
  mx = fmaxf(block_max_ordered(mx, red), sink);
  float part = 0.0f;
  for (int j = threadIdx.x; j < n; j += blockDim.x) {
    const float e = expf(ps[j] - mx);
    ps[j] = e;
    part = __fadd_rn(part, e);
  }
  // the sink takes its share of the mass and gives no value; the sum also orders the ps writes
  const float l = __fadd_rn(block_sum_ordered(part, red), expf(sink - mx));
  for (int d = threadIdx.x; d < hd; d += blockDim.x) {
    float acc = 0.0f;
    for (int j = 0; j < n; ++j) acc = fmaf(ps[j], key(j)[d], acc);
    o[d] = __fdiv_rn(acc, l);
  }
}

// --- routing ---------------------------------------------------------------------------------------------

// One warp per token: the scores in shared memory (f64); the warp selects (k passes of a warp
// argmax, ties to the lower expert: the oracle's stable sort), lane 0 orders and weighs.
__global__ void dsv4_route_kernel(Dsv4RouteParams p) {
  extern __shared__ double sc[];  // [E] scores, then [E] choice values
  pdl_wait();
  pdl_release();
  const int64_t t = blockIdx.x;
  const int E = p.E, k = p.k;
  double* choice = sc + E;
  for (int e = threadIdx.x; e < E; e += blockDim.x) {
    const double s = sqrt(softplus_d(static_cast<double>(p.logits[t * E + e])));
    sc[e] = s;
    choice[e] = s + (p.bias ? static_cast<double>(p.bias[e]) : 0.0);
  }
  __syncwarp();
  int32_t* ids = p.ids + t * k;
  float* wts = p.weights + t * k;
  if (!p.tid2eid) {
    // k passes, each the warp's best untaken choice: a lane's best of its experts, then the
    // butterfly over (value, id), ties to the lower id (the oracle's stable sort)
    for (int j = 0; j < k; ++j) {
      double bv = -INFINITY;
      int bi = E;
      for (int e = threadIdx.x; e < E; e += 32)
        if (choice[e] != -INFINITY && (bi == E || choice[e] > bv)) bv = choice[e], bi = e;
      for (int off = 16; off > 0; off >>= 1) {
        const double ov = __shfl_xor_sync(0xffffffffu, bv, off);
        const int oi = __shfl_xor_sync(0xffffffffu, bi, off);
        if (oi != E && (bi == E || ov > bv || (ov == bv && oi < bi))) bv = ov, bi = oi;
      }
      if (threadIdx.x == 0) {
        ids[j] = bi;
        choice[bi] = -INFINITY;
      }
      __syncwarp();
    }
  }
  if (threadIdx.x != 0) return;
  if (p.tid2eid) {
    const float* row = p.tid2eid + static_cast<int64_t>(p.tokens[t]) * k;
    for (int j = 0; j < k; ++j) ids[j] = static_cast<int32_t>(row[j]);  // in range: checked at load
  }
  double sum = 0;
  for (int j = 0; j < k; ++j) sum += sc[ids[j]];
  // the selection ledger's order (memra/selection_ledger.h): highest weight first, ties to the lower
  // expert (insertion sort of k <= 16)
  for (int j = 1; j < k; ++j)
    for (int i = j; i > 0 && (sc[ids[i]] > sc[ids[i - 1]] || (sc[ids[i]] == sc[ids[i - 1]] && ids[i] < ids[i - 1]));
         --i) {
      const int32_t x = ids[i];
      ids[i] = ids[i - 1];
      ids[i - 1] = x;
    }
  for (int j = 0; j < k; ++j) wts[j] = static_cast<float>(sc[ids[j]] / (sum + 1e-20) * p.scale);
}

}  // namespace

void hc_mix_run(const HcMixParams& p, cudaStream_t s) {
  if (p.T == 0) return;
  if (p.N < 1 || p.N > kHcMaxStreams) fail("hc mix: ", p.N, " streams (1..", kHcMaxStreams, ")");
  if (p.T > 65535) fail("hc mix: ", p.T, " rows exceed the grid (65535)");
  const dim3 grid(static_cast<unsigned>(ceil_div(p.D, kThreads)), static_cast<unsigned>(p.T));
  launch_kernel("hc_mix_kernel", hc_mix_kernel, grid, kThreads, 0, s, p);
}

void hc_expand_run(const HcExpandParams& p, cudaStream_t s) {
  if (p.T == 0) return;
  if (p.N < 1 || p.N > kHcMaxStreams) fail("hc expand: ", p.N, " streams (1..", kHcMaxStreams, ")");
  if (p.T > 65535) fail("hc expand: ", p.T, " rows exceed the grid (65535)");
  const dim3 grid(static_cast<unsigned>(ceil_div(p.D, kThreads)), static_cast<unsigned>(p.T));
  launch_kernel("hc_expand_kernel", hc_expand_kernel, grid, kThreads, 0, s, p);
}

void dsv4_rope_run(const Dsv4RopeParams& p, cudaStream_t s) {
  if (p.T == 0) return;
  if (p.n_rot < 2 || p.n_rot % 2 != 0 || p.n_rot > p.width || (p.store && p.heads != 1))
    fail("dsv4 rope: ", p.n_rot, " rotated of ", p.width, " dims, ", p.heads, " heads", p.store ? " (stored)" : "");
  if (p.T > 2147483647) fail("dsv4 rope: ", p.T, " rows exceed the grid");
  constexpr int kRopeThreads = 128;
  const int64_t chunks =
      p.store ? 1 : std::min<int64_t>(ceil_div(int64_t{p.heads} * (p.n_rot / 2), kRopeThreads), 65535);
  launch_kernel("dsv4_rope_kernel", dsv4_rope_kernel, dim3(static_cast<unsigned>(p.T), static_cast<unsigned>(chunks)),
                kRopeThreads, 0, s, p);
}

void dsv4_compress_run(const Dsv4CompressParams& p, cudaStream_t s) {
  if (p.T == 0) return;
  if (p.m < 1 || p.w < p.n_rot || p.n_rot < 2 || p.n_rot % 2 != 0)
    fail("dsv4 compressor: ratio ", p.m, ", width ", p.w, ", rotated ", p.n_rot);
  launch_kernel("dsv4_compress_kernel", dsv4_compress_kernel, static_cast<unsigned>(p.T), kThreads,
                sizeof(float) * static_cast<size_t>(p.w), s, p);
}

void dsv4_attention_run(const Dsv4AttnParams& p, cudaStream_t s) {
  if (p.T == 0) return;
  if (p.hd < 1 || p.window < 1 || p.max_keys < p.window || (p.rows && p.ratio < 1) || (p.sel && p.topk < 1))
    fail("dsv4 attention: head dim ", p.hd, ", window ", p.window, ", ", p.max_keys, " keys, ratio ", p.ratio);
  if (p.T > 65535) fail("dsv4 attention: ", p.T, " queries exceed the grid (65535)");
  const size_t smem = sizeof(float) * static_cast<size_t>(p.hd + p.max_keys);
  if (smem > 227 * 1024)
    fail("dsv4 attention: ", p.max_keys, " keys of ", p.hd, " exceed shared memory (a query's scores are kept there)");
  launch_kernel("dsv4_attention_kernel", dsv4_attention_kernel,
                dim3(static_cast<unsigned>(p.H), static_cast<unsigned>(p.T)), kAttnThreads, smem, s, p);
}

void dsv4_route_run(const Dsv4RouteParams& p, cudaStream_t s) {
  if (p.T == 0) return;
  if (p.E < 1 || p.k < 1 || p.k > p.E) fail("dsv4 route: top ", p.k, " of ", p.E, " experts");
  launch_kernel("dsv4_route_kernel", dsv4_route_kernel, static_cast<unsigned>(p.T), 32,
                2 * sizeof(double) * static_cast<size_t>(p.E), s, p);
}

}  // namespace memra::cuda
