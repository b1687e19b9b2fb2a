// src/cuda/model.cu — the GPU model walk (memra/model.h): weights upload, the cache, and the
// decoder loop that chains the kernel families. Read bottom-up: entry points at the end.
//
// Block (all families, pre-norm):  x += mixer(norm1(x));  x += ffn(norm2(x)).
//   attention: q,k,v(,gate) = W h; q/k norm + RoPE + K/V store; split-KV attention (+gate);
//              x += Wo o                               (rope.cu, attention.cu, mmvq.cu)
//   GDN:       qkv,z,b,a = W h; conv + SiLU; recurrence; gated norm; x += Wout o   (gdn.cu)
//   FFN:       x += Wdown (silu(Wgate h) * Wup h)
//   MoE:       router → route on device → expert mat-vecs indexed by the device-side ids →
//              x += Σ w_j y_j + sigmoid(sg.h) shared(h)                  (moe.cu)
// The residual adds are fused into the producing mat-vec (add_to_y) or the MoE combine, with
// the same two roundings as a separate add.
#include <cuda_runtime.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <initializer_list>
#include <optional>

#include "cuda/argmax.cuh"
#include "cuda/attention.cuh"
#include "cuda/common.cuh"
#include "cuda/embed.cuh"
#include "cuda/gdn.cuh"
#include "cuda/gemm.cuh"
#include "cuda/launch.cuh"
#include "cuda/mmvq.cuh"
#include "cuda/moe.cuh"
#include "cuda/norm.cuh"
#include "cuda/planar.cuh"
#include "cuda/quantize.cuh"
#include "cuda/rope.cuh"
#include "memra/error.h"
#include "memra/model.h"

