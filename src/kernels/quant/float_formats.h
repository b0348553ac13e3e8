// f16 and bf16 <-> f32 conversions, bit-exact with ggml's reference conversions:
// round-to-nearest-even, NaN kept quiet, subnormals handled. The single values are scalar
// code, safe on any CPU; the f16 rows use F16C where the CPU has it, with the same bits.
#pragma once

#include <cstddef>
#include <cstdint>

namespace daisy::kernels {

uint16_t Fp32ToFp16(float x);
float Fp16ToFp32(uint16_t h);
uint16_t Fp32ToBf16(float x);
float Bf16ToFp32(uint16_t h);

void Fp32ToFp16Row(const float* x, uint16_t* y, size_t n);
void Fp16ToFp32Row(const uint16_t* x, float* y, size_t n);
// x rounded to f16 and back, into y (may be x).
void RoundF16Row(const float* x, float* y, size_t n);
void Fp32ToBf16Row(const float* x, uint16_t* y, size_t n);
void Bf16ToFp32Row(const uint16_t* x, float* y, size_t n);

// Whether this CPU (and OS) runs F16C's 256-bit conversions.
bool CpuHasF16c();

// The rows without F16C on any CPU (the reference the rows are tested against).
void Fp32ToFp16RowScalar(const float* x, uint16_t* y, size_t n);
void Fp16ToFp32RowScalar(const uint16_t* x, float* y, size_t n);
void RoundF16RowScalar(const float* x, float* y, size_t n);

}  // namespace daisy::kernels
