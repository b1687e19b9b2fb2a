// memra/dtype.h — tensor element/block types and their storage traits.
//
// Ids are ggml's (llama.cpp `enum ggml_type`) so a GGUF type id converts with a range check and
// no table; types that ggml lacks but safetensors has (F8_E4M3, U8) take ids above ggml's range.
// The scalar conversions between these encodings and float (fp16, bf16, e4m3, e2m1) live in the
// second half of this header: they are the numeric contracts every kernel reproduces.
//
// provides: DType, TypeTraits, type_traits, dtype_from_ggml, dtype_name, row_bytes
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace memra {

enum class DType : uint32_t {
  F32 = 0, F16 = 1, Q4_0 = 2, Q4_1 = 3, Q5_0 = 6, Q5_1 = 7, Q8_0 = 8, Q8_1 = 9,
  Q2_K = 10, Q3_K = 11, Q4_K = 12, Q5_K = 13, Q6_K = 14, Q8_K = 15,
  I8 = 24, I16 = 25, I32 = 26, I64 = 27, F64 = 28, BF16 = 30, MXFP4 = 39, NVFP4 = 40,
  // not ggml types (safetensors only)
  F8_E4M3 = 1000, U8 = 1001,
};

struct TypeTraits {
  std::string_view name;  // ggml's spelling ("q8_0", "nvfp4") or safetensors' for the extras
  int64_t block_elems;    // elements per block (1 for plain types)
  int64_t block_bytes;    // bytes per block
  bool quantized;         // needs general.quantization_version in GGUF
  bool supported;         // memra can dequantize it (others are readable but not computable)
};

// nullopt for ids that are not ggml types (gaps, removed types, ids >= GGML_TYPE_COUNT = 43).
std::optional<DType> dtype_from_ggml(uint32_t id);
const TypeTraits& type_traits(DType t);
inline std::string_view dtype_name(DType t) { return type_traits(t).name; }

// Bytes of a row of `n` elements; fails (memra::Error) unless n is a multiple of the block size
// or when the result would overflow int64.
int64_t row_bytes(DType t, int64_t n);

}  // namespace memra