namespace memra {

using cuda::DMat;
using cuda::Q81;

namespace {

cudaStream_t stream_of(const Engine& e) { return reinterpret_cast<cudaStream_t>(e.stream()); }

struct DevMatrix {
  DeviceBuffer<uint8_t> bytes;
  DeviceBuffer<float> scale;
  DMat m;
  int64_t n_slab = 1;
  bool empty() const { return m.rows == 0; }
  int64_t total_bytes() const { return m.rows * m.row_bytes; }
};

DevMatrix make_matrix(Engine& e, DType type, int64_t rows, int64_t cols, int64_t n_slab, const std::string& what) {
  DevMatrix d;
  if (rows == 0) return d;
  const bool is_float = type == DType::F32 || type == DType::F16 || type == DType::BF16;
  if (is_float && cols % 8 != 0)
    fail(what, ": row length ", cols, " of a ", dtype_name(type), " matrix is not a multiple of 8 (GPU mat-vec unit)");
  if (!is_float && type != DType::Q8_0 && type != DType::NVFP4)
    fail(what, ": type ", dtype_name(type), " has no GPU mat-vec");
  // planar rows (cuda/planar.cuh); +16: slack past the last row for whole-word loads
  const int64_t rb = cuda::planar_row_stride(type, cols);
  d.bytes = DeviceBuffer<uint8_t>(e, static_cast<size_t>(rb * rows + 16));
  d.scale = DeviceBuffer<float>(e, static_cast<size_t>(n_slab));
  d.n_slab = n_slab;
  d.m.type = type;
  d.m.rows = rows;
  d.m.cols = cols;
  d.m.row_bytes = rb;
  d.m.slab_rows = rows / n_slab;
  d.m.data = d.bytes.data();
  d.m.slab_scale = d.scale.data();
  return d;
}

DevMatrix upload(Engine& e, const RawMatrix& r, const std::string& what) {
  DevMatrix d = make_matrix(e, r.type, r.rows, r.cols, r.n_slab, what);
  if (r.rows == 0) return d;
  if (cuda::is_planar(r.type)) {  // GGUF blocks in, planar rows on the device
    DeviceBuffer<uint8_t> blocks(e, r.data.size());
    copy_to_device(blocks.data(), r.data.data(), r.data.size(), e.stream());
    cuda::to_planar(r.type, blocks.data(), d.bytes.data(), r.rows, r.cols, d.m.row_bytes, stream_of(e));
    e.synchronize();  // `blocks` is freed next
  } else {
    copy_to_device(d.bytes.data(), r.data.data(), r.data.size(), e.stream());
  }
  d.scale.upload(r.slab_scale);
  return d;
}

DeviceBuffer<float> upload_vec(Engine& e, const std::vector<float>& v) {
  DeviceBuffer<float> b(e, v.size());
  b.upload(v);
  return b;
}

// --- synthetic weights (benchmarks): valid random blocks written on the device

__device__ __forceinline__ uint32_t mix32(uint64_t x) {
  x ^= x >> 33; x *= 0xff51afd7ed558ccdull; x ^= x >> 33; x *= 0xc4ceb9fe1a85ec53ull; x ^= x >> 33;
  return static_cast<uint32_t>(x);
}

__global__ void synth_kernel(uint8_t* data, int64_t n_units, int type, uint64_t seed) {
  cuda::pdl_wait();
  cuda::pdl_release();
  for (int64_t u = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; u < n_units;
       u += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const uint32_t h = mix32(seed * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(u));
    if (type == static_cast<int>(DType::Q8_0)) {  // unit = block of 34 B
      uint8_t* b = data + u * 34;
      const uint16_t d = __half_as_ushort(__float2half_rn(0.0005f * static_cast<float>(1 + (h & 3))));
      b[0] = d & 0xff; b[1] = d >> 8;
      for (int j = 0; j < 32; ++j) b[2 + j] = static_cast<uint8_t>(static_cast<int8_t>((mix32(h + j) % 255) - 127));
    } else if (type == static_cast<int>(DType::NVFP4)) {  // unit = block of 36 B
      uint8_t* b = data + u * 36;
      for (int s = 0; s < 4; ++s) b[s] = static_cast<uint8_t>(0x18 + ((h >> (4 * s)) & 7));  // ~2^-4 scales
      for (int j = 0; j < 32; ++j) b[4 + j] = static_cast<uint8_t>(mix32(h + j));
    } else if (type == static_cast<int>(DType::BF16) || type == static_cast<int>(DType::F16)) {  // unit = 2 B
      const float v = (static_cast<float>(h % 2001) - 1000.0f) * 2e-5f;
      const uint16_t bits = type == static_cast<int>(DType::BF16) ? static_cast<uint16_t>(__float_as_uint(v) >> 16)
                                                                  : __half_as_ushort(__float2half_rn(v));
      data[2 * u] = bits & 0xff; data[2 * u + 1] = bits >> 8;
    } else {  // F32
      reinterpret_cast<float*>(data)[u] = (static_cast<float>(h % 2001) - 1000.0f) * 2e-5f;
    }
  }
}

DevMatrix synth_matrix(Engine& e, DType type, int64_t rows, int64_t cols, int64_t n_slab, uint64_t seed,
                       const std::string& what) {
  // Row lengths a type cannot block fall back to BF16, as quantizers keep such tensors wider.
  const int64_t bs = type_traits(type).block_elems;
  if (cols % bs != 0) type = DType::BF16;
  DevMatrix d = make_matrix(e, type, rows, cols, n_slab, what);
  const int64_t units = type == DType::Q8_0 ? rows * cols / 32 : type == DType::NVFP4 ? rows * cols / 64
                                                                   : type == DType::F32 ? rows * cols : rows * cols;
  if (cuda::is_planar(type)) {  // GGUF blocks written, then made planar as an upload would
    DeviceBuffer<uint8_t> blocks(e, static_cast<size_t>(row_bytes(type, cols) * rows));
    cuda::launch_kernel("synth_kernel", synth_kernel, 1024, 256, 0, stream_of(e), blocks.data(), units, static_cast<int>(type), seed);
    cuda::to_planar(type, blocks.data(), d.bytes.data(), rows, cols, d.m.row_bytes, stream_of(e));
    e.synchronize();
  } else {
    cuda::launch_kernel("synth_kernel", synth_kernel, 1024, 256, 0, stream_of(e), d.bytes.data(), units, static_cast<int>(type), seed);
  }
  std::vector<float> ones(static_cast<size_t>(n_slab), 1.0f);
  d.scale.upload(ones);
  return d;
}

// The cache's position lives on the device too (kernels read it), advanced at the end of every
// step inside the same stream order — so a captured decode graph needs no parameter update.
__global__ void advance_pos_kernel(int64_t* pos, int64_t T) {
  cuda::pdl_wait();
  cuda::pdl_release();
  *pos += T;
}

struct DevLayer {
  LayerKind kind = LayerKind::Attention;
  DeviceBuffer<float> attn_norm, ffn_norm;
  DevMatrix wq, wgate, wk, wv, wo;
  DeviceBuffer<float> q_norm, k_norm;
  DevMatrix wqkv, wz, wb, wa, wout;
  DeviceBuffer<float> conv, ssm_a, dt_bias, gnorm;
  DevMatrix gate, up, down;                      // dense FFN
  DevMatrix router, egate, eup, edown;           // MoE experts (slabs)
  DevMatrix sgate, sup, sdown, shared_gate;      // shared expert; shared_gate [1, D] F32
  bool moe = false;
};

}  // namespace

// --- the cache ---------------------------------------------------------------------------------

struct Cache::Impl {
  const Model::Impl* owner = nullptr;
  cudaStream_t s = nullptr;
  int64_t max_ctx = 0, pos = 0;                        // pos: host mirror of pos_dev
  DeviceBuffer<int64_t> pos_dev;                       // [1]
  DeviceBuffer<int32_t> greedy_hist;                   // [max_ctx]: a greedy step's token at the position it followed
  std::vector<DeviceBuffer<float>> k, v, conv, state;  // [n_layer], empty for the other kind
  // The captured decode step of this cache (decode_graph arm): valid while the model's scratch
  // buffers keep the generation it was captured with.
  cudaGraphExec_t exec = nullptr;
  uint64_t exec_gen = 0;
  bool exec_greedy = false;
  bool graph_latched_off = false;  // graph_recapture off + an invalidation: eager from then on
  // A lean sampled step's logits of this sequence (decode_step_batch_sampled), valid while
  // has_last_logits: any later step of the cache clears it.
  DeviceBuffer<float> last_logits;
  bool has_last_logits = false;
  void reset() {
    has_last_logits = false;
    pos = 0;
    pos_dev.fill_bytes(0);
    for (auto& b : conv) b.fill_bytes(0);
    for (auto& b : state) b.fill_bytes(0);
  }
  ~Impl() {
    if (exec) cudaGraphExecDestroy(exec);
  }
};

Cache::Cache() = default;
Cache::Cache(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Cache::Cache(Cache&&) noexcept = default;
Cache& Cache::operator=(Cache&&) noexcept = default;
Cache::~Cache() = default;
int64_t Cache::max_ctx() const { return impl_ ? impl_->max_ctx : 0; }
int64_t Cache::pos() const { return impl_ ? impl_->pos : 0; }
std::vector<float> Cache::last_logits() const {
  if (!impl_ || !impl_->has_last_logits) return {};
  return impl_->last_logits.download();
}
void Cache::reset() {
  if (!impl_) fail("Cache::reset: empty cache (not made by Model::new_cache)");
  impl_->reset();
}

// --- the model ---------------------------------------------------------------------------------

struct Model::Impl {
  Engine* e = nullptr;
  cudaStream_t s = nullptr;
  ModelConfig c;
  Arms arms;
  DevMatrix embed, output;
  DeviceBuffer<float> output_norm;
  bool tiled = false;
  std::vector<DevLayer> layers;

  // scratch, sized for cap_T tokens
  int64_t cap_T = 0, cap_work = 0;
  uint64_t scratch_gen = 1;  // bumped whenever a scratch buffer moves (captured graphs go stale)
  Counters counters;
  DeviceBuffer<float> x, h, q, k, v, gate, o, qkv, qkvc, z, b, a, fg, fu, ye, ysh, rl, sg, wts, logits, hn, work;
  DeviceBuffer<Q81> hq, oq, fq, hnq;
  DeviceBuffer<uint32_t> attn_arrivals;  // [n_head], the decode attention's per-head arrival counters
  // prefill_act = w4a4: on for the current call when it has more than one token (run()); the
  // NVFP4 mat-muls then read W4A4 activations from x4, quantized per call from the f32 rows
  bool w4a4_on = false;
  DeviceBuffer<cuda::A4> x4;
  DeviceBuffer<int32_t> ids, tok, amax;
  // The one token tok[0] holds when the host knows it (a one-token copy, or a greedy step's
  // token once read back), else -1: a decode call whose token is already there copies nothing.
  int64_t tok_dev = -1;
  DeviceBuffer<cuda::RowBest> row_best;  // the greedy lm_head's per-warp bests (matvec_run_best)
  DeviceBuffer<float> logits_batch;      // [B, n_vocab]: a batched decode step's logits
  DeviceBuffer<cuda::RowSelect> row_jobs;  // [B]: its token selections and position advances
  DeviceBuffer<int32_t> row_tokens;        // [B]: the selected tokens
  std::vector<cuda::RowSelect> jobs_host;  // the jobs' host copy (alive until the upload ran)
  // routed expert GEMMs: vectors grouped by expert, and the groups' tiles (cuda/moe.cuh)
  DeviceBuffer<int32_t> group_order, group_start, tile_slab, tile_start, n_tiles;
  std::vector<int32_t> tok_host;

  const DMat& lm_head() const { return output.empty() ? embed.m : output.m; }
  int64_t D() const { return c.n_embd; }
  int64_t ffn_width() const { return std::max({c.n_ff, c.n_ff_exp * std::max<int64_t>(c.n_expert_used, 1), c.n_ff_shexp, int64_t{1}}); }
  int64_t k_used() const { return std::max<int64_t>(c.n_expert_used, 1); }

  void ensure_scratch(int64_t T, int64_t ctx) {
    if (T > cap_T) {
      const int64_t D = c.n_embd, qd = c.n_head * c.head_dim, kvd = c.n_head_kv * c.head_dim;
      const int64_t cd = c.ssm_conv_dim(), vd = c.ssm_value_dim(), nv = c.ssm_n_v_heads, K = k_used();
      auto f = [&](int64_t n) { return DeviceBuffer<float>(*e, static_cast<size_t>(std::max<int64_t>(n, 1))); };
      auto qb = [&](int64_t n) { return DeviceBuffer<Q81>(*e, static_cast<size_t>(std::max<int64_t>(n / 32, 1))); };
      const int64_t omax = std::max(qd, vd);
      const int64_t fmax = std::max({T * c.n_ff, T * K * c.n_ff_exp, T * c.n_ff_shexp});
      x = f(T * D); h = f(T * D); q = f(T * qd); k = f(T * kvd); v = f(T * kvd); gate = f(T * qd);
      o = f(T * omax); qkv = f(T * cd); qkvc = f(T * cd); z = f(T * vd); b = f(T * nv); a = f(T * nv);
      fg = f(fmax); fu = f(fmax); ye = f(T * K * D); ysh = f(T * D); rl = f(T * c.n_expert); sg = f(T);
      wts = f(T * K);
      hq = qb(T * D); oq = qb(T * omax); fq = qb(fmax);
      ids = DeviceBuffer<int32_t>(*e, static_cast<size_t>(T * K));
      group_order = DeviceBuffer<int32_t>(*e, static_cast<size_t>(T * K));
      group_start = DeviceBuffer<int32_t>(*e, static_cast<size_t>(c.n_expert + 1));
      const int64_t tiles = cuda::moe_group_tile_bound(T * K, static_cast<int>(c.n_expert), cuda::gemm_routed_tile);
      tile_slab = DeviceBuffer<int32_t>(*e, static_cast<size_t>(tiles));
      tile_start = DeviceBuffer<int32_t>(*e, static_cast<size_t>(tiles));
      n_tiles = DeviceBuffer<int32_t>(*e, 1);
      tok = DeviceBuffer<int32_t>(*e, static_cast<size_t>(T));
      tok_dev = -1;
      cap_T = T;
      ++scratch_gen;
    }
    if (logits.size() == 0) {
      logits = DeviceBuffer<float>(*e, static_cast<size_t>(c.n_vocab));
      hn = DeviceBuffer<float>(*e, static_cast<size_t>(c.n_embd));
      hnq = DeviceBuffer<Q81>(*e, static_cast<size_t>(std::max<int64_t>(c.n_embd / 32, 1)));
      amax = DeviceBuffer<int32_t>(*e, 1);
      // a streamed launch holds at most 2048 resident threads per SM: 64 warps
      row_best = DeviceBuffer<cuda::RowBest>(*e, static_cast<size_t>(std::max(e->props().sm_count, 1) * 64));
      attn_arrivals = DeviceBuffer<uint32_t>(*e, static_cast<size_t>(std::max<int64_t>(c.n_head, 1)));
      attn_arrivals.fill_bytes(0);  // the one-launch decode attention leaves them zero (attention.cuh)
    }
    int64_t need = cuda::attention_workspace_floats(T, ctx, static_cast<int>(c.n_head), static_cast<int>(c.head_dim));
    if (T > 1 && arms.gdn_prefill == GdnPrefill::chunked && c.ssm_n_v_heads > 0)  // the layers take turns with it
      need = std::max(need, cuda::gdn_chunked_workspace_floats(T, static_cast<int>(c.ssm_n_v_heads),
                                                               static_cast<int>(c.ssm_d_k), static_cast<int>(c.ssm_d_v)));
    if (need > cap_work) {
      work = DeviceBuffer<float>(*e, static_cast<size_t>(need));
      cap_work = need;
      ++scratch_gen;
    }
  }

  void check_arms() const {
    if (arms.prefill_act == PrefillAct::w4a4 && arms.prefill_matmul == PrefillMatmul::mma)
      fail("GPU model: arm prefill_act=w4a4 has no tensor-core GEMM (prefill_matmul=mma); the W4A4 contract runs on "
           "the token-tiled mat-vec: set prefill_matmul=mmvq");
  }

  // The W4A4 activations of n_x rows of n values (row a at xf + a * ld) in x4, for the NVFP4
  // mat-muls of this call; nullptr when the W4A4 arm is not on for a matrix of this type and
  // output count (one output vector: the lm_head row, which stays W4A8).
  const cuda::A4* w4a4_acts(DType type, const float* xf, int64_t ld, int64_t n, int64_t n_out, int x_div) {
    if (!w4a4_on || type != DType::NVFP4 || n_out < 2) return nullptr;
    const int64_t n_x = cuda::ceil_div(n_out, x_div);
    if (static_cast<int64_t>(x4.size()) < n_x * (n / 32)) fail("W4A4 activations: ", n_x, " rows of ", n, " exceed the buffer");
    cuda::quantize_rows_fp4act_cuda(xf, ld, n_x, n, x4.data(), s);
    return x4.data();
  }

  int64_t gemm_min_tokens = 32;
  // A batched decode step is running (decode_batch): its mat-muls stay on the mat-vec, whose
  // per-vector chain is the same for any number of output vectors (a GEMM above
  // gemm_min_tokens sequences would change a sequence's bits with B: DESIGN.md law 2).
  bool batch_step = false;
  bool use_gemm(const DMat& w, int64_t n_out, const int32_t* slab) const {
    return arms.prefill_matmul == PrefillMatmul::mma && !batch_step && n_out >= gemm_min_tokens && slab == nullptr &&
           cuda::gemm_supported(w.type, w.cols);
  }
  void gemm(const DMat& w, const float* xf, int64_t ld, const Q81* xq, float* y, int64_t ld_y, int64_t T, bool add) {
    cuda::GemmParams g;
    g.w = w; g.T = T; g.y = y; g.ld_y = ld_y; g.add_to_y = add;
    if (cuda::uses_q8_1(w.type)) g.xq = xq;
    else { g.xf = xf; g.ld_xf = ld; }
    cuda::gemm_run(g, s);
    ++counters.gemm_launches;
  }

  // A mat-vec's operands: q8_1 activations for the types that take them, else f32 rows.
  static cuda::MatvecParams mv_params(const DMat& w, const float* xf, int64_t ld, const Q81* xq, float* y,
                                      int64_t ld_y, int64_t n_out, bool add, int x_div, const int32_t* slab) {
    cuda::MatvecParams p;
    p.w = w;
    if (cuda::uses_q8_1(w.type)) p.xq = xq;
    else { p.xf = xf; p.ld_xf = ld; }
    p.y = y; p.ld_y = ld_y; p.n_out = n_out; p.add_to_y = add; p.x_div = x_div; p.slab_of = slab;
    return p;
  }

  // y[a] (+)= W x[a / x_div]: f32 or q8_1 activations by the weight type.
  void mv(const DMat& w, const float* xf, int64_t ld, const Q81* xq, float* y, int64_t ld_y, int64_t n_out,
          bool add, int x_div = 1, const int32_t* slab = nullptr) {
    if (x_div == 1 && use_gemm(w, n_out, slab)) return gemm(w, xf, ld, xq, y, ld_y, n_out, add);
    cuda::MatvecParams p = mv_params(w, xf, ld, xq, y, ld_y, n_out, add, x_div, slab);
    if ((p.x4 = w4a4_acts(w.type, xf, ld, w.cols, n_out, x_div))) {
      p.xq = nullptr;
      ++counters.w4a4_launches;
    }
    cuda::matvec_run(p, arms.decode_matvec, s);
  }

  // Several mat-vecs over the same activation rows in as few launches as possible: one per
  // weight type (each row is computed exactly as by mv()).
  struct Job {
    const DevMatrix* w;
    float* y;
  };
  void mv_group(std::initializer_list<Job> jobs, const float* xf, int64_t ld, const Q81* xq, int64_t n_out,
                int x_div = 1, const int32_t* slab = nullptr) {
    std::vector<cuda::MatvecParams> ps;
    for (const Job& j : jobs) {
      if (j.w->empty()) continue;
      if (x_div == 1 && use_gemm(j.w->m, n_out, slab)) {
        gemm(j.w->m, xf, ld, xq, j.y, j.w->m.slab_rows, n_out, false);
        continue;
      }
      ps.push_back(mv_params(j.w->m, xf, ld, xq, j.y, j.w->m.slab_rows, n_out, false, x_div, slab));
    }
    // the group's activation rows as W4A4 once, for all its NVFP4 matrices
    const cuda::A4* a4 = nullptr;
    for (const cuda::MatvecParams& p : ps)
      if (!a4) a4 = w4a4_acts(p.w.type, xf, ld, p.w.cols, n_out, x_div);
    std::vector<bool> done(ps.size(), false);
    for (size_t i = 0; i < ps.size(); ++i) {
      if (done[i]) continue;
      cuda::MatvecParams batch[cuda::kMatvecMulti];
      int n = 0;
      for (size_t k = i; k < ps.size() && n < cuda::kMatvecMulti; ++k)
        if (!done[k] && ps[k].w.type == ps[i].w.type) { batch[n++] = ps[k]; done[k] = true; }
      if (a4 && batch[0].w.type == DType::NVFP4) {
        for (int j = 0; j < n; ++j) { batch[j].x4 = a4; batch[j].xq = nullptr; }
        ++counters.w4a4_launches;
      }
      cuda::matvec_run_multi(batch, n, arms.decode_matvec, s);
    }
  }

  void rowop(cuda::RowOp op, const float* x, int64_t ld_x, const float* zz, int64_t ld_z, const float* w,
             float* y, Q81* qq, int64_t rows, int64_t n) {
    cuda::RowOpParams p;
    p.op = op; p.x = x; p.ld_x = ld_x; p.z = zz; p.ld_z = ld_z; p.w = w; p.eps = static_cast<float>(c.rms_eps);
    p.y = y; p.ld_y = n; p.q = n % 32 == 0 ? qq : nullptr; p.rows = rows; p.n = n;
    cuda::rowop_run(p, s);
  }

  // RMSNorm of rows into y (f32) and q (q8_1 when n % 32 == 0): one kernel when the
  // fuse_norm_quant arm is on, a norm then a quantisation otherwise (bit-identical results).
  void norm_quant(const float* x, const float* w, float* y, Q81* qq, int64_t rows, int64_t n) {
    if (arms.fuse_norm_quant) return rowop(cuda::RowOp::RmsNorm, x, n, nullptr, 0, w, y, qq, rows, n);
    rowop(cuda::RowOp::RmsNorm, x, n, nullptr, 0, w, y, nullptr, rows, n);
    if (n % 32 == 0) rowop(cuda::RowOp::Identity, y, n, nullptr, 0, nullptr, nullptr, qq, rows, n);
  }

  // An attention layer over T activation rows: the projections of all rows, the attention of
  // each sequence over its own cache, the output projection of all rows. One sequence's T tokens
  // (a prefill or decode call) is one attention_core over rows [0, T); a batched decode step is
  // one attention_core per sequence, each over its one row.
  void attention_layer(DevLayer& L, Cache::Impl& ci, int64_t li, int64_t T, int64_t ctx_bound) {
    attention_project(L, T);
    attention_core(L, ci, li, T, ctx_bound, 0);
    attention_output(L, T);
  }
  void attention_project(DevLayer& L, int64_t T) {
    mv_group({{&L.wq, q.data()}, {&L.wk, k.data()}, {&L.wv, v.data()}, {&L.wgate, gate.data()}}, h.data(), c.n_embd,
             hq.data(), T);
  }
  // wo's q8_1 input comes from the attention combine itself when its blocks lie inside a head
  bool attn_q_in_combine(const DevLayer& L) const { return cuda::uses_q8_1(L.wo.m.type) && c.head_dim % 32 == 0; }
  // Rows [r0, r0 + T) of q / k / v / gate: T tokens of the sequence of cache ci.
  void attention_core(DevLayer& L, Cache::Impl& ci, int64_t li, int64_t T, int64_t ctx_bound, int64_t r0) {
    const int64_t qd = c.n_head * c.head_dim, kvd = c.n_head_kv * c.head_dim;
    cuda::QkPrepParams qp;
    qp.q = q.data() + r0 * qd; qp.k = k.data() + r0 * kvd; qp.v = v.data() + r0 * kvd;
    qp.q_norm = L.q_norm.data(); qp.k_norm = L.k_norm.data();
    qp.k_cache = ci.k[li].data(); qp.v_cache = ci.v[li].data(); qp.T = T; qp.pos0 = ci.pos_dev.data();
    qp.H = static_cast<int>(c.n_head); qp.KV = static_cast<int>(c.n_head_kv); qp.hd = static_cast<int>(c.head_dim);
    qp.n_rot = static_cast<int>(c.n_rot); qp.eps = static_cast<float>(c.rms_eps); qp.theta = c.rope_theta;
    // a decode token: its q / k preparation, K / V store and the combine inside one attention
    // launch (attention.cuh; the same bits as these three launches)
    const bool one_launch = T == 1;
    if (!one_launch) cuda::qk_prep_run(qp, s);
    cuda::AttnParams ap;
    ap.q = qp.q; ap.k_cache = ci.k[li].data(); ap.v_cache = ci.v[li].data();
    ap.gate = L.wgate.empty() ? nullptr : gate.data() + r0 * qd; ap.out = o.data() + r0 * qd; ap.work = work.data();
    ap.T = T; ap.pos0 = ci.pos_dev.data(); ap.ctx_bound = ctx_bound; ap.H = qp.H; ap.KV = qp.KV; ap.hd = qp.hd;
    ap.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(c.head_dim)));
    ap.out_q = attn_q_in_combine(L) ? oq.data() + r0 * qd / 32 : nullptr;
    if (one_launch) {
      ap.prep = qp;
      ap.arrivals = attn_arrivals.data();
    }
    cuda::attention_run(ap, s);
  }
  void attention_output(DevLayer& L, int64_t T) {
    const int64_t qd = c.n_head * c.head_dim;
    if (cuda::uses_q8_1(L.wo.m.type) && !attn_q_in_combine(L))
      rowop(cuda::RowOp::Identity, o.data(), qd, nullptr, 0, nullptr, nullptr, oq.data(), T, qd);
    mv(L.wo.m, o.data(), qd, oq.data(), x.data(), c.n_embd, T, true);
  }

