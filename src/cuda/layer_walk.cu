// src/cuda/layer_walk.cu — the decoder walk (model_impl.h): the workspace, the mat-mul and row-op
// dispatch by arm, each layer kind in three parts, the one loop over the layers shared by
// single-sequence and batched steps, and a single-sequence step's host and device halves.
#include <algorithm>
#include <cmath>

#include "cuda/attention.cuh"
#include "cuda/common.cuh"
#include "cuda/dsa.cuh"
#include "cuda/dsv4.cuh"
#include "cuda/embed.cuh"
#include "cuda/gdn.cuh"
#include "cuda/gemm.cuh"
#include "cuda/launch.cuh"
#include "cuda/mla.cuh"
#include "cuda/model_impl.h"
#include "cuda/moe.cuh"
#include "cuda/quantize.cuh"
#include "memra/error.h"

namespace memra {

using cuda::DevLayer;
using cuda::DevMatrix;
using cuda::DMat;
using cuda::Q81;

namespace {

// The cache's position lives on the device too (kernels read it), advanced at the end of every
// step inside the same stream order — so a captured decode graph needs no parameter update.
__global__ void advance_pos_kernel(int64_t* pos, int64_t T) {
  cuda::pdl_wait();
  cuda::pdl_release();
  *pos += T;
}

// Break::scale_layer (memra/model.h): x[i] *= f over n values, grid-stride. A canary's defect.
__global__ void break_scale_kernel(float* x, int64_t n, float f) {
  cuda::pdl_wait();
  cuda::pdl_release();
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) x[i] = __fmul_rn(x[i], f);
}

// Break::bias_id (memra/model.h): logits[id] += v. A canary's defect.
__global__ void break_bias_kernel(float* logits, int32_t id, float v) {
  cuda::pdl_wait();
  cuda::pdl_release();
  logits[id] = __fadd_rn(logits[id], v);
}

}  // namespace

// --- the workspace ---------------------------------------------------------------------------------

void Workspace::ensure(Engine& e, const ModelConfig& c, int64_t T, int64_t ctx, bool gdn_chunked, bool mla_latent) {
  if (T > cap_T) {
    const int64_t D = c.n_embd, qd = c.n_head * c.head_dim, kvd = c.n_head_kv * c.head_dim;
    const int64_t cd = c.ssm_conv_dim(), vd = c.ssm_value_dim(), nv = c.ssm_n_v_heads;
    const int64_t K = std::max<int64_t>(c.n_expert_used, 1);
    auto f = [&](int64_t n) { return DeviceBuffer<float>(e, static_cast<size_t>(std::max<int64_t>(n, 1))); };
    auto qb = [&](int64_t n) { return DeviceBuffer<Q81>(e, static_cast<size_t>(std::max<int64_t>(n / 32, 1))); };
    const int64_t mla_vd = c.has_mla() ? c.n_head * c.mla_d_v : 0;
    const int64_t omax = std::max({qd, vd, mla_vd});
    const int64_t fmax = std::max({T * c.n_ff, T * K * c.n_ff_exp, T * c.n_ff_shexp});
    x = f(T * D);
    h = f(T * D);
    q = f(T * qd);
    k = f(T * kvd);
    v = f(T * kvd);
    gate = f(T * qd);
    o = f(T * omax);
    qkv = f(T * cd);
    qkvc = f(T * cd);
    z = f(T * vd);
    b = f(T * nv);
    a = f(T * nv);
    fg = f(fmax);
    fu = f(fmax);
    ye = f(T * K * D);
    ysh = f(T * D);
    rl = f(T * c.n_expert);
    sg = f(T);
    wts = f(T * K);
    hq = qb(T * D);
    oq = qb(T * omax);
    fq = qb(fmax);
    ids = DeviceBuffer<int32_t>(e, static_cast<size_t>(T * K));
    group_order = DeviceBuffer<int32_t>(e, static_cast<size_t>(T * K));
    group_start = DeviceBuffer<int32_t>(e, static_cast<size_t>(c.n_expert + 1));
    const int64_t tiles = cuda::moe_group_tile_bound(T * K, static_cast<int>(c.n_expert), cuda::gemm_routed_tile);
    tile_slab = DeviceBuffer<int32_t>(e, static_cast<size_t>(tiles));
    tile_start = DeviceBuffer<int32_t>(e, static_cast<size_t>(tiles));
    n_tiles = DeviceBuffer<int32_t>(e, 1);
    tok = DeviceBuffer<int32_t>(e, static_cast<size_t>(T));
    const bool mla = c.has_mla(), dsv4 = c.family == Family::DeepseekV4, indexer = mla || dsv4;
    const int64_t qr = mla || dsv4 ? c.mla_q_rank : 0, kvr = mla ? c.mla_kv_rank : 0;
    ql = f(T * qr);
    kva = f(mla ? T * (kvr + c.n_rot) : 0);
    lat = f(T * kvr);
    kvb = f(mla ? T * c.n_head * (c.mla_d_nope + c.mla_d_v) : 0);
    iq = f(indexer ? T * c.dsa_n_head * c.dsa_head_dim : 0);
    ik = f(mla ? T * c.dsa_head_dim : 0);
    iw = f(indexer ? T * c.dsa_n_head : 0);
    qlq = qb(T * qr);
    latq = qb(T * kvr);
    sel = DeviceBuffer<int32_t>(e, static_cast<size_t>(std::max<int64_t>(indexer ? T * c.dsa_sel_width() : 0, 1)));
    n_sel = DeviceBuffer<int32_t>(e, static_cast<size_t>(T));
    const int64_t P = c.dsa_kpool, kda = c.has_kda() ? c.ssm_d_v : 0;
    pig = f(P > 0 ? T * c.dsa_head_dim : 0);
    psel = DeviceBuffer<int32_t>(e, static_cast<size_t>(std::max<int64_t>(P > 0 ? T * (c.dsa_topk / P) : 0, 1)));
    n_psel = DeviceBuffer<int32_t>(e, static_cast<size_t>(T));
    kfa = f(T * kda);
    kga = f(T * kda);
    kf = f(kda ? T * c.ssm_value_dim() : 0);
    kg = f(kda ? T * c.ssm_value_dim() : 0);
    kfaq = qb(T * kda);
    kgaq = qb(T * kda);
    const int64_t N = c.is_hyper() ? c.hc_mult : 0, M = (2 + N) * N, hd = dsv4 ? c.head_dim : 0;
    const int64_t G = dsv4 ? c.o_groups : 0, GR = G * c.o_rank, icw = dsv4 ? 2 * c.dsa_head_dim : 0;
    hcx = f(T * N * D);
    hcn = f(T * N * D);
    hcnq = qb(T * N * D);
    hz = f(T * M);
    hmix = DeviceBuffer<double>(e, static_cast<size_t>(std::max<int64_t>(T * M, 1)));
    yb = f(c.is_hyper() ? T * D : 0);
    ckv = f(T * 2 * hd);
    cg = f(T * 2 * hd);
    ikv = f(T * icw);
    ig = f(T * icw);
    og = f(T * GR);
    ogq = qb(T * GR);
    std::vector<int32_t> slab(static_cast<size_t>(std::max<int64_t>(T * G, 1)), 0);
    for (size_t a = 0; G > 0 && a < slab.size(); ++a) slab[a] = static_cast<int32_t>(static_cast<int64_t>(a) % G);
    group_slab = DeviceBuffer<int32_t>(e, slab.size());
    group_slab.upload(slab);
    ones = f(std::max(N * D, hd));
    ones.upload(std::vector<float>(ones.size(), 1.0f));
    cap_T = T;
    ++gen;
  }
  if (logits.size() == 0) {
    logits = DeviceBuffer<float>(e, static_cast<size_t>(c.n_vocab));
    hn = DeviceBuffer<float>(e, static_cast<size_t>(c.n_embd));
    hnq = DeviceBuffer<Q81>(e, static_cast<size_t>(std::max<int64_t>(c.n_embd / 32, 1)));
    amax = DeviceBuffer<int32_t>(e, 1);
    // a streamed launch holds at most 2048 resident threads per SM: 64 warps
    row_best = DeviceBuffer<cuda::RowBest>(e, static_cast<size_t>(std::max(e.props().sm_count, 1) * 64));
    attn_arrivals = DeviceBuffer<uint32_t>(e, static_cast<size_t>(std::max<int64_t>(c.n_head, 1)));
    attn_arrivals.fill_bytes(0);  // the one-launch decode attention leaves them zero (attention.cuh)
  }
  int64_t need = cuda::attention_workspace_floats(T, ctx, static_cast<int>(c.n_head), static_cast<int>(c.head_dim));
  if (T > 1 && gdn_chunked && c.ssm_n_v_heads > 0)  // the layers take turns with it
    need = std::max(need, cuda::gdn_chunked_workspace_floats(T, static_cast<int>(c.ssm_n_v_heads),
                                                             static_cast<int>(c.ssm_d_k), static_cast<int>(c.ssm_d_v)));
  // the indexer's scores of a chunk of queries (DeepSeek-V4's over fewer keys: compressed rows)
  if (c.has_mla() || c.family == Family::DeepseekV4) need = std::max(need, mla_score_rows(T, ctx) * ctx);
  // the latent form's queries and outputs, then its split attention's chunks, after the indexer
  // is done with its scores
  if (mla_latent && c.has_mla())
    need = std::max(need, T * c.n_head * (2 * c.mla_kv_rank + c.n_rot) +
                              cuda::sparse_attention_split_floats(T, static_cast<int>(c.n_head),
                                                                  static_cast<int>(c.dsa_sel_width()),
                                                                  static_cast<int>(c.mla_kv_rank)));
  if (need > cap_work) {
    work = DeviceBuffer<float>(e, static_cast<size_t>(need));
    cap_work = need;
    ++gen;
  }
}

