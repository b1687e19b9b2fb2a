// src/cuda/gemm.cu — int8 and bf16 mma.sync prefill GEMM (see gemm.cuh for the contract).
//
// int8 (gemm_kernel): shared-memory tiles (128 rows x 128 tokens, 256-value chunks, cp.async
// double buffering) over planar weight rows (aligned 32-bit A fragments for Q8_0, NVFP4 nibbles
// in value order: e2m1x2_seq4); f32(isum) from an mma accumulating onto 1.5 * 2^23 (no integer
// conversion); a warp's n-tiles computed without a branch between them; fp16 scales through the hardware
// conversion (dev_fp16_fast: exact, the same value for every non-NaN scale). Staging is what
// makes the GEMM pay: read straight from global memory per mma it is L1/L2 latency-bound and
// slower than the token-tiled mat-vec on NVFP4 and MoE shapes.
// bf16 (gemm_bf16_kernel): m16n8k16 bf16 mma, fragments straight from global memory, each
// activation split into three bf16 terms. Two terms (16 bits per activation) put the relative
// logit noise against the oracle on the tiny bf16 fixtures over the float-weight ceiling of 1e-5
// (up to 4.4e-5); three carry all 24 bits, and the noise is the f32 path's.
//
// Fragment layouts of PTX's mma.m16n8k32 / m16n8k16 .s8 (row.col): common.cuh (mma_k32).
#include <cuda_bf16.h>

#include "cuda/common.cuh"
#include "cuda/gemm.cuh"
#include "cuda/launch.cuh"