  // A Gated-DeltaNet layer, in the same three parts as attention_layer.
  void gdn_layer(DevLayer& L, Cache::Impl& ci, int64_t li, int64_t T) {
    gdn_project(L, T);
    gdn_core(L, ci, li, T, 0);
    gdn_output(L, T);
  }
  void gdn_project(DevLayer& L, int64_t T) {
    mv_group({{&L.wqkv, qkv.data()}, {&L.wz, z.data()}, {&L.wb, b.data()}, {&L.wa, a.data()}}, h.data(), c.n_embd,
             hq.data(), T);
  }
  // gated norm per value head (rows T*nv of d_v), in place. With d_v % 32 == 0 the q8_1 blocks
  // lie inside a head, so the norm quantises wout's input itself ([T*nv, d_v/32] is [T, vd/32]):
  // the same values, one launch fewer than a separate Identity pass.
  bool gdn_q_in_norm(const DevLayer& L) const { return cuda::uses_q8_1(L.wout.m.type) && c.ssm_d_v % 32 == 0; }
  // Rows [r0, r0 + T) of the projections: T tokens of the sequence of cache ci.
  void gdn_core(DevLayer& L, Cache::Impl& ci, int64_t li, int64_t T, int64_t r0) {
    const int64_t cd = c.ssm_conv_dim(), vd = c.ssm_value_dim(), nv = c.ssm_n_v_heads;
    cuda::GdnConvParams cp;
    cp.x = qkv.data() + r0 * cd; cp.taps = L.conv.data(); cp.state = ci.conv[li].data(); cp.pos0 = ci.pos_dev.data();
    cp.y = qkvc.data() + r0 * cd; cp.T = T; cp.cd = cd; cp.K = static_cast<int>(c.ssm_conv_kernel);
    cuda::GdnParams gp;
    gp.qkv = cp.y; gp.b = b.data() + r0 * nv; gp.a = a.data() + r0 * nv; gp.ssm_a = L.ssm_a.data();
    gp.dt_bias = L.dt_bias.data(); gp.state = ci.state[li].data(); gp.o = o.data() + r0 * vd; gp.T = T;
    gp.nk = static_cast<int>(c.ssm_n_k_heads); gp.nv = static_cast<int>(nv);
    gp.dk = static_cast<int>(c.ssm_d_k); gp.dv = static_cast<int>(c.ssm_d_v); gp.tiled = tiled;
    Q81* const oq_rows = gdn_q_in_norm(L) ? oq.data() + r0 * vd / 32 : nullptr;
    // a decode token: the conv, the recurrence and the gated norm in one launch where the head
    // shape has that kernel (bitwise the same as the three launches below)
    const cuda::GdnOutNorm gn{z.data() + r0 * vd, L.gnorm.data(), static_cast<float>(c.rms_eps), gp.o, oq_rows};
    if (!cuda::gdn_step_norm_run(gp, gn, s, &cp)) {
      cuda::gdn_conv_run(cp, s);
      if (T > 1 && arms.gdn_prefill == GdnPrefill::chunked) {
        cuda::gdn_chunked_run(gp, work.data(), cap_work, s);
        ++counters.gdn_chunked_launches;
      } else {
        cuda::gdn_recurrent_run(gp, s);
      }
      rowop(cuda::RowOp::RmsNormGated, gp.o, c.ssm_d_v, gn.z, c.ssm_d_v, L.gnorm.data(), gp.o, oq_rows, T * nv, c.ssm_d_v);
    }
  }
  void gdn_output(DevLayer& L, int64_t T) {
    const int64_t vd = c.ssm_value_dim();
    if (cuda::uses_q8_1(L.wout.m.type) && !gdn_q_in_norm(L))
      rowop(cuda::RowOp::Identity, o.data(), vd, nullptr, 0, nullptr, nullptr, oq.data(), T, vd);
    mv(L.wout.m, o.data(), vd, oq.data(), x.data(), c.n_embd, T, true);
  }

