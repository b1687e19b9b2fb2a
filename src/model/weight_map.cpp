// The non-template parts of the name mapping (weight_map.h): the shape check and the row lists
// of the whole-row layout changes.
#include "model/weight_map.h"

#include <numeric>
#include <sstream>

#include "memra/error.h"

namespace memra::detail {

namespace {
void append(std::vector<int64_t>& v, int64_t first, int64_t n) {
  for (int64_t i = 0; i < n; ++i) v.push_back(first + i);
}
std::vector<int64_t> squeeze(std::vector<int64_t> ne) {
  while (ne.size() > 1 && ne.back() == 1) ne.pop_back();
  return ne;
}
}  // namespace

std::string shape_str(const std::vector<int64_t>& ne) {
  std::ostringstream os;
  os << "{";
  for (size_t i = 0; i < ne.size(); ++i) os << (i ? ", " : "") << ne[i];
  os << "}";
  return os.str();
}

const TensorView& checked_tensor(const WeightSource& src, const std::string& name,
                                 const std::vector<int64_t>& want) {
  const TensorView* t = src.find(name);
  if (!t) fail(src.path(), ": tensor '", name, "' missing (expected shape ", shape_str(want), ")");
  if (squeeze(t->ne) != squeeze(want))
    fail(src.path(), ": tensor '", name, "': shape ", shape_str(t->ne), ", expected ", shape_str(want));
  return *t;
}

std::vector<int64_t> row_range(int64_t first, int64_t n) {
  std::vector<int64_t> r(static_cast<size_t>(n));
  std::iota(r.begin(), r.end(), first);
  return r;
}

RowSplit q_gate_rows(const ModelConfig& c) {
  const int64_t H = c.n_head, hd = c.head_dim;
  RowSplit s;
  for (int64_t h = 0; h < H; ++h) {
    append(s.first, h * 2 * hd, hd);
    append(s.second, h * 2 * hd + hd, hd);
  }
  return s;
}

RowSplit qkvz_rows(const ModelConfig& c) {
  const int64_t nk = c.ssm_n_k_heads, dk = c.ssm_d_k, dv = c.ssm_d_v;
  const int64_t r = c.ssm_n_v_heads / nk, grp = 2 * dk + 2 * r * dv;
  std::vector<int64_t> q, k, v;
  RowSplit s;
  for (int64_t h = 0; h < nk; ++h) {
    append(q, h * grp, dk);
    append(k, h * grp + dk, dk);
    append(v, h * grp + 2 * dk, r * dv);
    append(s.second, h * grp + 2 * dk + r * dv, r * dv);
  }
  s.first = std::move(q);
  s.first.insert(s.first.end(), k.begin(), k.end());
  s.first.insert(s.first.end(), v.begin(), v.end());
  return s;
}

RowSplit ba_rows(const ModelConfig& c) {
  const int64_t nk = c.ssm_n_k_heads, r = c.ssm_n_v_heads / nk;
  RowSplit s;
  for (int64_t h = 0; h < nk; ++h) {
    append(s.first, h * 2 * r, r);
    append(s.second, h * 2 * r + r, r);
  }
  return s;
}

}  // namespace memra::detail
