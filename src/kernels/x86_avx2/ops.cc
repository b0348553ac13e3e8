// AVX2 + FMA element-wise ops (ops.h). Compiled with -ffp-contract=off: rms_norm, rope,
// silu_mul and add give the scalar reference's bits (same operations per element, in the same
// order); dot and axpy use fused multiply-adds where they say so.
#include <immintrin.h>

#include <cmath>

#include "kernels/attention_impl.h"
#include "kernels/kernel_table.h"

namespace daisy::kernels::avx2 {
namespace {

inline float HorizontalSum(__m256 v) {
  const __m128 lo = _mm256_castps256_ps128(v);
  const __m128 hi = _mm256_extractf128_ps(v, 1);
  __m128 s = _mm_add_ps(lo, hi);
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

void RmsNorm(const float* x, const float* w, int64_t d, float eps, float* y) {
  // The squares in SIMD, their sum in double and in order (as the reference), the scaling in
  // SIMD: (x * scale) * w, two roundings per element as there.
  double sum = 0.0;
  int64_t i = 0;
  alignas(32) float sq[8];
  for (; i + 8 <= d; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    _mm256_store_ps(sq, _mm256_mul_ps(v, v));
    for (float s : sq) sum += static_cast<double>(s);
  }
  for (; i < d; ++i) sum += static_cast<double>(x[i] * x[i]);
  const float mean = static_cast<float>(sum / static_cast<double>(d));
  const float scale = 1.0f / std::sqrt(mean + eps);
  const __m256 sv = _mm256_set1_ps(scale);
  i = 0;
  for (; i + 8 <= d; i += 8) {
    _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(x + i), sv), _mm256_loadu_ps(w + i)));
  }
  for (; i < d; ++i) y[i] = (x[i] * scale) * w[i];
}

void Rope(float* v, int n_heads, int head_dim, const float* cs, RopeMode mode) {
  const int half = head_dim / 2;
  for (int h = 0; h < n_heads; ++h) {
    float* p = v + static_cast<int64_t>(h) * head_dim;
    int i = 0;
    if (mode == RopeMode::kNorm) {
      // Four pairs (x0, x1) at a time against (c, s): even lanes x0*c - x1*s, odd lanes
      // x1*c + x0*s (addsub subtracts in even lanes, adds in odd ones).
      for (; i + 4 <= half; i += 4) {
        const __m256 x = _mm256_loadu_ps(p + 2 * i);
        const __m256 t = _mm256_loadu_ps(cs + 2 * i);
        const __m256 c = _mm256_moveldup_ps(t);  // c c c' c' ...
        const __m256 s = _mm256_movehdup_ps(t);  // s s s' s' ...
        const __m256 swapped = _mm256_permute_ps(x, 0xb1);  // x1 x0 ...
        _mm256_storeu_ps(p + 2 * i, _mm256_addsub_ps(_mm256_mul_ps(x, c), _mm256_mul_ps(swapped, s)));
      }
      for (; i < half; ++i) {
        const float x0 = p[2 * i], x1 = p[2 * i + 1], c = cs[2 * i], s = cs[2 * i + 1];
        p[2 * i] = x0 * c - x1 * s;
        p[2 * i + 1] = x0 * s + x1 * c;
      }
      continue;
    }
    // kNeox: eight rotations at a time; the (c, s) pairs split into a c vector and an s vector.
    for (; i + 8 <= half; i += 8) {
      const __m256 a = _mm256_loadu_ps(cs + 2 * i), b = _mm256_loadu_ps(cs + 2 * i + 8);
      const __m256 c = _mm256_castpd_ps(_mm256_permute4x64_pd(
          _mm256_castps_pd(_mm256_shuffle_ps(a, b, _MM_SHUFFLE(2, 0, 2, 0))), _MM_SHUFFLE(3, 1, 2, 0)));
      const __m256 s = _mm256_castpd_ps(_mm256_permute4x64_pd(
          _mm256_castps_pd(_mm256_shuffle_ps(a, b, _MM_SHUFFLE(3, 1, 3, 1))), _MM_SHUFFLE(3, 1, 2, 0)));
      const __m256 x0 = _mm256_loadu_ps(p + i), x1 = _mm256_loadu_ps(p + i + half);
      _mm256_storeu_ps(p + i, _mm256_sub_ps(_mm256_mul_ps(x0, c), _mm256_mul_ps(x1, s)));
      _mm256_storeu_ps(p + i + half, _mm256_add_ps(_mm256_mul_ps(x0, s), _mm256_mul_ps(x1, c)));
    }
    for (; i < half; ++i) {
      const float x0 = p[i], x1 = p[i + half], c = cs[2 * i], s = cs[2 * i + 1];
      p[i] = x0 * c - x1 * s;
      p[i + half] = x0 * s + x1 * c;
    }
  }
}

