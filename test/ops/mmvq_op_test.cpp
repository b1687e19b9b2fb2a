// Op: the mat-vec family (src/cuda/mmvq.cu) against its contract, bitwise.
// Contract (mmvq.cuh, quant.h "THE DOT CONTRACT"): partial p_u per unit (Q8_0: 32-value block,
// NVFP4: 16-value sub-block, float: 8 values as an fma chain from 0); mmvq: lane u % 32, then
// the butterfly; dp4a: thread u % 128, a butterfly per warp, then warps 0..3 summed in order;
// times the slab's scale. The reference below recomputes every partial from the block bytes
// with the scalar decoders of memra/dtype.h (not with the kernel's code), and for mmvq also
// checks against memra::dot_q8_0_q8_1 / dot_nvfp4_q8_1 themselves. The W4A4 cases (NVFP4
// weights against quant.h's Fp4Act activations, uploaded decoded as the device's A4 blocks) are
// checked the same way, against memra::dot_nvfp4_fp4act. Five or more dense q8_1 output vectors in
// the mmvq family run the int8 tensor-core tiles (matvec_mma_kernel): the same chains, checked
// the same way. The pair32 cases (Arms::nvfp4_dot) take a q8_1 block as the unit, checked against
// their own recomputation and quant.h's dot_nvfp4_q8_1_pair32; on their wider rows the W4A8
// reference must differ somewhere (else the case could not tell the two contracts apart).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <optional>
#include <random>

#include "cuda/argmax.cuh"
#include "cuda/mmvq.cuh"
#include "cuda/planar.cuh"
#include "memra/engine.h"
#include "memra/quant.h"
#include "memra/testing/gpu.h"
#include "memra/testing/matchers.h"
#include "ops/op_harness.h"

