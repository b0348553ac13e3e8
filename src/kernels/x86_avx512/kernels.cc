// AVX-512 (F, BW, VL, DQ) + VNNI kernels. Compiled with those flags; called only on CPUs that
// have them.
//
// Quantised dots take two 32-element blocks per 512-bit register: VNNI's vpdpbusd multiplies
// unsigned weight bytes by signed activation bytes and adds each 4-element group into an int32
// lane, the lanes are scaled by their block's (weight scale * activation scale) and summed into
// one float accumulator per dot. As in the AVX2 file, a dot's arithmetic never depends on the
// tile it is computed in (the KernelTable batch-invariance contract).
// g++ 12's AVX-512 headers build some results from _mm*_undefined_*() and then warn that the
// value is used uninitialised (a known false positive); our code never reads undefined lanes.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include "kernels/activations.h"
#include "kernels/kernel_table.h"

namespace daisy::kernels::avx512 {
namespace {

// [a x8 | b x8] from two consecutive floats.
inline __m512 PairBroadcast(const float* p) {
  const __m512i idx = _mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0);
  const __m128 two = _mm_castpd_ps(_mm_load_sd(reinterpret_cast<const double*>(p)));
  return _mm512_permutexvar_ps(idx, _mm512_castps128_ps512(two));
}

// 64 weights (blocks b, b+1) as bytes. q4_0: the two blocks' 32 packed bytes become
// [lo(b) hi(b) lo(b+1) hi(b+1)] nibbles, i.e. element order.
template <WeightType kType>
inline __m512i LoadPair(const uint8_t* q) {
  if constexpr (kType == WeightType::kQ4_0) {
    const __m512i raw = _mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(q)));
    const __m512i dup = _mm512_shuffle_i64x2(raw, raw, _MM_SHUFFLE(1, 1, 0, 0));
    // Shift the odd 128-bit lanes right by 4 (their high nibbles), then keep 4 bits.
    const __m512i shifted = _mm512_mask_srli_epi16(dup, 0xFF00FF00u, dup, 4);
    return _mm512_and_si512(shifted, _mm512_set1_epi8(0x0f));
  } else {
    return _mm512_loadu_si512(q);
  }
}

template <WeightType kType>
inline __m512i PairDot(__m512i w, __m512i w_abs, __mmask64 w_neg, const int8_t* xq,
                       const int32_t* bias) {
  const __m512i x = _mm512_loadu_si512(xq);
  if constexpr (kType == WeightType::kQ4_0) {
    // nibbles 0..15 times q, starting from -8 * lane sums: sum((nibble - 8) * q) per lane.
    return _mm512_dpbusd_epi32(_mm512_loadu_si512(bias), w, x);
  } else {
    (void)w;
    (void)bias;
    // |w| * (q with w's sign).
    const __m512i xs = _mm512_mask_sub_epi8(x, w_neg, _mm512_setzero_si512(), x);
    return _mm512_dpbusd_epi32(_mm512_setzero_si512(), w_abs, xs);
  }
}