  // SwiGLU FFN of n_out rows: gate/up from h (row a / x_div), down into y.
  void swiglu(const DevMatrix& g, const DevMatrix& u, const DevMatrix& d, int64_t n_out, int x_div,
              const int32_t* slab, float* y, bool add) {
    const int64_t D = c.n_embd, F = g.m.slab_rows;
    mv_group({{&g, fg.data()}, {&u, fu.data()}}, h.data(), D, hq.data(), n_out, x_div, slab);
    rowop(cuda::RowOp::Swiglu, fg.data(), F, fu.data(), F, nullptr, fg.data(), fq.data(), n_out, F);
    mv(d.m, fg.data(), F, fq.data(), y, D, n_out, add, 1, slab);
  }

  // The experts' SwiGLU over the T*K routed vectors, each Q8_0 / NVFP4 expert matrix as a GEMM
  // grouped by expert (the GEMM arm): every vector's rows by the GEMM's chain, as a dense GEMM
  // would give them; other types by the routed mat-vec.
  bool use_routed_gemm(const DevMatrix& w, int64_t T) const {
    return arms.prefill_matmul == PrefillMatmul::mma && !batch_step && T >= gemm_min_tokens &&
           (w.m.type == DType::Q8_0 || w.m.type == DType::NVFP4) && cuda::gemm_supported(w.m.type, w.m.cols);
  }
  void routed_gemm(const DMat& w, const Q81* xq, int x_div, float* y, int64_t ld_y, int64_t n) {
    cuda::GemmParams g;
    g.w = w; g.xq = xq; g.T = n; g.y = y; g.ld_y = ld_y;
    g.order = group_order.data(); g.group_start = group_start.data(); g.n_slab = static_cast<int>(c.n_expert);
    g.tile_slab = tile_slab.data(); g.tile_start = tile_start.data(); g.n_tiles = n_tiles.data();
    g.max_tiles = cuda::moe_group_tile_bound(n, g.n_slab, cuda::gemm_routed_tile);
    g.x_div = x_div;
    cuda::gemm_run(g, s);
    ++counters.gemm_launches;
    ++counters.gemm_routed_launches;
  }
  void expert_swiglu(const DevLayer& L, int64_t T, int K) {
    const int64_t D = c.n_embd, F = L.egate.m.slab_rows, n = T * K;
    const bool gate_up = use_routed_gemm(L.egate, T) && use_routed_gemm(L.eup, T), down = use_routed_gemm(L.edown, T);
    if (!gate_up && !down) return swiglu(L.egate, L.eup, L.edown, n, K, ids.data(), ye.data(), false);
    cuda::moe_group_run({ids.data(), n, static_cast<int>(c.n_expert), group_order.data(), group_start.data(),
                         cuda::gemm_routed_tile, tile_slab.data(), tile_start.data(), n_tiles.data()},
                        s);
    if (gate_up) {
      routed_gemm(L.egate.m, hq.data(), K, fg.data(), F, n);
      routed_gemm(L.eup.m, hq.data(), K, fu.data(), F, n);
    } else {
      mv_group({{&L.egate, fg.data()}, {&L.eup, fu.data()}}, h.data(), D, hq.data(), n, K, ids.data());
    }
    rowop(cuda::RowOp::Swiglu, fg.data(), F, fu.data(), F, nullptr, fg.data(), fq.data(), n, F);
    if (down) routed_gemm(L.edown.m, fq.data(), 1, ye.data(), D, n);
    else mv(L.edown.m, fg.data(), F, fq.data(), ye.data(), D, n, false, 1, ids.data());
  }

