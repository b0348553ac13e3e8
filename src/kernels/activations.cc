#include "kernels/activations.h"

#include <cmath>
#include <cstring>

#include "kernels/quant/float_formats.h"

namespace daisy::kernels {

size_t ActRowBytes(WeightType type, int64_t cols) {
  switch (type) {
    case WeightType::kF32:
    case WeightType::kF16:
    case WeightType::kBF16: return static_cast<size_t>(cols) * sizeof(float);
    case WeightType::kQ8_0:
    case WeightType::kQ4_0:
      // qs (pc) + lane biases (pc / 4 int32 = pc bytes) + scales (pc / 32 floats).
      return static_cast<size_t>(PaddedBlocks(cols)) * (2 * kQBlock + sizeof(float));
  }
  return 0;
}

ActQ8View ViewActQ8(const void* row, int64_t cols) {
  const auto* p = static_cast<const uint8_t*>(row);
  const int64_t pc = PaddedBlocks(cols) * kQBlock;
  return {reinterpret_cast<const int8_t*>(p), reinterpret_cast<const int32_t*>(p + pc),
          reinterpret_cast<const float*>(p + 2 * pc)};
}

void ConvertActRow(WeightType type, const float* x, int64_t cols, void* out) {
  switch (type) {
    case WeightType::kF32: std::memcpy(out, x, cols * sizeof(float)); return;
    case WeightType::kF16: {
      float* y = static_cast<float*>(out);
      for (int64_t i = 0; i < cols; ++i) y[i] = Fp16ToFp32(Fp32ToFp16(x[i]));
      return;
    }
    case WeightType::kBF16: {
      float* y = static_cast<float*>(out);
      for (int64_t i = 0; i < cols; ++i) y[i] = Bf16ToFp32(Fp32ToBf16(x[i]));
      return;
    }
    case WeightType::kQ8_0:
    case WeightType::kQ4_0: break;
  }
  auto* p = static_cast<uint8_t*>(out);
  const int64_t pc = PaddedBlocks(cols) * kQBlock;
  int8_t* qs = reinterpret_cast<int8_t*>(p);
  int32_t* bias = reinterpret_cast<int32_t*>(p + pc);
  float* d = reinterpret_cast<float*>(p + 2 * pc);
  std::memset(qs + cols, 0, pc - cols);
  if (pc > cols) d[pc / kQBlock - 1] = 0.f;
  for (int64_t b = 0; b < cols / kQBlock; ++b) {
    const float* xb = x + b * kQBlock;
    float amax = 0.f;
    for (int j = 0; j < kQBlock; ++j) amax = std::fmax(amax, std::fabs(xb[j]));
    const float scale = amax / 127.f;
    const float inv = amax != 0.f ? 127.f / amax : 0.f;
    d[b] = Fp16ToFp32(Fp32ToFp16(scale));
    for (int j = 0; j < kQBlock; ++j) {
      qs[b * kQBlock + j] = static_cast<int8_t>(std::nearbyint(xb[j] * inv));
    }
  }
  const int32_t factor = type == WeightType::kQ4_0 ? -8 : 0;
  for (int64_t i = 0; i < pc / 4; ++i) {
    bias[i] = factor * (qs[4 * i] + qs[4 * i + 1] + qs[4 * i + 2] + qs[4 * i + 3]);
  }
}

}  // namespace daisy::kernels