template <WeightType kType, int kRO, int kRX>
void QTile(const WeightMatrix& w, const ActQ8View* x, int64_t o0, float* y, size_t y_stride,
           int r0) {
  const int64_t nb = w.cols / kQBlock;
  constexpr int64_t kBlockBytes = kType == WeightType::kQ4_0 ? 16 : 32;
  const uint8_t* rows[kRO];
  const float* ws[kRO];
  for (int i = 0; i < kRO; ++i) {
    rows[i] = static_cast<const uint8_t*>(w.data) + (o0 + i) * nb * kBlockBytes;
    ws[i] = w.scales + (o0 + i) * nb;
  }
  __m512 acc[kRO][kRX];
  for (int i = 0; i < kRO; ++i) {
    for (int j = 0; j < kRX; ++j) acc[i][j] = _mm512_setzero_ps();
  }
  // Pairs of blocks; an odd last block is handled with the upper half masked off.
  for (int64_t b = 0; b < nb; b += 2) {
    const bool pair = b + 1 < nb;
    __m512 xd[kRX];
    for (int j = 0; j < kRX; ++j) {
      xd[j] = pair ? PairBroadcast(x[j].d + b) : _mm512_maskz_mov_ps(0x00FF, _mm512_set1_ps(x[j].d[b]));
    }
    for (int i = 0; i < kRO; ++i) {
      __m512i wv;
      if (pair) {
        wv = LoadPair<kType>(rows[i] + b * kBlockBytes);
      } else if constexpr (kType == WeightType::kQ4_0) {
        const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(rows[i] + b * 16));
        const __m128i m = _mm_set1_epi8(0x0f);
        const __m256i one = _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(raw, 4), m), _mm_and_si128(raw, m));
        wv = _mm512_castsi256_si512(one);
        wv = _mm512_maskz_mov_epi64(0x0F, wv);
      } else {
        wv = _mm512_maskz_loadu_epi8(0xFFFFFFFFull, rows[i] + b * kBlockBytes);
      }
      const __m512i w_abs = kType == WeightType::kQ8_0 ? _mm512_abs_epi8(wv) : wv;
      const __mmask64 w_neg = kType == WeightType::kQ8_0 ? _mm512_movepi8_mask(wv) : 0;
      const __m512 wd = pair ? PairBroadcast(ws[i] + b)
                             : _mm512_maskz_mov_ps(0x00FF, _mm512_set1_ps(ws[i][b]));
      for (int j = 0; j < kRX; ++j) {
        __m512i d;
        if (pair) {
          d = PairDot<kType>(wv, w_abs, w_neg, x[j].qs + b * kQBlock, x[j].lane_bias + b * 8);
        } else {
          // Zero-extend the last block's activations so the upper lanes contribute 0.
          const __m512i xq = _mm512_maskz_loadu_epi8(0xFFFFFFFFull, x[j].qs + b * kQBlock);
          const __m512i bias = kType == WeightType::kQ4_0
                                   ? _mm512_maskz_loadu_epi32(0x00FF, x[j].lane_bias + b * 8)
                                   : _mm512_setzero_si512();
          const __m512i xs = kType == WeightType::kQ8_0
                                 ? _mm512_mask_sub_epi8(xq, w_neg, _mm512_setzero_si512(), xq)
                                 : xq;
          d = _mm512_dpbusd_epi32(bias, w_abs, xs);
        }
        acc[i][j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(d), _mm512_mul_ps(wd, xd[j]), acc[i][j]);
      }
    }
  }
  for (int i = 0; i < kRO; ++i) {
    for (int j = 0; j < kRX; ++j) y[(r0 + j) * y_stride + o0 + i] = _mm512_reduce_add_ps(acc[i][j]);
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
  constexpr int64_t kOBlock = 64;
  for (int64_t ob = o_begin; ob < o_end; ob += kOBlock) {
    const int64_t oe = ob + kOBlock < o_end ? ob + kOBlock : o_end;
    for (int r = 0; r < n_rows; r += 4) {
      ActQ8View x[4];
      const int n = n_rows - r >= 4 ? 4 : n_rows - r;
      for (int j = 0; j < n; ++j) {
        x[j] = ViewActQ8(static_cast<const uint8_t*>(act) + (r + j) * act_stride, w.cols);
      }
      switch (n) {
        case 4: QRows<kType, 4>(w, x, r, y, y_stride, ob, oe); break;
        case 3: QRows<kType, 3>(w, x, r, y, y_stride, ob, oe); break;
        case 2: QRows<kType, 2>(w, x, r, y, y_stride, ob, oe); break;
        default: QRows<kType, 1>(w, x, r, y, y_stride, ob, oe); break;
      }
    }
  }
}

// ---- float weights ----------------------------------------------------------------------