// --- checks ----------------------------------------------------------------------------------------

void Model::Impl::check_arms() const {
  if (arms.prefill_act == PrefillAct::w4a4 && arms.prefill_matmul == PrefillMatmul::mma)
    fail(
        "GPU model: arm prefill_act=w4a4 has no tensor-core GEMM (prefill_matmul=mma); the W4A4 contract runs on "
        "the token-tiled mat-vec: set prefill_matmul=mmvq");
}

void Model::Impl::check_cache(const Cache& cache) const {
  if (!cache.impl()) fail("cache is empty (not made by Model::new_cache)");
  if (cache.impl()->owner != head) fail("cache was made by another model");
}

// --- mat-muls and row ops ----------------------------------------------------------------------------

// The W4A4 activations of n_x rows of n values (row a at xf + a * ld) in x4, for the NVFP4
// mat-muls of this call; nullptr when the W4A4 arm is not on for a matrix of this type and
// output count (one output vector: the lm_head row, which stays W4A8).
const cuda::A4* Model::Impl::w4a4_acts(DType type, const float* xf, int64_t ld, int64_t n, int64_t n_out, int x_div) {
  if (!w4a4_on || type != DType::NVFP4 || n_out < 2) return nullptr;
  const int64_t n_x = cuda::ceil_div(n_out, x_div);
  if (static_cast<int64_t>(ws.x4.size()) < n_x * (n / 32))
    fail("W4A4 activations: ", n_x, " rows of ", n, " exceed the buffer");
  cuda::quantize_rows_fp4act_cuda(xf, ld, n_x, n, ws.x4.data(), s, brk.w4a4_drop_block_scale);
  return ws.x4.data();
}

bool Model::Impl::use_gemm(const DMat& m, int64_t n_out, const int32_t* slab) const {
  return arms.prefill_matmul == PrefillMatmul::mma && !batch_step && n_out >= gemm_min_tokens && slab == nullptr &&
         cuda::gemm_supported(m.type, m.cols);
}

namespace {

cuda::GemmParams gemm_params(const DMat& m, const float* xf, int64_t ld, const Q81* xq, float* y, int64_t ld_y,
                             int64_t T, bool add) {
  cuda::GemmParams g;
  g.w = m;
  g.T = T;
  g.y = y;
  g.ld_y = ld_y;
  g.add_to_y = add;
  if (cuda::uses_q8_1(m.type))
    g.xq = xq;
  else {
    g.xf = xf;
    g.ld_xf = ld;
  }
  return g;
}

}  // namespace

void Model::Impl::gemm(const DMat& m, const float* xf, int64_t ld, const Q81* xq, float* y, int64_t ld_y, int64_t T,
                       bool add) {
  cuda::gemm_run(gemm_params(m, xf, ld, xq, y, ld_y, T, add), s);
  ++counters.gemm_launches;
}

namespace {

// A mat-vec's operands: q8_1 activations for the types that take them, else f32 rows; the
// NVFP4 dot contract of the arms.
cuda::MatvecParams mv_params(const Arms& arms, const DMat& m, const float* xf, int64_t ld, const Q81* xq, float* y,
                             int64_t ld_y, int64_t n_out, bool add, int x_div, const int32_t* slab) {
  cuda::MatvecParams p;
  p.w = m;
  p.nvfp4_dot = arms.nvfp4_dot;
  if (cuda::uses_q8_1(m.type))
    p.xq = xq;
  else {
    p.xf = xf;
    p.ld_xf = ld;
  }
  p.y = y;
  p.ld_y = ld_y;
  p.n_out = n_out;
  p.add_to_y = add;
  p.x_div = x_div;
  p.slab_of = slab;
  return p;
}

}  // namespace

void Model::Impl::mv(const DMat& m, const float* xf, int64_t ld, const Q81* xq, float* y, int64_t ld_y, int64_t n_out,
                     bool add, int x_div, const int32_t* slab) {
  if (x_div == 1 && use_gemm(m, n_out, slab)) return gemm(m, xf, ld, xq, y, ld_y, n_out, add);
  cuda::MatvecParams p = mv_params(arms, m, xf, ld, xq, y, ld_y, n_out, add, x_div, slab);
  if ((p.x4 = w4a4_acts(m.type, xf, ld, m.cols, n_out, x_div))) {
    p.xq = nullptr;
    ++counters.w4a4_launches;
  }
  count_pair32(p);
  counters.bulk_tile_launches += cuda::matvec_run(p, arms.decode_matvec, s, brk.bulk_tile_reorder);
}

// Several mat-vecs over the same activation rows in as few launches as possible: one per
// weight type (each row is computed exactly as by mv()).
void Model::Impl::mv_group(std::initializer_list<Job> jobs, const float* xf, int64_t ld, const Q81* xq, int64_t n_out,
                           int x_div, const int32_t* slab) {
  std::vector<cuda::MatvecParams> ps;
  std::vector<cuda::GemmParams> gs;
  for (const Job& j : jobs) {
    if (j.w->empty()) continue;
    if (x_div == 1 && use_gemm(j.w->m, n_out, slab))
      gs.push_back(gemm_params(j.w->m, xf, ld, xq, j.y, j.w->m.slab_rows, n_out, false));
    else
      ps.push_back(mv_params(arms, j.w->m, xf, ld, xq, j.y, j.w->m.slab_rows, n_out, false, x_div, slab));
  }
  // the GEMMs: the int8 ones of one type in one launch (their row tiles share the grid), BF16 alone
  std::vector<bool> launched(gs.size(), false);
  for (size_t i = 0; i < gs.size(); ++i) {
    if (launched[i]) continue;
    cuda::GemmParams batch[cuda::gemm_multi];
    int n = 0;
    const bool int8 = cuda::uses_q8_1(gs[i].w.type);
    for (size_t k = i; k < gs.size() && n < (int8 ? cuda::gemm_multi : 1); ++k)
      if (!launched[k] && gs[k].w.type == gs[i].w.type) {
        batch[n++] = gs[k];
        launched[k] = true;
      }
    cuda::gemm_run_multi(batch, n, s);
    ++counters.gemm_launches;
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
      if (!done[k] && ps[k].w.type == ps[i].w.type) {
        batch[n++] = ps[k];
        done[k] = true;
      }
    if (a4 && batch[0].w.type == DType::NVFP4) {
      for (int j = 0; j < n; ++j) {
        batch[j].x4 = a4;
        batch[j].xq = nullptr;
      }
      ++counters.w4a4_launches;
    }
    count_pair32(batch[0]);
    counters.bulk_tile_launches += cuda::matvec_run_multi(batch, n, arms.decode_matvec, s, brk.bulk_tile_reorder);
  }
}

