// Compile-time checks of the scalar conversions in memra/dtype.h.
//
// The conversions are header-only so that device code can mirror them; these static_asserts
// keep them constant-evaluable (a conversion that stops being constexpr fails the build here,
// not later in a kernel port) and pin the boundary codes that every encoder must hit. The
// exhaustive value checks live in test/unit/dtype_test.cpp.
#include "memra/dtype.h"

namespace memra {
namespace {

static_assert(fp16_to_f32(0x3c00) == 1.0f && f32_to_fp16(1.0f) == 0x3c00);
static_assert(f32_to_fp16(65504.0f) == 0x7bff && f32_to_fp16(65520.0f) == 0x7c00);
static_assert(bf16_to_f32(0x3f80) == 1.0f && f32_to_bf16(1.0f) == 0x3f80);
static_assert(e4m3_to_f32(0x7e) == 448.0f && f32_to_e4m3(1e30f) == 0x7e);
static_assert(e4m3_to_f32(0x01) == 0x1p-9f && f32_to_e4m3(0x1p-9f) == 0x01);
static_assert(ue4m3_to_f32(0x7f) == 0.0f && f32_to_ue4m3(-1.0f) == 0);
static_assert(e2m1_doubled(0x7) == 12 && e2m1_doubled(0xf) == -12 && f32_to_e2m1(5.0f) == 6);
static_assert(e8m0_to_f32(127) == 1.0f && e8m0_to_f32_half(128) == 1.0f);

}  // namespace
}  // namespace memra
