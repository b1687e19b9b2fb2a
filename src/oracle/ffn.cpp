// Dense SwiGLU FFN: out = Wdown( silu(Wgate x) * Wup x ).
#include <vector>

#include "oracle/ops.h"

namespace memra::oracle::ops {

void ffn(const FfnWeights& w, const float* x, int64_t T, float* out, int threads) {
  const int64_t F = w.gate.rows;
  std::vector<float> g(static_cast<size_t>(T * F)), u(static_cast<size_t>(T * F));
  matmul(w.gate, x, T, g.data(), threads);
  matmul(w.up, x, T, u.data(), threads);
  for (int64_t i = 0; i < T * F; ++i) g[i] = static_cast<float>(silu(g[i]) * static_cast<double>(u[i]));
  matmul(w.down, g.data(), T, out, threads);
}

}  // namespace memra::oracle::ops
