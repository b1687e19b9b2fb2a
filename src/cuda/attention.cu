// src/cuda/attention.cu — split-KV attention + combine (see attention.cuh).
//
// attn_split_kernel, grid (blocks per head, H, T), 128 threads: each block computes the partial
// (max, sum, weighted values) of fixed kAttnSplit-key splits of one query's context — scores a
// warp per key (lanes over head dims in order, then the butterfly), block max and fixed-order
// sum, values a thread per output dim accumulating keys in index order. attn_combine_kernel
// merges a head's partials in split order. Every key's and every dim's chain is the same wherever
// its split runs and however many keys are in flight, so the result does not depend on the
// grid, the staging or the launch form (op tests compare the forms bitwise).
//
// Decode (one query) takes one launch (kFused; AttnParams::prep): the split blocks prepare the
// token's q (every block of the head) and k / v (the block of the split holding the token's key,
// which uses them from shared memory, last in key order, and stores them into the cache when it
// is its KV group's first query head) with rope.cuh's norm_rope_head, its f64 angles taken before
// the dependency wait; a context of one split finishes in the split block (the combine's
// operations on its own partial), a longer one in the head's last split block to arrive
// (AttnParams::arrivals). Before the wait a decode block also copies its first split's keys that
// precede the token into shared memory (cp.async) and asks L2 for the rest. A decode grid is at
// most one wave of blocks, a block taking every gridDim.x-th split, because a graph's grid is
// sized for the cache's max_ctx. Prefill keeps qk_prep + split + combine.
//
// attn_flash_kernel is the flash form (attention.cuh; the prefill_attn = flash arm): a block of 64
// queries of one head over key tiles of 32 staged once for all of them, an online softmax, the
// combine's finish (gate, q8_1) per query row at the end.
//
// Why: a decode token's attention is a chain of dependent round trips (prep, keys, values,
// combine); every one moved before the wait or into the same launch shortens the step. Doing the
// prep or the combine in the split blocks alone measured slower; both together, with the angles
// before the wait and no arrival counter for a one-split context, pay where attention layers are
// many (docs/PERF.md).
#include <algorithm>

#include "cuda/attention.cuh"
#include "cuda/common.cuh"
#include "cuda/launch.cuh"

