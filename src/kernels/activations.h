// Activation rows as the matrix kernels read them. Before a matmul, each input row (f32) is
// converted once to the activation format its weight type's dot product consumes (the format
// table's `act`, exactly as llama.cpp's vec_dot_type): f32 as is; values rounded to f16 or bf16
// (kept as floats); q8_0 blocks with their sums. Conversion is per row and per 32-element
// block, so a row's bytes never depend on other rows (batch invariance).
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/quant/formats.h"

namespace daisy::kernels {

// Layout of one converted row of `cols` elements:
//   kF32, kF16Rounded, kBF16Rounded: float values[cols]
//   kQ8: int8_t qs[cols] | int32_t block_sum[cols / 32] | float d[cols / 32]
//   kQ8_1: the kQ8 row | float s[cols / 32]  (s = f16-rounded d * block_sum, llama.cpp's q8_1)
//   kQ8K: int8_t qs[cols] | int16_t sum16[cols / 16] | int16_t sum32[cols / 32] |
//     float d[cols / 256]  (ggml's q8_K: x = d * q, the largest magnitude of each 256 elements
//     at q = -127; the sums of q per 16 and per 32 elements, int16 so that two neighbours are
//     one 32-bit pmaddwd operand)
// block_sum[b] is the sum of block b's 32 qs: integer kernels multiply offset (unsigned) weight
// codes by qs and start from -offset * block_sum, which gives sum(q_w * q_x) exactly.
// Q8: d = amax / 127 rounded to f16, q = round-to-nearest-even(x * 127 / amax), as llama.cpp's
// x86 quantize_row_q8_0.
struct ActFormat {
  ActType type;
  const char* name;
  size_t (*row_bytes)(int64_t cols);
  // Converts `x` (cols floats) into `out` (row_bytes bytes, 64-byte aligned recommended).
  void (*convert_row)(const float* x, int64_t cols, void* out);
};
const ActFormat& FormatOf(ActType type);

// The activation format of `type`'s matrix kernels, and its row bytes / conversion.
inline ActType ActTypeOf(WeightType type) { return FormatOf(type).act; }
size_t ActRowBytes(WeightType type, int64_t cols);
void ConvertActRow(WeightType type, const float* x, int64_t cols, void* out);
// The same conversion by the scalar code whatever the CPU (ConvertActRow takes AVX-512 where
// the CPU has it, with the same bytes: tests compare the two).
void ConvertActRowScalar(WeightType type, const float* x, int64_t cols, void* out);

struct ActQ8View {
  const int8_t* qs;
  const int32_t* block_sum;
  const float* d;
  const float* s;  // a kQ8_1 row's rounded sums; meaningless for kQ8
};
struct ActQ8KView {
  const int8_t* qs;
  const int16_t* sum16;
  const int16_t* sum32;
  const float* d;
};
// Not inline on purpose: ISA-specific files call it, and an inline copy compiled with AVX flags
// could be the one the linker keeps for everybody.
ActQ8View ViewActQ8(const void* row, int64_t cols);
ActQ8KView ViewActQ8K(const void* row, int64_t cols);

}  // namespace daisy::kernels
