// src/cuda/mmvq.cu — the mat-vec family (see mmvq.cuh).
//
// Variants:
//   v1 mmvq_warp_per_row / dp4a_block_per_row: one templated kernel matvec_kernel<W, kBlock, NT>;
//      a thread handles one unit (Q8_0: 32-value block, NVFP4: 16-value sub-block, float: 8
//      values) per step and keeps NT accumulators (NT output vectors share the weight loads).
//   v2 Q8_0 weight loads as nine aligned 32-bit words + funnel shifts (v1: seventeen 16-bit
//      loads per block); same arithmetic, same bits.
//   v3 m = 1: the unit loop unrolled by 4 (more loads in flight per thread); same bits.
//   v4 NVFP4 nibbles to int8 through __byte_perm tables (common.cuh; v3: a shift per nibble).
//   v5 prefill: 16-token tiles from 16 output vectors on (v4: 8), half the weight passes.
//   v6 fp16 scales through the hardware conversion (dev_fp16_fast), NVFP4 nibbles through
//      e2m1x2_unpack8 (8 nibbles per lookup round), the ue4m3 scale by bit arithmetic: fewer
//      instructions per unit, the same integers and floats, so the same bits. (A variant that
//      staged chunks of 32 units through shared memory with 16-byte loads measured slower on the
//      H200 than v5's direct loads, 3.37 vs 2.68 ms per 9B Q8_0 step, and was dropped.)
//   v7 per-type Unit (load / decode / product); m = 1 loads a group of units per thread before
//      using any (Q8_0 4, NVFP4 8, float 128 bytes), the first group before pdl_wait(), so a
//      short row (the 9B model's 4096-wide NVFP4 rows: 8 units per lane) is in flight whole
//      while the previous kernel drains. v3's unroll let only 4 NVFP4 units (36 bytes) per lane
//      be in flight. Same operations in the same order: same bits.
//   v8 planar weight rows (planar.cuh): Q8_0 qs as two 16-byte loads (v2: nine words + funnel
//      shifts), NVFP4 nibbles as one 8-byte load in value order (e2m1x2_seq8: no reordering
//      permutes) and the scale by the hardware fp16 conversion (ue4m3_x2p8). Same bits.
//   v9 m = 1 with q8_1 activations stages the activation row in shared memory as int8 / f32
//      planes. H200, 9B graph decode: v6 298 / 265 tok/s (Q8_0 / NVFP4), v7 + PDL 296 / 309,
//      v8 305 / 359, v9 303 / 371 (docs/PERF.md).
//   v10 dense m = 1 launches streamed (matvec_stream_kernel): resident warps take rows in turn,
//      the next group's loads issue before the current group's arithmetic. 9B graph decode with
//      the rest of bed8e1b: 324 / 371 tok/s, Q8_0 61% of the read roofline. Same bits.
//   v12 streamed rows of whole groups without per-unit checks, buffers alternated by unrolling,
//      NVFP4 codes split by sign (fewer instructions per unit: ncu had v10's NVFP4 launches
//      issue-bound) and 8 units per lane in flight; scales by bit placement. 9B NVFP4 graph
//      decode 2.72 -> 2.28 ms per step. Same bits.
//   v13 streamed: a lane's activation addresses at fixed strides from its first unit's (v12
//      recomputed xd + (u >> 1) per unit: three integer instructions). H200, 9B graph decode,
//      same-machine A/B: NVFP4 1902 vs 1912 us per step, 35B-A3B 2171 vs 2204, Q8_0 unchanged.
//   Tried after v12 and dropped (same-machine A/B on the H200, 9B NVFP4 graph step; all
//      bit-identical, docs/PERF.md session 6): the GDN conv as the qkv launch's epilogue (every
//      launch of the kernel slowed, 2174 vs 1986 us), SwiGLU as the gate/up launch's epilogue with
//      paired gate/up rows (2380), a row cursor with the scale and residual fetched a step ahead
//      (1939 vs 1899), 4 units at 8 blocks for launches of at most one row per warp (1949 vs
//      1902), whole-row cp.async.bulk L2 prefetches a window of rows ahead (2098-2181 for 12-96 MB
//      windows vs 1920), the first two groups loaded before the wait (1988 vs 1912).
//   v14 streamed Q8_0: a lane's activation blocks staged three at a time, every load before any
//      store (v13 staged one q8_1 block per loop trip: three dependent L2 round trips for a
//      12288-wide row). H200, same-machine A/B of graph decode: 9B Q8_0 2669 vs 2691 us, 0.6B
//      814 vs 823. Same bits.
//   v15 streamed NVFP4: a row's matrix carried from its load to its store, lane 0's epilogue
//      operands loaded with the row's weights (matvec_stream_kernel's kCarry). 9B NVFP4 graph
//      decode 1807 vs 1860 us per step. Same bits.
//   v16 streamed NVFP4 rows of whole 384-unit groups (the 9B's down) at 12 units per lane, 4 blocks
//      per SM: no warp left with 3 groups twice. 1786 vs 1810 us. Same bits.
//   v17 the greedy step's lm_head (kBest, matvec_run_best): lane 0 keeps the best (value, row) of
//      the rows its warp stores and the warps' bests go to argmax_step_run, which reduces a few
//      thousand pairs instead of one block scanning the 248k logits (ncu: 18 us per step). H200,
//      same-process A/B of graph decode: 9B NVFP4 1818 / 1818 vs 1828 / 1823 us per step. Same y.
//   v18 2..4 activation rows (a batched decode step, a short prompt) in one streamed launch
//      (matvec_stream_kernel's NV): each row staged in its own planes, each unit loaded and
//      decoded once for all rows, each output's chain the m = 1 stream's (same bits). Before, they
//      took the token tile, one unit per lane in flight. H200, a batched step at B = 4: 9B NVFP4
//      5894 vs 8419 us, Q8_0 4859 vs 8953, 0.6B 1861 vs 2352. Passes of 4 for 16 rows re-stream
//      the weights and lost to the tile (9B NVFP4 22540 vs 18132 us): more rows stay on the tile.
//   Tried with v17 and dropped: the streamed grid cut to as few warps as keep the most rows per
//      warp (every warp a full last round, e.g. the 9B gate/up's 24576 rows as 2458 warps of 10
//      instead of 2640 of 9 or 10): 9B NVFP4 1846 / 1846 vs 1811 / 1810 us, 0.6B 814 vs 804.
//   Measured after v17 and not taken (branch xp-packed-scales, timing only): a lane's 4 scale bytes
//      of units l + 32 g as one 32-bit load (a scale plane permuted in 128-unit chunks), 94 -> 80
//      registers, so 8-unit rows at 6 blocks per SM: 9B NVFP4 1774 / 1773 vs 1786 / 1789 us per
//      step (graph_stream); at 5 blocks per SM no gain. 0.7 % for a layout the GEMM, dmat_elem and
//      the tiled mat-vec would have to follow. Two rows per warp step sharing the activation loads
//      (branch xp-two-rows, same bits): 1985 (4 units per row, 5 blocks) to 2160 (8 units, 3
//      blocks) vs 1796 us.
//   Tried after v13 and dropped (same-machine A/B on the H200, graph decode us per token, docs/PERF.md
//      session 7): the same staging for NVFP4 (9B 1937 vs 1884, 35B-A3B 2182 vs 2159); the matrix
//      of a warp's row as a monotone cursor instead of a scan from the first matrix, nothing else
//      changed, same 93 registers (9B NVFP4 2014 vs 1882: the kernel's schedule is that fragile);
//      the NVFP4 scale plane staged in lane order, a lane's 8 scales of a group in two 16-byte
//      shared loads (1884 vs 1883); the first step's weight loads issued before the activation
//      stage instead of after it (1942 vs 1880);
//      a decode FFN's SwiGLU as the epilogue of the gate/up launch, three ways, each bitwise equal
//      to the row op in the op test: acquire-release arrival counters per 32-value block (9B NVFP4
//      2333 vs 1876), relaxed counters with the values through sentinel slots (2161 vs 1876; the
//      in-graph timeline had the gate/up launch at 25.4 vs 16.1 us), and no counters, the warp of
//      a block's last up row polling the 64 slots (2232 vs 1888).
//   Tried after v14 and dropped (branch stage-fusion; H200, same-machine A/B of graph decode, us per
//      token, docs/PERF.md session 8): a decode step's RMSNorms (before q/k/v and gate/up) and its
//      SwiGLU (before down) computed in the streamed launch's activation stage instead of their own
//      launches (96 launches fewer per 9B step), with the stream as one block of 20 / 32 warps per
//      SM so that only 132 blocks re-read the op's rows: bitwise right (op- and gate-tested), but
//      9B NVFP4 2179 vs 1879, Q8_0 2773 vs 2677, 0.6B 860 vs 809. Isolated: the one-block shape
//      alone cost 2106 vs 1879 (0.6B 901 vs 809; not the rows' spread over SMs: interleaving a
//      block's warps over the rows measured the same), and the stage on top of it +73 us on 9B
//      NVFP4, -45 on 0.6B; with the v14 shape (~1000 blocks re-reading the rows) 4144 us.
//   Tried with v15 and dropped (branch l2-next; H200, graph decode us per token, docs/PERF.md
//      session 10): the next mat-vec launch's first weights asked of L2 by this launch's blocks as
//      they run out of rows (a bulk prefetch per block, or a line prefetch per thread), so that they
//      would come from DRAM while the tail and the small kernels between run: 2 MB per launch
//      within noise (9B NVFP4 1844 / 1849 vs 1857 / 1853), 8 MB 1887 / 1882 vs 1848 / 1843, 16 MB
//      1998 / 1985, 32 MB 2014 / 2015; 0.6B (8 MB covers most of its matrices) 842 vs 815. Having
//      the next rows in L2 did not shorten the next launch: its ramp is not a DRAM wait.
//   Tried after v12 and dropped: the RMSNorm before a decode group computed inside every block's
//      activation stage instead of in its own launch (bit-identical, op- and gate-tested): each
//      of ~1000 resident blocks re-read the 32 KB of residual and multiplier, and 9B graph decode
//      went 2.27 -> 2.57 ms (NVFP4) and 3.08 -> 3.41 ms (Q8_0).
//   Tried after v12 and dropped: the weights fed by TMA (cp.async.bulk into a 4-tile ring per
//      warp, mbarrier completion, ~140 KB per SM in flight): bit-identical, but 2.41 vs 2.27 ms
//      (9B NVFP4) and 3.11 vs 3.08 ms (Q8_0) per graph step: with the loads in flight no longer
//      the limit, the extra shared-memory loads per unit and the smem-bound occupancy cost more.
//      Also dropped: per-group base pointers for the activation / scale addresses and a stride
//      step to the next row (fewer address instructions per unit on paper): 2.36 ms (NVFP4).
#include <algorithm>