namespace memra::cuda {

namespace {

constexpr int kThreads = 128;
constexpr int kMaxHd = kAttnMaxHeadDim;  // head_dim bound (checked at load and by attention_run)
// Keys in flight: kKeysPerWarp per warp in the score pass, kVBatch per thread in the value pass.
// Decode (one query) takes wide batches, and the value pass's first batch before the score pass;
// prefill (a block per query, many resident per SM) narrow ones, at 40 registers instead of
// decode's 127 (the 0.6B prefill measured 12 % faster so). Same operations either way.

int64_t n_splits(int64_t n_ctx) { return ceil_div(n_ctx, kAttnSplit); }
__device__ __forceinline__ int64_t n_splits_dev(int64_t n_ctx) { return (n_ctx + kAttnSplit - 1) / kAttnSplit; }

// --- kernels

// The combine's last steps for dim d of head h, query t (attn_combine_kernel and the one-launch
// decode kernel share them, so the same operations): o = num / den, times sigmoid(g) when gated
// (g: the gate's value at that dim, loaded by the caller), o and its q8_1 block. The whole warp
// calls it with 32 consecutive dims (quantize_block_q8_1).
__device__ __forceinline__ void finish_dim(const AttnParams& p, int64_t t, int h, int d, float num, float den, float g) {
  const int hd = p.hd;
  float o = __fdiv_rn(num, den);
  if (p.gate) o = __fmul_rn(o, __fdiv_rn(1.0f, __fadd_rn(1.0f, expf(-g))));
  const int64_t i = t * p.H * hd + h * hd + d;
  p.out[i] = o;
  // lanes of a warp hold 32 consecutive dims of the head, one q8_1 block
  if (p.out_q) quantize_block_q8_1(o, p.out_q + i / 32, static_cast<int>(threadIdx.x & 31));
}

// The combine of ns partials at w (split s at w + s * (hd + 2): m, l, acc[hd]): M = max m_s, then
// per dim the splits in order. Partials written by other blocks of a running grid are read from
// L2 (__ldcg): this SM's L1 is not coherent with their stores.
__device__ __forceinline__ void combine_head(const AttnParams& p, int64_t t, int h, int64_t ns, const float* w) {
  const int hd = p.hd;
  float M = -INFINITY;
  for (int64_t s = 0; s < ns; ++s) M = fmaxf(M, __ldcg(w + s * (hd + 2)));
  for (int d0 = 0; d0 < hd; d0 += kThreads) {  // warp-uniform bounds when hd % 32 == 0
    const int d = d0 + static_cast<int>(threadIdx.x);
    if (d >= hd) break;
    float num = 0.0f, den = 0.0f;
    for (int64_t s = 0; s < ns; ++s) {
      const float* ws = w + s * (hd + 2);
      const float f = expf(__ldcg(ws) - M);
      num = fmaf(f, __ldcg(ws + 2 + d), num);
      den = fmaf(f, __ldcg(ws + 1), den);
    }
    finish_dim(p, t, h, d, num, den, p.gate ? p.gate[t * p.H * hd + h * hd + d] : 0.0f);
  }
}

// Block (s, h, t) takes splits s, s + gridDim.x, ... of query t's context (a decode grid has at
// most one wave of blocks, so a long context gives a block several splits; a prefill grid has a
// block per split). Each split's partial is computed the same way wherever it runs.
// A decode block's keys of its first split before the token's (written by earlier forward
// passes) are copied into shared memory before the dependency wait, up to stage_keys of them
// (the launcher sizes it): K rows [stage_keys][hd], then V rows, after the static arrays.
template <int kKeysPerWarp, int kVBatch, bool kDecode, bool kFused = false>
__global__ void __launch_bounds__(kThreads) attn_split_kernel(AttnParams p, int64_t max_splits, int stage_keys) {
  static_assert(!kFused || kDecode, "the one-launch form is the decode form (one query)");
  static_assert(kMaxHd == kQkMaxHd);
  constexpr int kDims = kMaxHd / kThreads;
  __shared__ float qs[kMaxHd];
  __shared__ float sc[kAttnSplit];
  __shared__ float red[kThreads / 32];
  __shared__ float kn[kFused ? kMaxHd : 1], vn[kFused ? kMaxHd : 1], hbuf[kFused ? kMaxHd : 1], part[kMaxHd / 32];
  __shared__ bool last_arrival;
  extern __shared__ __align__(16) float kv_stage[];  // kDecode: [stage_keys][hd] K, then [stage_keys][hd] V
  const int s0 = blockIdx.x, h = blockIdx.y, sg = gridDim.x;
  const int64_t t = blockIdx.z;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int hd = p.hd, kvd = p.KV * hd, kvh = h / (p.H / p.KV);
  // a batched decode step: sequence t's cache and position (its table uploaded before the step)
  const AttnSeq* const seq = kFused && p.seqs ? p.seqs + t : nullptr;
  float* const k_cache = seq ? seq->k_cache : kFused ? p.prep.k_cache : nullptr;
  float* const v_cache = seq ? seq->v_cache : kFused ? p.prep.v_cache : nullptr;
  const float* kcol = (seq ? seq->k_cache : p.k_cache) + kvh * hd;  // key j's row of this head at kcol + j * kvd
  const float* vcol = (seq ? seq->v_cache : p.v_cache) + kvh * hd;
  // Before the wait (decode). The position: pos0 is written only by a forward pass's last kernel
  // (or a host copy in stream order), at least three launches before this one (embed, norm,
  // mat-vec); a kernel starts only once its predecessor has passed its own wait, i.e. once the
  // launch before that has completed. Read from L2, it is current. Keys before the token's were
  // written by earlier passes, so they are final too; the token's own K / V is not (qk_prep, the
  // launch before, writes it; the one-launch form prepares it itself).
  const int64_t pos_pre = kDecode ? (seq ? __ldcg(seq->pos0) : __ldcg(p.pos0) + t) : 0;
  const int64_t k00 = static_cast<int64_t>(s0) * kAttnSplit;  // the first split's first key
  const int n_pre = kDecode ? static_cast<int>(pos_pre - k00 < 0 ? 0 : pos_pre - k00 < kAttnSplit ? pos_pre - k00 : kAttnSplit) : 0;
  const int n_st0 = n_pre < stage_keys ? n_pre : stage_keys;  // keys of the first split in kv_stage
  float* kst = kv_stage;
  float* vst = kv_stage + static_cast<int64_t>(stage_keys) * hd;
  if constexpr (kDecode) {
    // The staged keys' K and V rows, 16 bytes per copy (hd % 4 == 0: the launcher stages
    // nothing otherwise)
    const int chunks = hd / 4;
    for (int idx = tid; idx < 2 * n_st0 * chunks; idx += kThreads) {
      const int kv = idx / (n_st0 * chunks), rem = idx % (n_st0 * chunks), j = rem / chunks, c = rem % chunks;
      cp_async16((kv ? vst : kst) + j * hd + 4 * c, (kv ? vcol : kcol) + (k00 + j) * kvd + 4 * c);
    }
    cp_async_commit();
    // The first split's other keys asked into L2 while the previous kernel drains (the cache is
    // evicted by every step's weight stream). Decode only: in a prefill every (query, head) block
    // prefetching its split measured the 0.6B prefill 20 % slower.
    const int nk_hint = static_cast<int>(pos_pre + 1 - k00 < kAttnSplit ? pos_pre + 1 - k00 : kAttnSplit);
    const int lines = (hd * 4 + 127) / 128;  // 128-byte lines per key row of one kv head
    for (int idx = n_st0 * lines + tid; idx < nk_hint * lines; idx += kThreads) {
      const int j = idx / lines, c = idx % lines;
      asm volatile("prefetch.global.L2 [%0];" ::"l"(reinterpret_cast<const char*>(kcol + (k00 + j) * kvd) + 128 * c));
      asm volatile("prefetch.global.L2 [%0];" ::"l"(reinterpret_cast<const char*>(vcol + (k00 + j) * kvd) + 128 * c));
    }
  }
  // The one-launch form's angles and norm multipliers (weights) before the wait
  RopeAngles<kThreads> ang{};
  HeadValues<kThreads> wq{}, wk{};
  if constexpr (kFused) {
    if (k00 <= pos_pre) {
      ang = rope_angles<kThreads>(pos_pre, p.prep.n_rot, p.prep.theta);
      wq = head_values<kThreads>(p.prep.q_norm, hd);
      wk = head_values<kThreads>(p.prep.k_norm, hd);
    }
  }
  pdl_wait();
  pdl_release();
  const int64_t n = (kDecode ? pos_pre : *p.pos0 + t) + 1;
  const int64_t ns = n_splits_dev(n);
  if (s0 >= ns) return;
  // The block of the split holding the token's key (the context's last) takes it from kn /
  // vn, prepared here, not from the cache: that split's cache loops run over the keys before it
  const bool own_block = kFused && (ns - 1) % sg == s0;
  float gv[kDims] = {};  // the gate's values at this thread's dims, loaded with the head's
  if constexpr (kFused) {
    // every load that depends on the previous kernel at once: q, k, v of the token and the gate
    const QkPrepParams& q = p.prep;
    const HeadValues<kThreads> xq = head_values<kThreads>(q.q + t * p.H * hd + h * hd, hd);
    HeadValues<kThreads> xk{}, xv{};
    if (own_block) {
      xk = head_values<kThreads>(q.k + t * kvd + kvh * hd, hd);
      xv = head_values<kThreads>(q.v + t * kvd + kvh * hd, hd);
    }
    if (p.gate)
#pragma unroll
      for (int c = 0; c < kDims; ++c) {
        const int d = tid + c * kThreads;
        gv[c] = d < hd ? p.gate[t * p.H * hd + h * hd + d] : 0.0f;
      }
    norm_rope_head<kThreads>(xq, wq, qs, hd, q.n_rot, q.eps, ang, hbuf, part);
    if (own_block) {
      norm_rope_head<kThreads>(xk, wk, kn, hd, q.n_rot, q.eps, ang, hbuf, part);
      const int64_t pos = n - 1;
      const bool stores = h % (p.H / p.KV) == 0;  // the KV group's first query head stores K / V
#pragma unroll
      for (int c = 0; c < kDims; ++c) {
        const int d = tid + c * kThreads;
        if (d >= hd) break;
        vn[d] = xv.x[c];
        if (stores) {
          k_cache[pos * kvd + kvh * hd + d] = kn[d];
          v_cache[pos * kvd + kvh * hd + d] = xv.x[c];
        }
      }
    }
  } else {
    for (int d = tid; d < hd; d += kThreads) qs[d] = p.q[t * p.H * hd + h * hd + d];
  }
  if constexpr (kDecode) cp_async_wait_all();
  for (int64_t s = s0; s < ns; s += sg) {
    __syncthreads();  // qs (and kn / vn) and the staged copies; then sc and red free for this split
    const int64_t k0 = s * kAttnSplit;
    const int nk = static_cast<int>(n - k0 < kAttnSplit ? n - k0 : kAttnSplit);
    const bool own_key = own_block && s == ns - 1;
    const int nk_c = own_key ? nk - 1 : nk;
    const int n_st = s == s0 ? n_st0 : 0;  // staged keys of this split (its first)
    const float* kbase = kcol + k0 * kvd;
    const float* vbase = vcol + k0 * kvd;
    // The value pass's first streamed batch loaded now, its round trip under the score pass's
    float vv0[kVBatch][kDims];
#pragma unroll
    for (int u = 0; u < kVBatch; ++u)
#pragma unroll
      for (int c = 0; c < kDims; ++c) {
        const int d = tid + c * kThreads;
        vv0[u][c] = kDecode && n_st + u < nk_c && d < hd ? vbase[static_cast<int64_t>(n_st + u) * kvd + d] : 0.0f;
      }
    // Scores: each key's chain is fixed (lanes over dims in order, then the butterfly), whether its
    // row comes from the stage, the cache, or kn. A warp takes kKeysPerWarp keys at a time and
    // issues all their loads (up to 8 x 8 per lane) before the first fma, so that their
    // butterflies interleave; keys [j0, j1) of rows at base + j * stride.
    auto score_keys = [&](const float* base, int64_t stride, int j0, int j1) {
      for (int jb = j0 + warp * kKeysPerWarp; jb < j1; jb += kThreads / 32 * kKeysPerWarp) {
        float kv[kKeysPerWarp][kMaxHd / 32];
#pragma unroll
        for (int u = 0; u < kKeysPerWarp; ++u)
#pragma unroll
          for (int i = 0; i < kMaxHd / 32; ++i) {
            const int d = lane + 32 * i;
            kv[u][i] = jb + u < j1 && d < hd ? base[static_cast<int64_t>(jb + u) * stride + d] : 0.0f;
          }
#pragma unroll
        for (int u = 0; u < kKeysPerWarp; ++u) {
          float acc = 0.0f;
#pragma unroll
          for (int i = 0; i < kMaxHd / 32; ++i)
            if (lane + 32 * i < hd) acc = fmaf(qs[lane + 32 * i], kv[u][i], acc);
          acc = warp_sum_xor(acc);
          if (lane == 0 && jb + u < j1) sc[jb + u] = __fmul_rn(acc, p.scale);
        }
      }
    };
    if constexpr (kDecode) score_keys(kst, hd, 0, n_st);  // the staged keys
    score_keys(kbase, kvd, n_st, nk_c);
    if (own_key && warp == 0) {  // the token's own key
      float acc = 0.0f;
#pragma unroll
      for (int i = 0; i < kMaxHd / 32; ++i)
        if (lane + 32 * i < hd) acc = fmaf(qs[lane + 32 * i], kn[lane + 32 * i], acc);
      acc = warp_sum_xor(acc);
      if (lane == 0) sc[nk - 1] = __fmul_rn(acc, p.scale);
    }
    __syncthreads();
    float m = -INFINITY;
    for (int j = tid; j < nk; j += kThreads) m = fmaxf(m, sc[j]);
    m = warp_max(m);
    if (lane == 0) red[warp] = m;
    __syncthreads();
    m = red[0];
    for (int w = 1; w < kThreads / 32; ++w) m = fmaxf(m, red[w]);
    __syncthreads();
    float l = 0.0f;
    for (int j = tid; j < nk; j += kThreads) {
      const float e = expf(sc[j] - m);
      sc[j] = e;
      l = __fadd_rn(l, e);
    }
    l = warp_sum_xor(l);
    if (lane == 0) red[warp] = l;
    __syncthreads();
    float tot = 0.0f;
    for (int w = 0; w < kThreads / 32; ++w) tot = __fadd_rn(tot, red[w]);
    // Values: each dim's chain runs over the keys in index order — the staged keys (the split's
    // first n_st), then the streamed ones (kVBatch at a time, every load issued
    // before the batch's fmas; the first batch is vv0), then the token's own.
    float acc[kDims];
#pragma unroll
    for (int c = 0; c < kDims; ++c) acc[c] = 0.0f;
    int j = 0;
    for (; j < n_st; ++j)
#pragma unroll
      for (int c = 0; c < kDims; ++c) {
        const int d = tid + c * kThreads;
        acc[c] = fmaf(sc[j], d < hd ? vst[j * hd + d] : 0.0f, acc[c]);
      }
    for (; j + kVBatch <= nk_c; j += kVBatch) {
      float vv[kVBatch][kDims];
#pragma unroll
      for (int u = 0; u < kVBatch; ++u)
#pragma unroll
        for (int c = 0; c < kDims; ++c) {
          const int d = tid + c * kThreads;
          vv[u][c] = kDecode && j == n_st ? vv0[u][c] : d < hd ? vbase[static_cast<int64_t>(j + u) * kvd + d] : 0.0f;
        }
#pragma unroll
      for (int u = 0; u < kVBatch; ++u)
#pragma unroll
        for (int c = 0; c < kDims; ++c) acc[c] = fmaf(sc[j + u], vv[u][c], acc[c]);
    }
    if (kDecode && j == n_st && j < nk_c) {  // fewer than kVBatch streamed keys: all of them in vv0
#pragma unroll
      for (int u = 0; u < kVBatch; ++u)
#pragma unroll
        for (int c = 0; c < kDims; ++c)
          if (j + u < nk_c) acc[c] = fmaf(sc[j + u], vv0[u][c], acc[c]);
      j = nk_c;
    }
    for (; j < nk_c; ++j)
#pragma unroll
      for (int c = 0; c < kDims; ++c) {
        const int d = tid + c * kThreads;
        acc[c] = fmaf(sc[j], d < hd ? vbase[static_cast<int64_t>(j) * kvd + d] : 0.0f, acc[c]);
      }
    if (own_key) {  // the token's own value, last in key order
#pragma unroll
      for (int c = 0; c < kDims; ++c) {
        const int d = tid + c * kThreads;
        acc[c] = fmaf(sc[nk - 1], d < hd ? vn[d] : 0.0f, acc[c]);
      }
    }
    if constexpr (kFused) {
      if (ns == 1) {  // one split: the combine's operations on this block's own partial
        const float M = fmaxf(-INFINITY, m);
#pragma unroll
        for (int c = 0; c < kDims; ++c) {
          const int d = tid + c * kThreads;
          if (d >= hd) break;  // warp-uniform (hd % 32 == 0 with a q8_1 output)
          const float f = expf(m - M);
          finish_dim(p, t, h, d, fmaf(f, acc[c], 0.0f), fmaf(f, tot, 0.0f), gv[c]);
        }
        return;
      }
    }
    float* out = p.work + ((t * p.H + h) * max_splits + s) * (hd + 2);
    if (tid == 0) {
      out[0] = m;
      out[1] = tot;
    }
#pragma unroll
    for (int c = 0; c < kDims; ++c) {
      const int d = tid + c * kThreads;
      if (d < hd) out[2 + d] = acc[c];
    }
  }
  if constexpr (kFused) {
    // Several splits: the head's last block to arrive combines (every block's partials are
    // visible device-wide before its arrival: a fence per thread, the barrier, then the counter);
    // min(gridDim.x, ns) blocks arrive
    __threadfence();
    __syncthreads();
    unsigned* arrivals = p.arrivals + t * p.H + h;
    const unsigned arriving = static_cast<unsigned>(ns < sg ? ns : sg);
    if (tid == 0) last_arrival = atomicAdd(arrivals, 1u) == arriving - 1;
    __syncthreads();
    if (!last_arrival) return;
    __threadfence();
    combine_head(p, t, h, ns, p.work + (t * p.H + h) * max_splits * (hd + 2));
    if (tid == 0) *arrivals = 0;  // ready for the next launch (launches are ordered by their boundary)
  }
}

__global__ void __launch_bounds__(kThreads) attn_combine_kernel(AttnParams p, int64_t max_splits) {
  pdl_wait();
  pdl_release();
  const int h = blockIdx.x;
  const int64_t t = blockIdx.y;
  combine_head(p, t, h, n_splits_dev(*p.pos0 + t + 1), p.work + (t * p.H + h) * max_splits * (p.hd + 2));
}

// --- the flash form (attention.cuh) ---------------------------------------------------------------
//
// 256 threads as 16 x 16: ty = tid / 16, tx = tid % 16. Thread (ty, tx) holds the scores of
// queries ty + 16 a (a < kFlashRows) at keys tx + 16 c (c < kFlashCols) of a tile, and the output
// dims W tx + 16 W e + w (w < W, e < HD / (16 W); W = 4 where HD % 64 == 0, else 2 or 1: the
// widest shared-memory load that tiles the head) of the same queries. A query's sixteen threads
// are the 16 lanes of one half-warp, so its row max and its l reduce by xor shuffles over 8..1.
// Shared memory (f32): Q [64][HD + 4] (the pad puts the two query rows a warp reads in different
// banks), K [2][32][HD + 4] (the pad spreads the 16 key rows a warp reads), V [2][32][HD],
// P [64][36], l [64]. K and V are double-buffered: tile k + 1 is copied (cp.async) while tile k
// computes. 208 KB at head_dim 256 (one block per SM), 110 KB at 128 (two), 61 KB at 64.
constexpr int kFlashThreads = 256;
constexpr int kFlashRows = kFlashQueries / 16;  // queries per thread
constexpr int kFlashCols = kFlashKeys / 16;     // keys per thread and tile
constexpr int kFlashPStride = kFlashKeys + 4;
static_assert(kFlashQueries % 16 == 0 && kFlashKeys % 16 == 0 && kFlashKeys % 4 == 0);

template <int HD>
constexpr size_t flash_smem_bytes() {
  return sizeof(float) * (static_cast<size_t>(kFlashQueries) * (HD + 4) + 2 * kFlashKeys * (HD + 4) +
                          2 * kFlashKeys * HD + kFlashQueries * kFlashPStride + kFlashQueries);
}

// W consecutive floats of shared memory (W = 4, 2, 1: one vector load or store)
template <int W>
__device__ __forceinline__ void lds_vec(const float* p, float (&v)[W]) {
  if constexpr (W == 4) {
    const float4 t = *reinterpret_cast<const float4*>(p);
    v[0] = t.x, v[1] = t.y, v[2] = t.z, v[3] = t.w;
  } else if constexpr (W == 2) {
    const float2 t = *reinterpret_cast<const float2*>(p);
    v[0] = t.x, v[1] = t.y;
  } else {
    v[0] = *p;
  }
}
template <int W>
__device__ __forceinline__ void sts_vec(float* p, const float (&v)[W]) {
  if constexpr (W == 4)
    *reinterpret_cast<float4*>(p) = make_float4(v[0], v[1], v[2], v[3]);
  else if constexpr (W == 2)
    *reinterpret_cast<float2*>(p) = make_float2(v[0], v[1]);
  else
    *p = v[0];
}

template <int HD>
__global__ void __launch_bounds__(kFlashThreads) attn_flash_kernel(AttnParams p) {
  static_assert(HD % 16 == 0 && HD <= kMaxHd);
  constexpr int kW = HD % 64 == 0 ? 4 : HD % 32 == 0 ? 2 : 1;  // dims per shared-memory access
  constexpr int kE = HD / (16 * kW);                           // such groups per thread
  constexpr int kQs = HD + 4, kKs = HD + 4, kChunks = HD / 4;
  extern __shared__ __align__(16) float flash_smem[];
  float* const qs = flash_smem;                          // [64][kQs]; at the end O
  float* const ks = qs + kFlashQueries * kQs;            // [2][32][kKs]
  float* const vs = ks + 2 * kFlashKeys * kKs;           // [2][32][HD]
  float* const ps = vs + 2 * kFlashKeys * HD;            // [64][kFlashPStride]
  float* const ls = ps + kFlashQueries * kFlashPStride;  // [64]
  const int tid = static_cast<int>(threadIdx.x), ty = tid >> 4, tx = tid & 15;
  const int h = static_cast<int>(blockIdx.y), kvh = h / (p.H / p.KV);
  // the blocks of the last queries (the most keys) first
  const int64_t q0 = static_cast<int64_t>(gridDim.x - 1 - blockIdx.x) * kFlashQueries;
  const int64_t T = p.T, kvd = static_cast<int64_t>(p.KV) * HD, qd = static_cast<int64_t>(p.H) * HD;
  pdl_wait();  // q and the cache's new rows are the previous kernel's (qk_prep)
  pdl_release();
  const int64_t pos0 = *p.pos0;
  const int64_t q_end = q0 + kFlashQueries < T ? q0 + kFlashQueries : T;
  const int64_t nk = pos0 + q_end;  // the keys of the block's last query
  const int64_t n_tiles = (nk + kFlashKeys - 1) / kFlashKeys;
  const float* const kcol = p.k_cache + kvh * HD;
  const float* const vcol = p.v_cache + kvh * HD;
  const float4 zero4 = make_float4(0.0f, 0.0f, 0.0f, 0.0f);

  // The block's Q rows (zeros past T) and the first tile's K / V rows (zeros past nk: masked for
  // every query, and nothing is read past the cache's written rows), 16 bytes per copy
  for (int i = tid; i < kFlashQueries * kChunks; i += kFlashThreads) {
    const int r = i / kChunks, c = i % kChunks;
    float* const dst = qs + r * kQs + 4 * c;
    if (q0 + r < T)
      cp_async16(dst, p.q + (q0 + r) * qd + h * HD + 4 * c);
    else
      *reinterpret_cast<float4*>(dst) = zero4;
  }
  auto load_tile = [&](int64_t kt, int buf) {
    for (int i = tid; i < kFlashKeys * kChunks; i += kFlashThreads) {
      const int r = i / kChunks, c = i % kChunks;
      const int64_t j = kt * kFlashKeys + r;
      float* const kd = ks + (buf * kFlashKeys + r) * kKs + 4 * c;
      float* const vd = vs + (buf * kFlashKeys + r) * HD + 4 * c;
      if (j < nk) {
        cp_async16(kd, kcol + j * kvd + 4 * c);
        cp_async16(vd, vcol + j * kvd + 4 * c);
      } else {
        *reinterpret_cast<float4*>(kd) = zero4;
        *reinterpret_cast<float4*>(vd) = zero4;
      }
    }
    cp_async_commit();
  };
  load_tile(0, 0);  // one group with Q's copies

  float o[kFlashRows][kE][kW];
  float m[kFlashRows], l[kFlashRows];
#pragma unroll
  for (int a = 0; a < kFlashRows; ++a) {
    m[a] = -INFINITY;
    l[a] = 0.0f;
#pragma unroll
    for (int e = 0; e < kE; ++e)
#pragma unroll
      for (int w = 0; w < kW; ++w) o[a][e][w] = 0.0f;
  }
  for (int64_t kt = 0; kt < n_tiles; ++kt) {
    const int buf = static_cast<int>(kt & 1);
    if (kt + 1 < n_tiles) {
      load_tile(kt + 1, buf ^ 1);  // its buffer's last readers (tile kt - 1) are past the loop's barrier
      cp_async_wait_group<1>();
    } else {
      cp_async_wait_all();
    }
    __syncthreads();  // tile kt's K / V (and Q) visible to every thread
    const float* const kb = ks + buf * kFlashKeys * kKs;
    const float* const vb = vs + buf * kFlashKeys * HD;
    // scores: one fma chain per (query, key) over the dims in order
    float sc[kFlashRows][kFlashCols];
#pragma unroll
    for (int a = 0; a < kFlashRows; ++a)
#pragma unroll
      for (int c = 0; c < kFlashCols; ++c) sc[a][c] = 0.0f;
#pragma unroll 4
    for (int d = 0; d < HD; d += 4) {
      float4 qv[kFlashRows], kv[kFlashCols];
#pragma unroll
      for (int a = 0; a < kFlashRows; ++a) qv[a] = *reinterpret_cast<const float4*>(qs + (ty + 16 * a) * kQs + d);
#pragma unroll
      for (int c = 0; c < kFlashCols; ++c) kv[c] = *reinterpret_cast<const float4*>(kb + (tx + 16 * c) * kKs + d);
#pragma unroll
      for (int a = 0; a < kFlashRows; ++a)
#pragma unroll
        for (int c = 0; c < kFlashCols; ++c) {
          float acc = sc[a][c];
          acc = fmaf(qv[a].x, kv[c].x, acc);
          acc = fmaf(qv[a].y, kv[c].y, acc);
          acc = fmaf(qv[a].z, kv[c].z, acc);
          sc[a][c] = fmaf(qv[a].w, kv[c].w, acc);
        }
    }
    // the online softmax: the tile's row max over the half-warp, the rescale of O and l, P
#pragma unroll
    for (int a = 0; a < kFlashRows; ++a) {
      const int64_t qpos = pos0 + q0 + ty + 16 * a;
      float mt = -INFINITY;
#pragma unroll
      for (int c = 0; c < kFlashCols; ++c) {
        const int64_t j = kt * kFlashKeys + tx + 16 * c;
        sc[a][c] = j <= qpos ? __fmul_rn(sc[a][c], p.scale) : -INFINITY;
        mt = fmaxf(mt, sc[a][c]);
      }
#pragma unroll
      for (int off = 8; off > 0; off >>= 1) mt = fmaxf(mt, __shfl_xor_sync(0xffffffffu, mt, off));
      // key 0 is in tile 0 for every query, so m is finite from there on: m - mn is never inf - inf
      const float mn = fmaxf(m[a], mt);
      const float alpha = expf(m[a] - mn);
      float psum = 0.0f;
#pragma unroll
      for (int c = 0; c < kFlashCols; ++c) {
        const float e = expf(sc[a][c] - mn);
        ps[(ty + 16 * a) * kFlashPStride + tx + 16 * c] = e;
        psum = __fadd_rn(psum, e);
      }
      l[a] = fmaf(l[a], alpha, psum);
      m[a] = mn;
#pragma unroll
      for (int e = 0; e < kE; ++e)
#pragma unroll
        for (int w = 0; w < kW; ++w) o[a][e][w] = __fmul_rn(o[a][e][w], alpha);
    }
    __syncthreads();  // P visible

    // O += P V: each (query, dim) an fma chain over the tile's keys in order
#pragma unroll 2
    for (int j = 0; j < kFlashKeys; j += 4) {
      float4 pv[kFlashRows];
#pragma unroll
      for (int a = 0; a < kFlashRows; ++a)
        pv[a] = *reinterpret_cast<const float4*>(ps + (ty + 16 * a) * kFlashPStride + j);
#pragma unroll
      for (int jj = 0; jj < 4; ++jj)
#pragma unroll
        for (int e = 0; e < kE; ++e) {
          float v[kW];
          lds_vec<kW>(vb + (j + jj) * HD + kW * tx + 16 * kW * e, v);
#pragma unroll
          for (int a = 0; a < kFlashRows; ++a) {
            const float pj = jj == 0 ? pv[a].x : jj == 1 ? pv[a].y : jj == 2 ? pv[a].z : pv[a].w;
#pragma unroll
            for (int w = 0; w < kW; ++w) o[a][e][w] = fmaf(pj, v[w], o[a][e][w]);
          }
        }
    }
    __syncthreads();  // every thread past this tile's K / V / P before the next copies into the buffer
  }
  // l: the sixteen partials of each query by the butterfly (every lane gets the same bits)
#pragma unroll
  for (int a = 0; a < kFlashRows; ++a) {
#pragma unroll
    for (int off = 8; off > 0; off >>= 1) l[a] = __fadd_rn(l[a], __shfl_xor_sync(0xffffffffu, l[a], off));
  }
  // O (not yet divided) into the Q buffer, free since the loop's last barrier; l per query
#pragma unroll
  for (int a = 0; a < kFlashRows; ++a) {
#pragma unroll
    for (int e = 0; e < kE; ++e) sts_vec<kW>(qs + (ty + 16 * a) * kQs + kW * tx + 16 * kW * e, o[a][e]);
    if (tx == 0) ls[ty + 16 * a] = l[a];
  }
  __syncthreads();
  // The combine's finish per query: a warp per query row, lanes over 32 consecutive dims (a q8_1
  // block per step when HD % 32 == 0); rows past T end the warp's walk (warp-uniform: rows only
  // grow). HD = 16: half the lanes idle, which the q8_1 output does not allow (launcher).
  const int warp = tid >> 5, lane = tid & 31;
  for (int r = warp; r < kFlashQueries; r += kFlashThreads / 32) {
    const int64_t t = q0 + r;
    if (t >= T) break;
    for (int d0 = 0; d0 < HD; d0 += 32) {
      const int d = d0 + lane;
      if (HD % 32 != 0 && d >= HD) break;
      finish_dim(p, t, h, d, qs[r * kQs + d], ls[r], p.gate ? p.gate[t * qd + h * HD + d] : 0.0f);
    }
  }
}

}  // namespace

int64_t attention_workspace_floats(int64_t T, int64_t n_ctx, int H, int hd) {
  return T * H * n_splits(n_ctx) * (hd + 2);
}

// --- launchers / dispatch

namespace {

// A decode grid's splits per head: all of them when that is one wave of blocks (per_sm of the
// kernel resident per SM by its registers), else as many as make one wave, each block then
// taking every gridDim.x-th split. A graph's grid is sized for the cache's max_ctx (decode_graph.cu):
// at 32k keys a block per split would be 2048 blocks, most of them exiting after their wait, in
// several waves.
template <class Kernel>
int64_t decode_split_blocks(Kernel kernel, int64_t ms, int H) {
  int per_sm = 0;
  MEMRA_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kThreads, 0));
  return std::max<int64_t>(1, std::min<int64_t>(ms, static_cast<int64_t>(std::max(per_sm, 1)) * sm_count() / H));
}

