// src/cuda/gdn.cu — Gated DeltaNet conv and recurrence on the GPU (see gdn.cuh).
//
// Kernels:
//   gdn_conv_kernel       the causal conv + SiLU of a call's tokens, a thread per (channel,
//                         kConvTokens tokens); the conv state is a ring of K inputs per channel
//                         indexed by position (gdn.cuh).
//   gdn_recurrent_kernel  the recurrence over a call's tokens in order, a block per value head,
//                         a thread per state column (the default prefill: decode's own order).
//   kda_recurrent_kernel  Kimi delta attention's recurrence over a call's tokens, a block per head
//                         (the decay per key channel).
//   gdn_step_kernel       one token (decode), a block per (value head, 32 state columns); KDA's
//                         decode step too (kKda: the decay per key channel).
//   gdn_step_norm_kernel  one token with the gated output norm and its q8_1 blocks (kConv: and
//                         the token's conv), a block per value head, state columns in registers.
//   gdn_chunk_prep_kernel + gdn_chunk_state_kernel: the chunked (WY) prefill arm, GDN's and
//                         (kKda: the decay per key channel) Kimi delta attention's.
//
// Contract: the recurrent, step and fused decode kernels compute every state element and output
// by the same operations in the same order (the per-token pieces below are one definition), so
// one-token calls, multi-token calls and the fused kernel give the same bits (op tests; the
// gates' prime + decode == forward_last). The chunked form is the WY algebra, its own order,
// held to the recurrent form by the chunked-vs-recurrent gate.
//
// Why this shape: a decode token's GDN is bound by dependent round trips, not arithmetic, so the
// decode kernels load every operand no recent kernel writes before pdl_wait() (state, taps, ring:
// launch.cuh's rule) and do the token's conv, recurrence and norm in one launch. A block per
// head holding its whole state in shared memory, and a cluster per key head sharing the conv
// window, measured slower (docs/PERF.md).
#include <algorithm>

#include "cuda/common.cuh"
#include "cuda/gdn.cuh"
#include "cuda/launch.cuh"