#include "cuda/argmax.cuh"
#include "cuda/common.cuh"
#include "cuda/launch.cuh"
#include "cuda/mmvq.cuh"

namespace memra::cuda {

namespace {

constexpr int kWarpRows = 4;  // mmvq: rows (warps) per block


__device__ __forceinline__ void store(const MatvecParams& p, int64_t i, float v) {
  p.y[i] = p.add_to_y ? __fadd_rn(p.y[i], v) : v;
}

// --- one unit of a row's dot product, per weight type
//
// load() fetches a unit's weight bits, decode() turns them into integers / floats once per unit,
// product() is the unit's contribution against one activation row. Loads are apart from the
// arithmetic so a thread issues a whole group of loads (kGroup units) before it uses any, and the
// first group before pdl_wait(): weights are immutable, so they may stream while the previous
// kernel drains (launch.cuh). None of this changes an operation or its order: same bits.

template <int W> struct Unit;

// Q8_0 x Q8_1 on planar rows: unit = block b of 32 values (two 16-byte loads of qs, one fp16 d);
// isum exact, c = dw * dx, product = c * isum.
template <> struct Unit<3> {
  static constexpr int kGroup = 4;  // 4 x 34 bytes in flight per thread
  struct Raw { uint4 q0, q1; uint32_t d; };
  struct Dec { float dw; int wq[8]; };
  __host__ __device__ static int64_t count(int64_t cols) { return cols / 32; }
  __device__ static void load(Raw& r, const uint8_t* wrow, int64_t cols, int b) {
    const uint4* q = reinterpret_cast<const uint4*>(wrow) + 2 * b;
    r.q0 = q[0];
    r.q1 = q[1];
    r.d = reinterpret_cast<const uint16_t*>(wrow + cols)[b];
  }
  __device__ static Dec decode(const Raw& r) {
    Dec d;
    d.dw = dev_fp16_fast(static_cast<uint16_t>(r.d));
    const uint32_t w[8] = {r.q0.x, r.q0.y, r.q0.z, r.q0.w, r.q1.x, r.q1.y, r.q1.z, r.q1.w};
#pragma unroll
    for (int k = 0; k < 8; ++k) d.wq[k] = static_cast<int>(w[k]);
    return d;
  }
  __device__ static float product(const Dec& d, const MatvecParams& p, int64_t xr, int b) {
    const Q81* xb = p.xq + xr * (p.w.cols / 32) + b;
    const int* xi = reinterpret_cast<const int*>(xb->qs);
    int isum = 0;
#pragma unroll
    for (int k = 0; k < 8; ++k) isum = __dp4a(d.wq[k], xi[k], isum);
    const float c = __fmul_rn(d.dw, dev_fp16_fast(xb->d));
    return __fmul_rn(c, static_cast<float>(isum));
  }
  // The same against the block's staged activation planes: xu points at the unit's 32 int8
  // values in the value plane, du at its f32 scale in the scale plane (unit b: xs + 32 b, xd + b).
  static constexpr float kStagedScale = 1.0f;
  static constexpr int kValues = 32, kUnitsPerScale = 1;
  __device__ static float product_staged(const Raw& r, const int8_t* xu, const float* du) {
    const Dec d = decode(r);
    const int4* q = reinterpret_cast<const int4*>(xu);
    const int4 x0 = q[0], x1 = q[1];
    const int xi[8] = {x0.x, x0.y, x0.z, x0.w, x1.x, x1.y, x1.z, x1.w};
    int isum = 0;
#pragma unroll
    for (int k = 0; k < 8; ++k) isum = __dp4a(d.wq[k], xi[k], isum);
    const float c = __fmul_rn(d.dw, *du);
    return __fmul_rn(c, static_cast<float>(isum));
  }
};

// NVFP4 x Q8_1 on planar rows: unit u = 16-value sub-block (one 8-byte load of nibbles in value
// order, one canonical scale byte). The contract's c = (ue4m3/2) * dx and c * isum are computed
// as c8 = (ue4m3 * 2^-8) * dx and c8 * (isum * 2^7): each a power-of-two rescaling of the same
// real product (no f32 underflow or overflow is reachable: |c8| >= 2^-41, |isum| * 2^7 < 2^22),
// so the same roundings and the same bits, without decoding the scale's special cases.
template <> struct Unit<4> {
  static constexpr int kGroup = 8;  // 8 x 9 bytes in flight per thread: a 4096-wide row in one group
  struct Raw { uint2 q; uint32_t sc; };
  struct Dec { float dw8; int v[4]; };
  __host__ __device__ static int64_t count(int64_t cols) { return cols / 16; }
  __device__ static void load(Raw& r, const uint8_t* wrow, int64_t cols, int u) {
    r.q = reinterpret_cast<const uint2*>(wrow)[u];
    r.sc = wrow[cols / 2 + u];
  }
  __device__ static Dec decode(const Raw& r) {
    Dec d;
    d.dw8 = ue4m3_x2p8(r.sc);
    e2m1x2_seq8(r.q.x, d.v[0], d.v[1]);  // values 0..3, 4..7
    e2m1x2_seq8(r.q.y, d.v[2], d.v[3]);  // values 8..11, 12..15
    return d;
  }
  __device__ static float product(const Dec& d, const MatvecParams& p, int64_t xr, int u) {
    const Q81* xb = p.xq + xr * (p.w.cols / 32) + (u >> 1);  // q8_1 block 2i + s/2
    const int* xi = reinterpret_cast<const int*>(xb->qs + (u & 1) * 16);
    int isum = __dp4a(d.v[0], xi[0], 0);
    isum = __dp4a(d.v[1], xi[1], isum);
    isum = __dp4a(d.v[2], xi[2], isum);
    isum = __dp4a(d.v[3], xi[3], isum);
    const float c8 = __fmul_rn(d.dw8, dev_fp16_fast(xb->d));
    return __fmul_rn(c8, static_cast<float>(isum * 128));
  }
  // Against the staged planes (the m = 1 path), with two changes that cut instructions, not bits:
  //  - the nibbles are split by sign instead of decoded: a byte permute with the raw code as
  //    selector yields |2 e2m1| for a positive code and 0 for a negative one (selector bit 3
  //    replicates the sign of the table byte, which is 0), and the same permute on the code with
  //    its sign flipped yields the negatives' magnitudes, so isum = Σ pos·x - Σ neg·x: the same
  //    exact integer in 23 instructions per sub-block instead of 26 (e2m1x2_seq8's masks, picks
  //    and select permutes go);
  //  - the scales are staged times 2^7 (kStagedScale): c = dw8 * 2^7 dx is exactly 2^7 c8, and
  //    c * isum rounds the same real product as c8 * (isum * 2^7), without the shift.
  // xu points at the unit's 16 int8 values (xs + 16 u), du at its q8_1 block's scale (xd + u / 2).
  static constexpr float kStagedScale = 128.0f;
  static constexpr int kValues = 16, kUnitsPerScale = 2;
  __device__ static float product_staged(const Raw& r, const int8_t* xu, const float* du) {
    constexpr uint32_t kLo = 0x03020100u, kHi = 0x0C080604u;  // |2 e2m1| of codes 0..7
    const int4 x = *reinterpret_cast<const int4*>(xu);
    const uint32_t w0 = r.q.x, w1 = r.q.y, n0 = w0 ^ 0x88888888u, n1 = w1 ^ 0x88888888u;
    int pos = __dp4a(static_cast<int>(prmt(kLo, kHi, w0)), x.x, 0);
    pos = __dp4a(static_cast<int>(prmt(kLo, kHi, w0 >> 16)), x.y, pos);
    pos = __dp4a(static_cast<int>(prmt(kLo, kHi, w1)), x.z, pos);
    pos = __dp4a(static_cast<int>(prmt(kLo, kHi, w1 >> 16)), x.w, pos);
    int neg = __dp4a(static_cast<int>(prmt(kLo, kHi, n0)), x.x, 0);
    neg = __dp4a(static_cast<int>(prmt(kLo, kHi, n0 >> 16)), x.y, neg);
    neg = __dp4a(static_cast<int>(prmt(kLo, kHi, n1)), x.z, neg);
    neg = __dp4a(static_cast<int>(prmt(kLo, kHi, n1 >> 16)), x.w, neg);
    const float c = __fmul_rn(ue4m3_x2p8(r.sc), *du);
    return __fmul_rn(c, static_cast<float>(pos - neg));
  }
};

// NVFP4 x W4A4 activations (W = 5; quant.h dot_nvfp4_fp4act): unit u = 16-value sub-block of
// both, the weight's loaded and decoded as Unit<4>'s, the activations' read decoded from the A4
// block u / 2 (dmat.h): isum = Σ e2m1_doubled(w) e2m1_doubled(a) exact, c = ue4m3_half(w) *
// ue4m3_half(a), product = c * isum. The prefill arm prefill_act = w4a4 (tiles of output
// vectors; never the streamed m = 1 form, never decode).
template <> struct Unit<5> {
  static constexpr int kGroup = Unit<4>::kGroup;
  using Raw = Unit<4>::Raw;
  struct Dec { float sw; int v[4]; };
  __host__ __device__ static int64_t count(int64_t cols) { return cols / 16; }
  __device__ static void load(Raw& r, const uint8_t* wrow, int64_t cols, int u) { Unit<4>::load(r, wrow, cols, u); }
  __device__ static Dec decode(const Raw& r) {
    Dec d;
    d.sw = dev_ue4m3_half(static_cast<uint8_t>(r.sc));
    e2m1x2_seq8(r.q.x, d.v[0], d.v[1]);  // values 0..3, 4..7
    e2m1x2_seq8(r.q.y, d.v[2], d.v[3]);  // values 8..11, 12..15
    return d;
  }
  __device__ static float product(const Dec& d, const MatvecParams& p, int64_t xr, int u) {
    const A4* xb = p.x4 + xr * (p.w.cols / 32) + (u >> 1);
    const int h = u & 1;
    const int* xi = reinterpret_cast<const int*>(xb->qs + 16 * h);
    int isum = __dp4a(d.v[0], xi[0], 0);
    isum = __dp4a(d.v[1], xi[1], isum);
    isum = __dp4a(d.v[2], xi[2], isum);
    isum = __dp4a(d.v[3], xi[3], isum);
    return __fmul_rn(__fmul_rn(d.sw, xb->d[h]), static_cast<float>(isum));
  }
};

// Float weights (W: 0 = F32, 1 = F16, 2 = BF16) x f32 activations: unit = 8 values, the product
// an fma chain from 0.
template <int W> struct Unit {
  static constexpr int kGroup = W == 0 ? 4 : 8;  // 128 bytes in flight per thread
  struct Raw { uint4 a, b; };                     // F32: both; F16 / BF16: a only
  struct Dec { float wv[8]; };
  __host__ __device__ static int64_t count(int64_t cols) { return cols / 8; }
  __device__ static void load(Raw& r, const uint8_t* wrow, int64_t, int u) {
    const uint4* wp = reinterpret_cast<const uint4*>(wrow);
    if constexpr (W == 0) {
      r.a = wp[2 * u];
      r.b = wp[2 * u + 1];
    } else {
      r.a = wp[u];
    }
  }
  __device__ static Dec decode(const Raw& r) {
    Dec d;
    if constexpr (W == 0) {
      const uint32_t ws[8] = {r.a.x, r.a.y, r.a.z, r.a.w, r.b.x, r.b.y, r.b.z, r.b.w};
#pragma unroll
      for (int k = 0; k < 8; ++k) d.wv[k] = __uint_as_float(ws[k]);
    } else {
      const uint32_t ws[4] = {r.a.x, r.a.y, r.a.z, r.a.w};
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        const uint16_t l = static_cast<uint16_t>(ws[k] & 0xffffu), h = static_cast<uint16_t>(ws[k] >> 16);
        d.wv[2 * k] = W == 1 ? dev_fp16(l) : dev_bf16(l);
        d.wv[2 * k + 1] = W == 1 ? dev_fp16(h) : dev_bf16(h);
      }
    }
    return d;
  }
  __device__ static float product(const Dec& d, const MatvecParams& p, int64_t xr, int u) {
    const float4* xp = reinterpret_cast<const float4*>(p.xf + xr * p.ld_xf) + 2 * u;
    const float4 a = xp[0], b = xp[1];
    float pu = 0.0f;
    pu = fmaf(d.wv[0], a.x, pu); pu = fmaf(d.wv[1], a.y, pu); pu = fmaf(d.wv[2], a.z, pu); pu = fmaf(d.wv[3], a.w, pu);
    pu = fmaf(d.wv[4], b.x, pu); pu = fmaf(d.wv[5], b.y, pu); pu = fmaf(d.wv[6], b.z, pu); pu = fmaf(d.wv[7], b.w, pu);
    return pu;
  }
};

// --- the kernel

struct MatvecBatch {
  MatvecParams p[kMatvecMulti];
  unsigned block_start[kMatvecMulti + 1];  // row blocks of p[j]: [block_start[j], block_start[j+1])
  int64_t row_start[kMatvecMulti + 1];     // streamed form: rows of p[j] in the concatenation
  int n;
  RowBest* best;  // streamed form with kBest: [gridDim.x * kWarpRows], a warp's best stored row
};

template <int W, int G, int TPR>
__device__ __forceinline__ void load_group(typename Unit<W>::Raw (&raw)[G], const uint8_t* wrow, int64_t cols, int u0,
                                           int nu) {
#pragma unroll
  for (int g = 0; g < G; ++g)
    if (u0 + g * TPR < nu) Unit<W>::load(raw[g], wrow, cols, u0 + g * TPR);
}

// One q8_1 activation row into shared memory as planes: int8 values [cols], then f32 scales
// [cols / 32] (the fp16 d converted once, times Unit<W>::kStagedScale: a power of two, exact).
// The whole block takes part; the caller syncs. A thread's blocks are loaded kPer at a time, all
// loads before any store: in the streamed form the stage sits between the dependency wait and
// the first product, and a 12288-wide row (3 blocks per thread of 128) staged one block per loop
// trip waited three L2 round trips in a row: Q8_0 takes kPer = 3 there (v14; H200, same-machine
// A/B: 9B Q8_0 graph decode 2669 vs 2691 us per token, 0.6B 814 vs 823). NVFP4 keeps 1 (its
// 93-register stream kernel measured 1937 vs 1884 us per 9B token with 3), as does the grid
// form (its 64-register MoE expert kernels spilled with 3).
template <int W, int kPer = 1>
__device__ __forceinline__ void stage_x(const Q81* xrow, int64_t cols, uint4* planes) {
  const int nb32 = static_cast<int>(cols / 32);
  int8_t* xs_w = reinterpret_cast<int8_t*>(planes);
  float* xd_w = reinterpret_cast<float*>(xs_w + cols);
  for (int b0 = threadIdx.x; b0 < nb32; b0 += kPer * blockDim.x) {
    uint32_t w[kPer][9];  // d | s << 16, then qs
#pragma unroll
    for (int k = 0; k < kPer; ++k) {
      const int b = b0 + k * static_cast<int>(blockDim.x);
      if (b < nb32) {
        const uint32_t* src = reinterpret_cast<const uint32_t*>(xrow + b);
#pragma unroll
        for (int i = 0; i < 9; ++i) w[k][i] = src[i];
      }
    }
#pragma unroll
    for (int k = 0; k < kPer; ++k) {
      const int b = b0 + k * static_cast<int>(blockDim.x);
      if (b < nb32) {
        uint4* dst = reinterpret_cast<uint4*>(xs_w + 32 * b);
        dst[0] = make_uint4(w[k][1], w[k][2], w[k][3], w[k][4]);
        dst[1] = make_uint4(w[k][5], w[k][6], w[k][7], w[k][8]);
        xd_w[b] = __fmul_rn(dev_fp16_fast(static_cast<uint16_t>(w[k][0] & 0xffffu)), Unit<W>::kStagedScale);
      }
    }
  }
}

// Thread t_in_row of a row takes units t_in_row, t_in_row + TPR, ... in that order (the dot
// contract), in groups of G units whose loads issue together; NT output vectors share each
// decoded unit.
// m = 1 caps registers at 64 (8 blocks of 4 warps per SM): a 4096-row matrix is 1024 blocks, and
// they must all be resident at once for the whole matrix to stream in one wave. Token tiles
// (NT = 8, 16) cap at 128 (4 blocks per SM); uncapped, nvcc hoisted 16 activation-row addresses
// and took up to 244 registers (2 blocks per SM).
template <int W, bool kBlock, int NT>
__global__ void __launch_bounds__(kBlock ? 128 : 32 * kWarpRows, NT == 1 ? 8 : 4) matvec_kernel(const __grid_constant__ MatvecBatch batch) {
  using U = Unit<W>;
  constexpr int TPR = kBlock ? 128 : 32;  // threads per row
  constexpr int G = NT == 1 ? U::kGroup : 1;
  int j = 0;
  while (j + 1 < batch.n && blockIdx.x >= batch.block_start[j + 1]) ++j;
  const MatvecParams& p = batch.p[j];
  const unsigned bx = blockIdx.x - batch.block_start[j];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int t_in_row = kBlock ? threadIdx.x : lane;
  const int64_t rows = p.w.slab_rows;
  const int64_t row = kBlock ? bx : static_cast<int64_t>(bx) * kWarpRows + warp;
  const int64_t a0 = static_cast<int64_t>(blockIdx.y) * NT;
  const bool active = row < rows;  // the last mmvq block may hold rows past the end
  // The expert id of a routed launch is written by the router kernel: wait for it first.
  const bool routed = p.slab_of != nullptr;
  if (routed) pdl_wait();
  const int slab = routed ? p.slab_of[a0] : 0;  // NT == 1 whenever slab_of is set
  const uint8_t* wrow = p.w.data + (static_cast<int64_t>(slab) * rows + (active ? row : 0)) * p.w.row_bytes;
  const int nu = static_cast<int>(U::count(p.w.cols));  // < 2^31: rows of at most 2^31 values

  typename U::Raw raw[G];
  if (active) load_group<W, G, TPR>(raw, wrow, p.w.cols, t_in_row, nu);  // weights only: before the wait
  if (!routed) pdl_wait();
  pdl_release();

  // m = 1 with q8_1 activations: the block's activation row staged once in shared memory as an
  // int8 plane and an f32 scale plane (the fp16 d converted once), so a lane reads a unit's
  // activations with one or two 16-byte loads instead of a 32-bit load per 4 values scattered
  // over 36-byte blocks (the L1 traffic that bounded v7). Same integers, same floats.
  constexpr bool kStage = NT == 1 && (W == 3 || W == 4);
  extern __shared__ uint4 x_planes[];
  const int8_t* xs = reinterpret_cast<const int8_t*>(x_planes);
  const float* xd = reinterpret_cast<const float*>(xs + p.w.cols);
  if constexpr (kStage) {
    stage_x<W>(p.xq + (a0 / p.x_div) * (p.w.cols / 32), p.w.cols, x_planes);
    __syncthreads();
  }
  if (!active) return;  // whole warp (mmvq) or whole block (dp4a) leaves together

  float acc[NT];
  int64_t xr[NT];  // activation row of output vector a0 + t (indices, not pointers: NT = 16 tiles
                   // would hold 32 pointers in registers)
#pragma unroll
  for (int t = 0; t < NT; ++t) {
    acc[t] = 0.0f;
    xr[t] = (a0 + t < p.n_out ? a0 + t : a0) / p.x_div;
  }
  for (int u0 = t_in_row; u0 < nu; u0 += G * TPR) {
    if (u0 != t_in_row) load_group<W, G, TPR>(raw, wrow, p.w.cols, u0, nu);
#pragma unroll
    for (int g = 0; g < G; ++g) {
      const int u = u0 + g * TPR;
      if (u >= nu) break;
      if constexpr (kStage) {
        acc[0] = __fadd_rn(acc[0], U::product_staged(raw[g], xs + U::kValues * u, xd + u / U::kUnitsPerScale));
      } else {
        const typename U::Dec d = U::decode(raw[g]);
#pragma unroll
        for (int t = 0; t < NT; ++t)
          acc[t] = __fadd_rn(acc[t], U::product(d, p, xr[t], u));
      }
    }
  }

  const float scale = p.w.slab_scale[slab];
  if constexpr (!kBlock) {
#pragma unroll
    for (int t = 0; t < NT; ++t) {
      const float v = warp_sum_xor(acc[t]);
      if (lane == 0 && a0 + t < p.n_out) store(p, (a0 + t) * p.ld_y + row, __fmul_rn(v, scale));
    }
  } else {
    __shared__ float part[4][NT];
#pragma unroll
    for (int t = 0; t < NT; ++t) {
      const float v = warp_sum_xor(acc[t]);
      if (lane == 0) part[warp][t] = v;
    }
    __syncthreads();
    if (threadIdx.x < NT && a0 + threadIdx.x < p.n_out) {
      const int t = threadIdx.x;
      float v = 0.0f;
      for (int w = 0; w < 4; ++w) v = __fadd_rn(v, part[w][t]);
      store(p, (a0 + t) * p.ld_y + row, __fmul_rn(v, scale));
    }
  }
}

// --- m = 1, streamed (v10, v12)
//
// The dense decode mat-vec as a stream: a grid of resident warps only (as many as fit), warp w
// taking rows w, w + n_warps, ... of the launch's concatenated matrices, each row in groups of
// kGroup units per lane, and the loads of the next group (of this row, or of the warp's next
// row) issued before the current group's arithmetic: two register buffers. In v9 a block loaded
// its row once and exited, and a 12288-wide row's groups came one after the other: every block,
// and every group, waited a full DRAM latency with nothing of its own in flight, and the grid
// ran in waves. Each row is still one warp, lane l taking units l, l + 32, ... in order, then
// the butterfly: the same bits as v9 (ops_mmvq checks both against quant.h).
//
// v12: ncu on the H200 showed v10's NVFP4 launches issue-bound, about 70 instructions per
// 16-value unit for 25-50% of DRAM bandwidth. kFull (every row a whole number of groups: all the
// model shapes) drops the per-unit bounds checks; the two buffers alternate by unrolling the
// loop twice instead of a copy per group; NVFP4 splits codes by sign (Unit<4>::product_staged).
// (A v11 that streamed tiles through a shared-memory ring with cp.async, S - 1 tiles ahead,
// added instructions per unit and ran slower: 9B NVFP4 2.95 vs 2.72 ms per graph step.)
//
// v15 kCarry: the row's matrix is found once, when the row's weights are issued, and carried to
// its store (v14 scanned the matrices again there), and lane 0 loads the row's epilogue operands
// (the matrix's slab scale, the old y of a residual add) at the same time instead of after the
// butterfly. Same operations on the same values: same bits. H200, same-process A/B of graph
// decode: 9B NVFP4 1807 / 1804 vs 1859 / 1860 us per step, 35B-A3B 2111 / 2112 vs 2123 / 2127;
// each half alone ran slower (1958 / 1961), and on the Q8_0 instance kCarry did too (9B Q8_0
// 2898 vs 2642), so only the NVFP4 instances take it. (Also measured there and not
// kept: both sign sums started at 1.5 * 2^23's f32 bits so one FADD replaces IADD + I2F, within
// noise; a one-group-per-row form for 4096-wide rows, 1931 / 1938.)
template <int W> struct StreamShape;
template <> struct StreamShape<3> { enum : int { kGroup = 2, kBlocksPerSM = 8 }; };  // 2 x 34 B per lane in flight
template <> struct StreamShape<4> { enum : int { kGroup = 4, kBlocksPerSM = 8 }; };  // 4 x 9 B

template <int W, bool kFull, int G = StreamShape<W>::kGroup, int kMinBlocks = StreamShape<W>::kBlocksPerSM,
          bool kCarry = false, bool kBest = false, int NV = 1>
__global__ void __launch_bounds__(32 * kWarpRows, kMinBlocks)
    matvec_stream_kernel(const __grid_constant__ MatvecBatch batch) {
  static_assert(NV == 1 || (!kCarry && !kBest), "several activation rows take the plain epilogue");
  using U = Unit<W>;
  using Raw = typename U::Raw;
  const int lane = threadIdx.x & 31;
  const int64_t n_warps = static_cast<int64_t>(gridDim.x) * kWarpRows;
  const int64_t total = batch.row_start[batch.n];
  const int64_t cols = batch.p[0].w.cols;  // every matrix of a streamed launch: same cols and x
  const int nu = static_cast<int>(U::count(cols));
  const int n_groups = (nu + 32 * G - 1) / (32 * G);
  auto matrix_of = [&](int64_t gr) {
    int j = 0;
    while (j + 1 < batch.n && gr >= batch.row_start[j + 1]) ++j;
    return j;
  };
  auto wrow_of = [&](int64_t gr) {
    const int j = matrix_of(gr);
    return batch.p[j].w.data + (gr - batch.row_start[j]) * batch.p[j].w.row_bytes;
  };
  auto load = [&](Raw (&raw)[G], const uint8_t* wrow, int u0) {
#pragma unroll
    for (int g = 0; g < G; ++g)
      if (kFull || u0 + g * 32 < nu) U::load(raw[g], wrow, cols, u0 + g * 32);
  };

  int64_t r = static_cast<int64_t>(blockIdx.x) * kWarpRows + (threadIdx.x >> 5);
  int k = 0;
  Raw buf_a[G], buf_b[G];
  int jr = 0;  // kCarry: the matrix of row r
  const uint8_t* wr = nullptr;
  if (r < total) {
    if constexpr (kCarry) {
      jr = matrix_of(r);
      wr = batch.p[jr].w.data + (r - batch.row_start[jr]) * batch.p[jr].w.row_bytes;
    } else {
      wr = wrow_of(r);
    }
  }
  if (wr) load(buf_a, wr, lane);  // weights only: before the wait
  pdl_wait();
  pdl_release();
  // kCarry: row r's slab scale and old y (lane 0), loaded with the row's weights (after the wait:
  // y may be the previous kernel's output)
  float ep_scale = 0.0f, ep_y = 0.0f;
  auto load_epilogue = [&](int j, int64_t gr, float& scale, float& y_old) {
    const MatvecParams& p = batch.p[j];
    scale = p.w.slab_scale[0];
    if (p.add_to_y) y_old = p.y[gr - batch.row_start[j]];
  };
  if constexpr (kCarry)
    if (lane == 0 && r < total) load_epilogue(jr, r, ep_scale, ep_y);
  // NV > 1: n_vec <= NV activation rows (q8_1 rows cols / 32 blocks apart), each staged in its
  // own planes (`plane` bytes, a multiple of 16: launcher), each row of W dotted with all of them
  // from one load and one decode of its units; output vector v at y + v * ld_y.
  const int n_vec = NV == 1 ? 1 : static_cast<int>(batch.p[0].n_out);
  const int64_t plane = cols + cols / 32 * 4;
  extern __shared__ uint4 x_planes[];
#pragma unroll
  for (int v = 0; v < NV; ++v)
    if (NV == 1 || v < n_vec) stage_x<W, W == 3 ? 3 : 1>(batch.p[0].xq + v * (cols / 32), cols, x_planes + v * (plane / 16));
  __syncthreads();
  const int8_t* xs_l = reinterpret_cast<const int8_t*>(x_planes) + U::kValues * lane;
  const float* xd_l = reinterpret_cast<const float*>(reinterpret_cast<const int8_t*>(x_planes) + cols) + lane / U::kUnitsPerScale;

  float acc[NV] = {};
  // kBest (the greedy step's lm_head, one matrix): lane 0's best (value, row) of the rows this
  // warp stores, in argmax.cuh's order; the warps' bests go to batch.best for argmax_step_run.
  float best_v = -INFINITY;
  int32_t best_i = kNoRow, best_bad = 0;
  auto note_best = [&](float v, int64_t i) {
    best_bad |= !isfinite(v);
    if (argmax_better(v, static_cast<int32_t>(i), best_v, best_i)) { best_v = v; best_i = static_cast<int32_t>(i); }
  };
  // One group: the next group's loads into nxt, then cur's arithmetic; false past the last row.
  auto step = [&](const Raw (&cur)[G], Raw (&nxt)[G]) {
    int64_t r2 = r;
    int k2 = k + 1;
    const uint8_t* wr2 = wr;
    int j2 = jr;
    float ep_scale2 = ep_scale, ep_y2 = ep_y;
    if (k2 == n_groups) {
      k2 = 0;
      r2 = r + n_warps;
      if constexpr (kCarry) {
        if (r2 < total) {
          while (j2 + 1 < batch.n && r2 >= batch.row_start[j2 + 1]) ++j2;  // rows only grow
          wr2 = batch.p[j2].w.data + (r2 - batch.row_start[j2]) * batch.p[j2].w.row_bytes;
        }
      } else {
        wr2 = r2 < total ? wrow_of(r2) : nullptr;
      }
    }
    if (r2 < total) load(nxt, wr2, lane + k2 * 32 * G);
    if constexpr (kCarry)
      if (lane == 0 && k2 == 0 && r2 < total) load_epilogue(j2, r2, ep_scale2, ep_y2);
    const int u0 = lane + k * 32 * G;
#pragma unroll
    for (int g = 0; g < G; ++g)
      if (kFull || u0 + g * 32 < nu)
#pragma unroll
        for (int v = 0; v < NV; ++v)
          if (NV == 1 || v < n_vec)
            acc[v] = __fadd_rn(acc[v], U::product_staged(cur[g], xs_l + v * plane + 32 * U::kValues * (k * G + g),
                                                         xd_l + v * (plane / 4) + 32 / U::kUnitsPerScale * (k * G + g)));
    if (k == n_groups - 1) {
      const float v = warp_sum_xor(acc[0]);
      if constexpr (kCarry) {
        const MatvecParams& p = batch.p[jr];
        if (lane == 0) {
          const float t = __fmul_rn(v, ep_scale);
          const float yv = p.add_to_y ? __fadd_rn(ep_y, t) : t;  // store()'s two roundings
          p.y[r - batch.row_start[jr]] = yv;
          if constexpr (kBest) note_best(yv, r - batch.row_start[jr]);
        }
      } else {
        const int j = matrix_of(r);
        const MatvecParams& p = batch.p[j];
#pragma unroll
        for (int a = 0; a < NV; ++a)
          if (NV == 1 || a < n_vec) {
            const float sum = a == 0 ? v : warp_sum_xor(acc[a]);
            if (lane == 0) {
              const int64_t i = r - batch.row_start[j];
              const float t = __fmul_rn(sum, p.w.slab_scale[0]);
              store(p, a * p.ld_y + i, t);
              if constexpr (kBest) note_best(t, i);  // t is the stored value: a kBest launch has no residual add
            }
          }
      }
#pragma unroll
      for (int a = 0; a < NV; ++a) acc[a] = 0.0f;
    }
    r = r2;
    k = k2;
    wr = wr2;
    jr = j2;
    ep_scale = ep_scale2;
    ep_y = ep_y2;
    return r < total;  // warp-uniform
  };
  if (r < total)
    while (step(buf_a, buf_b) && step(buf_b, buf_a)) {
    }
  if constexpr (kBest)
    if (lane == 0) batch.best[static_cast<int64_t>(blockIdx.x) * kWarpRows + (threadIdx.x >> 5)] = {best_v, best_i, best_bad};
}

// --- launchers

// Dynamic shared memory of the staged activation planes; opts the kernel in above 48 KiB.
template <class Kernel>
size_t stage_smem(const MatvecBatch& b, Kernel kernel, int n_rows = 1) {
  size_t smem = 0;
  for (int j = 0; j < b.n; ++j)
    smem = std::max(smem, static_cast<size_t>(n_rows) * static_cast<size_t>(b.p[j].w.cols + b.p[j].w.cols / 32 * 4));
  constexpr size_t kMaxSmem = 227 * 1024;  // sm_90: opt-in up to 227 KiB
  if (smem > kMaxSmem) fail("matvec: a row of ", b.p[0].w.cols, " values does not fit the shared-memory activation stage");
  allow_dynamic_smem(reinterpret_cast<const void*>(kernel), smem);  // before the occupancy queries that use it
  return smem;
}

// The streamed form for a dense m = 1 launch whose matrices share cols and activations (an
// mv_group); false when it does not apply.
// kBest: b.best holds room for *n_best warps (then set to the grid's warps); a grid of more
// warps does not launch (returns false).
template <int W, bool kFull, int G = StreamShape<W>::kGroup, int kMinBlocks = StreamShape<W>::kBlocksPerSM,
          bool kCarry = false, bool kBest = false, int NV = 1>
bool launch_stream_as(MatvecBatch& b, cudaStream_t s, int* n_best) {
  auto kernel = matvec_stream_kernel<W, kFull, G, kMinBlocks, kCarry, kBest, NV>;
  const size_t smem = stage_smem(b, kernel, NV);
  int dev = 0, sms = 0, per_sm = 0;
  MEMRA_CUDA_CHECK(cudaGetDevice(&dev));
  MEMRA_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  MEMRA_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, 32 * kWarpRows, smem));
  if (per_sm < 1) return false;
  const int64_t blocks = std::min<int64_t>(ceil_div(b.row_start[b.n], kWarpRows), static_cast<int64_t>(per_sm) * sms);
  if constexpr (kBest) {
    if (blocks * kWarpRows > *n_best) return false;
    *n_best = static_cast<int>(blocks * kWarpRows);
  }
  launch_kernel("matvec_stream_kernel", kernel, dim3(static_cast<unsigned>(blocks)), 32 * kWarpRows, smem, s, b);
  return true;
}
// Activation rows one streamed launch takes at most (launch_stream_rows). More rows go to the
// token tile: passes of 4 rows, each streaming the weights again, measured slower than the tile
// at 16 rows (H200, batched decode step: 9B NVFP4 22.5 vs 18.1 ms, 35B-A3B 18.4 vs 16.5, 0.6B
// 6.6 vs 5.9) and faster at 4 (9B NVFP4 5.9 vs 8.4 ms, Q8_0 4.9 vs 9.0, 0.6B 1.9 vs 2.4).
constexpr int kStreamRows = 4;