namespace memra::cuda {

namespace {

constexpr int kWarps = 4;
constexpr int kRowsPerWarp = 16;
constexpr int kNTiles = 16;  // 8 tokens each: 128 tokens per block
constexpr int kTokens = 8 * kNTiles;

// m16n8k16 bf16 x bf16 -> f32, accumulating into c. Fragments as the int8 k16 form, with a
// register holding two bf16 (the lower k in the low half): A a0 = row g, k 2q..2q+1; a1 = row
// g + 8; a2, a3 the same at k + 8. B b0 = k 2q..2q+1 of column g; b1 at k + 8.
__device__ __forceinline__ void mma_bf16(float (&c)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0,
                                         uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// Two f32 activations as three bf16 pairs: t0 = bf16_rn(x), t1 = bf16_rn(x - t0),
// t2 = bf16_rn(x - t0 - t1) (each difference exact in f32).
__device__ __forceinline__ void split_bf16x2(float2 x, uint32_t (&t)[3]) {
#pragma unroll
  for (int i = 0; i < 3; ++i) {
    const __nv_bfloat162 h = __floats2bfloat162_rn(x.x, x.y);
    t[i] = *reinterpret_cast<const uint32_t*>(&h);
    x.x = __fsub_rn(x.x, __low2float(h));
    x.y = __fsub_rn(x.y, __high2float(h));
  }
}

__device__ __forceinline__ int64_t imin(int64_t a, int64_t b) { return a < b ? a : b; }
__device__ __forceinline__ int64_t imax(int64_t a, int64_t b) { return a > b ? a : b; }

// --- kernels

// --- int8 GEMM: shared-memory tiles, cp.async double buffering
//
// A block covers 128 weight rows x 128 tokens. K goes in chunks of 256 values (Q8_0: 8 units,
// NVFP4: 16), each chunk's weight rows, their scales and the q8_1 activation blocks copied into
// shared memory by cp.async while the previous chunk is computed; the weight half of the first
// chunk is issued before pdl_wait (weights are immutable).
//
// The arithmetic is quant.h's sequential dot: per unit an exact isum from a zero accumulator, then
// f32(f32(dw * dx) * f32(isum)) added to the running f32 sum, units in order. One change of form,
// not of value: the mma accumulates from kMmaMagic (common.cuh mma_isum) and one f32 subtraction
// gives f32(isum), without the quarter-rate integer-to-float conversion.
//
// Warp w takes rows 16 (w % 8).. and, where the tile has two token halves, the n-tiles of parity
// w / 8 (the 128-token tile: 16 warps, 8 n-tiles and 32 accumulators per thread); each chunk's
// weight scales are staged in shared memory with its rows (one 16-byte copy per row) rather than
// a global load per unit inside the loop. The 128-token tile is register- and
// shared-memory-limited to one block per SM, so the token halves double the warps a scheduler
// can issue from (8 warps of 16 n-tiles left 2 per scheduler, under 1 eligible). The token split
// moves no operation: every accumulator's chain is the same, but both halves decode the same
// weight fragments. The 32-token tile skips a warp's n-tiles past the block's vectors: a routed
// tile holds a group's ~T k / E vectors (16 on a 35B-A3B prefill of 512 tokens), whose mma and
// f32 epilogue on padding were half the work. Its NVFP4 form with one half (8 warps, all 4
// n-tiles each, 3 blocks per SM; gemm_halves chooses) decodes each unit's nibbles and UE4M3
// scales once: with ~2 live n-tiles a warp that decode, done by both halves, was most of the
// remaining instructions of a routed tile.
constexpr int kRowWarps = 8;                   // warps across the rows
constexpr int kGemmRows = 16 * kRowWarps;      // weight rows per block
constexpr int kGemmTokens = 128;               // tokens per block (16 n-tiles of 8)
constexpr int kRoutedTokens = gemm_routed_tile;  // routed launches: a slab's group averages T k / E vectors
constexpr int kChunkVals = 256;             // K values per stage
constexpr int kChunkBlocks = kChunkVals / 32;  // q8_1 blocks per stage
constexpr int kBStride = kChunkBlocks * 36 + 16;  // bytes per token row of a B stage (+16: banks)

template <int W> struct GemmUnit;
template <> struct GemmUnit<3> {  // Q8_0: 32-value unit, 32 bytes of qs, fp16 d after the qs plane
  static constexpr int kVals = 32, kBytes = 32;
};
template <> struct GemmUnit<4> {  // NVFP4: 16-value unit, 8 bytes of nibbles, a scale byte after them
  static constexpr int kVals = 16, kBytes = 8;
};

// A launch's matrices: up to gemm_multi dense ones over the same activations (a layer's q, k
// and v), their row tiles concatenated along grid y, or one routed launch. A block's job is the
// one whose row tiles hold blockIdx.y; each job's outputs are computed as by a launch of its own.
struct GemmJobs {
  GemmParams job[gemm_multi];
  int64_t tile_end[gemm_multi] = {};  // row tiles of jobs 0..j
  int n = 0;
  bool x16 = false;  // stage_b: every activation row's chunks start on 16-byte boundaries
};

// TOK: tokens (output vectors) per block, in H token halves of kWarpTiles n-tiles (gemm_halves).
template <int W, int TOK, int H>
struct GemmTile {
  static constexpr int kHalves = H;
  static constexpr int kThreads = 32 * kRowWarps * kHalves;
  static constexpr int kWarpTiles = TOK / 8 / kHalves;                    // n-tiles per warp
  static constexpr int kMinBlocks = TOK > 32 ? 1 : kHalves == 2 ? 2 : 3;  // per SM (__launch_bounds__)
  static constexpr int kThreadsPerRow = kThreads / kGemmRows;             // stage_a_full
  static constexpr int kUnits = kChunkVals / GemmUnit<W>::kVals;   // units per stage
  static constexpr int kAStride = kUnits * GemmUnit<W>::kBytes + 16;  // bytes per weight row (+16: banks)
  static constexpr int kABytes = kGemmRows * kAStride;
  static constexpr int kBBytes = TOK * kBStride;
  static constexpr int kSBytes = kGemmRows * 16;  // each row's scales of the chunk (Q8_0 8 fp16, NVFP4 16 UE4M3)
  static constexpr int kStageBytes = kABytes + kBBytes + kSBytes;
  // + dx [block][token] as f32, + the tokens' activation and output rows (int64)
  static constexpr int kSmem = 2 * kStageBytes + kChunkBlocks * TOK * 4 + 2 * TOK * 8;
};

// Chunk `ch`'s weight rows (A) of the block into stage memory: 16-byte copies of each row's
// unit bytes (planar rows: the chunk's qs / nibbles are contiguous and 16-byte aligned), and the
// 16 bytes of the row's scale plane that hold the chunk's scales into ss (a partial last chunk's
// piece ends inside the row: planar rows are padded to 16 bytes).
//
// A full chunk (stage_a_full): kThreadsPerRow threads per row (4 or 2), each the same
// P / kThreadsPerRow pieces of its row every chunk, so a thread forms its row's address once per chunk and a copy
// is an add. Walking the pieces as one flat index instead (a division, a clamped row and a 64-bit
// row product per copy) cost more instructions than the 32-token tile's mma and epilogue: the
// staging is per block, the same for 32 tokens as for 128.
template <int W, int TOK, int H, int P>
__device__ __forceinline__ void stage_a_full(const GemmParams& p, int slab, int64_t r0, int64_t ch, uint8_t* sa,
                                             uint8_t* ss) {
  using T = GemmTile<W, TOK, H>;
  constexpr int kThreadsPerRow = T::kThreadsPerRow;
  static_assert(P % kThreadsPerRow == 0 && T::kThreads % kGemmRows == 0);
  const int rr = static_cast<int>(threadIdx.x) / kThreadsPerRow, k0 = static_cast<int>(threadIdx.x) % kThreadsPerRow;
  const int64_t rows = p.w.slab_rows;
  const uint8_t* row = p.w.data + (slab * rows + imin(r0 + rr, rows - 1)) * p.w.row_bytes;  // clamped: never stored
  const uint8_t* src = row + ch * T::kUnits * GemmUnit<W>::kBytes + 16 * k0;
  uint8_t* dst = sa + rr * T::kAStride + 16 * k0;
#pragma unroll
  for (int j = 0; j < P / kThreadsPerRow; ++j) cp_async16(dst + 16 * kThreadsPerRow * j, src + 16 * kThreadsPerRow * j);
  if (k0 == 0) cp_async16(ss + rr * 16, row + (W == 3 ? p.w.cols : p.w.cols / 2) + 16 * ch);
}

// The partial last chunk: its `pieces` per row and the scale piece, one flat index.
template <int W, int TOK, int H>
__device__ __forceinline__ void stage_a_pieces(const GemmParams& p, int slab, int64_t r0, int64_t ch, int pieces,
                                               uint8_t* sa, uint8_t* ss) {
  using T = GemmTile<W, TOK, H>;
  const int per_row = pieces + 1;  // + the scale piece
  const int64_t rows = p.w.slab_rows;
  const int64_t scale_plane = W == 3 ? p.w.cols : p.w.cols / 2;
#pragma unroll 1
  for (int i = threadIdx.x; i < kGemmRows * per_row; i += T::kThreads) {
    const int rr = i / per_row, k = i % per_row;
    const int64_t r = slab * rows + imin(r0 + rr, rows - 1);  // clamped: rows past the end are never stored
    const uint8_t* row = p.w.data + r * p.w.row_bytes;
    if (k < per_row - 1)
      cp_async16(sa + rr * T::kAStride + 16 * k, row + ch * T::kUnits * GemmUnit<W>::kBytes + 16 * k);
    else
      cp_async16(ss + rr * 16, row + scale_plane + 16 * ch);
  }
}

template <int W, int TOK, int H>
__device__ __forceinline__ void stage_a(const GemmParams& p, int slab, int64_t r0, int64_t ch, int nu_c, uint8_t* sa,
                                        uint8_t* ss) {
  using T = GemmTile<W, TOK, H>;
  constexpr int kFull = T::kUnits * GemmUnit<W>::kBytes / 16;
  if (nu_c == T::kUnits) return stage_a_full<W, TOK, H, kFull>(p, slab, r0, ch, sa, ss);
  stage_a_pieces<W, TOK, H>(p, slab, r0, ch, nu_c * GemmUnit<W>::kBytes / 16, sa, ss);
}

// Chunk `ch`'s q8_1 blocks of the block's tokens (B) into stage memory, as stored (36-byte
// blocks: fp16 d, fp16 s, 32 int8); token tt reads activation row xrow[tt]. A full chunk of
// activation rows whose blocks lie on 16-byte boundaries (x16: cols / 32 a multiple of 4 and
// xq 16-byte aligned, so every row's chunk of 8 blocks, 288 bytes, starts on one) goes in 18
// 16-byte copies per token; else 4-byte copies (a block is only 4-byte aligned).
template <int TOK, int NTHR>
__device__ __forceinline__ void stage_b(const GemmParams& p, bool x16, const int64_t* xrow, int64_t ch, int nb_c,
                                        uint8_t* sb) {
  const int64_t nqb = p.w.cols / 32;
  if (x16 && nb_c == kChunkBlocks) {
    constexpr int kPieces = kChunkBlocks * 36 / 16;
#pragma unroll 1
    for (int i = threadIdx.x; i < TOK * kPieces; i += NTHR) {
      const int tt = i / kPieces, k = i % kPieces;
      const uint8_t* src = reinterpret_cast<const uint8_t*>(p.xq + xrow[tt] * nqb + ch * kChunkBlocks) + 16 * k;
      cp_async16(sb + tt * kBStride + 16 * k, src);
    }
    return;
  }
  const int words = nb_c * 9;  // per token
  for (int i = threadIdx.x; i < TOK * words; i += NTHR) {
    const int tt = i / words, k = i % words;
    const float* src = reinterpret_cast<const float*>(p.xq + xrow[tt] * nqb + ch * kChunkBlocks) + k;
    cp_async4(reinterpret_cast<float*>(sb + tt * kBStride) + k, src);
  }
}

// One stage's units for warp (rw, half): its NT live n-tiles (n-tile n covers the block's tokens
// 8 (H n + half)..+7 for H = kHalves, so two halves alternate and a block of 8 or 16 vectors gives
// each the same work), every unit's mma and the contract's epilogue per accumulator. NT is a
// template argument so that the tiles' chains stay branch-free, which the scheduler interleaves.
template <int W, int TOK, int H, int NT>
__device__ __forceinline__ void gemm_units(float (&acc)[GemmTile<W, TOK, H>::kWarpTiles][4], const uint8_t* sa,
                                           const uint8_t* ss, int nu_c, int rw, int half, int lane, const float* dxs) {
  using T = GemmTile<W, TOK, H>;
  const int g = lane >> 2, q = lane & 3;
  const uint8_t* sb = sa + T::kABytes;
  const uint8_t* arow_a = sa + (16 * rw + g) * T::kAStride;
  const uint8_t* arow_b = arow_a + 8 * T::kAStride;
  const uint8_t* srow_a = ss + (16 * rw + g) * 16;
  const uint8_t* srow_b = srow_a + 8 * 16;
  for (int i = 0; i < nu_c; ++i) {
    int a0, a1, a2 = 0, a3 = 0;
    float dwa, dwb;
    int blk, boff;  // q8_1 block of the unit in the stage, and its byte offset into qs
    if constexpr (W == 3) {
      a0 = *reinterpret_cast<const int*>(arow_a + 32 * i + 4 * q);
      a2 = *reinterpret_cast<const int*>(arow_a + 32 * i + 16 + 4 * q);
      a1 = *reinterpret_cast<const int*>(arow_b + 32 * i + 4 * q);
      a3 = *reinterpret_cast<const int*>(arow_b + 32 * i + 16 + 4 * q);
      dwa = dev_fp16_fast(reinterpret_cast<const uint16_t*>(srow_a)[i]);
      dwb = dev_fp16_fast(reinterpret_cast<const uint16_t*>(srow_b)[i]);
      blk = i;
      boff = 0;
    } else {
      a0 = e2m1x2_seq4(*reinterpret_cast<const uint16_t*>(arow_a + 8 * i + 2 * q));
      a1 = e2m1x2_seq4(*reinterpret_cast<const uint16_t*>(arow_b + 8 * i + 2 * q));
      dwa = dev_ue4m3_half(srow_a[i]);
      dwb = dev_ue4m3_half(srow_b[i]);
      blk = i >> 1;
      boff = (i & 1) * 16;
    }
    const float* dx = dxs + blk * TOK + 8 * half + 2 * q;
    // the live n-tiles, also past T where a tile is partial (clamped copies of the last token,
    // never stored)
#pragma unroll
    for (int n = 0; n < NT; ++n) {
      const uint8_t* xb = sb + (8 * (H * n + half) + g) * kBStride + 36 * blk + 4 + boff + 4 * q;
      int c[4];
      if constexpr (W == 3)
        mma_k32(c, a0, a1, a2, a3, *reinterpret_cast<const int*>(xb), *reinterpret_cast<const int*>(xb + 16));
      else
        mma_k16(c, a0, a1, *reinterpret_cast<const int*>(xb));
      const float2 dxp = *reinterpret_cast<const float2*>(dx + 8 * H * n);  // tokens 2q, 2q + 1 of the tile
      acc[n][0] = __fadd_rn(acc[n][0], __fmul_rn(__fmul_rn(dwa, dxp.x), mma_isum(c[0])));
      acc[n][1] = __fadd_rn(acc[n][1], __fmul_rn(__fmul_rn(dwa, dxp.y), mma_isum(c[1])));
      acc[n][2] = __fadd_rn(acc[n][2], __fmul_rn(__fmul_rn(dwb, dxp.x), mma_isum(c[2])));
      acc[n][3] = __fadd_rn(acc[n][3], __fmul_rn(__fmul_rn(dwb, dxp.y), mma_isum(c[3])));
    }
  }
}

// gemm_units for the warp's `live` n-tiles, one instance per count from NT down
template <int W, int TOK, int H, int NT>
__device__ __forceinline__ void gemm_units_live(int live, float (&acc)[GemmTile<W, TOK, H>::kWarpTiles][4],
                                                const uint8_t* sa, const uint8_t* ss, int nu_c, int rw, int half,
                                                int lane, const float* dxs) {
  if constexpr (NT > 0) {
    if (live == NT) return gemm_units<W, TOK, H, NT>(acc, sa, ss, nu_c, rw, half, lane, dxs);
    gemm_units_live<W, TOK, H, NT - 1>(live, acc, sa, ss, nu_c, rw, half, lane, dxs);
  }
}

// W: 3 = Q8_0 (unit = 32-value block, k32 mma), 4 = NVFP4 (unit = 16-value sub-block, k16 mma).
// TOK tokens per block, and routed launches (GemmParams::order): block x takes tile x of the
// tile list, TOK vectors of one slab's group (their activation and output rows gathered into
// shared memory; the weight rows then staged after the wait, since a block past the list leaves
// before reading any). Each output's chain is the dense kernel's: same bits per (row, vector).
// The 32-vector instances are held to 64 registers (two halves: two blocks of 16 warps) or 80
// (one: three blocks of 8 warps) with no spills, so that blocks share an SM: a routed launch is
// ~1200 short blocks (a 35B-A3B layer: 256 experts x ~16 vectors x 4 row tiles).
template <int W, int TOK, int H>
__global__ void __launch_bounds__(GemmTile<W, TOK, H>::kThreads, GemmTile<W, TOK, H>::kMinBlocks)
    gemm_kernel(const __grid_constant__ GemmJobs jobs) {
  using T = GemmTile<W, TOK, H>;
  int job = 0;
#pragma unroll
  for (int j = 0; j + 1 < gemm_multi; ++j) job += j + 1 < jobs.n && blockIdx.y >= jobs.tile_end[j];
  const GemmParams& p = jobs.job[job];
  static_assert(T::kUnits * (W == 3 ? 2 : 1) == 16, "a chunk's scales are one 16-byte piece per row");
  extern __shared__ __align__(16) uint8_t smem[];
  float* dxs = reinterpret_cast<float*>(smem + 2 * T::kStageBytes);  // [kChunkBlocks][TOK]
  int64_t* xrow = reinterpret_cast<int64_t*>(dxs + kChunkBlocks * TOK);  // [TOK] activation rows
  int64_t* yrow = xrow + TOK;                                            // [TOK] output rows (-1: none)
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, q = lane & 3;
  const int rw = warp % kRowWarps, half = warp / kRowWarps;  // rows 16 rw.., n-tiles kHalves n + half
  const int64_t rows = p.w.slab_rows;
  const bool routed = p.order != nullptr;
  int slab = 0;
  int64_t nv = 0;  // the block's vectors (tokens or a group's slice), at most TOK
  const int64_t r0 = (blockIdx.y - (job ? jobs.tile_end[job - 1] : 0)) * kGemmRows;
  const int64_t nu = p.w.cols / GemmUnit<W>::kVals;
  const int64_t n_chunks = (nu + T::kUnits - 1) / T::kUnits;
  auto units_of = [&](int64_t ch) { return static_cast<int>(imin(T::kUnits, nu - ch * T::kUnits)); };
  auto blocks_of = [&](int64_t ch) { return (units_of(ch) * GemmUnit<W>::kVals + 31) / 32; };

  if (!routed)
    stage_a<W, TOK, H>(p, 0, r0, 0, units_of(0), smem,
                       smem + T::kABytes + T::kBBytes);  // weights only: before the wait
  pdl_wait();
  pdl_release();
  if (routed) {
    if (static_cast<int>(blockIdx.x) >= *p.n_tiles) return;  // the whole block: past the tile list
    slab = p.tile_slab[blockIdx.x];
    const int64_t j0 = p.tile_start[blockIdx.x], ge = p.group_start[slab + 1];
    nv = ge - j0;
    for (int tt = threadIdx.x; tt < TOK; tt += T::kThreads) {
      const int64_t j = j0 + tt, a = p.order[j < ge ? j : ge - 1];  // clamped: never stored
      xrow[tt] = a / p.x_div;
      yrow[tt] = j < ge ? a : -1;
    }
    stage_a<W, TOK, H>(p, slab, r0, 0, units_of(0), smem, smem + T::kABytes + T::kBBytes);
  } else {
    const int64_t t0 = static_cast<int64_t>(blockIdx.x) * TOK;
    nv = p.T - t0;
    for (int tt = threadIdx.x; tt < TOK; tt += T::kThreads) {
      xrow[tt] = imin(t0 + tt, p.T - 1);  // clamped: tokens past T are never stored
      yrow[tt] = t0 + tt < p.T ? t0 + tt : -1;
    }
  }
  __syncthreads();
  stage_b<TOK, T::kThreads>(p, jobs.x16, xrow, 0, blocks_of(0), smem + T::kABytes);
  cp_async_commit();

  constexpr int kWarpTiles = T::kWarpTiles;
  // this warp's n-tiles holding any of the block's vectors (n-tile n: vectors 8 (H n + half)..)
  const int live = static_cast<int>(imin(kWarpTiles, imax(0, nv - 8 * half + 8 * H - 1) / (8 * H)));
  float acc[kWarpTiles][4];
#pragma unroll
  for (int n = 0; n < kWarpTiles; ++n) acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.0f;

  for (int64_t ch = 0; ch < n_chunks; ++ch) {
    const int st = static_cast<int>(ch & 1);
    if (ch + 1 < n_chunks) {  // the next chunk into the other stage, while this one is computed
      uint8_t* nxt = smem + (st ^ 1) * T::kStageBytes;
      stage_a<W, TOK, H>(p, slab, r0, ch + 1, units_of(ch + 1), nxt, nxt + T::kABytes + T::kBBytes);
      stage_b<TOK, T::kThreads>(p, jobs.x16, xrow, ch + 1, blocks_of(ch + 1), nxt + T::kABytes);
    }
    cp_async_commit();
    cp_async_wait_group<1>();
    __syncthreads();
    const uint8_t* sa = smem + st * T::kStageBytes;
    const uint8_t* sb = sa + T::kABytes;
    const uint8_t* ss = sb + T::kBBytes;
    const int nu_c = units_of(ch), nb_c = blocks_of(ch);
    for (int i = threadIdx.x; i < nb_c * TOK; i += T::kThreads) {  // dx as f32, [block][token]
      const int b = i / TOK, tt = i % TOK;
      dxs[i] = dev_fp16_fast(*reinterpret_cast<const uint16_t*>(sb + tt * kBStride + 36 * b));
    }
    __syncthreads();
    if constexpr (TOK <= 32)  // a warp's n-tiles past the block's vectors skipped
      gemm_units_live<W, TOK, H, kWarpTiles>(live, acc, sa, ss, nu_c, rw, half, lane, dxs);
    else
      gemm_units<W, TOK, H, kWarpTiles>(acc, sa, ss, nu_c, rw, half, lane, dxs);
    __syncthreads();  // every warp is done with this stage before the next iteration refills it
  }

  const float scale = p.w.slab_scale[slab];
#pragma unroll
  for (int n = 0; n < kWarpTiles; ++n) {
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int64_t r = r0 + 16 * rw + g + (j >= 2 ? 8 : 0);
      const int64_t t = yrow[8 * (H * n + half) + 2 * q + (j & 1)];
      if (r >= rows || t < 0) continue;
      const float v = __fmul_rn(acc[n][j], scale);
      float* out = p.y + t * p.ld_y + r;
      *out = p.add_to_y ? __fadd_rn(*out, v) : v;
    }
  }
}

// BF16 rows (as stored: cols bf16 values) against f32 activation rows; tiles as gemm_kernel.
__global__ void __launch_bounds__(32 * kWarps) gemm_bf16_kernel(GemmParams p) {
  pdl_wait();
  pdl_release();
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, q = lane & 3;
  const int64_t rows = p.w.slab_rows;
  const int64_t r0 = (static_cast<int64_t>(blockIdx.x) * kWarps + warp) * kRowsPerWarp;
  const int64_t t0 = static_cast<int64_t>(blockIdx.y) * kTokens;
  if (r0 >= rows) return;
  const int64_t ra = imin(r0 + g, rows - 1), rb = imin(r0 + g + 8, rows - 1);  // clamped loads
  const uint32_t* wa = reinterpret_cast<const uint32_t*>(p.w.data + ra * p.w.row_bytes);  // bf16 pairs
  const uint32_t* wb = reinterpret_cast<const uint32_t*>(p.w.data + rb * p.w.row_bytes);
  const int64_t tl = p.T - 1;
  float acc[kNTiles][4];
#pragma unroll
  for (int n = 0; n < kNTiles; ++n) acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.0f;
  for (int64_t k0 = 0; k0 < p.w.cols; k0 += 16) {
    const int64_t kp = k0 / 2 + q;  // pair index of k0 + 2q
    const uint32_t a0 = wa[kp], a1 = wb[kp], a2 = wa[kp + 4], a3 = wb[kp + 4];
#pragma unroll
    for (int n = 0; n < kNTiles; ++n) {
      if (t0 + 8 * n >= p.T) break;  // warp-uniform
      const float* xr = p.xf + imin(t0 + 8 * n + g, tl) * p.ld_xf + k0 + 2 * q;
      uint32_t b0[3], b1[3];
      split_bf16x2(*reinterpret_cast<const float2*>(xr), b0);
      split_bf16x2(*reinterpret_cast<const float2*>(xr + 8), b1);
#pragma unroll
      for (int i = 0; i < 3; ++i) mma_bf16(acc[n], a0, a1, a2, a3, b0[i], b1[i]);
    }
  }
  const float scale = p.w.slab_scale ? p.w.slab_scale[0] : 1.0f;
#pragma unroll
  for (int n = 0; n < kNTiles; ++n) {
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int64_t r = r0 + g + (j >= 2 ? 8 : 0);
      const int64_t t = t0 + 8 * n + 2 * q + (j & 1);
      if (r >= rows || t >= p.T) continue;
      const float v = __fmul_rn(acc[n][j], scale);
      float* out = p.y + t * p.ld_y + r;
      *out = p.add_to_y ? __fadd_rn(*out, v) : v;
    }
  }
}

template <int W, int TOK, int H>
void launch_int8_tok(const GemmJobs& jobs, cudaStream_t s) {
  const GemmParams& p = jobs.job[0];
  const int64_t gy = jobs.tile_end[jobs.n - 1];
  if (gy > 65535) fail("gemm: ", gy, " row tiles exceed the grid");
  // token tiles fastest: the blocks that share a weight tile run together, so it streams from
  // DRAM once and the other token tiles read it from L2
  const int64_t gx = p.order ? p.max_tiles : ceil_div(p.T, TOK);
  if (gx > 2147483647) fail("gemm: ", gx, " token tiles exceed the grid");
  const dim3 grid(static_cast<unsigned>(gx), static_cast<unsigned>(gy));
  constexpr int smem = GemmTile<W, TOK, H>::kSmem;
  launch_kernel("gemm_kernel", gemm_kernel<W, TOK, H>, grid, GemmTile<W, TOK, H>::kThreads, smem, s, jobs);
}

// Routed launches take the 32-token tile; a dense launch the one gemm_token_tile names for all
// its matrices' rows (or the one p.token_tile forces). Every output's chain is the same in both.
template <int W>
void launch_int8(const GemmJobs& jobs, cudaStream_t s) {
  const GemmParams& p = jobs.job[0];
  const int tok = p.order        ? kRoutedTokens
                  : p.token_tile ? p.token_tile
                                 : gemm_token_tile(jobs.tile_end[jobs.n - 1] * kGemmRows, p.T, sm_count());
  if (tok == kRoutedTokens) {
    const int64_t blocks = jobs.tile_end[jobs.n - 1] * (p.order ? p.max_tiles : ceil_div(p.T, kRoutedTokens));
    const int h = p.halves ? p.halves : gemm_halves(p.w.type, p.order != nullptr, blocks, sm_count());
    if constexpr (W == 4)
      if (h == 1) return launch_int8_tok<W, kRoutedTokens, 1>(jobs, s);
    if (h != 2) fail("gemm: ", h, " token halves for ", dtype_name(p.w.type), " (NVFP4 takes 1 or 2, Q8_0 2)");
    return launch_int8_tok<W, kRoutedTokens, 2>(jobs, s);
  }
  if (tok != kGemmTokens) fail("gemm: token_tile ", tok, " is none of 0, ", kRoutedTokens, ", ", kGemmTokens);
  launch_int8_tok<W, kGemmTokens, 2>(jobs, s);
}

}  // namespace

