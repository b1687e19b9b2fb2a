// src/cuda/mla.cu — MLA's per-token preparation (see mla.cuh): a block per (token, head) and one
// per token for the indexer.
#include "cuda/common.cuh"
#include "cuda/launch.cuh"
#include "cuda/mla.cuh"

namespace memra::cuda {

namespace {

constexpr int kThreads = 256;

// Rotates the pair at x[0], x[1] by (cs, sn): f64 products and sums rounded as written (the
// oracle's a*cs - b*sn and b*cs + a*sn, never contracted), once to f32.
__device__ __forceinline__ void rotate_pair(float* x, double cs, double sn) {
  const double a = x[0], b = x[1];
  x[0] = static_cast<float>(__dsub_rn(__dmul_rn(a, cs), __dmul_rn(b, sn)));
  x[1] = static_cast<float>(__dadd_rn(__dmul_rn(b, cs), __dmul_rn(a, sn)));
}

// Grid (T, H + 1): block (t, h < H) rotates query head h's rope part and stores key and value
// head h at the position (the shared rope key rotated by every head block, the same values each
// time); block (t, H) does the indexer's part (nothing on a layer without one). Each block takes
// the angles itself.
__global__ void __launch_bounds__(kThreads) mla_prep_kernel(MlaPrepParams p) {
  __shared__ double cs[kMlaMaxRot / 2], sn[kMlaMaxRot / 2];
  __shared__ float kr[kMlaMaxRot];
  __shared__ float ky[kMlaMaxIndexDim];
  __shared__ double stat[2];  // the indexer key's mean and 1/sqrt(var + eps)
  const int64_t t = blockIdx.x;
  const int h = blockIdx.y, tid = threadIdx.x, half = p.n_rot / 2;
  const bool indexer_block = h == p.H;
  pdl_wait();
  pdl_release();
  if (indexer_block && !p.iq) return;
  // a batched step (p.seqs): token t is sequence t's, at its position, into its caches
  const MlaSeq* sq = p.seqs ? p.seqs + t : nullptr;
  const int64_t pos = sq ? *sq->pos0 : *p.pos0 + t;
  for (int i = tid; i < half; i += kThreads) {
    const double inv_freq = pow(p.theta, -2.0 * i / static_cast<double>(p.n_rot));
    sincos(static_cast<double>(pos) * inv_freq, &sn[i], &cs[i]);
  }
  __syncthreads();
  if (!indexer_block) {
    const int hd = p.dn + p.n_rot, kvw = p.dn + p.dv;
    // the query head's rope part, pair by pair
    float* q = p.q + (t * p.H + h) * hd + p.dn;
    for (int i = tid; i < half; i += kThreads) rotate_pair(q + 2 * i, cs[i], sn[i]);
    // the shared rope key, then this head's expanded key and value rows at pos
    const float* kra = p.kva + t * (p.kv_rank + p.n_rot) + p.kv_rank;
    for (int i = tid; i < p.n_rot; i += kThreads) kr[i] = kra[i];
    __syncthreads();
    for (int i = tid; i < half; i += kThreads) rotate_pair(kr + 2 * i, cs[i], sn[i]);
    __syncthreads();
    const float* kvb = p.kvb + (t * p.H + h) * kvw;
    float* kc = (sq ? sq->k : p.k_cache) + (pos * p.H + h) * hd;
    for (int d = tid; d < hd; d += kThreads) kc[d] = d < p.dn ? kvb[d] : kr[d - p.dn];
    float* vc = (sq ? sq->v : p.v_cache) + (pos * p.H + h) * p.dv;
    for (int d = tid; d < p.dv; d += kThreads) vc[d] = kvb[p.dn + d];
    float* const lat_cache = sq ? sq->lat : p.lat_cache;
    if (h == 0 && lat_cache) {  // the latent row, once per token
      float* lc = lat_cache + pos * (p.kv_rank + p.n_rot);
      for (int d = tid; d < p.kv_rank + p.n_rot; d += kThreads)
        lc[d] = d < p.kv_rank ? p.lat[t * p.kv_rank + d] : kr[d - p.kv_rank];
    }
    return;
  }
  // the indexer: queries' first n_rot dims, the head weights, the key's LayerNorm and rotation
  float* iq = p.iq + t * p.ni * p.hi;
  for (int j = tid; j < p.ni * half; j += kThreads) {
    const int hh = j / half, i = j % half;
    rotate_pair(iq + hh * p.hi + 2 * i, cs[i], sn[i]);
  }
  for (int hh = tid; hh < p.ni; hh += kThreads) p.iw[t * p.ni + hh] = __fmul_rn(p.iw[t * p.ni + hh], p.w_scale);
  const float* ik = p.ik + t * p.hi;
  for (int i = tid; i < p.hi; i += kThreads) ky[i] = ik[i];
  __syncthreads();
  if (tid == 0) {  // the oracle's sums, in its order
    double mean = 0;
    for (int i = 0; i < p.hi; ++i) mean = __dadd_rn(mean, static_cast<double>(ky[i]));
    mean = __ddiv_rn(mean, static_cast<double>(p.hi));
    double var = 0;
    for (int i = 0; i < p.hi; ++i) {
      const double d = __dsub_rn(static_cast<double>(ky[i]), mean);
      var = __dadd_rn(var, __dmul_rn(d, d));
    }
    stat[0] = mean;
    stat[1] = __ddiv_rn(1.0, __dsqrt_rn(__dadd_rn(__ddiv_rn(var, static_cast<double>(p.hi)), p.eps)));
  }
  __syncthreads();
  for (int i = tid; i < p.hi; i += kThreads) {
    const double xm = __dsub_rn(static_cast<double>(ky[i]), stat[0]);
    ky[i] = static_cast<float>(__dadd_rn(__dmul_rn(__dmul_rn(xm, stat[1]), static_cast<double>(p.k_norm[i])),
                                         static_cast<double>(p.k_bias[i])));
  }
  __syncthreads();
  for (int i = tid; i < half; i += kThreads) rotate_pair(ky + 2 * i, cs[i], sn[i]);
  __syncthreads();
  float* const index_k = sq ? sq->index_k : p.index_k;
  for (int i = tid; i < p.hi; i += kThreads) index_k[pos * p.hi + i] = ky[i];
  if (p.kpool > 0) {
    const float* ig = p.ig + t * p.hi;
    const float* ape = p.ape + (pos % p.kpool) * p.hi;
    float* const index_gate = sq ? sq->index_gate : p.index_gate;
    for (int i = tid; i < p.hi; i += kThreads) index_gate[pos * p.hi + i] = __fadd_rn(ig[i], ape[i]);
  }
}

// A block per token; thread c < hi: channel c of the pool the token closes (if it closes one).
__global__ void __launch_bounds__(kThreads) mla_kpool_kernel(MlaKpoolParams p) {
  pdl_wait();
  pdl_release();
  // a batched step (p.seqs): token blockIdx.x is that sequence's, at its position, its caches
  const MlaSeq* sq = p.seqs ? p.seqs + blockIdx.x : nullptr;
  const int64_t pos = sq ? *sq->pos0 : *p.pos0 + blockIdx.x;
  const float* const index_k = sq ? sq->index_k : p.index_k;
  const float* const index_gate = sq ? sq->index_gate : p.index_gate;
  float* const rows = sq ? sq->pool_rows : p.rows;
  const int c = threadIdx.x;
  if ((pos + 1) % p.kpool != 0 || c >= p.hi) return;
  const int64_t j = (pos + 1) / p.kpool - 1, first = j * p.kpool;
  double mx = -INFINITY;
  for (int s = 0; s < p.kpool; ++s) mx = fmax(mx, static_cast<double>(index_gate[(first + s) * p.hi + c]));
  double den = 0, num = 0;
  for (int s = 0; s < p.kpool; ++s) {
    const double e = exp(__dsub_rn(static_cast<double>(index_gate[(first + s) * p.hi + c]), mx));
    den = __dadd_rn(den, e);
    num = __dadd_rn(num, __dmul_rn(e, static_cast<double>(index_k[(first + s) * p.hi + c])));
  }
  rows[j * p.hi + c] = static_cast<float>(__ddiv_rn(num, den));
}

// Grid (H, T): the head's nope query in shared memory, thread j the latent column j.
__global__ void __launch_bounds__(kThreads) mla_absorb_q_kernel(MlaAbsorbParams p) {
  extern __shared__ float qn[];  // [dn]
  pdl_wait();
  pdl_release();
  const int h = blockIdx.x;
  const int64_t t = blockIdx.y;
  const int hd = p.dn + p.n_rot, lw = p.kv_rank + p.n_rot;
  const float* q = p.q + (t * p.H + h) * hd;
  for (int i = threadIdx.x; i < p.dn; i += kThreads) qn[i] = q[i];
  __syncthreads();
  const float s = p.wkv_b.slab_scale[0];
  const int hw = (h + p.head_shift) % p.H;  // h, but for a canary's defect
  const uint8_t* w0 = p.wkv_b.data + static_cast<int64_t>(hw) * (p.dn + p.dv) * p.wkv_b.row_bytes;
  float* ql = p.ql + (t * p.H + h) * lw;
  for (int j = threadIdx.x; j < p.kv_rank; j += kThreads) {
    float acc = 0.0f;
    for (int i = 0; i < p.dn; ++i) acc = fmaf(qn[i], dmat_elem(p.wkv_b, w0 + i * p.wkv_b.row_bytes, j), acc);
    ql[j] = __fmul_rn(acc, s);
  }
  for (int j = threadIdx.x; j < p.n_rot; j += kThreads) ql[p.kv_rank + j] = q[p.dn + j];
}

// Grid (H, T): the head's latent output in shared memory, warp w the outputs d = w mod 8.
__global__ void __launch_bounds__(kThreads) mla_absorb_o_kernel(MlaAbsorbParams p) {
  extern __shared__ float ol[];  // [kv_rank]
  pdl_wait();
  pdl_release();
  const int h = blockIdx.x;
  const int64_t t = blockIdx.y;
  const float* src = p.ol + (t * p.H + h) * p.kv_rank;
  for (int j = threadIdx.x; j < p.kv_rank; j += kThreads) ol[j] = src[j];
  __syncthreads();
  const float s = p.wkv_b.slab_scale[0];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int64_t row0 = static_cast<int64_t>(h) * (p.dn + p.dv) + p.dn;
  for (int d = warp; d < p.dv; d += kThreads / 32) {
    const uint8_t* w = p.wkv_b.data + (row0 + d) * p.wkv_b.row_bytes;
    float acc = 0.0f;
    for (int j = lane; j < p.kv_rank; j += 32) acc = fmaf(dmat_elem(p.wkv_b, w, j), ol[j], acc);
    for (int m = 16; m > 0; m /= 2) acc = __fadd_rn(acc, __shfl_xor_sync(0xffffffffu, acc, m));
    if (lane == 0) p.o[(t * p.H + h) * p.dv + d] = __fmul_rn(acc, s);
  }
}

void check_absorb(const MlaAbsorbParams& p, const char* what) {
  if (p.H < 1 || p.H > 65535 || p.T > 65535)
    fail(what, ": ", p.T, " tokens of ", p.H, " heads exceed the grid (65535 each)");
  if (p.kv_rank < 1 || p.kv_rank > kMlaMaxLatent || p.dn < 1 || p.dn > kMlaMaxLatent || p.dv < 1 || p.n_rot < 0)
    fail(what, ": kv_rank ", p.kv_rank, ", dn ", p.dn, " (1..", kMlaMaxLatent, "), dv ", p.dv, ", n_rot ", p.n_rot);
  if (p.wkv_b.rows != static_cast<int64_t>(p.H) * (p.dn + p.dv) || p.wkv_b.cols != p.kv_rank)
    fail(what, ": wkv_b is [", p.wkv_b.rows, ", ", p.wkv_b.cols, "], the heads need [", int64_t{p.H} * (p.dn + p.dv),
         ", ", p.kv_rank, "]");
}

}  // namespace

void mla_absorb_q_run(const MlaAbsorbParams& p, cudaStream_t s) {
  if (p.T == 0) return;
  check_absorb(p, "mla absorb q");
  launch_kernel("mla_absorb_q_kernel", mla_absorb_q_kernel,
                dim3(static_cast<unsigned>(p.H), static_cast<unsigned>(p.T)), kThreads,
                sizeof(float) * static_cast<size_t>(p.dn), s, p);
}

void mla_absorb_o_run(const MlaAbsorbParams& p, cudaStream_t s) {
  if (p.T == 0) return;
  check_absorb(p, "mla absorb o");
  launch_kernel("mla_absorb_o_kernel", mla_absorb_o_kernel,
                dim3(static_cast<unsigned>(p.H), static_cast<unsigned>(p.T)), kThreads,
                sizeof(float) * static_cast<size_t>(p.kv_rank), s, p);
}

void mla_kpool_run(const MlaKpoolParams& p, cudaStream_t s) {
  if (p.T == 0) return;
  if (p.kpool < 1 || p.hi < 1 || p.hi > kThreads) fail("mla kpool: pools of ", p.kpool, ", keys of ", p.hi);
  if (p.T > 2147483647) fail("mla kpool: ", p.T, " tokens exceed the grid");
  launch_kernel("mla_kpool_kernel", mla_kpool_kernel, static_cast<unsigned>(p.T), kThreads, 0, s, p);
}

void mla_prep_run(const MlaPrepParams& p, cudaStream_t s) {
  if (p.T == 0) return;
  if (p.n_rot < 0 || p.n_rot % 2 || p.n_rot > kMlaMaxRot)
    fail("mla prep: n_rot ", p.n_rot, " unsupported (even, 0..", kMlaMaxRot, ")");
  if (p.iq && (p.hi < p.n_rot || p.hi > kMlaMaxIndexDim))
    fail("mla prep: indexer head_dim ", p.hi, " unsupported (n_rot ", p.n_rot, "..", kMlaMaxIndexDim, ")");
  if (p.T > 2147483647 || p.H < 1 || p.H > 65534) fail("mla prep: ", p.T, " tokens of ", p.H, " heads exceed the grid");
  launch_kernel("mla_prep_kernel", mla_prep_kernel, dim3(static_cast<unsigned>(p.T), static_cast<unsigned>(p.H + 1)),
                kThreads, 0, s, p);
}

}  // namespace memra::cuda
