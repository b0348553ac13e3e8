// Weight matrices in daisy's packed layout: the one layout every kernel path (scalar, AVX2,
// AVX-512) reads directly. Knows no model and no file format.
#pragma once

#include <cstddef>
#include <cstdint>

namespace daisy::kernels {

enum class WeightType : uint8_t { kF32 = 0, kF16 = 1, kBF16 = 2, kQ8_0 = 3, kQ4_0 = 4 };
inline constexpr int kNumWeightTypes = 5;
inline constexpr int kQBlock = 32;      // elements per quantisation block (q8_0, q4_0)
inline constexpr int kRowGroup = 16;    // quantised rows are interleaved in groups of 16
inline constexpr int kGroupStep = 4;    // ... 4 consecutive elements per row at a time

const char* WeightTypeName(WeightType type);

// A [rows, cols] matrix; row o is the o-th output's weights. Layouts:
//   kF32:  float    data[rows][cols]
//   kF16:  uint16_t data[rows][cols]   (IEEE half)
//   kBF16: uint16_t data[rows][cols]
//   kQ8_0, kQ4_0: rows interleaved in groups of 16 (the last group padded with zero rows),
//     blocks of 32 elements as in GGUF, value = scale * q:
//     scales: f16 [groups][blocks][16]   (scale of row 16g+l, block b, as GGUF stores it)
//     data, per (group g, block b), eight steps s of 4 elements (elements 4s..4s+3 of the
//     block) for the 16 rows:
//       q8_0: 64 bytes per step, byte 4l+t = q(row 16g+l, element 4s+t) + 128 (as uint8)
//       q4_0: 32 bytes per step, byte 4k+t = code(row 16g+k,   element 4s+t)        (low nibble)
//                                          | code(row 16g+8+k, element 4s+t) << 4   (high nibble)
//             for k in 0..7, code = q + 8 in 0..15.
// One step is one multiply-accumulate instruction for 16 rows at once (dot of 4 bytes per
// 32-bit lane), and the 8 steps of a block share one scale per row, so a block costs one
// integer-to-float conversion per 16 outputs. A view: owns nothing.
struct WeightMatrix {
  WeightType type = WeightType::kF32;
  int64_t rows = 0;
  int64_t cols = 0;
  const void* data = nullptr;
  const uint16_t* scales = nullptr;  // quantised types only: f16 bits
};

inline int64_t RowGroups(int64_t rows) { return (rows + kRowGroup - 1) / kRowGroup; }

// Bytes of `data` (and of `scales`) for a packed [rows, cols] matrix of `type`.
size_t PackedDataBytes(WeightType type, int64_t rows, int64_t cols);
size_t PackedScaleBytes(WeightType type, int64_t rows, int64_t cols);

// Packs GGUF rows (ggml block_q8_0 / block_q4_0, or plain f32/f16/bf16 values) into the packed
// layout. `gguf_rows` holds `rows` rows of GGUF bytes; `data`/`scales` receive
// PackedDataBytes/PackedScaleBytes. Float types are a plain copy.
void PackFromGguf(WeightType type, const void* gguf_rows, int64_t rows, int64_t cols, void* data,
                  uint16_t* scales);

// The integer value q (q8_0: -127..127, q4_0: -8..7) of element i of row o, and its scale.
int QuantValue(const WeightMatrix& w, int64_t o, int64_t i);
float QuantScale(const WeightMatrix& w, int64_t o, int64_t block);

// Row `o` of the matrix as floats (the reference dequantisation); `out` has cols entries.
void DequantizeRow(const WeightMatrix& w, int64_t o, float* out);

}  // namespace daisy::kernels
