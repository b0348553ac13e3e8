// The matrix kernels of the integer family (quant/int_layout.h), one template per ISA,
// instantiated in that ISA's file for every format of the family and listed in its KernelSet.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/weights.h"

namespace daisy::kernels {
namespace avx2 {
template <WeightType kType>
void IntMatmul(const WeightMatrix& w, const void* act, size_t act_stride, int n_rows, float* y, size_t y_stride,
               int64_t o_begin, int64_t o_end);
}  // namespace avx2
namespace avx512 {
template <WeightType kType>
void IntMatmul(const WeightMatrix& w, const void* act, size_t act_stride, int n_rows, float* y, size_t y_stride,
               int64_t o_begin, int64_t o_end);
}  // namespace avx512
}  // namespace daisy::kernels
