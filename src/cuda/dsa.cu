// src/cuda/dsa.cu — DSA indexer scores and the per-query top-k selection (see dsa.cuh).
#include "cuda/common.cuh"
#include "cuda/dsa.cuh"
#include "cuda/launch.cuh"

namespace memra::cuda {

namespace {

constexpr int kScoreThreads = 256;
constexpr int kSelectThreads = 1024;

// Positions a score block covers: one thread per (position, head).
__host__ __device__ constexpr int score_positions(int n_head) { return kScoreThreads / n_head; }

// A block covers score_positions(n_head) positions of one query, a thread per (position, head):
// each head's dot is one sequential f32 chain (as a thread per position would compute it), then
// one thread per position adds the heads' terms in head order. The query's heads sit in shared
// memory with a row stride of head_dim + 1, so the lanes of a warp (consecutive heads of one
// position) read different banks.
__global__ void dsa_score_kernel(DsaScoreParams p) {
  extern __shared__ float sh[];  // [n_head][head_dim + 1] this query's heads, then [P][n_head] dots
  pdl_wait();
  pdl_release();
  const int64_t t = blockIdx.y;
  const int nh = p.n_head, hd = p.head_dim, qld = hd + 1, P = score_positions(nh);
  float* qs = sh;
  float* dots = sh + nh * qld;
  for (int i = threadIdx.x; i < nh * hd; i += blockDim.x) qs[(i / hd) * qld + i % hd] = p.q[t * nh * hd + i];
  __syncthreads();
  const MlaSeq* sq = p.seqs ? p.seqs + p.row0 + t : nullptr;  // a batched step's sequence
  const int64_t pos = sq ? *sq->pos0 : (p.pos_dev ? *p.pos_dev + p.row0 : p.pos0) + t;
  const int64_t keys = (pos + 1) / p.ratio;
  const float* k = sq ? (p.pooled ? sq->pool_rows : sq->index_k) : p.k;
  const int local = threadIdx.x / nh, h = threadIdx.x % nh;
  const int64_t s = static_cast<int64_t>(blockIdx.x) * P + local;
  if (local < P && s < keys) {
    const float* ks = k + s * hd;
    const float* qh = qs + h * qld;
    float d = 0.0f;
    for (int i = 0; i < hd; ++i) d = fmaf(qh[i], ks[i], d);
    dots[local * nh + h] = d;
  }
  __syncthreads();
  const int64_t sp = static_cast<int64_t>(blockIdx.x) * P + threadIdx.x;
  if (static_cast<int>(threadIdx.x) >= P || sp >= keys) return;
  const float* wt = p.w + t * nh;
  const float* dd = dots + threadIdx.x * nh;
  float acc = 0.0f;
  for (int j = 0; j < nh; ++j) acc = fmaf(__fmul_rn(wt[j], p.w_scale), fmaxf(__fmul_rn(dd[j], p.qk_scale), 0.0f), acc);
  p.scores[t * p.ld + sp] = __fadd_rn(acc, 0.0f);  // -0 -> +0: equal scores, equal bits
}

// Order-preserving key of a score: a larger float, a larger key (+0 and -0 the same).
__device__ __forceinline__ uint32_t order_key(float x) {
  const uint32_t u = x == 0.0f ? 0u : __float_as_uint(x);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

// Exclusive prefix sum of v over the kSelectThreads threads; *total gets the sum. `warps` is
// shared scratch of 32 ints. Ends with the block synchronised.
__device__ int block_exclusive_scan(int v, int* warps, int* total) {
  const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5;
  int inc = v;
  for (int off = 1; off < 32; off <<= 1) {
    const int o = __shfl_up_sync(0xffffffffu, inc, off);
    if (lane >= off) inc += o;
  }
  if (lane == 31) warps[wid] = inc;
  __syncthreads();
  if (wid == 0) {
    int w = warps[lane];
    for (int off = 1; off < 32; off <<= 1) {
      const int o = __shfl_up_sync(0xffffffffu, w, off);
      if (lane >= off) w += o;
    }
    warps[lane] = w;  // inclusive over warps
  }
  __syncthreads();
  const int before = (wid > 0 ? warps[wid - 1] : 0) + inc - v;
  const int all = warps[31];
  __syncthreads();
  *total = all;
  return before;
}

__global__ void __launch_bounds__(kSelectThreads) dsa_select_kernel(DsaSelectParams p) {
  __shared__ int hist[256];
  __shared__ int warps[32];
  __shared__ uint32_t s_prefix;
  __shared__ int s_remaining;
  pdl_wait();
  pdl_release();
  const int64_t t = blockIdx.x;
  const int tid = threadIdx.x;
  const int64_t pos =
      p.seqs ? *p.seqs[p.row0 + t].pos0 : (p.pos_dev ? *p.pos_dev + p.row0 : p.pos0) + t;  // seqs: a batched step
  const int64_t n = (pos + 1) / p.ratio;
  const float* sc = p.scores + t * p.ld;
  int32_t* out = p.sel + t * p.topk;
  if (n <= p.topk) {  // every position: the selection keeps them all
    for (int j = tid; j < p.topk; j += blockDim.x) out[j] = j < n ? j : -1;
    if (tid == 0) p.n_sel[t] = static_cast<int32_t>(n);
    return;
  }
  // the topk-th largest key, digit by digit from the top; `remaining` = how many of the keys
  // matching the prefix so far are still to be taken
  if (tid == 0) {
    s_prefix = 0;
    s_remaining = p.topk;
  }
  uint32_t mask = 0;
  for (int shift = 24; shift >= 0; shift -= 8) {
    for (int i = tid; i < 256; i += blockDim.x) hist[i] = 0;
    __syncthreads();
    const uint32_t prefix = s_prefix;
    for (int64_t s = tid; s < n; s += blockDim.x) {
      const uint32_t key = order_key(sc[s]);
      if ((key & mask) == prefix) atomicAdd(&hist[(key >> shift) & 255u], 1);
    }
    __syncthreads();
    if (tid == 0) {
      int above = 0, d = 255;
      for (; d > 0 && above + hist[d] < s_remaining; --d) above += hist[d];
      s_remaining -= above;
      s_prefix = prefix | (static_cast<uint32_t>(d) << shift);
    }
    mask |= 255u << shift;
    __syncthreads();
  }
  const uint32_t kth = s_prefix;
  const int need_equal = s_remaining;  // keys equal to kth to take, lowest positions first
  int taken = 0, equal_seen = 0;
  for (int64_t base = 0; base < n; base += blockDim.x) {
    const int64_t s = base + tid;
    const uint32_t key = s < n ? order_key(sc[s]) : 0u;
    const bool eq = s < n && key == kth;
    int eq_total = 0;
    const int eq_rank = block_exclusive_scan(eq ? 1 : 0, warps, &eq_total);
    const bool take = (s < n && key > kth) || (eq && equal_seen + eq_rank < need_equal);
    int take_total = 0;
    const int slot = block_exclusive_scan(take ? 1 : 0, warps, &take_total);
    if (take) out[taken + slot] = static_cast<int32_t>(s);
    taken += take_total;
    equal_seen += eq_total;
  }
  if (tid == 0) p.n_sel[t] = taken;  // == topk by construction
}

constexpr int kAttnThreads = 128;

// One block per (head, query).
__global__ void sparse_attention_kernel(SparseAttnParams p) {
  extern __shared__ float sh[];  // [dk] query, then [topk] scores / weights
  __shared__ float red[32];
  pdl_wait();
  pdl_release();
  const int h = blockIdx.x;
  const int64_t t = blockIdx.y;
  const int kvh = h / (p.H / p.KVH);
  const MlaSeq* sq = p.seqs ? p.seqs + t : nullptr;  // a batched step's sequence: its caches
  const float* const k_cache = sq ? (p.latent ? sq->lat : sq->k) : p.k_cache;
  const float* const v_cache = sq ? (p.latent ? sq->lat : sq->v) : p.v_cache;
  float* qs = sh;
  float* ps = sh + p.dk;
  const float* qh = p.q + (t * p.H + h) * p.dk;
  for (int i = threadIdx.x; i < p.dk; i += blockDim.x) qs[i] = qh[i];
  __syncthreads();
  const int n = p.n_sel[t];
  if (n < 1 || n > p.topk) {  // a corrupt count: NaN out (the model's finite check names it), never a stray read
    for (int d = threadIdx.x; d < p.dv; d += blockDim.x) p.out[(t * p.H + h) * p.dv + d] = NAN;
    return;
  }
  const int32_t* sel = p.sel + t * p.topk;
  const int64_t ld_k = p.ld_k ? p.ld_k : int64_t{p.KVH} * p.dk, ld_v = p.ld_v ? p.ld_v : int64_t{p.KVH} * p.dv;
  float mx = -INFINITY;
  for (int j = threadIdx.x; j < n; j += blockDim.x) {
    const float* kr = k_cache + static_cast<int64_t>(sel[j]) * ld_k + kvh * p.dk;
    float d = 0.0f;
    for (int i = 0; i < p.dk; ++i) d = fmaf(qs[i], kr[i], d);
    d = __fmul_rn(d, p.scale);
    ps[j] = d;
    mx = fmaxf(mx, d);
  }
  mx = block_max_ordered(mx, red);
  float part = 0.0f;
  for (int j = threadIdx.x; j < n; j += blockDim.x) {
    const float e = expf(ps[j] - mx);
    ps[j] = e;
    part = __fadd_rn(part, e);
  }
  const float l = block_sum_ordered(part, red);  // also orders the ps writes before the reads below
  for (int d = threadIdx.x; d < p.dv; d += blockDim.x) {
    float acc = 0.0f;
    for (int j = 0; j < n; ++j) acc = fmaf(ps[j], v_cache[static_cast<int64_t>(sel[j]) * ld_v + kvh * p.dv + d], acc);
    p.out[(t * p.H + h) * p.dv + d] = __fdiv_rn(acc, l);
  }
}

// --- the split form (dsa.cuh): a block per (group of G heads, query, chunk), then a combine

constexpr int kSplitThreads = 256;

__host__ __device__ inline int split_chunks(int topk) { return (topk + kSparseSplitRows - 1) / kSparseSplitRows; }

// The work slot of (query t, head h, chunk c): [max, sum, dv value sums].
__device__ inline float* split_slot(const SparseAttnParams& p, int64_t t, int h, int c) {
  return p.split_work + ((t * p.H + h) * split_chunks(p.topk) + c) * (p.dv + 2);
}

// Heads h0 .. h0 + G - 1 (they share kv head kvh) of query blockIdx.y over chunk blockIdx.z of
// its selection. Warp w scores the chunk's rows w, w + 8, ...: lane l multiplies the row's
// elements l, l + 32, ... into G chains, warp_sum_xor adds the lanes. Each selected row is read
// once here for all G heads (and once more for the values), where sparse_attention_kernel reads
// it once per head: the latent form's 64 heads share one 576-float row.
template <int G>
__global__ void __launch_bounds__(kSplitThreads) sparse_attention_split_kernel(SparseAttnParams p) {
  extern __shared__ float sh[];  // [G][dk] queries, then [kSparseSplitRows][G] scores / weights
  __shared__ int32_t rows[kSparseSplitRows];
  __shared__ float red[kSplitThreads / 32][G], row_max[G];
  pdl_wait();
  pdl_release();
  constexpr int kWarps = kSplitThreads / 32;
  const int h0 = static_cast<int>(blockIdx.x) * G, tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int64_t t = blockIdx.y;
  const int c = static_cast<int>(blockIdx.z), r0 = c * kSparseSplitRows, n = p.n_sel[t];
  if (n < 1 || n > p.topk || r0 >= n) return;  // a corrupt count (the combine writes NaN), or past the list
  const int cnt = min(kSparseSplitRows, n - r0), dk = p.dk, dv = p.dv;
  const int kvh = h0 / (p.H / p.KVH);
  const MlaSeq* sq = p.seqs ? p.seqs + t : nullptr;  // a batched step's sequence: its caches
  const float* const k_cache = sq ? (p.latent ? sq->lat : sq->k) : p.k_cache;
  const float* const v_cache = sq ? (p.latent ? sq->lat : sq->v) : p.v_cache;
  const int64_t ld_k = p.ld_k ? p.ld_k : int64_t{p.KVH} * dk, ld_v = p.ld_v ? p.ld_v : int64_t{p.KVH} * dv;
  float* qs = sh;
  float* ps = sh + G * dk;
  const float* qg = p.q + (t * p.H + h0) * dk;  // the group's heads are consecutive rows
  for (int i = tid; i < G * dk; i += kSplitThreads) qs[i] = qg[i];
  for (int r = tid; r < cnt; r += kSplitThreads) rows[r] = p.sel[t * p.topk + r0 + r];
  __syncthreads();
  float mx[G];
#pragma unroll
  for (int g = 0; g < G; ++g) mx[g] = -INFINITY;
  for (int r = warp; r < cnt; r += kWarps) {
    const float* kr = k_cache + static_cast<int64_t>(rows[r]) * ld_k + static_cast<int64_t>(kvh) * dk;
    float acc[G];
#pragma unroll
    for (int g = 0; g < G; ++g) acc[g] = 0.0f;
#pragma unroll 4
    for (int i = lane; i < dk; i += 32) {
      const float kv = kr[i];
#pragma unroll
      for (int g = 0; g < G; ++g) acc[g] = fmaf(qs[g * dk + i], kv, acc[g]);
    }
#pragma unroll
    for (int g = 0; g < G; ++g) {
      const float sc = __fmul_rn(warp_sum_xor(acc[g]), p.scale);  // every lane holds the same bits
      mx[g] = fmaxf(mx[g], sc);
      if (lane == 0) ps[r * G + g] = sc;
    }
  }
  if (lane == 0) {
#pragma unroll
    for (int g = 0; g < G; ++g) red[warp][g] = mx[g];
  }
  __syncthreads();
  if (tid < G) {
    float m = -INFINITY;
    for (int w = 0; w < kWarps; ++w) m = fmaxf(m, red[w][tid]);
    row_max[tid] = m;
  }
  __syncthreads();
  // exp and the chunk's sum per head: entry i of ps is head i % G, and G divides the block, so
  // thread tid only ever holds head tid % G; lanes of one head are added by a fixed butterfly,
  // the warps in warp order
  const float m_own = row_max[tid % G];
  float part = 0.0f;
  for (int i = tid; i < cnt * G; i += kSplitThreads) {
    const float e = expf(ps[i] - m_own);
    ps[i] = e;
    part = __fadd_rn(part, e);
  }
#pragma unroll
  for (int off = 16; off >= G; off >>= 1) part = __fadd_rn(part, __shfl_xor_sync(0xffffffffu, part, off));
  if (lane < G) red[warp][lane] = part;  // red's maxima were read before the barrier above
  __syncthreads();                       // also orders the ps writes before the reads below
  if (tid < G) {
    float l = 0.0f;
    for (int w = 0; w < kWarps; ++w) l = __fadd_rn(l, red[w][tid]);
    float* slot = split_slot(p, t, h0 + tid, c);
    slot[0] = row_max[tid];
    slot[1] = l;
  }
  for (int d = tid; d < dv; d += kSplitThreads) {
    const float* vd = v_cache + static_cast<int64_t>(kvh) * dv + d;
    float acc[G];
#pragma unroll
    for (int g = 0; g < G; ++g) acc[g] = 0.0f;
#pragma unroll 4
    for (int r = 0; r < cnt; ++r) {
      const float v = vd[static_cast<int64_t>(rows[r]) * ld_v];
#pragma unroll
      for (int g = 0; g < G; ++g) acc[g] = fmaf(ps[r * G + g], v, acc[g]);
    }
#pragma unroll
    for (int g = 0; g < G; ++g) split_slot(p, t, h0 + g, c)[2 + d] = acc[g];
  }
}

// One block per (head, query): the chunks' results rescaled to their common max and added in
// chunk order, o[d] = Σ_c e_c acc_c[d] / Σ_c e_c l_c with e_c = exp(m_c - max_c m_c).
__global__ void __launch_bounds__(kSplitThreads) sparse_attention_combine_kernel(SparseAttnParams p) {
  __shared__ float weight[kSparseAttnMaxTopk / kSparseSplitRows], total;
  pdl_wait();
  pdl_release();
  const int h = blockIdx.x;
  const int64_t t = blockIdx.y;
  const int n = p.n_sel[t];
  float* const out = p.out + (t * p.H + h) * p.dv;
  if (n < 1 || n > p.topk) {  // a corrupt count: NaN out (the model's finite check names it)
    for (int d = threadIdx.x; d < p.dv; d += blockDim.x) out[d] = NAN;
    return;
  }
  const int used = split_chunks(n);
  const float* const slot0 = split_slot(p, t, h, 0);
  const int64_t stride = p.dv + 2;
  if (threadIdx.x == 0) {
    float m = -INFINITY;
    for (int c = 0; c < used; ++c) m = fmaxf(m, slot0[c * stride]);
    float l = 0.0f;
    for (int c = 0; c < used; ++c) {
      weight[c] = expf(slot0[c * stride] - m);
      l = fmaf(weight[c], slot0[c * stride + 1], l);
    }
    total = l;
  }
  __syncthreads();
  for (int d = threadIdx.x; d < p.dv; d += blockDim.x) {
    float acc = 0.0f;
    for (int c = 0; c < used; ++c) acc = fmaf(weight[c], slot0[c * stride + 2 + d], acc);
    out[d] = __fdiv_rn(acc, total);
  }
}

// A thread per query row: its selected pools' tokens in pool order, then its open tail.
__global__ void dsa_expand_pools_kernel(DsaExpandParams p) {
  pdl_wait();
  pdl_release();
  const int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t >= p.T) return;
  const int64_t pos = p.seqs ? *p.seqs[p.row0 + t].pos0 : *p.pos_dev + p.row0 + t;  // seqs: a batched step
  const int32_t* ps = p.psel + t * p.pools;
  int32_t* out = p.sel + t * p.width;
  int n = 0;
  for (int k = 0; k < p.n_psel[t]; ++k)
    for (int j = 0; j < p.kpool; ++j) out[n++] = ps[k] * p.kpool + j;
  for (int64_t q = (pos + 1) / p.kpool * p.kpool; q <= pos; ++q) out[n++] = static_cast<int32_t>(q);
  p.n_sel[t] = n;
  for (int k = n; k < p.width; ++k) out[k] = -1;
}

}  // namespace

void sparse_attention_run(const SparseAttnParams& p, cudaStream_t s) {
  if (p.T == 0) return;
  if (p.topk < 1 || p.topk > kSparseAttnMaxTopk || p.dk < 1 || p.dk > kSparseAttnMaxDim || p.dv < 1 ||
      p.dv > kSparseAttnMaxDim || p.KVH < 1 || p.H % p.KVH != 0)
    fail("sparse attention: topk ", p.topk, " (1..", kSparseAttnMaxTopk, "), dk ", p.dk, ", dv ", p.dv, " (1..",
         kSparseAttnMaxDim, "), ", p.H, " heads over ", p.KVH, " kv heads unsupported");
  if (p.T > 65535) fail("sparse attention: ", p.T, " queries exceed the grid (65535)");
  if ((p.ld_k && p.ld_k < int64_t{p.KVH} * p.dk) || (p.ld_v && p.ld_v < int64_t{p.KVH} * p.dv))
    fail("sparse attention: row strides ", p.ld_k, " / ", p.ld_v, " below the rows' ", p.KVH * p.dk, " / ",
         p.KVH * p.dv);
  if (p.split_work) {
    const int64_t need = sparse_attention_split_floats(p.T, p.H, p.topk, p.dv);
    if (p.split_work_floats < need)
      fail("sparse attention: split workspace of ", p.split_work_floats, " floats, ", need, " needed for ", p.T,
           " queries x ", p.H, " heads (sparse_attention_split_floats)");
    // G heads per block: the most of 8, 4, 2, 1 that divides the heads sharing a kv head
    const int group = p.H / p.KVH, G = group % 8 == 0 ? 8 : group % 4 == 0 ? 4 : group % 2 == 0 ? 2 : 1;
    const dim3 grid(static_cast<unsigned>(p.H / G), static_cast<unsigned>(p.T),
                    static_cast<unsigned>(split_chunks(p.topk)));
    const size_t smem = sizeof(float) * static_cast<size_t>(G) * (p.dk + kSparseSplitRows);
    void (*const kernel)(SparseAttnParams) = G == 8   ? sparse_attention_split_kernel<8>
                                             : G == 4 ? sparse_attention_split_kernel<4>
                                             : G == 2 ? sparse_attention_split_kernel<2>
                                                      : sparse_attention_split_kernel<1>;
    launch_kernel("sparse_attention_split_kernel", kernel, grid, kSplitThreads, smem, s, p);
    launch_kernel("sparse_attention_combine_kernel", sparse_attention_combine_kernel,
                  dim3(static_cast<unsigned>(p.H), static_cast<unsigned>(p.T)), kSplitThreads, 0, s, p);
    return;
  }
  const size_t smem = sizeof(float) * static_cast<size_t>(p.dk + p.topk);
  launch_kernel("sparse_attention_kernel", sparse_attention_kernel,
                dim3(static_cast<unsigned>(p.H), static_cast<unsigned>(p.T)), kAttnThreads, smem, s, p);
}

int64_t sparse_attention_split_floats(int64_t T, int H, int topk, int dv) {
  return T * H * split_chunks(topk) * (int64_t{dv} + 2);
}

void dsa_score_run(const DsaScoreParams& p, cudaStream_t s) {
  if (p.T == 0) return;
  if (p.n_head < 1 || p.n_head > kDsaMaxHeads || p.head_dim < 1 || p.head_dim > kDsaMaxHeadDim ||
      p.n_head * p.head_dim > kDsaMaxQFloats)
    fail("dsa score: ", p.n_head, " heads of ", p.head_dim, " unsupported (1..", kDsaMaxHeads, " heads of 1..",
         kDsaMaxHeadDim, ", at most ", kDsaMaxQFloats, " query floats)");
  if (p.ratio < 1) fail("dsa score: ratio ", p.ratio);
  const int64_t keys = (p.pos0 + p.T) / p.ratio;
  if (p.ld < keys) fail("dsa score: row stride ", p.ld, " below the ", keys, " keys");
  if (p.T > 65535) fail("dsa score: ", p.T, " queries exceed the grid (65535)");
  if (keys == 0) return;  // no query sees a key yet (nothing is read: select writes empty rows)
  const int P = score_positions(p.n_head);
  const dim3 grid(static_cast<unsigned>(ceil_div(keys, P)), static_cast<unsigned>(p.T));
  launch_kernel("dsa_score_kernel", dsa_score_kernel, grid, kScoreThreads,
                sizeof(float) * static_cast<size_t>(p.n_head * (p.head_dim + 1) + P * p.n_head), s, p);
}

void dsa_expand_pools_run(const DsaExpandParams& p, cudaStream_t s) {
  if (p.T == 0) return;
  if (p.kpool < 1 || p.width < p.pools * p.kpool + p.kpool - 1)
    fail("dsa expand: ", p.pools, " pools of ", p.kpool, " into rows of ", p.width);
  constexpr int kRows = 128;
  launch_kernel("dsa_expand_pools_kernel", dsa_expand_pools_kernel, static_cast<unsigned>(ceil_div(p.T, kRows)), kRows,
                0, s, p);
}

void dsa_select_run(const DsaSelectParams& p, cudaStream_t s) {
  if (p.T == 0) return;
  if (p.topk < 1 || p.ratio < 1) fail("dsa select: topk = ", p.topk, ", ratio ", p.ratio);
  if (p.ld < (p.pos0 + p.T) / p.ratio)
    fail("dsa select: row stride ", p.ld, " below the ", (p.pos0 + p.T) / p.ratio, " keys");
  if (p.pos0 + p.T > 2147483647) fail("dsa select: ", p.pos0 + p.T, " positions exceed int32 ids");
  launch_kernel("dsa_select_kernel", dsa_select_kernel, static_cast<unsigned>(p.T), kSelectThreads, 0, s, p);
}

}  // namespace memra::cuda