template <int W, bool kBest = false>
bool launch_stream(MatvecBatch& b, cudaStream_t s, int* n_best = nullptr) {
  for (int j = 0; j < b.n; ++j)
    if (b.p[j].xq != b.p[0].xq || b.p[j].w.cols != b.p[0].w.cols) return false;
  b.row_start[0] = 0;
  for (int j = 0; j < b.n; ++j) b.row_start[j + 1] = b.row_start[j] + b.p[j].w.slab_rows;
  const int64_t nu = Unit<W>::count(b.p[0].w.cols);
  // NVFP4 rows of whole 256-unit groups (the 9B's 4096- and 12288-wide rows) take 8 units per
  // lane per group at 5 blocks per SM (92 registers): 72 bytes in flight per lane. H200, 9B NVFP4
  // graph decode: 2.27 vs 2.43 ms per step with 4 units at 8 blocks (46 vs 37 KB per SM in
  // flight). The same doubling for Q8_0 measured slower (3.14 vs 3.08 ms). With v15's kCarry.
  // v16: rows of whole 384-unit groups (the 9B FFN's 12288-wide down rows) take 12 units per lane
  // per group at 4 blocks per SM (127 registers): 2112 resident warps for the down's 4096 rows,
  // each warp at most 2 rows of 2 groups (4 waits), where the 8-unit form's 2640 warps left some
  // with 2 rows of 3 (6 waits) and the rest idle after their first row. H200, same-process A/B of
  // 9B NVFP4 graph decode: 1787 / 1785 vs 1810 / 1810 us per step (ncu, eager: the down launch
  // 12.2 vs 13.2 us); without kCarry 1799 / 1818. Measured on that shape only.
  using SS = StreamShape<W>;
  if constexpr (W == 4) {
    if (nu % 384 == 0) return launch_stream_as<W, true, 12, 4, true, kBest>(b, s, n_best);
    if (nu % 256 == 0) return launch_stream_as<W, true, 8, 5, true, kBest>(b, s, n_best);
  }
  if (nu % (32 * SS::kGroup) == 0) return launch_stream_as<W, true, SS::kGroup, SS::kBlocksPerSM, false, kBest>(b, s, n_best);
  return launch_stream_as<W, false, SS::kGroup, SS::kBlocksPerSM, false, kBest>(b, s, n_best);
}

