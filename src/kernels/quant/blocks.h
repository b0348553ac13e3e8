// Block-quantised weight formats, byte-for-byte as GGUF stores them (ggml's block_q8_0 and
// block_q4_0), with the scalar reference (de)quantisers. Rows are multiples of the block size.
#pragma once

#include <cstddef>
#include <cstdint>

namespace daisy::kernels {

inline constexpr int kQ8BlockSize = 32;
inline constexpr int kQ4BlockSize = 32;

// 32 signed 8-bit values sharing one f16 scale: x = d * qs[i].
struct BlockQ8_0 {
  uint16_t d;  // f16 scale
  int8_t qs[kQ8BlockSize];
};
static_assert(sizeof(BlockQ8_0) == 34, "block_q8_0 is 34 bytes in GGUF");

// 32 unsigned 4-bit values sharing one f16 scale: x = d * (q - 8). Byte j holds element j in
// its low nibble and element j + 16 in its high nibble.
struct BlockQ4_0 {
  uint16_t d;  // f16 scale
  uint8_t qs[kQ4BlockSize / 2];
};
static_assert(sizeof(BlockQ4_0) == 18, "block_q4_0 is 18 bytes in GGUF");

// ggml's quantize_row_q8_0_ref / quantize_row_q4_0_ref rules; n % 32 == 0.
void QuantizeRowQ8_0(const float* x, BlockQ8_0* y, size_t n);
void QuantizeRowQ4_0(const float* x, BlockQ4_0* y, size_t n);
void DequantizeRowQ8_0(const BlockQ8_0* x, float* y, size_t n);
void DequantizeRowQ4_0(const BlockQ4_0* x, float* y, size_t n);

}  // namespace daisy::kernels
