#include "kernels/weights.h"

#include <cstring>

#include "base/check.h"
#include "kernels/quant/blocks.h"
#include "kernels/quant/float_formats.h"

namespace daisy::kernels {

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
  const size_t n = static_cast<size_t>(rows * cols);
  switch (type) {
    case WeightType::kF32: return n * 4;
    case WeightType::kF16:
    case WeightType::kBF16: return n * 2;
    case WeightType::kQ8_0: return n;
    case WeightType::kQ4_0: return n / 2;
  }
  return 0;
}

size_t PackedScaleBytes(WeightType type, int64_t rows, int64_t cols) {
  if (type != WeightType::kQ8_0 && type != WeightType::kQ4_0) return 0;
  return static_cast<size_t>(rows * (cols / kQBlock)) * sizeof(float);
}

void PackFromGguf(WeightType type, const void* gguf_rows, int64_t rows, int64_t cols, void* data,
                  float* scales) {
  if (type != WeightType::kQ8_0 && type != WeightType::kQ4_0) {
    std::memcpy(data, gguf_rows, PackedDataBytes(type, rows, cols));
    return;
  }
  DAISY_CHECK_EQ(cols % kQBlock, 0);
  const size_t n_blocks = static_cast<size_t>(rows * (cols / kQBlock));
  if (type == WeightType::kQ8_0) {
    const auto* in = static_cast<const BlockQ8_0*>(gguf_rows);
    auto* q = static_cast<int8_t*>(data);
    for (size_t b = 0; b < n_blocks; ++b) {
      scales[b] = Fp16ToFp32(in[b].d);
      std::memcpy(q + b * kQBlock, in[b].qs, kQBlock);
    }
  } else {
    const auto* in = static_cast<const BlockQ4_0*>(gguf_rows);
    auto* q = static_cast<uint8_t*>(data);
    for (size_t b = 0; b < n_blocks; ++b) {
      scales[b] = Fp16ToFp32(in[b].d);
      std::memcpy(q + b * (kQBlock / 2), in[b].qs, kQBlock / 2);
    }
  }
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
    case WeightType::kQ8_0: {
      const int8_t* q = static_cast<const int8_t*>(w.data) + o * n;
      const float* s = w.scales + o * (n / kQBlock);
      for (int64_t i = 0; i < n; ++i) out[i] = s[i / kQBlock] * q[i];
      break;
    }
    case WeightType::kQ4_0: {
      const uint8_t* q = static_cast<const uint8_t*>(w.data) + o * (n / 2);
      const float* s = w.scales + o * (n / kQBlock);
      for (int64_t b = 0; b < n / kQBlock; ++b) {
        for (int j = 0; j < kQBlock / 2; ++j) {
          const uint8_t byte = q[b * 16 + j];
          out[b * kQBlock + j] = s[b] * ((byte & 0x0f) - 8);
          out[b * kQBlock + j + 16] = s[b] * ((byte >> 4) - 8);
        }
      }
      break;
    }
  }
}

}  // namespace daisy::kernels
