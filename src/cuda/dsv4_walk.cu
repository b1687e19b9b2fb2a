// src/cuda/dsv4_walk.cu — the hyper-connected decoder walk (model_impl.h; the oracle's walk in
// src/oracle/hyper_model.cpp, in the same order) of DeepSeek-V4 (its equations in
// docs/deepseek-v4.md) and GLM-5's hybrid (docs/oracle.md): the residual streams, the
// hyper-connections around each block, the mixer in the walk's three parts (projections of all
// rows, each sequence's core over its own cache, the output projection) — DeepSeek-V4's
// attention, or GLM-5's Kimi delta attention and MLA (layer_walk.cu) — and the FFN, then the
// final collapse. Single-sequence and batched steps both run it (walk() hands over).
#include <algorithm>
#include <cmath>

#include "cuda/dsa.cuh"
#include "cuda/dsv4.cuh"
#include "cuda/embed.cuh"
#include "cuda/model_impl.h"
#include "cuda/moe.cuh"
#include "memra/cuda_check.h"
#include "memra/error.h"

namespace memra {

using cuda::DevLayer;
using cuda::DevMatrix;
using cuda::DMat;

namespace {

const DevMatrix& none() {
  static const DevMatrix m;
  return m;
}

}  // namespace

// The streams X (ws.hcx) collapse into x: X / rms(X) over all N·D values, z = fn · that, the
// weights (a block's pre / post / comb into ws.hmix, or the final hc_head's pre alone) and the
// collapse into ws.x. GLM-5's hybrid's final collapse (hc null) is the streams' mean.
void Model::Impl::hc_collapse(const cuda::DevHyper* hc, int64_t T, bool head) {
  const int64_t D = c.n_embd, N = c.hc_mult, M = head ? N : (2 + N) * N;
  cuda::HcMixParams p;
  if (hc) {
    const bool q = cuda::uses_q8_1(hc->fn.m.type);
    rowop(cuda::RowOp::RmsNorm, ws.hcx.data(), N * D, nullptr, 0, ws.ones.data(), ws.hcn.data(),
          q ? ws.hcnq.data() : nullptr, T, N * D);
    mv(hc->fn.m, ws.hcn.data(), N * D, ws.hcnq.data(), ws.hz.data(), M, T, false);
    p.z = ws.hz.data();
    p.base = hc->base.data();
    p.scale = hc->scale.data();
  }
  p.mean = hc == nullptr;
  p.X = ws.hcx.data();
  p.mix = head ? nullptr : ws.hmix.data();
  p.out = ws.x.data();
  p.T = T;
  p.D = D;
  p.N = static_cast<int>(N);
  p.iters = static_cast<int>(c.hc_iters);
  p.eps = c.hc_eps;
  p.head = head;
  cuda::hc_mix_run(p, s);
}

// A block's input: the collapse, then the block's RMSNorm into ws.h / ws.hq.
void Model::Impl::hc_enter(const cuda::DevHyper& hc, const cuda::DevVec& norm, int64_t T) {
  hc_collapse(&hc, T, false);
  norm_quant(ws.x.data(), norm.data(), ws.h.data(), ws.hq.data(), T, c.n_embd);
}

// The block's output (ws.yb) expands back into the streams with the mix of hc_enter.
void Model::Impl::hc_leave(int64_t T) {
  cuda::HcExpandParams p;
  p.mix = ws.hmix.data();
  p.y = ws.yb.data();
  p.X = ws.hcx.data();
  p.T = T;
  p.D = c.n_embd;
  p.N = static_cast<int>(c.hc_mult);
  cuda::hc_expand_run(p, s);
}

// Every projection of the rows' normed input h: the query latent (normed), the queries (normed
// per head, unweighted), the raw key (normed), the compressors' projections, the indexer's
// queries and head weights.
void Model::Impl::dsv4_project(DevLayer& L, int64_t T) {
  const auto& A = *L.dsv4;
  const int64_t D = c.n_embd, qr = c.mla_q_rank, H = c.n_head, hd = c.head_dim;
  const DevMatrix& ckv = L.compressor ? L.compressor->wkv : none();
  const DevMatrix& cg = L.compressor ? L.compressor->wgate : none();
  mv_group({{&A.wq_a, ws.ql.data()}, {&A.wkv, ws.k.data()}, {&ckv, ws.ckv.data()}, {&cg, ws.cg.data()}}, ws.h.data(), D,
           ws.hq.data(), T);
  if (L.dsv4_indexer) {
    const auto& X = *L.dsv4_indexer;
    mv_group({{&X.weights, ws.iw.data()}, {&X.comp.wkv, ws.ikv.data()}, {&X.comp.wgate, ws.ig.data()}}, ws.h.data(), D,
             ws.hq.data(), T);
  }
  rowop(cuda::RowOp::RmsNorm, ws.ql.data(), qr, nullptr, 0, A.q_a_norm.data(), ws.ql.data(), ws.qlq.data(), T, qr);
  mv_group({{&A.wq_b, ws.q.data()}, {L.dsv4_indexer ? &L.dsv4_indexer->wq_b : &none(), ws.iq.data()}}, ws.ql.data(), qr,
           ws.qlq.data(), T);
  rowop(cuda::RowOp::RmsNorm, ws.q.data(), hd, nullptr, 0, ws.ones.data(), ws.q.data(), nullptr, T * H, hd);
  rowop(cuda::RowOp::RmsNorm, ws.k.data(), hd, nullptr, 0, A.kv_norm.data(), ws.k.data(), nullptr, T, hd);
}

// Rows [r0, r0 + T): T tokens of the sequence of cache ci. The rotations; the raw key stored;
// the compressors take this call's tokens first (a query reads only the rows its own position has
// closed); the indexer's scores and top-k over its closed rows (CSA); the attention; the output's
// rotated slice rotated back.
void Model::Impl::dsv4_core(DevLayer& L, Cache::Impl& ci, int64_t li, int64_t T, int64_t ctx_bound, int64_t r0) {
  const size_t l = static_cast<size_t>(li);
  const Dsv4Attn form = c.dsv4_attn[l];
  const int H = static_cast<int>(c.n_head), hd = static_cast<int>(c.head_dim), rot = static_cast<int>(c.n_rot);
  const int IH = static_cast<int>(c.dsa_n_head), ihd = static_cast<int>(c.dsa_head_dim);
  const double* freq = dsv4_freq[form == Dsv4Attn::Sliding ? 0 : 1].data();
  const double* comp_freq = dsv4_freq[1].data();
  const int64_t* pos = pos_of(ci);
  auto rope = [&](float* x, int heads, int width, const double* f, bool inverse, float* store) {
    cuda::Dsv4RopeParams p;
    p.x = x;
    p.T = T;
    p.heads = heads;
    p.width = width;
    p.n_rot = rot;
    p.inv_freq = f;
    p.pos_dev = pos;
    p.inverse = inverse;
    p.store = store;
    cuda::dsv4_rope_run(p, s);
  };
  rope(ws.q.data() + r0 * H * hd, H, hd, freq, false, nullptr);
  rope(ws.k.data() + r0 * hd, 1, hd, freq, false, ci.k[l].data());
  const int m = static_cast<int>(form == Dsv4Attn::Csa ? c.csa_ratio : c.hca_ratio);
  auto compress = [&](const cuda::DevLayer::Compressor& k, const float* kv, const float* gate, int w, bool overlap,
                      DeviceBuffer<float>& hkv, DeviceBuffer<float>& hgate, DeviceBuffer<float>& rows) {
    const int cw = overlap ? 2 * w : w;
    cuda::Dsv4CompressParams p;
    p.kv = kv + r0 * cw;
    p.gate = gate + r0 * cw;
    p.hist_kv = hkv.data();
    p.hist_gate = hgate.data();
    p.ape = k.ape.data();
    p.norm = k.norm.data();
    p.rows = rows.data();
    p.inv_freq = comp_freq;
    p.n_rot = rot;
    p.pos_dev = pos;
    p.T = T;
    p.m = m;
    p.w = w;
    p.overlap = overlap;
    p.eps = c.rms_eps;
    cuda::dsv4_compress_run(p, s);
  };
  if (L.compressor)
    compress(*L.compressor, ws.ckv.data(), ws.cg.data(), hd, form == Dsv4Attn::Csa, ci.comp_kv[l], ci.comp_gate[l],
             ci.comp_rows[l]);
  const int topk = static_cast<int>(c.dsa_topk);
  int32_t* sel = ws.sel.data() + r0 * topk;
  int32_t* n_sel = ws.n_sel.data() + r0;
  if (L.dsv4_indexer) {
    compress(L.dsv4_indexer->comp, ws.ikv.data(), ws.ig.data(), ihd, true, ci.idx_kv[l], ci.idx_gate[l],
             ci.idx_rows[l]);
    float* iq = ws.iq.data() + r0 * IH * ihd;
    rope(iq, IH, ihd, comp_freq, false, nullptr);
    indexer_topk({.q = iq,
                  .w = ws.iw.data() + r0 * IH,
                  .keys = ci.idx_rows[l].data(),
                  .n_head = IH,
                  .head_dim = ihd,
                  .w_scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(IH))),
                  .ratio = m,
                  .sel = sel,
                  .n_sel = n_sel},
                 pos, T, ctx_bound);
  }
  cuda::Dsv4AttnParams ap;
  ap.q = ws.q.data() + r0 * H * hd;
  ap.k_cache = ci.k[l].data();
  ap.rows = L.compressor ? ci.comp_rows[l].data() : nullptr;
  ap.sel = L.dsv4_indexer ? sel : nullptr;
  ap.n_sel = L.dsv4_indexer ? n_sel : nullptr;
  ap.topk = topk;
  ap.sinks = L.dsv4->sinks.data();
  ap.out = ws.o.data() + r0 * H * hd;
  ap.pos_dev = pos;
  ap.T = T;
  ap.H = H;
  ap.hd = hd;
  ap.window = static_cast<int>(c.sliding_window);
  ap.ratio = m;
  const int64_t rows_read = form == Dsv4Attn::Csa ? topk : form == Dsv4Attn::Hca ? ctx_bound / m : 0;
  ap.max_keys = static_cast<int>(c.sliding_window + rows_read);
  ap.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(hd)));
  cuda::dsv4_attention_run(ap, s);
  rope(ws.o.data() + r0 * H * hd, H, hd, freq, true, nullptr);
}

