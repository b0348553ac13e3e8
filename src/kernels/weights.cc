#include "kernels/weights.h"

#include <algorithm>
#include <cstring>

#include "base/check.h"
#include "base/strings.h"
#include "kernels/quant/float_formats.h"
#include "kernels/quant/int_layout.h"

namespace daisy::kernels {

size_t PackedDataBytes(WeightType type, int64_t rows, int64_t cols) {
  const WeightFormat& f = FormatOf(type);
  if (!f.packed) return GgufBytes(type, rows, cols);
  return static_cast<size_t>(RowGroups(rows) * (cols / f.block_elems)) * f.group_block_bytes;
}

size_t PackedScaleBytes(WeightType type, int64_t rows, int64_t cols) {
  const WeightFormat& f = FormatOf(type);
  if (!f.packed) return 0;
  return static_cast<size_t>(RowGroups(rows) * (cols / f.block_elems) * f.group_scales) * sizeof(uint16_t);
}

size_t GgufBytes(WeightType type, int64_t rows, int64_t cols) {
  const WeightFormat& f = FormatOf(type);
  return static_cast<size_t>(rows) * static_cast<size_t>(cols / f.block_elems) * f.block_bytes;
}

namespace {

// Packs row group g of the GGUF rows (f packed, nb blocks a row).
void PackGroup(const WeightFormat& f, const uint8_t* src, int64_t rows, int64_t nb, int64_t g, uint8_t* out,
               uint16_t* scales) {
  const size_t row_bytes = static_cast<size_t>(nb) * f.block_bytes;
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* blocks[kRowGroup];
    for (int l = 0; l < kRowGroup; ++l) {
      const int64_t row = g * kRowGroup + l;
      blocks[l] = row < rows ? src + row * row_bytes + b * f.block_bytes : nullptr;
    }
    f.pack_block(blocks, out + (g * nb + b) * f.group_block_bytes, scales + (g * nb + b) * f.group_scales);
  }
}

}  // namespace

void PackFromGguf(WeightType type, const void* gguf_rows, int64_t rows, int64_t cols, void* data,
                  uint16_t* scales) {
  const WeightFormat& f = FormatOf(type);
  if (!f.packed) {
    std::memcpy(data, gguf_rows, PackedDataBytes(type, rows, cols));
    return;
  }
  DAISY_CHECK_EQ(cols % f.block_elems, 0);
  const int64_t nb = cols / f.block_elems;
  for (int64_t g = 0; g < RowGroups(rows); ++g) {
    PackGroup(f, static_cast<const uint8_t*>(gguf_rows), rows, nb, g, static_cast<uint8_t*>(data), scales);
  }
}

std::optional<BadScale> CheckAndPackFromGguf(WeightType type, const void* gguf_rows, int64_t rows, int64_t cols,
                                             void* data, uint16_t* scales) {
  const WeightFormat& f = FormatOf(type);
  if (!f.packed) {
    PackFromGguf(type, gguf_rows, rows, cols, data, scales);  // float rows: no scales to check
    return std::nullopt;
  }
  DAISY_CHECK_EQ(cols % f.block_elems, 0);
  const int64_t nb = cols / f.block_elems;
  const auto* src = static_cast<const uint8_t*>(gguf_rows);
  for (int64_t g = 0; g < RowGroups(rows); ++g) {
    // The group's rows are consecutive in the file: their blocks, in row order, are one range.
    const int64_t first = g * kRowGroup * nb;
    const int64_t n = (std::min<int64_t>(rows, (g + 1) * kRowGroup) - g * kRowGroup) * nb;
    if (auto bad = FindBadScale(type, src + first * f.block_bytes, n)) {
      bad->block += first;
      return bad;
    }
    PackGroup(f, src, rows, nb, g, static_cast<uint8_t*>(data), scales);
  }
  return std::nullopt;
}

std::optional<BadScale> FindBadScale(WeightType type, const void* gguf_blocks, int64_t n_blocks) {
  // Byte offsets of the f16 scales in each format's block (quant/q8_0.h, q4_0.h, blocks.h).
  struct Field {
    int offset;
    const char* name;
  };
  Field fields[2];
  int n = 0;
  switch (type) {
    case WeightType::kQ8_0:
    case WeightType::kQ4_0:
    case WeightType::kQ5_0:
    case WeightType::kIq4Nl:
    case WeightType::kIq4Xs: fields[n++] = {0, "d"}; break;
    case WeightType::kQ4_1:
    case WeightType::kQ5_1:
      fields[n++] = {0, "d"};
      fields[n++] = {2, "m"};
      break;
    case WeightType::kQ4K:
    case WeightType::kQ5K:
      fields[n++] = {0, "d"};
      fields[n++] = {2, "dmin"};
      break;
    case WeightType::kQ2K:
      fields[n++] = {80, "d"};
      fields[n++] = {82, "dmin"};
      break;
    case WeightType::kQ3K: fields[n++] = {108, "d"}; break;
    case WeightType::kQ6K: fields[n++] = {208, "d"}; break;
    default: return std::nullopt;
  }
  const int bytes = FormatOf(type).block_bytes;
  const auto* p = static_cast<const uint8_t*>(gguf_blocks);
  for (int64_t b = 0; b < n_blocks; ++b, p += bytes) {
    for (int i = 0; i < n; ++i) {
      uint16_t h;
      std::memcpy(&h, p + fields[i].offset, 2);
      if ((h & 0x7c00) == 0x7c00) return BadScale{b, fields[i].name, h};  // exponent all ones
    }
  }
  return std::nullopt;
}

std::string DescribeBadScale(const BadScale& bad, int64_t row_blocks) {
  return StrFormat("block %lld of row %lld has a scale %s that is not a finite number (f16 0x%04x)",
                   static_cast<long long>(bad.block % row_blocks), static_cast<long long>(bad.block / row_blocks),
                   bad.field, bad.bits);
}

void DequantizeRow(const WeightMatrix& w, int64_t o, float* out) {
  const WeightFormat& f = FormatOf(w.type);
  if (!f.packed) {
    const size_t row_bytes = GgufBytes(w.type, 1, w.cols);
    f.dequantize_row(static_cast<const uint8_t*>(w.data) + o * row_bytes, out, w.cols);
    return;
  }
  const int64_t nb = w.cols / f.block_elems, g = o / kRowGroup, l = o % kRowGroup;
  const auto* data = static_cast<const uint8_t*>(w.data);
  if (f.layout != nullptr) {
    RowBlock row;
    for (int64_t b = 0; b < nb; ++b) {
      UnpackIntRow(*f.layout, data + (g * nb + b) * f.group_block_bytes, w.scales + (g * nb + b) * f.group_scales,
                   static_cast<int>(l), row);
      DequantizeRowBlock(*f.layout, row, out + b * f.block_elems);
    }
    return;
  }
  int8_t q[kRowGroup][kQBlock];
  for (int64_t b = 0; b < nb; ++b) {
    f.unpack_block(data + (g * nb + b) * f.group_block_bytes, q);
    const float scale = Fp16ToFp32(w.scales[(g * nb + b) * kRowGroup + l]);
    for (int e = 0; e < f.block_elems; ++e) out[b * f.block_elems + e] = scale * q[l][e];
  }
}

}  // namespace daisy::kernels
