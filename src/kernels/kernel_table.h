// KernelTable: the math kernels of one instruction set, chosen once at start-up from the CPU's
// features. Every table computes the same functions; results differ between tables only in
// floating-point summation order, never between calls of one table (see the contract below).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/weights.h"

namespace daisy::kernels {

struct KernelTable {
  const char* name;  // "scalar", "avx2", "avx512"

  // Matrix product on converted activation rows (activations.h):
  //   y[r * y_stride + o] = dot(weight row o, activation row r)
  // for o in [o_begin, o_end) and r in [0, n_rows); activation row r starts at
  // act + r * act_stride bytes. Contract (batch invariance): the value written for (o, r)
  // depends only on weight row o and activation row r, bit for bit: not on n_rows, on the
  // other rows, on o_begin/o_end, or on which thread runs it. Requires cols % 32 == 0.
  using MatmulFn = void (*)(const WeightMatrix& w, const void* act, size_t act_stride, int n_rows,
                            float* y, size_t y_stride, int64_t o_begin, int64_t o_end);
  MatmulFn matmul[kNumWeightTypes];

  float (*dot_f32)(const float* a, const float* b, int64_t n);
  // y[i] += a * x[i]
  void (*axpy_f32)(float a, const float* x, float* y, int64_t n);
};

// The scalar reference: readable loops, the oracle for every other table. Runs anywhere.
const KernelTable& ScalarKernels();
// nullptr when the CPU (or the build) lacks the instruction set.
const KernelTable* Avx2Kernels();    // AVX2 + FMA + F16C
const KernelTable* Avx512Kernels();  // AVX-512 F/BW/VL/DQ + VNNI

// The fastest table this CPU supports (DAISY_KERNELS=scalar|avx2|avx512 forces one; an
// unsupported choice falls back to the best with a warning).
const KernelTable& BestKernels();
// Every table this CPU supports, scalar first: tests run each.
std::vector<const KernelTable*> AllSupportedKernels();
// Looks a table up by name; nullptr when unknown or unsupported here.
const KernelTable* FindKernels(const char* name);

}  // namespace daisy::kernels