namespace memra::ops {
namespace {

struct MatvecCase : OpCase {
  DType type;
  int64_t rows, cols, n_out;
  DecodeMatvec arm;
  int slabs;  // > 1: MoE form (slab ids, x_div = 2)
  int parts;  // > 1: the rows as that many matrices of unequal height in one matvec_run_multi
  bool w4a4 = false;  // NVFP4 weights against W4A4 (fp4) activations instead of q8_1
  bool add = false;   // add_to_y: y += result (the residual add of wo / wout / down), y preset
  bool x_shift = false;  // xq one q8_1 block into its buffer: 4-byte aligned, not 16 (the tiles' 4-byte copies)
  Nvfp4Dot dot = Nvfp4Dot::sub16;  // NVFP4 x q8_1: W4A8's contract or its pair32 variant
  MatvecCase(DType t, int64_t r, int64_t c, int64_t n, DecodeMatvec a, int s, int m = 1, bool fp4 = false)
      : type(t), rows(r), cols(c), n_out(n), arm(a), slabs(s), parts(m), w4a4(fp4) {}
  MatvecCase adding() const {
    MatvecCase c = *this;
    c.add = true;
    return c;
  }
  MatvecCase shifted() const {
    MatvecCase c = *this;
    c.x_shift = true;
    return c;
  }
  MatvecCase pair32() const {
    MatvecCase c = *this;
    c.dot = Nvfp4Dot::pair32;
    return c;
  }
  // Whether the bulk-fed tiles take this launch on a device that has them (docs/gpu.md): more
  // than 4 dense q8_1 vectors in the mmvq family, rows of 4 steps of 32 units or more (4096 Q8_0
  // values, 2048 NVFP4, 4096 under pair32) whose width is a multiple of 128, aligned activations.
  bool bulk_tiles() const {
    const bool q8_1 = type == DType::Q8_0 || (type == DType::NVFP4 && !w4a4);
    const int64_t unit_values = type == DType::NVFP4 && dot == Nvfp4Dot::sub16 ? 16 : 32;
    return arm == DecodeMatvec::mmvq && q8_1 && slabs == 1 && n_out > 4 && cols % 128 == 0 &&
           cols / unit_values >= 4 * 32 && !x_shift;
  }
  std::string vars() const override {
    Vars v;
    v("type", dtype_name(type))("rows", rows)("cols", cols)("n_out", n_out)("arm", to_string(arm))("slabs", slabs)("parts", parts);
    if (w4a4) v("act", "w4a4");
    if (add) v("y", "add");
    if (x_shift) v("xq", "shifted");
    if (dot != Nvfp4Dot::sub16) v("dot", to_string(dot));
    return v.str();
  }
};

std::vector<MatvecCase> cases() {
  std::vector<MatvecCase> v;
  for (DType t : {DType::Q8_0, DType::NVFP4, DType::BF16, DType::F32, DType::F16})
    for (DecodeMatvec a : {DecodeMatvec::mmvq, DecodeMatvec::dp4a}) {
      // cols: one partial unit per lane or fewer (64), several rounds with a ragged tail
      // (4096 + 64*3), rows not a multiple of the 4 rows per block; n_out 1 / 13 / 37 (NT = 8 and 16 tiles + tails)
      v.emplace_back(t, 7, 64, 1, a, 1);
      v.emplace_back(t, 37, 4096 + 192, 1, a, 1);
      v.emplace_back(t, 37, 4096 + 192, 13, a, 1);
      v.emplace_back(t, 37, 1024 + 64, 37, a, 1);  // 16-token tiles + a tail
      v.emplace_back(t, 9, 512, 6, a, 3);
      // rows a whole number of the streamed kernel's unit groups (its unchecked fast path, the
      // model shapes), alone and as three matrices sharing one launch (q / k / v)
      v.emplace_back(t, 37, 4096, 1, a, 1);
      v.emplace_back(t, 45, 4096, 1, a, 1, 3);
      // the 9B FFN's down rows (12288 wide: several groups per row, the NVFP4 stream's wide form)
      v.emplace_back(t, 37, 12288, 1, a, 1);
      // the residual add (y += result) on the streamed shapes: each stream instance has its own
      // epilogue (the NVFP4 ones load y with the row's weights)
      v.push_back(MatvecCase(t, 37, 12288, 1, a, 1).adding());
      v.push_back(MatvecCase(t, 45, 4096, 1, a, 1, 3).adding());
      // token tiles of three matrices in one launch (float weights: two rows per warp, so each
      // matrix's blocks are counted in 8-row steps) and with the residual add
      v.emplace_back(t, 45, 1024, 13, a, 1, 3);
      v.push_back(MatvecCase(t, 37, 1024 + 64, 37, a, 1).adding());
      v.emplace_back(t, 1, 1024, 37, a, 1);  // one row (a shared expert's gate row): one row per warp
    }
  // The mmvq family's tensor-core tiles (5 or more dense q8_1 vectors: one n-tile up to 8, two
  // past it, four in a block of 16 warps past 16 on rows of 4 steps or more; the loop above's
  // 1024 + 64 wide case with 37 vectors keeps two): a single n-tile with a tail, exactly 8, two
  // and four n-tiles, several token blocks; rows past a 16-row tile, lane classes with no unit
  // (64 and 512 wide), the 9B's 4096 and 12288 widths, three matrices in one launch and the
  // residual add. The register-fed tiles' activation ring copy
  // forms: 16-byte (512 with a partial last step), 4-byte (64 and 4096 + 192, whose rows are not
  // whole 16-byte chunks, and an unaligned xq); the 4096 and 12288 widths take the bulk tiles.
  for (DType t : {DType::Q8_0, DType::NVFP4}) {
    v.emplace_back(t, 37, 4096 + 192, 5, DecodeMatvec::mmvq, 1);
    v.emplace_back(t, 16, 4096, 8, DecodeMatvec::mmvq, 1);
    v.emplace_back(t, 7, 64, 9, DecodeMatvec::mmvq, 1);
    v.emplace_back(t, 37, 512, 16, DecodeMatvec::mmvq, 1);
    v.emplace_back(t, 53, 12288, 17, DecodeMatvec::mmvq, 1);
    v.emplace_back(t, 37, 4096 + 192, 40, DecodeMatvec::mmvq, 1);  // 32-vector blocks, ragged step and block
    v.emplace_back(t, 45, 4096, 64, DecodeMatvec::mmvq, 1, 3);
    v.push_back(MatvecCase(t, 37, 4096, 12, DecodeMatvec::mmvq, 1).adding());
    v.push_back(MatvecCase(t, 45, 12288, 33, DecodeMatvec::mmvq, 1, 3).adding());
    // activations not 16-byte aligned with a model width: the ring takes 4-byte copies
    v.push_back(MatvecCase(t, 37, 4096, 24, DecodeMatvec::mmvq, 1).shifted());
    // The bulk-copy tiles take the rows of 4 steps or more above whose width is a multiple of 128
    // (4096, 12288) with aligned activations; the rest stay on the register-fed tiles. Here: a
    // partial last step whose scales are read rounded up to 16 bytes (4096 + 128: five steps,
    // chunks of two, two and one for up to 16 vectors), and grids of more items than SMs, so
    // that a block's ring runs across items and matrices (4100 rows: 257 row tiles; 2100 rows x
    // 2 vector groups)
    v.emplace_back(t, 37, 4096 + 128, 5, DecodeMatvec::mmvq, 1);
    v.emplace_back(t, 37, 4096 + 128, 40, DecodeMatvec::mmvq, 1);
    v.emplace_back(t, 4100, 4096, 9, DecodeMatvec::mmvq, 1, 3);
    v.emplace_back(t, 2100, 4096, 40, DecodeMatvec::mmvq, 1);
  }
  // W4A4: the prefill tiles (NT = 8, 16 and tails), one output vector, the MoE form, and a group
  // of matrices sharing a launch
  for (DecodeMatvec a : {DecodeMatvec::mmvq, DecodeMatvec::dp4a}) {
    v.emplace_back(DType::NVFP4, 37, 4096 + 192, 13, a, 1, 1, true);
    v.emplace_back(DType::NVFP4, 37, 1024 + 64, 37, a, 1, 1, true);
    v.emplace_back(DType::NVFP4, 7, 64, 1, a, 1, 1, true);
    v.emplace_back(DType::NVFP4, 9, 512, 6, a, 3, 1, true);
    v.emplace_back(DType::NVFP4, 45, 4096, 16, a, 1, 3, true);
  }
  // NVFP4 under pair32 (a unit is a q8_1 block): the streamed forms (one row and 2..4 rows,
  // every group width: 4096 + 192, 4096, 12288 wide), the tensor-core tiles (mmvq) and token
  // tiles (dp4a) of more vectors, the MoE form, matrices sharing a launch, the residual add.
  // The tiles' n-tile counts and copy forms: one (8 vectors), two, four (32-vector blocks, ragged),
  // an unaligned xq.
  for (DecodeMatvec a : {DecodeMatvec::mmvq, DecodeMatvec::dp4a}) {
    const DType t = DType::NVFP4;
    v.push_back(MatvecCase(t, 7, 64, 1, a, 1).pair32());
    v.push_back(MatvecCase(t, 37, 4096 + 192, 1, a, 1).pair32());
    v.push_back(MatvecCase(t, 37, 4096, 1, a, 1).pair32());
    v.push_back(MatvecCase(t, 45, 4096, 1, a, 1, 3).pair32());
    v.push_back(MatvecCase(t, 37, 12288, 1, a, 1).pair32().adding());
    v.push_back(MatvecCase(t, 45, 4096, 1, a, 1, 3).pair32().adding());
    v.push_back(MatvecCase(t, 37, 4096, 3, a, 1).pair32());
    v.push_back(MatvecCase(t, 45, 12288, 4, a, 1, 3).pair32());
    v.push_back(MatvecCase(t, 37, 4096 + 192, 13, a, 1).pair32());
    v.push_back(MatvecCase(t, 37, 1024 + 64, 37, a, 1).pair32());
    v.push_back(MatvecCase(t, 53, 12288, 17, a, 1).pair32().adding());
    v.push_back(MatvecCase(t, 9, 512, 6, a, 3).pair32());
    v.push_back(MatvecCase(t, 16, 4096, 8, a, 1).pair32());
    v.push_back(MatvecCase(t, 37, 4096 + 192, 40, a, 1).pair32());
    v.push_back(MatvecCase(t, 45, 4096, 64, a, 1, 3).pair32());
    v.push_back(MatvecCase(t, 37, 4096, 24, a, 1).pair32().shifted());
    v.push_back(MatvecCase(t, 37, 4096 + 128, 40, a, 1).pair32());
    v.push_back(MatvecCase(t, 4100, 4096, 9, a, 1, 3).pair32().adding());
  }
  return v;
}

// Per-unit partials of one row against one activation row, in unit order (x4: W4A4 activations
// for NVFP4 weights instead of xq).
std::vector<float> partials(DType t, const uint8_t* w, const BlockQ8_1* xq, const float* xf, int64_t cols,
                            const BlockFp4Act* x4 = nullptr, Nvfp4Dot dot = Nvfp4Dot::sub16) {
  std::vector<float> p;
  // NVFP4 sub-block s of 16 values against the 16 int8 values at a: the exact integer sum
  auto isum16 = [](const uint8_t* blk, int s, const int8_t* a) {
    int32_t isum = 0;
    for (int j = 0; j < 8; ++j) {
      isum += int32_t{e2m1_doubled(blk[4 + 8 * s + j] & 0xf)} * a[j];
      isum += int32_t{e2m1_doubled(blk[4 + 8 * s + j] >> 4)} * a[j + 8];
    }
    return isum;
  };
  if (x4) {
    for (int64_t u = 0; u < cols / 16; ++u) {
      const uint8_t* blk = w + (u / 4) * 36;
      const BlockFp4Act& a = x4[u / 4];
      const int s = static_cast<int>(u % 4);
      int32_t isum = 0;
      for (int j = 0; j < 8; ++j) {
        isum += int32_t{e2m1_doubled(blk[4 + 8 * s + j] & 0xf)} * e2m1_doubled(a.qs[8 * s + j] & 0xf);
        isum += int32_t{e2m1_doubled(blk[4 + 8 * s + j] >> 4)} * e2m1_doubled(a.qs[8 * s + j] >> 4);
      }
      const float c = ue4m3_to_f32_half(blk[s]) * ue4m3_to_f32_half(a.d[s]);
      p.push_back(c * static_cast<float>(isum));
    }
  } else if (t == DType::Q8_0) {
    for (int64_t b = 0; b < cols / 32; ++b) {
      const uint8_t* blk = w + b * 34;
      uint16_t d;
      std::memcpy(&d, blk, 2);
      int32_t isum = 0;
      for (int j = 0; j < 32; ++j) isum += int32_t{static_cast<int8_t>(blk[2 + j])} * xq[b].qs[j];
      const float c = fp16_to_f32(d) * fp16_to_f32(xq[b].d);
      p.push_back(c * static_cast<float>(isum));
    }
  } else if (t == DType::NVFP4 && dot == Nvfp4Dot::pair32) {
    // unit b = q8_1 block b: sub-blocks 2b, 2b + 1; the two scaled sums are exact in double and
    // so is their sum (multiples of 2^-10 below 2^23): one rounding to f32 is the fma's
    for (int64_t b = 0; b < cols / 32; ++b) {
      const uint8_t* blk = w + (b / 2) * 36;
      const int s = 2 * static_cast<int>(b % 2);
      const double e0 = double{ue4m3_to_f32_half(blk[s])} * isum16(blk, s, xq[b].qs);
      const double e1 = double{ue4m3_to_f32_half(blk[s + 1])} * isum16(blk, s + 1, xq[b].qs + 16);
      const float tb = static_cast<float>(e0 + e1);
      p.push_back(static_cast<float>(double{tb} * fp16_to_f32(xq[b].d)));  // exact in double, one rounding
    }
  } else if (t == DType::NVFP4) {
    for (int64_t u = 0; u < cols / 16; ++u) {
      const uint8_t* blk = w + (u / 4) * 36;
      const int s = static_cast<int>(u % 4);
      const BlockQ8_1& a = xq[u / 2];
      const float c = ue4m3_to_f32_half(blk[s]) * fp16_to_f32(a.d);
      p.push_back(c * static_cast<float>(isum16(blk, s, a.qs + (s % 2) * 16)));
    }
  } else {
    std::vector<float> wf(static_cast<size_t>(cols));
    dequantize_row(t, w, wf.data(), cols);
    for (int64_t u = 0; u < cols / 8; ++u) {
      float pu = 0.0f;
      for (int e = 0; e < 8; ++e) pu = std::fma(wf[u * 8 + e], xf[u * 8 + e], pu);
      p.push_back(pu);
    }
  }
  return p;
}

float reduce(const std::vector<float>& p, DecodeMatvec arm) {
  if (arm == DecodeMatvec::mmvq) return accumulate_partials(p.data(), static_cast<int64_t>(p.size()), DotOrder::warp32);
  std::vector<float> lanes(128, 0.0f);
  for (size_t u = 0; u < p.size(); ++u) lanes[u % 128] += p[u];
  float v = 0.0f;
  for (int w = 0; w < 4; ++w) v += accumulate_partials(lanes.data() + 32 * w, 32, DotOrder::warp32);
  return v;
}

using MatvecOp = OpTest<MatvecCase>;

TEST_P(MatvecOp, MatchesContractBitwise) {
  for_each_seed([&](uint64_t seed) {
    const MatvecCase& c = GetParam();
    Engine e = Engine::open(testing::test_device());
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<float> U(-1.0f, 1.0f);
    const int64_t R = c.rows * c.slabs, rb = row_bytes(c.type, c.cols);
    const int x_div = c.slabs > 1 ? 2 : 1;
    const int64_t n_x = (c.n_out + x_div - 1) / x_div;
    // weights from random values through the reference quantizers; NVFP4 with a tensor scale
    std::vector<float> wf(static_cast<size_t>(R * c.cols));
    for (float& v : wf) v = U(rng) * 0.1f;
    std::vector<uint8_t> w(static_cast<size_t>(rb * R + 16));  // GGUF blocks, made planar on the device below
    std::vector<float> scale(static_cast<size_t>(c.slabs), 1.0f);
    if (c.type == DType::NVFP4) {
      scale.assign(scale.size(), quantize_nvfp4_tensor(wf.data(), w.data(), R, c.cols));
      // scale bytes a quantizer never writes but a file may hold: bit 7 set (ignored) and 0x7F
      // (decodes to 0); the planar upload canonicalises them, the contract must still hold
      for (int64_t i = 0; i < R * c.cols / 64; i += 7) {
        w[static_cast<size_t>(36 * i)] |= 0x80;
        if (i % 3 == 0) w[static_cast<size_t>(36 * i + 1)] = (i % 2) ? 0x7F : 0xFF;
      }
    } else {
      for (int64_t r = 0; r < R; ++r) quantize_row(c.type, wf.data() + r * c.cols, w.data() + r * rb, c.cols);
      if (c.slabs > 1)
        for (int s = 0; s < c.slabs; ++s) scale[static_cast<size_t>(s)] = 0.5f + 0.25f * static_cast<float>(s);
    }
    std::vector<float> xf(static_cast<size_t>(n_x * c.cols));
    for (float& v : xf) v = U(rng);
    std::vector<BlockQ8_1> xq(static_cast<size_t>(n_x * c.cols / 32));
    for (int64_t a = 0; a < n_x; ++a) quantize_row_q8_1(xf.data() + a * c.cols, xq.data() + a * c.cols / 32, c.cols);
    // W4A4: quant.h's fp4 activation blocks, and the same numbers decoded as the device reads them
    std::vector<BlockFp4Act> x4(c.w4a4 ? static_cast<size_t>(n_x * c.cols / 64) : 0);
    std::vector<cuda::A4> a4(x4.size() * 2);
    for (int64_t a = 0; a < n_x && c.w4a4; ++a)
      quantize_row_fp4act(xf.data() + a * c.cols, x4.data() + a * c.cols / 64, c.cols);
    for (size_t b = 0; b < x4.size(); ++b)
      for (int s = 0; s < 4; ++s) {
        cuda::A4& d = a4[2 * b + s / 2];
        d.d[s % 2] = ue4m3_to_f32_half(x4[b].d[s]);
        for (int j = 0; j < 16; ++j) {
          const uint8_t byte = x4[b].qs[8 * s + j % 8];
          d.qs[16 * (s % 2) + j] = e2m1_doubled(j < 8 ? (byte & 0xf) : (byte >> 4));
        }
      }
    std::vector<int32_t> slab(static_cast<size_t>(c.n_out));
    for (int64_t a = 0; a < c.n_out; ++a) slab[static_cast<size_t>(a)] = static_cast<int32_t>((a * 7 + 1) % c.slabs);

    DeviceBuffer<uint8_t> dw(e, w.size());
    dw.upload(w);
    // the device layout: planar rows, as the model uploads them (cuda/planar.cuh)
    const int64_t stride = cuda::planar_row_stride(c.type, c.cols);
    DeviceBuffer<uint8_t> dplanar(e, static_cast<size_t>(stride * R + 16));
    cuda::to_planar(c.type, dw.data(), dplanar.data(), R, c.cols, stride, reinterpret_cast<cudaStream_t>(e.stream()));
    DeviceBuffer<float> ds(e, scale.size()), dxf(e, xf.size()), dy(e, static_cast<size_t>(c.n_out * c.rows));
    ds.upload(scale);
    dxf.upload(xf);
    std::vector<BlockQ8_1> xq_dev = xq;
    if (c.x_shift) xq_dev.insert(xq_dev.begin(), BlockQ8_1{});
    DeviceBuffer<BlockQ8_1> dxq(e, xq_dev.size());
    dxq.upload(xq_dev);
    DeviceBuffer<int32_t> dslab(e, slab.size());
    dslab.upload(slab);
    DeviceBuffer<cuda::A4> da4(e, std::max<size_t>(a4.size(), 1));
    if (c.w4a4) da4.upload(a4);
    // y before the launch: NaN bits, or with add_to_y finite values the result is added to
    std::vector<float> y0(static_cast<size_t>(c.n_out * c.rows));
    for (float& v : y0) v = 4.0f * U(rng);
    if (c.add)
      dy.upload(y0);
    else
      dy.fill_bytes(0xFF);

    cuda::MatvecParams p;
    p.w.type = c.type;
    p.w.rows = R;
    p.w.cols = c.cols;
    p.w.row_bytes = stride;
    p.w.slab_rows = c.rows;
    p.w.data = dplanar.data();
    p.w.slab_scale = ds.data();
    p.xq = reinterpret_cast<const cuda::Q81*>(dxq.data() + (c.x_shift ? 1 : 0));
    p.xf = dxf.data();
    p.ld_xf = c.cols;
    p.n_out = c.n_out;
    p.x_div = x_div;
    p.slab_of = c.slabs > 1 ? dslab.data() : nullptr;
    if (c.w4a4) {
      p.x4 = da4.data();
      p.xq = nullptr;
    }
    p.y = dy.data();
    p.ld_y = c.rows;
    p.add_to_y = c.add;
    p.nvfp4_dot = c.dot;
    bool bulk = false;  // the bulk-fed tiles took the launch
    if (c.parts == 1) {
      bulk = cuda::matvec_run(p, c.arm, reinterpret_cast<cudaStream_t>(e.stream()));
    } else {  // parts of heights rows/2, rows/3, rest: rows [r0, r0 + h) of W as matrix j
      std::vector<cuda::MatvecParams> ps;
      for (int64_t j = 0, r0 = 0; j < c.parts; ++j) {
        const int64_t h = j + 1 == c.parts ? c.rows - r0 : c.rows / (j + 2);
        cuda::MatvecParams q = p;
        q.w.rows = q.w.slab_rows = h;
        q.w.data = dplanar.data() + r0 * stride;
        q.y = dy.data() + r0;
        ps.push_back(q);
        r0 += h;
      }
      bulk = cuda::matvec_run_multi(ps.data(), static_cast<int>(ps.size()), c.arm,
                                    reinterpret_cast<cudaStream_t>(e.stream()));
    }
    e.synchronize();
    const std::optional<testing::GpuInfo> gpu = testing::test_gpu();
    EXPECT_EQ(bulk, c.bulk_tiles() && gpu && gpu->cc_major >= 9)
        << "the bulk-fed tiles " << (bulk ? "took" : "did not take") << " this launch";
    const std::vector<float> got = dy.download();

    std::vector<float> ref(got.size());
    int differ_from_sub16 = 0;  // pair32 cases: outputs whose W4A8 value has other bits
    for (int64_t a = 0; a < c.n_out; ++a) {
      const int64_t xr = a / x_div;
      const int s = c.slabs > 1 ? slab[static_cast<size_t>(a)] : 0;
      for (int64_t r = 0; r < c.rows; ++r) {
        const uint8_t* wr = w.data() + (s * c.rows + r) * rb;
        const BlockFp4Act* xa = c.w4a4 ? x4.data() + xr * c.cols / 64 : nullptr;
        const float v = reduce(
            partials(c.type, wr, xq.data() + xr * c.cols / 32, xf.data() + xr * c.cols, c.cols, xa, c.dot), c.arm);
        const size_t i = static_cast<size_t>(a * c.rows + r);
        if (c.dot == Nvfp4Dot::pair32)
          differ_from_sub16 += std::bit_cast<uint32_t>(v) !=
                               std::bit_cast<uint32_t>(
                                   reduce(partials(c.type, wr, xq.data() + xr * c.cols / 32, nullptr, c.cols), c.arm));
        const volatile float scaled = v * scale[static_cast<size_t>(s)];  // rounded before the add (no fma)
        ref[i] = c.add ? y0[i] + scaled : scaled;
        if (c.arm == DecodeMatvec::mmvq && r == 0) {  // the quant.h contract itself
          const BlockQ8_1* x = xq.data() + xr * c.cols / 32;
          if (c.type == DType::Q8_0) {
            ASSERT_EQ(std::bit_cast<uint32_t>(v),
                      std::bit_cast<uint32_t>(dot_q8_0_q8_1(reinterpret_cast<const BlockQ8_0*>(wr), x, c.cols)));
          }
          if (c.type == DType::NVFP4 && !c.w4a4) {
            const auto* wb = reinterpret_cast<const BlockNvfp4*>(wr);
            ASSERT_EQ(std::bit_cast<uint32_t>(v),
                      std::bit_cast<uint32_t>(c.dot == Nvfp4Dot::pair32 ? dot_nvfp4_q8_1_pair32(wb, x, c.cols)
                                                                        : dot_nvfp4_q8_1(wb, x, c.cols)));
          }
          if (c.w4a4) {
            ASSERT_EQ(std::bit_cast<uint32_t>(v),
                      std::bit_cast<uint32_t>(dot_nvfp4_fp4act(reinterpret_cast<const BlockNvfp4*>(wr), xa, c.cols)));
          }
        }
      }
    }
    double norm = 0;
    for (float v : ref) norm += std::abs(v);
    ASSERT_GT(norm, 0.0) << "vacuous case: reference all zero";
    if (c.dot == Nvfp4Dot::pair32 && c.cols >= 1024) { EXPECT_GT(differ_from_sub16, 0) << "pair32 equals W4A8 here"; }
    EXPECT_TRUE(compare_to_contract(got, ref, Tolerance::exact()));
  });
}

INSTANTIATE_TEST_SUITE_P(Eval, MatvecOp, ::testing::ValuesIn(cases()), OpCaseName());

// The greedy step's lm_head (matvec_run_best + argmax_step_run): the same y bits as matvec_run,
// and the token from the warps' bests == the full scan == the host's lowest-index argmax, with
// the winning value tied at three rows that different warps store (the lowest must win across
// warps, not only inside one). Also the step's bookkeeping: next_tok, hist[pos], pos + 1. Shapes:
// the streamed kernel's checked (ragged) and unchecked forms, and the NVFP4 12-unit form.
TEST(MatvecBest, GreedyStepEqualsHostArgmaxWithTiesAcrossWarps) {
  MEMRA_REQUIRE_TEST_GPU(1);
  Engine e = Engine::open(testing::test_device());
  const cudaStream_t st = reinterpret_cast<cudaStream_t>(e.stream());
  struct Shape { DType t; int64_t rows, cols; };
  for_each_seed("", [&](uint64_t seed) {
    // the last two: a real vocabulary over a tiny width (the tool fixtures' tied lm_head), dozens
    // of rows per warp
    for (const Shape sh :
         {Shape{DType::Q8_0, 20011, 256}, Shape{DType::NVFP4, 20011, 256}, Shape{DType::Q8_0, 9001, 4096},
          Shape{DType::NVFP4, 9001, 4096}, Shape{DType::NVFP4, 3001, 12288}, Shape{DType::Q8_0, 151936, 64},
          Shape{DType::NVFP4, 151936, 64}}) {
      SCOPED_TRACE(std::string(dtype_name(sh.t)) + " rows=" + std::to_string(sh.rows) +
                   " cols=" + std::to_string(sh.cols));
      std::mt19937_64 rng(seed + static_cast<uint64_t>(sh.rows));
      std::uniform_real_distribution<float> U(-1.0f, 1.0f);
      const int64_t R = sh.rows, C = sh.cols, rb = row_bytes(sh.t, C);
      std::vector<float> xf(static_cast<size_t>(C)), wf(static_cast<size_t>(R * C));
      for (float& v : xf) v = U(rng);
      for (float& v : wf) v = 0.1f * U(rng);
      // the winner: row 3 follows the activation's signs at full scale; copied to two rows far
      // apart below (after quantization, so the three dot products are the same bits)
      for (int64_t c = 0; c < C; ++c)
        wf[static_cast<size_t>(3 * C + c)] = xf[static_cast<size_t>(c)] > 0 ? 1.0f : -1.0f;
      std::vector<uint8_t> w(static_cast<size_t>(rb * R + 16));
      std::vector<float> scale(1, 1.0f);
      if (sh.t == DType::NVFP4)
        scale[0] = quantize_nvfp4_tensor(wf.data(), w.data(), R, C);
      else
        for (int64_t r = 0; r < R; ++r) quantize_row(sh.t, wf.data() + r * C, w.data() + r * rb, C);
      const int64_t tie_a = 3, tie_b = R / 2 + 1, tie_c = R - 2;
      for (int64_t r : {tie_b, tie_c}) std::memcpy(w.data() + r * rb, w.data() + tie_a * rb, static_cast<size_t>(rb));
      std::vector<BlockQ8_1> xq(static_cast<size_t>(C / 32));
      quantize_row_q8_1(xf.data(), xq.data(), C);

      DeviceBuffer<uint8_t> dw(e, w.size());
      dw.upload(w);
      const int64_t stride = cuda::planar_row_stride(sh.t, C);
      DeviceBuffer<uint8_t> dplanar(e, static_cast<size_t>(stride * R + 16));
      cuda::to_planar(sh.t, dw.data(), dplanar.data(), R, C, stride, st);
      DeviceBuffer<float> ds(e, 1), dy(e, static_cast<size_t>(R)), dy2(e, static_cast<size_t>(R));
      ds.upload(scale);
      DeviceBuffer<BlockQ8_1> dxq(e, xq.size());
      dxq.upload(xq);
      dy.fill_bytes(0xFF);
      dy2.fill_bytes(0xFF);
      cuda::MatvecParams p;
      p.w.type = sh.t;
      p.w.rows = R;
      p.w.cols = C;
      p.w.row_bytes = stride;
      p.w.slab_rows = R;
      p.w.data = dplanar.data();
      p.w.slab_scale = ds.data();
      p.xq = reinterpret_cast<const cuda::Q81*>(dxq.data());
      p.n_out = 1;
      p.y = dy.data();
      p.ld_y = R;
      const int max_best = 64 * e.props().sm_count;
      DeviceBuffer<cuda::RowBest> best(e, static_cast<size_t>(max_best));
      const int nb = cuda::matvec_run_best(p, DecodeMatvec::mmvq, best.data(), max_best, st);
      ASSERT_GT(nb, 0) << "the streamed form did not run: nothing here would test the bests";
      cuda::MatvecParams p2 = p;
      p2.y = dy2.data();
      cuda::matvec_run(p2, DecodeMatvec::mmvq, st);
      e.synchronize();
      const std::vector<float> y = dy.download(), y2 = dy2.download();
      ASSERT_THAT(y2, testing::BitIdentical(y)) << "matvec_run_best changed y";
      int64_t want = 0;
      for (int64_t r = 1; r < R; ++r)
        if (y[static_cast<size_t>(r)] > y[static_cast<size_t>(want)]) want = r;
      ASSERT_EQ(want, tie_a);
      ASSERT_EQ(y[static_cast<size_t>(tie_b)], y[static_cast<size_t>(tie_a)]);
      ASSERT_EQ(y[static_cast<size_t>(tie_c)], y[static_cast<size_t>(tie_a)]);
      // the tie spans warps: at least two warps hold the winning value
      const std::vector<cuda::RowBest> bests = best.download();
      int holders = 0;
      for (int k = 0; k < nb; ++k) holders += bests[static_cast<size_t>(k)].v == y[static_cast<size_t>(tie_a)];
      EXPECT_GE(holders, 2);

      {  // the dp4a family is never streamed: no bests (y as its own order leaves it)
        DeviceBuffer<float> dy3(e, static_cast<size_t>(R));
        cuda::MatvecParams p3 = p;
        p3.y = dy3.data();
        EXPECT_EQ(cuda::matvec_run_best(p3, DecodeMatvec::dp4a, best.data(), max_best, st), 0);
        e.synchronize();
      }
      for (bool from_bests : {true, false}) {
        DeviceBuffer<int32_t> out(e, 1), next(e, 1), hist(e, 8);
        DeviceBuffer<int64_t> pos(e, 1);
        hist.fill_bytes(0xFF);
        pos.upload(std::vector<int64_t>{5});
        cuda::GreedyStep o;
        o.out = out.data();
        o.next_tok = next.data();
        o.hist = hist.data();
        o.pos = pos.data();
        cuda::argmax_step_run(dy.data(), R, from_bests ? best.data() : nullptr, from_bests ? nb : 0, o, st);
        e.synchronize();
        EXPECT_EQ(out.download()[0], tie_a) << (from_bests ? "bests" : "scan");
        EXPECT_EQ(next.download()[0], tie_a);
        EXPECT_EQ(hist.download()[5], tie_a);
        EXPECT_EQ(pos.download()[0], 6);
      }
    }
  });
}

}  // namespace
}  // namespace memra::ops
