// The one finite check (memra/finite.h).
#include "memra/finite.h"

#include <cmath>
#include <sstream>

#include "memra/error.h"

namespace memra {

void fail_non_finite(const FiniteSite& site, int64_t position, std::optional<int64_t> element,
                     std::optional<float> value) {
  std::ostringstream m;
  if (!site.call.empty()) m << site.call << ": ";
  m << "non-finite value (";
  if (value)
    m << *value;
  else
    m << "NaN or Inf";
  m << ") in " << site.layer;
  if (site.sequence >= 0) m << ", sequence " << site.sequence;
  m << ", position " << position;
  if (element) m << ", element " << *element;
  fail(m.str());
}

void check_finite(std::span<const float> x, int64_t row, const FiniteSite& site) {
  for (size_t i = 0; i < x.size(); ++i)
    if (!std::isfinite(x[i])) {
      const int64_t k = static_cast<int64_t>(i);
      fail_non_finite(site, site.pos0 + k / row, k % row, x[i]);
    }
}

}  // namespace memra
