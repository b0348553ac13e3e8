// AVX-512 element-wise ops (ops.h). Compiled with -ffp-contract=off: rms_norm, rope, silu_mul
// and add give the scalar reference's bits (same operations per element, in the same order);
// dot and axpy use fused multiply-adds where they say so.
// g++ 12's AVX-512 headers build some results from _mm*_undefined_*() and then warn that the
// value is used uninitialised (a known false positive); our code never reads undefined lanes.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <cmath>

#include "kernels/attention_impl.h"
#include "kernels/kernel_table.h"

namespace daisy::kernels::avx512 {
namespace {

inline __mmask16 Tail(int64_t left) { return static_cast<__mmask16>((1u << left) - 1); }

void RmsNorm(const float* x, const float* w, int64_t d, float eps, float* y) {
  // The squares in SIMD, their sum in double and in order (as the reference), the scaling in
  // SIMD: (x * scale) * w, two roundings per element as there.
  double sum = 0.0;
  int64_t i = 0;
  alignas(64) float sq[16];
  for (; i + 16 <= d; i += 16) {
    const __m512 v = _mm512_loadu_ps(x + i);
    _mm512_store_ps(sq, _mm512_mul_ps(v, v));
    for (float s : sq) sum += static_cast<double>(s);
  }
  for (; i < d; ++i) sum += static_cast<double>(x[i] * x[i]);
  const float mean = static_cast<float>(sum / static_cast<double>(d));
  const float scale = 1.0f / std::sqrt(mean + eps);
  const __m512 sv = _mm512_set1_ps(scale);
  for (i = 0; i < d; i += 16) {
    const __mmask16 m = d - i >= 16 ? static_cast<__mmask16>(0xffff) : Tail(d - i);
    const __m512 v = _mm512_mul_ps(_mm512_mul_ps(_mm512_maskz_loadu_ps(m, x + i), sv), _mm512_maskz_loadu_ps(m, w + i));
    _mm512_mask_storeu_ps(y + i, m, v);
  }
}

void Rope(float* v, int n_heads, int head_dim, const float* cs, RopeMode mode) {
  const int half = head_dim / 2;
  // Negates the even lanes: x*c + (-(x1*s)) is x*c - x1*s to the bit.
  const __m512 even_sign = _mm512_castsi512_ps(_mm512_set4_epi32(0, INT32_MIN, 0, INT32_MIN));
  const __m512i even = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
  const __m512i odd = _mm512_set_epi32(31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
  for (int h = 0; h < n_heads; ++h) {
    float* p = v + static_cast<int64_t>(h) * head_dim;
    int i = 0;
    if (mode == RopeMode::kNorm) {
      // Eight pairs (x0, x1) at a time: even lanes x0*c - x1*s, odd lanes x1*c + x0*s.
      for (; i + 8 <= half; i += 8) {
        const __m512 x = _mm512_loadu_ps(p + 2 * i);
        const __m512 t = _mm512_loadu_ps(cs + 2 * i);
        const __m512 c = _mm512_moveldup_ps(t);
        const __m512 s = _mm512_movehdup_ps(t);
        const __m512 rot = _mm512_xor_ps(_mm512_mul_ps(_mm512_permute_ps(x, 0xb1), s), even_sign);
        _mm512_storeu_ps(p + 2 * i, _mm512_add_ps(_mm512_mul_ps(x, c), rot));
      }
      for (; i < half; ++i) {
        const float x0 = p[2 * i], x1 = p[2 * i + 1], c = cs[2 * i], s = cs[2 * i + 1];
        p[2 * i] = x0 * c - x1 * s;
        p[2 * i + 1] = x0 * s + x1 * c;
      }
      continue;
    }
    // kNeox: sixteen rotations at a time; the (c, s) pairs split into a c and an s vector.
    for (; i + 16 <= half; i += 16) {
      const __m512 a = _mm512_loadu_ps(cs + 2 * i), b = _mm512_loadu_ps(cs + 2 * i + 16);
      const __m512 c = _mm512_permutex2var_ps(a, even, b);
      const __m512 s = _mm512_permutex2var_ps(a, odd, b);
      const __m512 x0 = _mm512_loadu_ps(p + i), x1 = _mm512_loadu_ps(p + i + half);
      _mm512_storeu_ps(p + i, _mm512_sub_ps(_mm512_mul_ps(x0, c), _mm512_mul_ps(x1, s)));
      _mm512_storeu_ps(p + i + half, _mm512_add_ps(_mm512_mul_ps(x0, s), _mm512_mul_ps(x1, c)));
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
  // division and the product run sixteen at a time.
  alignas(64) float e[16];
  const __m512 one = _mm512_set1_ps(1.0f);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    for (int j = 0; j < 16; ++j) e[j] = std::exp(-gate[i + j]);
    const __m512 g = _mm512_loadu_ps(gate + i);
    const __m512 silu = _mm512_div_ps(g, _mm512_add_ps(one, _mm512_load_ps(e)));
    _mm512_storeu_ps(gate + i, _mm512_mul_ps(silu, _mm512_loadu_ps(up + i)));
  }
  for (; i < n; ++i) {
    const float g = gate[i];
    gate[i] = (g / (1.0f + std::exp(-g))) * up[i];
  }
}

void Add(float* y, const float* x, int64_t n) {
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? static_cast<__mmask16>(0xffff) : Tail(n - i);
    _mm512_mask_storeu_ps(y + i, m, _mm512_add_ps(_mm512_maskz_loadu_ps(m, y + i), _mm512_maskz_loadu_ps(m, x + i)));
  }
}

float Dot(const float* a, const float* b, int64_t n) {
  __m512 acc = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) acc = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), acc);
  if (i < n) {
    const __mmask16 m = Tail(n - i);
    acc = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, a + i), _mm512_maskz_loadu_ps(m, b + i), acc);
  }
  return _mm512_reduce_add_ps(acc);
}

