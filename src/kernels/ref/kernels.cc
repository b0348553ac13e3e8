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

// Quantised rows, 16 at a time (one interleaved row group, see weights.h): for each block, the
// exact integer dot of every row with the activation block, then
//   sum += (weight scale * activation scale) * integer dot
// per row, blocks in order. Writes the group's rows that fall in [o_begin, o_end).
void QuantGroup(const WeightMatrix& w, int64_t g, const ActQ8View& x, float* y, int64_t o_begin,
                int64_t o_end) {
  const int64_t nb = w.cols / kQBlock;
  const bool q4 = w.type == WeightType::kQ4_0;
  const int64_t group_block_bytes = q4 ? 256 : 512;
  const auto* q = static_cast<const uint8_t*>(w.data) + g * nb * group_block_bytes;
  float sum[kRowGroup] = {};
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* qb = q + b * group_block_bytes;
    const int8_t* xb = x.qs + b * kQBlock;
    int32_t isum[kRowGroup] = {};
    for (int s = 0; s < kQBlock / kGroupStep; ++s) {
      for (int l = 0; l < kRowGroup; ++l) {
        for (int t = 0; t < kGroupStep; ++t) {
          int value;
          if (q4) {
            const uint8_t byte = qb[s * 32 + (l % 8) * 4 + t];
            value = (l < 8 ? (byte & 0x0f) : (byte >> 4)) - 8;
          } else {
            value = static_cast<int>(qb[s * 64 + l * 4 + t]) - 128;
          }
          isum[l] += value * xb[s * kGroupStep + t];
        }
      }
    }
    const uint16_t* ws = w.scales + (g * nb + b) * kRowGroup;
    for (int l = 0; l < kRowGroup; ++l) {
      sum[l] += (Fp16ToFp32(ws[l]) * x.d[b]) * static_cast<float>(isum[l]);
    }
  }
  for (int l = 0; l < kRowGroup; ++l) {
    const int64_t o = g * kRowGroup + l;
    if (o >= o_begin && o < o_end) y[o] = sum[l];
  }
}

void Matmul(const WeightMatrix& w, const void* act, size_t act_stride, int n_rows, float* y,
            size_t y_stride, int64_t o_begin, int64_t o_end) {
  const bool quantised = w.type == WeightType::kQ8_0 || w.type == WeightType::kQ4_0;
  for (int r = 0; r < n_rows; ++r) {
    const void* row = static_cast<const uint8_t*>(act) + r * act_stride;
    if (quantised) {
      const ActQ8View x = ViewActQ8(row, w.cols);
      for (int64_t g = o_begin / kRowGroup; g * kRowGroup < o_end; ++g) {
        QuantGroup(w, g, x, y + r * y_stride, o_begin, o_end);
      }
      continue;
    }
    for (int64_t o = o_begin; o < o_end; ++o) {
      y[r * y_stride + o] = DotFloatRow(w, o, static_cast<const float*>(row));
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
