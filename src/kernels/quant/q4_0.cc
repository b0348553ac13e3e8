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

void PackBlockQ4_0(const uint8_t* const blocks[kRowGroup], uint8_t* data, uint16_t* scales) {
  // A padding row's codes: 8 (q = 0) in both nibbles of every byte.
  static constexpr uint8_t kPadding[kQ4BlockSize / 2] = {0x88, 0x88, 0x88, 0x88, 0x88, 0x88, 0x88, 0x88,
                                                         0x88, 0x88, 0x88, 0x88, 0x88, 0x88, 0x88, 0x88};
  const uint8_t* qs[kRowGroup];
  for (int l = 0; l < kRowGroup; ++l) {
    const auto* row = reinterpret_cast<const BlockQ4_0*>(blocks[l]);
    scales[l] = row != nullptr ? row->d : 0;  // a padding row: f16 +0
    qs[l] = row != nullptr ? row->qs : kPadding;
  }
  // GGUF byte j of a row holds element j (low nibble) and element j + 16 (high nibble). The
  // packed byte of element e for rows k and k + 8 is at (e / kGroupStep) * 32 + k * kGroupStep +
  // e % kGroupStep: row k's code in the low nibble, row k + 8's in the high one. Byte by byte
  // rather than element by element (loading an 8B q4_0 model spent 39% of its time here).
  for (int k = 0; k < kRowGroup / 2; ++k) {
    const uint8_t* a = qs[k];
    const uint8_t* b = qs[k + 8];
    for (int j = 0; j < kQ4BlockSize / 2; ++j) {
      const int at = (j / kGroupStep) * 32 + k * kGroupStep + j % kGroupStep;
      data[at] = static_cast<uint8_t>((a[j] & 0x0f) | (b[j] << 4));
      data[at + (16 / kGroupStep) * 32] = static_cast<uint8_t>((a[j] >> 4) | (b[j] & 0xf0));
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