  void ffn_layer(DevLayer& L, int64_t T) {
    const int64_t D = c.n_embd;
    if (!L.moe) return swiglu(L.gate, L.up, L.down, T, 1, nullptr, x.data(), true);
    const int K = static_cast<int>(c.n_expert_used);
    mv(L.router.m, h.data(), D, hq.data(), rl.data(), c.n_expert, T, false);
    cuda::MoeRouteParams rp;
    rp.logits = rl.data(); rp.ids = ids.data(); rp.weights = wts.data(); rp.T = T;
    rp.E = static_cast<int>(c.n_expert); rp.k = K; rp.renorm = c.norm_topk;
    cuda::moe_route_run(rp, s);
    expert_swiglu(L, T, K);
    const bool shared = !L.sgate.empty();
    if (shared) {
      mv(L.shared_gate.m, h.data(), D, hq.data(), sg.data(), 1, T, false);
      swiglu(L.sgate, L.sup, L.sdown, T, 1, nullptr, ysh.data(), false);
    }
    cuda::MoeCombineParams cp;
    cp.y = ye.data(); cp.weights = wts.data(); cp.y_shared = shared ? ysh.data() : nullptr; cp.sg = sg.data();
    cp.x = x.data(); cp.T = T; cp.D = D; cp.k = K;
    cuda::moe_combine_run(cp, s);
  }

  void check_cache(const Cache& cache) const {
    if (!cache.impl()) fail("cache is empty (not made by Model::new_cache)");
    if (cache.impl()->owner != this) fail("cache was made by another model");
  }

  // Host half of a step: checks, scratch sized for T tokens and contexts up to ctx_bound, the
  // token ids uploaded (outside any graph, in stream order before it).
  // device_token: the one token is the previous greedy step's, already in tok[0] on the device
  // (an argmax index: in range), and toks is not read.
  void prepare(std::span<const int32_t> toks, Cache::Impl& ci, int64_t ctx_bound, bool device_token = false) {
    check_arms();
    if (device_token) {
      if (ci.pos + 1 > ci.max_ctx) fail("decode: position ", ci.pos, " is the cache's last (max_ctx ", ci.max_ctx, ")");
      return ensure_scratch(1, ctx_bound);
    }
    c.check_prompt(toks, ci.pos, ci.max_ctx);
    const int64_t T = static_cast<int64_t>(toks.size());
    ensure_scratch(T, ctx_bound);
    if (T == 1 && tok_dev == toks[0]) return;  // the last greedy step left it there
    tok_host.assign(toks.begin(), toks.end());
    copy_to_device(tok.data(), tok_host.data(), sizeof(int32_t) * static_cast<size_t>(T), e->stream());
    tok_dev = T == 1 ? toks[0] : -1;
  }

  // Device half: the decoder over T tokens at the cache's device position; leaves the last
  // row's final-normed hidden in hn and its logits in `logits`, and advances the device
  // position; greedy: also the token in amax (see the end). Launches only (capturable).
  void body(Cache::Impl& ci, int64_t T, int64_t ctx_bound, bool greedy = false) {
    const int64_t D = c.n_embd;
    cuda::EmbedParams ep;
    ep.table = embed.m; ep.tokens = tok.data(); ep.T = T; ep.x = x.data();
    cuda::embed_run(ep, s);
    for (int64_t li = 0; li < c.n_layer; ++li) {
      DevLayer& L = layers[static_cast<size_t>(li)];
      norm_quant(x.data(), L.attn_norm.data(), h.data(), hq.data(), T, D);
      if (L.kind == LayerKind::Attention) attention_layer(L, ci, li, T, ctx_bound);
      else gdn_layer(L, ci, li, T);
      norm_quant(x.data(), L.ffn_norm.data(), h.data(), hq.data(), T, D);
      ffn_layer(L, T);
    }
    norm_quant(x.data() + (T - 1) * D, output_norm.data(), hn.data(), hnq.data(), 1, D);
    if (!greedy) {
      mv(lm_head(), hn.data(), D, hnq.data(), logits.data(), c.n_vocab, 1, false);
      cuda::launch_kernel("advance_pos_kernel", advance_pos_kernel, 1, 1, 0, s, ci.pos_dev.data(), T);
      return;
    }
    // Greedy: the lm_head leaves its warps' bests, and one launch takes the token from them,
    // writes it where the next step's embedding reads it and into the cache's history, and
    // advances the position (the full-vocabulary scan and advance_pos were two launches).
    // (one output vector: never the GEMM, never W4A4 — mv()'s other two forms)
    const cuda::MatvecParams p = mv_params(lm_head(), hn.data(), D, hnq.data(), logits.data(), c.n_vocab, 1, false, 1, nullptr);
    const int nb = cuda::matvec_run_best(p, arms.decode_matvec, row_best.data(), static_cast<int>(row_best.size()), s);
    cuda::GreedyStep o;
    o.out = amax.data(); o.next_tok = tok.data(); o.hist = ci.greedy_hist.data(); o.pos = ci.pos_dev.data(); o.advance = T;
    cuda::argmax_step_run(logits.data(), c.n_vocab, nb ? row_best.data() : nullptr, nb, o, s);
  }

  void run(std::span<const int32_t> toks, Cache::Impl& ci, bool greedy = false, bool device_token = false) {
    const cuda::ScopedLaunchOverlap overlap(arms.launch_overlap);
    ci.has_last_logits = false;
    const int64_t T = static_cast<int64_t>(toks.size());
    prepare(toks, ci, ci.pos + T, device_token);
    w4a4_on = arms.prefill_act == PrefillAct::w4a4 && T > 1;
    if (w4a4_on) {  // sized once for the call's widest activation rows (no reallocation between launches)
      const int64_t K = k_used();
      const int64_t widest = std::max({T * c.n_embd, T * std::max(c.n_head * c.head_dim, c.ssm_value_dim()), T * c.n_ff,
                                       T * K * c.n_ff_exp, T * c.n_ff_shexp});
      if (static_cast<int64_t>(x4.size()) < widest / 32) x4 = DeviceBuffer<cuda::A4>(*e, static_cast<size_t>(widest / 32));
    }
    struct Off {
      bool& on;
      ~Off() { on = false; }
    } off{w4a4_on};
    body(ci, T, ci.pos + T, greedy);
    ci.pos += T;
  }