void Axpy(float a, const float* x, float* y, int64_t n) {
  const __m512 av = _mm512_set1_ps(a);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    _mm512_storeu_ps(y + i, _mm512_fmadd_ps(av, _mm512_loadu_ps(x + i), _mm512_loadu_ps(y + i)));
  }
  if (i < n) {
    const __mmask16 m = Tail(n - i);
    _mm512_mask_storeu_ps(y + i, m,
                          _mm512_fmadd_ps(av, _mm512_maskz_loadu_ps(m, x + i), _mm512_maskz_loadu_ps(m, y + i)));
  }
}

// Sixteen dots at once (attention's KeyDots): each (query, key) pair's lane sequence is Dot's
// (LaneDots16: one accumulator, fused multiply-adds in order, the same masked tail), then the
// sixteen accumulators are summed across lanes together, pairing lanes as Dot's
// _mm512_reduce_add_ps does with GCC (i + 8, then i + 4, i + 2, i + 1), by shuffles that keep
// each pair's sums apart (SumEach16). A score's bits depend only on its query and key; one
// horizontal sum per 16 scores instead of per score.
//
// acc[j] = query . k[j] lane by lane over hd floats, for 16 (query, key) pairs: lane l gets
// elements l, l + 16, ... in order (fused), as in Dot.
template <int kQueries>  // 1 or 2: pair j has query q[j * kQueries / 16]
inline void LaneDots16(const float* const* q, const float* const* k, int64_t hd, __m512 (&acc)[16]) {
  for (int j = 0; j < 16; ++j) acc[j] = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= hd; i += 16) {
    __m512 qv[kQueries];
    for (int t = 0; t < kQueries; ++t) qv[t] = _mm512_loadu_ps(q[t] + i);
    for (int j = 0; j < 16; ++j) acc[j] = _mm512_fmadd_ps(qv[j * kQueries / 16], _mm512_loadu_ps(k[j] + i), acc[j]);
  }
  if (i < hd) {
    const __mmask16 m = Tail(hd - i);
    __m512 qv[kQueries];
    for (int t = 0; t < kQueries; ++t) qv[t] = _mm512_maskz_loadu_ps(m, q[t] + i);
    for (int j = 0; j < 16; ++j) {
      acc[j] = _mm512_fmadd_ps(qv[j * kQueries / 16], _mm512_maskz_loadu_ps(m, k[j] + i), acc[j]);
    }
  }
}

