#include "memra/dtype.h"

#include <limits>

#include "memra/error.h"

namespace memra {
namespace {

struct Entry {
  DType type;
  TypeTraits traits;
};

// Block sizes and byte counts from ggml-common.h (see ../shared/reference).
// clang-format off
constexpr Entry kTypes[] = {
    {DType::F32, {"f32", 1, 4, false, true}},
    {DType::F16, {"f16", 1, 2, false, true}},
    {DType::Q4_0, {"q4_0", 32, 18, true, false}},
    {DType::Q4_1, {"q4_1", 32, 20, true, false}},
    {DType::Q5_0, {"q5_0", 32, 22, true, false}},
    {DType::Q5_1, {"q5_1", 32, 24, true, false}},
    {DType::Q8_0, {"q8_0", 32, 34, true, true}},
    {DType::Q8_1, {"q8_1", 32, 36, true, true}},
    {DType::Q2_K, {"q2_K", 256, 84, true, false}},
    {DType::Q3_K, {"q3_K", 256, 110, true, false}},
    {DType::Q4_K, {"q4_K", 256, 144, true, false}},
    {DType::Q5_K, {"q5_K", 256, 176, true, false}},
    {DType::Q6_K, {"q6_K", 256, 210, true, false}},
    {DType::Q8_K, {"q8_K", 256, 292, true, false}},
    {DType::I8, {"i8", 1, 1, false, true}},
    {DType::I16, {"i16", 1, 2, false, true}},
    {DType::I32, {"i32", 1, 4, false, true}},
    {DType::I64, {"i64", 1, 8, false, true}},
    {DType::F64, {"f64", 1, 8, false, true}},
    {DType::BF16, {"bf16", 1, 2, false, true}},
    {DType::MXFP4, {"mxfp4", 32, 17, true, true}},
    {DType::NVFP4, {"nvfp4", 64, 36, true, true}},
    {DType::F8_E4M3, {"f8_e4m3", 1, 1, false, true}},
    {DType::U8, {"u8", 1, 1, false, true}},
    {DType::F8_E8M0, {"f8_e8m0", 1, 1, false, true}},
};
// clang-format on

const Entry* lookup(DType t) {
  for (const Entry& e : kTypes)
    if (e.type == t) return &e;
  return nullptr;
}

}  // namespace

std::optional<DType> dtype_from_ggml(uint32_t id) {
  if (id >= 43) return std::nullopt;
  const Entry* e = lookup(static_cast<DType>(id));
  if (!e) return std::nullopt;
  return e->type;
}

const TypeTraits& type_traits(DType t) {
  const Entry* e = lookup(t);
  if (!e) fail("unknown dtype id ", static_cast<uint32_t>(t));
  return e->traits;
}

int64_t row_bytes(DType t, int64_t n) {
  const TypeTraits& tr = type_traits(t);
  if (n < 0) fail("row of ", n, " elements of ", tr.name);
  if (n % tr.block_elems != 0)
    fail("row of ", n, " elements is not a multiple of the ", tr.name, " block size ",
         tr.block_elems);
  const int64_t blocks = n / tr.block_elems;
  if (blocks > std::numeric_limits<int64_t>::max() / tr.block_bytes)
    fail("row of ", n, " ", tr.name, " elements overflows int64 bytes");
  return blocks * tr.block_bytes;
}

}  // namespace memra