// How many of a decode block's first-split keys to stage: up to a split's (and the
// context's), in 200 KB of shared memory per SM shared by the blocks a wave puts on one (the
// static arrays, ~5 KB per block, fit beside it); none when rows are not whole 16-byte copies.
int stage_keys_for(const AttnParams& p, int64_t blocks) {
  if ((p.T != 1 && !p.seqs) || p.hd % 4 != 0) return 0;
  const int64_t per_sm = std::max<int64_t>(1, ceil_div(blocks, sm_count()));
  const int64_t budget = 200 * 1024 / per_sm;
  return static_cast<int>(std::min<int64_t>({kAttnSplit, p.ctx_bound, budget / (2 * 4 * p.hd)}));
}

template <class Kernel>
void launch_split(const char* name, Kernel kernel, dim3 grid, const AttnParams& p, int64_t ms, int stage_keys,
                  cudaStream_t s) {
  const size_t smem = static_cast<size_t>(2) * 4 * p.hd * stage_keys;
  launch_kernel(name, kernel, grid, kThreads, smem, s, p, ms, stage_keys);
}

}  // namespace

void attention_run(const AttnParams& p, cudaStream_t s) {
  if (p.T == 0) return;
  if (p.out_q && p.hd % 32 != 0) fail("attention: q8_1 output needs head_dim % 32 == 0, head_dim = ", p.hd);
  if (p.hd > kMaxHd || p.H % p.KV) fail("attention: head_dim ", p.hd, " (<= 256) / H ", p.H, " KV ", p.KV, " unsupported");
  const int64_t ms = n_splits(p.ctx_bound);
  if (p.prep.q) {
    const QkPrepParams& q = p.prep;
    if (q.T != p.T || q.H != p.H || q.KV != p.KV || q.hd != p.hd)
      fail("attention: the token's own q/k preparation needs the attention's own rows and heads");
    if (!p.seqs && (p.T != 1 || q.pos0 != p.pos0 || q.k_cache != p.k_cache || q.v_cache != p.v_cache))
      fail("attention: the token's own q/k preparation needs T = 1 and the attention's own position and cache");
    if (p.seqs && p.T > 65535) fail("attention: ", p.T, " sequences in one decode launch (at most 65535)");
    if (q.n_rot > q.hd || q.n_rot % 2) fail("attention: n_rot ", q.n_rot, " unsupported (even, <= head_dim ", q.hd, ")");
    if (!p.arrivals) fail("attention: the one-launch decode form needs its arrival counters (AttnParams::arrivals)");
    const auto kernel = attn_split_kernel<8, 16, true, true>;
    const int64_t sb = decode_split_blocks(kernel, ms, p.H * static_cast<int>(p.T));
    return launch_split("attn_split_kernel", kernel,
                        dim3(static_cast<unsigned>(sb), static_cast<unsigned>(p.H), static_cast<unsigned>(p.T)), p, ms,
                        stage_keys_for(p, sb * p.H * p.T), s);
  }
  if (p.seqs) fail("attention: a batched decode step (AttnParams::seqs) runs the one-launch form (prep)");
  if (p.T == 1) {
    const auto kernel = attn_split_kernel<8, 16, true>;
    const int64_t sb = decode_split_blocks(kernel, ms, p.H);
    launch_split("attn_split_kernel", kernel, dim3(static_cast<unsigned>(sb), static_cast<unsigned>(p.H), 1), p, ms,
                 stage_keys_for(p, sb * p.H), s);
  } else {
    const dim3 g1(static_cast<unsigned>(ms), static_cast<unsigned>(p.H), static_cast<unsigned>(p.T));
    launch_split("attn_split_kernel", attn_split_kernel<2, 4, false>, g1, p, ms, 0, s);
  }
  const dim3 g2(static_cast<unsigned>(p.H), static_cast<unsigned>(p.T));
  launch_kernel("attn_combine_kernel", attn_combine_kernel, g2, kThreads, 0, s, p, ms);
}

