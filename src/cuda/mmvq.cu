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
#include "cuda/common.cuh"
#include "cuda/mmvq.cuh"

namespace memra::cuda {

namespace {

constexpr int kWarpRows = 4;  // mmvq: rows (warps) per block


__device__ __forceinline__ void store(const MatvecParams& p, int64_t i, float v) {
  p.y[i] = p.add_to_y ? __fadd_rn(p.y[i], v) : v;
}

// --- kernels

// W: 0 = F32, 1 = F16, 2 = BF16, 3 = Q8_0, 4 = NVFP4.
struct MatvecBatch {
  MatvecParams p[kMatvecMulti];
  unsigned block_start[kMatvecMulti + 1];  // row blocks of p[j]: [block_start[j], block_start[j+1])
  int n;
};

template <int W, bool kBlock, int NT>
__global__ void __launch_bounds__(kBlock ? 128 : 32 * kWarpRows) matvec_kernel(const __grid_constant__ MatvecBatch batch) {
  constexpr int TPR = kBlock ? 128 : 32;  // threads per row
  int j = 0;
  while (j + 1 < batch.n && blockIdx.x >= batch.block_start[j + 1]) ++j;
  const MatvecParams& p = batch.p[j];
  const unsigned bx = blockIdx.x - batch.block_start[j];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int t_in_row = kBlock ? threadIdx.x : lane;
  const int64_t rows = p.w.slab_rows;
  const int64_t row = kBlock ? bx : static_cast<int64_t>(bx) * kWarpRows + warp;
  const int64_t a0 = static_cast<int64_t>(blockIdx.y) * NT;
  if (row >= rows) return;  // whole warp (mmvq) or whole block (dp4a) leaves together
  const int slab = p.slab_of ? p.slab_of[a0] : 0;  // NT == 1 whenever slab_of is set
  const uint8_t* wrow = p.w.data + (static_cast<int64_t>(slab) * rows + row) * p.w.row_bytes;
  const int64_t cols = p.w.cols;
  // m = 1: four units in flight per thread (loads of the next units issue before this one's
  // arithmetic); the accumulation order is unchanged, so the bits are too.
  constexpr int kUnroll = NT == 1 ? 4 : 1;
  float acc[NT];
#pragma unroll
  for (int t = 0; t < NT; ++t) acc[t] = 0.0f;
  int64_t xr[NT];
#pragma unroll
  for (int t = 0; t < NT; ++t) xr[t] = (a0 + t < p.n_out ? a0 + t : a0) / p.x_div;

  if constexpr (W == 3) {  // Q8_0 x Q8_1: unit = block b; isum exact, c = dw*dx, p = c*isum
    const int64_t nb = cols / 32;
#pragma unroll kUnroll
    for (int64_t b = t_in_row; b < nb; b += TPR) {
      // A 34-byte block is only 2-byte aligned: nine aligned words from the 4-byte boundary at or
      // below it cover it (weight buffers carry 16 bytes of padding), then funnel shifts align qs.
      const uint8_t* blk = wrow + b * 34;
      const uintptr_t addr = reinterpret_cast<uintptr_t>(blk);
      const uint32_t* a4 = reinterpret_cast<const uint32_t*>(addr & ~uintptr_t{3});
      const bool odd = (addr & 3) != 0;  // block starts at +2 of a word
      uint32_t wd[9];
#pragma unroll
      for (int k = 0; k < 9; ++k) wd[k] = a4[k];
      const float dw = dev_fp16_fast(static_cast<uint16_t>(odd ? wd[0] >> 16 : wd[0] & 0xffffu));
      int wq[8];
#pragma unroll
      for (int k = 0; k < 8; ++k) wq[k] = static_cast<int>(odd ? wd[k + 1] : __funnelshift_r(wd[k], wd[k + 1], 16));
#pragma unroll
      for (int t = 0; t < NT; ++t) {
        const Q81* xb = p.xq + xr[t] * nb + b;
        const int* xi = reinterpret_cast<const int*>(xb->qs);
        int isum = 0;
#pragma unroll
        for (int k = 0; k < 8; ++k) isum = __dp4a(wq[k], xi[k], isum);
        const float c = __fmul_rn(dw, dev_fp16_fast(xb->d));
        acc[t] = __fadd_rn(acc[t], __fmul_rn(c, static_cast<float>(isum)));
      }
    }
  } else if constexpr (W == 4) {  // NVFP4 x Q8_1: unit = sub-block u = 4i + s
    const int64_t nu = cols / 16, nqb = cols / 32;
#pragma unroll kUnroll
    for (int64_t u = t_in_row; u < nu; u += TPR) {
      const int64_t i = u >> 2;
      const int s = static_cast<int>(u & 3);
      const uint8_t* blk = wrow + i * 36;
      const float dws = dev_ue4m3_half(blk[s]);
      const uint32_t w0 = *reinterpret_cast<const uint32_t*>(blk + 4 + 8 * s);
      const uint32_t w1 = *reinterpret_cast<const uint32_t*>(blk + 8 + 8 * s);
      int lo0, hi0, lo1, hi1;
      e2m1x2_unpack8(w0, lo0, hi0);  // values 0..3, 8..11
      e2m1x2_unpack8(w1, lo1, hi1);  // values 4..7, 12..15
#pragma unroll
      for (int t = 0; t < NT; ++t) {
        const Q81* xb = p.xq + xr[t] * nqb + 2 * i + (s >> 1);
        const int* xi = reinterpret_cast<const int*>(xb->qs + (s & 1) * 16);
        int isum = __dp4a(lo0, xi[0], 0);
        isum = __dp4a(lo1, xi[1], isum);
        isum = __dp4a(hi0, xi[2], isum);
        isum = __dp4a(hi1, xi[3], isum);
        const float c = __fmul_rn(dws, dev_fp16_fast(xb->d));
        acc[t] = __fadd_rn(acc[t], __fmul_rn(c, static_cast<float>(isum)));
      }
    }
  } else {  // float weights x f32 activations: unit = 8 values, p_u = fma chain from 0
    const int64_t nu = cols / 8;
#pragma unroll kUnroll
    for (int64_t u = t_in_row; u < nu; u += TPR) {
      float wv[8];
      if constexpr (W == 0) {
        const float4* wp = reinterpret_cast<const float4*>(wrow) + 2 * u;
        const float4 a = wp[0], b = wp[1];
        wv[0] = a.x; wv[1] = a.y; wv[2] = a.z; wv[3] = a.w; wv[4] = b.x; wv[5] = b.y; wv[6] = b.z; wv[7] = b.w;
      } else {
        const uint4 r = reinterpret_cast<const uint4*>(wrow)[u];
        const uint32_t ws[4] = {r.x, r.y, r.z, r.w};
#pragma unroll
        for (int k = 0; k < 4; ++k) {
          const uint16_t l = static_cast<uint16_t>(ws[k] & 0xffffu), h = static_cast<uint16_t>(ws[k] >> 16);
          wv[2 * k] = W == 1 ? dev_fp16(l) : dev_bf16(l);
          wv[2 * k + 1] = W == 1 ? dev_fp16(h) : dev_bf16(h);
        }
      }
#pragma unroll
      for (int t = 0; t < NT; ++t) {
        const float4* xp = reinterpret_cast<const float4*>(p.xf + xr[t] * p.ld_xf) + 2 * u;
        const float4 a = xp[0], b = xp[1];
        float pu = 0.0f;
        pu = fmaf(wv[0], a.x, pu); pu = fmaf(wv[1], a.y, pu); pu = fmaf(wv[2], a.z, pu); pu = fmaf(wv[3], a.w, pu);
        pu = fmaf(wv[4], b.x, pu); pu = fmaf(wv[5], b.y, pu); pu = fmaf(wv[6], b.z, pu); pu = fmaf(wv[7], b.w, pu);
        acc[t] = __fadd_rn(acc[t], pu);
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

// --- launchers

template <int W, bool kBlock, int NT>
void launch(const MatvecBatch& b, cudaStream_t s) {
  const int64_t gy = ceil_div(b.p[0].n_out, NT);
  if (gy > 65535) fail("matvec: ", b.p[0].n_out, " output vectors in tiles of ", NT, " exceed the grid (65535)");
  const dim3 grid(b.block_start[b.n], static_cast<unsigned>(gy));
  matvec_kernel<W, kBlock, NT><<<grid, kBlock ? 128 : 32 * kWarpRows, 0, s>>>(b);
  MEMRA_CUDA_CHECK_LAUNCH("matvec_kernel");
}

template <int W, bool kBlock>
void launch_nt(MatvecBatch& b, cudaStream_t s) {
  b.block_start[0] = 0;
  for (int j = 0; j < b.n; ++j) {
    const int64_t rows = b.p[j].w.slab_rows;
    b.block_start[j + 1] = b.block_start[j] + static_cast<unsigned>(kBlock ? rows : ceil_div(rows, kWarpRows));
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
    if (p.w.type != ps[0].w.type || p.n_out != ps[0].n_out || (p.slab_of == nullptr) != (ps[0].slab_of == nullptr))
      fail("matvec: matrices of one launch must share type, n_out and slab form");
    b.p[b.n++] = p;
  }
  if (b.n == 0) return;
  switch (b.p[0].w.type) {
    case DType::F32: return launch_family<0>(b, family, s);
    case DType::F16: return launch_family<1>(b, family, s);
    case DType::BF16: return launch_family<2>(b, family, s);
    case DType::Q8_0: return launch_family<3>(b, family, s);
    case DType::NVFP4: return launch_family<4>(b, family, s);
    default: break;
  }
  fail("matvec: weight type ", dtype_name(b.p[0].w.type), " has no kernel (F32, F16, BF16, Q8_0, NVFP4)");
}

void matvec_run(const MatvecParams& p, DecodeMatvec family, cudaStream_t s) { matvec_run_multi(&p, 1, family, s); }

}  // namespace memra::cuda
