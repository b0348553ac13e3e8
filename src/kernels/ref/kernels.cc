// The scalar reference kernels: plain loops in the order a reader expects. Every SIMD table
// is tested against these.
#include <cmath>

#include "kernels/activations.h"
#include "kernels/kernel_table.h"
#include "kernels/quant/float_formats.h"

namespace daisy::kernels {
namespace {

float DotFloatRow(const WeightMatrix& w, int64_t o, const float* x) {
  const int64_t n = w.cols;
  float sum = 0.f;
  switch (w.type) {
    case WeightType::kF32: {
      const float* row = static_cast<const float*>(w.data) + o * n;
      for (int64_t i = 0; i < n; ++i) sum += row[i] * x[i];
      break;
    }
    case WeightType::kF16: {
      const uint16_t* row = static_cast<const uint16_t*>(w.data) + o * n;
      for (int64_t i = 0; i < n; ++i) sum += Fp16ToFp32(row[i]) * x[i];
      break;
    }
    case WeightType::kBF16: {
      const uint16_t* row = static_cast<const uint16_t*>(w.data) + o * n;
      for (int64_t i = 0; i < n; ++i) sum += Bf16ToFp32(row[i]) * x[i];
      break;
    }
    default: break;
  }
  return sum;
}

// sum over blocks of (weight scale * activation scale) * exact integer block dot.
float DotQ8Row(const WeightMatrix& w, int64_t o, const ActQ8View& x) {
  const int64_t nb = w.cols / kQBlock;
  float sum = 0.f;
  for (int64_t b = 0; b < nb; ++b) {
    int32_t isum = 0;
    for (int j = 0; j < kQBlock; ++j) isum += QuantValue(w, o, b * kQBlock + j) * x.qs[b * kQBlock + j];
    sum += (QuantScale(w, o, b) * x.d[b]) * static_cast<float>(isum);
  }
  return sum;
}

void Matmul(const WeightMatrix& w, const void* act, size_t act_stride, int n_rows, float* y,
            size_t y_stride, int64_t o_begin, int64_t o_end) {
  const bool quantised = w.type == WeightType::kQ8_0 || w.type == WeightType::kQ4_0;
  for (int r = 0; r < n_rows; ++r) {
    const void* row = static_cast<const uint8_t*>(act) + r * act_stride;
    for (int64_t o = o_begin; o < o_end; ++o) {
      y[r * y_stride + o] = quantised ? DotQ8Row(w, o, ViewActQ8(row, w.cols))
                                      : DotFloatRow(w, o, static_cast<const float*>(row));
    }
  }
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

const KernelTable& ScalarKernels() {
  static const KernelTable table = {
      "scalar", {Matmul, Matmul, Matmul, Matmul, Matmul}, Dot, Axpy};
  return table;
}

}  // namespace daisy::kernels