void Model::Impl::rowop(cuda::RowOp op, const float* x, int64_t ld_x, const float* zz, int64_t ld_z, const float* wt,
                        float* y, Q81* qq, int64_t rows, int64_t n, std::optional<double> eps) {
  cuda::RowOpParams p;
  p.op = op;
  p.x = x;
  p.ld_x = ld_x;
  p.z = zz;
  p.ld_z = ld_z;
  p.w = wt;
  p.eps = static_cast<float>(eps.value_or(c.rms_eps));
  p.y = y;
  p.ld_y = n;
  p.q = n % 32 == 0 ? qq : nullptr;
  p.rows = rows;
  p.n = n;
  cuda::rowop_run(p, s);
}

// RMSNorm of rows into y (f32) and q (q8_1 when n % 32 == 0): one kernel when the
// fuse_norm_quant arm is on, a norm then a quantisation otherwise (bit-identical results).
void Model::Impl::norm_quant(const float* x, const float* wt, float* y, Q81* qq, int64_t rows, int64_t n) {
  if (arms.fuse_norm_quant) return rowop(cuda::RowOp::RmsNorm, x, n, nullptr, 0, wt, y, qq, rows, n);
  rowop(cuda::RowOp::RmsNorm, x, n, nullptr, 0, wt, y, nullptr, rows, n);
  if (n % 32 == 0) rowop(cuda::RowOp::Identity, y, n, nullptr, 0, nullptr, nullptr, qq, rows, n);
}

void Model::Impl::latent_norm(const float* x, int64_t ld_x, const float* wt, float* y, Q81* qq, int64_t rows,
                              int64_t n) {
  rowop(cuda::RowOp::RmsNorm, x, ld_x, nullptr, 0, wt, y, qq, rows, n, c.mla_latent_eps());
}

// --- attention -----------------------------------------------------------------------------------
// The projections of all T rows, the attention of each sequence over its own cache
// (attention_core over that sequence's rows), the output projection of all rows.

void Model::Impl::attention_project(DevLayer& L, int64_t T) {
  auto& A = *L.attn;
  mv_group({{&A.wq, ws.q.data()}, {&A.wk, ws.k.data()}, {&A.wv, ws.v.data()}, {&A.wgate, ws.gate.data()}}, ws.h.data(),
           c.n_embd, ws.hq.data(), T);
}

namespace {
// wo's q8_1 input comes from the attention combine itself when its blocks lie inside a head
bool attn_q_in_combine(const DevLayer& L, const ModelConfig& c) {
  return cuda::uses_q8_1(L.attn->wo.m.type) && c.head_dim % 32 == 0;
}
// The gated norm per value head (rows T*nv of d_v), in place. With d_v % 32 == 0 the q8_1 blocks
// lie inside a head, so the norm quantises wout's input itself ([T*nv, d_v/32] is [T, vd/32]):
// the same values, one launch fewer than a separate Identity pass.
bool gdn_q_in_norm(const DevLayer& L, const ModelConfig& c) {
  return cuda::uses_q8_1(L.gdn->wout.m.type) && c.ssm_d_v % 32 == 0;
}
}  // namespace

// Rows [r0, r0 + T) of q / k / v / gate: T tokens of the sequence of cache ci. Or, with `batch`
// (ci null, r0 = 0): the decode tokens of T sequences, rows 0..T-1, their caches in
// batch[0..T), every context within ctx_bound, in one launch.
void Model::Impl::attention_core(DevLayer& L, Cache::Impl* ci, int64_t li, int64_t T, int64_t ctx_bound, int64_t r0,
                                 const cuda::AttnSeq* batch) {
  const int64_t qd = c.n_head * c.head_dim, kvd = c.n_head_kv * c.head_dim;
  const auto& A = *L.attn;
  cuda::QkPrepParams qp;
  qp.q = ws.q.data() + r0 * qd;
  qp.k = ws.k.data() + r0 * kvd;
  qp.v = ws.v.data() + r0 * kvd;
  qp.q_norm = A.q_norm.data();
  qp.k_norm = A.k_norm.data();
  qp.k_cache = ci ? ci->k[li].data() : nullptr;
  qp.v_cache = ci ? ci->v[li].data() : nullptr;
  qp.T = T;
  qp.pos0 = ci ? pos_of(*ci) : nullptr;
  qp.H = static_cast<int>(c.n_head);
  qp.KV = static_cast<int>(c.n_head_kv);
  qp.hd = static_cast<int>(c.head_dim);
  qp.n_rot = static_cast<int>(c.n_rot);
  qp.eps = static_cast<float>(c.rms_eps);
  qp.theta = c.rope_theta;
  // a decode token: its q / k preparation, K / V store and the combine inside one attention
  // launch (attention.cuh; the same bits as these three launches)
  const bool one_launch = T == 1 || batch;
  if (!one_launch) cuda::qk_prep_run(qp, s);
  cuda::AttnParams ap;
  ap.q = qp.q;
  ap.k_cache = qp.k_cache;
  ap.v_cache = qp.v_cache;
  ap.gate = A.wgate.empty() ? nullptr : ws.gate.data() + r0 * qd;
  ap.out = ws.o.data() + r0 * qd;
  ap.work = ws.work.data();
  ap.T = T;
  ap.pos0 = qp.pos0;
  ap.ctx_bound = ctx_bound;
  ap.H = qp.H;
  ap.KV = qp.KV;
  ap.hd = qp.hd;
  ap.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(c.head_dim)));
  ap.out_q = attn_q_in_combine(L, c) ? ws.oq.data() + r0 * qd / 32 : nullptr;
  if (one_launch) {
    ap.prep = qp;
    ap.arrivals = batch ? batch_arrivals.data() : ws.attn_arrivals.data();
    ap.seqs = batch;
  } else if (arms.prefill_attn == PrefillAttn::flash && cuda::flash_attention_supports(ap.hd)) {
    ++counters.flash_attn_launches;  // the flash arm: calls of more than one token (attention.cuh)
    return cuda::flash_attention_run(ap, s);
  }
  cuda::attention_run(ap, s);
}

void Model::Impl::attention_output(DevLayer& L, int64_t T) {
  const int64_t qd = c.n_head * c.head_dim;
  const DMat& wo = L.attn->wo.m;
  if (cuda::uses_q8_1(wo.type) && !attn_q_in_combine(L, c))
    rowop(cuda::RowOp::Identity, ws.o.data(), qd, nullptr, 0, nullptr, nullptr, ws.oq.data(), T, qd);
  mv(wo, ws.o.data(), qd, ws.oq.data(), ws.x.data(), c.n_embd, T, true);
}

// --- Gated DeltaNet, in the same three parts ------------------------------------------------------

void Model::Impl::gdn_project(DevLayer& L, int64_t T) {
  auto& G = *L.gdn;
  mv_group({{&G.wqkv, ws.qkv.data()}, {&G.wz, ws.z.data()}, {&G.wb, ws.b.data()}, {&G.wa, ws.a.data()}}, ws.h.data(),
           c.n_embd, ws.hq.data(), T);
}

