// src/cuda/moe.cu — routing (a warp per token) and the weighted combine (see moe.cuh).
#include "cuda/common.cuh"
#include "cuda/moe.cuh"
#include "cuda/launch.cuh"

namespace memra::cuda {

namespace {

// --- kernels

__device__ float sigmoid_rn(float x) { return __fdiv_rn(1.0f, __fadd_rn(1.0f, expf(-x))); }

// The warp's best (value, index) pair: largest value, then lowest index (an empty lane holds
// (-inf, INT_MAX)).
__device__ void warp_argmax_lowest(float& bv, int& bi) {
  for (int off = 16; off > 0; off >>= 1) {
    const float ov = __shfl_xor_sync(0xffffffffu, bv, off);
    const int oi = __shfl_xor_sync(0xffffffffu, bi, off);
    if (ov > bv || (ov == bv && oi < bi)) {
      bv = ov;
      bi = oi;
    }
  }
}

// Sigmoid-grouped gating for token t (one warp; see moe.cuh). choice(e) = sigmoid(l_e) + bias_e
// is recomputed where needed rather than kept, so E up to kMoeMaxExperts needs no storage.
__device__ void route_grouped(const MoeRouteParams& p, int64_t t, int lane) {
  const float* l = p.logits + t * p.E;
  const int per = p.E / p.n_group;
  auto choice = [&](int e) { return __fadd_rn(sigmoid_rn(l[e]), p.bias[e]); };
  // group score: the sum of the group's two best choices (the second best may tie the first)
  uint64_t chosen = 0;  // bit g: group g selectable
  {
    float gscore = -INFINITY;  // lane g < n_group holds group g's score (groups > 32: second pass)
    float gscore2 = -INFINITY;
    for (int g = 0; g < p.n_group; ++g) {
      float b1 = -INFINITY, b2 = -INFINITY;
      int i1 = 0x7fffffff;
      for (int e = g * per + lane; e < (g + 1) * per; e += 32) {
        const float c = choice(e);
        if (c > b1) {
          b2 = b1;
          b1 = c;
          i1 = e;
        } else if (c > b2) {
          b2 = c;
        }
      }
      // the best across lanes, then the second best: the best of every lane's other candidates
      float v1 = b1;
      int w1 = i1;
      warp_argmax_lowest(v1, w1);
      float v2 = (w1 == i1 && i1 != 0x7fffffff) ? b2 : b1;
      for (int off = 16; off > 0; off >>= 1) v2 = fmaxf(v2, __shfl_xor_sync(0xffffffffu, v2, off));
      const float sc = __fadd_rn(v1, v2);
      if ((g & 31) == lane) (g < 32 ? gscore : gscore2) = sc;
    }
    for (int j = 0; j < p.topk_group; ++j) {  // best remaining group, ties to the lowest
      float bv = (lane < p.n_group && !(chosen >> lane & 1u)) ? gscore : -INFINITY;
      int bi = lane < p.n_group && !(chosen >> lane & 1u) ? lane : 0x7fffffff;
      const int hi = lane + 32;
      if (hi < p.n_group && !(chosen >> hi & 1u) && (gscore2 > bv || bi == 0x7fffffff)) {
        bv = gscore2;
        bi = hi;
      }
      warp_argmax_lowest(bv, bi);
      chosen |= 1ull << bi;
    }
  }
  // top-k choices among the chosen groups' experts
  uint32_t taken = 0;  // bit m: expert lane + 32m already selected
  float sel_s[kMoeMaxUsed];
  float tot = 0.0f;
  for (int j = 0; j < p.k; ++j) {
    float bv = -INFINITY;
    int bi = 0x7fffffff;
    for (int m = 0, e = lane; e < p.E; ++m, e += 32) {
      if ((taken >> m & 1u) || !(chosen >> (e / per) & 1u)) continue;
      const float c = choice(e);
      if (c > bv || bi == 0x7fffffff) {
        bv = c;
        bi = e;
      }
    }
    warp_argmax_lowest(bv, bi);
    if ((bi & 31) == lane) taken |= 1u << (bi >> 5);
    const float sj = sigmoid_rn(l[bi]);
    sel_s[j] = sj;
    tot = __fadd_rn(tot, sj);
    if (lane == 0) p.ids[t * p.k + j] = bi;
  }
  if (lane == 0) {
    const float den = __fadd_rn(tot, 1e-20f);
    for (int j = 0; j < p.k; ++j)
      p.weights[t * p.k + j] = __fmul_rn(p.renorm ? __fdiv_rn(sel_s[j], den) : sel_s[j], p.scale);
  }
}

__global__ void moe_route_kernel(MoeRouteParams p) {
  pdl_wait();
  pdl_release();
  const int64_t t = static_cast<int64_t>(blockIdx.x) * (blockDim.x / 32) + (threadIdx.x >> 5);
  const int lane = threadIdx.x & 31;
  if (t >= p.T) return;
  if (p.bias) {
    route_grouped(p, t, lane);
    return;
  }
  const float* l = p.logits + t * p.E;
  float mx = -INFINITY;
  for (int e = lane; e < p.E; e += 32) mx = fmaxf(mx, l[e]);
  mx = warp_max(mx);
  float sum = 0.0f;
  for (int e = lane; e < p.E; e += 32) sum = __fadd_rn(sum, expf(l[e] - mx));
  sum = warp_sum_xor(sum);
  uint32_t taken = 0;  // bit m: expert lane + 32m already selected
  float sel_p[16];
  float tot = 0.0f;
  for (int j = 0; j < p.k; ++j) {
    float bv = -INFINITY;
    int bi = 0x7fffffff;
    for (int m = 0, e = lane; e < p.E; ++m, e += 32)
      if (!(taken >> m & 1u) && (l[e] > bv || bi == 0x7fffffff)) { bv = l[e]; bi = e; }
    warp_argmax_lowest(bv, bi);  // max value, then lowest index
    if ((bi & 31) == lane) taken |= 1u << (bi >> 5);
    const float pj = __fdiv_rn(expf(bv - mx), sum);
    sel_p[j] = pj;
    tot = __fadd_rn(tot, pj);
    if (lane == 0) p.ids[t * p.k + j] = bi;
  }
  if (lane == 0)
    for (int j = 0; j < p.k; ++j) p.weights[t * p.k + j] = p.renorm ? __fdiv_rn(sel_p[j], tot) : sel_p[j];
}

// A thread per (token, element) over a grid (D / 256, T): one block per token looping over D
// elements made the combine of one decode token a serial chain on one SM. Each element's
// operations are the same either way.
__global__ void moe_combine_kernel(MoeCombineParams p) {
  pdl_wait();
  pdl_release();
  const int64_t t = blockIdx.y;
  const int64_t d = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (d < p.D) {
    float acc = 0.0f;
    for (int j = 0; j < p.k; ++j) acc = fmaf(p.weights[t * p.k + j], p.y[(t * p.k + j) * p.D + d], acc);
    if (p.y_shared) {
      const float ys = p.y_shared[t * p.D + d];
      acc = p.sg ? fmaf(__fdiv_rn(1.0f, __fadd_rn(1.0f, expf(-p.sg[t]))), ys, acc) : __fadd_rn(acc, ys);
    }
    p.x[t * p.D + d] = __fadd_rn(p.x[t * p.D + d], acc);
  }
}

// One block: the vectors' slab ids counted per slab (shared-memory atomics), an exclusive scan
// (Hillis-Steele over kGroupThreads >= E entries) into group_start, the groups' tiles listed,
// then each vector placed at its slab's cursor. The order inside a group is the atomics' (not
// fixed); a routed GEMM's outputs do not depend on it (each vector's chain is its own, whatever
// its tile and slot).
constexpr int kGroupThreads = 1024;

// The inclusive prefix sum of v over the block's kGroupThreads threads (Hillis-Steele through
// buf, each thread's slot written last with its result).
__device__ int block_inclusive_scan(int v, int* buf) {
  const int tid = threadIdx.x;
  buf[tid] = v;
  for (int off = 1; off < kGroupThreads; off <<= 1) {
    __syncthreads();
    const int add = tid >= off ? buf[tid - off] : 0;
    __syncthreads();
    v += add;
    buf[tid] = v;
  }
  return v;
}

__global__ void __launch_bounds__(kGroupThreads) moe_group_kernel(MoeGroupParams p) {
  __shared__ int cnt[kGroupThreads];
  __shared__ int scan[kGroupThreads];
  pdl_wait();
  pdl_release();
  const int tid = threadIdx.x;
  cnt[tid] = 0;
  __syncthreads();
  for (int64_t a = tid; a < p.n; a += kGroupThreads) atomicAdd(&cnt[p.ids[a]], 1);
  __syncthreads();
  const int v = block_inclusive_scan(cnt[tid], scan);
  __syncthreads();
  const int count = cnt[tid], start = v - count;  // exclusive
  if (tid < p.E) p.group_start[tid] = start;
  if (tid == 0) p.group_start[p.E] = static_cast<int32_t>(p.n);
  // the groups' tiles of p.tile vectors, listed in slab order (a routed GEMM's grid walks them)
  const int tiles = (count + p.tile - 1) / p.tile;
  __syncthreads();
  const int w = block_inclusive_scan(tiles, scan);
  for (int i = 0; i < tiles; ++i) {
    p.tile_slab[w - tiles + i] = tid;
    p.tile_start[w - tiles + i] = start + i * p.tile;
  }
  if (tid == kGroupThreads - 1) *p.n_tiles = w;
  __syncthreads();
  cnt[tid] = start;  // now the slab's cursor
  __syncthreads();
  for (int64_t a = tid; a < p.n; a += kGroupThreads) p.order[atomicAdd(&cnt[p.ids[a]], 1)] = static_cast<int32_t>(a);
}

// One block: every thread reads the count, writes its rows, and the count moves on after all
// have read it.
__global__ void moe_ledger_record_kernel(LedgerRecordParams p) {
  pdl_wait();
  pdl_release();
  const unsigned long long n0 = *p.count;
  const int64_t pos0 = *p.pos0;
  for (int64_t r = threadIdx.x; r < p.rows; r += blockDim.x) {
    LedgerRow& o = p.ring[static_cast<int64_t>((n0 + static_cast<unsigned long long>(r)) %
                                               static_cast<unsigned long long>(p.cap))];
    o.pos = pos0 + r;
    o.layer = p.layer;
    o.k = p.k;
    for (int j = 0; j < p.k; ++j) {
      o.ids[j] = p.ids[r * p.k + j];
      o.weight_bits[j] = __float_as_uint(p.weights[r * p.k + j]);
    }
  }
  __syncthreads();
  if (threadIdx.x == 0) *p.count = n0 + static_cast<unsigned long long>(p.rows);
}

}  // namespace

// --- launchers / dispatch

void moe_ledger_record_run(const LedgerRecordParams& p, cudaStream_t s) {
  if (p.rows == 0) return;
  if (p.k < 1 || p.k > kMoeMaxUsed) fail("moe ledger: k = ", p.k, " unsupported (1..", kMoeMaxUsed, ")");
  if (p.rows > p.cap) fail("moe ledger: ", p.rows, " rows exceed the ring (", p.cap, ")");
  launch_kernel("moe_ledger_record_kernel", moe_ledger_record_kernel, 1u, 128u, 0, s, p);
}

void moe_route_run(const MoeRouteParams& p, cudaStream_t s) {
  if (p.T == 0) return;
  if (p.E > kMoeMaxExperts || p.k > kMoeMaxUsed || p.k > p.E)
    fail("moe route: E = ", p.E, " (<= ", kMoeMaxExperts, "), k = ", p.k, " (<= ", kMoeMaxUsed, ") unsupported");
  if (p.bias && (p.n_group < 1 || p.n_group > kMoeMaxGroups || p.E % p.n_group != 0 || p.E / p.n_group < 2 ||
                 p.topk_group < 1 || p.topk_group > p.n_group || p.k > p.topk_group * (p.E / p.n_group)))
    fail("moe route: sigmoid-grouped gating with E = ", p.E, ", n_group = ", p.n_group, " (1..", kMoeMaxGroups,
         ", groups of >= 2), topk_group = ", p.topk_group, ", k = ", p.k, " unsupported");
  launch_kernel("moe_route_kernel", moe_route_kernel, static_cast<unsigned>(ceil_div(p.T, 4)), 128, 0, s, p);
}

void moe_group_run(const MoeGroupParams& p, cudaStream_t s) {
  if (p.E < 1 || p.E > kGroupThreads) fail("moe group: E = ", p.E, " unsupported (1..", kGroupThreads, ")");
  if (p.n > 2147483647) fail("moe group: ", p.n, " vectors exceed int32 indices");
  if (p.tile < 1 || !p.tile_slab || !p.tile_start || !p.n_tiles) fail("moe group: no tile list (tile = ", p.tile, ")");
  launch_kernel("moe_group_kernel", moe_group_kernel, 1u, kGroupThreads, 0, s, p);
}

void moe_combine_run(const MoeCombineParams& p, cudaStream_t s) {
  if (p.T == 0) return;
  if (p.T > 65535) fail("moe combine: ", p.T, " tokens exceed the grid (65535)");
  launch_kernel("moe_combine_kernel", moe_combine_kernel, dim3(static_cast<unsigned>(ceil_div(p.D, 256)), static_cast<unsigned>(p.T)), 256, 0, s, p);
}

}  // namespace memra::cuda
