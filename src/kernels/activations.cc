#include "kernels/activations.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif
#include <cmath>
#include <cstring>

#include <algorithm>

#include "kernels/quant/float_formats.h"
#include "kernels/quant/search.h"

namespace daisy::kernels {
namespace {

size_t FloatRowBytes(int64_t cols) { return static_cast<size_t>(cols) * sizeof(float); }
// qs (cols) + block sums (cols / 32 int32) + scales (cols / 32 floats).
size_t Q8RowBytes(int64_t cols) { return static_cast<size_t>(cols) + static_cast<size_t>(cols / kQBlock) * 8; }

void CopyRow(const float* x, int64_t cols, void* out) { std::memcpy(out, x, cols * sizeof(float)); }

void RoundF16Activations(const float* x, int64_t cols, void* out) {
  RoundF16Row(x, static_cast<float*>(out), static_cast<size_t>(cols));
}

void RoundBF16Row(const float* x, int64_t cols, void* out) {
  float* y = static_cast<float*>(out);
  for (int64_t i = 0; i < cols; ++i) y[i] = Bf16ToFp32(Fp32ToBf16(x[i]));
}

// Q8_1: the Q8 row and each block's f16-rounded (unrounded scale * sum of q), as llama.cpp's
// quantize_row_q8_1.
size_t Q8_1RowBytes(int64_t cols) { return Q8RowBytes(cols) + static_cast<size_t>(cols / kQBlock) * 4; }
// Q8_K: qs (cols) + sums per 16 (cols / 16 int16) + sums per 32 (cols / 32 int16) + scales
// (cols / 256 floats).
size_t Q8KRowBytes(int64_t cols) {
  return static_cast<size_t>(cols) + static_cast<size_t>(cols / 16) * 2 + static_cast<size_t>(cols / 32) * 2 +
         static_cast<size_t>(cols / 256) * 4;
}

// A q8 / q8_1 row being written (the layout in activations.h; the scalar and AVX-512 code share
// it, and ViewActQ8 reads it).
struct Q8Out {
  int8_t* qs;
  int32_t* sums;
  float* d;
};
Q8Out Q8OutOf(void* out, int64_t cols) {
  auto* p = static_cast<uint8_t*>(out);
  return {reinterpret_cast<int8_t*>(p), reinterpret_cast<int32_t*>(p + cols),
          reinterpret_cast<float*>(p + cols + (cols / kQBlock) * 4)};
}

// A q8_K row being written, likewise (ViewActQ8K reads it).
struct Q8KOut {
  int8_t* qs;
  int16_t* sums;    // per 16
  int16_t* sums32;  // per 32
  float* d;
};
Q8KOut Q8KOutOf(void* out, int64_t cols) {
  auto* p = static_cast<uint8_t*>(out);
  int16_t* sums = reinterpret_cast<int16_t*>(p + cols);
  return {reinterpret_cast<int8_t*>(p), sums, sums + cols / 16,
          reinterpret_cast<float*>(p + cols + (cols / 16) * 2 + (cols / 32) * 2)};
}
// Block b of an all-zero stretch: zero codes, sums and scale.
void ZeroQ8KBlock(const Q8KOut& o, int64_t b) {
  o.d[b] = 0.f;
  std::memset(o.qs + b * 256, 0, 256);
  for (int j = 0; j < 16; ++j) o.sums[b * 16 + j] = 0;
  for (int j = 0; j < 8; ++j) o.sums32[b * 8 + j] = 0;
}
// Block b's sums per 32 (from its sums per 16) and its scale.
void FinishQ8KBlock(const Q8KOut& o, int64_t b, float iscale) {
  for (int j = 0; j < 8; ++j) {
    o.sums32[b * 8 + j] = static_cast<int16_t>(o.sums[b * 16 + 2 * j] + o.sums[b * 16 + 2 * j + 1]);
  }
  o.d[b] = 1 / iscale;
}

void Q8RowsScalar(const float* x, int64_t cols, void* out, float* block_s) {
  const int64_t nb = cols / kQBlock;
  const auto [qs, sums, d] = Q8OutOf(out, cols);
  for (int64_t b = 0; b < nb; ++b) {
    const float* xb = x + b * kQBlock;
    // As std::fmax: a NaN is passed over, an infinity kept.
    float amax = 0.f;
    for (int j = 0; j < kQBlock; ++j) {
      const float a = std::fabs(xb[j]);
      amax = a > amax ? a : amax;
    }
    const float scale = amax / 127.f;
    const float inv = amax != 0.f ? 127.f / amax : 0.f;
    d[b] = Fp16ToFp32(Fp32ToFp16(scale));
    int32_t sum = 0;
    for (int j = 0; j < kQBlock; ++j) {
      // Finite activations give |x * inv| <= 127. A NaN or an infinity (a model that overflowed,
      // or garbage from a peer: found by fuzz_worker) must not reach the conversion, which is
      // undefined outside int8's range: as std::fmax/std::fmin would, NaN goes to -127 and the
      // rest is bounded.
      float v = xb[j] * inv;
      v = v > -127.f ? v : -127.f;
      v = v < 127.f ? v : 127.f;
      qs[b * kQBlock + j] = static_cast<int8_t>(quant::NearestInt(v));
      sum += qs[b * kQBlock + j];
    }
    sums[b] = sum;
    if (block_s != nullptr) block_s[b] = Fp16ToFp32(Fp32ToFp16(scale * static_cast<float>(sum)));
  }
}

#if defined(__x86_64__)
// g++ 12's AVX-512 headers build some results from _mm*_undefined_*() and then warn that the
// value is used uninitialised (a known false positive); this code never reads undefined lanes.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
// The scalar code's operations on 16 lanes, with the same bits (the activation conversion was
// ~9% of a 512-token prompt on an Intel Xeon, where the matrix products run on AMX):
//   - vmaxps(a, m) is a > m ? a : m, the scalar's NaN-skipping maximum, and a maximum does not
//     depend on the order it is taken in;
//   - vmaxps(v, -127) then vminps(v, 127) are the scalar's two clamps, NaN going to -127;
//   - NearestInt's own arithmetic (add 1.5 * 2^23, keep the low mantissa bits) gives the codes,
//     for any input, as the scalar code does.
// The add is written with its rounding explicit (the same round-to-nearest) because g++ fuses a
// plain _mm512_add_ps with the multiply before it into one FMA, which rounds once instead of
// twice (the q8_K codes then differed from the scalar code's).
__attribute__((target("avx512f"))) inline __m512i NearestInts(__m512 v) {
  const __m512 biased =
      _mm512_add_round_ps(v, _mm512_set1_ps(12582912.f), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m512i bits = _mm512_castps_si512(biased);
  return _mm512_sub_epi32(_mm512_and_si512(bits, _mm512_set1_epi32(0x007fffff)), _mm512_set1_epi32(0x00400000));
}

__attribute__((target("avx512f"))) void Q8RowsAvx512(const float* x, int64_t cols, void* out, float* block_s) {
  const int64_t nb = cols / kQBlock;
  const auto [qs, sums, d] = Q8OutOf(out, cols);
  const __m512 lo = _mm512_set1_ps(-127.f), hi = _mm512_set1_ps(127.f);
  for (int64_t b = 0; b < nb; ++b) {
    const __m512 x0 = _mm512_loadu_ps(x + b * kQBlock), x1 = _mm512_loadu_ps(x + b * kQBlock + 16);
    const __m512 m = _mm512_max_ps(_mm512_abs_ps(x1), _mm512_max_ps(_mm512_abs_ps(x0), _mm512_setzero_ps()));
    const float amax = _mm512_reduce_max_ps(m);
    const float scale = amax / 127.f;
    const float inv = amax != 0.f ? 127.f / amax : 0.f;
    d[b] = Fp16ToFp32(Fp32ToFp16(scale));
    const __m512 vinv = _mm512_set1_ps(inv);
    const __m512i q0 = NearestInts(_mm512_min_ps(_mm512_max_ps(_mm512_mul_ps(x0, vinv), lo), hi));
    const __m512i q1 = NearestInts(_mm512_min_ps(_mm512_max_ps(_mm512_mul_ps(x1, vinv), lo), hi));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(qs + b * kQBlock), _mm512_cvtepi32_epi8(q0));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(qs + b * kQBlock + 16), _mm512_cvtepi32_epi8(q1));
    const int32_t sum = _mm512_reduce_add_epi32(_mm512_add_epi32(q0, q1));
    sums[b] = sum;
    if (block_s != nullptr) block_s[b] = Fp16ToFp32(Fp32ToFp16(scale * static_cast<float>(sum)));
  }
}

bool HasAvx512F() {
  static const bool has = __builtin_cpu_supports("avx512f");
  return has;
}
#pragma GCC diagnostic pop
#endif

void Q8Rows(const float* x, int64_t cols, void* out, float* block_s) {
#if defined(__x86_64__)
  if (HasAvx512F()) return Q8RowsAvx512(x, cols, out, block_s);
#endif
  Q8RowsScalar(x, cols, out, block_s);
}

void Q8Row(const float* x, int64_t cols, void* out) { Q8Rows(x, cols, out, nullptr); }

void Q8_1Row(const float* x, int64_t cols, void* out) {
  Q8Rows(x, cols, out, reinterpret_cast<float*>(static_cast<uint8_t*>(out) + Q8RowBytes(cols)));
}

// ggml's quantize_row_q8_K_ref: the value of largest magnitude, with its sign, maps to -127
// (so d may be negative); codes are clamped to 127.
void Q8KRowScalar(const float* x, int64_t cols, void* out) {
  const Q8KOut o = Q8KOutOf(out, cols);
  for (int64_t b = 0; b < cols / 256; ++b) {
    const float* xb = x + b * 256;
    int8_t* qb = o.qs + b * 256;
    float max = 0, amax = 0;
    for (int j = 0; j < 256; ++j) {
      if (std::fabs(xb[j]) > amax) {
        amax = std::fabs(xb[j]);
        max = xb[j];
      }
    }
    if (amax == 0.f) {
      ZeroQ8KBlock(o, b);
      continue;
    }
    const float iscale = -127.f / max;
    for (int j = 0; j < 256; ++j) qb[j] = static_cast<int8_t>(std::min(127, quant::NearestInt(iscale * xb[j])));
    for (int j = 0; j < 16; ++j) {
      int32_t sum = 0;
      for (int i = 0; i < 16; ++i) sum += qb[16 * j + i];
      o.sums[b * 16 + j] = static_cast<int16_t>(sum);
    }
    FinishQ8KBlock(o, b, iscale);
  }
}

#if defined(__x86_64__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
// Q8KRowScalar on 16 lanes, with its bits: the largest magnitude is found as in Q8RowsAvx512,
// and its signed value is the first element that has it (the scalar's strict > keeps the first);
// codes are NearestInt's arithmetic, capped at 127 and cut to int8 as the scalar casts do, and
// the sums are taken over the cut codes.
__attribute__((target("avx512f"))) void Q8KRowAvx512(const float* x, int64_t cols, void* out) {
  const Q8KOut o = Q8KOutOf(out, cols);
  for (int64_t b = 0; b < cols / 256; ++b) {
    const float* xb = x + b * 256;
    int8_t* qb = o.qs + b * 256;
    __m512 m = _mm512_setzero_ps();
    for (int i = 0; i < 16; ++i) m = _mm512_max_ps(_mm512_abs_ps(_mm512_loadu_ps(xb + 16 * i)), m);
    const float amax = _mm512_reduce_max_ps(m);
    if (amax == 0.f) {
      ZeroQ8KBlock(o, b);
      continue;
    }
    float max = 0.f;
    for (int i = 0; i < 16; ++i) {
      const __m512 a = _mm512_abs_ps(_mm512_loadu_ps(xb + 16 * i));
      const __mmask16 at = _mm512_cmp_ps_mask(a, _mm512_set1_ps(amax), _CMP_EQ_OQ);
      if (at != 0) {
        max = xb[16 * i + __builtin_ctz(at)];
        break;
      }
    }
    const float iscale = -127.f / max;
    const __m512 vis = _mm512_set1_ps(iscale);
    for (int i = 0; i < 16; ++i) {
      const __m512i q =
          _mm512_min_epi32(NearestInts(_mm512_mul_ps(vis, _mm512_loadu_ps(xb + 16 * i))), _mm512_set1_epi32(127));
      const __m128i q8 = _mm512_cvtepi32_epi8(q);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(qb + 16 * i), q8);
      o.sums[b * 16 + i] = static_cast<int16_t>(_mm512_reduce_add_epi32(_mm512_cvtepi8_epi32(q8)));
    }
    FinishQ8KBlock(o, b, iscale);
  }
}
#pragma GCC diagnostic pop
#endif

