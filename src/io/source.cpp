#include "memra/source.h"

#include "memra/error.h"

namespace memra {

int64_t TensorView::nelements() const {
  int64_t n = 1;
  for (int64_t d : ne) n *= d;
  return n;
}

const TensorView& WeightSource::tensor(std::string_view name) const {
  const TensorView* t = find(name);
  if (!t) fail(path(), ": tensor '", name, "' not found");
  return *t;
}

}  // namespace memra