namespace memra::cuda {

namespace {

constexpr int kMaxK = kGdnMaxConvKernel;
constexpr int kThreads = kGdnMaxHeadDim;  // >= d_v and >= d_k (checked)

// --- kernels

// The ring slot of position p (p may be negative before the first token: those slots are the
// cache's zeros).
__device__ __forceinline__ int64_t ring_slot(int64_t p, int K) { return ((p % K) + K) % K; }

// One channel's conv output from its taps, the K-1 previous inputs (oldest first) and the new
// one: an fma chain over the window from 0, then the newest tap, then SiLU.
template <int kCap>
__device__ __forceinline__ float conv_out(const float (&tap)[kCap], const float (&win)[kCap], int K, float xt) {
  float s = 0.0f;
#pragma unroll
  for (int j = 0; j < kCap - 1; ++j)
    if (j < K - 1) s = fmaf(tap[j], win[j], s);
  float tl = tap[0];
#pragma unroll
  for (int j = 0; j < kCap; ++j)
    if (j == K - 1) tl = tap[j];
  return silu_f(fmaf(tl, xt, s));
}

// KT > 0: the kernel size as a compile-time constant (window and taps in registers; with a
// runtime K they lived in local memory); KT == 0: any K up to kMaxK. The same operations in the
// same order either way.
// A thread per (channel, kConvTokens tokens), not per channel walking all T (a serial walk over a
// 512-token prefill made the conv 6 % of the forward pass): a range after the first starts its
// window from the projections (x) of the K-1 tokens before it. The first range's threads alone
// read the ring and write it back, so no other block races them. Same values (each output's
// window holds the same inputs).
constexpr int kConvTokens = 16;  // >= kMaxK - 1: only the first range reaches back into the ring
static_assert(kConvTokens >= kMaxK - 1, "a later range's window lies inside the call's tokens");

template <int KT>
__global__ void gdn_conv_kernel(GdnConvParams p) {
  const int64_t ch = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (ch >= p.cd) return;  // reads and writes nothing
  const int K = KT > 0 ? KT : p.K;
  constexpr int kCap = KT > 0 ? KT : kMaxK;
  // a batched step (p.seqs, T == 1): grid.y is the sequence, its row of x and y, its own ring
  // and position (the table was uploaded before the step's first launch); else grid.y is the
  // token range
  const int64_t sq = p.seqs ? blockIdx.y : 0;
  const float* const x = p.x + sq * p.cd;
  float* const y = p.y + sq * p.cd;
  float* const state = p.seqs ? p.seqs[sq].ring : p.state;
  const int64_t ta = p.seqs ? 0 : static_cast<int64_t>(blockIdx.y) * kConvTokens;
  const int64_t tb = ta + kConvTokens < p.T ? ta + kConvTokens : p.T;
  const bool first = ta == 0;
  float win[kCap];   // win[0..K-2]: previous inputs, oldest first
  float ring[kCap];  // the first range's: the ring's K-1 inputs before the call, oldest first
  float tap[kCap];
  // Taps (weights), the position and the ring are loaded before the wait. The ring is
  // written only by this layer's conv one token earlier (or its prefill), the position by the
  // previous call's last kernel, never by the kernel just before this one (the projections'
  // mat-vec), so both are complete once this grid is scheduled (launch.cuh).
  const int64_t pos0 = *(p.seqs ? p.seqs[sq].pos0 : p.pos0);
#pragma unroll
  for (int j = 0; j < kCap; ++j)
    if (j < K) tap[j] = p.taps[ch * K + j];
#pragma unroll
  for (int j = 0; j < kCap - 1; ++j)
    ring[j] = first && j < K - 1 ? state[ring_slot(pos0 - (K - 1) + j, K) * p.cd + ch] : 0.0f;
  pdl_wait();
  pdl_release();
#pragma unroll
  for (int j = 0; j < kCap - 1; ++j)
    if (j < K - 1) win[j] = first ? ring[j] : x[(ta - (K - 1) + j) * p.cd + ch];
  for (int64_t t = ta; t < tb; ++t) {
    const float xt = x[t * p.cd + ch];
    y[t * p.cd + ch] = conv_out<kCap>(tap, win, K, xt);
#pragma unroll
    for (int j = 0; j + 1 < kCap - 1; ++j)
      if (j + 1 < K - 1) win[j] = win[j + 1];
#pragma unroll
    for (int j = 0; j < kCap - 1; ++j)
      if (j == K - 2) win[j] = xt;
  }
  if (!first) return;
  // the call's last K-1 inputs into their slots: from x, or (a call of fewer tokens) the older
  // ones from the ring as read above, rewritten with the values they hold
#pragma unroll
  for (int j = 0; j < kCap - 1; ++j) {
    if (j >= K - 1) continue;
    const int64_t t = p.T - (K - 1) + j;
    float v = 0.0f;
    if (t >= 0) v = x[t * p.cd + ch];
#pragma unroll
    for (int m = 0; m < kCap - 1; ++m)
      if (t < 0 && m == t + K - 1) v = ring[m];
    state[ring_slot(pos0 + t, K) * p.cd + ch] = v;
  }
}

__device__ float block_sum(float v, float* red) {  // fixed order: warps in index order
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  v = warp_sum_xor(v);
  __syncthreads();
  if (lane == 0) red[warp] = v;
  __syncthreads();
  float tot = 0.0f;
  for (int w = 0; w < kThreads / 32; ++w) tot = __fadd_rn(tot, red[w]);
  return tot;
}

// The pieces of one token of the recurrence that every GDN kernel shares (multi-token
// recurrent, decode step, fused decode): one definition, so one order of operations.

// q and k of the token's key head, each scaled to unit norm (q also by 1/sqrt(d_k)), into qs /
// ks; thread t < dk holds element t (qv, kv). The whole block calls it (block_sum).
__device__ __forceinline__ void qk_unit(float qv, float kv, int dk, float* qs, float* ks, float* red) {
  const int tid = threadIdx.x;
  // From the runtime dk in every kernel: rsqrtf of a compile-time constant would be folded to
  // the correctly rounded value, 1 ulp from the hardware approximation (the op tests compare the
  // kernels bitwise).
  const float qscale = rsqrtf(static_cast<float>(dk));
  const float qn = block_sum(__fmul_rn(qv, qv), red);
  const float kn = block_sum(__fmul_rn(kv, kv), red);
  if (tid < dk) {
    qs[tid] = __fmul_rn(__fmul_rn(qv, rsqrtf(__fadd_rn(qn, 1e-6f))), qscale);
    ks[tid] = __fmul_rn(kv, rsqrtf(__fadd_rn(kn, 1e-6f)));
  }
}

// KDA's forget-gate inputs (KdaParams' f, dt_bias, a_log, bound), for the kernels that take KDA's
// heads as GDN's (the decode step, the chunked prep).
struct KdaGate {
  const float* f = nullptr;
  const float* dt_bias = nullptr;
  const float* a_log = nullptr;
  float bound = 0;
};

// KDA's heads as GDN's: H key and value heads of d, untiled; b its beta logits (its gates: KdaGate).
GdnParams as_gdn(const KdaParams& p) {
  GdnParams gp;
  gp.qkv = p.qkv;
  gp.b = p.b;
  gp.state = p.state;
  gp.o = p.o;
  gp.T = p.T;
  gp.nk = gp.nv = p.H;
  gp.dk = gp.dv = p.d;
  gp.seqs = p.seqs;
  gp.n_seq = p.n_seq;
  return gp;
}

struct Gates {
  float beta, decay;
};
// beta = sigmoid(b), decay = exp(ssm_a * softplus(a + dt_bias)) of one value head.
__device__ __forceinline__ Gates gates(float b, float a, float ssm_a, float dt_bias) {
  const float beta = __fdiv_rn(1.0f, __fadd_rn(1.0f, expf(-b)));
  const float ax = __fadd_rn(a, dt_bias);
  const float sp = ax > 20.0f ? ax : log1pf(expf(ax));
  return {beta, expf(__fmul_rn(ssm_a, sp))};
}

// State column j through one token: S <- decay S; u = beta (v - Sᵀk); S <- S + k uᵀ; returns
// o = Sᵀq. S is the column's accessor: S[i], i < dk (a strided view of shared memory, or a
// register array); the decay of state row i is dec[i] (GDN: one value per head; KDA: one per key
// channel). DK > 0 fixes dk at compile time; kUnroll unrolls the loops (the loads issue ahead; a
// register column needs them whole). Each fma chain keeps its order whatever the accessor or
// the unrolling: one definition, one order.
struct StridedCol {
  float* p;
  int stride;
  __device__ __forceinline__ float& operator[](int i) const { return p[i * stride]; }
};
struct HeadDecay {  // GDN: every row of the head's state decays alike
  float d;
  __device__ __forceinline__ float operator[](int) const { return d; }
};
struct RowDecay {  // KDA: row i by its key channel's decay
  const float* d;
  __device__ __forceinline__ float operator[](int i) const { return d[i]; }
};
template <int DK, int kUnroll = 16, class Col, class Dec = HeadDecay>
__device__ __forceinline__ float column_step(Col&& S, int dk, const float* ks, const float* qs, float beta, Dec dec,
                                             float v) {
  const int n = DK > 0 ? DK : dk;
  float sk = 0.0f;
#pragma unroll kUnroll
  for (int i = 0; i < n; ++i) {
    const float sij = __fmul_rn(S[i], dec[i]);
    S[i] = sij;
    sk = fmaf(sij, ks[i], sk);
  }
  const float u = __fmul_rn(beta, __fsub_rn(v, sk));
  // ks[i] read again below, not kept from the first loop: a register column fully unrolled would
  // otherwise hold all d_k of them as well (255 registers and spills at d_k = 128)
  asm volatile("" ::: "memory");
  float o = 0.0f;
#pragma unroll kUnroll
  for (int i = 0; i < n; ++i) {
    const float sij = fmaf(ks[i], u, S[i]);
    S[i] = sij;
    o = fmaf(sij, qs[i], o);
  }
  return o;
}

__global__ void __launch_bounds__(kThreads) gdn_recurrent_kernel(GdnParams p) {
  pdl_wait();
  pdl_release();
  extern __shared__ float S[];  // [dk, dv]
  __shared__ float qs[kThreads], ks[kThreads], red[kThreads / 32];
  const int h = blockIdx.x, tid = threadIdx.x;
  const int dk = p.dk, dv = p.dv, nv = p.nv, kd = p.nk * dk;
  const int key = p.tiled ? h % p.nk : h / (nv / p.nk);
  const int64_t cd = 2 * kd + static_cast<int64_t>(nv) * dv;
  // a batched step (p.seqs, T == 1): grid.y is the sequence, its state and its row of every operand
  const int64_t sq = blockIdx.y;
  float* Sg = (p.seqs ? p.seqs[sq].state : p.state) + static_cast<int64_t>(h) * dk * dv;
#pragma unroll 8
  for (int i = tid; i < dk * dv; i += kThreads) S[i] = Sg[i];
  for (int64_t t = sq; t < sq + p.T; ++t) {
    const float* row = p.qkv + t * cd;
    qk_unit(tid < dk ? row[key * dk + tid] : 0.0f, tid < dk ? row[kd + key * dk + tid] : 0.0f, dk, qs, ks, red);
    const Gates g = gates(p.b[t * nv + h], p.a[t * nv + h], p.ssm_a[h], p.dt_bias[h]);
    __syncthreads();
    if (tid < dv)
      p.o[t * nv * dv + h * dv + tid] =
          column_step<0>(StridedCol{S + tid, dv}, dk, ks, qs, g.beta, HeadDecay{g.decay}, row[2 * kd + h * dv + tid]);
    __syncthreads();
  }
#pragma unroll 8
  for (int i = tid; i < dk * dv; i += kThreads) Sg[i] = S[i];
}

// KDA's log decay of one key channel from its gate input f and bias dt (rate = exp(a_log)):
//   g = bound * sigmoid(rate * (f + dt))   (bound < 0, the "safe gate"), or
//   g = -rate * softplus(f + dt)           (bound == 0)
// One definition for the recurrent and the chunked form: both take the same g.
__device__ __forceinline__ float kda_log_decay(float f, float dt, float rate, float bound) {
  const float x = __fadd_rn(f, dt);
  if (bound != 0.0f) return __fmul_rn(bound, __fdiv_rn(1.0f, __fadd_rn(1.0f, expf(-__fmul_rn(rate, x)))));
  return -__fmul_rn(rate, x > 20.0f ? x : log1pf(expf(x)));
}

// Kimi delta attention (KDA), T tokens in order: a block per head, thread j < d walking state
// column j with GDN's column_step (the decay per row: state row i by exp(g[i])); q and k of the
// head unit-normed as GDN's (qk_unit). The gates from their inputs, in f32: g[i] by
// kda_log_decay, beta = sigmoid(b).
__global__ void __launch_bounds__(kThreads) kda_recurrent_kernel(KdaParams p) {
  pdl_wait();
  pdl_release();
  extern __shared__ float S[];  // [d, d]
  __shared__ float qs[kThreads], ks[kThreads], red[kThreads / 32], dec[kThreads];
  const int h = blockIdx.x, tid = threadIdx.x, d = p.d, H = p.H, hd = H * d;
  const float rate = expf(p.a_log[h]);
  // a batched step (p.seqs, T == 1): grid.y is the sequence, its state and its row of every operand
  const int64_t sq = blockIdx.y;
  float* Sg = (p.seqs ? p.seqs[sq].state : p.state) + static_cast<int64_t>(h) * d * d;
#pragma unroll 8
  for (int i = tid; i < d * d; i += kThreads) S[i] = Sg[i];
  for (int64_t t = sq; t < sq + p.T; ++t) {
    const float* row = p.qkv + t * 3 * hd;
    qk_unit(tid < d ? row[h * d + tid] : 0.0f, tid < d ? row[hd + h * d + tid] : 0.0f, d, qs, ks, red);
    if (tid < d) dec[tid] = expf(kda_log_decay(p.f[t * hd + h * d + tid], p.dt_bias[h * d + tid], rate, p.bound));
    const float beta = __fdiv_rn(1.0f, __fadd_rn(1.0f, expf(-p.b[t * H + h])));
    __syncthreads();
    if (tid < d)
      p.o[t * hd + h * d + tid] =
          column_step<0>(StridedCol{S + tid, d}, d, ks, qs, beta, RowDecay{dec}, row[2 * hd + h * d + tid]);
    __syncthreads();
  }
#pragma unroll 8
  for (int i = tid; i < d * d; i += kThreads) Sg[i] = S[i];
}

// Decode (T == 1): a block per (value head, 32 state columns): the block's 32 columns of S go
// through shared memory with every thread's loads in flight (a head's whole 64 KB state through
// one block with a serial load loop took twice as long), then lane j of warp 0 walks column j.
// Per column the operations and their order are gdn_recurrent_kernel's, and the q/k norms are
// its block_sum over kThreads threads, so the bits are its (op test: one-token calls == one
// multi-token call; gate: prime + decode == forward_last). kKda: KDA's heads as GDN's (nk = nv =
// H, dk = dv = d, untiled), the decay per key channel from kg as kda_recurrent_kernel computes
// it, so the bits are that kernel's. With p.seqs (grid.z the sequence): its state and its row of
// every operand, as its own launch.
//
// PDL (launch.cuh): the state is read before pdl_wait(). It is written only by this layer's GDN
// kernel one token earlier, and this layer's conv kernel always runs in between, so the writer
// is never the immediately preceding kernel: by the time this grid is scheduled the conv grid
// has passed its own wait, which needed the kernel before it complete, and so on back.
template <int DK, bool kKda>
__global__ void __launch_bounds__(kThreads) gdn_step_kernel(GdnParams p, KdaGate kg) {
  __shared__ float qs[DK], ks[DK], red[kThreads / 32], dec[kKda ? DK : 1];
  __shared__ float Sc[DK][32];
  const int h = blockIdx.x, tid = threadIdx.x;
  const int dv = p.dv, nv = p.nv, kd = p.nk * DK;
  const int key = p.tiled ? h % p.nk : h / (nv / p.nk);
  const int j0 = static_cast<int>(blockIdx.y) * 32;
  const int64_t sq = blockIdx.z;  // the sequence of a batched step (else 0)
  float* Sg = (p.seqs ? p.seqs[sq].state : p.state) + static_cast<int64_t>(h) * DK * dv;
  float sv[DK * 32 / kThreads];
#pragma unroll
  for (int k = 0; k < DK * 32 / kThreads; ++k) {
    const int idx = tid + k * kThreads, i = idx >> 5, jj = idx & 31;
    sv[k] = j0 + jj < dv ? Sg[i * dv + j0 + jj] : 0.0f;
  }
  // weights: GDN's per-head decay operands, or KDA's rate and the key channel's bias
  const float ssm_a = kKda ? 0.0f : p.ssm_a[h], dt_bias = kKda ? 0.0f : p.dt_bias[h];
  const float rate = kKda ? expf(kg.a_log[h]) : 0.0f;
  const float dtc = kKda && tid < DK ? kg.dt_bias[h * DK + tid] : 0.0f;
  pdl_wait();
  pdl_release();
  // Every operand the previous kernels wrote is loaded here, together: b / a after the q/k
  // norms' barriers and v after the gates would be three dependent L2 round trips.
  const float* row = p.qkv + sq * (2 * kd + static_cast<int64_t>(nv) * dv);  // the one token
  const int j = j0 + tid;
  const float qv = tid < DK ? row[key * DK + tid] : 0.0f, kv = tid < DK ? row[kd + key * DK + tid] : 0.0f;
  const float bv = p.b[sq * nv + h], av = kKda ? 0.0f : p.a[sq * nv + h];
  const float fv = kKda && tid < DK ? kg.f[sq * kd + h * DK + tid] : 0.0f;
  const float vv = tid < 32 && j < dv ? row[2 * kd + h * dv + j] : 0.0f;
#pragma unroll
  for (int k = 0; k < DK * 32 / kThreads; ++k) {
    const int idx = tid + k * kThreads;
    Sc[idx >> 5][idx & 31] = sv[k];
  }
  qk_unit(qv, kv, p.dk, qs, ks, red);
  float* const o = p.o + sq * static_cast<int64_t>(nv) * dv + h * dv + j;
  if constexpr (kKda) {
    if (tid < DK) dec[tid] = expf(kda_log_decay(fv, dtc, rate, kg.bound));
    const float beta = __fdiv_rn(1.0f, __fadd_rn(1.0f, expf(-bv)));
    __syncthreads();
    if (tid < 32 && j < dv) *o = column_step<DK>(StridedCol{&Sc[0][tid], 32}, DK, ks, qs, beta, RowDecay{dec}, vv);
  } else {
    const Gates g = gates(bv, av, ssm_a, dt_bias);
    __syncthreads();
    if (tid < 32 && j < dv)
      *o = column_step<DK>(StridedCol{&Sc[0][tid], 32}, DK, ks, qs, g.beta, HeadDecay{g.decay}, vv);
  }
  __syncthreads();
#pragma unroll
  for (int k = 0; k < DK * 32 / kThreads; ++k) {
    const int idx = tid + k * kThreads, i = idx >> 5, jj = idx & 31;
    if (j0 + jj < dv) Sg[i * dv + j0 + jj] = Sc[i][jj];
  }
}

template <int DK, bool kKda = false>
bool try_step(const GdnParams& p, cudaStream_t s, const KdaGate& kg = {}) {
  if (p.dk != DK) return false;
  const dim3 grid(static_cast<unsigned>(p.nv), static_cast<unsigned>(ceil_div(p.dv, 32)),
                  static_cast<unsigned>(p.seqs ? p.n_seq : 1));
  launch_kernel("gdn_step_kernel", gdn_step_kernel<DK, kKda>, grid, kThreads, 0, s, p, kg);
  return true;
}

// Decode (T == 1) with the gated output norm: a block per value head, thread j < d_v holding
// state column j in registers (loaded before pdl_wait), the recurrence, then the head's
// RMSNorm gated by SiLU(z) and its q8_1 blocks — the work of gdn_step_kernel plus the
// RmsNormGated row op (norm.cu) in one launch, each value by the same operations in the same
// order: the q/k norms are block_sum over kThreads threads, the column chains are
// column_step's, and the norm's sum of squares is the row op's (x² as fmaf(x, x, 0), warp
// butterflies, warps in index order; the row op's warps past d_v add +0). Same bits (op test:
// against gdn_step_kernel + rowop_run). One launch instead of two saves a launch boundary and
// the norm's round trips per GDN layer (docs/PERF.md).
//
// kConv: the token's conv as well (gdn_conv_kernel's operations, conv_out, for the three
// channels thread j reads: q and k of the block's key head, v of its value head), so the conv's
// own launch goes: the taps, the position and the ring's K-1 previous inputs are loaded before
// the wait with the state; after it, thread j stores its v channel's input into the ring slot
// of this position, and the key head's q / k inputs are stored by its first value head's block
// only. No block reads that slot this step (gdn.cuh), so the stores race with no read.
template <int DK, int DV, bool kConv>
__global__ void __launch_bounds__(kThreads) gdn_step_norm_kernel(GdnParams p, GdnOutNorm nrm, GdnConvParams cv) {
  static_assert(DK <= kThreads && DV <= kThreads);
  constexpr int K = 4;  // the conv's kernel size when kConv
  __shared__ float qs[DK], ks[DK], red[kThreads / 32];
  const int h = blockIdx.x, j = threadIdx.x, lane = j & 31;
  const int nv = p.nv, kd = p.nk * DK;
  const int key = p.tiled ? h % p.nk : h / (nv / p.nk);
  const bool col = j < DV;
  const int64_t cq = key * DK + j, ck = kd + key * DK + j, cvv = 2 * kd + h * DV + j;  // thread j's channels
  // a batched step's sequence blockIdx.y: its state, ring and position, its row of every operand
  // (the table was uploaded before the step's first launch)
  const int64_t sq = blockIdx.y;
  float* const state = p.seqs ? p.seqs[sq].state : p.state;
  float* const ring_base = p.seqs ? p.seqs[sq].ring : cv.state;
  const int64_t* const pos_p = p.seqs ? p.seqs[sq].pos0 : cv.pos0;
  const int64_t cd = 2 * kd + nv * DV, vd = static_cast<int64_t>(nv) * DV;
  float tq[K], tk[K], tv[K], wq[K], wk[K], wv[K];  // taps; ring windows, oldest first (wx[K-1] unused)
  int64_t pos = 0;
  if constexpr (kConv) {
    pos = *pos_p;
#pragma unroll
    for (int t = 0; t < K; ++t) {
      tq[t] = j < DK ? cv.taps[cq * K + t] : 0.0f;
      tk[t] = j < DK ? cv.taps[ck * K + t] : 0.0f;
      tv[t] = col ? cv.taps[cvv * K + t] : 0.0f;
    }
#pragma unroll
    for (int t = 0; t < K - 1; ++t) {
      const int64_t slot = ring_slot(pos - (K - 1) + t, K) * cv.cd;
      wq[t] = j < DK ? ring_base[slot + cq] : 0.0f;
      wk[t] = j < DK ? ring_base[slot + ck] : 0.0f;
      wv[t] = col ? ring_base[slot + cvv] : 0.0f;
    }
    wq[K - 1] = wk[K - 1] = wv[K - 1] = 0.0f;
  }
  // column j of the head's state, at compile-time offsets i * DV (runtime strides kept 2
  // registers per element live until the stores, and spilled)
  float* const Sj = state + static_cast<int64_t>(h) * DK * DV + (col ? j : 0);
  float S[DK];
#pragma unroll
  for (int i = 0; i < DK; ++i) S[i] = Sj[i * DV];
  const float ssm_a = p.ssm_a[h], dt_bias = p.dt_bias[h];  // weights
  const float wn = col ? nrm.w[j] : 0.0f;
  pdl_wait();
  pdl_release();
  const float* row = (kConv ? cv.x : p.qkv) + sq * cd;  // the projections, or their conv
  float qv = j < DK ? row[cq] : 0.0f, kv = j < DK ? row[ck] : 0.0f;
  const float bv = p.b[sq * nv + h], av = p.a[sq * nv + h];
  float vv = col ? row[cvv] : 0.0f;
  const float zv = col ? nrm.z[sq * vd + h * DV + j] : 0.0f;
  if constexpr (kConv) {
    float* const ring = ring_base + ring_slot(pos, K) * cv.cd;
    const bool first_of_key = p.tiled ? h < p.nk : h % (nv / p.nk) == 0;
    if (j < DK && first_of_key) {
      ring[cq] = qv;
      ring[ck] = kv;
    }
    if (col) ring[cvv] = vv;
    qv = j < DK ? conv_out<K>(tq, wq, K, qv) : 0.0f;
    kv = j < DK ? conv_out<K>(tk, wk, K, kv) : 0.0f;
    vv = col ? conv_out<K>(tv, wv, K, vv) : 0.0f;
  }
  qk_unit(qv, kv, p.dk, qs, ks, red);  // the runtime d_k: see qk_unit
  const Gates g = gates(bv, av, ssm_a, dt_bias);
  __syncthreads();
  float o = 0.0f;
  if (col) {
    o = column_step<DK, DK>(S, DK, ks, qs, g.beta, HeadDecay{g.decay}, vv);
#pragma unroll
    for (int i = 0; i < DK; ++i) Sj[i * DV] = S[i];
  }
  const float tot = block_sum(fmaf(o, o, 0.0f), red);
  const float scale = rsqrtf(__fadd_rn(__fdiv_rn(tot, static_cast<float>(DV)), nrm.eps));
  const float y = __fmul_rn(__fmul_rn(__fmul_rn(o, scale), wn), silu_f(zv));
  const int64_t i = sq * vd + static_cast<int64_t>(h) * DV + j;
  if (col) nrm.y[i] = y;
  if (nrm.q && j - lane < DV) quantize_block_q8_1(y, nrm.q + i / 32, lane);  // DV % 32 == 0: whole warps
}

template <int DK, int DV>
bool try_step_norm(const GdnParams& p, const GdnOutNorm& n, const GdnConvParams* conv, cudaStream_t s) {
  if (p.dk != DK || p.dv != DV) return false;
  if (p.seqs && !(conv && conv->K == 4))
    fail("gdn: a batched step (", p.n_seq, " sequences) needs the fused conv (K = 4)");
  const dim3 grid(static_cast<unsigned>(p.nv), static_cast<unsigned>(p.seqs ? p.n_seq : 1));
  if (conv && conv->K == 4) {
    launch_kernel("gdn_step_norm_kernel", gdn_step_norm_kernel<DK, DV, true>, grid, kThreads, 0, s, p, n, *conv);
    return true;
  }
  if (conv) gdn_conv_run(*conv, s);  // writes p.qkv
  launch_kernel("gdn_step_norm_kernel", gdn_step_norm_kernel<DK, DV, false>, grid, kThreads, 0, s, p, n, GdnConvParams{});
  return true;
}

// The chunked (WY) form of the same recurrence (oracle/gdn.cpp's delta_rule_chunked, in f32),
// for prefill: per chunk of C = kChunk tokens with gamma = cumsum(g),
//   L[i,j] = beta_i (k_i.k_j) e^(gamma_i - gamma_j) (j < i);  (I+L) U = beta V;
//   (I+L) W = beta e^gamma K;  V' = U - W S;
//   O_i = e^gamma_i q_i S + Σ_{j<=i} A_ij V'_j,  A_ij = (q_i.k_j) e^(gamma_i - gamma_j);
//   S <- e^gamma_last S + Σ_j e^(gamma_last - gamma_j) k_j V'_jᵀ.
// KDA (kKda; the oracle's kda_delta_rule_chunked) takes every decay per key channel a:
//   L[i,j] = beta_i Σ_a k_ia k_ja e^(gamma_ia - gamma_ja),  A_ij = Σ_a q_ia k_ja e^(gamma_ia - gamma_ja)
// (the decay inside the dot, pair by pair: e^(-gamma) alone would overflow over a chunk of safe-gate
// decays), W's rows beta_i e^gamma_i ⊙ k_i, and the state kernel's operands decayed in the prep:
// q_i ⊙ e^gamma_i, k_j ⊙ e^(gamma_last - gamma_j), state row a by e^gamma_last,a (its e^gamma and
// e^(gamma_last - gamma_j) factors are then 1: a multiply by 1 is exact, so GDN's kernel serves both).
// Two launches per segment of up to kSegChunks chunks. Everything up to U and W depends on its
// chunk alone, not on S, so gdn_chunk_prep_kernel computes it for every (chunk, value head) at
// once into a workspace slot (ChunkSlot); gdn_chunk_state_kernel then walks the segment's chunks
// in order, a block per (kSlice state columns, value head): the columns of S and V' never mix.
// (One block per value head walking the chunks would run 32 blocks on the 9B's heads, most SMs
// idle.) Each element's chain of operations is fixed by the algebra above: the register tiles
// (any shape) keep every element's order, and the substitution's chains run in a thread per
// column, with no barrier per row.
constexpr int kChunk = 64;
constexpr int kLdT = kChunk + 4;   // row stride of transposed [d, C] and of A in shared memory (bank spread, 16-byte rows)
constexpr int kSlice = 32;         // state columns per gdn_chunk_state_kernel block
constexpr int kSegChunks = 16;     // chunks per prep + state pair: bounds the workspace at 1024 tokens
constexpr int kPrepThreads = 256;  // >= (kChunk / 4)², one 4 x 4 tile of A and L each
constexpr int kStateThreads = 256;
static_assert((kChunk / 4) * (kChunk / 4) <= kPrepThreads, "one A / L tile per thread");

// A (chunk, value head)'s results in the workspace, written by the prep kernel, read by the
// state kernel. Rows past the chunk's C tokens are not written, except a's and e's (zeros).
struct ChunkSlot {
  float* q;   // [C, dk] normalised, scaled q (KDA: ⊙ e^gamma_i)
  float* k;   // [C, dk] normalised k (KDA: ⊙ e^(gamma_last - gamma_i))
  float* w;   // [C, dk] W
  float* u;   // [C, dv] U
  float* a;   // [C, kChunk] A (j <= i), zeros above
  float* eg;  // [kChunk] e^gamma_i (KDA: 1)
  float* el;  // [kChunk] e^(gamma_last - gamma_j) (KDA: 1)
  float* sd;  // [dk] state row a's decay over the chunk: e^gamma_last (KDA: e^gamma_last,a)
};
__host__ __device__ inline int64_t chunk_slot_floats(int dk, int dv) {
  return (static_cast<int64_t>(kChunk) * (3 * dk + dv + kChunk) + 2 * kChunk + dk + 3) / 4 * 4;  // 16-byte slots
}
__device__ inline ChunkSlot chunk_slot(float* work, int64_t index, int dk, int dv) {
  ChunkSlot s;
  s.q = work + index * chunk_slot_floats(dk, dv);
  s.k = s.q + kChunk * dk;
  s.w = s.k + kChunk * dk;
  s.u = s.w + kChunk * dk;
  s.a = s.u + kChunk * dv;
  s.eg = s.a + kChunk * kChunk;
  s.el = s.eg + kChunk;
  s.sd = s.el + kChunk;
  return s;
}

// v[r][c] = Σ_a x'_a,r yT[a kLdT + c] for a 4 x 4 tile of transposed operands, each element an
// fma chain over a = 0..n-1 from 0 in order. GDN: x' = xT[a kLdT + r] itself; KDA (kDecay; gxT,
// gyT: the operands' gammas, transposed alike): the decay inside the dot, x' = x e^(gx_a,r - gy_a,c).
template <bool kDecay>
__device__ __forceinline__ void tile_dot_t(float (&v)[4][4], const float* xT, const float* yT, int n, const float* gxT,
                                           const float* gyT) {
#pragma unroll
  for (int r = 0; r < 4; ++r)
#pragma unroll
    for (int c = 0; c < 4; ++c) v[r][c] = 0.0f;
  for (int a = 0; a < n; ++a) {
    const float4 x4 = *reinterpret_cast<const float4*>(xT + a * kLdT);
    const float4 y4 = *reinterpret_cast<const float4*>(yT + a * kLdT);
    const float xv[4] = {x4.x, x4.y, x4.z, x4.w}, yv[4] = {y4.x, y4.y, y4.z, y4.w};
    float gxv[4] = {}, gyv[4] = {};
    if constexpr (kDecay) {
      const float4 gx4 = *reinterpret_cast<const float4*>(gxT + a * kLdT);
      const float4 gy4 = *reinterpret_cast<const float4*>(gyT + a * kLdT);
      gxv[0] = gx4.x, gxv[1] = gx4.y, gxv[2] = gx4.z, gxv[3] = gx4.w;
      gyv[0] = gy4.x, gyv[1] = gy4.y, gyv[2] = gy4.z, gyv[3] = gy4.w;
    }
#pragma unroll
    for (int r = 0; r < 4; ++r)
#pragma unroll
      for (int c = 0; c < 4; ++c)
        v[r][c] = fmaf(kDecay ? __fmul_rn(xv[r], expf(__fsub_rn(gxv[r], gyv[c]))) : xv[r], yv[c], v[r][c]);
  }
}

// (I + L) x = x0 for one column, in place, by forward substitution: row i's chain is
// x_i - L_i0 x_0 - L_i1 x_1 - ... in that order (L strictly lower, rows kChunk apart). The column
// lives in registers (fully unrolled) and belongs to one thread, so no row waits on a barrier.
__device__ __forceinline__ void solve_column(float (&x)[kChunk], const float* L) {
#pragma unroll
  for (int i = 1; i < kChunk; ++i)
#pragma unroll
    for (int j = 0; j < i; j += 4) {
      const float4 l = *reinterpret_cast<const float4*>(L + i * kChunk + j);
      x[i] = fmaf(-l.x, x[j], x[i]);
      if (j + 1 < i) x[i] = fmaf(-l.y, x[j + 1], x[i]);
      if (j + 2 < i) x[i] = fmaf(-l.z, x[j + 2], x[i]);
      if (j + 3 < i) x[i] = fmaf(-l.w, x[j + 3], x[i]);
    }
}

// Everything of chunk blockIdx.x (of the segment at token t0) and value head blockIdx.y that does
// not depend on S, into its slot. kKda: the decay per key channel (kg's gates; p's heads are KDA's,
// nk = nv = H, dk = dv = d).
template <bool kKda>
__global__ void __launch_bounds__(kPrepThreads, 2)
    gdn_chunk_prep_kernel(GdnParams p, KdaGate kg, int64_t t0, float* work) {
  pdl_wait();
  pdl_release();
  extern __shared__ float sm[];
  const int dk = p.dk, dv = p.dv, nv = p.nv, kd = p.nk * dk, h = blockIdx.y, tid = threadIdx.x;
  const int lane = tid & 31, warp = tid >> 5;
  const int64_t c0 = t0 + static_cast<int64_t>(blockIdx.x) * kChunk;
  const int C = static_cast<int>(p.T - c0 < kChunk ? p.T - c0 : kChunk);
  float* KT = sm;                     // [dk, kLdT] k transposed
  float* QT = KT + dk * kLdT;         // [dk, kLdT] q transposed
  float* Ls = QT + dk * kLdT;         // [kChunk, kChunk] L, strictly lower
  float* bet = Ls + kChunk * kChunk;  // [kChunk]
  float* eg = bet + kChunk;           // [kChunk] e^gamma (GDN)
  float* gam = eg + kChunk;           // GDN: [kChunk] g, then gamma; KDA: [dk, kLdT] the same, transposed
  const ChunkSlot out = chunk_slot(work, static_cast<int64_t>(blockIdx.x) * nv + h, dk, dv);
  const int key = p.tiled ? h % p.nk : h / (nv / p.nk);
  const int64_t cd = 2 * kd + static_cast<int64_t>(nv) * dv;
  const float qscale = rsqrtf(static_cast<float>(dk));
  const float rate = kKda ? expf(kg.a_log[h]) : 0.0f;
  // 1. per token (a warp each): L2-normed q (scaled) and k, beta, g
  for (int i = warp; i < C; i += kPrepThreads / 32) {
    const int64_t t = c0 + i;
    const float* row = p.qkv + t * cd;
    float qq = 0.0f, kk = 0.0f;
    for (int a = lane; a < dk; a += 32) {
      qq = fmaf(row[key * dk + a], row[key * dk + a], qq);
      kk = fmaf(row[kd + key * dk + a], row[kd + key * dk + a], kk);
    }
    qq = warp_sum_xor(qq);
    kk = warp_sum_xor(kk);
    const float iq = __fmul_rn(rsqrtf(__fadd_rn(qq, 1e-6f)), qscale), ik = rsqrtf(__fadd_rn(kk, 1e-6f));
    for (int a = lane; a < dk; a += 32) {
      const float qv = __fmul_rn(row[key * dk + a], iq), kv = __fmul_rn(row[kd + key * dk + a], ik);
      QT[a * kLdT + i] = qv;
      KT[a * kLdT + i] = kv;
      if constexpr (kKda) {
        gam[a * kLdT + i] = kda_log_decay(kg.f[t * kd + h * dk + a], kg.dt_bias[h * dk + a], rate, kg.bound);
      } else {
        out.q[i * dk + a] = qv;
        out.k[i * dk + a] = kv;
      }
    }
    if (lane == 0) {
      bet[i] = __fdiv_rn(1.0f, __fadd_rn(1.0f, expf(-p.b[t * nv + h])));
      if constexpr (!kKda) {
        const float ax = __fadd_rn(p.a[t * nv + h], p.dt_bias[h]);
        gam[i] = __fmul_rn(p.ssm_a[h], ax > 20.0f ? ax : log1pf(expf(ax)));  // g_i, summed below
      }
    }
  }
  __syncthreads();
  if constexpr (kKda) {
    for (int a = tid; a < dk; a += kPrepThreads)  // gamma = cumsum(g), per channel
      for (int i = 1; i < C; ++i) gam[a * kLdT + i] = __fadd_rn(gam[a * kLdT + i], gam[a * kLdT + i - 1]);
  } else if (tid == 0) {
    for (int i = 1; i < C; ++i) gam[i] = __fadd_rn(gam[i], gam[i - 1]);  // gamma = cumsum(g)
  }
  __syncthreads();
  if constexpr (kKda) {
    // the decays go into the state kernel's operands; its own factors are 1
    if (tid < kChunk) out.eg[tid] = out.el[tid] = tid < C ? 1.0f : 0.0f;
    for (int a = tid; a < dk; a += kPrepThreads) out.sd[a] = expf(gam[a * kLdT + C - 1]);
    for (int e = tid; e < C * dk; e += kPrepThreads) {
      const int i = e / dk, a = e % dk;
      const float g = gam[a * kLdT + i];
      out.q[e] = __fmul_rn(QT[a * kLdT + i], expf(g));
      out.k[e] = __fmul_rn(KT[a * kLdT + i], expf(__fsub_rn(gam[a * kLdT + C - 1], g)));
    }
  } else {
    const float gl = gam[C - 1];
    if (tid < kChunk) {
      const float e = tid < C ? expf(gam[tid]) : 0.0f;
      eg[tid] = e;
      out.eg[tid] = e;
      out.el[tid] = tid < C ? expf(gl - gam[tid]) : 0.0f;
    }
    for (int a = tid; a < dk; a += kPrepThreads) out.sd[a] = expf(gl);
  }
  // 2. A (j <= i) into the slot, zeros above it; L (j < i) into shared memory; tiles on or below
  // the diagonal only
  for (int e = tid; e < C * kChunk; e += kPrepThreads)
    if (e % kChunk > e / kChunk) out.a[e] = 0.0f;
  const int c4 = (C + 3) / 4;
  for (int tile = tid; tile < c4 * c4; tile += kPrepThreads) {
    const int i0 = tile / c4 * 4, j0 = tile % c4 * 4;
    if (j0 > i0) continue;
    float v[4][4];
    tile_dot_t<kKda>(v, QT + i0, KT + j0, dk, gam + i0, gam + j0);
#pragma unroll
    for (int r = 0; r < 4; ++r)
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        const int i = i0 + r, j = j0 + c;
        if (i < C && j <= i) out.a[i * kChunk + j] = kKda ? v[r][c] : __fmul_rn(v[r][c], expf(gam[i] - gam[j]));
      }
    tile_dot_t<kKda>(v, KT + i0, KT + j0, dk, gam + i0, gam + j0);
#pragma unroll
    for (int r = 0; r < 4; ++r)
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        const int i = i0 + r, j = j0 + c;
        if (i < C && j < i)
          Ls[i * kChunk + j] =
              kKda ? __fmul_rn(bet[i], v[r][c]) : __fmul_rn(__fmul_rn(bet[i], v[r][c]), expf(gam[i] - gam[j]));
      }
  }
  __syncthreads();
  // 3. (I + L) U = beta v and (I + L) W = beta e^gamma k, a thread per column of U | W. Rows past
  // C start at 0 and read L's unwritten rows: their values are never stored.
  for (int col = tid; col < dv + dk; col += kPrepThreads) {
    const bool is_u = col < dv;
    const int a = col - dv;
    const float* src = is_u ? p.qkv + c0 * cd + 2 * kd + h * dv + col : KT + a * kLdT;  // v (global) | k (shared)
    const int64_t lds = is_u ? cd : 1;
    float x[kChunk];
#pragma unroll
    for (int i = 0; i < kChunk; ++i)
      if (i < C) {
        const float e = is_u ? 1.0f : kKda ? expf(gam[a * kLdT + i]) : eg[i];  // e^gamma_i (KDA: channel a's)
        x[i] = __fmul_rn(is_u ? bet[i] : __fmul_rn(bet[i], e), src[i * lds]);
      } else {
        x[i] = 0.0f;
      }
    solve_column(x, Ls);
    float* dst = is_u ? out.u + col : out.w + a;
    const int ld = is_u ? dv : dk;
#pragma unroll
    for (int i = 0; i < kChunk; ++i)
      if (i < C) dst[i * ld] = x[i];
  }
}

