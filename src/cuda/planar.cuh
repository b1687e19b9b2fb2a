// src/cuda/planar.cuh — the device layout of Q8_0 and NVFP4 weight rows: planes, not blocks.
//
// A GGUF row of Q8_0 is 34-byte blocks (fp16 d, 32 int8) and of NVFP4 36-byte blocks (four
// UE4M3 scales, 32 bytes of nibbles): 2- and 4-byte aligned, so a mat-vec lane reads them with
// nine 32-bit loads and shifts, and a warp's loads straddle cache sectors. On upload each row is
// rewritten, byte count unchanged, as
//   Q8_0:  [ qs: cols int8 ][ d: cols/32 fp16 ]
//   NVFP4: [ nibbles: cols/2 bytes, value j in nibble j & 1 of byte j / 2 ][ scales: cols/16 bytes ]
// and the row stride rounded up to 16 bytes, so a Q8_0 block's values are two 16-byte loads and a
// 16-value NVFP4 sub-block's nibbles one 8-byte load, in sequential order (four values = four
// consecutive nibbles = one byte-permute table lookup, no reordering).
//
// NVFP4 scales are canonicalised on the way: UE4M3 ignores bit 7 and code 0x7F decodes to 0
// (quant.h), so bit 7 is cleared and 0x7F becomes 0x00 — the same values, which lets the kernels
// decode a scale by bit placement (ue4m3_x2p8) without the special case.
// Every value and every operation of the dot contract is unchanged: same bits (the op tests
// compare against quant.h on planar uploads).
//
// provides: is_planar, planar_row_stride, to_planar
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "memra/dtype.h"

namespace memra::cuda {

// The types whose device rows are planar (the others are stored as in the file).
inline bool is_planar(DType type) { return type == DType::Q8_0 || type == DType::NVFP4; }

// Bytes between device rows of `cols` values of `type`: the GGUF row size rounded up to 16.
int64_t planar_row_stride(DType type, int64_t cols);

// Rewrites `rows` GGUF rows (row_bytes(type, cols) apart at src) as planar rows `stride` apart at
// dst (device pointers, distinct buffers). Q8_0 and NVFP4 only; other types are copied row by row.
void to_planar(DType type, const uint8_t* src, uint8_t* dst, int64_t rows, int64_t cols, int64_t stride,
               cudaStream_t s);

}  // namespace memra::cuda