void Q8KRow(const float* x, int64_t cols, void* out) {
#if defined(__x86_64__)
  if (HasAvx512F()) return Q8KRowAvx512(x, cols, out);
#endif
  Q8KRowScalar(x, cols, out);
}

constexpr ActFormat kActFormats[kNumActTypes] = {
    {ActType::kF32, "f32", FloatRowBytes, CopyRow},
    {ActType::kF16Rounded, "f16-rounded", FloatRowBytes, RoundF16Activations},
    {ActType::kBF16Rounded, "bf16-rounded", FloatRowBytes, RoundBF16Row},
    {ActType::kQ8, "q8_0+sums", Q8RowBytes, Q8Row},
    {ActType::kQ8_1, "q8_1+sums", Q8_1RowBytes, Q8_1Row},
    {ActType::kQ8K, "q8_K+sums", Q8KRowBytes, Q8KRow},
};

}  // namespace

const ActFormat& FormatOf(ActType type) { return kActFormats[static_cast<int>(type)]; }

size_t ActRowBytes(WeightType type, int64_t cols) { return FormatOf(ActTypeOf(type)).row_bytes(cols); }

void ConvertActRow(WeightType type, const float* x, int64_t cols, void* out) {
  FormatOf(ActTypeOf(type)).convert_row(x, cols, out);
}

