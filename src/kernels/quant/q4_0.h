// q4_0: GGUF's block_q4_0 (32 unsigned 4-bit codes sharing one f16 scale, x = d * (code - 8);
// byte j holds element j in its low nibble and element j + 16 in its high nibble), its scalar
// reference (de)quantisers, and its packed layout (weights.h): per (row group, block), eight
// steps of 4 elements, byte 32 s + 4 k + t = code(row k, element 4 s + t) | code(row 8 + k,
// element 4 s + t) << 4 for k in 0..7: the same bytes per weight as GGUF.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/quant/formats.h"

namespace daisy::kernels {

inline constexpr int kQ4BlockSize = 32;

struct BlockQ4_0 {
  uint16_t d;  // f16 scale
  uint8_t qs[kQ4BlockSize / 2];
};
static_assert(sizeof(BlockQ4_0) == 18, "block_q4_0 is 18 bytes in GGUF");

// Packed bytes of one (row group, block).
inline constexpr int kQ4_0GroupBlockBytes = 256;

// ggml's quantize_row_q4_0_ref rule; n % 32 == 0.
void QuantizeRowQ4_0(const float* x, BlockQ4_0* y, size_t n);
void DequantizeRowQ4_0(const BlockQ4_0* x, float* y, size_t n);

// The WeightFormat functions (formats.h).
void QuantizeQ4_0(const float* x, void* blocks, int64_t n);
void DequantizeQ4_0(const void* blocks, float* y, int64_t n);
void PackBlockQ4_0(const uint8_t* const blocks[kRowGroup], uint8_t* data, uint16_t* scales);
void UnpackBlockQ4_0(const uint8_t* data, int8_t q[kRowGroup][kQBlock]);

}  // namespace daisy::kernels
