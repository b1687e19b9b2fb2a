// src/cuda/mmvq.cu — the mat-vec family (see mmvq.cuh for the contract and the operands).
//
// Every output is quant.h's dot contract bit for bit: per-unit dots (Q8_0: a 32-value block,
// NVFP4: a 16-value sub-block, float: 8 values) taken by the lanes of a row in unit order, then
// the reduction of the family (mmvq: warp butterfly; dp4a: block of 128, warps in order). No form
// below changes an output vector's chain, so decode, batched decode and prefill give one row the
// same bits; ops_mmvq checks every form against quant.h.
//
// Forms (one Unit<W> per weight type and contract: load, decode, product; W = 6 is NVFP4 under
// the pair32 dot contract):
//   matvec_kernel<W, kBlock, NT, R>: a grid of row blocks; NT output vectors (8- or 16-token
//     tiles) share every weight load, and R rows (float weights: kMatvecRows) every activation
//     load. Prefill, MoE expert launches, more than kStreamRows rows.
//   matvec_stream_kernel: the dense m = 1 launch (and 2..kStreamRows activation rows, NV) as a
//     stream: as many resident warps as fit take rows in turn, each row in groups of units per
//     lane, the next group's weight loads in flight during the current group's arithmetic and
//     the first before pdl_wait(). The activation rows are staged once per block in shared
//     memory as int8 / f32 planes. kFull drops per-unit bounds checks (every model shape); kCarry
//     carries a row's matrix and epilogue operands from its load to its store; kBest leaves the
//     per-warp (value, row) bests the greedy step reduces (argmax.cuh).
//
// Why: decode reads every weight once, so the kernel's job is to keep bytes in flight. A block
// per row waited a full DRAM latency per row and ran in waves; the stream has none of either.
// The NVFP4 stream is instruction-bound (about 50 SASS instructions per 9-byte unit), which is
// why its codes are split by sign (two byte permutes and two dp4a per 4 values, no masks) and
// its units per lane and blocks per SM are chosen per row width (launch_stream). docs/PERF.md
// lists the variants measured and not kept, and why.
#include <algorithm>
#include <type_traits>

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
  // Σ 2 e2m1(w) * x over the 16 values of nibble words w0 (values 0..7), w1 (8..15) against x.
  __device__ static int isum_sign_split(uint32_t w0, uint32_t w1, const int4& x) {
    constexpr uint32_t kLo = 0x03020100u, kHi = 0x0C080604u;  // |2 e2m1| of codes 0..7
    const uint32_t n0 = w0 ^ 0x88888888u, n1 = w1 ^ 0x88888888u;
    int pos = __dp4a(static_cast<int>(prmt(kLo, kHi, w0)), x.x, 0);
    pos = __dp4a(static_cast<int>(prmt(kLo, kHi, w0 >> 16)), x.y, pos);
    pos = __dp4a(static_cast<int>(prmt(kLo, kHi, w1)), x.z, pos);
    pos = __dp4a(static_cast<int>(prmt(kLo, kHi, w1 >> 16)), x.w, pos);
    int neg = __dp4a(static_cast<int>(prmt(kLo, kHi, n0)), x.x, 0);
    neg = __dp4a(static_cast<int>(prmt(kLo, kHi, n0 >> 16)), x.y, neg);
    neg = __dp4a(static_cast<int>(prmt(kLo, kHi, n1)), x.z, neg);
    neg = __dp4a(static_cast<int>(prmt(kLo, kHi, n1 >> 16)), x.w, neg);
    return pos - neg;
  }
  __device__ static float product_staged(const Raw& r, const int8_t* xu, const float* du) {
    const int isum = isum_sign_split(r.q.x, r.q.y, *reinterpret_cast<const int4*>(xu));
    const float c = __fmul_rn(ue4m3_x2p8(r.sc), *du);
    return __fmul_rn(c, static_cast<float>(isum));
  }
};

// NVFP4 x Q8_1 under the pair32 contract (Arms::nvfp4_dot; quant.h dot_nvfp4_q8_1_pair32): unit
// u = q8_1 block u, 32 values = NVFP4 sub-blocks 2u and 2u + 1 (one 16-byte load of nibbles, the
// two canonical scale bytes as one 16-bit load). e0 = sw0 * isum0 is exact, t = fma(sw1, isum1,
// e0) rounds once, the product t * dx once. Scales decode as Unit<4>'s: s' = ue4m3 * 2^-8 =
// sw * 2^-7, so e0' and t' are e0 and t times 2^-7 (both normal: |t| >= 2^-10 when nonzero, so
// the fma rounds the same real value) and t' * (2^7 dx) is the contract's p bit for bit. Against
// Unit<4> per 32 values: one activation-scale product, load and sum instead of two (3 % fewer
// SASS instructions in the stream, which measured no faster: docs/PERF.md).
template <>
struct Unit<6> {
  static constexpr int kGroup = 4;  // 4 x 18 bytes in flight per thread
  struct Raw {
    uint4 q;
    uint32_t sc;
  };
  struct Dec {
    float s0, s1;
    int v[8];
  };
  __host__ __device__ static int64_t count(int64_t cols) { return cols / 32; }
  __device__ static void load(Raw& r, const uint8_t* wrow, int64_t cols, int u) {
    r.q = reinterpret_cast<const uint4*>(wrow)[u];
    r.sc = reinterpret_cast<const uint16_t*>(wrow + cols / 2)[u];
  }
  __device__ static float pair(float s0, int i0, float s1, int i1) {
    return __fmaf_rn(s1, static_cast<float>(i1), __fmul_rn(s0, static_cast<float>(i0)));
  }
  __device__ static Dec decode(const Raw& r) {
    Dec d;
    d.s0 = ue4m3_x2p8(r.sc & 0xffu);
    d.s1 = ue4m3_x2p8(r.sc >> 8);
    e2m1x2_seq8(r.q.x, d.v[0], d.v[1]);
    e2m1x2_seq8(r.q.y, d.v[2], d.v[3]);
    e2m1x2_seq8(r.q.z, d.v[4], d.v[5]);
    e2m1x2_seq8(r.q.w, d.v[6], d.v[7]);
    return d;
  }
  __device__ static float product(const Dec& d, const MatvecParams& p, int64_t xr, int u) {
    const Q81* xb = p.xq + xr * (p.w.cols / 32) + u;
    const int* xi = reinterpret_cast<const int*>(xb->qs);
    int i0 = 0, i1 = 0;
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      i0 = __dp4a(d.v[k], xi[k], i0);
      i1 = __dp4a(d.v[4 + k], xi[4 + k], i1);
    }
    const float t = __fmul_rn(pair(d.s0, i0, d.s1, i1), 128.0f);  // t' * 2^7 = t, exact
    return __fmul_rn(t, dev_fp16_fast(xb->d));
  }
  // Against the staged planes: codes split by sign as Unit<4>'s, the scale plane times 2^7.
  static constexpr float kStagedScale = 128.0f;
  static constexpr int kValues = 32, kUnitsPerScale = 1;
  __device__ static float product_staged(const Raw& r, const int8_t* xu, const float* du) {
    const int4* x = reinterpret_cast<const int4*>(xu);
    const int i0 = Unit<4>::isum_sign_split(r.q.x, r.q.y, x[0]);
    const int i1 = Unit<4>::isum_sign_split(r.q.z, r.q.w, x[1]);
    return __fmul_rn(pair(ue4m3_x2p8(r.sc & 0xffu), i0, ue4m3_x2p8(r.sc >> 8), i1), *du);
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
  struct X {
    float4 a, b;
  };  // a unit's 8 activations
  __device__ static X load_x(const MatvecParams& p, int64_t xr, int u) {
    const float4* xp = reinterpret_cast<const float4*>(p.xf + xr * p.ld_xf) + 2 * u;
    return {xp[0], xp[1]};
  }
  __device__ static float dot(const Dec& d, const X& x) {
    const float4 a = x.a, b = x.b;
    float pu = 0.0f;
    pu = fmaf(d.wv[0], a.x, pu); pu = fmaf(d.wv[1], a.y, pu); pu = fmaf(d.wv[2], a.z, pu); pu = fmaf(d.wv[3], a.w, pu);
    pu = fmaf(d.wv[4], b.x, pu); pu = fmaf(d.wv[5], b.y, pu); pu = fmaf(d.wv[6], b.z, pu); pu = fmaf(d.wv[7], b.w, pu);
    return pu;
  }
  __device__ static float product(const Dec& d, const MatvecParams& p, int64_t xr, int u) {
    return dot(d, load_x(p, xr, u));
  }
};

