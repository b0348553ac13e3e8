#include "kernels/weights.h"

#include <cstring>

#include "base/check.h"
#include "kernels/quant/blocks.h"
#include "kernels/quant/float_formats.h"

namespace daisy::kernels {
namespace {
constexpr int kSteps = kQBlock / kGroupStep;  // 8

// Byte offset of (group, block) in the data array.
size_t GroupBlockBytes(WeightType type) { return type == WeightType::kQ8_0 ? 512 : 256; }
}  // namespace

const char* WeightTypeName(WeightType type) {
  switch (type) {
    case WeightType::kF32: return "f32";
    case WeightType::kF16: return "f16";
    case WeightType::kBF16: return "bf16";
    case WeightType::kQ8_0: return "q8_0";
    case WeightType::kQ4_0: return "q4_0";
  }
  return "?";
}

size_t PackedDataBytes(WeightType type, int64_t rows, int64_t cols) {
  switch (type) {
    case WeightType::kF32: return static_cast<size_t>(rows * cols) * 4;
    case WeightType::kF16:
    case WeightType::kBF16: return static_cast<size_t>(rows * cols) * 2;
    case WeightType::kQ8_0:
    case WeightType::kQ4_0:
      return static_cast<size_t>(RowGroups(rows) * (cols / kQBlock)) * GroupBlockBytes(type);
  }
  return 0;
}

size_t PackedScaleBytes(WeightType type, int64_t rows, int64_t cols) {
  if (type != WeightType::kQ8_0 && type != WeightType::kQ4_0) return 0;
  return static_cast<size_t>(RowGroups(rows) * (cols / kQBlock) * kRowGroup) * sizeof(uint16_t);
}

void PackFromGguf(WeightType type, const void* gguf_rows, int64_t rows, int64_t cols, void* data,
                  uint16_t* scales) {
  if (type != WeightType::kQ8_0 && type != WeightType::kQ4_0) {
    std::memcpy(data, gguf_rows, PackedDataBytes(type, rows, cols));
    return;
  }
  DAISY_CHECK_EQ(cols % kQBlock, 0);
  const int64_t nb = cols / kQBlock;
  auto* out = static_cast<uint8_t*>(data);
  const size_t gb_bytes = GroupBlockBytes(type);
  for (int64_t g = 0; g < RowGroups(rows); ++g) {
    for (int64_t b = 0; b < nb; ++b) {
      uint16_t* s = scales + (g * nb + b) * kRowGroup;
      uint8_t* q = out + (g * nb + b) * gb_bytes;
      // Value q of (row, element e of block b), 0 for padding rows; the row's scale.
      const auto value = [&](int64_t row, int e) -> int {
        if (row >= rows) return 0;
        if (type == WeightType::kQ8_0) {
          return static_cast<const BlockQ8_0*>(gguf_rows)[row * nb + b].qs[e];
        }
        const uint8_t byte = static_cast<const BlockQ4_0*>(gguf_rows)[row * nb + b].qs[e % 16];
        return (e < 16 ? (byte & 0x0f) : (byte >> 4)) - 8;
      };
      for (int l = 0; l < kRowGroup; ++l) {
        const int64_t row = g * kRowGroup + l;
        if (row >= rows) {
          s[l] = 0;  // f16 +0
        } else if (type == WeightType::kQ8_0) {
          s[l] = static_cast<const BlockQ8_0*>(gguf_rows)[row * nb + b].d;
        } else {
          s[l] = static_cast<const BlockQ4_0*>(gguf_rows)[row * nb + b].d;
        }
      }
      for (int st = 0; st < kSteps; ++st) {
        for (int t = 0; t < kGroupStep; ++t) {
          const int e = st * kGroupStep + t;
          if (type == WeightType::kQ8_0) {
            for (int l = 0; l < kRowGroup; ++l) {
              q[st * 64 + l * 4 + t] = static_cast<uint8_t>(value(g * kRowGroup + l, e) + 128);
            }
          } else {
            for (int k = 0; k < 8; ++k) {
              const int lo = value(g * kRowGroup + k, e) + 8;
              const int hi = value(g * kRowGroup + 8 + k, e) + 8;
              q[st * 32 + k * 4 + t] = static_cast<uint8_t>(lo | (hi << 4));
            }
          }
        }
      }
    }
  }
}

int QuantValue(const WeightMatrix& w, int64_t o, int64_t i) {
  const int64_t nb = w.cols / kQBlock, g = o / kRowGroup, l = o % kRowGroup;
  const int64_t b = i / kQBlock, e = i % kQBlock, st = e / kGroupStep, t = e % kGroupStep;
  const auto* q = static_cast<const uint8_t*>(w.data) + (g * nb + b) * GroupBlockBytes(w.type);
  if (w.type == WeightType::kQ8_0) return static_cast<int>(q[st * 64 + l * 4 + t]) - 128;
  const uint8_t byte = q[st * 32 + (l % 8) * 4 + t];
  return (l < 8 ? (byte & 0x0f) : (byte >> 4)) - 8;
}

float QuantScale(const WeightMatrix& w, int64_t o, int64_t block) {
  const int64_t nb = w.cols / kQBlock;
  return Fp16ToFp32(w.scales[((o / kRowGroup) * nb + block) * kRowGroup + o % kRowGroup]);
}

void DequantizeRow(const WeightMatrix& w, int64_t o, float* out) {
  const int64_t n = w.cols;
  switch (w.type) {
    case WeightType::kF32:
      std::memcpy(out, static_cast<const float*>(w.data) + o * n, n * sizeof(float));
      break;
    case WeightType::kF16:
      Fp16ToFp32Row(static_cast<const uint16_t*>(w.data) + o * n, out, n);
      break;
    case WeightType::kBF16:
      Bf16ToFp32Row(static_cast<const uint16_t*>(w.data) + o * n, out, n);
      break;
    case WeightType::kQ8_0:
    case WeightType::kQ4_0:
      for (int64_t i = 0; i < n; ++i) out[i] = QuantScale(w, o, i / kQBlock) * QuantValue(w, o, i);
      break;
  }
}

}  // namespace daisy::kernels