// Lane j of the result: acc[j]'s lanes summed in _mm512_reduce_add_ps's tree (i + 8, + 4, + 2,
// + 1), the 16 sums transposed together.
inline __m512 SumEach16(const __m512 (&acc)[16]) {
  // Lane i + lane i + 8: sums j and j + 8 share a vector, [b_j | b_j+8] (8 lanes each).
  __m512 b[8];
  for (int j = 0; j < 8; ++j) {
    b[j] = _mm512_add_ps(_mm512_shuffle_f32x4(acc[j], acc[j + 8], _MM_SHUFFLE(1, 0, 1, 0)),
                         _mm512_shuffle_f32x4(acc[j], acc[j + 8], _MM_SHUFFLE(3, 2, 3, 2)));
  }
  // + lane i + 4: [c_j | c_j+8 | c_j+4 | c_j+12] (4 lanes each) from b[j] and b[j + 4].
  __m512 c[4];
  for (int j = 0; j < 4; ++j) {
    c[j] = _mm512_add_ps(_mm512_shuffle_f32x4(b[j], b[j + 4], _MM_SHUFFLE(2, 0, 2, 0)),
                         _mm512_shuffle_f32x4(b[j], b[j + 4], _MM_SHUFFLE(3, 1, 3, 1)));
  }
  // + lane i + 2, within each 128-bit lane: [d_j, d_j+2] per lane from c[j] and c[j + 2].
  __m512 d[2];
  for (int j = 0; j < 2; ++j) {
    d[j] = _mm512_add_ps(_mm512_shuffle_ps(c[j], c[j + 2], _MM_SHUFFLE(1, 0, 1, 0)),
                         _mm512_shuffle_ps(c[j], c[j + 2], _MM_SHUFFLE(3, 2, 3, 2)));
  }
  // + lane i + 1: per 128-bit lane the sums (0, 2, 1, 3) + 8 (lane 1), + 4 (lane 2), + 12.
  const __m512 e = _mm512_add_ps(_mm512_shuffle_ps(d[0], d[1], _MM_SHUFFLE(2, 0, 2, 0)),
                                 _mm512_shuffle_ps(d[0], d[1], _MM_SHUFFLE(3, 1, 3, 1)));
  const __m512i order = _mm512_setr_epi32(0, 2, 1, 3, 8, 10, 9, 11, 4, 6, 5, 7, 12, 14, 13, 15);
  return _mm512_permutexvar_ps(order, e);
}

void KeyDots16(const float* q, const float* const* keys, int n, int64_t hd, float* out) {
  const float* k[kKeyBlock];
  for (int j = 0; j < kKeyBlock; ++j) k[j] = keys[j < n ? j : 0];
  __m512 acc[kKeyBlock];
  LaneDots16<1>(&q, k, hd, acc);
  _mm512_mask_storeu_ps(out, Tail(n), SumEach16(acc));
}

