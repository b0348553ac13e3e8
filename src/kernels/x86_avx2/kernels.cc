// AVX2 + FMA + F16C kernels. Compiled with those flags; called only on CPUs that have them.
//
// Every dot product keeps one 8-lane float accumulator and walks its row in order, whatever
// tile it is computed in, so a (weight row, activation row) pair gives the same bits alone or
// in a batch (the KernelTable contract). Tiles only share loads between dots.
#include <immintrin.h>

#include "kernels/activations.h"
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

// ---- quantised weights x q8 activations -------------------------------------------------

// Integer dot of one block as 8 int32 lanes (lane i = elements 4i..4i+3).
template <WeightType kType>
inline __m256i BlockDot(__m256i w, const int8_t* xq, const int32_t* bias) {
  const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq));
  const __m256i ones = _mm256_set1_epi16(1);
  if constexpr (kType == WeightType::kQ4_0) {
    // nibbles (0..15) * q, pairs fit int16; start from -8 * lane sums: sum((n - 8) * q).
    const __m256i p16 = _mm256_maddubs_epi16(w, x);
    const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(bias));
    return _mm256_add_epi32(_mm256_madd_epi16(p16, ones), b);
  } else {
    // |w| * (q with w's sign): products of signed bytes through the unsigned-signed multiply.
    const __m256i p16 = _mm256_maddubs_epi16(_mm256_sign_epi8(w, w), _mm256_sign_epi8(x, w));
    return _mm256_madd_epi16(p16, ones);
  }
}

template <WeightType kType, int kRO, int kRX>
void QTile(const WeightMatrix& w, const ActQ8View* x, int64_t o0, float* y, size_t y_stride,
           int r0) {
  // Blocks go in pairs (the packed layout pads rows to an even count; padding adds exactly 0).
  const int64_t nbp = PaddedBlocks(w.cols);
  constexpr int64_t kPairBytes = kType == WeightType::kQ4_0 ? 32 : 64;
  const uint8_t* rows[kRO];
  const float* ws[kRO];
  for (int i = 0; i < kRO; ++i) {
    rows[i] = static_cast<const uint8_t*>(w.data) + (o0 + i) * (nbp / 2) * kPairBytes;
    ws[i] = w.scales + (o0 + i) * nbp;
  }
  __m256 acc[kRO][kRX];
  for (int i = 0; i < kRO; ++i) {
    for (int j = 0; j < kRX; ++j) acc[i][j] = _mm256_setzero_ps();
  }
  const __m256i mask = _mm256_set1_epi8(0x0f);
  for (int64_t b = 0; b < nbp; b += 2) {
#pragma GCC unroll 4
    for (int i = 0; i < kRO; ++i) {
      __m256i w0, w1;
      const uint8_t* q = rows[i] + (b / 2) * kPairBytes;
      if constexpr (kType == WeightType::kQ4_0) {
        const __m256i raw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q));
        w0 = _mm256_and_si256(raw, mask);
        w1 = _mm256_and_si256(_mm256_srli_epi16(raw, 4), mask);
      } else {
        w0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q));
        w1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + 32));
      }
#pragma GCC unroll 4
      for (int j = 0; j < kRX; ++j) {
        const __m256i d0 = BlockDot<kType>(w0, x[j].qs + b * kQBlock, x[j].lane_bias + b * 8);
        acc[i][j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(d0), _mm256_set1_ps(ws[i][b] * x[j].d[b]),
                                    acc[i][j]);
        const __m256i d1 =
            BlockDot<kType>(w1, x[j].qs + (b + 1) * kQBlock, x[j].lane_bias + (b + 1) * 8);
        acc[i][j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(d1),
                                    _mm256_set1_ps(ws[i][b + 1] * x[j].d[b + 1]), acc[i][j]);
      }
    }
  }
  for (int i = 0; i < kRO; ++i) {
    for (int j = 0; j < kRX; ++j) y[(r0 + j) * y_stride + o0 + i] = HorizontalSum(acc[i][j]);
  }
}

template <WeightType kType, int kRX>
void QRows(const WeightMatrix& w, const ActQ8View* x, int r0, float* y, size_t y_stride,
           int64_t o_begin, int64_t o_end) {
  int64_t o = o_begin;
  for (; o + 4 <= o_end; o += 4) QTile<kType, 4, kRX>(w, x, o, y, y_stride, r0);
  for (; o < o_end; ++o) QTile<kType, 1, kRX>(w, x, o, y, y_stride, r0);
}

