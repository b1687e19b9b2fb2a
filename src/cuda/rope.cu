// src/cuda/rope.cu — q/k norm + partial NEOX RoPE + K/V store (see rope.cuh).
// qk_prep_kernel, grid (T, ceil((H + 2*KV) / kHeadsPerBlock)): head hb < H is a query, [H, H+KV)
// a key, [H+KV, H+2KV) a value (copy); a block takes kHeadsPerBlock consecutive heads of one
// token. A head's norm and rotation is norm_rope_head (rope.cuh), shared with the one-launch
// decode attention (attention.cu), which prepares its own token, so prefill (this kernel) and
// decode rotate a head identically. The f64 angles and the multipliers are taken before the
// dependency wait; the rotation's products and difference are rounded as written, as the oracle
// rounds each (never contracted by the compiler).
//
// Why several heads per block: the angles depend on the position only, and a block per (token,
// head) took them (a double pow and sincos per dim) once per head, in 256-thread blocks of which
// half had no dim at head_dim 128: 42 us per Qwen3-0.6B layer over 512 tokens (H200), about a
// tenth of its prefill. A block of head_dim threads loads its heads' values together, then
// normalises and rotates them one after the other with the same angles.
#include "cuda/common.cuh"
#include "cuda/rope.cuh"
#include "cuda/launch.cuh"

namespace memra::cuda {

namespace {

constexpr int kHeadsPerBlock = 4;

// --- kernels

template <int kBlock>
__global__ void __launch_bounds__(kBlock) qk_prep_kernel(QkPrepParams p) {
  __shared__ float h[kQkMaxHd];
  __shared__ float part[kQkMaxHd / 32];
  const int64_t t = blockIdx.x;
  const int hb0 = static_cast<int>(blockIdx.y) * kHeadsPerBlock;
  const int hd = p.hd, kvd = p.KV * hd, n_heads = p.H + 2 * p.KV;
  // The position, the rotation's angles and the multipliers before the wait. pos0 is written
  // only by a forward pass's last kernel (or a host copy in stream order), at least three
  // launches before this one (embed, norm, mat-vec); a kernel starts only once its predecessor
  // has passed its own wait, i.e. once the launch before that has completed. Read from L2.
  const int64_t pos = __ldcg(p.pos0) + t;
  RopeAngles<kBlock> ang{};
  HeadValues<kBlock> wq{}, wk{};  // the norms' multipliers: weights
  if (hb0 < p.H + p.KV) {
    ang = rope_angles<kBlock>(pos, p.n_rot, p.theta);
    if (hb0 < p.H) wq = head_values<kBlock>(p.q_norm, hd);
    if (hb0 + kHeadsPerBlock > p.H) wk = head_values<kBlock>(p.k_norm, hd);
  }
  pdl_wait();
  pdl_release();
  // the block's heads: source rows (q in place), all loads in flight before the first norm
  auto src_of = [&](int hb) -> const float* {
    if (hb < p.H) return p.q + t * p.H * hd + hb * hd;
    if (hb < p.H + p.KV) return p.k + t * kvd + (hb - p.H) * hd;
    return p.v + t * kvd + (hb - p.H - p.KV) * hd;
  };
  HeadValues<kBlock> x[kHeadsPerBlock];
#pragma unroll
  for (int j = 0; j < kHeadsPerBlock; ++j)
    x[j] = hb0 + j < n_heads ? head_values<kBlock>(src_of(hb0 + j), hd) : HeadValues<kBlock>{};
#pragma unroll
  for (int j = 0; j < kHeadsPerBlock; ++j) {
    const int hb = hb0 + j;
    if (hb >= n_heads) break;  // block-uniform
    if (hb >= p.H + p.KV) {    // V: straight copy into the cache
      float* dst = p.v_cache + pos * kvd + (hb - p.H - p.KV) * hd;
#pragma unroll
      for (int c = 0; c < HeadValues<kBlock>::kPerThread; ++c) {
        const int d = static_cast<int>(threadIdx.x) + c * kBlock;
        if (d < hd) dst[d] = x[j].x[c];
      }
      continue;
    }
    const bool is_q = hb < p.H;
    float* dst = is_q ? p.q + t * p.H * hd + hb * hd : p.k_cache + pos * kvd + (hb - p.H) * hd;
    norm_rope_head<kBlock>(x[j], is_q ? wq : wk, dst, hd, p.n_rot, p.eps, ang, h, part);
  }
}

}  // namespace

// --- launchers / dispatch

void qk_prep_run(const QkPrepParams& p, cudaStream_t s) {
  if (p.T == 0) return;
  if (p.hd > kQkMaxHd || p.n_rot > p.hd || p.n_rot % 2)
    fail("qk_prep: head_dim ", p.hd, " / n_rot ", p.n_rot, " unsupported (head_dim <= ", kQkMaxHd, ")");
  const dim3 grid(static_cast<unsigned>(p.T), static_cast<unsigned>(ceil_div(p.H + 2 * p.KV, kHeadsPerBlock)));
  if (p.hd <= 128)
    launch_kernel("qk_prep_kernel", qk_prep_kernel<128>, grid, 128, 0, s, p);
  else
    launch_kernel("qk_prep_kernel", qk_prep_kernel<kQkMaxHd>, grid, kQkMaxHd, 0, s, p);
}

}  // namespace memra::cuda
