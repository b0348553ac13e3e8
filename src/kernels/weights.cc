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
    case WeightType::kQ8_0: return static_cast<size_t>(rows * PaddedBlocks(cols)) * kQBlock;
    case WeightType::kQ4_0: return static_cast<size_t>(rows * PaddedBlocks(cols)) * kQBlock / 2;
  }
  return 0;
}

size_t PackedScaleBytes(WeightType type, int64_t rows, int64_t cols) {
  if (type != WeightType::kQ8_0 && type != WeightType::kQ4_0) return 0;
  return static_cast<size_t>(rows * PaddedBlocks(cols)) * sizeof(float);
}

void PackFromGguf(WeightType type, const void* gguf_rows, int64_t rows, int64_t cols, void* data,
                  float* scales) {
  if (type != WeightType::kQ8_0 && type != WeightType::kQ4_0) {
    std::memcpy(data, gguf_rows, PackedDataBytes(type, rows, cols));
    return;
  }
  DAISY_CHECK_EQ(cols % kQBlock, 0);
  const int64_t nb = cols / kQBlock, nbp = PaddedBlocks(cols);
  for (int64_t r = 0; r < rows; ++r) {
    float* s = scales + r * nbp;
    s[nbp - 1] = 0.f;  // the padding block, if any (overwritten when the row has nbp blocks)
    if (type == WeightType::kQ8_0) {
      const auto* in = static_cast<const BlockQ8_0*>(gguf_rows) + r * nb;
      int8_t* q = static_cast<int8_t*>(data) + r * nbp * kQBlock;
      std::memset(q + nb * kQBlock, 0, (nbp - nb) * kQBlock);
      for (int64_t b = 0; b < nb; ++b) {
        s[b] = Fp16ToFp32(in[b].d);
        std::memcpy(q + b * kQBlock, in[b].qs, kQBlock);
      }
    } else {
      const auto* in = static_cast<const BlockQ4_0*>(gguf_rows) + r * nb;
      uint8_t* q = static_cast<uint8_t*>(data) + r * nbp * (kQBlock / 2);
      for (int64_t b = 0; b < nb; ++b) s[b] = Fp16ToFp32(in[b].d);
      for (int64_t p = 0; p < nbp / 2; ++p) {
        // Element k of a GGUF block: low nibble of byte k (k < 16) or high nibble of byte k-16.
        const auto nibble = [&](int64_t b, int k) -> uint8_t {
          if (b >= nb) return 8;  // padding: value 0
          const uint8_t byte = in[b].qs[k % 16];
          return k < 16 ? (byte & 0x0f) : (byte >> 4);
        };
        for (int k = 0; k < kQBlock; ++k) {
          q[p * kQBlock + k] = static_cast<uint8_t>(nibble(2 * p, k) | (nibble(2 * p + 1, k) << 4));
        }
      }
    }
  }
}

int Q4Nibble(const uint8_t* row, int64_t i) {
  const int64_t b = i / kQBlock, k = i % kQBlock;
  const uint8_t byte = row[(b / 2) * kQBlock + k];
  return (b % 2 == 0) ? (byte & 0x0f) : (byte >> 4);
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
      const int64_t nbp = PaddedBlocks(n);
      const int8_t* q = static_cast<const int8_t*>(w.data) + o * nbp * kQBlock;
      const float* s = w.scales + o * nbp;
      for (int64_t i = 0; i < n; ++i) out[i] = s[i / kQBlock] * q[i];
      break;
    }
    case WeightType::kQ4_0: {
      const int64_t nbp = PaddedBlocks(n);
      const uint8_t* q = static_cast<const uint8_t*>(w.data) + o * nbp * (kQBlock / 2);
      const float* s = w.scales + o * nbp;
      for (int64_t i = 0; i < n; ++i) out[i] = s[i / kQBlock] * (Q4Nibble(q, i) - 8);
      break;
    }
  }
}

}  // namespace daisy::kernels
