#include "kernels/quant/float_formats.h"

#include <bit>
#include <cstring>

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#endif

namespace daisy::kernels {
namespace {

#if defined(__x86_64__)
// F16C converts 8 values per instruction with the same IEEE rules as the scalar code above
// (round to nearest even, overflow to infinity, subnormal results, a NaN kept quiet with its
// top payload bits), so rows give the same bits whichever path runs. Compiled for F16C alone
// and called only where the CPU has it (every AVX2 host does).
__attribute__((target("avx,f16c"))) void Fp32ToFp16RowF16c(const float* x, uint16_t* y, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y + i), h);
  }
  for (; i < n; ++i) y[i] = Fp32ToFp16(x[i]);
}

__attribute__((target("avx,f16c"))) void Fp16ToFp32RowF16c(const uint16_t* x, float* y, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(y + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i))));
  }
  for (; i < n; ++i) y[i] = Fp16ToFp32(x[i]);
}

__attribute__((target("avx,f16c"))) void RoundF16RowF16c(const float* x, float* y, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm256_storeu_ps(y + i, _mm256_cvtph_ps(h));
  }
  for (; i < n; ++i) y[i] = Fp16ToFp32(Fp32ToFp16(x[i]));
}

bool HasF16c() {
  static const bool has = CpuHasF16c();
  return has;
}
#else
bool HasF16c() { return false; }
#endif

}  // namespace

bool CpuHasF16c() {
#if defined(__x86_64__)
  // CPUID leaf 1, ECX bit 29 (clang's __builtin_cpu_supports does not know "f16c"); its
  // 256-bit forms need AVX's registers enabled by the OS, which "avx" checks.
  unsigned a = 0, b = 0, c = 0, d = 0;
  return __builtin_cpu_supports("avx") && __get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 29)) != 0;
#else
  return false;
#endif
}

uint16_t Fp32ToFp16(float x) {
  const uint32_t u = std::bit_cast<uint32_t>(x);
  const uint32_t sign = (u >> 16) & 0x8000;
  const uint32_t abs = u & 0x7fffffff;
  if (abs > 0x7f800000) return static_cast<uint16_t>(sign | 0x7e00 | ((abs >> 13) & 0x3ff));  // NaN
  if (abs >= 0x477ff000) return static_cast<uint16_t>(sign | 0x7c00);  // rounds to >= 65520: inf
  if (abs < 0x38800000) {
    // Result is subnormal (or zero): shift the implicit-1 mantissa into place, rounding to even.
    if (abs < 0x33000000) return static_cast<uint16_t>(sign);  // below half the smallest subnormal
    const uint32_t exp = abs >> 23;
    const uint32_t mant = (abs & 0x7fffff) | 0x800000;
    const uint32_t shift = 126 - exp;  // 14..24 (+ the 13 bits dropped anyway)
    const uint32_t half = 1u << (shift - 1);
    const uint32_t rest = mant & ((1u << shift) - 1);
    uint32_t h = mant >> shift;
    if (rest > half || (rest == half && (h & 1))) ++h;
    return static_cast<uint16_t>(sign | h);
  }
  // Normal: rebias the exponent (127 -> 15) and round the mantissa from 23 to 10 bits.
  uint32_t h = ((abs - 0x38000000) >> 13);
  const uint32_t rest = abs & 0x1fff;
  if (rest > 0x1000 || (rest == 0x1000 && (h & 1))) ++h;  // may carry into the exponent: correct
  return static_cast<uint16_t>(sign | h);
}

float Fp16ToFp32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  const uint32_t exp = (h >> 10) & 0x1f;
  uint32_t mant = h & 0x3ff;
  uint32_t u;
  if (exp == 0x1f) {
    // Infinity, or a NaN made quiet (as F16C's vcvtph2ps and ggml do).
    u = sign | 0x7f800000 | (mant << 13) | (mant != 0 ? 0x400000u : 0u);
  } else if (exp != 0) {
    u = sign | ((exp + 112) << 23) | (mant << 13);
  } else if (mant == 0) {
    u = sign;
  } else {
    // Subnormal half: normalise.
    int e = -1;
    do {
      ++e;
      mant <<= 1;
    } while ((mant & 0x400) == 0);
    u = sign | (static_cast<uint32_t>(112 - e) << 23) | ((mant & 0x3ff) << 13);
  }
  return std::bit_cast<float>(u);
}

uint16_t Fp32ToBf16(float x) {
  const uint32_t u = std::bit_cast<uint32_t>(x);
  if ((u & 0x7fffffff) > 0x7f800000) return static_cast<uint16_t>((u >> 16) | 64);  // quiet NaN
  return static_cast<uint16_t>((u + (0x7fff + ((u >> 16) & 1))) >> 16);
}

float Bf16ToFp32(uint16_t h) { return std::bit_cast<float>(static_cast<uint32_t>(h) << 16); }

void Fp32ToFp16RowScalar(const float* x, uint16_t* y, size_t n) {
  for (size_t i = 0; i < n; ++i) y[i] = Fp32ToFp16(x[i]);
}
void Fp16ToFp32RowScalar(const uint16_t* x, float* y, size_t n) {
  for (size_t i = 0; i < n; ++i) y[i] = Fp16ToFp32(x[i]);
}
void RoundF16RowScalar(const float* x, float* y, size_t n) {
  for (size_t i = 0; i < n; ++i) y[i] = Fp16ToFp32(Fp32ToFp16(x[i]));
}

#if defined(__x86_64__)
void Fp32ToFp16Row(const float* x, uint16_t* y, size_t n) {
  HasF16c() ? Fp32ToFp16RowF16c(x, y, n) : Fp32ToFp16RowScalar(x, y, n);
}
void Fp16ToFp32Row(const uint16_t* x, float* y, size_t n) {
  HasF16c() ? Fp16ToFp32RowF16c(x, y, n) : Fp16ToFp32RowScalar(x, y, n);
}
void RoundF16Row(const float* x, float* y, size_t n) {
  HasF16c() ? RoundF16RowF16c(x, y, n) : RoundF16RowScalar(x, y, n);
}
#else
void Fp32ToFp16Row(const float* x, uint16_t* y, size_t n) { Fp32ToFp16RowScalar(x, y, n); }
void Fp16ToFp32Row(const uint16_t* x, float* y, size_t n) { Fp16ToFp32RowScalar(x, y, n); }
void RoundF16Row(const float* x, float* y, size_t n) { RoundF16RowScalar(x, y, n); }
#endif

void Fp32ToBf16Row(const float* x, uint16_t* y, size_t n) {
  for (size_t i = 0; i < n; ++i) y[i] = Fp32ToBf16(x[i]);
}
void Bf16ToFp32Row(const uint16_t* x, float* y, size_t n) {
  for (size_t i = 0; i < n; ++i) y[i] = Bf16ToFp32(x[i]);
}

}  // namespace daisy::kernels
