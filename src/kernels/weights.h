// Weight matrices in daisy's packed layout: the one layout every kernel path (scalar, AVX2,
// AVX-512) reads directly. Knows no model and no file format.
#pragma once

#include <cstddef>
#include <cstdint>

namespace daisy::kernels {

enum class WeightType : uint8_t { kF32 = 0, kF16 = 1, kBF16 = 2, kQ8_0 = 3, kQ4_0 = 4 };
inline constexpr int kNumWeightTypes = 5;
inline constexpr int kQBlock = 32;  // elements per quantisation block (q8_0, q4_0)

const char* WeightTypeName(WeightType type);

// A [rows, cols] matrix; row o is the o-th output's weights. Layouts:
//   kF32:  float    data[rows][cols]
//   kF16:  uint16_t data[rows][cols]   (IEEE half)
//   kBF16: uint16_t data[rows][cols]
//   kQ8_0: int8_t   data[rows][nbp * 32]        float scales[rows][nbp]
//   kQ4_0: uint8_t  data[rows][nbp * 16]        float scales[rows][nbp]
// where nbp = PaddedBlocks(cols): the row's 32-element blocks rounded up to an even count (a
// padding block has zero quants — nibble 8 for q4_0 — and scale 0, so it adds exactly 0).
// q4_0 stores blocks in pairs: for blocks 2p and 2p+1, 32 bytes where byte k = element k of
// block 2p (low nibble) | element k of block 2p+1 (high nibble); value = scale * (nibble - 8).
// So one 32-byte load and a shift/mask give 64 weights in element order. Quantised scales are
// the f16 values widened to float (exact), kept apart from the quants so SIMD loads stay
// aligned. A view: owns nothing.
struct WeightMatrix {
  WeightType type = WeightType::kF32;
  int64_t rows = 0;
  int64_t cols = 0;
  const void* data = nullptr;
  const float* scales = nullptr;  // quantised types only
};

// 32-element blocks per row rounded up to an even number (quantised layouts).
inline int64_t PaddedBlocks(int64_t cols) { return (cols / kQBlock + 1) / 2 * 2; }

// Bytes of `data` (and of `scales`) for a packed [rows, cols] matrix of `type`.
size_t PackedDataBytes(WeightType type, int64_t rows, int64_t cols);
size_t PackedScaleBytes(WeightType type, int64_t rows, int64_t cols);

// Packs GGUF rows (ggml block_q8_0 / block_q4_0, or plain f32/f16/bf16 values) into the packed
// layout. `gguf_rows` holds `rows` rows of GGUF bytes; `data`/`scales` receive
// PackedDataBytes/PackedScaleBytes. Float types are a plain copy.
void PackFromGguf(WeightType type, const void* gguf_rows, int64_t rows, int64_t cols, void* data,
                  float* scales);

// The 4-bit code (0..15) of element i of a packed q4_0 row.
int Q4Nibble(const uint8_t* row, int64_t i);

// Row `o` of the matrix as floats (the reference dequantisation); `out` has cols entries.
void DequantizeRow(const WeightMatrix& w, int64_t o, float* out);

}  // namespace daisy::kernels
