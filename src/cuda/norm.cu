// src/cuda/norm.cu — RowOp kernels (see norm.cuh).
//
// Kernels, all with the same bits for the same row (ops_rowop checks that a row's bits do not
// depend on the form or on the rows sharing the launch):
//   rowop_kernel<RowOp, kBlock>: a block per row. The whole block loads the row once into shared
//     memory (every load in flight together) and the multiplier is prefetched into L2 before the
//     dependency wait; the fused quantisation reads the very f32 values the unfused path would
//     write (fused and unfused are bit-identical by construction). The sum of squares is always
//     taken by the first kThreads threads in one order; rows of >= 1024 values run the
//     elementwise pass and the quantisation on kNormThreads.
//   rowop_spread_kernel: norms of few rows (a decode step) spread over blocks of kThreads values:
//     every block takes the whole row's sum of squares in that order (the row re-read from L2,
//     16 KB at 4096 values), then normalises and quantises its own values; the multiplier is in
//     registers before the wait, and x, z and the reduction's loads are issued together. A block
//     per row is a chain of three dependent L2 round trips (row, multiplier, z) on one SM, which
//     made it the most frequent slow launch of a decode step (65 per 9B step).
//   rowop_wide_kernel: SwiGLU and Identity (no row reduction), a warp per 32-value group over
//     the whole grid.
#include <algorithm>

#include "cuda/common.cuh"
#include "cuda/norm.cuh"
#include "cuda/launch.cuh"

namespace memra::cuda {

namespace {

constexpr int kThreads = 256;      // the reduction's threads (the order of the sum of squares)
constexpr int kNormThreads = 1024;  // rows of >= 1024 values: elementwise pass and quantisation
constexpr int kSpreadRows = 8;      // rows spread over blocks (each block re-reads its row)

// DeepSeek-V4's clamped SwiGLU: the gate clamped from above, the up projection on both sides.
__device__ __forceinline__ float swiglu_clamped(float g, float u, float limit) {
  return __fmul_rn(silu_f(fminf(g, limit)), fminf(fmaxf(u, -limit), limit));
}

// The gated norms: GDN's gate is SiLU(z), KDA's sigmoid(z).
template <RowOp Op>
inline constexpr bool kGated = Op == RowOp::RmsNormGated || Op == RowOp::RmsNormGatedSigmoid;
template <RowOp Op>
__device__ __forceinline__ float gate_f(float z) {
  if constexpr (Op == RowOp::RmsNormGated) return silu_f(z);
  return __fdiv_rn(1.0f, __fadd_rn(1.0f, expf(-z)));
}

// --- kernels

// q8_1 blocks of a row held in shared memory, four blocks per warp at a time: 8 lanes per block,
// 4 values per lane. The same operations as quantize_block_q8_1 (common.cuh): the max and the
// integer sum are exact whatever the lane grouping, the rest is per value, so the same bits
// (ops_rowop checks against quant.h). One block per warp-step would take 4 sequential steps of
// two 5-level butterflies for a 4096-value row on 32 warps.
__device__ __forceinline__ void quantize_row_q8_1_x4(const float* row, Q81* out, int64_t nb, int warp, int n_warps,
                                                     int lane) {
  const int sub = lane & 7;  // lanes 8g..8g+7 take block 4 * step + g
  for (int64_t b0 = 4 * static_cast<int64_t>(warp); b0 < nb; b0 += 4 * static_cast<int64_t>(n_warps)) {
    const int64_t b = b0 + (lane >> 3);
    const bool in = b < nb;  // every lane stays for the shuffles
    float x[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) x[i] = in ? row[b * 32 + sub * 4 + i] : 0.0f;
    float amax = fmaxf(fmaxf(fabsf(x[0]), fabsf(x[1])), fmaxf(fabsf(x[2]), fabsf(x[3])));
#pragma unroll
    for (int off = 4; off > 0; off >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, off));
    const uint16_t dh = dev_f32_to_fp16(__fdiv_rn(amax, 127.0f));
    const float d = dev_fp16(dh);
    int q[4], sum = 0;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      q[i] = d != 0.0f ? static_cast<int>(fminf(fmaxf(roundf(__fdiv_rn(x[i], d)), -127.0f), 127.0f)) : 0;
      sum += q[i];
    }
#pragma unroll
    for (int off = 4; off > 0; off >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, off);
    if (in) {
      Q81* o = out + b;
      *reinterpret_cast<uint32_t*>(o->qs + sub * 4) = (static_cast<uint32_t>(q[0]) & 0xffu) |
                                                        ((static_cast<uint32_t>(q[1]) & 0xffu) << 8) |
                                                        ((static_cast<uint32_t>(q[2]) & 0xffu) << 16) |
                                                        (static_cast<uint32_t>(q[3]) << 24);
      if (sub == 0) {
        o->d = dh;
        o->s = dev_f32_to_fp16(__fmul_rn(d, static_cast<float>(sum)));
      }
    }
  }
}