// n_out = 2 .. kStreamRows activation rows in one streamed launch (each weight unit loaded and
// decoded once for all of them; every output's chain is the m = 1 stream's: same bits). Rows of
// cols % 128 == 0 only (the planes of each row 16-byte aligned in shared memory); false when it
// does not apply.
template <int W>
bool launch_stream_rows(MatvecBatch& b, cudaStream_t s) {
  for (int j = 0; j < b.n; ++j)
    if (b.p[j].xq != b.p[0].xq || b.p[j].w.cols != b.p[0].w.cols || b.p[j].w.cols % 128 != 0 || b.p[j].x_div != 1)
      return false;
  b.row_start[0] = 0;
  for (int j = 0; j < b.n; ++j) b.row_start[j + 1] = b.row_start[j] + b.p[j].w.slab_rows;
  const int64_t nu = Unit<W>::count(b.p[0].w.cols);
  using SS = StreamShape<W>;
  if constexpr (W == 4) {
    if (nu % 384 == 0) return launch_stream_as<W, true, 12, 4, false, false, kStreamRows>(b, s, nullptr);
    if (nu % 256 == 0) return launch_stream_as<W, true, 8, 5, false, false, kStreamRows>(b, s, nullptr);
  }
  // Q8_0 at 4 blocks per SM: its four accumulators and row pointers spill at 8 (64 registers)
  constexpr int kBlocks = W == 3 ? 4 : SS::kBlocksPerSM;
  if (nu % (32 * SS::kGroup) == 0) return launch_stream_as<W, true, SS::kGroup, kBlocks, false, false, kStreamRows>(b, s, nullptr);
  return launch_stream_as<W, false, SS::kGroup, kBlocks, false, false, kStreamRows>(b, s, nullptr);
}

