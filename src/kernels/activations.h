// Activation rows as the matrix kernels read them. Before a matmul, each input row (f32) is
// converted once to what the weight type's dot product consumes, exactly as llama.cpp does
// (its vec_dot_type): f32 for f32 weights; values rounded to f16 or bf16 for f16/bf16 weights
// (kept as floats); q8_0 blocks for q8_0 and q4_0 weights. Conversion is per row and per
// 32-element block, so a row's bytes never depend on other rows (batch invariance).
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/weights.h"

namespace daisy::kernels {

// Layout of one converted row of `cols` elements for weights of `type`:
//   float types: float values[cols]
//   q8 types:    int8_t qs[cols] | int32_t block_sum[cols / 32] | float d[cols / 32]
// block_sum[b] is the sum of block b's 32 qs: integer kernels multiply offset (unsigned) weight
// codes by qs and start from -offset * block_sum, which gives sum(q_w * q_x) exactly.
size_t ActRowBytes(WeightType type, int64_t cols);

// Converts `x` (cols floats) into `out` (ActRowBytes bytes, 64-byte aligned recommended).
// Q8: d = amax / 127 rounded to f16, q = round-to-nearest-even(x * 127 / amax), as
// llama.cpp's x86 quantize_row_q8_0.
void ConvertActRow(WeightType type, const float* x, int64_t cols, void* out);

struct ActQ8View {
  const int8_t* qs;
  const int32_t* block_sum;
  const float* d;
};
// Not inline on purpose: ISA-specific files call it, and an inline copy compiled with AVX flags
// could be the one the linker keeps for everybody.
ActQ8View ViewActQ8(const void* row, int64_t cols);

}  // namespace daisy::kernels
