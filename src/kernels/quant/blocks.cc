#include "kernels/quant/blocks.h"

#include <algorithm>
#include <cmath>

#include "base/check.h"
#include "kernels/quant/float_formats.h"

namespace daisy::kernels {

void QuantizeRowQ8_0(const float* x, BlockQ8_0* y, size_t n) {
  DAISY_CHECK_EQ(n % kQ8BlockSize, 0u);
  for (size_t b = 0; b < n / kQ8BlockSize; ++b, x += kQ8BlockSize) {
    float amax = 0.f;
    for (int j = 0; j < kQ8BlockSize; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float d = amax / 127.f;
    const float id = d != 0.f ? 1.f / d : 0.f;
    y[b].d = Fp32ToFp16(d);
    for (int j = 0; j < kQ8BlockSize; ++j) y[b].qs[j] = static_cast<int8_t>(std::roundf(x[j] * id));
  }
}

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

void DequantizeRowQ8_0(const BlockQ8_0* x, float* y, size_t n) {
  DAISY_CHECK_EQ(n % kQ8BlockSize, 0u);
  for (size_t b = 0; b < n / kQ8BlockSize; ++b) {
    const float d = Fp16ToFp32(x[b].d);
    for (int j = 0; j < kQ8BlockSize; ++j) y[b * kQ8BlockSize + j] = d * x[b].qs[j];
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

}  // namespace daisy::kernels