// rows x n floats from src (row stride lds) to shared dst (row stride ldd) with cp.async: 16-byte
// pieces where n, the strides and the bases allow (n % 4 == 0: the callers' layouts are
// 16-byte aligned then), 4-byte ones otherwise.
__device__ __forceinline__ void copy_rows_async(float* dst, int ldd, const float* src, int64_t lds, int rows, int n) {
  if (n % 4 == 0) {
    const int n4 = n / 4;
    for (int e = threadIdx.x; e < rows * n4; e += blockDim.x) {
      const int r = e / n4, c = e % n4 * 4;
      cp_async16(dst + r * ldd + c, src + r * lds + c);
    }
  } else {
    for (int e = threadIdx.x; e < rows * n; e += blockDim.x) {
      const int r = e / n, c = e % n;
      cp_async4(dst + r * ldd + c, src + r * lds + c);
    }
  }
}

// The recurrence across the segment's chunks for state columns blockIdx.x * kSlice + [0, kSlice)
// of value head blockIdx.y: V', the output rows and S from the slots, chunk after chunk.
__global__ void __launch_bounds__(kStateThreads) gdn_chunk_state_kernel(GdnParams p, int64_t t0, int chunks,
                                                                         float* work) {
  pdl_wait();
  pdl_release();
  extern __shared__ float sm[];
  const int dk = p.dk, dv = p.dv, nv = p.nv, h = blockIdx.y, tid = threadIdx.x;
  const int d_lo = blockIdx.x * kSlice, ds = dv - d_lo < kSlice ? dv - d_lo : kSlice, ldk = dk + 4;
  float* S = sm;                      // [dk, kSlice] columns d_lo.. of S (zeros past ds)
  float* Qs = S + dk * kSlice;        // [C, ldk]
  float* Ks = Qs + kChunk * ldk;       // [C, ldk]
  float* Ws = Ks + kChunk * ldk;       // [C, ldk]
  float* As = Ws + kChunk * ldk;       // [C, kLdT]
  float* Us = As + kChunk * kLdT;      // [C, kSlice] U, then V'
  float* eg = Us + kChunk * kSlice;    // [kChunk]
  float* el = eg + kChunk;             // [kChunk]
  float* sd = el + kChunk;             // [dk]
  float* Sg = p.state + static_cast<int64_t>(h) * dk * dv + d_lo;
  for (int e = tid; e < dk * kSlice; e += kStateThreads) {
    const int a = e / kSlice, c = e % kSlice;
    S[e] = c < ds ? Sg[a * dv + c] : 0.0f;
  }
  auto rows_of = [&](int cl) { return static_cast<int>(p.T - t0 - cl * kChunk < kChunk ? p.T - t0 - cl * kChunk : kChunk); };
  auto slot = [&](int cl) { return chunk_slot(work, static_cast<int64_t>(cl) * nv + h, dk, dv); };
  // q, W and A are fetched for the next chunk while step 7 (which reads none of them) runs
  auto fetch_qwa = [&](int cl) {
    const ChunkSlot in = slot(cl);
    const int C = rows_of(cl);
    copy_rows_async(Qs, ldk, in.q, dk, C, dk);
    copy_rows_async(Ws, ldk, in.w, dk, C, dk);
    copy_rows_async(As, kLdT, in.a, kChunk, C, kChunk);
  };
  fetch_qwa(0);
  const int s4 = (ds + 3) / 4, k4 = (dk + 3) / 4;
  for (int cl = 0; cl < chunks; ++cl) {
    const int64_t c0 = t0 + static_cast<int64_t>(cl) * kChunk;
    const int C = rows_of(cl);
    const ChunkSlot in = slot(cl);
    copy_rows_async(Ks, ldk, in.k, dk, C, dk);
    copy_rows_async(Us, kSlice, in.u + d_lo, dv, C, ds);
    copy_rows_async(eg, 0, in.eg, 0, 1, kChunk);
    copy_rows_async(el, 0, in.el, 0, 1, kChunk);
    copy_rows_async(sd, 0, in.sd, 0, 1, dk);
    cp_async_commit();
    cp_async_wait_all();
    __syncthreads();
    // 4. V' = U - W S, 2 x 4 tiles
    for (int tile = tid; tile < (C + 1) / 2 * s4; tile += kStateThreads) {
      const int i0 = tile / s4 * 2, d0 = tile % s4 * 4;
      float v[2][4];
#pragma unroll
      for (int r = 0; r < 2; ++r)
#pragma unroll
        for (int c = 0; c < 4; ++c) v[r][c] = i0 + r < C && d0 + c < ds ? Us[(i0 + r) * kSlice + d0 + c] : 0.0f;
      for (int a = 0; a < dk; ++a) {
        const float4 s = *reinterpret_cast<const float4*>(S + a * kSlice + d0);
        const float sv[4] = {s.x, s.y, s.z, s.w};
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          const float w = i0 + r < C ? Ws[(i0 + r) * ldk + a] : 0.0f;
#pragma unroll
          for (int c = 0; c < 4; ++c) v[r][c] = fmaf(-w, sv[c], v[r][c]);
        }
      }
#pragma unroll
      for (int r = 0; r < 2; ++r)
#pragma unroll
        for (int c = 0; c < 4; ++c)
          if (i0 + r < C && d0 + c < ds) Us[(i0 + r) * kSlice + d0 + c] = v[r][c];
    }
    __syncthreads();
    // 6. O_i = e^gamma_i q_i S + Σ_j<=i A_ij V'_j, 2 x 4 tiles
    for (int tile = tid; tile < (C + 1) / 2 * s4; tile += kStateThreads) {
      const int i0 = tile / s4 * 2, d0 = tile % s4 * 4;
      float o[2][4] = {};
      for (int a = 0; a < dk; ++a) {
        const float4 s = *reinterpret_cast<const float4*>(S + a * kSlice + d0);
        const float sv[4] = {s.x, s.y, s.z, s.w};
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          const float q = i0 + r < C ? Qs[(i0 + r) * ldk + a] : 0.0f;
#pragma unroll
          for (int c = 0; c < 4; ++c) o[r][c] = fmaf(q, sv[c], o[r][c]);
        }
      }
#pragma unroll
      for (int r = 0; r < 2; ++r)
#pragma unroll
        for (int c = 0; c < 4; ++c) o[r][c] = __fmul_rn(i0 + r < C ? eg[i0 + r] : 0.0f, o[r][c]);
      const int jmax = i0 + 1 < C - 1 ? i0 + 1 : C - 1;
      for (int j = 0; j <= jmax; ++j) {
        const float4 u = *reinterpret_cast<const float4*>(Us + j * kSlice + d0);
        const float uv[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          if (j > i0 + r || i0 + r >= C) continue;  // row i0 + r sums j = 0..i0 + r only
          const float l = As[(i0 + r) * kLdT + j];
#pragma unroll
          for (int c = 0; c < 4; ++c) o[r][c] = fmaf(l, uv[c], o[r][c]);
        }
      }
#pragma unroll
      for (int r = 0; r < 2; ++r)
#pragma unroll
        for (int c = 0; c < 4; ++c)
          if (i0 + r < C && d0 + c < ds) p.o[(c0 + i0 + r) * nv * dv + h * dv + d_lo + d0 + c] = o[r][c];
    }
    __syncthreads();
    if (cl + 1 < chunks) fetch_qwa(cl + 1);
    // 7. S <- e^gamma_last S + Σ_j e^(gamma_last - gamma_j) k_j V'_jᵀ, 4 x 4 tiles (e^gamma_last per
    // state row: sd)
    for (int tile = tid; tile < k4 * s4; tile += kStateThreads) {
      const int a0 = tile / s4 * 4, d0 = tile % s4 * 4;
      float v[4][4];
#pragma unroll
      for (int r = 0; r < 4; ++r)
#pragma unroll
        for (int c = 0; c < 4; ++c)
          v[r][c] = a0 + r < dk && d0 + c < ds ? __fmul_rn(sd[a0 + r], S[(a0 + r) * kSlice + d0 + c]) : 0.0f;
      for (int j = 0; j < C; ++j) {
        const float4 k = *reinterpret_cast<const float4*>(Ks + j * ldk + a0);
        const float4 u = *reinterpret_cast<const float4*>(Us + j * kSlice + d0);
        const float kv[4] = {__fmul_rn(el[j], k.x), __fmul_rn(el[j], k.y), __fmul_rn(el[j], k.z), __fmul_rn(el[j], k.w)};
        const float uv[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
        for (int r = 0; r < 4; ++r)
#pragma unroll
          for (int c = 0; c < 4; ++c) v[r][c] = fmaf(kv[r], uv[c], v[r][c]);
      }
#pragma unroll
      for (int r = 0; r < 4; ++r)
#pragma unroll
        for (int c = 0; c < 4; ++c)
          if (a0 + r < dk && d0 + c < ds) S[(a0 + r) * kSlice + d0 + c] = v[r][c];
    }
    __syncthreads();
  }
  for (int e = tid; e < dk * kSlice; e += kStateThreads) {
    const int a = e / kSlice, c = e % kSlice;
    if (c < ds) Sg[a * dv + c] = S[e];
  }
}

}  // namespace