  // One decode token: eager, or the captured graph of this cache (decode_graph arm). The graph
  // launches the same kernels on the same operands in the same order as eager (DESIGN.md law
  // 3): only the attention grid is sized for max_ctx instead of pos + 1, and its extra splits
  // exit before computing anything.
  // greedy: the token lands in amax and tok[0] (body's end), so the host's copy of tok[0] is
  // stale until it reads the token back. device_token: see prepare().
  void decode(int32_t token, Cache::Impl& ci, bool greedy, bool device_token = false) {
    const cuda::ScopedLaunchOverlap overlap(arms.launch_overlap);
    ci.has_last_logits = false;
    const int32_t one[1] = {token};
    struct Stale {
      int64_t& tok_dev;
      bool greedy;
      ~Stale() { if (greedy) tok_dev = -1; }
    } stale_tok{tok_dev, greedy};
    if (!arms.decode_graph || ci.graph_latched_off) return run(one, ci, greedy, device_token);
    prepare(one, ci, ci.max_ctx, device_token);
    const bool stale = ci.exec && (ci.exec_gen != scratch_gen || ci.exec_greedy != greedy);
    if (stale && !arms.graph_recapture) {
      ci.graph_latched_off = true;  // latch to eager, as the arm says
      cudaGraphExecDestroy(ci.exec);
      ci.exec = nullptr;
      ++counters.latched;
      body(ci, 1, ci.pos + 1, greedy);
      ci.pos += 1;
      return;
    }
    if (!ci.exec || stale) {
      if (ci.exec) cudaGraphExecDestroy(ci.exec);
      ci.exec = nullptr;
      cudaGraph_t g = nullptr;
      MEMRA_CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed));
      try {
        body(ci, 1, ci.max_ctx, greedy);
      } catch (...) {
        cudaStreamEndCapture(s, &g);
        if (g) cudaGraphDestroy(g);
        throw;
      }
      MEMRA_CUDA_CHECK(cudaStreamEndCapture(s, &g));
      const cudaError_t ie = cudaGraphInstantiate(&ci.exec, g, 0);
      cudaGraphDestroy(g);
      MEMRA_CUDA_CHECK(ie);
      ci.exec_gen = scratch_gen;
      ci.exec_greedy = greedy;
      ++counters.captures;
    }
    MEMRA_CUDA_CHECK(cudaGraphLaunch(ci.exec, s));
    ++counters.replays;
    ci.pos += 1;
  }

  // One decode step of B sequences, token b at cache b's position (DESIGN.md decode_step_batch):
  // the mat-muls, norms, FFN / MoE and lm_head over B rows (each weight streamed once per step),
  // attention and Gated DeltaNet per sequence over its own cache. Every kernel computes a row's
  // values by the same operations whatever B and whatever the other rows hold (mat-vec tiles
  // keep per-vector accumulators in the dot contract's order, row ops reduce per row, attention
  // and GDN run per sequence), so a sequence's logits do not depend on its batch-mates, its row
  // or B (law 2; gate DecodeBatch). Eager only (no graph arm). Logits land in logits_batch.
  // specs: per row, the token selection (none: the row only advances its position).
  void decode_batch(std::span<const int32_t> toks, std::span<Cache::Impl* const> cis,
                    std::span<const std::optional<SampleSpec>> specs) {
    const cuda::ScopedLaunchOverlap overlap(arms.launch_overlap);
    check_arms();
    const int64_t B = static_cast<int64_t>(toks.size()), D = c.n_embd;
    int64_t ctx_bound = 1;
    for (const Cache::Impl* ci : cis) ctx_bound = std::max(ctx_bound, ci->pos + 1);
    ensure_scratch(B, ctx_bound);
    if (static_cast<int64_t>(logits_batch.size()) < B * c.n_vocab)
      logits_batch = DeviceBuffer<float>(*e, static_cast<size_t>(B * c.n_vocab));
    tok_host.assign(toks.begin(), toks.end());
    copy_to_device(tok.data(), tok_host.data(), sizeof(int32_t) * static_cast<size_t>(B), e->stream());
    tok_dev = -1;
    struct Flag {
      bool& on;
      ~Flag() { on = false; }
    } flag{batch_step};
    batch_step = true;
    cuda::EmbedParams ep;
    ep.table = embed.m; ep.tokens = tok.data(); ep.T = B; ep.x = x.data();
    cuda::embed_run(ep, s);
    for (int64_t li = 0; li < c.n_layer; ++li) {
      DevLayer& L = layers[static_cast<size_t>(li)];
      norm_quant(x.data(), L.attn_norm.data(), h.data(), hq.data(), B, D);
      if (L.kind == LayerKind::Attention) {
        attention_project(L, B);
        for (int64_t r = 0; r < B; ++r) attention_core(L, *cis[r], li, 1, cis[r]->pos + 1, r);
        attention_output(L, B);
      } else {
        gdn_project(L, B);
        for (int64_t r = 0; r < B; ++r) gdn_core(L, *cis[r], li, 1, r);
        gdn_output(L, B);
      }
      norm_quant(x.data(), L.ffn_norm.data(), h.data(), hq.data(), B, D);
      ffn_layer(L, B);
    }
    norm_quant(x.data(), output_norm.data(), h.data(), hq.data(), B, D);
    mv(lm_head(), h.data(), D, hq.data(), logits_batch.data(), c.n_vocab, B, false);
    std::vector<int64_t*> pos;
    for (Cache::Impl* ci : cis) pos.push_back(ci->pos_dev.data());
    select_rows(logits_batch.data(), specs, pos);
    for (Cache::Impl* ci : cis) {
      ci->pos += 1;
      ci->has_last_logits = false;
    }
    ++counters.batch_steps;
  }

  // One select_rows launch over B rows of x: each row's token (specs) into row_tokens, each
  // pos[r] (when set) advanced by one.
  void select_rows(const float* x, std::span<const std::optional<SampleSpec>> specs, std::span<int64_t* const> pos) {
    const size_t B = specs.size();
    if (row_jobs.size() < B) {
      row_jobs = DeviceBuffer<cuda::RowSelect>(*e, B);
      row_tokens = DeviceBuffer<int32_t>(*e, B);
    }
    jobs_host.assign(B, cuda::RowSelect{});
    for (size_t r = 0; r < B; ++r) {
      cuda::RowSelect& j = jobs_host[r];
      j.pos = pos[r];
      if (specs[r]) {
        j.has_spec = 1;
        j.temperature = specs[r]->temperature;
        j.seed = specs[r]->seed;
        j.counter = specs[r]->counter;
      }
    }
    copy_to_device(row_jobs.data(), jobs_host.data(), sizeof(cuda::RowSelect) * B, e->stream());
    cuda::select_rows_run(x, c.n_vocab, row_jobs.data(), static_cast<int>(B), row_tokens.data(), s);
  }

  // A greedy step whose logits held a NaN or Inf (argmax.cuh: the token -1).
  [[noreturn]] void fail_nonfinite(const char* what, int64_t pos) {
    tok_dev = -1;
    fail(what, ": non-finite logit (NaN or Inf) in the lm_head output of the token at position ", pos,
         "; the cache holds that step, and what follows it is not meaningful");
  }

  std::vector<float> fetch_logits() {
    std::vector<float> l = logits.download();
    for (size_t i = 0; i < l.size(); ++i)
      if (!std::isfinite(l[i])) fail("non-finite logit (", l[i], ") at index ", i, " (lm_head)");
    return l;
  }
};