// Rows [r0, r0 + T) of the projections: T tokens of the sequence of cache ci. Or, with `batch`
// (ci null, T = 1, r0 = 0): the decode tokens of n_seq sequences, rows 0..n_seq-1, their caches
// in batch[0..n_seq), in one launch per kernel, every head shape.
void Model::Impl::gdn_core(DevLayer& L, Cache::Impl* ci, int64_t li, int64_t T, int64_t r0, const cuda::GdnSeq* batch,
                           int n_seq) {
  const int64_t cd = c.ssm_conv_dim(), vd = c.ssm_value_dim(), nv = c.ssm_n_v_heads;
  const auto& G = *L.gdn;
  cuda::GdnConvParams cp;
  cp.x = ws.qkv.data() + r0 * cd;
  cp.taps = G.conv.data();
  cp.state = ci ? ci->conv[li].data() : nullptr;
  cp.pos0 = ci ? pos_of(*ci) : nullptr;
  cp.y = ws.qkvc.data() + r0 * cd;
  cp.T = T;
  cp.cd = cd;
  cp.K = static_cast<int>(c.ssm_conv_kernel);
  cuda::GdnParams gp;
  gp.qkv = cp.y;
  gp.b = ws.b.data() + r0 * nv;
  gp.a = ws.a.data() + r0 * nv;
  gp.ssm_a = G.ssm_a.data();
  gp.dt_bias = G.dt_bias.data();
  gp.state = ci ? ci->state[li].data() : nullptr;
  gp.o = ws.o.data() + r0 * vd;
  gp.T = T;
  gp.nk = static_cast<int>(c.ssm_n_k_heads);
  gp.nv = static_cast<int>(nv);
  gp.dk = static_cast<int>(c.ssm_d_k);
  gp.dv = static_cast<int>(c.ssm_d_v);
  gp.tiled = weights.tiled;
  gp.seqs = batch;
  gp.n_seq = n_seq;
  Q81* const oq_rows = gdn_q_in_norm(L, c) ? ws.oq.data() + r0 * vd / 32 : nullptr;
  // a decode token: the conv, the recurrence and the gated norm in one launch where the head
  // shape has that kernel (bitwise the same as the three launches below)
  const cuda::GdnOutNorm gn{ws.z.data() + r0 * vd, G.norm.data(), static_cast<float>(c.rms_eps), gp.o, oq_rows};
  // a batched step: one launch per kernel for all n_seq sequences, each row exactly as its own
  // call computes it (the fused kernel needs K = 4 there; else the three launches, batched)
  cp.seqs = batch;
  cp.n_seq = n_seq;
  const bool fuse = !batch || c.ssm_conv_kernel == 4;
  if (!fuse || !cuda::gdn_step_norm_run(gp, gn, s, &cp)) {
    cuda::gdn_conv_run(cp, s);
    if (T > 1 && arms.gdn_prefill == GdnPrefill::chunked) {
      cuda::gdn_chunked_run(gp, ws.work.data(), ws.cap_work, s);
      ++counters.gdn_chunked_launches;
    } else {
      cuda::gdn_recurrent_run(gp, s);
    }
    rowop(cuda::RowOp::RmsNormGated, gp.o, c.ssm_d_v, gn.z, c.ssm_d_v, G.norm.data(), gp.o, oq_rows,
          (batch ? n_seq : T) * nv, c.ssm_d_v);
  }
}

// A batched decode step's sequence tables, [layer][sequence] (GDN and KDA layers: state, ring,
// position; attention layers: K / V cache, position; MLA layers: their caches, position),
// uploaded once per step before its first launch, so each GDN, KDA, attention and MLA layer takes
// all sequences in one launch per kernel (gdn_core, kda_core, attention_core, mla_core).
// Null tables when a sequence feeds more than one row or there is one sequence.
Model::Impl::SeqTables Model::Impl::upload_seq_tables(std::span<const Seq> seqs, int64_t rows) {
  if (rows != 1 || seqs.size() < 2) return {};
  const size_t B = seqs.size(), n = static_cast<size_t>(c.n_layer) * B;
  if (seq_tables.gdn.size() < n) {
    seq_tables.gdn = DeviceBuffer<cuda::GdnSeq>(*e, n);
    seq_tables.attn = DeviceBuffer<cuda::AttnSeq>(*e, n);
    seq_tables.mla = DeviceBuffer<cuda::MlaSeq>(*e, n);
  }
  seq_tables.gdn_host.assign(n, cuda::GdnSeq{});
  seq_tables.attn_host.assign(n, cuda::AttnSeq{});
  seq_tables.mla_host.assign(n, cuda::MlaSeq{});
  for (size_t li = static_cast<size_t>(l0); li < static_cast<size_t>(l1); ++li) {  // this stage's layers
    const LayerKind kind = weights.layers[li].kind;
    for (size_t q = 0; q < B; ++q) {
      Cache::Impl& ci = *seqs[q].ci;
      if (kind == LayerKind::Linear || kind == LayerKind::Kda)
        seq_tables.gdn_host[li * B + q] = {ci.state[li].data(), ci.conv[li].data(), pos_of(ci)};
      if (kind == LayerKind::Attention)
        seq_tables.attn_host[li * B + q] = {ci.k[li].data(), ci.v[li].data(), pos_of(ci)};
      if (kind == LayerKind::Mla)
        seq_tables.mla_host[li * B + q] = {.k = ci.k[li].data(),
                                           .v = ci.v[li].data(),
                                           .lat = ci.lat[li].data(),
                                           .index_k = ci.index_k[li].data(),
                                           .index_gate = ci.index_gate[li].data(),
                                           .pool_rows = ci.pool_rows[li].data(),
                                           .pos0 = pos_of(ci)};
    }
  }
  copy_to_device(seq_tables.gdn.data(), seq_tables.gdn_host.data(), sizeof(cuda::GdnSeq) * n, e->stream());
  copy_to_device(seq_tables.attn.data(), seq_tables.attn_host.data(), sizeof(cuda::AttnSeq) * n, e->stream());
  copy_to_device(seq_tables.mla.data(), seq_tables.mla_host.data(), sizeof(cuda::MlaSeq) * n, e->stream());
  // the batched attention's [B, H] arrival counters (zero, and left zero by every launch)
  const size_t arrivals = B * static_cast<size_t>(std::max<int64_t>(c.n_head, 1));
  if (batch_arrivals.size() < arrivals) {
    batch_arrivals = DeviceBuffer<uint32_t>(*e, arrivals);
    batch_arrivals.fill_bytes(0);
  }
  return {seq_tables.gdn.data(), seq_tables.attn.data(), seq_tables.mla.data()};
}

void Model::Impl::gdn_output(DevLayer& L, int64_t T) {
  const int64_t vd = c.ssm_value_dim();
  const DMat& wout = L.gdn->wout.m;
  if (cuda::uses_q8_1(wout.type) && !gdn_q_in_norm(L, c))
    rowop(cuda::RowOp::Identity, ws.o.data(), vd, nullptr, 0, nullptr, nullptr, ws.oq.data(), T, vd);
  mv(wout, ws.o.data(), vd, ws.oq.data(), ws.x.data(), c.n_embd, T, true);
}

// --- the DSA lightning indexer's selection (GLM-5's MLA layers, DeepSeek-V4's CSA layers) -----------

// Scores and top-k of T query rows over the keys each sees ((position + 1) / ratio of them), a
// chunk of queries at a time (Workspace::mla_score_rows: the scores of a chunk stay in `work`), the
// grid sized for contexts up to ctx_bound; the kernels read the cache's device position.
void Model::Impl::indexer_topk(const IndexerRows& x, const int64_t* pos_dev, int64_t T, int64_t ctx_bound) {
  const int64_t keys_bound = std::max<int64_t>(ctx_bound / x.ratio, 1);
  const int64_t chunk = Workspace::mla_score_rows(T, keys_bound);
  const int topk = x.topk > 0 ? x.topk : static_cast<int>(c.dsa_topk);
  for (int64_t c0 = 0; c0 < T; c0 += chunk) {
    const int64_t n = std::min(chunk, T - c0);
    cuda::DsaScoreParams sp;
    sp.q = x.q + c0 * x.n_head * x.head_dim;
    sp.w = x.w + c0 * x.n_head;
    sp.k = x.keys;
    sp.scores = ws.work.data();
    sp.T = n;
    // a bound: the kernels read the cache's device position (a batched step's rows each sit
    // anywhere below ctx_bound)
    sp.pos0 = x.seqs ? ctx_bound - n : ctx_bound - T + c0;
    sp.pos_dev = pos_dev;
    sp.row0 = c0;
    sp.ld = keys_bound;
    sp.n_head = x.n_head;
    sp.head_dim = x.head_dim;
    sp.qk_scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(x.head_dim)));
    sp.w_scale = x.w_scale;
    sp.ratio = x.ratio;
    sp.seqs = x.seqs;
    sp.pooled = x.pooled;
    cuda::dsa_score_run(sp, s);
    cuda::DsaSelectParams xp;
    xp.scores = sp.scores;
    xp.sel = x.sel + c0 * topk;
    xp.n_sel = x.n_sel + c0;
    xp.T = n;
    xp.pos0 = sp.pos0;
    xp.pos_dev = pos_dev;
    xp.row0 = c0;
    xp.ld = sp.ld;
    xp.topk = topk;
    xp.ratio = x.ratio;
    xp.seqs = x.seqs;
    cuda::dsa_select_run(xp, s);
  }
}

// --- multi-head latent attention with the DSA indexer, in the same three parts ------------------------
// Every projection, norm and rotation of the oracle's mla() in its order; the cache keeps the
// expanded keys and values, so the attention is the oracle's sum over the selected positions, and
// the latent rows, which a one-token call attends over under mla_decode = latent (the absorbed
// form: mla.cuh).