// --- launchers / dispatch

void gdn_conv_run(const GdnConvParams& p, cudaStream_t s) {
  if (p.T == 0) return;
  if (!p.pos0 && !p.seqs) fail("gdn conv: no device position for the ring (pos0)");
  if (p.K < 1 || p.K > kMaxK) fail("gdn conv: kernel size ", p.K, " unsupported (1..", kMaxK, ")");
  if (p.seqs && (p.T != 1 || p.n_seq < 1 || p.n_seq > 65535))
    fail("gdn conv: a batched step takes one token (T = ", p.T, ") of 1..65535 sequences (", p.n_seq, ")");
  const dim3 grid(static_cast<unsigned>(ceil_div(p.cd, 128)),
                  static_cast<unsigned>(p.seqs ? p.n_seq : ceil_div(p.T, kConvTokens)));
  if (p.K == 4) launch_kernel("gdn_conv_kernel", gdn_conv_kernel<4>, grid, 128, 0, s, p);
  else launch_kernel("gdn_conv_kernel", gdn_conv_kernel<0>, grid, 128, 0, s, p);
}

int64_t gdn_chunked_workspace_floats(int64_t T, int nv, int dk, int dv) {
  const int64_t chunks = std::min<int64_t>(ceil_div(T, kChunk), kSegChunks);
  return chunks * nv * chunk_slot_floats(dk, dv);
}