void ConvertActRowScalar(WeightType type, const float* x, int64_t cols, void* out) {
  switch (ActTypeOf(type)) {
    case ActType::kQ8: return Q8RowsScalar(x, cols, out, nullptr);
    case ActType::kQ8_1:
      return Q8RowsScalar(x, cols, out, reinterpret_cast<float*>(static_cast<uint8_t*>(out) + Q8RowBytes(cols)));
    case ActType::kQ8K: return Q8KRowScalar(x, cols, out);
    default: return ConvertActRow(type, x, cols, out);
  }
}

ActQ8View ViewActQ8(const void* row, int64_t cols) {
  const auto* p = static_cast<const uint8_t*>(row);
  const int64_t nb = cols / kQBlock;
  return {reinterpret_cast<const int8_t*>(p), reinterpret_cast<const int32_t*>(p + cols),
          reinterpret_cast<const float*>(p + cols + nb * 4), reinterpret_cast<const float*>(p + cols + nb * 8)};
}

ActQ8KView ViewActQ8K(const void* row, int64_t cols) {
  const auto* p = static_cast<const uint8_t*>(row);
  return {reinterpret_cast<const int8_t*>(p), reinterpret_cast<const int16_t*>(p + cols),
          reinterpret_cast<const int16_t*>(p + cols + (cols / 16) * 2),
          reinterpret_cast<const float*>(p + cols + (cols / 16) * 2 + (cols / 32) * 2)};
}

}  // namespace daisy::kernels