// Norms: the sum of squares is taken by the first kThreads threads (strided partials, butterfly,
// the kThreads/32 warps in index order), whatever the block size; a block of kNormThreads then
// does the elementwise pass and the quantisation of long rows (on kThreads they are a serial
// loop on one SM). The bits do not depend on kBlock.
template <RowOp Op, int kBlock>
__global__ void __launch_bounds__(kBlock) rowop_kernel(RowOpParams p) {
  extern __shared__ float row[];  // [n]
  __shared__ float warp_part[kThreads / 32];
  const int64_t r = blockIdx.x;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  // The multiplier is a weight (no kernel writes it): into L2 before the wait
  if (p.w)
    for (int64_t i = static_cast<int64_t>(tid) * 32; i < p.n; i += static_cast<int64_t>(kBlock) * 32)
      asm volatile("prefetch.global.L2 [%0];" ::"l"(p.w + i));
  pdl_wait();
  pdl_release();
  const float* x = p.x + r * p.ld_x;
  // The whole block loads the row once (every load in flight together); the sum of squares then
  // reads it from shared memory in its fixed order, and the elementwise pass works in place.
#pragma unroll 4
  for (int64_t i = tid; i < p.n; i += kBlock) row[i] = x[i];
  __syncthreads();
  float scale = 1.0f;
  if constexpr (Op == RowOp::RmsNorm || kGated<Op>) {
    if (tid < kThreads) {
      float ss = 0.0f;
#pragma unroll 8
      for (int64_t i = tid; i < p.n; i += kThreads) ss = fmaf(row[i], row[i], ss);
      ss = warp_sum_xor(ss);
      if (lane == 0) warp_part[warp] = ss;
    }
    __syncthreads();
    float tot = 0.0f;
    for (int w = 0; w < kThreads / 32; ++w) tot = __fadd_rn(tot, warp_part[w]);
    scale = rsqrtf(__fadd_rn(__fdiv_rn(tot, static_cast<float>(p.n)), p.eps));
  }
#pragma unroll 4
  for (int64_t i = tid; i < p.n; i += kBlock) {
    float v = row[i];
    if constexpr (Op == RowOp::RmsNorm) v = __fmul_rn(__fmul_rn(v, scale), p.w[i]);
    if constexpr (kGated<Op>) v = __fmul_rn(__fmul_rn(__fmul_rn(v, scale), p.w[i]), gate_f<Op>(p.z[r * p.ld_z + i]));
    if constexpr (Op == RowOp::Swiglu) v = __fmul_rn(silu_f(v), p.z[r * p.ld_z + i]);
    if constexpr (Op == RowOp::SwigluClamped) v = swiglu_clamped(v, p.z[r * p.ld_z + i], p.limit);
    row[i] = v;
  }
  __syncthreads();
  if (p.y)
    for (int64_t i = tid; i < p.n; i += kBlock) p.y[r * p.ld_y + i] = row[i];
  if (p.q) quantize_row_q8_1_x4(row, p.q + r * (p.n / 32), p.n / 32, warp, kBlock / 32, lane);
}