template <WeightType kType>
void QMatmul(const WeightMatrix& w, const void* act, size_t act_stride, int n_rows, float* y,
             size_t y_stride, int64_t o_begin, int64_t o_end) {
  // Output rows in blocks that stay in cache while every activation row passes over them.
  constexpr int64_t kOBlock = 64;
  for (int64_t ob = o_begin; ob < o_end; ob += kOBlock) {
    const int64_t oe = ob + kOBlock < o_end ? ob + kOBlock : o_end;
    int r = 0;
    for (; r < n_rows; r += 2) {
      ActQ8View x[2];
      const int n = n_rows - r >= 2 ? 2 : 1;
      for (int j = 0; j < n; ++j) {
        x[j] = ViewActQ8(static_cast<const uint8_t*>(act) + (r + j) * act_stride, w.cols);
      }
      if (n == 2) {
        QRows<kType, 2>(w, x, r, y, y_stride, ob, oe);
      } else {
        QRows<kType, 1>(w, x, r, y, y_stride, ob, oe);
      }
    }
  }
}

// ---- float weights x float activations --------------------------------------------------

template <WeightType kType>
inline __m256 LoadW8(const void* data, int64_t index) {
  if constexpr (kType == WeightType::kF32) {
    return _mm256_loadu_ps(static_cast<const float*>(data) + index);
  } else if constexpr (kType == WeightType::kF16) {
    return _mm256_cvtph_ps(
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(static_cast<const uint16_t*>(data) + index)));
  } else {
    const __m128i h = _mm_loadu_si128(
        reinterpret_cast<const __m128i*>(static_cast<const uint16_t*>(data) + index));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  }
}

template <WeightType kType, int kRO, int kRX>
void FTile(const WeightMatrix& w, const float* const* x, int64_t o0, float* y, size_t y_stride,
           int r0) {
  const int64_t n = w.cols;
  __m256 acc[kRO][kRX];
  for (int i = 0; i < kRO; ++i) {
    for (int j = 0; j < kRX; ++j) acc[i][j] = _mm256_setzero_ps();
  }
  for (int64_t k = 0; k < n; k += 8) {
    for (int i = 0; i < kRO; ++i) {
      const __m256 wv = LoadW8<kType>(w.data, (o0 + i) * n + k);
      for (int j = 0; j < kRX; ++j) {
        acc[i][j] = _mm256_fmadd_ps(wv, _mm256_loadu_ps(x[j] + k), acc[i][j]);
      }
    }
  }
  for (int i = 0; i < kRO; ++i) {
    for (int j = 0; j < kRX; ++j) y[(r0 + j) * y_stride + o0 + i] = HorizontalSum(acc[i][j]);
  }
}

template <WeightType kType>
void FMatmul(const WeightMatrix& w, const void* act, size_t act_stride, int n_rows, float* y,
             size_t y_stride, int64_t o_begin, int64_t o_end) {
  constexpr int64_t kOBlock = 32;
  for (int64_t ob = o_begin; ob < o_end; ob += kOBlock) {
    const int64_t oe = ob + kOBlock < o_end ? ob + kOBlock : o_end;
    for (int r = 0; r < n_rows; r += 2) {
      const float* x[2];
      const int n = n_rows - r >= 2 ? 2 : 1;
      for (int j = 0; j < n; ++j) {
        x[j] = reinterpret_cast<const float*>(static_cast<const uint8_t*>(act) +
                                              (r + j) * act_stride);
      }
      int64_t o = ob;
      if (n == 2) {
        for (; o + 4 <= oe; o += 4) FTile<kType, 4, 2>(w, x, o, y, y_stride, r);
        for (; o < oe; ++o) FTile<kType, 1, 2>(w, x, o, y, y_stride, r);
      } else {
        for (; o + 4 <= oe; o += 4) FTile<kType, 4, 1>(w, x, o, y, y_stride, r);
        for (; o < oe; ++o) FTile<kType, 1, 1>(w, x, o, y, y_stride, r);
      }
    }
  }
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
  for (; i < n; ++i) y[i] += a * x[i];
}

}  // namespace

const KernelTable& Table() {
  static const KernelTable table = {
      "avx2",
      {FMatmul<WeightType::kF32>, FMatmul<WeightType::kF16>, FMatmul<WeightType::kBF16>,
       QMatmul<WeightType::kQ8_0>, QMatmul<WeightType::kQ4_0>},
      Dot,
      Axpy};
  return table;
}

}  // namespace daisy::kernels::avx2