void Model::Impl::mla_project(DevLayer& L, int64_t T) {
  const auto& A = *L.mla;
  const int64_t D = c.n_embd, qr = c.mla_q_rank, kvr = c.mla_kv_rank;
  if (L.dsa && c.dsa_kpool > 0)
    mv_group({{&A.wq_a, ws.ql.data()},
              {&A.wkv_a, ws.kva.data()},
              {&L.dsa->wk, ws.ik.data()},
              {&L.dsa->weights, ws.iw.data()},
              {&L.dsa->kpool_gate, ws.pig.data()}},
             ws.h.data(), D, ws.hq.data(), T);
  else if (L.dsa)
    mv_group({{&A.wq_a, ws.ql.data()},
              {&A.wkv_a, ws.kva.data()},
              {&L.dsa->wk, ws.ik.data()},
              {&L.dsa->weights, ws.iw.data()}},
             ws.h.data(), D, ws.hq.data(), T);
  else
    mv_group({{&A.wq_a, ws.ql.data()}, {&A.wkv_a, ws.kva.data()}}, ws.h.data(), D, ws.hq.data(), T);
  latent_norm(ws.ql.data(), qr, A.q_a_norm.data(), ws.ql.data(), ws.qlq.data(), T, qr);
  latent_norm(ws.kva.data(), kvr + c.n_rot, A.kv_a_norm.data(), ws.lat.data(), ws.latq.data(), T, kvr);
  if (L.dsa)
    mv_group({{&A.wq_b, ws.q.data()}, {&L.dsa->wq_b, ws.iq.data()}}, ws.ql.data(), qr, ws.qlq.data(), T);
  else
    mv(A.wq_b.m, ws.ql.data(), qr, ws.qlq.data(), ws.q.data(), A.wq_b.m.rows, T, false);
  mv(A.wkv_b.m, ws.lat.data(), kvr, ws.latq.data(), ws.kvb.data(), A.wkv_b.m.rows, T, false);
}

// Rows [r0, r0 + T): T tokens of the sequence of cache ci. Or, with `batch` (ci null, r0 = 0,
// ctx_bound the largest of the sequences'): the decode tokens of T sequences, row t sequence t's
// at its own position into its own caches (batch[t]), every kernel one launch for all rows, each
// row's bits those of its own launches. A layer without an indexer attends over the selection its
// rows got in the layer before (sel / n_sel are per step row). GLM-5's hybrid pools the indexer
// keys: the pools this call closes, the best pools of each query, then their tokens and the
// query's open tail as its selection.
void Model::Impl::mla_core(DevLayer& L, Cache::Impl* ci, int64_t li, int64_t T, int64_t ctx_bound, int64_t r0,
                           const cuda::MlaSeq* batch) {
  const int H = static_cast<int>(c.n_head), hd = static_cast<int>(c.head_dim), dv = static_cast<int>(c.mla_d_v);
  const int ni = static_cast<int>(c.dsa_n_head), hi = static_cast<int>(c.dsa_head_dim);
  const int topk = static_cast<int>(c.dsa_sel_width()), P = static_cast<int>(c.dsa_kpool);
  const size_t l = static_cast<size_t>(li);
  // one sequence's buffers, or (batch) none: the kernels read batch[t]'s
  auto cache = [&](std::vector<DeviceBuffer<float>> Cache::Impl::*buf) { return ci ? (ci->*buf)[l].data() : nullptr; };
  const int64_t* const pos = ci ? pos_of(*ci) : nullptr;
  cuda::MlaPrepParams pp;
  pp.q = ws.q.data() + r0 * H * hd;
  pp.kva = ws.kva.data() + r0 * (c.mla_kv_rank + c.n_rot);
  pp.kvb = ws.kvb.data() + r0 * H * (c.mla_d_nope + dv);
  pp.k_cache = cache(&Cache::Impl::k);
  pp.v_cache = cache(&Cache::Impl::v);
  pp.lat = ws.lat.data() + r0 * c.mla_kv_rank;
  pp.lat_cache = cache(&Cache::Impl::lat);
  pp.pos0 = pos;
  pp.T = T;
  pp.H = H;
  pp.dn = static_cast<int>(c.mla_d_nope);
  pp.n_rot = static_cast<int>(c.n_rot);
  pp.dv = dv;
  pp.kv_rank = static_cast<int>(c.mla_kv_rank);
  pp.theta = c.rope_theta;
  pp.seqs = batch;
  if (L.dsa) {
    pp.iq = ws.iq.data() + r0 * ni * hi;
    pp.iw = ws.iw.data() + r0 * ni;
    pp.ik = ws.ik.data() + r0 * hi;
    pp.k_norm = L.dsa->k_norm.data();
    pp.k_bias = L.dsa->k_norm_bias.data();
    pp.index_k = cache(&Cache::Impl::index_k);
    pp.ni = ni;
    pp.hi = hi;
    pp.w_scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(ni)));
    pp.eps = ModelConfig::kMlaNormEps;
    if (P > 0) {
      pp.ig = ws.pig.data() + r0 * hi;
      pp.ape = L.dsa->kpool_ape.data();
      pp.index_gate = cache(&Cache::Impl::index_gate);
      pp.kpool = P;
    }
  }
  cuda::mla_prep_run(pp, s);
  int32_t* sel = ws.sel.data() + r0 * topk;
  int32_t* n_sel = ws.n_sel.data() + r0;
  if (L.dsa && P > 0) {
    cuda::mla_kpool_run({.index_k = pp.index_k,
                         .index_gate = pp.index_gate,
                         .rows = cache(&Cache::Impl::pool_rows),
                         .pos0 = pos,
                         .T = T,
                         .hi = hi,
                         .kpool = P,
                         .seqs = batch},
                        s);
    const int pools = static_cast<int>(c.dsa_topk) / P;
    int32_t* psel = ws.psel.data() + r0 * pools;
    int32_t* n_psel = ws.n_psel.data() + r0;
    indexer_topk({.q = pp.iq,
                  .w = pp.iw,
                  .keys = cache(&Cache::Impl::pool_rows),
                  .n_head = ni,
                  .head_dim = hi,
                  .ratio = P,
                  .sel = psel,
                  .n_sel = n_psel,
                  .topk = pools,
                  .seqs = batch,
                  .pooled = true},
                 pos, T, ctx_bound);
    cuda::dsa_expand_pools_run({.psel = psel,
                                .n_psel = n_psel,
                                .pools = pools,
                                .kpool = P,
                                .sel = sel,
                                .n_sel = n_sel,
                                .width = topk,
                                .pos_dev = pos,
                                .T = T,
                                .seqs = batch},
                               s);
  } else if (L.dsa) {
    indexer_topk({.q = pp.iq,
                  .w = pp.iw,
                  .keys = pp.index_k,
                  .n_head = ni,
                  .head_dim = hi,
                  .sel = sel,
                  .n_sel = n_sel,
                  .seqs = batch},
                 pos, T, ctx_bound);
  }
  cuda::SparseAttnParams ap;
  ap.q = pp.q;
  ap.k_cache = pp.k_cache;
  ap.v_cache = pp.v_cache;
  ap.sel = sel;
  ap.n_sel = n_sel;
  ap.out = ws.o.data() + r0 * H * dv;
  ap.T = T;
  ap.topk = topk;
  ap.H = H;
  ap.KVH = H;
  ap.dk = hd;
  ap.dv = dv;
  ap.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(hd)));
  ap.seqs = batch;
  // one token per sequence: a decode call, or a batched step's
  if ((T == 1 || batch) && arms.mla_decode == MlaDecode::latent) return mla_latent_attention(L, ci, li, ap);
  cuda::sparse_attention_run(ap, s);
}