// --- launchers / dispatch

int gemm_token_tile(int64_t rows, int64_t T, int sms) {
  if (T <= kRoutedTokens) return kRoutedTokens;
  const int64_t blocks = ceil_div(rows, kGemmRows) * ceil_div(T, kGemmTokens);
  return 2 * blocks >= sms ? kGemmTokens : kRoutedTokens;
}

int gemm_halves(DType t, bool routed, int64_t blocks, int sms) {
  return t == DType::NVFP4 && (routed || blocks <= sms) ? 1 : 2;
}

void gemm_run(const GemmParams& p, cudaStream_t s) { gemm_run_multi(&p, 1, s); }

void gemm_run_multi(const GemmParams* ps, int n, cudaStream_t s) {
  if (n < 1 || n > gemm_multi) fail("gemm: ", n, " matrices in one launch (1..", gemm_multi, ")");
  const GemmParams& p = ps[0];
  if (n > 1) {
    if (p.w.type != DType::Q8_0 && p.w.type != DType::NVFP4)
      fail("gemm: a launch of several matrices takes Q8_0 / NVFP4 ones, not ", dtype_name(p.w.type));
    for (int j = 1; j < n; ++j) {
      const GemmParams& q = ps[j];
      if (q.w.type != p.w.type || q.w.cols != p.w.cols || q.xq != p.xq || q.T != p.T || q.token_tile != p.token_tile ||
          q.halves != p.halves)
        fail("gemm: matrix ", j, " of a launch differs from matrix 0 in type (", dtype_name(q.w.type), " / ",
             dtype_name(p.w.type), "), cols (", q.w.cols, " / ", p.w.cols, "), activations, T (", q.T, " / ", p.T,
             "), token tile or halves");
      if (q.order != p.order || q.group_start != p.group_start || q.tile_slab != p.tile_slab ||
          q.tile_start != p.tile_start || q.n_tiles != p.n_tiles || q.max_tiles != p.max_tiles ||
          q.n_slab != p.n_slab || q.x_div != p.x_div)
        fail("gemm: matrix ", j, " of a launch is ", q.order ? "routed" : "dense", " and matrix 0 ",
             p.order ? "routed" : "dense", ": several routed matrices share one grouping (order, groups, tiles, ",
             "slabs, x_div)");
    }
  }
  if (p.T == 0) return;
  GemmJobs jobs;
  for (int j = 0; j < n; ++j) {
    if (ps[j].w.slab_rows == 0) continue;
    jobs.job[jobs.n] = ps[j];
    jobs.tile_end[jobs.n] = (jobs.n ? jobs.tile_end[jobs.n - 1] : 0) + ceil_div(ps[j].w.slab_rows, kGemmRows);
    ++jobs.n;
  }
  if (jobs.n == 0) return;
  jobs.x16 = p.w.cols / 32 % 4 == 0 && reinterpret_cast<uintptr_t>(p.xq) % 16 == 0;
  if (p.order) {
    if (p.w.type != DType::Q8_0 && p.w.type != DType::NVFP4)
      fail("gemm: routed launches take Q8_0 / NVFP4 experts, not ", dtype_name(p.w.type));
    for (int j = 0; j < n; ++j)
      if (!p.group_start || !p.tile_slab || !p.tile_start || !p.n_tiles || p.n_slab < 1 || p.x_div < 1 ||
          p.max_tiles < 0 || ps[j].w.slab_rows * p.n_slab != ps[j].w.rows)
        fail("gemm: routed launch needs group_start and a tile list, n_slab (", p.n_slab, ") slabs of ",
             ps[j].w.slab_rows, " rows (", ps[j].w.rows, " in all, matrix ", j, "), x_div >= 1 (", p.x_div, ")");
    if (p.max_tiles == 0) return;
  }
  const int64_t gy = ceil_div(p.T, kTokens);
  if (gy > 65535) fail("gemm: ", p.T, " tokens exceed the grid");
  const dim3 grid(static_cast<unsigned>(ceil_div(p.w.slab_rows, kWarps * kRowsPerWarp)), static_cast<unsigned>(gy));
  switch (p.w.type) {
    case DType::Q8_0:
      return launch_int8<3>(jobs, s);
    case DType::NVFP4:
      return launch_int8<4>(jobs, s);
    case DType::BF16:
      if (p.w.cols % 16 != 0 || p.ld_xf % 2 != 0 || p.xf == nullptr)
        fail("gemm: BF16 needs cols a multiple of 16 (", p.w.cols, ") and f32 activations with an even stride (", p.ld_xf, ")");
      launch_kernel("gemm_bf16_kernel", gemm_bf16_kernel, grid, 32 * kWarps, 0, s, p);
      break;
    default: fail("gemm: weight type ", dtype_name(p.w.type), " has no tensor-core kernel (Q8_0, NVFP4, BF16)");
  }
}

}  // namespace memra::cuda
