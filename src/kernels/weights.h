// Weight matrices in daisy's packed layout: the one layout every kernel path (scalar, AVX2,
// AVX-512) reads directly. Which types are packed, and how, is the format table's business
// (quant/formats.h); this file is the generic part. Knows no model and no file format.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "kernels/quant/formats.h"

namespace daisy::kernels {

// A [rows, cols] matrix; row o is the o-th output's weights. Layouts:
//   float formats (f32, f16, bf16): the GGUF rows as they are, data[rows][cols].
//   packed formats: rows interleaved in groups of 16 (the last group padded with zero rows),
//     blocks of the format's GGUF block size:
//     scales: f16 [groups][blocks][group_scales]  (q8_0, q4_0: the 16 rows' scales as GGUF
//             stores them; the integer family: d[16] and, with a second scale, e[16])
//     data:   [groups][blocks] of group_block_bytes each, in the format's own step layout
//             (quant/q8_0.h, quant/q4_0.h, quant/int_layout.h).
// One step is one multiply-accumulate instruction for 16 rows at once (dot of 4 bytes per
// 32-bit lane), and the steps of a block share one scale per row, so a block costs one
// integer-to-float conversion per 16 outputs. A view: owns nothing.
struct WeightMatrix {
  WeightType type = WeightType::kF32;
  int64_t rows = 0;
  int64_t cols = 0;
  const void* data = nullptr;
  const uint16_t* scales = nullptr;  // packed types only: f16 bits
};

inline int64_t RowGroups(int64_t rows) { return (rows + kRowGroup - 1) / kRowGroup; }

// Bytes of `data` (and of `scales`) for a packed [rows, cols] matrix of `type`; for a float
// type, the plain rows (and no scales).
size_t PackedDataBytes(WeightType type, int64_t rows, int64_t cols);
size_t PackedScaleBytes(WeightType type, int64_t rows, int64_t cols);
// Bytes of `rows` GGUF rows of `cols` elements.
size_t GgufBytes(WeightType type, int64_t rows, int64_t cols);

// Packs GGUF rows into the packed layout. `gguf_rows` holds `rows` rows of GGUF bytes;
// `data`/`scales` receive PackedDataBytes/PackedScaleBytes. Float types are a plain copy.
void PackFromGguf(WeightType type, const void* gguf_rows, int64_t rows, int64_t cols, void* data,
                  uint16_t* scales);

// A GGUF block whose f16 scale is not a finite number (NaN or infinity: every value of the
// block would be NaN), as ggml's validate_row_data checks them.
struct BadScale {
  int64_t block;      // index among the blocks given
  const char* field;  // "d", "dmin", "m"
  uint16_t bits;      // the f16 bits found
};
// The first such block among `n_blocks` GGUF blocks of `type`; nullopt when all are fine (and
// for float types, whose values are not checked).
std::optional<BadScale> FindBadScale(WeightType type, const void* gguf_blocks, int64_t n_blocks);
// "block B of row R has a scale d that is not a finite number (f16 0x7e00)": where `bad` is in a
// matrix of `row_blocks` blocks a row (its `block` counted from the first row's first block).
std::string DescribeBadScale(const BadScale& bad, int64_t row_blocks);
// PackFromGguf with FindBadScale's check in the same pass: each group of rows is checked just
// before it is packed (one read of the file: loading an 8B model read it twice). On a bad scale,
// the first one in row order (`block` counts from the first row's first block, as FindBadScale's
// over the whole matrix), and the packing stops there.
std::optional<BadScale> CheckAndPackFromGguf(WeightType type, const void* gguf_rows, int64_t rows, int64_t cols,
                                             void* data, uint16_t* scales);

// Row `o` of the matrix as floats (the reference dequantisation); `out` has cols entries.
void DequantizeRow(const WeightMatrix& w, int64_t o, float* out);

}  // namespace daisy::kernels