// The absorbed form of one token per sequence's attention (mla_decode = latent): the heads'
// latent queries, the attention over the latent rows as one kv head (values: the rows' first
// kv_rank values), the heads' outputs out through W_UV into ap.out. ap: the expanded form's
// parameters (with a batched step's table: each row its own sequence's latent rows).
void Model::Impl::mla_latent_attention(DevLayer& L, Cache::Impl* ci, int64_t li, cuda::SparseAttnParams ap) {
  const int kvr = static_cast<int>(c.mla_kv_rank), lw = kvr + static_cast<int>(c.n_rot);
  float* ql = ws.work.data();         // [T, H, kv_rank + n_rot] (Workspace::ensure's mla_latent)
  float* ol = ql + ap.T * ap.H * lw;  // [T, H, kv_rank]
  float* split = ol + ap.T * ap.H * kvr;
  const cuda::MlaAbsorbParams ab{.wkv_b = L.mla->wkv_b.m,
                                 .q = ap.q,
                                 .ql = ql,
                                 .ol = ol,
                                 .o = ap.out,
                                 .T = ap.T,
                                 .H = ap.H,
                                 .dn = static_cast<int>(c.mla_d_nope),
                                 .n_rot = static_cast<int>(c.n_rot),
                                 .dv = ap.dv,
                                 .kv_rank = kvr,
                                 .head_shift = brk.mla_latent_wrong_head ? 1 : 0};
  cuda::mla_absorb_q_run(ab, s);
  ap.q = ql;
  ap.k_cache = ap.v_cache = ci ? ci->lat[static_cast<size_t>(li)].data() : nullptr;
  ap.latent = true;
  ap.out = ol;
  ap.KVH = 1;
  ap.dk = lw;
  ap.dv = kvr;
  ap.ld_k = ap.ld_v = lw;
  ap.split_work = split;  // every head reads the same rows: the split form reads them once per group
  ap.split_work_floats = ws.cap_work - (split - ws.work.data());
  cuda::sparse_attention_run(ap, s);
  cuda::mla_absorb_o_run(ab, s);
  ++counters.mla_latent_launches;
}

void Model::Impl::mla_output(DevLayer& L, int64_t T, float* y, bool add) {
  const int64_t vd = c.n_head * c.mla_d_v;
  const DMat& wo = L.mla->wo.m;
  if (cuda::uses_q8_1(wo.type))
    rowop(cuda::RowOp::Identity, ws.o.data(), vd, nullptr, 0, nullptr, nullptr, ws.oq.data(), T, vd);
  mv(wo, ws.o.data(), vd, ws.oq.data(), y, c.n_embd, T, add);
}

// --- Kimi delta attention (GLM-5's hybrid), in the same three parts -----------------------------------
// The oracle's ops::kda in its order: q, k, v, the gates' low-rank rows and beta's logits from h;
// the gates' full rows; per sequence the conv (GDN's ring), the recurrence with the decay per key
// channel; the output norm gated by sigmoid; the output projection.

void Model::Impl::kda_project(DevLayer& L, int64_t T) {
  const auto& K = *L.kda;
  const int64_t D = c.n_embd, hd = c.ssm_value_dim(), d = c.ssm_d_v, cd = c.ssm_conv_dim();
  // q | k | v side by side in ws.qkv (the conv's channel order), each at row stride cd
  for (auto [m, off] : {std::pair{&K.wq, int64_t{0}}, std::pair{&K.wk, hd}, std::pair{&K.wv, 2 * hd}})
    mv(m->m, ws.h.data(), D, ws.hq.data(), ws.qkv.data() + off, cd, T, false);
  mv_group({{&K.f_a, ws.kfa.data()}, {&K.g_a, ws.kga.data()}, {&K.wb, ws.b.data()}}, ws.h.data(), D, ws.hq.data(), T);
  const bool qf = cuda::uses_q8_1(K.f_b.m.type), qg = cuda::uses_q8_1(K.g_b.m.type);
  if (qf) rowop(cuda::RowOp::Identity, ws.kfa.data(), d, nullptr, 0, nullptr, nullptr, ws.kfaq.data(), T, d);
  if (qg) rowop(cuda::RowOp::Identity, ws.kga.data(), d, nullptr, 0, nullptr, nullptr, ws.kgaq.data(), T, d);
  mv(K.f_b.m, ws.kfa.data(), d, ws.kfaq.data(), ws.kf.data(), hd, T, false);
  mv(K.g_b.m, ws.kga.data(), d, ws.kgaq.data(), ws.kg.data(), hd, T, false);
}

// Rows [r0, r0 + T): T tokens of the sequence of cache ci.
// Rows [r0, r0 + T) of the projections: T tokens of the sequence of cache ci. Or, with `batch`
// (ci null, T = 1, r0 = 0): the decode tokens of n_seq sequences, rows 0..n_seq-1, their caches
// in batch[0..n_seq), the conv and the recurrence one launch each (every sequence's bits those of
// its own launches).
void Model::Impl::kda_core(DevLayer& L, Cache::Impl* ci, int64_t li, int64_t T, int64_t r0, const cuda::GdnSeq* batch,
                           int n_seq) {
  const auto& K = *L.kda;
  const int64_t cd = c.ssm_conv_dim(), hd = c.ssm_value_dim(), H = c.ssm_n_v_heads;
  const size_t l = static_cast<size_t>(li);
  cuda::GdnConvParams cp;
  cp.x = ws.qkv.data() + r0 * cd;
  cp.taps = K.conv.data();
  cp.state = ci ? ci->conv[l].data() : nullptr;
  cp.pos0 = ci ? pos_of(*ci) : nullptr;
  cp.y = ws.qkvc.data() + r0 * cd;
  cp.T = T;
  cp.cd = cd;
  cp.K = static_cast<int>(c.ssm_conv_kernel);
  cp.seqs = batch;
  cp.n_seq = n_seq;
  cuda::gdn_conv_run(cp, s);
  cuda::KdaParams kp;
  kp.qkv = cp.y;
  kp.f = ws.kf.data() + r0 * hd;
  kp.b = ws.b.data() + r0 * H;
  kp.dt_bias = K.dt_bias.data();
  kp.a_log = K.a_log.data();
  kp.bound = static_cast<float>(c.kda_gate_bound);
  kp.state = ci ? ci->state[l].data() : nullptr;
  kp.o = ws.o.data() + r0 * hd;
  kp.T = T;
  kp.H = static_cast<int>(H);
  kp.d = static_cast<int>(c.ssm_d_v);
  kp.seqs = batch;
  kp.n_seq = n_seq;
  if (T > 1 && arms.gdn_prefill == GdnPrefill::chunked) {  // the delta rule's prefill arm, KDA's form
    cuda::kda_chunked_run(kp, ws.work.data(), ws.cap_work, s);
    ++counters.gdn_chunked_launches;
  } else {
    cuda::kda_recurrent_run(kp, s);
  }
}

void Model::Impl::kda_output(DevLayer& L, int64_t T, float* y, bool add) {
  const auto& K = *L.kda;
  const int64_t hd = c.ssm_value_dim(), d = c.ssm_d_v;
  const bool q = cuda::uses_q8_1(K.wo.m.type) && d % 32 == 0;
  rowop(cuda::RowOp::RmsNormGatedSigmoid, ws.o.data(), d, ws.kg.data(), d, K.norm.data(), ws.o.data(),
        q ? ws.oq.data() : nullptr, T * c.ssm_n_v_heads, d);
  if (cuda::uses_q8_1(K.wo.m.type) && !q)
    rowop(cuda::RowOp::Identity, ws.o.data(), hd, nullptr, 0, nullptr, nullptr, ws.oq.data(), T, hd);
  mv(K.wo.m, ws.o.data(), hd, ws.oq.data(), y, c.n_embd, T, add);
}

// --- FFN and MoE -------------------------------------------------------------------------------------

// The SwiGLU of rows of n in place: ws.fg = silu(ws.fg) * ws.fu (and its q8_1 in ws.fq), clamped
// where the model clamps its experts (ModelConfig::swiglu_limit: DeepSeek-V4).
void Model::Impl::glu(int64_t rows, int64_t n) {
  cuda::RowOpParams p;
  p.op = c.swiglu_limit > 0 ? cuda::RowOp::SwigluClamped : cuda::RowOp::Swiglu;
  p.limit = static_cast<float>(c.swiglu_limit);
  p.x = ws.fg.data();
  p.ld_x = n;
  p.z = ws.fu.data();
  p.ld_z = n;
  p.y = ws.fg.data();
  p.ld_y = n;
  p.q = n % 32 == 0 ? ws.fq.data() : nullptr;
  p.rows = rows;
  p.n = n;
  cuda::rowop_run(p, s);
}