template <WeightType kType>
inline __m512 LoadW16(const void* data, int64_t index) {
  if constexpr (kType == WeightType::kF32) {
    return _mm512_loadu_ps(static_cast<const float*>(data) + index);
  } else if constexpr (kType == WeightType::kF16) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(
        reinterpret_cast<const __m256i*>(static_cast<const uint16_t*>(data) + index)));
  } else {
    const __m256i h = _mm256_loadu_si256(
        reinterpret_cast<const __m256i*>(static_cast<const uint16_t*>(data) + index));
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
}

template <WeightType kType, int kRO, int kRX>
void FTile(const WeightMatrix& w, const float* const* x, int64_t o0, float* y, size_t y_stride,
           int r0) {
  const int64_t n = w.cols;
  __m512 acc[kRO][kRX];
  for (int i = 0; i < kRO; ++i) {
    for (int j = 0; j < kRX; ++j) acc[i][j] = _mm512_setzero_ps();
  }
  for (int64_t k = 0; k < n; k += 16) {
    for (int i = 0; i < kRO; ++i) {
      const __m512 wv = LoadW16<kType>(w.data, (o0 + i) * n + k);
      for (int j = 0; j < kRX; ++j) {
        acc[i][j] = _mm512_fmadd_ps(wv, _mm512_loadu_ps(x[j] + k), acc[i][j]);
      }
    }
  }
  for (int i = 0; i < kRO; ++i) {
    for (int j = 0; j < kRX; ++j) y[(r0 + j) * y_stride + o0 + i] = _mm512_reduce_add_ps(acc[i][j]);
  }
}

template <WeightType kType, int kRX>
void FRows(const WeightMatrix& w, const float* const* x, int r0, float* y, size_t y_stride,
           int64_t ob, int64_t oe) {
  int64_t o = ob;
  for (; o + 4 <= oe; o += 4) FTile<kType, 4, kRX>(w, x, o, y, y_stride, r0);
  for (; o < oe; ++o) FTile<kType, 1, kRX>(w, x, o, y, y_stride, r0);
}

template <WeightType kType>
void FMatmul(const WeightMatrix& w, const void* act, size_t act_stride, int n_rows, float* y,
             size_t y_stride, int64_t o_begin, int64_t o_end) {
  constexpr int64_t kOBlock = 32;
  for (int64_t ob = o_begin; ob < o_end; ob += kOBlock) {
    const int64_t oe = ob + kOBlock < o_end ? ob + kOBlock : o_end;
    for (int r = 0; r < n_rows; r += 4) {
      const float* x[4];
      const int n = n_rows - r >= 4 ? 4 : n_rows - r;
      for (int j = 0; j < n; ++j) {
        x[j] = reinterpret_cast<const float*>(static_cast<const uint8_t*>(act) +
                                              (r + j) * act_stride);
      }
      switch (n) {
        case 4: FRows<kType, 4>(w, x, r, y, y_stride, ob, oe); break;
        case 3: FRows<kType, 3>(w, x, r, y, y_stride, ob, oe); break;
        case 2: FRows<kType, 2>(w, x, r, y, y_stride, ob, oe); break;
        default: FRows<kType, 1>(w, x, r, y, y_stride, ob, oe); break;
      }
    }
  }
}

float Dot(const float* a, const float* b, int64_t n) {
  __m512 acc = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) acc = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), acc);
  if (i < n) {
    const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1);
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
    const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1);
    _mm512_mask_storeu_ps(y + i, m,
                          _mm512_fmadd_ps(av, _mm512_maskz_loadu_ps(m, x + i),
                                          _mm512_maskz_loadu_ps(m, y + i)));
  }
}

}  // namespace

const KernelTable& Table() {
  static const KernelTable table = {
      "avx512",
      {FMatmul<WeightType::kF32>, FMatmul<WeightType::kF16>, FMatmul<WeightType::kBF16>,
       QMatmul<WeightType::kQ8_0>, QMatmul<WeightType::kQ4_0>},
      Dot,
      Axpy};
  return table;
}

}  // namespace daisy::kernels::avx512