// KeyDots16 for several queries against the same keys: two queries at a time, eight keys each
// pass, so each key piece is loaded once for both; every score the bits KeyDots16 gives it.
void KeySets16(const float* const* q, float* const* out, int m, const float* const* keys, int n, int64_t hd) {
  int s = 0;
  for (; s + 2 <= m; s += 2) {
    for (int base = 0; base < n; base += 8) {
      const int kn = std::min(8, n - base);
      const float* k[16];
      for (int j = 0; j < 8; ++j) k[j] = k[j + 8] = keys[base + (j < kn ? j : 0)];
      __m512 acc[16];
      LaneDots16<2>(q + s, k, hd, acc);
      const __m512 r = SumEach16(acc);
      const __mmask8 keep = static_cast<__mmask8>((1u << kn) - 1);
      _mm256_mask_storeu_ps(out[s] + base, keep, _mm512_castps512_ps256(r));
      _mm256_mask_storeu_ps(out[s + 1] + base, keep, _mm512_extractf32x8_ps(r, 1));
    }
  }
  if (s < m) KeyDots16(q[s], keys, n, hd, out[s]);
}

// Axpy over up to 16 rows with each 16-float piece of `out` kept in a register across them: the
// same fused multiply-add per element in the same order as n Axpy calls (the same bits), without
// storing and reloading `out` after every row.
void WeightedRows16(const float* p, const float* const* rows, int n, int64_t hd, float* out) {
  int64_t i = 0;
  for (; i + 16 <= hd; i += 16) {
    __m512 acc = _mm512_loadu_ps(out + i);
    for (int j = 0; j < n; ++j) acc = _mm512_fmadd_ps(_mm512_set1_ps(p[j]), _mm512_loadu_ps(rows[j] + i), acc);
    _mm512_storeu_ps(out + i, acc);
  }
  if (i < hd) {
    const __mmask16 m = Tail(hd - i);
    __m512 acc = _mm512_maskz_loadu_ps(m, out + i);
    for (int j = 0; j < n; ++j) acc = _mm512_fmadd_ps(_mm512_set1_ps(p[j]), _mm512_maskz_loadu_ps(m, rows[j] + i), acc);
    _mm512_mask_storeu_ps(out + i, m, acc);
  }
}

// WeightedRows16 for kG sets at once over the same rows: each row's piece loaded once for all of
// them; each set's fused multiply-adds in the same order as WeightedRows16's (the same bits).
template <int kG>
void WeightedSetsOf(const float* const* p, float* const* out, const float* const* rows, int n, int64_t hd) {
  for (int64_t i = 0; i < hd; i += 16) {
    const __mmask16 m = hd - i >= 16 ? static_cast<__mmask16>(0xffff) : Tail(hd - i);
    __m512 acc[kG];
    for (int g = 0; g < kG; ++g) acc[g] = _mm512_maskz_loadu_ps(m, out[g] + i);
    for (int j = 0; j < n; ++j) {
      const __m512 v = _mm512_maskz_loadu_ps(m, rows[j] + i);
      for (int g = 0; g < kG; ++g) acc[g] = _mm512_fmadd_ps(_mm512_set1_ps(p[g][j]), v, acc[g]);
    }
    for (int g = 0; g < kG; ++g) _mm512_mask_storeu_ps(out[g] + i, m, acc[g]);
  }
}

void WeightedSets16(const float* const* p, float* const* out, int m, const float* const* rows, int n, int64_t hd) {
  int s = 0;
  for (; s + 8 <= m; s += 8) WeightedSetsOf<8>(p + s, out + s, rows, n, hd);
  switch (m - s) {
    case 7: WeightedSetsOf<7>(p + s, out + s, rows, n, hd); break;
    case 6: WeightedSetsOf<6>(p + s, out + s, rows, n, hd); break;
    case 5: WeightedSetsOf<5>(p + s, out + s, rows, n, hd); break;
    case 4: WeightedSetsOf<4>(p + s, out + s, rows, n, hd); break;
    case 3: WeightedSetsOf<3>(p + s, out + s, rows, n, hd); break;
    case 2: WeightedSetsOf<2>(p + s, out + s, rows, n, hd); break;
    case 1: WeightedSetsOf<1>(p + s, out + s, rows, n, hd); break;
    default: break;
  }
}