namespace {

template <bool kKda>
void chunked_run(const char* what, const GdnParams& p, const KdaGate& kg, float* work, int64_t work_floats,
                 cudaStream_t s) {
  if (p.T == 0) return;
  if (p.dk > kThreads || p.dv > kThreads || p.dk % 4 != 0 || p.dv % 4 != 0)
    fail(what, ": d_k ", p.dk, " / d_v ", p.dv, " unsupported (multiples of 4, <= ", kThreads, ")");
  const int64_t need = gdn_chunked_workspace_floats(p.T, p.nv, p.dk, p.dv);
  if (!work || work_floats < need)
    fail(what, ": workspace of ", work_floats, " floats, ", need, " needed for ", p.T, " tokens x ", p.nv,
         " value heads (gdn_chunked_workspace_floats)");
  const size_t gam_floats = kKda ? static_cast<size_t>(p.dk) * kLdT : kChunk;
  const size_t prep_smem =
      (2 * static_cast<size_t>(p.dk) * kLdT + kChunk * kChunk + 2 * kChunk + gam_floats) * sizeof(float);
  const size_t state_smem = (static_cast<size_t>(p.dk) * kSlice + 3 * static_cast<size_t>(kChunk) * (p.dk + 4) +
                             kChunk * kLdT + kChunk * kSlice + 2 * kChunk + p.dk) *
                            sizeof(float);
  const dim3 state_grid(static_cast<unsigned>(ceil_div(p.dv, kSlice)), static_cast<unsigned>(p.nv));
  for (int64_t t0 = 0; t0 < p.T; t0 += static_cast<int64_t>(kSegChunks) * kChunk) {
    const int chunks = static_cast<int>(std::min<int64_t>(ceil_div(p.T - t0, kChunk), kSegChunks));
    launch_kernel("gdn_chunk_prep_kernel", gdn_chunk_prep_kernel<kKda>,
                  dim3(static_cast<unsigned>(chunks), static_cast<unsigned>(p.nv)), kPrepThreads, prep_smem, s, p, kg,
                  t0, work);
    launch_kernel("gdn_chunk_state_kernel", gdn_chunk_state_kernel, state_grid, kStateThreads, state_smem, s, p, t0, chunks,
                  work);
  }
}

}  // namespace

