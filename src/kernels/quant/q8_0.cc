#include "kernels/quant/q8_0.h"

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
    for (int j = 0; j < kQ8BlockSize; ++j) {
      // Finite weights give |x * id| <= 127; a NaN or infinity becomes 0 instead of an undefined conversion.
      const float v = x[j] * id;
      y[b].qs[j] = std::isfinite(v) ? static_cast<int8_t>(std::roundf(v)) : 0;
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

void QuantizeQ8_0(const float* x, void* blocks, int64_t n) {
  QuantizeRowQ8_0(x, static_cast<BlockQ8_0*>(blocks), static_cast<size_t>(n));
}

void DequantizeQ8_0(const void* blocks, float* y, int64_t n) {
  DequantizeRowQ8_0(static_cast<const BlockQ8_0*>(blocks), y, static_cast<size_t>(n));
}

void PackBlockQ8_0(const uint8_t* const blocks[kRowGroup], uint8_t* data, uint16_t* scales) {
  for (int l = 0; l < kRowGroup; ++l) {
    const auto* block = reinterpret_cast<const BlockQ8_0*>(blocks[l]);
    scales[l] = block != nullptr ? block->d : 0;  // a padding row: f16 +0, values 0
    for (int e = 0; e < kQBlock; ++e) {
      const int q = block != nullptr ? block->qs[e] : 0;
      data[(e / kGroupStep) * 64 + l * kGroupStep + e % kGroupStep] = static_cast<uint8_t>(q + 128);
    }
  }
}

void UnpackBlockQ8_0(const uint8_t* data, int8_t q[kRowGroup][kQBlock]) {
  for (int l = 0; l < kRowGroup; ++l) {
    for (int e = 0; e < kQBlock; ++e) {
      q[l][e] = static_cast<int8_t>(static_cast<int>(data[(e / kGroupStep) * 64 + l * kGroupStep + e % kGroupStep]) - 128);
    }
  }
}

}  // namespace daisy::kernels