bool flash_attention_supports(int hd) { return hd == 16 || hd == 32 || hd == 64 || hd == 128 || hd == 256; }

void flash_attention_run(const AttnParams& p, cudaStream_t s) {
  if (p.T == 0) return;
  if (!flash_attention_supports(p.hd))
    fail("flash attention: head_dim ", p.hd, " unsupported (16, 32, 64, 128 or 256; attention_run takes the others)");
  if (p.H <= 0 || p.KV <= 0 || p.H % p.KV || p.H > 65535)
    fail("flash attention: H ", p.H, " KV ", p.KV, " unsupported (H a multiple of KV, at most 65535)");
  if (p.prep.q || p.seqs)
    fail("flash attention: the one-launch decode form (AttnParams::prep / seqs) is attention_run's");
  if (p.out_q && p.hd % 32 != 0) fail("flash attention: q8_1 output needs head_dim % 32 == 0, head_dim = ", p.hd);
  const dim3 grid(static_cast<unsigned>(ceil_div(p.T, kFlashQueries)), static_cast<unsigned>(p.H));
  auto launch = [&](auto kernel, size_t smem) {
    launch_kernel("attn_flash_kernel", kernel, grid, kFlashThreads, smem, s, p);
  };
  switch (p.hd) {
    case 16:
      return launch(attn_flash_kernel<16>, flash_smem_bytes<16>());
    case 32:
      return launch(attn_flash_kernel<32>, flash_smem_bytes<32>());
    case 64:
      return launch(attn_flash_kernel<64>, flash_smem_bytes<64>());
    case 128:
      return launch(attn_flash_kernel<128>, flash_smem_bytes<128>());
    default:
      return launch(attn_flash_kernel<256>, flash_smem_bytes<256>());
  }
}

}  // namespace memra::cuda
