// src/cuda/rope.cu — q/k norm + partial NEOX RoPE + K/V store (see rope.cuh).
// qk_prep_kernel, grid (T, H + 2*KV): blocks [0, H) queries, [H, H+KV) keys, [H+KV, H+2KV)
// values (copy). A head's norm and rotation is norm_rope_head (rope.cuh), shared with the
// one-launch decode attention (attention.cu), which prepares its own token, so prefill (this
// kernel) and decode rotate a head identically. The f64 angles and the multiplier are taken
// before the dependency wait; the rotation's products and difference are rounded as written, as
// the oracle rounds each (never contracted by the compiler).
#include "cuda/common.cuh"
#include "cuda/rope.cuh"
#include "cuda/launch.cuh"

namespace memra::cuda {

namespace {

constexpr int kThreads = kQkMaxHd;  // >= head_dim (checked)

// --- kernels

__global__ void __launch_bounds__(kThreads) qk_prep_kernel(QkPrepParams p) {
  __shared__ float h[kQkMaxHd];
  __shared__ float part[kQkMaxHd / 32];
  const int64_t t = blockIdx.x;
  const int hb = blockIdx.y, tid = threadIdx.x;
  const int hd = p.hd, kvd = p.KV * hd;
  // The position, the rotation's angles and the multiplier before the wait. pos0 is written
  // only by a forward pass's last kernel (or a host copy in stream order), at least three
  // launches before this one (embed, norm, mat-vec); a kernel starts only once its predecessor
  // has passed its own wait, i.e. once the launch before that has completed. Read from L2.
  const int64_t pos = __ldcg(p.pos0) + t;
  const bool is_v = hb >= p.H + p.KV, is_q = hb < p.H;
  RopeAngles<kThreads> ang{};
  HeadValues<kThreads> w{};  // the norm's multiplier: a weight
  if (!is_v) {
    ang = rope_angles<kThreads>(pos, p.n_rot, p.theta);
    w = head_values<kThreads>(is_q ? p.q_norm : p.k_norm, hd);
  }
  pdl_wait();
  pdl_release();
  if (is_v) {  // V: straight copy into the cache
    const int kvh = hb - p.H - p.KV;
    if (tid < hd) p.v_cache[pos * kvd + kvh * hd + tid] = p.v[t * kvd + kvh * hd + tid];
    return;
  }
  const float* src = is_q ? p.q + t * p.H * hd + hb * hd : p.k + t * kvd + (hb - p.H) * hd;
  float* dst = is_q ? p.q + t * p.H * hd + hb * hd : p.k_cache + pos * kvd + (hb - p.H) * hd;
  norm_rope_head<kThreads>(head_values<kThreads>(src, hd), w, dst, hd, p.n_rot, p.eps, ang, h, part);
}

}  // namespace

// --- launchers / dispatch

void qk_prep_run(const QkPrepParams& p, cudaStream_t s) {
  if (p.T == 0) return;
  if (p.hd > kThreads || p.n_rot > p.hd || p.n_rot % 2) fail("qk_prep: head_dim ", p.hd, " / n_rot ", p.n_rot, " unsupported (head_dim <= 256)");
  const dim3 grid(static_cast<unsigned>(p.T), static_cast<unsigned>(p.H + 2 * p.KV));
  launch_kernel("qk_prep_kernel", qk_prep_kernel, grid, kThreads, 0, s, p);
}

}  // namespace memra::cuda