// Rows per warp of matvec_kernel's mmvq token tiles. Float weights (F32 / F16 / BF16: an MoE
// router, kept F32) take 2 on matrices of 8 rows or more: each unit's activations, loaded from L1
// per token, then serve two rows. With one row per warp a 512-token prefill's F32 router (256 x
// 2048) ran at ~3 TFLOPS, bound by those loads (two 16-byte loads per 8 FMAs): 90 -> 54 us on an
// H100. A one-row matrix (the shared expert's gate row) keeps 1: two rows per warp computed its
// row twice (20 -> 33 us).
template <int W, bool kBlock, int NT>
inline constexpr int kMatvecRows = !kBlock && NT > 1 && W <= 2 ? 2 : 1;

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
// trip would wait three L2 round trips in a row: Q8_0 takes kPer = 3 there (measured ~1 % faster
// per decode token). NVFP4 keeps 1 (its 93-register stream kernel measured 3 % slower with 3),
// as does the grid form (its 64-register MoE expert kernels spill with 3).
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

// R rows row.. of a float-weight token tile, one warp: each row's chain is matvec_kernel's (lane
// l takes units l, l + 32, ... in order, then the butterfly), each unit's activations loaded once
// for the R rows. Rows past the matrix's end repeat row `row` and are not stored.
template <int W, int NT, int R>
__device__ __forceinline__ void matvec_rows(const MatvecParams& p, int64_t row, int64_t rows, int64_t a0, int lane0,
                                            int nu, int lane) {
  using U = Unit<W>;
  const uint8_t* wr[R];
#pragma unroll
  for (int i = 0; i < R; ++i) wr[i] = p.w.data + (row + i < rows ? row + i : row) * p.w.row_bytes;
  float acc[R][NT];
  int64_t xr[NT];
#pragma unroll
  for (int t = 0; t < NT; ++t) {
    xr[t] = (a0 + t < p.n_out ? a0 + t : a0) / p.x_div;
#pragma unroll
    for (int i = 0; i < R; ++i) acc[i][t] = 0.0f;
  }
  for (int u = lane0; u < nu; u += 32) {
    typename U::Dec d[R];
#pragma unroll
    for (int i = 0; i < R; ++i) {
      typename U::Raw r;
      U::load(r, wr[i], p.w.cols, u);
      d[i] = U::decode(r);
    }
#pragma unroll
    for (int t = 0; t < NT; ++t) {
      const typename U::X x = U::load_x(p, xr[t], u);
#pragma unroll
      for (int i = 0; i < R; ++i) acc[i][t] = __fadd_rn(acc[i][t], U::dot(d[i], x));
    }
  }
  const float scale = p.w.slab_scale[0];
#pragma unroll
  for (int i = 0; i < R; ++i)
#pragma unroll
    for (int t = 0; t < NT; ++t) {
      const float v = warp_sum_xor(acc[i][t]);
      if (lane == 0 && row + i < rows && a0 + t < p.n_out) store(p, (a0 + t) * p.ld_y + row + i, __fmul_rn(v, scale));
    }
}