// Block (bx, r) normalises values [bx * kThreads, (bx + 1) * kThreads) of row r; the sum of
// squares is rowop_kernel's (thread t < kThreads: x[t], x[t + kThreads], ... as an fma chain, butterfly,
// the warps in index order) over the whole row in every block. y may alias x only when a row is
// one block (n <= kThreads): the block has read its row before its first write (the barrier of
// the reduction); the launcher checks it.
template <RowOp Op>
__global__ void __launch_bounds__(kThreads) rowop_spread_kernel(RowOpParams p) {
  static_assert(Op == RowOp::RmsNorm || kGated<Op>);
  __shared__ float warp_part[kThreads / 32];
  const int64_t r = blockIdx.y;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int64_t i = static_cast<int64_t>(blockIdx.x) * kThreads + tid;
  const bool in = i < p.n;  // warp-uniform when n % 32 == 0 (always so with q8_1 output)
  const float wv = in ? p.w[i] : 0.0f;  // the multiplier is a weight: before the wait
  pdl_wait();
  pdl_release();
  const float* x = p.x + r * p.ld_x;
  float v = in ? x[i] : 0.0f;
  float zv = 0.0f;
  if constexpr (kGated<Op>) zv = in ? p.z[r * p.ld_z + i] : 0.0f;
  constexpr int kBatch = 8;  // loads in flight per thread
  float ss = 0.0f;
  int64_t j = tid;
  for (; j + (kBatch - 1) * kThreads < p.n; j += kBatch * kThreads) {
    float xv[kBatch];
#pragma unroll
    for (int u = 0; u < kBatch; ++u) xv[u] = x[j + u * kThreads];
#pragma unroll
    for (int u = 0; u < kBatch; ++u) ss = fmaf(xv[u], xv[u], ss);
  }
  for (; j < p.n; j += kThreads) ss = fmaf(x[j], x[j], ss);
  ss = warp_sum_xor(ss);
  if (lane == 0) warp_part[warp] = ss;
  __syncthreads();
  float tot = 0.0f;
  for (int w = 0; w < kThreads / 32; ++w) tot = __fadd_rn(tot, warp_part[w]);
  const float scale = rsqrtf(__fadd_rn(__fdiv_rn(tot, static_cast<float>(p.n)), p.eps));
  v = __fmul_rn(__fmul_rn(v, scale), wv);
  if constexpr (kGated<Op>) v = __fmul_rn(v, gate_f<Op>(zv));
  if (!in) return;  // whole warp
  if (p.y) p.y[r * p.ld_y + i] = v;
  if (p.q) quantize_block_q8_1(v, p.q + r * (p.n / 32) + i / 32, lane);
}

// Swiglu / Identity have no row reduction: a warp per 32-value group, grid (groups/8, rows), so
// a 12288-wide SwiGLU row is not one block's serial loop. Each value is computed by the same
// operations as in rowop_kernel, and quantised from the same register value it writes.
template <RowOp Op>
__global__ void __launch_bounds__(kThreads) rowop_wide_kernel(RowOpParams p) {
  pdl_wait();
  pdl_release();
  const int64_t r = blockIdx.y;
  const int lane = threadIdx.x & 31;
  const int64_t g = static_cast<int64_t>(blockIdx.x) * (kThreads / 32) + (threadIdx.x >> 5);
  const int64_t i = g * 32 + lane;
  if (g * 32 >= p.n) return;  // whole warp
  const bool in = i < p.n;
  float v = in ? p.x[r * p.ld_x + i] : 0.0f;
  if constexpr (Op == RowOp::Swiglu) v = in ? __fmul_rn(silu_f(v), p.z[r * p.ld_z + i]) : 0.0f;
  if constexpr (Op == RowOp::SwigluClamped) v = in ? swiglu_clamped(v, p.z[r * p.ld_z + i], p.limit) : 0.0f;
  if (p.y && in) p.y[r * p.ld_y + i] = v;
  if (p.q) quantize_block_q8_1(v, p.q + r * (p.n / 32) + g, lane);  // n % 32 == 0 (checked)
}