// exp(x) for x <= 0, 16 at a time: x = n ln 2 + r with |r| <= ln 2 / 2 (ln 2 in two parts, so r
// is exact to a float's precision), e^r by its Taylor series to r^7 (the first term left out is
// below 6e-9 relative), times 2^n by vscalefps (which also rounds the results below 2^-126 to
// subnormals and zero as a multiplication would). Within 2 ulp of the correctly rounded value;
// exp(0) is exactly 1. NaN stays NaN; below -104 (e^-104 is under the smallest subnormal) gives 0.
inline __m512 ExpNonPositive(__m512 x) {
  x = _mm512_max_ps(_mm512_set1_ps(-104.0f), x);  // a NaN x is the second operand: kept
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693145751953125f), x);  // ln 2's top 16 bits
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(1.4286068202862268e-6f), r);  // the rest of ln 2
  __m512 p = _mm512_set1_ps(1.0f / 5040);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 720));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  return _mm512_scalef_ps(p, n);
}

// The maximum of s[0, n). A NaN lane is the first operand: max_ps returns the second (the
// maximum ignores NaN, as the scalar loop does).
float Max16(const float* s, int64_t n) {
  __m512 mv = _mm512_set1_ps(-INFINITY);
  int64_t t = 0;
  for (; t + 16 <= n; t += 16) mv = _mm512_max_ps(_mm512_loadu_ps(s + t), mv);
  float max = _mm512_reduce_max_ps(mv);
  for (; t < n; ++t) max = s[t] > max ? s[t] : max;
  return max;
}

// exp(s[t] - max) for t < n, 16 at a time, each passed to `store` (with its tail mask) and
// summed in double in two vectors of 8 (lanes t % 16 < 8 and >= 8), which are added and then
// summed lane by lane.
template <class Store>
double ExpSumFrom(const float* s, int64_t n, float max, Store&& store) {
  const __m512 m = _mm512_set1_ps(max);
  __m512d lo = _mm512_setzero_pd(), hi = _mm512_setzero_pd();
  auto add = [&](__m512 e) {
    lo = _mm512_add_pd(lo, _mm512_cvtps_pd(_mm512_castps512_ps256(e)));
    hi = _mm512_add_pd(hi, _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(e), 1))));
  };
  int64_t t = 0;
  for (; t + 16 <= n; t += 16) {
    const __m512 e = ExpNonPositive(_mm512_sub_ps(_mm512_loadu_ps(s + t), m));
    store(t, e, static_cast<__mmask16>(0xffff));
    add(e);
  }
  if (t < n) {
    const __mmask16 k = Tail(n - t);
    const __m512 e = _mm512_maskz_mov_ps(k, ExpNonPositive(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, s + t), m)));
    store(t, e, k);
    add(e);
  }
  alignas(64) double lanes[8];
  _mm512_store_pd(lanes, _mm512_add_pd(lo, hi));
  double sum = 0.0;
  for (const double v : lanes) sum += v;
  return sum;
}

// OpKernels::exp_sum: the maximum, then the exponentials in place and their sum (ExpSumFrom).
double ExpSum16(float* s, int64_t n) {
  return ExpSumFrom(s, n, Max16(s, n), [s](int64_t t, __m512 e, __mmask16 k) { _mm512_mask_storeu_ps(s + t, k, e); });
}

// OpKernels::log_sum_exp: the same sum, nothing stored; the maximum added back in double.
double LogSumExp16(const float* x, int64_t n) {
  const float max = Max16(x, n);
  return static_cast<double>(max) + std::log(ExpSumFrom(x, n, max, [](int64_t, __m512, __mmask16) {}));
}

void Attention(const AttentionArgs& args) {
  AttentionWith<Dot, Axpy, KeyDots16, WeightedRows16, ExpSum16, WeightedSets16, KeySets16>(args);
}

}  // namespace

extern constinit const OpKernels kOps = {RmsNorm, Rope, SiluMul, kernels::GeluMul, Add, Dot, Axpy, Attention, KeyDots16, WeightedRows16,
                                                ExpSum16, LogSumExp16};

}  // namespace daisy::kernels::avx512