// SwiGLU FFN of n_out rows: gate/up from h (row a / x_div), down into y.
void Model::Impl::swiglu(const DevMatrix& g, const DevMatrix& u, const DevMatrix& d, int64_t n_out, int x_div,
                         const int32_t* slab, float* y, bool add) {
  const int64_t D = c.n_embd, F = g.m.slab_rows;
  mv_group({{&g, ws.fg.data()}, {&u, ws.fu.data()}}, ws.h.data(), D, ws.hq.data(), n_out, x_div, slab);
  glu(n_out, F);
  mv(d.m, ws.fg.data(), F, ws.fq.data(), y, D, n_out, add, 1, slab);
}

// The experts' SwiGLU over the T*K routed vectors, each Q8_0 / NVFP4 expert matrix as a GEMM
// grouped by expert (the GEMM arm): every vector's rows by the GEMM's chain, as a dense GEMM
// would give them; other types by the routed mat-vec.
bool Model::Impl::use_routed_gemm(const DevMatrix& m, int64_t T) const {
  return arms.prefill_matmul == PrefillMatmul::mma && !batch_step && T >= gemm_min_tokens &&
         (m.m.type == DType::Q8_0 || m.m.type == DType::NVFP4) && cuda::gemm_supported(m.m.type, m.m.cols);
}

// Routed GEMMs of matrices ms (each into its own ys) over one grouping, in one launch.
void Model::Impl::routed_gemm(std::initializer_list<std::pair<const DMat*, float*>> ms, const Q81* xq, int x_div,
                              int64_t ld_y, int64_t n) {
  cuda::GemmParams gs[cuda::gemm_multi];
  int k = 0;
  for (const auto& [m, y] : ms) {
    cuda::GemmParams& g = gs[k++];
    g.w = *m;
    g.xq = xq;
    g.T = n;
    g.y = y;
    g.ld_y = ld_y;
    g.order = ws.group_order.data();
    g.group_start = ws.group_start.data();
    g.n_slab = static_cast<int>(c.n_expert);
    g.tile_slab = ws.tile_slab.data();
    g.tile_start = ws.tile_start.data();
    g.n_tiles = ws.n_tiles.data();
    g.max_tiles = cuda::moe_group_tile_bound(n, g.n_slab, cuda::gemm_routed_tile);
    g.x_div = x_div;
  }
  cuda::gemm_run_multi(gs, k, s);
  ++counters.gemm_launches;
  ++counters.gemm_routed_launches;
}

void Model::Impl::expert_swiglu(const DevLayer& L, int64_t T, int K) {
  const cuda::DevFfn& X = L.moe->experts;
  const int64_t D = c.n_embd, F = X.gate.m.slab_rows, n = T * K;
  const bool gate_up = use_routed_gemm(X.gate, T) && use_routed_gemm(X.up, T), down = use_routed_gemm(X.down, T);
  if (!gate_up && !down) return swiglu(X.gate, X.up, X.down, n, K, ws.ids.data(), ws.ye.data(), false);
  cuda::moe_group_run({ws.ids.data(), n, static_cast<int>(c.n_expert), ws.group_order.data(), ws.group_start.data(),
                       cuda::gemm_routed_tile, ws.tile_slab.data(), ws.tile_start.data(), ws.n_tiles.data()},
                      s);
  if (gate_up) {  // one launch: the two share the grouping and the activations
    routed_gemm({{&X.gate.m, ws.fg.data()}, {&X.up.m, ws.fu.data()}}, ws.hq.data(), K, F, n);
  } else {
    mv_group({{&X.gate, ws.fg.data()}, {&X.up, ws.fu.data()}}, ws.h.data(), D, ws.hq.data(), n, K, ws.ids.data());
  }
  glu(n, F);
  if (down)
    routed_gemm({{&X.down.m, ws.ye.data()}}, ws.fq.data(), 1, D, n);
  else
    mv(X.down.m, ws.fg.data(), F, ws.fq.data(), ws.ye.data(), D, n, false, 1, ws.ids.data());
}

void Model::Impl::ffn_layer(DevLayer& L, int64_t T) {
  if (!L.moe) return swiglu(L.ffn->gate, L.ffn->up, L.ffn->down, T, 1, nullptr, ws.x.data(), true);
  moe_layer(L, T, ws.x.data());
}

void Model::Impl::moe_layer(DevLayer& L, int64_t T, float* out) {
  const int64_t D = c.n_embd;
  const auto& M = *L.moe;
  const int K = static_cast<int>(c.n_expert_used);
  mv(M.router.m, ws.h.data(), D, ws.hq.data(), ws.rl.data(), c.n_expert, T, false);
  if (c.moe_gating == MoeGating::SqrtSoftplus) {  // DeepSeek-V4: score or hash routing (dsv4.cuh)
    const bool hash = M.tid2eid.size() > 0;       // loaded for the hash layers only
    cuda::Dsv4RouteParams rp;
    rp.logits = ws.rl.data();
    rp.bias = hash ? nullptr : M.router_bias.data();
    rp.tid2eid = hash ? M.tid2eid.data() : nullptr;
    rp.tokens = ws.tok.data();
    rp.ids = ws.ids.data();
    rp.weights = ws.wts.data();
    rp.T = T;
    rp.E = static_cast<int>(c.n_expert);
    rp.k = K;
    rp.scale = c.expert_weights_scale;
    cuda::dsv4_route_run(rp, s);
  } else {
    cuda::MoeRouteParams rp;
    rp.logits = ws.rl.data();
    rp.ids = ws.ids.data();
    rp.weights = ws.wts.data();
    rp.T = T;
    rp.E = static_cast<int>(c.n_expert);
    rp.k = K;
    rp.renorm = c.norm_topk;
    if (c.moe_gating == MoeGating::SigmoidGrouped) {
      rp.bias = M.router_bias.data();
      rp.n_group = static_cast<int>(c.n_expert_group);
      rp.topk_group = static_cast<int>(c.n_expert_group_used);
      rp.scale = static_cast<float>(c.expert_weights_scale);
    }
    cuda::moe_route_run(rp, s);
  }
  expert_swiglu(L, T, K);
  const bool shared = !M.shared.empty(), gated = shared && c.shared_expert_gated();
  if (gated) mv(L.shared_gate_row.m, ws.h.data(), D, ws.hq.data(), ws.sg.data(), 1, T, false);
  if (shared) swiglu(M.shared.gate, M.shared.up, M.shared.down, T, 1, nullptr, ws.ysh.data(), false);
  cuda::MoeCombineParams cp;
  cp.y = ws.ye.data();
  cp.weights = ws.wts.data();
  cp.y_shared = shared ? ws.ysh.data() : nullptr;
  cp.sg = gated ? ws.sg.data() : nullptr;
  cp.x = out;
  cp.T = T;
  cp.D = D;
  cp.k = K;
  cuda::moe_combine_run(cp, s);
}

// --- the walk ----------------------------------------------------------------------------------------

void Model::Impl::break_scale(float* x, int64_t n) {
  const int64_t threads = 256, ctas = std::min<int64_t>(cuda::ceil_div(n, threads), 65535);
  cuda::launch_kernel("break_scale_kernel", break_scale_kernel, unsigned(ctas), unsigned(threads), 0, s, x, n,
                      brk.scale_factor);
}

void Model::Impl::embed(int64_t T) {
  cuda::EmbedParams ep;
  ep.table = weights.embed.m;
  ep.tokens = ws.tok.data();
  ep.T = T;
  ep.x = ws.x.data();
  cuda::embed_run(ep, s);
}