// Thread t_in_row of a row takes units t_in_row, t_in_row + TPR, ... in that order (the dot
// contract), in groups of G units whose loads issue together; NT output vectors share each
// decoded unit.
// m = 1 caps registers at 64 (8 blocks of 4 warps per SM): a 4096-row matrix is 1024 blocks, and
// they must all be resident at once for the whole matrix to stream in one wave. Token tiles
// (NT = 8, 16) cap at 128 (4 blocks per SM); uncapped, nvcc hoisted 16 activation-row addresses
// and took up to 244 registers (2 blocks per SM).
template <int W, bool kBlock, int NT, int R = 1>
__global__ void __launch_bounds__(kBlock ? 128 : 32 * kWarpRows, NT == 1 ? 8 : 4)
    matvec_kernel(const __grid_constant__ MatvecBatch batch) {
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
  const int64_t row = kBlock ? bx : (static_cast<int64_t>(bx) * kWarpRows + warp) * R;  // the warp's first
  const int64_t a0 = static_cast<int64_t>(blockIdx.y) * NT;
  const bool active = row < rows;  // the last mmvq block may hold rows past the end
  // The expert id of a routed launch is written by the router kernel: wait for it first.
  const bool routed = p.slab_of != nullptr;
  if (routed) pdl_wait();
  const int slab = routed ? p.slab_of[a0] : 0;  // NT == 1 whenever slab_of is set
  const uint8_t* wrow = p.w.data + (static_cast<int64_t>(slab) * rows + (active ? row : 0)) * p.w.row_bytes;
  const int nu = static_cast<int>(U::count(p.w.cols));  // < 2^31: rows of at most 2^31 values

  typename U::Raw raw[G];
  if (active && R == 1) load_group<W, G, TPR>(raw, wrow, p.w.cols, t_in_row, nu);  // weights only: before the wait
  if (!routed) pdl_wait();
  pdl_release();

  if constexpr (R > 1) {  // float weights, R rows per warp
    if (active) matvec_rows<W, NT, R>(p, row, rows, a0, t_in_row, nu, lane);
    return;
  }

  // m = 1 with q8_1 activations: the block's activation row staged once in shared memory as an
  // int8 plane and an f32 scale plane (the fp16 d converted once), so a lane reads a unit's
  // activations with one or two 16-byte loads instead of a 32-bit load per 4 values scattered
  // over 36-byte blocks (L1 traffic that otherwise bounds the kernel). Same integers, same floats.
  constexpr bool kStage = NT == 1 && (W == 3 || W == 4 || W == 6);
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

// --- token tiles on the int8 tensor cores (mmvq family, Q8_0 / NVFP4 against q8_1, dense)
//
// The warp32 chain of quant.h for 5 or more output vectors (a batched decode step, a prefill),
// with each unit's integer dots taken by mma.sync for 16 rows x 8 vectors at once instead of by
// dp4a per vector. A block owns 16 weight rows and 8 NTILE vectors (8 or 16; 32 past 16 vectors
// on rows of 4 steps or more, launch_nt); its KW warps (8, or 16 for 32 vectors) split the 32
// lane classes of the contract, warp w
// taking classes w, w + KW, ... (8 warps: w, w + 8, w + 16, w + 24), and for each class l
// the units l, l + 32, l + 64, ... in order into that class's accumulator: exactly lane l's chain
// of the m = 1 kernel. The 32 class sums are then added in the butterfly's tree (off = 16, 8, 4,
// 2, 1): the levels that join a warp's own classes in registers (two with 8 warps, one with 16),
// the rest in shared memory, and one thread per output scales and stores as matvec_kernel does.
// p_u = f32(f32(dw * dx) * f32(isum)) is the contract's product (the NVFP4 scale decoded as
// ue4m3 / 2, as gemm.cu does), so every output has the bits of the m = 1 mat-vec (under pair32,
// W = 6, a unit's two sub-blocks take an mma each and p = dx * fma(sw1, isum1, sw0 * isum0)). 16 warps per
// SM (__launch_bounds__: two blocks of 8 or one of 16): 128 registers, the tile's occupancy
// limit (docs/PERF.md). 32 vectors per block read each weight unit once for a B = 32 step
// where two 16-vector blocks read it twice (the second from L2). Weights go
// from global memory to registers one step ahead; activations through a shared-memory ring
// filled by cp.async kMmaStages - 1 steps ahead (each step's blocks are read by one warp, but
// every row tile reads them again: from L2, which the ring hides).
//
// Why: the 8- / 16-vector dp4a tile reads a weight unit once per tile but spends a dp4a chain and
// an activation load per vector, and holds one unit per lane in flight: at 16 sequences a
// Qwen3.5-9B step cost 7x the single-sequence step. Here a unit of 16 rows costs one mma per 8
// vectors, a warp has its four classes' units in flight at once, and a 4096-row matrix is 256
// blocks of 8 warps. Vectors past 8 NTILE take further blocks along x (the fastest grid axis, so
// the blocks of one row tile run together and re-read its weights from L2).
constexpr int kTileRows = 16;  // weight rows per block (the mma's M)
constexpr int kMmaStages = 4;  // activation ring slots: copies run 3 steps ahead

// The ring's dynamic shared memory: kMmaStages slots of 8 NTILE vectors, each a step's q8_1
// blocks plus 16 bytes of padding (matvec_mma_kernel). Q8_0 with 16 vectors: 74752 bytes; with
// 32: 149504.
template <int W, int NTILE>
__host__ __device__ constexpr size_t mma_ring_bytes() {
  return static_cast<size_t>(kMmaStages) * 8 * NTILE * ((W == 4 ? 16 : 32) * sizeof(Q81) + 16);
}

// A vector's row in a stage: one step's q8_1 blocks plus 16 bytes, so that the stride is 4 mod 8
// words and the 8 vectors g of a B fragment load and its 4 words q fall in 32 different banks.
template <int W>
constexpr int kTileVecStride = (W == 4 ? 16 : 32) * static_cast<int>(sizeof(Q81)) + 16;

// One unit of a 16-row tile as its mma's A fragment: rows g and g + 8 (lane g = lane / 4),
// unit du past the lane's bases (qa, qb: the rows' values at the lane's k; sa, sb: the rows'
// scales at the lane's unit), from global memory or a shared-memory stage alike.
struct TileFrag {
  int a0, a1, a2, a3;
  uint32_t s0, s1;  // Q8_0: the rows' fp16 scales, row g in the low half of s0; NVFP4: f32 bits;
                    // pair32: the rows' two scale bytes, row g in the low half of s0
};
template <int W>
__device__ __forceinline__ TileFrag tile_frag(const uint8_t* qa, const uint8_t* qb, const uint8_t* sa,
                                              const uint8_t* sb, int du) {
  TileFrag f;
  if constexpr (W == 3) {
    f.a0 = *reinterpret_cast<const int*>(qa + 32 * du);
    f.a2 = *reinterpret_cast<const int*>(qa + 32 * du + 16);
    f.a1 = *reinterpret_cast<const int*>(qb + 32 * du);
    f.a3 = *reinterpret_cast<const int*>(qb + 32 * du + 16);
    f.s0 = reinterpret_cast<const uint16_t*>(sa)[du] | static_cast<uint32_t>(reinterpret_cast<const uint16_t*>(sb)[du])
                                                           << 16;
    f.s1 = 0;
  } else if constexpr (W == 6) {
    f.a0 = e2m1x2_seq4(*reinterpret_cast<const uint16_t*>(qa + 16 * du));  // sub-block 0
    f.a1 = e2m1x2_seq4(*reinterpret_cast<const uint16_t*>(qb + 16 * du));
    f.a2 = e2m1x2_seq4(*reinterpret_cast<const uint16_t*>(qa + 16 * du + 8));  // sub-block 1
    f.a3 = e2m1x2_seq4(*reinterpret_cast<const uint16_t*>(qb + 16 * du + 8));
    f.s0 = reinterpret_cast<const uint16_t*>(sa)[du] | static_cast<uint32_t>(reinterpret_cast<const uint16_t*>(sb)[du])
                                                           << 16;
    f.s1 = 0;
  } else {
    f.a0 = e2m1x2_seq4(*reinterpret_cast<const uint16_t*>(qa + 8 * du));
    f.a1 = e2m1x2_seq4(*reinterpret_cast<const uint16_t*>(qb + 8 * du));
    f.a2 = f.a3 = 0;
    f.s0 = __float_as_uint(dev_ue4m3_half(sa[du]));
    f.s1 = __float_as_uint(dev_ue4m3_half(sb[du]));
  }
  return f;
}

// One unit of one class into its NTILE n-tiles' accumulators: the mma per n-tile, then the
// contract's product and add per output. xb: the lane's B fragment in n-tile 0 (vector g's block
// of the unit, at the lane's k), xd: the d of vector 2q's block; vectors are kVecStride bytes
// apart, n-tile n 8 vectors further.
template <int W, int NTILE>
__device__ __forceinline__ void tile_class(float (&acc)[NTILE][4], const TileFrag& f, const uint8_t* xb0,
                                           const uint8_t* xd0, int kVecStride) {
  const float da = W == 3 ? dev_fp16_fast(static_cast<uint16_t>(f.s0)) : __uint_as_float(f.s0);
  const float db = W == 3 ? dev_fp16_fast(static_cast<uint16_t>(f.s0 >> 16)) : __uint_as_float(f.s1);
  [[maybe_unused]] float sw[4] = {};  // pair32: row g's sub-block scales sw0, sw1, then row g + 8's (ue4m3 / 2)
  if constexpr (W == 6)
#pragma unroll
    for (int k = 0; k < 4; ++k) sw[k] = dev_ue4m3_half(static_cast<uint8_t>(f.s0 >> (8 * k)));
#pragma unroll
  for (int n = 0; n < NTILE; ++n) {
    const uint8_t* xb = xb0 + 8 * n * kVecStride;
    const uint8_t* xd = xd0 + 8 * n * kVecStride;
    const float dx0 = dev_fp16_fast(*reinterpret_cast<const uint16_t*>(xd)),
                dx1 = dev_fp16_fast(*reinterpret_cast<const uint16_t*>(xd + kVecStride));
    if constexpr (W == 6) {  // pair32: p = dx * fma(sw1, isum1, sw0 * isum0) per row and vector
      int r[4], r1[4];
      mma_k16(r, f.a0, f.a1, *reinterpret_cast<const int*>(xb));
      mma_k16(r1, f.a2, f.a3, *reinterpret_cast<const int*>(xb + 16));
      auto pair = [](float s0, int i0, float s1, int i1) {
        return __fmaf_rn(s1, mma_isum(i1), __fmul_rn(s0, mma_isum(i0)));
      };
      acc[n][0] = __fadd_rn(acc[n][0], __fmul_rn(pair(sw[0], r[0], sw[1], r1[0]), dx0));
      acc[n][1] = __fadd_rn(acc[n][1], __fmul_rn(pair(sw[0], r[1], sw[1], r1[1]), dx1));
      acc[n][2] = __fadd_rn(acc[n][2], __fmul_rn(pair(sw[2], r[2], sw[3], r1[2]), dx0));
      acc[n][3] = __fadd_rn(acc[n][3], __fmul_rn(pair(sw[2], r[3], sw[3], r1[3]), dx1));
    } else {
      int r[4];
      if constexpr (W == 3)
        mma_k32(r, f.a0, f.a1, f.a2, f.a3, *reinterpret_cast<const int*>(xb), *reinterpret_cast<const int*>(xb + 16));
      else
        mma_k16(r, f.a0, f.a1, *reinterpret_cast<const int*>(xb));
      acc[n][0] = __fadd_rn(acc[n][0], __fmul_rn(__fmul_rn(da, dx0), mma_isum(r[0])));
      acc[n][1] = __fadd_rn(acc[n][1], __fmul_rn(__fmul_rn(da, dx1), mma_isum(r[1])));
      acc[n][2] = __fadd_rn(acc[n][2], __fmul_rn(__fmul_rn(db, dx0), mma_isum(r[2])));
      acc[n][3] = __fadd_rn(acc[n][3], __fmul_rn(__fmul_rn(db, dx1), mma_isum(r[3])));
    }
  }
}

// The butterfly's tree over a tile's 32 class sums t[l], then the stores: its levels whose pairs
// are classes of one warp in registers (KW = 8: off = 16 and 8, t[w] + t[w + 16], t[w + 8] +
// t[w + 24], then those two; KW = 16: off = 16), the KW warps' sums through `part` in shared
// memory for the rest (off = KW / 2 .. 1), one thread per output scaling and storing as
// matvec_kernel does. Block-wide; kReuse: a closing barrier, so that part may be written again.
// (matvec_mma_kernel keeps its own copy of these lines: called there, the function cost its
// 8-warp Q8_0 tile 32 bytes of register spills.)
template <int KW, int NTILE, bool kReuse = false, bool kReorder = false>
__device__ __forceinline__ void tile_tree(const float (&acc)[32 / KW][NTILE][4],
                                          float (&part)[KW][kTileRows][8 * NTILE + 1], const MatvecParams& p,
                                          int64_t r0, int64_t a0) {
  constexpr int kVec = 8 * NTILE;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, q = lane & 3;
#pragma unroll
  for (int n = 0; n < NTILE; ++n) {
    const int v = 8 * n + 2 * q;
    float s[4];
#pragma unroll
    for (int k = 0; k < 4; ++k)
      if constexpr (KW == 8)
        s[k] = __fadd_rn(__fadd_rn(acc[0][n][k], acc[2][n][k]), __fadd_rn(acc[1][n][k], acc[3][n][k]));
      else
        s[k] = __fadd_rn(acc[0][n][k], acc[1][n][k]);
    part[warp][g][v] = s[0];
    part[warp][g][v + 1] = s[1];
    part[warp][g + 8][v] = s[2];
    part[warp][g + 8][v + 1] = s[3];
  }
  __syncthreads();
  const float scale = p.w.slab_scale[0];
  const int64_t rows = p.w.slab_rows;
  for (int o = threadIdx.x; o < kTileRows * kVec; o += 32 * KW) {
    const int rr = o / kVec, v = o % kVec;
    const int64_t r = r0 + rr, a = a0 + v;
    if (r >= rows || a >= p.n_out) continue;
    float t[KW];
#pragma unroll
    for (int w = 0; w < KW; ++w) t[w] = part[w][rr][v];
    if constexpr (KW == 16) {
#pragma unroll
      for (int w = 0; w < 8; ++w) t[w] = __fadd_rn(t[w], t[w + 8]);  // off = 8
    }
#pragma unroll
    for (int w = 0; w < 4; ++w) t[w] = __fadd_rn(t[w], t[w + 4]);  // off = 4
    if (kReorder && v >= 8)  // the canary's defect (Break::bulk_tile_reorder): off = 1, 2
      t[0] = __fadd_rn(__fadd_rn(t[0], t[1]), __fadd_rn(t[2], t[3]));
    else
      t[0] = __fadd_rn(__fadd_rn(t[0], t[2]), __fadd_rn(t[1], t[3]));  // off = 2, 1
    store(p, a * p.ld_y + r, __fmul_rn(t[0], scale));
  }
  if constexpr (kReuse) __syncthreads();
}

// KW warps per block (8: two blocks per SM; 16 for 32 vectors: one block per SM, the same warps),
// 32 / KW lane classes per warp.
template <int W, int NTILE, int KW>
__global__ void __launch_bounds__(32 * KW, KW == 8 ? 2 : 1)
    matvec_mma_kernel(const __grid_constant__ MatvecBatch batch) {
  static_assert(KW == 8 || KW == 16, "the epilogue's tree below joins 4 or 2 classes in a warp");
  constexpr int kTileWarps = KW, kTileClasses = 32 / KW;
  using U = Unit<W>;
  constexpr int kVec = 8 * NTILE;  // output vectors per block
  int j = 0;
  while (j + 1 < batch.n && blockIdx.y >= batch.block_start[j + 1]) ++j;
  const MatvecParams& p = batch.p[j];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, q = lane & 3;
  const int64_t rows = p.w.slab_rows, cols = p.w.cols, nqb = cols / 32;
  const int64_t r0 = static_cast<int64_t>(blockIdx.y - batch.block_start[j]) * kTileRows;
  const int64_t a0 = static_cast<int64_t>(blockIdx.x) * kVec;
  // Rows and vectors past the end are read clamped and never stored.
  const uint8_t* wa = p.w.data + (r0 + g < rows ? r0 + g : rows - 1) * p.w.row_bytes;
  const uint8_t* wb = p.w.data + (r0 + g + 8 < rows ? r0 + g + 8 : rows - 1) * p.w.row_bytes;
  const int nu = static_cast<int>(U::count(cols));

  // Addresses. Class c of the step at unit u0 is unit u = warp + u0 + KW c, so every address below
  // is a lane base fixed here plus a per-step term plus an immediate per class: no index
  // arithmetic per unit. Weights: the unit's 4 bytes of rows g and g + 8 at k = 4q (and 4q + 16
  // for Q8_0) and the two rows' scales (4-byte loads: a planar row and a q8_1 block's values are
  // 4-byte aligned only). NVFP4 under pair32 (W = 6): a unit is a q8_1 block, its two sub-blocks'
  // nibbles 8 bytes apart and its two scales one 16-bit load.
  constexpr int kUnitBytes = W == 3 ? 32 : W == 6 ? 16 : 8, kUnitsPerBlock = W == 4 ? 2 : 1;
  const uint8_t* const qa = wa + kUnitBytes * warp + (W == 3 ? 4 : 2) * q;
  const uint8_t* const qb = wb + kUnitBytes * warp + (W == 3 ? 4 : 2) * q;
  const uint8_t* const sa = wa + (W == 3 ? cols + 2 * warp : W == 6 ? cols / 2 + 2 * warp : cols / 2 + warp);
  const uint8_t* const sb = wb + (W == 3 ? cols + 2 * warp : W == 6 ? cols / 2 + 2 * warp : cols / 2 + warp);

  // Activations: a step's q8_1 blocks of the block's kVec vectors (contiguous in each vector's
  // row, 1152 bytes for Q8_0, 576 for NVFP4's 16 blocks) are copied into a ring of kMmaStages
  // slots by cp.async, kMmaStages - 1 steps ahead, so an mma's B fragment and scales come from
  // shared memory instead of an L2 round trip issued in the step that needs them (the latency
  // that left 67 % of cycles without an eligible warp, docs/PERF.md). A vector's slot row is
  // padded by 16 bytes so that its stride is 4 mod 8 words: the 8 vectors g of a fragment load
  // and the 4 words q fall in 32 different banks. Vectors past n_out are copied from the last
  // one (computed, never stored). The copies are 16 bytes where every vector row and step starts
  // 16-byte aligned (cols a multiple of 128 and xq 16-byte aligned: all model shapes), else 4.
  constexpr int kStepBlocks = 32 / kUnitsPerBlock;
  constexpr int kStepBytes = kStepBlocks * static_cast<int>(sizeof(Q81));
  constexpr int kVecStride = kTileVecStride<W>, kSlotBytes = kVec * kVecStride;
  static_assert(static_cast<size_t>(kMmaStages) * kSlotBytes == mma_ring_bytes<W, NTILE>(), "the launch's ring size");
  extern __shared__ uint4 mma_ring[];
  uint8_t* const ring = reinterpret_cast<uint8_t*>(mma_ring);
  const int steps = (nu + 31) / 32, nqb32 = static_cast<int>(nqb);
  const int a0i = static_cast<int>(a0), last = static_cast<int>(p.n_out - 1);
  const bool copy16 = nqb % 4 == 0 && reinterpret_cast<uintptr_t>(p.xq) % 16 == 0;
  // Two copy forms, each the faster one for its block (9B Q8_0 DecodeBatch, docs/PERF.md). 8 warps:
  // consecutive threads copy consecutive chunks of a step, vector after vector (a fixed split of
  // threads per vector measured B = 16 at 7680 us against 7360 on the H200). 16 warps: each vector
  // has 16 threads, which take its chunks k, k + 16, ... with no division per chunk (B = 32 on an
  // H100: 12189 us, against 12799 with consecutive chunks and 13072 with two 8-warp blocks).
  // int offsets: the launch checks n_out * cols / 32 < 2^31.
  constexpr int kCopyThreads = 32 * kTileWarps / kVec;
  const int cv = threadIdx.x / kCopyThreads, ck = threadIdx.x % kCopyThreads;
  const uint8_t* const vec_src = reinterpret_cast<const uint8_t*>(p.xq + min(a0i + cv, last) * nqb32);
  auto stage = [&](int st) {  // step st's blocks into slot st % kMmaStages; one commit group
    if (st < steps) {
      const int blk0 = st * kStepBlocks, nb = min(kStepBlocks, nqb32 - blk0);
      uint8_t* const slot = ring + (st % kMmaStages) * kSlotBytes;
      if constexpr (KW == 16) {
        const int bytes = nb * static_cast<int>(sizeof(Q81));
        const uint8_t* const src = vec_src + blk0 * static_cast<int>(sizeof(Q81));
        uint8_t* const dst = slot + cv * kVecStride;
        if (copy16 && bytes == kStepBytes) {  // a whole step: a constant trip count
#pragma unroll
          for (int k = ck; k < kStepBytes / 16; k += kCopyThreads) cp_async16(dst + 16 * k, src + 16 * k);
        } else if (copy16) {
          for (int k = ck; k < bytes / 16; k += kCopyThreads) cp_async16(dst + 16 * k, src + 16 * k);
        } else {
          for (int k = ck; k < bytes / 4; k += kCopyThreads) cp_async4(dst + 4 * k, src + 4 * k);
        }
      } else {
        auto copy = [&](auto chunk_c, int per_vec) {
          constexpr int kChunk = decltype(chunk_c)::value;
          for (int i = threadIdx.x; i < kVec * per_vec; i += 32 * kTileWarps) {
            const int v = i / per_vec, k = i - v * per_vec;
            const uint8_t* src =
                reinterpret_cast<const uint8_t*>(p.xq + (min(a0i + v, last) * nqb32 + blk0)) + kChunk * k;
            if constexpr (kChunk == 16)
              cp_async16(slot + v * kVecStride + 16 * k, src);
            else
              cp_async4(slot + v * kVecStride + 4 * k, src);
          }
        };
        if (nb == kStepBlocks && copy16)
          copy(std::integral_constant<int, 16>{}, kStepBytes / 16);  // a whole step: constant divisor
        else if (copy16)
          copy(std::integral_constant<int, 16>{}, nb * static_cast<int>(sizeof(Q81)) / 16);
        else
          copy(std::integral_constant<int, 4>{}, nb * static_cast<int>(sizeof(Q81)) / 4);
      }
    }
    cp_async_commit();
  };
  // In a slot: the B fragment of n-tile n reads vector 8n + g at the unit's block, byte bq of its
  // values (an NVFP4 unit is half a block: unit parity = warp parity, as u0 and KW c are even);
  // the accumulators' scales are vectors 8n + 2q and 8n + 2q + 1's d.
  const int bq = (W == 4 ? (warp & 1) * 16 : 0) + 4 * q;
  const int blk_w = (warp / kUnitsPerBlock) * static_cast<int>(sizeof(Q81));
  const int xb_off = g * kVecStride + blk_w + 4 + bq, xd_off = 2 * q * kVecStride + blk_w;

  auto load_w = [&](int du) { return tile_frag<W>(qa, qb, sa, sb, du); };  // unit warp + du

  // The first step's weights before the wait (weights are immutable: launch.cuh); the
  // activations are the previous kernel's output, so their copies start after it.
  TileFrag cur[kTileClasses];
#pragma unroll
  for (int c = 0; c < kTileClasses; ++c)
    if (warp + kTileWarps * c < nu) cur[c] = load_w(kTileWarps * c);
  pdl_wait();
  pdl_release();
#pragma unroll
  for (int st = 0; st < kMmaStages - 1; ++st) stage(st);

  float acc[kTileClasses][NTILE][4];
#pragma unroll
  for (int c = 0; c < kTileClasses; ++c)
#pragma unroll
    for (int n = 0; n < NTILE; ++n) acc[c][n][0] = acc[c][n][1] = acc[c][n][2] = acc[c][n][3] = 0.0f;

  // One step: wait for its slot, start the copies of step + kMmaStages - 1 into the slot the
  // previous step read (every warp is past it after the barrier), issue the next step's weights
  // (in flight during this step's arithmetic), then the mma. kFull: this step and the next have
  // all 32 units (every step but the last two of a model-shaped row), so no unit is
  // bounds-checked.
  auto step = [&](int st, auto full) {
    constexpr bool kFull = decltype(full)::value;
    const int u0 = 32 * st;
    cp_async_wait_group<kMmaStages - 2>();
    __syncthreads();
    stage(st + kMmaStages - 1);
    const uint8_t* const slot = ring + (st % kMmaStages) * kSlotBytes;
    TileFrag nxt[kTileClasses];
#pragma unroll
    for (int c = 0; c < kTileClasses; ++c)
      if (kFull || warp + u0 + 32 + kTileWarps * c < nu) nxt[c] = load_w(u0 + 32 + kTileWarps * c);
#pragma unroll
    for (int c = 0; c < kTileClasses; ++c) {
      // warp-uniform; classes past the last unit keep +0.0f, as the contract's lanes do
      if (!kFull && warp + u0 + kTileWarps * c >= nu) break;
      constexpr int kClassBlk = kTileWarps / kUnitsPerBlock * static_cast<int>(sizeof(Q81));  // per class c
      tile_class<W, NTILE>(acc[c], cur[c], slot + xb_off + kClassBlk * c, slot + xd_off + kClassBlk * c, kVecStride);
    }
#pragma unroll
    for (int c = 0; c < kTileClasses; ++c) cur[c] = nxt[c];
  };
  int st = 0;
  for (; 32 * st + 64 <= nu; ++st) step(st, std::true_type{});
  for (; st < steps; ++st) step(st, std::false_type{});
  cp_async_wait_all();  // the copies of steps past the last (empty groups) before the block exits

  // The butterfly's tree over the 32 class sums t[l]: its levels whose pairs are classes of one
  // warp in registers (KW = 8: off = 16 and 8, t[w] + t[w + 16], t[w + 8] + t[w + 24], then those
  // two; KW = 16: off = 16), the KW warps' sums in shared memory for the rest (off = KW / 2 .. 1).
  __shared__ float part[kTileWarps][kTileRows][kVec + 1];
#pragma unroll
  for (int n = 0; n < NTILE; ++n) {
    const int v = 8 * n + 2 * q;
    float s[4];
#pragma unroll
    for (int k = 0; k < 4; ++k)
      if constexpr (KW == 8)
        s[k] = __fadd_rn(__fadd_rn(acc[0][n][k], acc[2][n][k]), __fadd_rn(acc[1][n][k], acc[3][n][k]));
      else
        s[k] = __fadd_rn(acc[0][n][k], acc[1][n][k]);
    part[warp][g][v] = s[0];
    part[warp][g][v + 1] = s[1];
    part[warp][g + 8][v] = s[2];
    part[warp][g + 8][v + 1] = s[3];
  }
  __syncthreads();
  const float scale = p.w.slab_scale[0];
  for (int o = threadIdx.x; o < kTileRows * kVec; o += 32 * kTileWarps) {
    const int rr = o / kVec, v = o % kVec;
    const int64_t r = r0 + rr, a = a0 + v;
    if (r >= rows || a >= p.n_out) continue;
    float t[kTileWarps];
#pragma unroll
    for (int w = 0; w < kTileWarps; ++w) t[w] = part[w][rr][v];
    if constexpr (KW == 16) {
#pragma unroll
      for (int w = 0; w < 8; ++w) t[w] = __fadd_rn(t[w], t[w + 8]);  // off = 8
    }
#pragma unroll
    for (int w = 0; w < 4; ++w) t[w] = __fadd_rn(t[w], t[w + 4]);    // off = 4
    t[0] = __fadd_rn(__fadd_rn(t[0], t[2]), __fadd_rn(t[1], t[3]));  // off = 2, 1
    store(p, a * p.ld_y + r, __fmul_rn(t[0], scale));
  }
}

template <int W, int NTILE, int KW>
void launch_mma_tiles(MatvecBatch& b, cudaStream_t s) {
  b.block_start[0] = 0;
  for (int j = 0; j < b.n; ++j) {
    b.block_start[j + 1] = b.block_start[j] + static_cast<unsigned>(ceil_div(b.p[j].w.slab_rows, kTileRows));
    if (b.p[j].n_out * (b.p[j].w.cols / 32) > 2147483647)
      fail("matvec: ", b.p[j].n_out, " q8_1 rows of ", b.p[j].w.cols, " values exceed the tiles' int offsets");
  }
  if (b.block_start[b.n] > 65535)
    fail("matvec: ", b.block_start[b.n], " row tiles of ", kTileRows, " exceed the grid (65535)");
  const int64_t gx = ceil_div(b.p[0].n_out, 8 * NTILE);
  if (gx > 2147483647) fail("matvec: ", b.p[0].n_out, " output vectors exceed the grid");
  const dim3 grid(static_cast<unsigned>(gx), b.block_start[b.n]);
  constexpr size_t smem = mma_ring_bytes<W, NTILE>();
  allow_dynamic_smem(reinterpret_cast<const void*>(matvec_mma_kernel<W, NTILE, KW>), smem);
  launch_kernel("matvec_mma_kernel", matvec_mma_kernel<W, NTILE, KW>, grid, 32 * KW, smem, s, b);
}

// --- token tiles fed by the bulk copy engine (sm_90)
//
// The tiles above, with the same per-output chain and tree (tile_frag, tile_class, tile_tree: the
// same bits), fed differently. A block of 16 warps per SM runs persistently over items (a 16-row
// tile of one matrix x one group of 8 NTILE vectors; items blockIdx.x, + gridDim.x, ..., the
// vector groups of a row tile side by side, so their blocks read its weights together: from L2
// after the first). Weights and activations go through a ring of shared-memory stages, a stage
// holding up to `chunk` steps of one item (two for up to 16 vectors, one for 32): per row one
// bulk copy of its values and one of its scales, per vector one of its q8_1 blocks, each warp
// issuing its row's and its vectors' copies. Each stage's `full` mbarrier tells the warps when its
// bytes have landed; a warp frees a stage by arriving on its `empty` barrier, and once all 16 have,
// each refills its share with the stage `stages` on. The ring runs across items, so the next
// item's first steps are in flight while a block runs an item's tree.
//
// Why: the register-fed tile holds the weights one step ahead (the registers hold no more), its
// warps meet at a barrier every step, and each block fills its ring and drains its tree with
// nothing in flight: a 9B B = 32 step moved the weights at ~20 % of DRAM bandwidth (docs/PERF.md).
// Here several steps are in flight per SM, a warp waits only for its stage, and the copies cost
// one instruction per row or vector per stage instead of a cp.async per 16 bytes per thread (A/B
// on an H100: the 9B's B = 8 and B = 32 steps 20 % shorter, docs/PERF.md). A warp reads
// its fragments from shared memory with rows and vectors padded to 16 mod 32 bytes apart (4 mod 8
// words: the 8 rows or vectors g and 4 words q of a fragment load fall in 32 banks). Rows of
// fewer than 4 steps (the 0.6B's 1024 and 3072 widths) keep the register-fed tiles, which
// measured faster there: an item of one or three steps is mostly its tree.
//
// Takes rows whose chunks are whole 16-byte runs: cols a multiple of 128, planar rows 16-byte
// aligned (an item's last scales are read rounded up to 16 bytes, within the row's padding to
// planar_row_stride) and 16-byte aligned activations (bulk_tiles_fit).
constexpr int kBulkWarps = 16;

template <int W>
struct BulkUnit {
  static constexpr int kValBytes = W == 3 ? 32 : W == 6 ? 16 : 8;  // a unit's values
  static constexpr int kScaleBytes = W == 4 ? 1 : 2;               // a unit's scales
  static constexpr int kScalePlane2 = W == 3 ? 2 : 1;              // the scale plane at cols * this / 2
  static constexpr int kUnitsPerBlock = W == 4 ? 2 : 1;            // units per q8_1 block
};

// The block's shared memory: the tree's buffer at 0, the barriers at kBarOff (full, then empty),
// and the launch's `stages` stages of kStageBytes from kRingOff, each 16 rows' values (kValStride
// apart), their scales (kScaleStride apart), then from kXOff the 8 NTILE vectors' q8_1 blocks
// (kXStride apart), kChunk steps of each (two for up to 16 vectors, one for 32; twice that for
// NVFP4 under sub16, whose step is a quarter of Q8_0's weight bytes: at Q8_0's chunks its stages
// were small enough that their per-stage cost showed, H100 9B NVFP4 B = 8 / 16 / 32 7512 / 8913 /
// 14913 -> 6452 / 7844 / 12300 us; one step per stage, at two blocks per SM, was 18 % slower
// than two at B = 8).
template <int W, int NTILE>
struct BulkLayout {
  using B = BulkUnit<W>;
  static constexpr int kVec = 8 * NTILE, kChunk = (NTILE == 4 ? 1 : 2) * (W == 4 ? 2 : 1), kMaxStages = 8;
  static constexpr int kStepBytes = 32 / B::kUnitsPerBlock * static_cast<int>(sizeof(Q81));
  static constexpr int kValStride = kChunk * 32 * B::kValBytes + 16;
  static constexpr int kScaleStride = (kChunk * 32 * B::kScaleBytes + 15) / 16 * 16 + 16;
  static constexpr int kXStride = kChunk * kStepBytes + 16;
  static constexpr int kXOff = kTileRows * (kValStride + kScaleStride);
  static constexpr int kStageBytes = kXOff + kVec * kXStride;
  static constexpr int kBarOff = kBulkWarps * kTileRows * (kVec + 1) * static_cast<int>(sizeof(float));
  static constexpr int kRingOff = (kBarOff + 16 * kMaxStages + 127) / 128 * 128;
  // 16 mod 32 bytes = 8 k + 4 words: g (8 k + 4) mod 32 = 4 g (2 k + 1) mod 32 differs for the
  // 8 rows or vectors g of a fragment load, and the 4 lanes q of one g read 4 consecutive words
  // (values, activations) or the same one (scales): 32 banks, or broadcasts.
  static_assert(kValStride % 32 == 16 && kScaleStride % 32 == 16 && kXStride % 32 == 16, "bank-free strides");
  static_assert(kXOff % 16 == 0 && kStageBytes % 16 == 0 && kBarOff % 8 == 0, "bulk copies land 16-byte aligned");
};

template <int W, int NTILE, bool kReorder = false>
__global__ void __launch_bounds__(32 * kBulkWarps, 1)
    matvec_bulk_kernel(const __grid_constant__ MatvecBatch batch, int n_items, int groups, int stages) {
  using U = Unit<W>;
  using B = BulkUnit<W>;
  using L = BulkLayout<W, NTILE>;
  constexpr int KW = kBulkWarps, kClasses = 32 / KW, kVec = L::kVec, kChunk = L::kChunk;
  constexpr int kStepBlocks = 32 / B::kUnitsPerBlock, kStepBytes = L::kStepBytes;
  extern __shared__ uint4 bulk_smem[];
  uint8_t* const smem = reinterpret_cast<uint8_t*>(bulk_smem);
  auto& part = *reinterpret_cast<float(*)[KW][kTileRows][kVec + 1]>(smem);
  uint64_t* const full = reinterpret_cast<uint64_t*>(smem + L::kBarOff);
  uint64_t* const empty = full + stages;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, q = lane & 3;
  const int nv = (warp < kVec ? 1 : 0) + (warp + 16 < kVec ? 1 : 0);  // the warp's vectors: warp, warp + 16

  if (threadIdx.x == 0) {
    for (int s = 0; s < stages; ++s) {
      mbar_init(&full[s], KW);
      mbar_init(&empty[s], KW);
    }
    mbar_init_fence();
  }
  __syncthreads();

  // An item's place: its matrix j, first row r0, first vector a0 and steps of 32 units.
  struct Item {
    int j, nu, steps;
    int64_t r0, a0;
  };
  auto item_at = [&](int it) {
    Item t;
    const unsigned tile = static_cast<unsigned>(it / groups);
    t.a0 = static_cast<int64_t>(it % groups) * kVec;
    t.j = 0;
    while (t.j + 1 < batch.n && tile >= batch.block_start[t.j + 1]) ++t.j;
    t.r0 = static_cast<int64_t>(tile - batch.block_start[t.j]) * kTileRows;
    t.nu = static_cast<int>(U::count(batch.p[t.j].w.cols));
    t.steps = (t.nu + 31) / 32;
    return t;
  };

  // A warp's share of stage `slot`, steps st.. of item t (up to kChunk): row `warp`'s values
  // (lane 0) and scales (lane 1; rows past the end clamped), vectors warp and warp + 16 (lanes 2,
  // 3; past n_out: the last vector's, computed, never stored). Lane 0 first adds the share's bytes
  // to the stage's barrier, arriving with the activations part (weights may go first, before the
  // launch's dependency wait). A copy is one instruction per lane, but a uniform-datapath one
  // that the compiler serialises over a warp's active lanes: hence the shares over all 16 warps
  // (one warp issuing every copy measured the 9B's B = 32 step 16 % longer than the register-fed
  // tiles; spread, 20 % shorter).
  auto issue = [&](const Item& t, int st, int slot, bool weights, bool acts) {
    const MatvecParams& p = batch.p[t.j];
    const int units = min(32 * kChunk, t.nu - 32 * st);
    const unsigned vb = units * B::kValBytes, sb = (units * B::kScaleBytes + 15) / 16 * 16;
    const unsigned xb = units / B::kUnitsPerBlock * static_cast<unsigned>(sizeof(Q81));
    uint8_t* const stage = smem + L::kRingOff + slot * L::kStageBytes;
    uint64_t* const bar = &full[slot];
    if (lane == 0) {
      if (acts)
        mbar_arrive_expect_tx(bar, (weights ? vb + sb : 0u) + nv * xb);
      else
        mbar_expect_tx(bar, vb + sb);
    }
    __syncwarp();
    if (weights && lane < 2) {
      const int64_t row = t.r0 + warp < p.w.slab_rows ? t.r0 + warp : p.w.slab_rows - 1;
      const uint8_t* const src = p.w.data + row * p.w.row_bytes;
      if (lane == 0)
        bulk_copy(stage + warp * L::kValStride, src + static_cast<int64_t>(32 * st) * B::kValBytes, vb, bar);
      else
        bulk_copy(stage + kTileRows * L::kValStride + warp * L::kScaleStride,
                  src + p.w.cols * B::kScalePlane2 / 2 + static_cast<int64_t>(32 * st) * B::kScaleBytes, sb, bar);
    }
    if (acts && lane >= 2 && lane < 2 + nv) {
      const int v = warp + 16 * (lane - 2);
      const int64_t a = t.a0 + v < p.n_out ? t.a0 + v : p.n_out - 1;
      bulk_copy(stage + L::kXOff + v * L::kXStride, p.xq + a * (p.w.cols / 32) + static_cast<int64_t>(st) * kStepBlocks,
                xb, bar);
    }
  };

  // A warp's copy cursor (every warp keeps the same one): the next stage to copy, as item it, its
  // steps from st, and the ring slot and phase it goes to.
  struct Cursor {
    int it, st, slot;
    unsigned phase;
  };
  Cursor pc{static_cast<int>(blockIdx.x), 0, 0, 0};
  Item pt = item_at(pc.it);
  auto next = [&](Cursor& c, Item& t) {
    c.st += kChunk;
    if (c.st >= t.steps) {
      c.st = 0;
      c.it += gridDim.x;
      if (c.it < n_items) t = item_at(c.it);
    }
    if (++c.slot == stages) c.slot = 0, c.phase ^= 1u;
  };
  // The first stages: their weights before the wait (weights are immutable: launch.cuh), the
  // arrival with their activations (the previous kernel's output) after it.
  {
    Cursor c = pc;
    Item t = pt;
    for (int k = 0; k < stages && c.it < n_items; ++k, next(c, t)) issue(t, c.st, c.slot, true, false);
  }
  pdl_wait();
  pdl_release();
  for (int k = 0; k < stages && pc.it < n_items; ++k, next(pc, pt)) issue(pt, pc.st, pc.slot, false, true);

  // Each warp refills its share of the stages consumed so far but `keep` (the newest ones, which
  // other warps may still read) with the stages `stages` on, once all warps are past them.
  int refill_slot = 0, consumed = 0, refilled = 0;
  unsigned refill_phase = 0;
  auto refill = [&](int keep) {
    for (; refilled < consumed - keep && pc.it < n_items; ++refilled, next(pc, pt)) {
      mbar_wait(&empty[refill_slot], refill_phase);
      issue(pt, pc.st, pc.slot, true, true);
      if (++refill_slot == stages) refill_slot = 0, refill_phase ^= 1u;
    }
  };

  // The lane's bases in a stage (tile_frag's and tile_class's offsets, as in the tiles above).
  constexpr int kClassBlk = KW / B::kUnitsPerBlock * static_cast<int>(sizeof(Q81));
  const int bq = (W == 4 ? (warp & 1) * 16 : 0) + 4 * q;
  const int blk_w = (warp / B::kUnitsPerBlock) * static_cast<int>(sizeof(Q81));
  const int qa_off = g * L::kValStride + B::kValBytes * warp + (W == 3 ? 4 : 2) * q;
  const int sa_off = kTileRows * L::kValStride + g * L::kScaleStride + B::kScaleBytes * warp;
  const int xb_off = g * L::kXStride + blk_w + 4 + bq, xd_off = 2 * q * L::kXStride + blk_w;

  int slot = 0;
  unsigned phase = 0;
  for (int it = blockIdx.x; it < n_items; it += gridDim.x) {
    const Item t = item_at(it);
    float acc[kClasses][NTILE][4];
#pragma unroll
    for (int c = 0; c < kClasses; ++c)
#pragma unroll
      for (int n = 0; n < NTILE; ++n) acc[c][n][0] = acc[c][n][1] = acc[c][n][2] = acc[c][n][3] = 0.0f;
    for (int st0 = 0; st0 < t.steps; st0 += kChunk) {
      mbar_wait(&full[slot], phase);
      const uint8_t* const stage = smem + L::kRingOff + slot * L::kStageBytes;
      const int st1 = min(st0 + kChunk, t.steps);
      for (int st = st0; st < st1; ++st) {
        const int i = st - st0, units = min(32, t.nu - 32 * st);
        const uint8_t* const w = stage + i * 32 * B::kValBytes;
        const uint8_t* const ws = stage + i * 32 * B::kScaleBytes;
        const uint8_t* const x = stage + L::kXOff + i * kStepBytes;
#pragma unroll
        for (int c = 0; c < kClasses; ++c) {
          // warp-uniform; classes past the last unit keep +0.0f, as the contract's lanes do
          if (warp + KW * c >= units) break;
          const TileFrag f = tile_frag<W>(w + qa_off, w + qa_off + 8 * L::kValStride, ws + sa_off,
                                          ws + sa_off + 8 * L::kScaleStride, KW * c);
          tile_class<W, NTILE>(acc[c], f, x + xb_off + kClassBlk * c, x + xd_off + kClassBlk * c, L::kXStride);
        }
      }
      __syncwarp();
      if (lane == 0) mbar_arrive(&empty[slot]);
      if (++slot == stages) slot = 0, phase ^= 1u;
      ++consumed;
      refill(1);  // lag one stage: a warp does not wait for the others on the stage it just read
    }
    refill(0);  // the item's last stage, before the tree's barriers
    tile_tree<KW, NTILE, true, kReorder>(acc, part, batch.p[t.j], t.r0, t.a0);
  }
}

// Whether every matrix of a launch takes the bulk tiles: rows of 4 steps or more, the alignment
// above.
template <int W>
bool bulk_tiles_fit(const MatvecBatch& b) {
  for (int j = 0; j < b.n; ++j) {
    const MatvecParams& p = b.p[j];
    if (Unit<W>::count(p.w.cols) < 4 * 32 || p.w.cols % 128 != 0 || p.w.row_bytes % 16 != 0 ||
        reinterpret_cast<uintptr_t>(p.w.data) % 16 != 0 || reinterpret_cast<uintptr_t>(p.xq) % 16 != 0)
      return false;
  }
  return true;
}

template <int W, int NTILE>
bool launch_bulk_tiles(MatvecBatch& b, cudaStream_t s, bool reorder) {
  static const int smem = [] {  // the block's opt-in limit, 0 where the kernel has no sm_90 code
    cudaFuncAttributes a{};
    MEMRA_CUDA_CHECK(cudaFuncGetAttributes(&a, reinterpret_cast<const void*>(matvec_bulk_kernel<W, NTILE>)));
    int dev = 0, optin = 0;
    MEMRA_CUDA_CHECK(cudaGetDevice(&dev));
    MEMRA_CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
    return a.binaryVersion >= 90 ? optin : 0;
  }();
  using L = BulkLayout<W, NTILE>;
  const int stages = std::min(L::kMaxStages, (smem - L::kRingOff) / L::kStageBytes);
  if (stages < 2 || !bulk_tiles_fit<W>(b)) return false;
  b.block_start[0] = 0;
  for (int j = 0; j < b.n; ++j) {
    b.block_start[j + 1] = b.block_start[j] + static_cast<unsigned>(ceil_div(b.p[j].w.slab_rows, kTileRows));
    if (b.p[j].n_out * (b.p[j].w.cols / 32) > 2147483647)
      fail("matvec: ", b.p[j].n_out, " q8_1 rows of ", b.p[j].w.cols, " values exceed the tiles' int offsets");
  }
  const int64_t groups = ceil_div(b.p[0].n_out, 8 * NTILE), items = groups * b.block_start[b.n];
  if (items > 2147483647) fail("matvec: ", items, " tile items exceed the grid");
  const int64_t grid = std::min<int64_t>(items, sm_count());
  const size_t bytes = static_cast<size_t>(L::kRingOff) + static_cast<size_t>(stages) * L::kStageBytes;
  launch_kernel("matvec_bulk_kernel", reorder ? matvec_bulk_kernel<W, NTILE, true> : matvec_bulk_kernel<W, NTILE>,
                dim3(static_cast<unsigned>(grid)), 32 * kBulkWarps, bytes, s, b, static_cast<int>(items),
                static_cast<int>(groups), stages);
  return true;
}

// --- m = 1, streamed
//
// The dense decode mat-vec as a stream: a grid of resident warps only (as many as fit), warp w
// taking rows w, w + n_warps, ... of the launch's concatenated matrices, each row in groups of
// kGroup units per lane, and the loads of the next group (of this row, or of the warp's next
// row) issued before the current group's arithmetic: two register buffers, alternated by
// unrolling the loop twice. A grid of row blocks instead has every block, and every group of a
// long row, wait a full DRAM latency with nothing of its own in flight, and runs in waves. Each
// row is still one warp, lane l taking units l, l + 32, ... in order, then the butterfly: the
// same bits as matvec_kernel (ops_mmvq checks both against quant.h).
//
// kFull (every row a whole number of groups: all the model shapes) drops the per-unit bounds
// checks; NVFP4 splits codes by sign (Unit<4>::product_staged): the NVFP4 launches are
// issue-bound, so instructions per unit are what these save.
//
// kCarry: the row's matrix is found once, when the row's weights are issued, and carried to its
// store, and lane 0 loads the row's epilogue operands (the matrix's slab scale, the old y of a
// residual add) at the same time instead of after the butterfly. Same operations on the same
// values: same bits. It pays on the NVFP4 instances only when both halves go together (each
// alone, and kCarry on the Q8_0 instance, measured slower), so only the NVFP4 instances take it.
template <int W> struct StreamShape;
template <> struct StreamShape<3> { enum : int { kGroup = 2, kBlocksPerSM = 8 }; };  // 2 x 34 B per lane in flight
template <> struct StreamShape<4> { enum : int { kGroup = 4, kBlocksPerSM = 8 }; };  // 4 x 9 B
template <>
struct StreamShape<6> {
  enum : int { kGroup = 2, kBlocksPerSM = 8 };
};  // 2 x 18 B

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
// token tile: streamed passes of 4 rows each stream the weights again, and measured slower than
// the tile at 16 rows; at 4 rows the stream is 1.2-1.8x faster than the tile.
constexpr int kStreamRows = 4;

template <int W, bool kBest = false>
bool launch_stream(MatvecBatch& b, cudaStream_t s, int* n_best = nullptr) {
  for (int j = 0; j < b.n; ++j)
    if (b.p[j].xq != b.p[0].xq || b.p[j].w.cols != b.p[0].w.cols) return false;
  b.row_start[0] = 0;
  for (int j = 0; j < b.n; ++j) b.row_start[j + 1] = b.row_start[j] + b.p[j].w.slab_rows;
  const int64_t nu = Unit<W>::count(b.p[0].w.cols);
  // NVFP4 rows of whole 256-unit groups (the 9B's 4096- and 12288-wide rows) take 8 units per
  // lane per group at 5 blocks per SM (92 registers): 72 bytes in flight per lane, 46 KB per SM
  // against 37 KB with 4 units at 8 blocks, which measured 7 % slower per 9B decode step. The
  // same doubling for Q8_0 measured slower, so Q8_0 keeps StreamShape<3>.
  // Rows of whole 384-unit groups (the 9B FFN's 12288-wide down rows) take 12 units per lane per
  // group at 4 blocks per SM (127 registers): 2112 resident warps for the down's 4096 rows, each
  // warp at most 2 rows of 2 groups (4 waits), where the 8-unit form's 2640 warps leave some with
  // 2 rows of 3 (6 waits) and the rest idle after their first row (1.3 % per 9B decode step;
  // measured on that shape only).
  // pair32 (W = 6) takes the same bytes per lane in flight in units of 32 values.
  using SS = StreamShape<W>;
  if constexpr (W == 4) {
    if (nu % 384 == 0) return launch_stream_as<W, true, 12, 4, true, kBest>(b, s, n_best);
    if (nu % 256 == 0) return launch_stream_as<W, true, 8, 5, true, kBest>(b, s, n_best);
  }
  if constexpr (W == 6) {
    if (nu % 192 == 0) return launch_stream_as<W, true, 6, 4, true, kBest>(b, s, n_best);
    if (nu % 128 == 0) return launch_stream_as<W, true, 4, 5, true, kBest>(b, s, n_best);
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
  if constexpr (W == 6) {
    if (nu % 192 == 0) return launch_stream_as<W, true, 6, 4, false, false, kStreamRows>(b, s, nullptr);
    if (nu % 128 == 0) return launch_stream_as<W, true, 4, 5, false, false, kStreamRows>(b, s, nullptr);
  }
  // Q8_0 at 4 blocks per SM: its four accumulators and row pointers spill at 8 (64 registers)
  constexpr int kBlocks = W == 3 ? 4 : SS::kBlocksPerSM;
  if (nu % (32 * SS::kGroup) == 0) return launch_stream_as<W, true, SS::kGroup, kBlocks, false, false, kStreamRows>(b, s, nullptr);
  return launch_stream_as<W, false, SS::kGroup, kBlocks, false, false, kStreamRows>(b, s, nullptr);
}

// The tensor-core tiles read a row's units with 4-byte loads (Q8_0: 32 * u + 4q; NVFP4: 8 * u +
// 2q as 2 bytes) and q8_1 blocks' qs at 4-byte offsets: planar rows (16-byte aligned) and whole
// units of cols, every row tile on the grid.
bool mma_tiles_fit(const MatvecBatch& b) {
  unsigned tiles = 0;
  for (int j = 0; j < b.n; ++j) {
    if (b.p[j].w.cols % 32 != 0 || !b.p[j].xq) return false;
    tiles += static_cast<unsigned>(ceil_div(b.p[j].w.slab_rows, kTileRows));
  }
  return tiles <= 65535;
}

template <int W, bool kBlock, int NT, int R = 1>
void launch(MatvecBatch& b, cudaStream_t s) {
  if constexpr (R == 1 && kMatvecRows < W, kBlock, NT >> 1) {
    bool wide = true;
    for (int j = 0; j < b.n; ++j) wide = wide && b.p[j].w.slab_rows >= 8;
    if (wide) return launch<W, kBlock, NT, kMatvecRows<W, kBlock, NT>>(b, s);
  }
  if constexpr (R > 1)
    for (int j = 0; j < b.n; ++j)
      b.block_start[j + 1] = b.block_start[j] + static_cast<unsigned>(ceil_div(b.p[j].w.slab_rows, kWarpRows * R));
  const int64_t gy = ceil_div(b.p[0].n_out, NT);
  if (gy > 65535) fail("matvec: ", b.p[0].n_out, " output vectors in tiles of ", NT, " exceed the grid (65535)");
  const dim3 grid(b.block_start[b.n], static_cast<unsigned>(gy));
  size_t smem = 0;  // the staged activation planes of m = 1 with q8_1 activations (kStage)
  if constexpr (NT == 1 && (W == 3 || W == 4 || W == 6)) smem = stage_smem(b, matvec_kernel<W, kBlock, NT>);
  launch_kernel("matvec_kernel", matvec_kernel<W, kBlock, NT, R>, grid, kBlock ? 128 : 32 * kWarpRows, smem, s, b);
}

// The bulk-fed tiles where they fit (bulk_tiles_fit and an sm_90 kernel), else the register-fed
// ones (KW warps): true for the former.
template <int W, int NTILE, int KW>
bool launch_tiles(MatvecBatch& b, cudaStream_t s, bool reorder) {
  if (launch_bulk_tiles<W, NTILE>(b, s, reorder)) return true;
  launch_mma_tiles<W, NTILE, KW>(b, s);
  return false;
}

template <int W, bool kBlock>
bool launch_nt(MatvecBatch& b, cudaStream_t s, bool reorder) {  // true: the bulk tiles took it
  b.block_start[0] = 0;
  for (int j = 0; j < b.n; ++j) {
    const int64_t rows = b.p[j].w.slab_rows;
    b.block_start[j + 1] = b.block_start[j] + static_cast<unsigned>(kBlock ? rows : ceil_div(rows, kWarpRows));
  }
  if constexpr (!kBlock && (W == 3 || W == 4 || W == 6)) {
    if (!b.p[0].slab_of && b.p[0].n_out == 1 && launch_stream<W>(b, s)) return false;
    // a few activation rows (a batched decode step, a short prompt): one streamed launch instead
    // of the token tile, which holds one unit per lane in flight
    if (!b.p[0].slab_of && b.p[0].n_out > 1 && b.p[0].n_out <= kStreamRows && launch_stream_rows<W>(b, s)) return false;
  }
  // more (a larger batch, a prefill): the tensor-core tiles, 8 vectors per n-tile
  if constexpr (!kBlock && (W == 3 || W == 4 || W == 6)) {
    if (!b.p[0].slab_of && b.p[0].n_out > kStreamRows && b.p[0].x_div == 1 && mma_tiles_fit(b)) {
      if (b.p[0].n_out <= 8) return launch_tiles<W, 1, 8>(b, s, reorder);
      // 32 vectors in one block of 16 warps where a row has 4 or more steps of 32 units: below that
      // the block's ring fill and epilogue tree are most of its time, and one block per SM leaves
      // nothing to overlap them (H100, B = 32 against two 8-warp blocks: the 9B's step 13017 ->
      // 12189 us, the 0.6B's 2080 -> 2282 with 32-vector blocks on its 1024-wide rows too).
      if (b.p[0].n_out <= 16 || Unit<W>::count(b.p[0].w.cols) < 4 * 32) return launch_tiles<W, 2, 8>(b, s, reorder);
      return launch_tiles<W, 4, 16>(b, s, reorder);
    }
  }
  if (b.p[0].slab_of || b.p[0].n_out == 1)
    launch<W, kBlock, 1>(b, s);
  else if (b.p[0].n_out < 16)
    launch<W, kBlock, 8>(b, s);
  else
    launch<W, kBlock, 16>(b, s);
  return false;
}

template <int W>
bool launch_family(MatvecBatch& b, DecodeMatvec f, cudaStream_t s, bool reorder) {
  if (f == DecodeMatvec::dp4a) return launch_nt<W, true>(b, s, reorder);
  return launch_nt<W, false>(b, s, reorder);
}

}  // namespace

// --- dispatch

bool matvec_run_multi(const MatvecParams* ps, int n, DecodeMatvec family, cudaStream_t s, bool bulk_tile_reorder) {
  if (n < 1 || n > kMatvecMulti) fail("matvec: ", n, " matrices in one launch (1..", kMatvecMulti, ")");
  MatvecBatch b{};
  b.n = 0;
  for (int j = 0; j < n; ++j) {
    const MatvecParams& p = ps[j];
    if (p.n_out == 0 || p.w.slab_rows == 0) continue;
    if (p.w.cols >= (int64_t{1} << 31)) fail("matvec: row length ", p.w.cols, " exceeds 2^31 - 1 values");
    if (p.w.type != ps[0].w.type || p.n_out != ps[0].n_out || (p.slab_of == nullptr) != (ps[0].slab_of == nullptr) ||
        (p.x4 == nullptr) != (ps[0].x4 == nullptr) || p.nvfp4_dot != ps[0].nvfp4_dot)
      fail("matvec: matrices of one launch must share type, n_out, slab form, activation form and NVFP4 dot");
    if (p.x4 && p.w.type != DType::NVFP4)
      fail("matvec: W4A4 activations (x4) go with NVFP4 weights, not ", dtype_name(p.w.type));
    b.p[b.n++] = p;
  }
  if (b.n == 0) return false;
  switch (b.p[0].w.type) {
    case DType::F32:
      return launch_family<0>(b, family, s, bulk_tile_reorder);
    case DType::F16:
      return launch_family<1>(b, family, s, bulk_tile_reorder);
    case DType::BF16:
      return launch_family<2>(b, family, s, bulk_tile_reorder);
    case DType::Q8_0:
      return launch_family<3>(b, family, s, bulk_tile_reorder);
    case DType::NVFP4:
      if (b.p[0].x4) return launch_family<5>(b, family, s, bulk_tile_reorder);
      return b.p[0].nvfp4_dot == Nvfp4Dot::pair32 ? launch_family<6>(b, family, s, bulk_tile_reorder)
                                                  : launch_family<4>(b, family, s, bulk_tile_reorder);
    default: break;
  }
  fail("matvec: weight type ", dtype_name(b.p[0].w.type), " has no kernel (F32, F16, BF16, Q8_0, NVFP4)");
}

bool matvec_run(const MatvecParams& p, DecodeMatvec family, cudaStream_t s, bool bulk_tile_reorder) {
  return matvec_run_multi(&p, 1, family, s, bulk_tile_reorder);
}

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
    const bool ran = p.w.type == DType::Q8_0           ? launch_stream<3, true>(b, s, &n_best)
                     : p.nvfp4_dot == Nvfp4Dot::pair32 ? launch_stream<6, true>(b, s, &n_best)
                                                       : launch_stream<4, true>(b, s, &n_best);
    if (ran) return n_best;
  }
  matvec_run(p, family, s);
  return 0;
}

}  // namespace memra::cuda
