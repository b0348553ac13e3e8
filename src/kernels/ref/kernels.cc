// The scalar reference matrix kernels: plain loops in the order a reader expects. Every SIMD
// table is tested against these.
#include "kernels/activations.h"
#include "kernels/kernel_table.h"
#include "kernels/quant/float_formats.h"

namespace daisy::kernels::ref {
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

void FloatMatmul(const WeightMatrix& w, const void* act, size_t act_stride, int n_rows, float* y,
                 size_t y_stride, int64_t o_begin, int64_t o_end) {
  for (int r = 0; r < n_rows; ++r) {
    const auto* row = reinterpret_cast<const float*>(static_cast<const uint8_t*>(act) + r * act_stride);
    for (int64_t o = o_begin; o < o_end; ++o) y[r * y_stride + o] = DotFloatRow(w, o, row);
  }
}

// Quantised rows, 16 at a time (one interleaved row group, see weights.h): for each block, the
// exact integer dot of every row with the activation block, then
//   sum += (weight scale * activation scale) * integer dot
// per row, blocks in order. Writes the group's rows that fall in [o_begin, o_end).
void QuantGroup(const WeightMatrix& w, int64_t g, const ActQ8View& x, float* y, int64_t o_begin,
                int64_t o_end) {
  const WeightFormat& f = FormatOf(w.type);
  const int64_t nb = w.cols / kQBlock;
  const auto* data = static_cast<const uint8_t*>(w.data);
  float sum[kRowGroup] = {};
  int8_t q[kRowGroup][kQBlock];
  for (int64_t b = 0; b < nb; ++b) {
    f.unpack_block(data + (g * nb + b) * f.group_block_bytes, q);
    const int8_t* xb = x.qs + b * kQBlock;
    int32_t isum[kRowGroup] = {};
    for (int l = 0; l < kRowGroup; ++l) {
      for (int e = 0; e < kQBlock; ++e) isum[l] += q[l][e] * xb[e];
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

// Any packed format whose blocks unpack to kQBlock integers with one f16 scale per row.
void QuantMatmul(const WeightMatrix& w, const void* act, size_t act_stride, int n_rows, float* y,
                 size_t y_stride, int64_t o_begin, int64_t o_end) {
  for (int r = 0; r < n_rows; ++r) {
    const ActQ8View x = ViewActQ8(static_cast<const uint8_t*>(act) + r * act_stride, w.cols);
    for (int64_t g = o_begin / kRowGroup; g * kRowGroup < o_end; ++g) {
      QuantGroup(w, g, x, y + r * y_stride, o_begin, o_end);
    }
  }
}

}  // namespace

extern constinit const MatmulKernel kMatmuls[] = {
    {WeightType::kF32, FloatMatmul},   {WeightType::kF16, FloatMatmul},
    {WeightType::kBF16, FloatMatmul},  {WeightType::kQ8_0, QuantMatmul},
    {WeightType::kQ4_0, QuantMatmul},
};
extern constinit const size_t kMatmulCount = sizeof(kMatmuls) / sizeof(kMatmuls[0]);

}  // namespace daisy::kernels::ref
