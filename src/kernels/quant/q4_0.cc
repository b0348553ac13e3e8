#include "kernels/quant/q4_0.h"

#include <algorithm>
#include <cmath>

#include "base/check.h"
#include "kernels/quant/float_formats.h"

namespace daisy::kernels {

void QuantizeRowQ4_0(const float* x, BlockQ4_0* y, size_t n) {
  DAISY_CHECK_EQ(n % kQ4BlockSize, 0u);
  for (size_t b = 0; b < n / kQ4BlockSize; ++b, x += kQ4BlockSize) {
    // The value of largest magnitude, with its sign, maps to -8 exactly.
    float amax = 0.f, max = 0.f;
    for (int j = 0; j < kQ4BlockSize; ++j) {
      if (amax < std::fabs(x[j])) {
        amax = std::fabs(x[j]);
        max = x[j];
      }
    }
    const float d = max / -8.f;
    const float id = d != 0.f ? 1.f / d : 0.f;
    y[b].d = Fp32ToFp16(d);
    for (int j = 0; j < kQ4BlockSize / 2; ++j) {
      const float x0 = x[j] * id;
      const float x1 = x[j + kQ4BlockSize / 2] * id;
      const uint8_t q0 = static_cast<uint8_t>(std::min<int>(15, static_cast<int8_t>(x0 + 8.5f)));
      const uint8_t q1 = static_cast<uint8_t>(std::min<int>(15, static_cast<int8_t>(x1 + 8.5f)));
      y[b].qs[j] = static_cast<uint8_t>(q0 | (q1 << 4));
    }
  }
}

void DequantizeRowQ4_0(const BlockQ4_0* x, float* y, size_t n) {
  DAISY_CHECK_EQ(n % kQ4BlockSize, 0u);
  for (size_t b = 0; b < n / kQ4BlockSize; ++b) {
    const float d = Fp16ToFp32(x[b].d);
    for (int j = 0; j < kQ4BlockSize / 2; ++j) {
      y[b * kQ4BlockSize + j] = d * ((x[b].qs[j] & 0x0f) - 8);
      y[b * kQ4BlockSize + j + kQ4BlockSize / 2] = d * ((x[b].qs[j] >> 4) - 8);
    }
  }
}

void QuantizeQ4_0(const float* x, void* blocks, int64_t n) {
  QuantizeRowQ4_0(x, static_cast<BlockQ4_0*>(blocks), static_cast<size_t>(n));
}

void DequantizeQ4_0(const void* blocks, float* y, int64_t n) {
  DequantizeRowQ4_0(static_cast<const BlockQ4_0*>(blocks), y, static_cast<size_t>(n));
}

namespace {
// The 4-bit code (q + 8) of element e of a GGUF block; 8 (q = 0) for a padding row.
int Code(const BlockQ4_0* block, int e) {
  if (block == nullptr) return 8;
  const uint8_t byte = block->qs[e % 16];
  return e < 16 ? (byte & 0x0f) : (byte >> 4);
}
}  // namespace

void PackBlockQ4_0(const uint8_t* const blocks[kRowGroup], uint8_t* data, uint16_t* scales) {
  const BlockQ4_0* rows[kRowGroup];
  for (int l = 0; l < kRowGroup; ++l) {
    rows[l] = reinterpret_cast<const BlockQ4_0*>(blocks[l]);
    scales[l] = rows[l] != nullptr ? rows[l]->d : 0;  // a padding row: f16 +0
  }
  for (int e = 0; e < kQBlock; ++e) {
    for (int k = 0; k < kRowGroup / 2; ++k) {
      const int lo = Code(rows[k], e), hi = Code(rows[k + 8], e);
      data[(e / kGroupStep) * 32 + k * kGroupStep + e % kGroupStep] = static_cast<uint8_t>(lo | (hi << 4));
    }
  }
}

void UnpackBlockQ4_0(const uint8_t* data, int8_t q[kRowGroup][kQBlock]) {
  for (int l = 0; l < kRowGroup; ++l) {
    for (int e = 0; e < kQBlock; ++e) {
      const uint8_t byte = data[(e / kGroupStep) * 32 + (l % 8) * kGroupStep + e % kGroupStep];
      q[l][e] = static_cast<int8_t>((l < 8 ? (byte & 0x0f) : (byte >> 4)) - 8);
    }
  }
}

}  // namespace daisy::kernels
