// Op: the int8 tensor-core prefill GEMM (src/cuda/gemm.cu) against quant.h's dot contract in
// DotOrder::sequential, bitwise: y[t, r] = scale * dot_*(W[r], X[t], sequential). Shapes cross
// the tiles: rows not a multiple of 16 / 64, tokens not a multiple of 8 / 128. The BF16 GEMM
// against its bound (gemm.cuh): an f64 sum of the exact products of bf16 weights and f32
// activations, and on data built to round one way, proof that the bound rejects activations
// rounded to bf16 (one term instead of three).
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <random>

#include "cuda/gemm.cuh"
#include "cuda/moe.cuh"
#include "cuda/planar.cuh"
#include "memra/engine.h"
#include "memra/quant.h"
#include "ops/op_harness.h"

namespace memra::ops {
namespace {

// One launch of rows.size() matrices (rows[j] rows each, the same cols) over T tokens; one
// matrix is gemm_run's launch, several gemm_run_multi's.
struct GemmCase : OpCase {
  DType type;
  std::vector<int64_t> rows;
  int64_t cols, T;
  GemmCase(DType t, std::vector<int64_t> r, int64_t c, int64_t n) : type(t), rows(std::move(r)), cols(c), T(n) {}
  std::string vars() const override {
    std::string r;
    for (int64_t n : rows) r += (r.empty() ? "" : "+") + std::to_string(n);
    return Vars()("type", dtype_name(type))("rows", r)("cols", cols)("T", T).str();
  }
};

std::vector<GemmCase> cases() {
  std::vector<GemmCase> v;
  for (DType t : {DType::Q8_0, DType::NVFP4}) {
    v.emplace_back(t, std::vector<int64_t>{16}, 64, 8);
    v.emplace_back(t, std::vector<int64_t>{37}, 512, 5);
    v.emplace_back(t, std::vector<int64_t>{100}, 1024 + 64, 131);
    v.emplace_back(t, std::vector<int64_t>{64}, 256, 300);
    // the tiles: 128 rows x 128 tokens, 256-value chunks (a partial last row block, token tile and chunk)
    v.emplace_back(t, std::vector<int64_t>{300}, 4096 + 512, 260);
  }
  v.emplace_back(DType::Q8_0, std::vector<int64_t>{40}, 96, 17);  // an odd number of units: a 3-unit chunk
  for (DType t : {DType::Q8_0, DType::NVFP4}) {
    v.emplace_back(t, std::vector<int64_t>{128}, 256, 128);  // exactly one row block, token tile and chunk
    // each one past it: two tiles with a ragged tail in M, N and K (one block past the chunk)
    v.emplace_back(t, std::vector<int64_t>{129}, 256 + type_traits(t).block_elems, 129);
    // calls of <= 32 tokens (a batched decode step's rows) take the 32-token tile: exactly one,
    // and one past it
    v.emplace_back(t, std::vector<int64_t>{300}, 4096 + 512, 32);
    v.emplace_back(t, std::vector<int64_t>{129}, 256 + type_traits(t).block_elems, 33);
    // several matrices in one launch (a layer's q, k, v, gate): ragged row tiles, a job of one
    // partial tile between two larger ones, the most a launch takes
    v.emplace_back(t, std::vector<int64_t>{300, 37, 129, 128}, 1024 + 64, 131);
    v.emplace_back(t, std::vector<int64_t>{256, 16}, 4096 + 512, 33);
  }
  return v;
}

using GemmOp = OpTest<GemmCase>;

TEST_P(GemmOp, MatchesSequentialDotContractBitwise) {
  for_each_seed([&](uint64_t seed) {
    const GemmCase& c = GetParam();
    Engine e = Engine::open(testing::test_device());
    const auto st = reinterpret_cast<cudaStream_t>(e.stream());
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<float> U(-1.0f, 1.0f);
    const int64_t rb = row_bytes(c.type, c.cols), stride = cuda::planar_row_stride(c.type, c.cols);
    std::vector<float> xf(static_cast<size_t>(c.T * c.cols));
    for (float& v : xf) v = U(rng);
    std::vector<BlockQ8_1> xq(static_cast<size_t>(c.T * c.cols / 32));
    for (int64_t t = 0; t < c.T; ++t) quantize_row_q8_1(xf.data() + t * c.cols, xq.data() + t * c.cols / 32, c.cols);
    DeviceBuffer<BlockQ8_1> dx(e, xq.size());
    dx.upload(xq);

    const size_t n = c.rows.size();
    std::vector<DeviceBuffer<uint8_t>> dplanar;
    std::vector<DeviceBuffer<float>> ds, dy;
    std::vector<std::vector<float>> ref(n);
    std::vector<cuda::GemmParams> ps(n);
    for (size_t j = 0; j < n; ++j) {
      const int64_t rows = c.rows[j];
      std::vector<float> wf(static_cast<size_t>(rows * c.cols));
      for (float& v : wf) v = U(rng) * 0.1f;
      std::vector<uint8_t> w(static_cast<size_t>(rb * rows + 16));
      float scale = 0.75f;
      if (c.type == DType::NVFP4)
        scale = quantize_nvfp4_tensor(wf.data(), w.data(), rows, c.cols);
      else
        for (int64_t r = 0; r < rows; ++r) quantize_row(c.type, wf.data() + r * c.cols, w.data() + r * rb, c.cols);
      DeviceBuffer<uint8_t> dw(e, w.size());
      dw.upload(w);
      // the device layout: planar rows, as the model uploads them (cuda/planar.cuh)
      dplanar.emplace_back(e, static_cast<size_t>(stride * rows + 16));
      cuda::to_planar(c.type, dw.data(), dplanar.back().data(), rows, c.cols, stride, st);
      ds.emplace_back(e, 1);
      ds.back().upload(std::vector<float>{scale});
      dy.emplace_back(e, static_cast<size_t>(c.T * rows));
      e.synchronize();  // dw's copy into planar rows is done before dw leaves

      cuda::GemmParams& p = ps[j];
      p.w.type = c.type;
      p.w.rows = rows;
      p.w.cols = c.cols;
      p.w.row_bytes = stride;
      p.w.slab_rows = rows;
      p.w.data = dplanar.back().data();
      p.w.slab_scale = ds.back().data();
      p.xq = reinterpret_cast<const cuda::Q81*>(dx.data());
      p.T = c.T;
      p.y = dy.back().data();
      p.ld_y = rows;
      ref[j].resize(static_cast<size_t>(c.T * rows));
      for (int64_t t = 0; t < c.T; ++t)
        for (int64_t r = 0; r < rows; ++r) {
          const uint8_t* wr = w.data() + r * rb;
          const BlockQ8_1* x = xq.data() + t * c.cols / 32;
          const float d =
              c.type == DType::Q8_0
                  ? dot_q8_0_q8_1(reinterpret_cast<const BlockQ8_0*>(wr), x, c.cols, DotOrder::sequential)
                  : dot_nvfp4_q8_1(reinterpret_cast<const BlockNvfp4*>(wr), x, c.cols, DotOrder::sequential);
          ref[j][static_cast<size_t>(t * rows + r)] = d * scale;
        }
    }
    // the chosen token tile, then each tile forced (NVFP4's 32-token tile in one and in two token
    // halves, gemm_halves): no bit may depend on it
    std::vector<std::pair<int, int>> forms = {{0, 0}, {cuda::gemm_routed_tile, 0}, {128, 0}};
    if (c.type == DType::NVFP4) forms = {{0, 0}, {cuda::gemm_routed_tile, 1}, {cuda::gemm_routed_tile, 2}, {128, 0}};
    for (const auto& [tile, halves] : forms) {
      for (size_t j = 0; j < n; ++j) {
        dy[j].fill_bytes(0xFF);
        ps[j].token_tile = tile;
        ps[j].halves = halves;
      }
      if (n == 1)
        cuda::gemm_run(ps[0], st);
      else
        cuda::gemm_run_multi(ps.data(), static_cast<int>(n), st);
      e.synchronize();
      for (size_t j = 0; j < n; ++j) {
        SCOPED_TRACE(Vars()("token_tile", tile)("halves", halves)("matrix", j).str());
        EXPECT_TRUE(compare_to_contract(dy[j].download(), ref[j], Tolerance::exact()));
      }
    }
  });
}

// A launch of several matrices takes dense ones of one type, cols and activation rows: anything
// else is an error naming the difference, not a launch that reads one matrix's rows as another's.
TEST(GemmMulti, RejectsMismatchedMatrices) {
  cuda::GemmParams a, b;
  a.w.type = b.w.type = DType::Q8_0;
  a.w.rows = a.w.slab_rows = b.w.rows = b.w.slab_rows = 16;
  a.w.cols = 64;
  b.w.cols = 96;
  a.T = b.T = 8;
  const cuda::GemmParams ps[2] = {a, b};
  try {
    cuda::gemm_run_multi(ps, 2, nullptr);
    ADD_FAILURE() << "a launch of matrices with different cols ran";
  } catch (const std::exception& ex) {
    EXPECT_NE(std::string(ex.what()).find("cols (96 / 64)"), std::string::npos) << ex.what();
  }
  const cuda::GemmParams five[5] = {a, a, a, a, a};
  EXPECT_THROW(cuda::gemm_run_multi(five, 5, nullptr), std::exception);
  // a routed matrix beside a dense one: routed matrices of a launch share one grouping
  cuda::GemmParams r = a;
  const int32_t order[1] = {0};
  r.order = order;
  const cuda::GemmParams mixed[2] = {a, r};
  try {
    cuda::gemm_run_multi(mixed, 2, nullptr);
    ADD_FAILURE() << "a launch of a dense and a routed matrix ran";
  } catch (const std::exception& ex) {
    EXPECT_NE(std::string(ex.what()).find("matrix 1 of a launch is routed and matrix 0 dense"), std::string::npos)
        << ex.what();
  }
}

// The dense tile choice: the 128-token tile where its grid covers half the card, else the
// 32-token one (the bits are the same either way: GemmOp runs both).
TEST(GemmTokenTile, FillsTheCard) {
  EXPECT_EQ(cuda::gemm_token_tile(4096, 32, 132), 32);    // a batched decode step's rows
  EXPECT_EQ(cuda::gemm_token_tile(1024, 512, 132), 32);   // Qwen3-0.6B o / down: 32 blocks of 128
  EXPECT_EQ(cuda::gemm_token_tile(4096, 512, 132), 128);  // 128 blocks
  EXPECT_EQ(cuda::gemm_token_tile(4096, 128, 132), 32);   // 32 blocks of 128
  EXPECT_EQ(cuda::gemm_token_tile(1024, 2048, 132), 128);
  EXPECT_EQ(cuda::gemm_token_tile(1024, 512, 64), 128);  // a smaller card: 32 blocks are half of it
}

INSTANTIATE_TEST_SUITE_P(Eval, GemmOp, ::testing::ValuesIn(cases()), OpCaseName());

// Routed launches (MoE experts): T tokens x k picks over E slabs, grouped by moe_group_run, each
// vector a = (token a / k, slab ids[a]) against the same contract, bitwise; alone and as one of
// two matrices over the grouping in one launch. The picks give one
// slab 40 vectors (two 32-vector tiles), leave slabs empty, and rows cross a partial row block.
struct RoutedCase : OpCase {
  DType type;
  int64_t rows, cols;
  int T, k, E;
  RoutedCase(DType t, int64_t r, int64_t c, int n, int kk, int e) : type(t), rows(r), cols(c), T(n), k(kk), E(e) {}
  std::string vars() const override {
    return Vars()("type", dtype_name(type))("rows", rows)("cols", cols)("T", T)("k", k)("E", E).str();
  }
};

using GemmRoutedOp = OpTest<RoutedCase>;

TEST_P(GemmRoutedOp, GroupedByExpertMatchesSequentialDotContractBitwise) {
  for_each_seed([&](uint64_t seed) {
    const RoutedCase& c = GetParam();
    Engine e = Engine::open(testing::test_device());
    const auto st = reinterpret_cast<cudaStream_t>(e.stream());
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<float> U(-1.0f, 1.0f);
    const int64_t rb = row_bytes(c.type, c.cols), n_rows = c.rows * c.E;
    std::vector<float> wf(static_cast<size_t>(n_rows * c.cols));
    for (float& v : wf) v = U(rng) * 0.1f;
    std::vector<uint8_t> w(static_cast<size_t>(rb * n_rows + 16));
    std::vector<float> scales(static_cast<size_t>(c.E), 0.75f);
    for (int s = 0; s < c.E; ++s) {
      const float* src = wf.data() + s * c.rows * c.cols;
      uint8_t* dst = w.data() + s * c.rows * rb;
      if (c.type == DType::NVFP4)
        scales[s] = quantize_nvfp4_tensor(src, dst, c.rows, c.cols);
      else
        for (int64_t r = 0; r < c.rows; ++r) quantize_row(c.type, src + r * c.cols, dst + r * rb, c.cols);
    }
    std::vector<float> xf(static_cast<size_t>(c.T * c.cols));
    for (float& v : xf) v = U(rng);
    std::vector<BlockQ8_1> xq(static_cast<size_t>(c.T * c.cols / 32));
    for (int t = 0; t < c.T; ++t) quantize_row_q8_1(xf.data() + t * c.cols, xq.data() + t * c.cols / 32, c.cols);
    // k distinct slabs per token: slab 1 in every token's picks (a crowded group), slab 0 and the
    // last slab never (empty groups), the rest at random
    std::vector<int32_t> ids(static_cast<size_t>(c.T * c.k));
    for (int t = 0; t < c.T; ++t) {
      std::vector<int32_t> pool;
      for (int s = 2; s < c.E - 1; ++s) pool.push_back(s);
      std::shuffle(pool.begin(), pool.end(), rng);
      ids[t * c.k] = 1;
      for (int j = 1; j < c.k; ++j) ids[t * c.k + j] = pool[j - 1];
    }

    DeviceBuffer<uint8_t> dw(e, w.size());
    dw.upload(w);
    const int64_t stride = cuda::planar_row_stride(c.type, c.cols);
    DeviceBuffer<uint8_t> dplanar(e, static_cast<size_t>(stride * n_rows + 16));
    cuda::to_planar(c.type, dw.data(), dplanar.data(), n_rows, c.cols, stride, st);
    DeviceBuffer<float> ds(e, scales.size()), dy(e, static_cast<size_t>(c.T * c.k * c.rows));
    ds.upload(scales);
    DeviceBuffer<BlockQ8_1> dx(e, xq.size());
    dx.upload(xq);
    const int64_t n = static_cast<int64_t>(c.T) * c.k,
                  bound = cuda::moe_group_tile_bound(n, c.E, cuda::gemm_routed_tile);
    DeviceBuffer<int32_t> dids(e, ids.size()), dorder(e, ids.size()), dstart(e, static_cast<size_t>(c.E + 1));
    DeviceBuffer<int32_t> dtslab(e, static_cast<size_t>(bound)), dtstart(e, static_cast<size_t>(bound)), dntiles(e, 1);
    dids.upload(ids);
    dy.fill_bytes(0xFF);
    cuda::moe_group_run({dids.data(), n, c.E, dorder.data(), dstart.data(), cuda::gemm_routed_tile, dtslab.data(),
                         dtstart.data(), dntiles.data()},
                        st);
    cuda::GemmParams p;
    p.w.type = c.type;
    p.w.rows = n_rows;
    p.w.cols = c.cols;
    p.w.row_bytes = stride;
    p.w.slab_rows = c.rows;
    p.w.data = dplanar.data();
    p.w.slab_scale = ds.data();
    p.xq = reinterpret_cast<const cuda::Q81*>(dx.data());
    p.T = c.T * c.k;
    p.y = dy.data();
    p.ld_y = c.rows;
    p.order = dorder.data();
    p.group_start = dstart.data();
    p.n_slab = c.E;
    p.x_div = c.k;
    p.tile_slab = dtslab.data();
    p.tile_start = dtstart.data();
    p.n_tiles = dntiles.data();
    p.max_tiles = bound;
    // NVFP4 in one token half (the default for routed launches) and in two; Q8_0 in two
    std::vector<std::vector<float>> runs;
    for (int halves : c.type == DType::NVFP4 ? std::vector<int>{0, 2} : std::vector<int>{0}) {
      p.halves = halves;
      dy.fill_bytes(0xFF);
      cuda::gemm_run(p, st);
      e.synchronize();
      runs.push_back(dy.download());
    }
    // two routed matrices over the grouping in one launch (an expert gate and up): the second the
    // same weights at twice the slab scales, so its outputs are exactly twice the first's and a
    // block that took the other matrix's job shows
    {
      std::vector<float> scales2(scales);
      for (float& v : scales2) v *= 2.0f;
      DeviceBuffer<float> ds2(e, scales2.size()), dy2(e, static_cast<size_t>(c.T * c.k * c.rows));
      ds2.upload(scales2);
      cuda::GemmParams two[2] = {p, p};
      two[0].halves = two[1].halves = 0;
      two[1].w.slab_scale = ds2.data();
      two[1].y = dy2.data();
      dy.fill_bytes(0xFF);
      dy2.fill_bytes(0xFF);
      cuda::gemm_run_multi(two, 2, st);
      e.synchronize();
      runs.push_back(dy.download());
      std::vector<float> y2 = dy2.download();
      for (float& v : y2) v *= 0.5f;
      runs.push_back(y2);
    }
    // the grouping itself: starts are the exclusive counts, order a permutation grouped by slab
    const std::vector<int32_t> order = dorder.download(), start = dstart.download();
    std::vector<int32_t> count(static_cast<size_t>(c.E), 0);
    for (int32_t id : ids) ++count[id];
    ASSERT_EQ(start[0], 0);
    for (int s = 0; s < c.E; ++s) ASSERT_EQ(start[s + 1] - start[s], count[s]) << "slab " << s;
    std::vector<int> seen(ids.size(), 0);
    for (int s = 0; s < c.E; ++s)
      for (int32_t j = start[s]; j < start[s + 1]; ++j) {
        ASSERT_EQ(ids[order[j]], s) << "vector " << order[j] << " in slab " << s << "'s group";
        ++seen[order[j]];
      }
    for (size_t a = 0; a < seen.size(); ++a) ASSERT_EQ(seen[a], 1) << "vector " << a;
    // the tile list: slab after slab, each group's vectors in tiles of gemm_routed_tile from its start
    const std::vector<int32_t> tslab = dtslab.download(), tstart = dtstart.download(), ntiles = dntiles.download();
    int32_t i = 0;
    for (int s = 0; s < c.E; ++s)
      for (int32_t j = start[s]; j < start[s + 1]; j += cuda::gemm_routed_tile, ++i) {
        ASSERT_LT(i, ntiles[0]);
        EXPECT_EQ(tslab[i], s) << "tile " << i;
        EXPECT_EQ(tstart[i], j) << "tile " << i;
      }
    EXPECT_EQ(i, ntiles[0]);

    std::vector<float> ref(runs[0].size());
    for (int64_t a = 0; a < c.T * c.k; ++a)
      for (int64_t r = 0; r < c.rows; ++r) {
        const uint8_t* wr = w.data() + (ids[a] * c.rows + r) * rb;
        const BlockQ8_1* x = xq.data() + (a / c.k) * c.cols / 32;
        const float d = c.type == DType::Q8_0
                            ? dot_q8_0_q8_1(reinterpret_cast<const BlockQ8_0*>(wr), x, c.cols, DotOrder::sequential)
                            : dot_nvfp4_q8_1(reinterpret_cast<const BlockNvfp4*>(wr), x, c.cols, DotOrder::sequential);
        ref[static_cast<size_t>(a * c.rows + r)] = d * scales[ids[a]];
      }
    for (size_t i = 0; i < runs.size(); ++i) {
      SCOPED_TRACE(Vars()("run", i).str());
      EXPECT_TRUE(compare_to_contract(runs[i], ref, Tolerance::exact()));
    }
  });
}

std::vector<RoutedCase> routed_cases() {
  // tiles of 1..31 vectors: a warp skips its n-tiles past a tile's vectors (8 (2 n + half)..), so
  // each count crosses what the two halves compute: slab 1's 20 vectors (the halves' second n-tiles
  // split), 60 vectors (32 and 28), and the random groups around them
  return {RoutedCase(DType::Q8_0, 144, 512, 40, 4, 16), RoutedCase(DType::NVFP4, 144, 512 + 256, 40, 4, 16),
          RoutedCase(DType::NVFP4, 64, 256, 7, 2, 5), RoutedCase(DType::NVFP4, 80, 512, 20, 3, 6),
          RoutedCase(DType::Q8_0, 80, 256 + 32, 60, 2, 5)};
}

INSTANTIATE_TEST_SUITE_P(Eval, GemmRoutedOp, ::testing::ValuesIn(routed_cases()), OpCaseName());

struct Bf16Case : OpCase {
  int64_t rows, cols, T;
  bool coherent;  // every activation 1 + 3 * 2^-9 (+ noise below bf16's reach): bf16 alone is off by 0.3%
  Bf16Case(int64_t r, int64_t c, int64_t n, bool h) : rows(r), cols(c), T(n), coherent(h) {}
  std::string vars() const override { return Vars()("rows", rows)("cols", cols)("T", T)("coherent", coherent).str(); }
};

std::vector<Bf16Case> bf16_cases() {
  return {Bf16Case(16, 64, 8, false), Bf16Case(37, 512, 5, false), Bf16Case(100, 1024 + 64, 131, false),
          Bf16Case(64, 4096, 40, false), Bf16Case(24, 256, 9, true)};
}

using GemmBf16Op = OpTest<Bf16Case>;

TEST_P(GemmBf16Op, WithinSplitBf16Bound) {
  for_each_seed([&](uint64_t seed) {
    const Bf16Case& c = GetParam();
    Engine e = Engine::open(testing::test_device());
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<float> U(-1.0f, 1.0f);
    std::vector<uint16_t> w(static_cast<size_t>(c.rows * c.cols));
    for (uint16_t& v : w) v = f32_to_bf16(c.coherent ? 0.5f + 0.25f * (U(rng) + 1.0f) : U(rng) * 0.1f);
    std::vector<float> x(static_cast<size_t>(c.T * c.cols));
    for (float& v : x) v = c.coherent ? 1.0f + 3.0f / 512.0f + U(rng) * 0x1p-12f : U(rng);
    const float scale = 0.75f;

    DeviceBuffer<uint16_t> dw(e, w.size());
    dw.upload(w);
    DeviceBuffer<float> dx(e, x.size()), ds(e, 1), dy(e, static_cast<size_t>(c.T * c.rows));
    dx.upload(x);
    ds.upload(std::vector<float>{scale});
    dy.fill_bytes(0xFF);
    cuda::GemmParams p;
    p.w.type = DType::BF16;
    p.w.rows = c.rows;
    p.w.cols = c.cols;
    p.w.row_bytes = 2 * c.cols;
    p.w.slab_rows = c.rows;
    p.w.data = reinterpret_cast<const uint8_t*>(dw.data());
    p.w.slab_scale = ds.data();
    p.xf = dx.data();
    p.ld_xf = c.cols;
    p.T = c.T;
    p.y = dy.data();
    p.ld_y = c.rows;
    cuda::gemm_run(p, reinterpret_cast<cudaStream_t>(e.stream()));
    e.synchronize();
    const std::vector<float> got = dy.download();

    const double gamma = (3.0 * static_cast<double>(c.cols) / 16 + 1) * 0x1p-22 + 0x1p-24;
    int64_t over = 0, hi_only_over = 0;
    for (int64_t t = 0; t < c.T; ++t)
      for (int64_t r = 0; r < c.rows; ++r) {
        double exact = 0, mag = 0, hi_only = 0;
        for (int64_t k = 0; k < c.cols; ++k) {
          const double wk = bf16_to_f32(w[static_cast<size_t>(r * c.cols + k)]);
          const float xk = x[static_cast<size_t>(t * c.cols + k)];
          exact += wk * xk;
          mag += std::abs(wk * xk);
          hi_only += wk * bf16_to_f32(f32_to_bf16(xk));
        }
        const double bound = gamma * mag * scale;
        const double y = got[static_cast<size_t>(t * c.rows + r)];
        if (!(std::abs(y - exact * scale) <= bound)) {
          if (over++ < 5)
            ADD_FAILURE() << "t=" << t << " r=" << r << ": got " << y << ", exact " << exact * scale << ", bound "
                          << bound;
        }
        if (std::abs(hi_only * scale - exact * scale) > bound) ++hi_only_over;
      }
    EXPECT_EQ(over, 0) << "outputs outside the split-bf16 bound (gemm.cuh)";
    if (c.coherent) {
      EXPECT_GT(hi_only_over, 0) << "the bound does not tell split-bf16 from bf16 activations: it proves nothing";
    }
  });
}

INSTANTIATE_TEST_SUITE_P(Eval, GemmBf16Op, ::testing::ValuesIn(bf16_cases()), OpCaseName());

}  // namespace
}  // namespace memra::ops