void SiluMul(float* gate, const float* up, int64_t n) {
  // exp stays libm's (a vectorised exp would round differently from the reference); the
  // division and the product run eight at a time.
  alignas(32) float e[8];
  const __m256 one = _mm256_set1_ps(1.0f);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int j = 0; j < 8; ++j) e[j] = std::exp(-gate[i + j]);
    const __m256 g = _mm256_loadu_ps(gate + i);
    const __m256 silu = _mm256_div_ps(g, _mm256_add_ps(one, _mm256_load_ps(e)));
    _mm256_storeu_ps(gate + i, _mm256_mul_ps(silu, _mm256_loadu_ps(up + i)));
  }
  for (; i < n; ++i) {
    const float g = gate[i];
    gate[i] = (g / (1.0f + std::exp(-g))) * up[i];
  }
}

void Add(float* y, const float* x, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_add_ps(_mm256_loadu_ps(y + i), _mm256_loadu_ps(x + i)));
  for (; i < n; ++i) y[i] += x[i];
}

float Dot(const float* a, const float* b, int64_t n) {
  __m256 acc = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) acc = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc);
  float sum = HorizontalSum(acc);
  for (; i < n; ++i) sum += a[i] * b[i];
  return sum;
}

void Axpy(float a, const float* x, float* y, int64_t n) {
  const __m256 av = _mm256_set1_ps(a);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(y + i, _mm256_fmadd_ps(av, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
  }
  for (; i < n; ++i) y[i] = std::fma(a, x[i], y[i]);
}

// e^x for x <= 0 (x - max of a row), as the AVX-512 table's: x = n ln 2 + r with n = round(x /
// ln 2) and ln 2 in two parts, e^r by its Taylor series to r^7, times 2^n. 2^n is built in the
// exponent bits in two halves, each a normal float: the first product is exact, the second
// rounds once, to a subnormal where the result is one (as the AVX-512 table's vscalefps).
// Within 2 ulp of the correctly rounded value; exp(0) is exactly 1. NaN stays NaN; below -104
// gives 0.
inline __m256 ExpNonPositive(__m256 x) {
  x = _mm256_max_ps(_mm256_set1_ps(-104.0f), x);  // a NaN x is the second operand: kept
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693145751953125f), x);  // ln 2's top 16 bits
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(1.4286068202862268e-6f), r);  // the rest of ln 2
  __m256 p = _mm256_set1_ps(1.0f / 5040);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 720));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  const __m256i ni = _mm256_cvtps_epi32(n);  // -151 .. 0
  const __m256i n1 = _mm256_srai_epi32(ni, 1);
  const auto pow2 = [](__m256i k) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(k, _mm256_set1_epi32(127)), 23));
  };
  return _mm256_mul_ps(_mm256_mul_ps(p, pow2(n1)), pow2(_mm256_sub_epi32(ni, n1)));
}

// The maximum of s[0, n), NaN ignored (the scalar loop's comparison).
float Max8(const float* s, int64_t n) {
  __m256 mv = _mm256_set1_ps(-INFINITY);
  int64_t t = 0;
  for (; t + 8 <= n; t += 8) mv = _mm256_max_ps(_mm256_loadu_ps(s + t), mv);  // a NaN lane: the second operand kept
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, mv);
  float max = -INFINITY;
  for (const float v : lanes) max = v > max ? v : max;
  for (; t < n; ++t) max = s[t] > max ? s[t] : max;
  return max;
}

// exp(s[t] - max) for t < n, 8 at a time, each passed to `store(t, e)` (the tail one at a time,
// lane 0 of e) and summed in double: the 8-wide part in two vectors of 4 (lanes t % 8 < 4 and
// >= 4), added and then summed lane by lane, then the tail in order.
template <class Store>
double ExpSumFrom(const float* s, int64_t n, float max, Store&& store) {
  const __m256 m = _mm256_set1_ps(max);
  __m256d lo = _mm256_setzero_pd(), hi = _mm256_setzero_pd();
  int64_t t = 0;
  for (; t + 8 <= n; t += 8) {
    const __m256 e = ExpNonPositive(_mm256_sub_ps(_mm256_loadu_ps(s + t), m));
    store(t, e);
    lo = _mm256_add_pd(lo, _mm256_cvtps_pd(_mm256_castps256_ps128(e)));
    hi = _mm256_add_pd(hi, _mm256_cvtps_pd(_mm256_extractf128_ps(e, 1)));
  }
  alignas(32) double wide[4];
  _mm256_store_pd(wide, _mm256_add_pd(lo, hi));
  double sum = 0.0;
  for (const double v : wide) sum += v;
  for (; t < n; ++t) {
    const __m256 e = ExpNonPositive(_mm256_set1_ps(s[t] - max));
    store(t, e);
    sum += static_cast<double>(_mm256_cvtss_f32(e));
  }
  return sum;
}