void Model::Impl::walk(std::span<const Seq> seqs, int64_t rows, const SeqTables* pre) {
  if (c.is_hyper()) return hyper_walk(seqs, rows, pre);  // residual streams of their own (dsv4_walk.cu)
  const int64_t D = c.n_embd, T = static_cast<int64_t>(seqs.size()) * rows;
  if (l0 == 0) embed(T);  // the first stage; a later stage's x came by hand-over
  const SeqTables tables = pre ? *pre : upload_seq_tables(seqs, rows);
  const int B = static_cast<int>(seqs.size());
  int64_t ctx_max = 0;
  for (const Seq& q : seqs) ctx_max = std::max(ctx_max, q.ctx_bound);
  for (int64_t li = l0; li < l1; ++li) {
    DevLayer& L = weights.layers[static_cast<size_t>(li)];
    norm_quant(ws.x.data(), L.attn_norm.data(), ws.h.data(), ws.hq.data(), T, D);
    if (L.kind == LayerKind::Attention) {
      attention_project(L, T);
      if (tables.attn) {
        attention_core(L, nullptr, li, B, ctx_max, 0, tables.attn + li * B);
        ++counters.batched_cores;
      } else {
        for (size_t q = 0; q < seqs.size(); ++q)
          attention_core(L, seqs[q].ci, li, rows, seqs[q].ctx_bound, static_cast<int64_t>(q) * rows);
      }
      attention_output(L, T);
    } else if (L.kind == LayerKind::Mla) {
      mla_project(L, T);
      if (tables.mla) {
        mla_core(L, nullptr, li, B, ctx_max, 0, tables.mla + li * B);
        ++counters.batched_cores;
      } else {
        for (size_t q = 0; q < seqs.size(); ++q)
          mla_core(L, seqs[q].ci, li, rows, seqs[q].ctx_bound, static_cast<int64_t>(q) * rows);
      }
      mla_output(L, T, ws.x.data(), true);
    } else {
      gdn_project(L, T);
      if (tables.gdn) {
        gdn_core(L, nullptr, li, 1, 0, tables.gdn + li * B, B);
        ++counters.batched_cores;
      } else {
        for (size_t q = 0; q < seqs.size(); ++q) gdn_core(L, seqs[q].ci, li, rows, static_cast<int64_t>(q) * rows);
      }
      gdn_output(L, T);
    }
    norm_quant(ws.x.data(), L.ffn_norm.data(), ws.h.data(), ws.hq.data(), T, D);
    ffn_layer(L, T);
    if (ledger && L.moe) ledger_record(li, seqs, rows);
    if (brk.scale_layer == li) break_scale(ws.x.data(), T * D);  // a canary's defect (Break)
  }
}

// --- a single-sequence step ----------------------------------------------------------------------------

// Host half of a step: checks, scratch sized for T tokens and contexts up to ctx_bound, the
// token ids uploaded (outside any graph, in stream order before it).
// device_token: the one token is the previous greedy step's, already in tok[0] on the device
// (an argmax index: in range), and toks is not read.
void Model::Impl::prepare(std::span<const int32_t> toks, Cache::Impl& ci, int64_t ctx_bound, bool device_token) {
  check_arms();
  const bool chunked = arms.gdn_prefill == GdnPrefill::chunked;
  const int64_t T = device_token ? 1 : static_cast<int64_t>(toks.size());
  const bool latent = arms.mla_decode == MlaDecode::latent && T == 1;
  if (device_token) {
    if (ci.pos + 1 > ci.max_ctx) fail("decode: position ", ci.pos, " is the cache's last (max_ctx ", ci.max_ctx, ")");
  } else {
    c.check_prompt(toks, ci.pos, ci.max_ctx);
  }
  if (T > ws.cap_T) tok_dev = -1;  // the token buffer moves
  each_stage([&](Impl& st) {
    st.ledger_reserve(T * st.moe_layers());
    st.ws.ensure(*st.e, c, T, ctx_bound, chunked, latent);
  });
  if (device_token) return;
  if (T == 1 && tok_dev == toks[0]) return;  // the last greedy step left it there
  tok_host.assign(toks.begin(), toks.end());
  copy_to_device(ws.tok.data(), tok_host.data(), sizeof(int32_t) * static_cast<size_t>(T), e->stream());
  tok_dev = T == 1 ? toks[0] : -1;
}

void Model::Impl::advance_pos(Cache::Impl& ci, int64_t rows) {
  cuda::launch_kernel("advance_pos_kernel", advance_pos_kernel, 1, 1, 0, s, pos_of(ci), rows);
}

// This stage's part of a single-sequence step over T tokens at the cache's device position (the
// whole step for an unsplit model): its layers, then on a stage before the last its position's
// advance; on the last stage the last row's final-normed hidden in hn and its logits in
// `logits`, and the position's advance; greedy: also the token in amax (see the end). Launches
// only (capturable: a decode graph per stage).
void Model::Impl::part(Cache::Impl& ci, int64_t T, int64_t ctx_bound, bool greedy) {
  const int64_t D = c.n_embd;
  const Seq seq[1] = {{&ci, ctx_bound}};
  walk(seq, T);
  if (next) return advance_pos(ci, T);
  norm_quant(ws.x.data() + (T - 1) * D, weights.output_norm.data(), ws.hn.data(), ws.hnq.data(), 1, D);
  if (!greedy) {
    mv(weights.lm_head(), ws.hn.data(), D, ws.hnq.data(), ws.logits.data(), c.n_vocab, 1, false);
    if (T == 1 && brk.bias_id >= 0)  // a canary's defect (Break); off: nothing launched
      cuda::launch_kernel("break_bias_kernel", break_bias_kernel, 1, 1, 0, s, ws.logits.data(), brk.bias_id,
                          brk.bias_value);
    advance_pos(ci, T);
    return;
  }
  // Greedy: the lm_head leaves its warps' bests, and one launch takes the token from them,
  // writes it where the next step's embedding reads it and into the cache's history, and
  // advances the position (the full-vocabulary scan and advance_pos were two launches).
  // (one output vector: never the GEMM, never W4A4 — mv()'s other two forms)
  const cuda::MatvecParams p = mv_params(arms, weights.lm_head(), ws.hn.data(), D, ws.hnq.data(), ws.logits.data(),
                                         c.n_vocab, 1, false, 1, nullptr);
  count_pair32(p);
  const int nb =
      cuda::matvec_run_best(p, arms.decode_matvec, ws.row_best.data(), static_cast<int>(ws.row_best.size()), s);
  cuda::GreedyStep o;
  o.out = ws.amax.data();
  o.next_tok = ws.tok.data();
  o.hist = ci.greedy_hist.data();
  o.pos = pos_of(ci);
  o.advance = T;
  cuda::argmax_step_run(ws.logits.data(), c.n_vocab, nb ? ws.row_best.data() : nullptr, nb, o, s);
}

// After a stage's part (outside any graph): the hand-over to the next stage; on the last stage of
// a split model's greedy step, the token back to where the first stage's embedding reads it.
void Model::Impl::after_part(int64_t T, bool greedy) {
  if (next) return hand_over(T);
  if (greedy && head != this)
    MEMRA_CUDA_CHECK(
        cudaMemcpyPeerAsync(head->ws.tok.data(), head->e->device(), ws.tok.data(), e->device(), sizeof(int32_t), s));
}

// A whole single-sequence step, eager: each stage's part on its stream, then its hand-over.
void Model::Impl::body(Cache::Impl& ci, int64_t T, int64_t ctx_bound, bool greedy) {
  if (!next) {
    mark(false);
    part(ci, T, ctx_bound, greedy);
    return mark(true);
  }
  join();
  for (Impl* st = this; st; st = st->next) {
    const StageDevice on(st->e->device());
    st->mark(false);
    st->part(ci, T, ctx_bound, greedy);
    st->mark(true);
    st->after_part(T, greedy);
  }
}

void Model::Impl::run(std::span<const int32_t> toks, Cache::Impl& ci, bool greedy, bool device_token) {
  const cuda::ScopedLaunchOverlap overlap(arms.launch_overlap);
  ci.has_last_logits = false;
  const int64_t T = device_token ? 1 : static_cast<int64_t>(toks.size());
  prepare(toks, ci, ci.pos + T, device_token);
  const bool w4a4 = arms.prefill_act == PrefillAct::w4a4 && T > 1;
  each_stage([&](Impl& st) {
    st.w4a4_on = w4a4;
    if (!w4a4) return;
    // sized once for the call's widest activation rows (no reallocation between launches)
    const int64_t K = k_used();
    const int64_t widest = std::max({T * c.n_embd, T * std::max(c.n_head * c.head_dim, c.ssm_value_dim()), T * c.n_ff,
                                     T * K * c.n_ff_exp, T * c.n_ff_shexp, T * c.mla_q_rank, T * c.mla_kv_rank,
                                     T * c.n_head * c.mla_d_v, T * c.hc_mult * c.n_embd, T * c.o_groups * c.o_rank});
    if (static_cast<int64_t>(st.ws.x4.size()) < widest / 32)
      st.ws.x4 = DeviceBuffer<cuda::A4>(*st.e, static_cast<size_t>(widest / 32));
  });
  struct Off {
    Impl& m;
    ~Off() {
      m.each_stage([](Impl& st) { st.w4a4_on = false; });
    }
  } off{*this};
  body(ci, T, ci.pos + T, greedy);
  ci.pos += T;
}

}  // namespace memra