// The grouped low-rank output: group g of each row's heads through wo_a's slab g (output vector
// t·G + g), then wo_b, into the block's output ws.yb.
void Model::Impl::dsv4_output(DevLayer& L, int64_t T) {
  const auto& A = *L.dsv4;
  const int64_t qd = c.n_head * c.head_dim, G = c.o_groups, GR = G * c.o_rank, in = qd / G;
  const DMat& wo_a = A.wo_a.m;
  if (cuda::uses_q8_1(wo_a.type))
    rowop(cuda::RowOp::Identity, ws.o.data(), qd, nullptr, 0, nullptr, nullptr, ws.oq.data(), T, qd);
  mv(wo_a, ws.o.data(), in, ws.oq.data(), ws.og.data(), c.o_rank, T * G, false, 1, ws.group_slab.data());
  const DMat& wo_b = A.wo_b.m;
  if (cuda::uses_q8_1(wo_b.type))
    rowop(cuda::RowOp::Identity, ws.og.data(), GR, nullptr, 0, nullptr, nullptr, ws.ogq.data(), T, GR);
  mv(wo_b, ws.og.data(), GR, ws.ogq.data(), ws.yb.data(), c.n_embd, T, false);
}

void Model::Impl::hyper_walk(std::span<const Seq> seqs, int64_t rows, const SeqTables* pre) {
  const int64_t D = c.n_embd, N = c.hc_mult, T = static_cast<int64_t>(seqs.size()) * rows;
  if (l0 == 0) {  // the first stage; a later stage's streams came by hand-over
    embed(T);
    cuda::HcExpandParams bp;  // the embedding in every stream
    bp.y = ws.x.data();
    bp.X = ws.hcx.data();
    bp.T = T;
    bp.D = D;
    bp.N = static_cast<int>(N);
    cuda::hc_expand_run(bp, s);
  }
  // a batched step's KDA and MLA layers take all sequences in one launch per kernel
  const SeqTables tables = pre ? *pre : upload_seq_tables(seqs, rows);
  const int B = static_cast<int>(seqs.size());
  int64_t ctx_max = 0;
  for (const Seq& q : seqs) ctx_max = std::max(ctx_max, q.ctx_bound);
  for (int64_t li = l0; li < l1; ++li) {
    DevLayer& L = weights.layers[static_cast<size_t>(li)];
    hc_enter(*L.hc_attn, L.attn_norm, T);
    auto each_seq = [&](auto&& core) {
      for (size_t q = 0; q < seqs.size(); ++q) core(*seqs[q].ci, seqs[q].ctx_bound, static_cast<int64_t>(q) * rows);
    };
    if (L.kind == LayerKind::Dsv4) {
      dsv4_project(L, T);
      each_seq([&](Cache::Impl& ci, int64_t ctx, int64_t r0) { dsv4_core(L, ci, li, rows, ctx, r0); });
      dsv4_output(L, T);
    } else if (L.kind == LayerKind::Kda) {
      kda_project(L, T);
      if (tables.gdn) {
        kda_core(L, nullptr, li, 1, 0, tables.gdn + li * B, B);
        ++counters.batched_cores;
      } else {
        each_seq([&](Cache::Impl& ci, int64_t, int64_t r0) { kda_core(L, &ci, li, rows, r0); });
      }
      kda_output(L, T, ws.yb.data(), false);
    } else {
      mla_project(L, T);
      if (tables.mla) {
        mla_core(L, nullptr, li, B, ctx_max, 0, tables.mla + li * B);
        ++counters.batched_cores;
      } else {
        each_seq([&](Cache::Impl& ci, int64_t ctx, int64_t r0) { mla_core(L, &ci, li, rows, ctx, r0); });
      }
      mla_output(L, T, ws.yb.data(), false);
    }
    hc_leave(T);
    hc_enter(*L.hc_ffn, L.ffn_norm, T);
    // the block output alone (hc_leave mixes it into the streams): the MoE adds into zeros
    if (L.moe) {
      MEMRA_CUDA_CHECK(cudaMemsetAsync(ws.yb.data(), 0, sizeof(float) * static_cast<size_t>(T * D), s));
      moe_layer(L, T, ws.yb.data());
    } else {
      swiglu(L.ffn->gate, L.ffn->up, L.ffn->down, T, 1, nullptr, ws.yb.data(), false);
    }
    hc_leave(T);
    if (ledger && L.moe) ledger_record(li, seqs, rows);
    if (brk.scale_layer == li) break_scale(ws.hcx.data(), T * N * D);  // a canary's defect (Break)
  }
  // the final collapse into x (last stage): the output norm and the lm_head read it as any
  // family's residual
  if (!next) hc_collapse(weights.hc_head ? &*weights.hc_head : nullptr, T, true);
}

}  // namespace memra
