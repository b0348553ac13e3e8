// The scalar reference of the element-wise ops (ops.h): plain loops in the order a reader
// expects, and the arithmetic every SIMD table reproduces.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>

#include "kernels/attention_impl.h"
#include "kernels/kernel_table.h"
#include "kernels/quant/float_formats.h"

namespace daisy::kernels {

void RopeAngles(int32_t pos, int head_dim, float theta_base, const float* factors, float freq_scale,
                float mscale, float* cs) {
  const float theta_scale = std::pow(theta_base, -2.0f / static_cast<float>(head_dim));
  float theta = static_cast<float>(pos);
  for (int i = 0; i < head_dim / 2; ++i) {
    const float t = freq_scale * (factors != nullptr ? theta / factors[i] : theta);
    cs[2 * i] = std::cos(t) * mscale;
    cs[2 * i + 1] = std::sin(t) * mscale;
    theta *= theta_scale;
  }
}

namespace {
// ggml's tanh GELU in float, and its f16 table over every f16 input.
float Gelu(float x) {
  constexpr float kCoefA = 0.044715f;
  constexpr float kSqrt2OverPi = 0.79788456080286535587989211986876f;
  return 0.5f * x * (1.0f + std::tanh(kSqrt2OverPi * x * (1.0f + kCoefA * x * x)));
}

const std::array<uint16_t, 65536>& GeluTable() {
  static const std::array<uint16_t, 65536> table = [] {
    std::array<uint16_t, 65536> t{};
    for (uint32_t i = 0; i < t.size(); ++i) t[i] = Fp32ToFp16(Gelu(Fp16ToFp32(static_cast<uint16_t>(i))));
    return t;
  }();
  return table;
}
}  // namespace

void GeluMul(float* gate, const float* up, int64_t n) {
  const std::array<uint16_t, 65536>& table = GeluTable();
  for (int64_t i = 0; i < n; ++i) {
    const float x = gate[i];
    if (x <= -10.0f) {
      gate[i] = 0.0f;
    } else if (x >= 10.0f) {
      gate[i] = x * up[i];
    } else {
      gate[i] = Fp16ToFp32(table[Fp32ToFp16(x)]) * up[i];
    }
  }
}

namespace ref {
namespace {

void RmsNorm(const float* x, const float* w, int64_t d, float eps, float* y) {
  // As ggml: squares summed in double, mean and scale in float.
  double sum = 0.0;
  for (int64_t i = 0; i < d; ++i) sum += static_cast<double>(x[i] * x[i]);
  const float mean = static_cast<float>(sum / static_cast<double>(d));
  const float scale = 1.0f / std::sqrt(mean + eps);
  for (int64_t i = 0; i < d; ++i) y[i] = (x[i] * scale) * w[i];
}

void Rope(float* v, int n_heads, int head_dim, const float* cs, RopeMode mode) {
  const int half = head_dim / 2;
  for (int h = 0; h < n_heads; ++h) {
    float* p = v + static_cast<int64_t>(h) * head_dim;
    for (int i = 0; i < half; ++i) {
      // The pair (a, b) of rotation i: adjacent (kNorm) or half a head apart (kNeox).
      float* a = mode == RopeMode::kNorm ? p + 2 * i : p + i;
      float* b = mode == RopeMode::kNorm ? p + 2 * i + 1 : p + i + half;
      const float x0 = *a, x1 = *b, c = cs[2 * i], s = cs[2 * i + 1];
      *a = x0 * c - x1 * s;
      *b = x0 * s + x1 * c;
    }
  }
}

void SiluMul(float* gate, const float* up, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    gate[i] = (g / (1.0f + std::exp(-g))) * up[i];
  }
}

void Add(float* y, const float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += x[i];
}

float Dot(const float* a, const float* b, int64_t n) {
  float sum = 0.f;
  for (int64_t i = 0; i < n; ++i) sum += a[i] * b[i];
  return sum;
}

void Axpy(float a, const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += a * x[i];
}

}  // namespace

namespace {
void Attention(const AttentionArgs& a) { AttentionWith<Dot, Axpy>(a); }
}  // namespace

extern constinit const OpKernels kOps = {RmsNorm, Rope, SiluMul, GeluMul, Add, Dot, Axpy, Attention, EachKeyDot<Dot>, EachRowAxpy<Axpy>,
                                                ExpSumInOrder, LogSumExpInOrder};

}  // namespace ref
}  // namespace daisy::kernels
