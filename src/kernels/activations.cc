#include "kernels/activations.h"

#include <cmath>
#include <cstring>

#include "kernels/quant/float_formats.h"

namespace daisy::kernels {
namespace {

size_t FloatRowBytes(int64_t cols) { return static_cast<size_t>(cols) * sizeof(float); }
// qs (cols) + block sums (cols / 32 int32) + scales (cols / 32 floats).
size_t Q8RowBytes(int64_t cols) { return static_cast<size_t>(cols) + static_cast<size_t>(cols / kQBlock) * 8; }

void CopyRow(const float* x, int64_t cols, void* out) { std::memcpy(out, x, cols * sizeof(float)); }

void RoundF16Row(const float* x, int64_t cols, void* out) {
  float* y = static_cast<float*>(out);
  for (int64_t i = 0; i < cols; ++i) y[i] = Fp16ToFp32(Fp32ToFp16(x[i]));
}

void RoundBF16Row(const float* x, int64_t cols, void* out) {
  float* y = static_cast<float*>(out);
  for (int64_t i = 0; i < cols; ++i) y[i] = Bf16ToFp32(Fp32ToBf16(x[i]));
}

void Q8Row(const float* x, int64_t cols, void* out) {
  auto* p = static_cast<uint8_t*>(out);
  const int64_t nb = cols / kQBlock;
  int8_t* qs = reinterpret_cast<int8_t*>(p);
  int32_t* sums = reinterpret_cast<int32_t*>(p + cols);
  float* d = reinterpret_cast<float*>(p + cols + nb * 4);
  for (int64_t b = 0; b < nb; ++b) {
    const float* xb = x + b * kQBlock;
    float amax = 0.f;
    for (int j = 0; j < kQBlock; ++j) amax = std::fmax(amax, std::fabs(xb[j]));
    const float scale = amax / 127.f;
    const float inv = amax != 0.f ? 127.f / amax : 0.f;
    d[b] = Fp16ToFp32(Fp32ToFp16(scale));
    int32_t sum = 0;
    for (int j = 0; j < kQBlock; ++j) {
      qs[b * kQBlock + j] = static_cast<int8_t>(std::nearbyint(xb[j] * inv));
      sum += qs[b * kQBlock + j];
    }
    sums[b] = sum;
  }
}

constexpr ActFormat kActFormats[kNumActTypes] = {
    {ActType::kF32, "f32", FloatRowBytes, CopyRow},
    {ActType::kF16Rounded, "f16-rounded", FloatRowBytes, RoundF16Row},
    {ActType::kBF16Rounded, "bf16-rounded", FloatRowBytes, RoundBF16Row},
    {ActType::kQ8, "q8_0+sums", Q8RowBytes, Q8Row},
};

}  // namespace

const ActFormat& FormatOf(ActType type) { return kActFormats[static_cast<int>(type)]; }

size_t ActRowBytes(WeightType type, int64_t cols) { return FormatOf(ActTypeOf(type)).row_bytes(cols); }

void ConvertActRow(WeightType type, const float* x, int64_t cols, void* out) {
  FormatOf(ActTypeOf(type)).convert_row(x, cols, out);
}

ActQ8View ViewActQ8(const void* row, int64_t cols) {
  const auto* p = static_cast<const uint8_t*>(row);
  const int64_t nb = cols / kQBlock;
  return {reinterpret_cast<const int8_t*>(p), reinterpret_cast<const int32_t*>(p + cols),
          reinterpret_cast<const float*>(p + cols + nb * 4)};
}

}  // namespace daisy::kernels