// --- launchers

template <RowOp Op>
void launch(const RowOpParams& p, cudaStream_t s) {
  if constexpr (Op == RowOp::Swiglu || Op == RowOp::SwigluClamped || Op == RowOp::Identity) {
    const int64_t groups = ceil_div(p.n, 32);
    const dim3 grid(static_cast<unsigned>(ceil_div(groups, kThreads / 32)), static_cast<unsigned>(p.rows));
    launch_kernel("rowop_wide_kernel", rowop_wide_kernel<Op>, grid, kThreads, 0, s, p);
  } else {
    // The spread form for a decode step's rows: every row one block (no re-reading), or a few rows whose
    // re-reads (ceil(n / kThreads) per row) stay small, and y not aliasing x across blocks.
    const int64_t per_row = ceil_div(p.n, kThreads);
    const bool alias = p.y && p.y < p.x + (p.rows - 1) * p.ld_x + p.n && p.x < p.y + (p.rows - 1) * p.ld_y + p.n;
    if (p.rows <= 65535 && (per_row == 1 || (p.rows <= kSpreadRows && !alias))) {
      const dim3 grid(static_cast<unsigned>(per_row), static_cast<unsigned>(p.rows));
      return launch_kernel("rowop_spread_kernel", rowop_spread_kernel<Op>, grid, kThreads, 0, s, p);
    }
    const size_t smem = static_cast<size_t>(p.n) * sizeof(float);
    // Long rows (the model's hidden size) with few rows: the wide block; short rows (per-head
    // norms): kThreads.
    if (p.n >= 1024) {
      launch_kernel("rowop_kernel", rowop_kernel<Op, kNormThreads>, static_cast<unsigned>(p.rows), kNormThreads, smem,
                    s, p);
    } else {
      launch_kernel("rowop_kernel", rowop_kernel<Op, kThreads>, static_cast<unsigned>(p.rows), kThreads, smem, s, p);
    }
  }
}

}  // namespace

// --- dispatch

void rowop_run(const RowOpParams& p, cudaStream_t s) {
  if (p.rows == 0) return;
  if (p.q && p.n % 32 != 0) fail("rowop: q8_1 output needs n % 32 == 0, n = ", p.n);
  // Rows are independent and each row's result depends only on (x, n): more rows than a grid
  // dimension holds (a long prefill's per-head rows) run as consecutive launches of at most
  // kMaxGridRows rows, the same values.
  constexpr int64_t kMaxGridRows = 65535;
  if (p.rows > kMaxGridRows) {
    for (int64_t r0 = 0; r0 < p.rows; r0 += kMaxGridRows) {
      RowOpParams c = p;
      c.rows = std::min(kMaxGridRows, p.rows - r0);
      c.x = p.x + r0 * p.ld_x;
      if (p.z) c.z = p.z + r0 * p.ld_z;
      if (p.y) c.y = p.y + r0 * p.ld_y;
      if (p.q) c.q = p.q + r0 * (p.n / 32);
      rowop_run(c, s);
    }
    return;
  }
  switch (p.op) {
    case RowOp::RmsNorm: return launch<RowOp::RmsNorm>(p, s);
    case RowOp::RmsNormGated: return launch<RowOp::RmsNormGated>(p, s);
    case RowOp::RmsNormGatedSigmoid:
      return launch<RowOp::RmsNormGatedSigmoid>(p, s);
    case RowOp::Swiglu: return launch<RowOp::Swiglu>(p, s);
    case RowOp::SwigluClamped:
      return launch<RowOp::SwigluClamped>(p, s);
    case RowOp::Identity: return launch<RowOp::Identity>(p, s);
  }
  fail("rowop: unknown op ", static_cast<int>(p.op));
}

}  // namespace memra::cuda
