// The MoE selection ledger's comparison (memra/selection_ledger.h).
#include "memra/selection_ledger.h"

#include <algorithm>
#include <cstdio>
#include <sstream>

namespace memra {

SelectionLedger ordered(const SelectionLedger& l) {
  SelectionLedger o = l;
  std::stable_sort(o.rows.begin(), o.rows.end(), [](const Selection& x, const Selection& y) {
    return x.pos != y.pos ? x.pos < y.pos : x.layer < y.layer;
  });
  return o;
}

std::optional<size_t> first_ledger_difference(const SelectionLedger& la, const SelectionLedger& lb) {
  const SelectionLedger a = ordered(la), b = ordered(lb);
  const size_t n = std::min(a.rows.size(), b.rows.size());
  for (size_t i = 0; i < n; ++i)
    if (!(a.rows[i] == b.rows[i])) return i;
  if (a.rows.size() != b.rows.size()) return n;
  return std::nullopt;
}

namespace {

template <class T>
void list(std::ostringstream& os, const std::vector<T>& v, bool hex) {
  os << '{';
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) os << ", ";
    if (hex) {
      char buf[16];
      std::snprintf(buf, sizeof buf, "0x%08x", static_cast<unsigned>(v[i]));
      os << buf;
    } else {
      os << v[i];
    }
  }
  os << '}';
}

}  // namespace

std::string describe_ledger_difference(const SelectionLedger& la, const SelectionLedger& lb, size_t row) {
  const SelectionLedger a = ordered(la), b = ordered(lb);
  std::ostringstream os;
  if (row >= a.rows.size() || row >= b.rows.size()) {
    os << "the ledgers have " << a.rows.size() << " and " << b.rows.size() << " rows";
    return os.str();
  }
  const Selection& x = a.rows[row];
  const Selection& y = b.rows[row];
  os << "row " << row << " (position " << x.pos << ", layer " << x.layer << ")";
  if (x.pos != y.pos || x.layer != y.layer) os << " vs (position " << y.pos << ", layer " << y.layer << ")";
  os << ": experts ";
  list(os, x.experts, false);
  os << " vs ";
  list(os, y.experts, false);
  os << "; weights ";
  list(os, x.weight_bits, true);
  os << " vs ";
  list(os, y.weight_bits, true);
  return os.str();
}

}  // namespace memra