Model::Model(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Model::Model(Model&&) noexcept = default;
Model& Model::operator=(Model&&) noexcept = default;
Model::~Model() = default;

const ModelConfig& Model::config() const { return impl_->c; }
const Arms& Model::arms() const { return impl_->arms; }
void Model::set_arms(const Arms& a) { impl_->arms = a; }

namespace {

std::unique_ptr<Model::Impl> new_impl(Engine& e, const ModelConfig& c) {
  c.validate();
  auto m = std::make_unique<Model::Impl>();
  m->e = &e;
  m->s = stream_of(e);
  m->c = c;
  m->arms.gdn_prefill = GdnPrefill::recurrent;  // the verified GDN prefill form (model.h)
  // prefill_matmul stays mmvq (Arms' default): the GEMM passed its op test and gate on the H200
  // but measured slower than the token-tiled mat-vec on 3 of the 4 benchmark shapes
  // (docs/PERF.md); it is the arm prefill_matmul = mma.
  m->layers.resize(static_cast<size_t>(c.n_layer));
  return m;
}

}  // namespace

Model Model::from_raw(Engine& e, const ModelConfig& c, const RawWeights& w) {
  auto m = new_impl(e, c);
  m->tiled = w.gdn_tiled_v_heads;
  m->embed = upload(e, w.embed, "token_embd");
  m->output = upload(e, w.output, "output");
  m->output_norm = upload_vec(e, w.output_norm);
  for (int64_t i = 0; i < c.n_layer; ++i) {
    const RawLayer& R = w.layers[static_cast<size_t>(i)];
    DevLayer& L = m->layers[static_cast<size_t>(i)];
    const std::string P = "layer " + std::to_string(i) + " ";
    L.kind = c.layer_kind[static_cast<size_t>(i)];
    L.attn_norm = upload_vec(e, R.attn_norm);
    L.ffn_norm = upload_vec(e, R.ffn_norm);
    if (R.attn) {
      L.wq = upload(e, R.attn->wq, P + "wq");
      L.wgate = upload(e, R.attn->wgate, P + "wgate");
      L.wk = upload(e, R.attn->wk, P + "wk");
      L.wv = upload(e, R.attn->wv, P + "wv");
      L.wo = upload(e, R.attn->wo, P + "wo");
      L.q_norm = upload_vec(e, R.attn->q_norm);
      L.k_norm = upload_vec(e, R.attn->k_norm);
    }
    if (R.gdn) {
      L.wqkv = upload(e, R.gdn->wqkv, P + "wqkv");
      L.wz = upload(e, R.gdn->wz, P + "wz");
      L.wb = upload(e, R.gdn->wb, P + "wb");
      L.wa = upload(e, R.gdn->wa, P + "wa");
      L.wout = upload(e, R.gdn->wout, P + "wout");
      L.conv = upload_vec(e, R.gdn->conv);
      L.ssm_a = upload_vec(e, R.gdn->ssm_a);
      L.dt_bias = upload_vec(e, R.gdn->dt_bias);
      L.gnorm = upload_vec(e, R.gdn->norm);
    }
    if (R.ffn) {
      L.gate = upload(e, R.ffn->gate, P + "ffn_gate");
      L.up = upload(e, R.ffn->up, P + "ffn_up");
      L.down = upload(e, R.ffn->down, P + "ffn_down");
    }
    if (R.moe) {
      L.moe = true;
      L.router = upload(e, R.moe->router, P + "router");
      L.egate = upload(e, R.moe->experts.gate, P + "experts.gate");
      L.eup = upload(e, R.moe->experts.up, P + "experts.up");
      L.edown = upload(e, R.moe->experts.down, P + "experts.down");
      if (!R.moe->shared.empty()) {
        L.sgate = upload(e, R.moe->shared.gate, P + "shared.gate");
        L.sup = upload(e, R.moe->shared.up, P + "shared.up");
        L.sdown = upload(e, R.moe->shared.down, P + "shared.down");
        RawMatrix sgm;
        sgm.type = DType::F32;
        sgm.rows = 1;
        sgm.cols = c.n_embd;
        sgm.slab_scale = {1.0f};
        sgm.data.resize(sizeof(float) * static_cast<size_t>(c.n_embd));
        std::memcpy(sgm.data.data(), R.moe->shared_gate.data(), sgm.data.size());
        L.shared_gate = upload(e, sgm, P + "shared_gate");
      }
    }
  }
  e.synchronize();  // the uploads read host memory owned by `w`
  return Model(std::move(m));
}

Model Model::load(Engine& e, const WeightSource& src, const LoadOptions& opt) {
  if (opt.devices.size() != 1 || opt.devices[0] != e.device())
    fail("Model::load: one device, the engine's (", e.device(), "), is supported");
  const ModelConfig c = ModelConfig::from_source(src);
  const RawWeights w = load_raw_weights(src, c);
  return with_context(src.path(), [&] { return from_raw(e, c, w); });
}

Model Model::synthetic(Engine& e, const ModelConfig& c, DType t, uint64_t seed) {
  auto m = new_impl(e, c);
  const int64_t D = c.n_embd, qd = c.n_head * c.head_dim, kvd = c.n_head_kv * c.head_dim;
  const int64_t cd = c.ssm_conv_dim(), vd = c.ssm_value_dim(), nv = c.ssm_n_v_heads;
  uint64_t sd = seed;
  auto M = [&](int64_t rows, int64_t cols, int64_t slabs, const std::string& what) {
    return synth_matrix(e, t, rows, cols, slabs, ++sd, what);
  };
  auto V = [&](int64_t n, float v) { return upload_vec(e, std::vector<float>(static_cast<size_t>(n), v)); };
  m->embed = M(c.n_vocab, D, 1, "token_embd");
  if (!c.tied_embeddings) m->output = M(c.n_vocab, D, 1, "output");
  m->output_norm = V(D, 1.0f);
  for (int64_t i = 0; i < c.n_layer; ++i) {
    DevLayer& L = m->layers[static_cast<size_t>(i)];
    L.kind = c.layer_kind[static_cast<size_t>(i)];
    L.attn_norm = V(D, 1.0f);
    L.ffn_norm = V(D, 1.0f);
    if (L.kind == LayerKind::Attention) {
      L.wq = M(qd, D, 1, "wq");
      if (c.attn_gated()) L.wgate = M(qd, D, 1, "wgate");
      L.wk = M(kvd, D, 1, "wk");
      L.wv = M(kvd, D, 1, "wv");
      L.wo = M(D, qd, 1, "wo");
      L.q_norm = V(c.head_dim, 1.0f);
      L.k_norm = V(c.head_dim, 1.0f);
    } else {
      L.wqkv = M(cd, D, 1, "wqkv");
      L.wz = M(vd, D, 1, "wz");
      L.wb = M(nv, D, 1, "wb");
      L.wa = M(nv, D, 1, "wa");
      L.wout = M(D, vd, 1, "wout");
      L.conv = V(cd * c.ssm_conv_kernel, 0.25f);
      L.ssm_a = V(nv, -1.0f);
      L.dt_bias = V(nv, 0.0f);
      L.gnorm = V(c.ssm_d_v, 1.0f);
    }
    if (c.ffn_kind[static_cast<size_t>(i)] == FfnKind::Moe) {
      L.moe = true;
      const int64_t E = c.n_expert, I = c.n_ff_exp;
      L.router = synth_matrix(e, DType::F32, E, D, 1, ++sd, "router");
      L.egate = M(E * I, D, E, "experts.gate");
      L.eup = M(E * I, D, E, "experts.up");
      L.edown = M(E * D, I, E, "experts.down");
      if (c.n_ff_shexp > 0) {
        L.sgate = M(c.n_ff_shexp, D, 1, "shared.gate");
        L.sup = M(c.n_ff_shexp, D, 1, "shared.up");
        L.sdown = M(D, c.n_ff_shexp, 1, "shared.down");
        L.shared_gate = synth_matrix(e, DType::F32, 1, D, 1, ++sd, "shared_gate");
      }
    } else {
      L.gate = M(c.n_ff, D, 1, "ffn_gate");
      L.up = M(c.n_ff, D, 1, "ffn_up");
      L.down = M(D, c.n_ff, 1, "ffn_down");
    }
  }
  e.synchronize();
  return Model(std::move(m));
}

Cache Model::new_cache(int64_t max_ctx) const {
  if (max_ctx <= 0) fail("new_cache: max_ctx ", max_ctx, " must be > 0");
  const ModelConfig& c = impl_->c;
  Engine& e = *impl_->e;
  auto ci = std::make_unique<Cache::Impl>();
  ci->owner = impl_.get();
  ci->s = impl_->s;
  ci->max_ctx = max_ctx;
  ci->pos_dev = DeviceBuffer<int64_t>(e, 1);
  ci->greedy_hist = DeviceBuffer<int32_t>(e, static_cast<size_t>(max_ctx));
  ci->k.resize(static_cast<size_t>(c.n_layer));
  ci->v.resize(static_cast<size_t>(c.n_layer));
  ci->conv.resize(static_cast<size_t>(c.n_layer));
  ci->state.resize(static_cast<size_t>(c.n_layer));
  const size_t kv = static_cast<size_t>(max_ctx * c.n_head_kv * c.head_dim);
  for (int64_t i = 0; i < c.n_layer; ++i) {
    const size_t li = static_cast<size_t>(i);
    if (c.layer_kind[li] == LayerKind::Attention) {
      ci->k[li] = DeviceBuffer<float>(e, kv);
      ci->v[li] = DeviceBuffer<float>(e, kv);
    } else {
      ci->conv[li] = DeviceBuffer<float>(e, static_cast<size_t>(c.ssm_conv_kernel * c.ssm_conv_dim()));  // a ring (gdn.cuh)
      ci->state[li] = DeviceBuffer<float>(e, static_cast<size_t>(c.ssm_n_v_heads * c.ssm_d_k * c.ssm_d_v));
    }
  }
  ci->reset();
  return Cache(std::move(ci));
}

std::vector<float> Model::forward_last(std::span<const int32_t> tokens) {
  if (tokens.empty()) fail("forward_last: empty prompt");
  Cache c = new_cache(static_cast<int64_t>(tokens.size()));
  impl_->run(tokens, *c.impl());
  return impl_->fetch_logits();
}

Prime Model::prime_cache(std::span<const int32_t> tokens, Cache& cache) {
  impl_->check_cache(cache);
  impl_->run(tokens, *cache.impl());
  Prime p;
  p.logits = impl_->fetch_logits();
  p.hidden = impl_->hn.download();
  return p;
}

Step Model::decode_step(int32_t token, Cache& cache) {
  impl_->check_cache(cache);
  impl_->decode(token, *cache.impl(), false);
  Step s;
  s.logits = impl_->fetch_logits();
  s.hidden = impl_->hn.download();
  return s;
}

namespace {

// A batched call's inputs, all checked before anything runs; errors name the call and sequence.
std::vector<Cache::Impl*> batch_caches(const char* what, const Model::Impl& m, std::span<const int32_t> tokens,
                                       std::span<Cache* const> caches) {
  const size_t B = tokens.size();
  if (B == 0) fail(what, ": no sequences");
  if (caches.size() != B) fail(what, ": ", B, " tokens for ", caches.size(), " caches (one token per sequence)");
  std::vector<Cache::Impl*> cis;
  for (size_t b = 0; b < B; ++b) {
    Cache* cache = caches[b];
    try {
      if (!cache) fail("null cache");
      m.check_cache(*cache);
      m.c.check_prompt(tokens.subspan(b, 1), cache->pos(), cache->max_ctx());
    } catch (const Error& err) {
      fail(what, ": sequence ", b, ": ", err.what());
    }
    for (size_t a = 0; a < b; ++a)
      if (cis[a] == cache->impl()) fail(what, ": sequences ", a, " and ", b, " share one cache");
    cis.push_back(cache->impl());
  }
  return cis;
}

}  // namespace

std::vector<std::vector<float>> Model::decode_step_batch(std::span<const int32_t> tokens, std::span<Cache* const> caches) {
  const std::vector<Cache::Impl*> cis = batch_caches("decode_step_batch", *impl_, tokens, caches);
  const int64_t B = static_cast<int64_t>(tokens.size());
  if (B == 1 && impl_->arms.b1_fast) return {decode_step(tokens[0], *caches[0]).logits};
  const std::vector<std::optional<SampleSpec>> none(static_cast<size_t>(B));
  impl_->decode_batch(tokens, cis, none);
  const int64_t V = impl_->c.n_vocab;
  std::vector<float> all(static_cast<size_t>(B * V));
  copy_to_host(all.data(), impl_->logits_batch.data(), sizeof(float) * all.size(), impl_->e->stream());
  std::vector<std::vector<float>> rows(static_cast<size_t>(B));
  for (int64_t b = 0; b < B; ++b) {
    const float* row = all.data() + b * V;
    for (int64_t i = 0; i < V; ++i)
      if (!std::isfinite(row[i]))
        fail("decode_step_batch: sequence ", b, ": non-finite logit (", row[i], ") at index ", i, " (lm_head), position ",
             caches[static_cast<size_t>(b)]->pos() - 1);
    rows[static_cast<size_t>(b)].assign(row, row + V);
  }
  return rows;
}

Sampled Model::decode_step_batch_sampled(std::span<const int32_t> tokens, std::span<Cache* const> caches,
                                         std::span<const std::optional<SampleSpec>> specs, bool lean) {
  const char* what = "decode_step_batch_sampled";
  const std::vector<Cache::Impl*> cis = batch_caches(what, *impl_, tokens, caches);
  const size_t B = tokens.size();
  if (specs.size() != B) fail(what, ": ", specs.size(), " specs for ", B, " sequences (one, or none, per sequence)");
  for (size_t b = 0; b < B; ++b)
    if (specs[b] && !(std::isfinite(specs[b]->temperature) && specs[b]->temperature >= 0))
      fail(what, ": sequence ", b, ": temperature ", specs[b]->temperature, " (must be finite and >= 0)");
  Impl& m = *impl_;
  const int64_t V = m.c.n_vocab;
  const float* x = nullptr;
  if (B == 1 && m.arms.b1_fast) {  // decode_step's launches (graph arm included), then the selection
    m.decode(tokens[0], *cis[0], false);
    int64_t* no_pos[1] = {nullptr};
    m.select_rows(m.logits.data(), specs, no_pos);
    x = m.logits.data();
  } else {
    m.decode_batch(tokens, cis, specs);
    x = m.logits_batch.data();
  }
  Sampled out;
  out.tokens.resize(B);
  copy_to_host(out.tokens.data(), m.row_tokens.data(), sizeof(int32_t) * B, m.e->stream());
  out.logits.resize(B);
  for (size_t b = 0; b < B; ++b) {
    const float* row = x + static_cast<int64_t>(b) * V;
    if (specs[b] && out.tokens[b] < 0)
      fail(what, ": sequence ", b, ": non-finite logit (NaN or Inf) in the lm_head output of the token at position ",
           cis[b]->pos - 1);
    if (specs[b] && lean) {
      Cache::Impl& ci = *cis[b];
      if (ci.last_logits.size() != static_cast<size_t>(V)) ci.last_logits = DeviceBuffer<float>(*m.e, static_cast<size_t>(V));
      MEMRA_CUDA_CHECK(cudaMemcpyAsync(ci.last_logits.data(), row, sizeof(float) * static_cast<size_t>(V), cudaMemcpyDeviceToDevice, m.s));
      ci.has_last_logits = true;
      continue;
    }
    if (!specs[b]) out.tokens[b] = -1;
    std::vector<float>& h = out.logits[b];
    h.resize(static_cast<size_t>(V));
    copy_to_host(h.data(), row, sizeof(float) * h.size(), m.e->stream());
    if (!specs[b])
      for (int64_t i = 0; i < V; ++i)
        if (!std::isfinite(h[static_cast<size_t>(i)]))
          fail(what, ": sequence ", b, ": non-finite logit (", h[static_cast<size_t>(i)], ") at index ", i,
               " (lm_head), position ", cis[b]->pos - 1);
  }
  return out;
}

int32_t Model::decode_greedy(int32_t token, Cache& cache) {
  impl_->check_cache(cache);
  impl_->decode(token, *cache.impl(), true);
  int32_t out = 0;
  copy_to_host(&out, impl_->amax.data(), sizeof(out), impl_->e->stream());
  if (out < 0) impl_->fail_nonfinite("decode_greedy", cache.pos() - 1);
  impl_->tok_dev = out;
  return out;
}

std::vector<int32_t> Model::decode_greedy_n(int32_t token, int64_t n, Cache& cache) {
  impl_->check_cache(cache);
  Cache::Impl& ci = *cache.impl();
  if (n < 1) fail("decode_greedy_n: n = ", n, " (want >= 1)");
  if (ci.pos + n > ci.max_ctx)
    fail("decode_greedy_n: ", n, " tokens from position ", ci.pos, " exceed the cache (max_ctx ", ci.max_ctx, ")");
  const int64_t p0 = ci.pos;
  int64_t i = 0;
  if (impl_->tok_dev != token) {  // else the device holds it already: every step is fed there
    impl_->decode(token, ci, true);
    i = 1;
  }
  // One graph launch per step: a graph of 8 (or 4) captured steps measured slower on the H200
  // (9B NVFP4 1920 (1868) vs 1795 us per token, 0.6B 893 (846) vs 790; docs/PERF.md).
  for (; i < n; ++i) impl_->decode(0, ci, true, /*device_token=*/true);
  std::vector<int32_t> out(static_cast<size_t>(n));
  copy_to_host(out.data(), ci.greedy_hist.data() + p0, sizeof(int32_t) * static_cast<size_t>(n), impl_->e->stream());
  for (int64_t k = 0; k < n; ++k)
    if (out[static_cast<size_t>(k)] < 0) impl_->fail_nonfinite("decode_greedy_n", p0 + k);
  impl_->tok_dev = out.back();
  return out;
}

Counters Model::counters() const { return impl_->counters; }
void Model::set_gemm_min_tokens(int64_t min_tokens) {
  if (min_tokens < 1) fail("set_gemm_min_tokens: min_tokens ", min_tokens, " must be >= 1");
  impl_->gemm_min_tokens = min_tokens;
}

int64_t Model::weight_bytes() const {
  int64_t n = impl_->embed.total_bytes() + impl_->output.total_bytes();
  for (const DevLayer& L : impl_->layers)
    for (const DevMatrix* m : {&L.wq, &L.wgate, &L.wk, &L.wv, &L.wo, &L.wqkv, &L.wz, &L.wb, &L.wa, &L.wout, &L.gate,
                               &L.up, &L.down, &L.router, &L.egate, &L.eup, &L.edown, &L.sgate, &L.sup, &L.sdown,
                               &L.shared_gate})
      n += m->total_bytes();
  return n;
}

int64_t Model::decode_bytes_per_token() const {
  const Impl& m = *impl_;
  int64_t n = m.embed.m.row_bytes + (m.output.empty() ? m.embed.total_bytes() : m.output.total_bytes());
  for (const DevLayer& L : m.layers) {
    for (const DevMatrix* d : {&L.wq, &L.wgate, &L.wk, &L.wv, &L.wo, &L.wqkv, &L.wz, &L.wb, &L.wa, &L.wout, &L.gate,
                               &L.up, &L.down, &L.router, &L.sgate, &L.sup, &L.sdown, &L.shared_gate})
      n += d->total_bytes();
    for (const DevMatrix* d : {&L.egate, &L.eup, &L.edown})
      if (!d->empty()) n += d->total_bytes() / d->n_slab * m.c.n_expert_used;
  }
  return n;
}

}  // namespace memra
