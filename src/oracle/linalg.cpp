// Dot products, mat-vec and mat-mat in f64 with one fixed summation order, and the fixed row
// partition used for threading.
#include <algorithm>
#include <atomic>
#include <thread>
#include <vector>

#include "memra/error.h"
#include "memra/quant.h"
#include "oracle/ops.h"

namespace memra::oracle::ops {

namespace {
// Below ~1M multiply-adds a thread costs more than it saves.
std::atomic<int64_t> g_min_work{int64_t{1} << 20};
}  // namespace

int64_t set_min_parallel_work(int64_t work) { return g_min_work.exchange(std::max<int64_t>(1, work)); }

void parallel_rows(int64_t n, int64_t work, int threads, const std::function<void(int64_t, int64_t)>& fn) {
  const int64_t kMinWork = g_min_work.load();
  int nt = threads > 0 ? threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  nt = static_cast<int>(std::min<int64_t>(nt, std::max<int64_t>(1, work / kMinWork)));
  nt = static_cast<int>(std::min<int64_t>(nt, n));
  if (nt <= 1) {
    if (n > 0) fn(0, n);
    return;
  }
  std::vector<std::thread> pool;
  pool.reserve(static_cast<size_t>(nt - 1));
  const int64_t per = n / nt, extra = n % nt;
  int64_t begin = 0;
  int64_t first_end = 0;
  for (int i = 0; i < nt; ++i) {
    const int64_t end = begin + per + (i < extra ? 1 : 0);
    if (i == 0) first_end = end;
    else pool.emplace_back([&fn, begin, end] { fn(begin, end); });
    begin = end;
  }
  // Exceptions do not cross threads: the row functions here do not throw.
  fn(0, first_end);
  for (std::thread& t : pool) t.join();
}

double dot(const float* a, const float* b, int64_t n) {
  // Lane j sums the products of indices i ≡ j (mod 8); lanes combine pairwise. A float*float
  // product is exact in f64, so only these sums round — in this order and no other.
  double s[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j) s[j] += static_cast<double>(a[i + j]) * static_cast<double>(b[i + j]);
  for (; i < n; ++i) s[i & 7] += static_cast<double>(a[i]) * static_cast<double>(b[i]);
  return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
}

double dot_f64(const double* a, const double* b, int64_t n) {
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += a[i] * b[i];
  return s;
}

// A q8_1 value d*q (fp16 d, |q| <= 127) is exact in f32, and so is its f64 product with a
// dequantised weight: a dot over input_rows' rows is then the exact value of the GPU's integer dot
// product plus the one f64 summation.
const float* input_rows(const Matrix& w, const float* x, int64_t T, std::vector<float>& buf) {
  if (!w.q8_1_input) return x;
  MEMRA_CHECK(w.cols % kQ8BlockSize == 0, "oracle: q8_1 activations need a row length that is a multiple of ",
              kQ8BlockSize, ", not ", w.cols);
  buf.resize(static_cast<size_t>(T * w.cols));
  std::vector<BlockQ8_1> q(static_cast<size_t>(w.cols / kQ8BlockSize));
  for (int64_t t = 0; t < T; ++t) {
    quantize_row_q8_1(x + t * w.cols, q.data(), w.cols);
    dequantize_row(DType::Q8_1, q.data(), buf.data() + t * w.cols, w.cols);
  }
  return buf.data();
}

void matvec(const Matrix& w, const float* x, float* y, int threads) {
  std::vector<float> buf;
  x = input_rows(w, x, 1, buf);
  parallel_rows(w.rows, w.rows * w.cols, threads, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) y[r] = static_cast<float>(dot(w.row(r), x, w.cols));
  });
}

void matmul(const Matrix& w, const float* x, int64_t T, float* y, int threads) {
  std::vector<float> buf;
  x = input_rows(w, x, T, buf);
  parallel_rows(w.rows, w.rows * w.cols * T, threads, [&](int64_t r0, int64_t r1) {
    // Row blocks outer so a block of W stays in cache across the T inputs.
    constexpr int64_t kBlock = 16;
    for (int64_t rb = r0; rb < r1; rb += kBlock) {
      const int64_t re = std::min(r1, rb + kBlock);
      for (int64_t t = 0; t < T; ++t)
        for (int64_t r = rb; r < re; ++r)
          y[t * w.rows + r] = static_cast<float>(dot(w.row(r), x + t * w.cols, w.cols));
    }
  });
}

}  // namespace memra::oracle::ops
