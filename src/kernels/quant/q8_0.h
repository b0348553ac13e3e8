// q8_0: GGUF's block_q8_0 (32 signed 8-bit values sharing one f16 scale, x = d * q), its
// scalar reference (de)quantisers, and its packed layout (weights.h): per (row group, block),
// eight steps of 4 elements x 16 rows, byte 64 s + 4 l + t = q(row l, element 4 s + t) + 128.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/quant/formats.h"

namespace daisy::kernels {

inline constexpr int kQ8BlockSize = 32;

struct BlockQ8_0 {
  uint16_t d;  // f16 scale
  int8_t qs[kQ8BlockSize];
};
static_assert(sizeof(BlockQ8_0) == 34, "block_q8_0 is 34 bytes in GGUF");

// Packed bytes of one (row group, block).
inline constexpr int kQ8_0GroupBlockBytes = 512;

// ggml's quantize_row_q8_0_ref rule; n % 32 == 0.
void QuantizeRowQ8_0(const float* x, BlockQ8_0* y, size_t n);
void DequantizeRowQ8_0(const BlockQ8_0* x, float* y, size_t n);

// The WeightFormat functions (formats.h).
void QuantizeQ8_0(const float* x, void* blocks, int64_t n);
void DequantizeQ8_0(const void* blocks, float* y, int64_t n);
void PackBlockQ8_0(const uint8_t* const blocks[kRowGroup], uint8_t* data, uint16_t* scales);
void UnpackBlockQ8_0(const uint8_t* data, int8_t q[kRowGroup][kQBlock]);

}  // namespace daisy::kernels
