// The scalar reference matrix kernels: plain loops in the order a reader expects. Every SIMD
// table is tested against these.
#include "kernels/activations.h"
#include "kernels/kernel_table.h"
#include <algorithm>
#include <vector>

#include "kernels/quant/float_formats.h"
#include "kernels/quant/int_layout.h"

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

// The integer family (quant/int_layout.h), any format: per (row group, block) the 16 rows are
// unpacked once; for each activation row and weight row, the integer dot of every sub-block,
//   isum = sum_j scale_j * (sum_e code_e * xq_e - off * xsum_j),  msum = sum_j min_j * xsum_j
// then  sum += (d * dx) * isum  and, with a second scale,  sum += (e * dx) * msum  (K-quants)
// or  sum += e * s  (q4_1, q5_1 on Q8_1 activations). Blocks in order.
void IntMatmul(const WeightMatrix& w, const void* act, size_t act_stride, int n_rows, float* y,
               size_t y_stride, int64_t o_begin, int64_t o_end) {
  const WeightFormat& f = FormatOf(w.type);
  const IntLayout& layout = *f.layout;
  const bool super = layout.block == 256;  // Q8_K activations, else Q8_0 / Q8_1
  const int64_t nb = w.cols / layout.block;
  const auto* data = static_cast<const uint8_t*>(w.data);
  std::vector<float> sums(static_cast<size_t>(n_rows) * kRowGroup);
  std::vector<ActQ8View> q8s(static_cast<size_t>(n_rows));
  std::vector<ActQ8KView> q8ks(static_cast<size_t>(n_rows));
  for (int r = 0; r < n_rows; ++r) {
    const void* row = static_cast<const uint8_t*>(act) + r * act_stride;
    if (super) {
      q8ks[r] = ViewActQ8K(row, w.cols);
    } else {
      q8s[r] = ViewActQ8(row, w.cols);
    }
  }
  RowBlock rows[kRowGroup];
  int16_t values[kRowGroup][256];  // each row's code values (CodeValue), for every activation row
  for (int64_t g = o_begin / kRowGroup; g * kRowGroup < o_end; ++g) {
    std::fill(sums.begin(), sums.end(), 0.f);
    for (int64_t b = 0; b < nb; ++b) {
      for (int l = 0; l < kRowGroup; ++l) {
        UnpackIntRow(layout, data + (g * nb + b) * f.group_block_bytes, w.scales + (g * nb + b) * f.group_scales,
                     l, rows[l]);
        for (int e = 0; e < layout.block; ++e) values[l][e] = static_cast<int16_t>(CodeValue(layout, rows[l].code[e]));
      }
      for (int r = 0; r < n_rows; ++r) {
        const ActQ8View& q8 = q8s[r];
        const ActQ8KView& q8k = q8ks[r];
        const int8_t* xq = (super ? q8k.qs : q8.qs) + b * layout.block;
        const float dx = super ? q8k.d[b] : q8.d[b];
        for (int l = 0; l < kRowGroup; ++l) {
          const RowBlock& rb = rows[l];
          int32_t isum = 0, msum = 0;
          for (int j = 0; j < layout.nsub(); ++j) {
            int32_t dot = 0;
            for (int e = j * layout.sub; e < (j + 1) * layout.sub; ++e) dot += values[l][e] * xq[e];
            const int32_t xsum = !super ? q8.block_sum[b]
                                 : layout.sub == 16 ? q8k.sum16[b * 16 + j] : q8k.sum32[b * 8 + j];
            isum += rb.scale[j] * (dot - layout.off * xsum);
            msum += rb.min[j] * xsum;
          }
          float& sum = sums[r * kRowGroup + l];
          const float d = Fp16ToFp32(rb.d), e = Fp16ToFp32(rb.e);
          sum += (d * dx) * static_cast<float>(isum);
          if (layout.extra == Extra::kMins) sum += (e * dx) * static_cast<float>(msum);
          if (layout.extra == Extra::kSum) sum += e * q8.s[b];
        }
      }
    }
    for (int r = 0; r < n_rows; ++r) {
      for (int l = 0; l < kRowGroup; ++l) {
        const int64_t o = g * kRowGroup + l;
        if (o >= o_begin && o < o_end && o < w.rows) y[r * y_stride + o] = sums[r * kRowGroup + l];
      }
    }
  }
}

}  // namespace

extern constinit const MatmulKernel kMatmuls[] = {
    {WeightType::kF32, FloatMatmul},   {WeightType::kF16, FloatMatmul},  {WeightType::kBF16, FloatMatmul},
    {WeightType::kQ8_0, QuantMatmul},  {WeightType::kQ4_0, QuantMatmul}, {WeightType::kQ4_1, IntMatmul},
    {WeightType::kQ5_0, IntMatmul},    {WeightType::kQ5_1, IntMatmul},   {WeightType::kIq4Nl, IntMatmul},
    {WeightType::kQ2K, IntMatmul},     {WeightType::kQ3K, IntMatmul},    {WeightType::kQ4K, IntMatmul},
    {WeightType::kQ5K, IntMatmul},     {WeightType::kQ6K, IntMatmul},    {WeightType::kIq4Xs, IntMatmul},
};
extern constinit const size_t kMatmulCount = sizeof(kMatmuls) / sizeof(kMatmuls[0]);

}  // namespace daisy::kernels::ref