template <int W, bool kBlock, int NT>
void launch(const MatvecBatch& b, cudaStream_t s) {
  const int64_t gy = ceil_div(b.p[0].n_out, NT);
  if (gy > 65535) fail("matvec: ", b.p[0].n_out, " output vectors in tiles of ", NT, " exceed the grid (65535)");
  const dim3 grid(b.block_start[b.n], static_cast<unsigned>(gy));
  size_t smem = 0;  // the staged activation planes of m = 1 with q8_1 activations (kStage)
  if constexpr (NT == 1 && (W == 3 || W == 4)) smem = stage_smem(b, matvec_kernel<W, kBlock, NT>);
  launch_kernel("matvec_kernel", matvec_kernel<W, kBlock, NT>, grid, kBlock ? 128 : 32 * kWarpRows, smem, s, b);
}

template <int W, bool kBlock>
void launch_nt(MatvecBatch& b, cudaStream_t s) {
  b.block_start[0] = 0;
  for (int j = 0; j < b.n; ++j) {
    const int64_t rows = b.p[j].w.slab_rows;
    b.block_start[j + 1] = b.block_start[j] + static_cast<unsigned>(kBlock ? rows : ceil_div(rows, kWarpRows));
  }
  if constexpr (!kBlock && (W == 3 || W == 4)) {
    if (!b.p[0].slab_of && b.p[0].n_out == 1 && launch_stream<W>(b, s)) return;
    // a few activation rows (a batched decode step, a short prompt): one streamed launch instead
    // of the token tile, which holds one unit per lane in flight
    if (!b.p[0].slab_of && b.p[0].n_out > 1 && b.p[0].n_out <= kStreamRows && launch_stream_rows<W>(b, s)) return;
  }
  if (b.p[0].slab_of || b.p[0].n_out == 1) return launch<W, kBlock, 1>(b, s);
  if (b.p[0].n_out < 16) return launch<W, kBlock, 8>(b, s);
  return launch<W, kBlock, 16>(b, s);
}