// OpKernels::exp_sum: the maximum, then the exponentials in place and their sum (ExpSumFrom).
double ExpSum8(float* s, int64_t n) {
  return ExpSumFrom(s, n, Max8(s, n), [s, n](int64_t t, __m256 e) {
    if (t + 8 <= n) {
      _mm256_storeu_ps(s + t, e);
    } else {
      s[t] = _mm256_cvtss_f32(e);
    }
  });
}

// OpKernels::log_sum_exp: the same sum, nothing stored; the maximum added back in double.
double LogSumExp8(const float* x, int64_t n) {
  const float max = Max8(x, n);
  return static_cast<double>(max) + std::log(ExpSumFrom(x, n, max, [](int64_t, __m256) {}));
}

// Dot of kQ queries with each of n keys, each key piece loaded once for all of them: every score
// the bits Dot gives it (its 8 lanes, the horizontal sum, the unfused tail).
template <int kQ>
void KeyDotsOf(const float* const* q, float* const* out, const float* const* keys, int n, int64_t hd) {
  for (int j = 0; j < n; ++j) {
    __m256 acc[kQ];
    for (int t = 0; t < kQ; ++t) acc[t] = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 8 <= hd; i += 8) {
      const __m256 k = _mm256_loadu_ps(keys[j] + i);
      for (int t = 0; t < kQ; ++t) acc[t] = _mm256_fmadd_ps(_mm256_loadu_ps(q[t] + i), k, acc[t]);
    }
    for (int t = 0; t < kQ; ++t) {
      float sum = HorizontalSum(acc[t]);
      for (int64_t e = i; e < hd; ++e) sum += q[t][e] * keys[j][e];
      out[t][j] = sum;
    }
  }
}

// attention_impl.h's KeySets: four queries at a time.
void KeySets8(const float* const* q, float* const* out, int m, const float* const* keys, int n, int64_t hd) {
  int s = 0;
  for (; s + 4 <= m; s += 4) KeyDotsOf<4>(q + s, out + s, keys, n, hd);
  switch (m - s) {
    case 3: KeyDotsOf<3>(q + s, out + s, keys, n, hd); break;
    case 2: KeyDotsOf<2>(q + s, out + s, keys, n, hd); break;
    case 1: KeyDotsOf<1>(q + s, out + s, keys, n, hd); break;
    default: break;
  }
}

// n Axpy calls for each of kG sets over the same rows, each row piece loaded once for all of them
// and each set's piece kept in a register across the rows: the same fused multiply-adds in the
// same order (the same bits), the tail as Axpy's std::fma.
template <int kG>
void WeightedSetsOf(const float* const* p, float* const* out, const float* const* rows, int n, int64_t hd) {
  int64_t i = 0;
  for (; i + 8 <= hd; i += 8) {
    __m256 acc[kG];
    for (int g = 0; g < kG; ++g) acc[g] = _mm256_loadu_ps(out[g] + i);
    for (int j = 0; j < n; ++j) {
      const __m256 v = _mm256_loadu_ps(rows[j] + i);
      for (int g = 0; g < kG; ++g) acc[g] = _mm256_fmadd_ps(_mm256_set1_ps(p[g][j]), v, acc[g]);
    }
    for (int g = 0; g < kG; ++g) _mm256_storeu_ps(out[g] + i, acc[g]);
  }
  for (; i < hd; ++i) {
    for (int g = 0; g < kG; ++g) {
      for (int j = 0; j < n; ++j) out[g][i] = std::fma(p[g][j], rows[j][i], out[g][i]);
    }
  }
}

// attention_impl.h's WeightedSets: four sets at a time.
void WeightedSets8(const float* const* p, float* const* out, int m, const float* const* rows, int n, int64_t hd) {
  int s = 0;
  for (; s + 4 <= m; s += 4) WeightedSetsOf<4>(p + s, out + s, rows, n, hd);
  switch (m - s) {
    case 3: WeightedSetsOf<3>(p + s, out + s, rows, n, hd); break;
    case 2: WeightedSetsOf<2>(p + s, out + s, rows, n, hd); break;
    case 1: WeightedSetsOf<1>(p + s, out + s, rows, n, hd); break;
    default: break;
  }
}

void Attention(const AttentionArgs& args) {
  AttentionWith<Dot, Axpy, EachKeyDot<Dot>, EachRowAxpy<Axpy>, ExpSum8, WeightedSets8, KeySets8>(args);
}

}  // namespace

extern constinit const OpKernels kOps = {RmsNorm, Rope, SiluMul, kernels::GeluMul, Add, Dot, Axpy, Attention, EachKeyDot<Dot>, EachRowAxpy<Axpy>,
                                                ExpSum8, LogSumExp8};

}  // namespace daisy::kernels::avx2