void gdn_chunked_run(const GdnParams& p, float* work, int64_t work_floats, cudaStream_t s) {
  chunked_run<false>("gdn chunked", p, KdaGate{}, work, work_floats, s);
}

void kda_chunked_run(const KdaParams& p, float* work, int64_t work_floats, cudaStream_t s) {
  chunked_run<true>("kda chunked", as_gdn(p), KdaGate{p.f, p.dt_bias, p.a_log, p.bound}, work, work_floats, s);
}

bool gdn_step_norm_run(const GdnParams& p, const GdnOutNorm& n, cudaStream_t s, const GdnConvParams* conv) {
  if (p.T != 1) return false;
  if (p.seqs && (p.n_seq < 1 || p.n_seq > 65535)) fail("gdn: ", p.n_seq, " sequences in one step launch (1..65535)");
  if (n.q && p.dv % 32 != 0) fail("gdn: q8_1 output of the gated norm needs d_v % 32 == 0, d_v = ", p.dv);
  if (conv && (conv->T != 1 || conv->y != p.qkv || conv->cd != 2 * p.nk * p.dk + p.nv * p.dv))
    fail("gdn: the fused conv must be the step's own (T = 1, y = qkv, cd = ", 2 * p.nk * p.dk + p.nv * p.dv, ")");
  // the Qwen3-Next / Qwen3.5 heads, and the tiny fixtures' (so the model gates run this kernel)
  return try_step_norm<128, 128>(p, n, conv, s) || try_step_norm<8, 16>(p, n, conv, s);
}

