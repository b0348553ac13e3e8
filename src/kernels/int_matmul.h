// Matrix kernels that another ISA file calls: the integer family's (quant/int_layout.h), one
// template per ISA, instantiated in that ISA's file for every format of the family and listed
// in its KernelSet; and AVX-512's q4_0/q8_0 kernel, which the AMX file uses for the rows that do
// not fill a tile (it gives the same bits: x86_amx/kernels.cc).
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/weights.h"

namespace daisy::kernels {
// Whether the q4_0/q8_0 and integer-family kernels prefetch every weight line
// kDecodePrefetchBytes (integer family; q4_0/q8_0: 16 blocks) ahead in their first pass over
// the weights (a decode's one row, a verify's K + 1, a prompt's first pass over each run): on
// Intel's CPUs and AMD's from Zen 5 (family 0x1A) on yes; on older AMD no, where the hardware
// prefetcher alone streamed best (Zen 4, q8_0: measured in x86_avx512/kernels.cc). The name is
// from when only tiles of 1-4 rows did. DAISY_PREFETCH_SMALL_TILES=0|1 overrides, for
// measuring. Decided once (OverridePrefetch aside).
bool PrefetchSmallTiles();
inline constexpr int kDecodePrefetchBytes = 8192;
// Prefetches (prefetcht0) the lines holding bytes [kFrom, kTo) after p, one per 64 bytes: the
// decode prefetches of every ISA file.
template <int kFrom, int kTo>
inline void PrefetchLines(const void* p) {
  for (int off = kFrom / 64 * 64; off < kTo; off += 64) {
    __builtin_prefetch(static_cast<const char*>(p) + off, 0, 3);
  }
}
// Whether the AVX-512 and AVX2 float kernels (f32/f16/bf16) prefetch the next tile's weight rows
// in their first pass over an output block: yes (x86_avx512/kernels.cc; measured on an AMD Zen
// 5 only).
// DAISY_PREFETCH_FLOAT_ROWS=0|1 overrides, for measuring. Decided once.
bool PrefetchFloatRows();
// Whether the AVX-512 table multiplies bf16 weights with AVX512-BF16's vdpbf16ps (a pair of
// bf16 products a lane, 32 weights an instruction: the activations of bf16 weights are already
// rounded to bf16, ActType::kBF16Rounded, so they convert exactly) rather than widening each
// weight to a float for vfmadd: when the CPU has AVX512-BF16 (AMD from Zen 4, Intel from
// Cooper Lake and Sapphire Rapids). A product's bits differ between the two (a pair's products
// are added before the accumulator, and the instruction flushes denormals), never between rows
// or tiles. DAISY_BF16_DOTS=0 turns it off (the other path's tests). Decided once.
bool Bf16Dots();
// Overrides both decisions above from now on: 0 off, 1 on, -1 back to the CPU's (the kernel
// benchmark's --prefetch-ab alternates them inside one process: on a host whose speed swings
// between runs, only variants taking turns in one run can be compared).
void OverridePrefetch(int on);

namespace avx2 {
template <WeightType kType>
void IntMatmul(const WeightMatrix& w, const void* act, size_t act_stride, int n_rows, float* y, size_t y_stride,
               int64_t o_begin, int64_t o_end);
}  // namespace avx2
namespace avx512 {
template <WeightType kType>  // kQ4_0, kQ8_0
void QMatmul(const WeightMatrix& w, const void* act, size_t act_stride, int n_rows, float* y, size_t y_stride,
             int64_t o_begin, int64_t o_end);
template <WeightType kType>
void IntMatmul(const WeightMatrix& w, const void* act, size_t act_stride, int n_rows, float* y, size_t y_stride,
               int64_t o_begin, int64_t o_end);
// Row group g's codes minus their offset, as int8, in the step order of the packed layout (per
// block, block / 4 steps of 64 bytes: byte 4o + e of step s is element 4s + e of row o): the AMX
// kernel's weight tiles. kQ4K, kQ5K, kIq4Xs.
template <WeightType kType>
void SignedCodeTiles(const WeightMatrix& w, int64_t g, int8_t* out);
}  // namespace avx512
}  // namespace daisy::kernels