template <int W>
void launch_family(MatvecBatch& b, DecodeMatvec f, cudaStream_t s) {
  if (f == DecodeMatvec::dp4a) return launch_nt<W, true>(b, s);
  return launch_nt<W, false>(b, s);
}

}  // namespace

// --- dispatch

void matvec_run_multi(const MatvecParams* ps, int n, DecodeMatvec family, cudaStream_t s) {
  if (n < 1 || n > kMatvecMulti) fail("matvec: ", n, " matrices in one launch (1..", kMatvecMulti, ")");
  MatvecBatch b{};
  b.n = 0;
  for (int j = 0; j < n; ++j) {
    const MatvecParams& p = ps[j];
    if (p.n_out == 0 || p.w.slab_rows == 0) continue;
    if (p.w.cols >= (int64_t{1} << 31)) fail("matvec: row length ", p.w.cols, " exceeds 2^31 - 1 values");
    if (p.w.type != ps[0].w.type || p.n_out != ps[0].n_out || (p.slab_of == nullptr) != (ps[0].slab_of == nullptr) ||
        (p.x4 == nullptr) != (ps[0].x4 == nullptr))
      fail("matvec: matrices of one launch must share type, n_out, slab form and activation form");
    if (p.x4 && p.w.type != DType::NVFP4)
      fail("matvec: W4A4 activations (x4) go with NVFP4 weights, not ", dtype_name(p.w.type));
    b.p[b.n++] = p;
  }
  if (b.n == 0) return;
  switch (b.p[0].w.type) {
    case DType::F32: return launch_family<0>(b, family, s);
    case DType::F16: return launch_family<1>(b, family, s);
    case DType::BF16: return launch_family<2>(b, family, s);
    case DType::Q8_0: return launch_family<3>(b, family, s);
    case DType::NVFP4: return b.p[0].x4 ? launch_family<5>(b, family, s) : launch_family<4>(b, family, s);
    default: break;
  }
  fail("matvec: weight type ", dtype_name(b.p[0].w.type), " has no kernel (F32, F16, BF16, Q8_0, NVFP4)");
}

void matvec_run(const MatvecParams& p, DecodeMatvec family, cudaStream_t s) { matvec_run_multi(&p, 1, family, s); }

int matvec_run_best(const MatvecParams& p, DecodeMatvec family, RowBest* best, int max_best, cudaStream_t s) {
  const bool streams = family == DecodeMatvec::mmvq && (p.w.type == DType::Q8_0 || p.w.type == DType::NVFP4) &&
                       !p.x4 && !p.slab_of && p.n_out == 1 && p.w.slab_rows > 0 && !p.add_to_y &&
                       p.w.cols < (int64_t{1} << 31) && p.w.slab_rows <= (int64_t{1} << 31) - 1;
  if (streams) {
    MatvecBatch b{};
    b.n = 1;
    b.p[0] = p;
    b.best = best;
    int n_best = max_best;
    const bool ran = p.w.type == DType::Q8_0 ? launch_stream<3, true>(b, s, &n_best) : launch_stream<4, true>(b, s, &n_best);
    if (ran) return n_best;
  }
  matvec_run(p, family, s);
  return 0;
}

}  // namespace memra::cuda