void kda_recurrent_run(const KdaParams& p, cudaStream_t s) {
  if (p.T == 0) return;
  if (p.d < 1 || p.d > kThreads) fail("kda: head width ", p.d, " unsupported (1..", kThreads, ")");
  if (p.seqs && (p.T != 1 || p.n_seq < 1 || p.n_seq > 65535))
    fail("kda: a batched step takes one token (T = ", p.T, ") of 1..65535 sequences (", p.n_seq, ")");
  if (p.T == 1) {  // decode: GDN's step kernel with KDA's decays, where the head width has one
    const GdnParams gp = as_gdn(p);
    const KdaGate kg{p.f, p.dt_bias, p.a_log, p.bound};
    if (try_step<128, true>(gp, s, kg) || try_step<64, true>(gp, s, kg) || try_step<32, true>(gp, s, kg) ||
        try_step<16, true>(gp, s, kg) || try_step<8, true>(gp, s, kg))
      return;
  }
  const size_t smem = static_cast<size_t>(p.d) * p.d * sizeof(float);
  const dim3 grid(static_cast<unsigned>(p.H), static_cast<unsigned>(p.seqs ? p.n_seq : 1));
  launch_kernel("kda_recurrent_kernel", kda_recurrent_kernel, grid, kThreads, smem, s, p);
}

void gdn_recurrent_run(const GdnParams& p, cudaStream_t s) {
  if (p.T == 0) return;
  if (p.dk > kThreads || p.dv > kThreads) fail("gdn: d_k ", p.dk, " / d_v ", p.dv, " unsupported (<= ", kThreads, ")");
  if (p.seqs && (p.T != 1 || p.n_seq < 1 || p.n_seq > 65535))
    fail("gdn: a batched step takes one token (T = ", p.T, ") of 1..65535 sequences (", p.n_seq, ")");
  if (p.T == 1 && (try_step<128>(p, s) || try_step<64>(p, s) || try_step<32>(p, s) || try_step<16>(p, s) ||
                   try_step<8>(p, s)))
    return;
  const size_t smem = static_cast<size_t>(p.dk) * p.dv * sizeof(float);
  const dim3 grid(static_cast<unsigned>(p.nv), static_cast<unsigned>(p.seqs ? p.n_seq : 1));
  launch_kernel("gdn_recurrent_kernel", gdn_recurrent_kernel, grid, kThreads, smem, s, p);
}

}  // namespace memra::cuda
