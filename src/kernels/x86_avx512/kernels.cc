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
  __m512 acc[kRO][kRX];
  for (int i = 0; i < kRO; ++i) {
    for (int j = 0; j < kRX; ++j) acc[i][j] = _mm512_setzero_ps();
  }
  const __m512i mask = _mm512_set1_epi8(0x0f);
  for (int64_t b = 0; b < nbp; b += 2) {
    __m512i xq[kRX], xb[kRX];
    __m512 xd[kRX];
#pragma GCC unroll 4
    for (int j = 0; j < kRX; ++j) {
      xq[j] = _mm512_loadu_si512(x[j].qs + b * kQBlock);
      if constexpr (kType == WeightType::kQ4_0) xb[j] = _mm512_loadu_si512(x[j].lane_bias + b * 8);
      xd[j] = PairBroadcast(x[j].d + b);
    }
#pragma GCC unroll 4
    for (int i = 0; i < kRO; ++i) {
      const uint8_t* q = rows[i] + (b / 2) * kPairBytes;
      const __m512 wd = PairBroadcast(ws[i] + b);
      if constexpr (kType == WeightType::kQ4_0) {
        // [raw | raw]: low nibbles are block b, high nibbles (upper half shifted) block b+1.
        const __m512i raw =
            _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(q)));
        const __m512i wv = _mm512_and_si512(_mm512_mask_srli_epi16(raw, 0xFFFF0000u, raw, 4), mask);
#pragma GCC unroll 4
        for (int j = 0; j < kRX; ++j) {
          // nibbles 0..15 times q, from -8 * lane sums: sum((nibble - 8) * q) per lane.
          const __m512i d = _mm512_dpbusd_epi32(xb[j], wv, xq[j]);
          acc[i][j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(d), _mm512_mul_ps(wd, xd[j]), acc[i][j]);
        }
      } else {
        const __m512i wv = _mm512_loadu_si512(q);
        const __m512i w_abs = _mm512_abs_epi8(wv);
        const __mmask64 w_neg = _mm512_movepi8_mask(wv);
#pragma GCC unroll 4
        for (int j = 0; j < kRX; ++j) {
          // |w| * (q with w's sign).
          const __m512i xs = _mm512_mask_sub_epi8(xq[j], w_neg, _mm512_setzero_si512(), xq[j]);
          const __m512i d = _mm512_dpbusd_epi32(_mm512_setzero_si512(), w_abs, xs);
          acc[i][j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(d), _mm512_mul_ps(wd, xd[j]), acc[i][j]);
        }
      }
    }
  }
  for (int i = 0; i < kRO; ++i) {
    for (int j = 0; j < kRX; ++j) y[(r0 + j) * y_stride + o0 + i] = _mm512_reduce_add_ps(acc[i][j]);
  }
}

// One activation row (decode): the per-block scale products are formed 16 blocks at a time
// (two loads and a multiply), and each pair's [s x8 | s' x8] vector is one permute of them.
// Same arithmetic per dot as QTile: scale products are the same float multiplications.
template <WeightType kType, int kRO>
void QTileOneRow(const WeightMatrix& w, const ActQ8View& x, int64_t o0, float* y, size_t y_stride,
                 int r0) {
  const int64_t nbp = PaddedBlocks(w.cols);
  constexpr int64_t kPairBytes = kType == WeightType::kQ4_0 ? 32 : 64;
  const uint8_t* rows[kRO];
  const float* ws[kRO];
  for (int i = 0; i < kRO; ++i) {
    rows[i] = static_cast<const uint8_t*>(w.data) + (o0 + i) * (nbp / 2) * kPairBytes;
    ws[i] = w.scales + (o0 + i) * nbp;
  }
  __m512 acc[kRO];
  for (int i = 0; i < kRO; ++i) acc[i] = _mm512_setzero_ps();
  const __m512i mask = _mm512_set1_epi8(0x0f);
  for (int64_t g = 0; g < nbp; g += 16) {
    const int64_t left = nbp - g;  // even, >= 2
    const __mmask16 m = left >= 16 ? 0xFFFF : static_cast<__mmask16>((1u << left) - 1);
    const __m512 xs16 = _mm512_maskz_loadu_ps(m, x.d + g);
    __m512 sc[kRO];
    for (int i = 0; i < kRO; ++i) sc[i] = _mm512_mul_ps(_mm512_maskz_loadu_ps(m, ws[i] + g), xs16);
    const int64_t pairs = left >= 16 ? 8 : left / 2;
    const auto step = [&](int64_t p, __m512i pick) {
      const int64_t b = g + 2 * p;
      const __m512i xq = _mm512_loadu_si512(x.qs + b * kQBlock);
      __m512i xb = _mm512_setzero_si512();
      if constexpr (kType == WeightType::kQ4_0) xb = _mm512_loadu_si512(x.lane_bias + b * 8);
#pragma GCC unroll 8
      for (int i = 0; i < kRO; ++i) {
        const uint8_t* q = rows[i] + (b / 2) * kPairBytes;
        // Several rows stream at once: prefetch ahead so each stream keeps DRAM busy.
        if ((p & 1) == 0) _mm_prefetch(reinterpret_cast<const char*>(q) + 1024, _MM_HINT_T0);
        __m512i d;
        if constexpr (kType == WeightType::kQ4_0) {
          const __m512i raw =
              _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(q)));
          const __m512i wv =
              _mm512_and_si512(_mm512_mask_srli_epi16(raw, 0xFFFF0000u, raw, 4), mask);
          d = _mm512_dpbusd_epi32(xb, wv, xq);
        } else {
          const __m512i wv = _mm512_loadu_si512(q);
          const __m512i xs = _mm512_mask_sub_epi8(xq, _mm512_movepi8_mask(wv),
                                                  _mm512_setzero_si512(), xq);
          d = _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_abs_epi8(wv), xs);
        }
        acc[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(d), _mm512_permutexvar_ps(pick, sc[i]), acc[i]);
      }
    };
    const __m512i base = _mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0);
    if (pairs == 8) {
      // Constant pick vectors: the compiler keeps them in registers.
      step(0, base);
      step(1, _mm512_add_epi32(base, _mm512_set1_epi32(2)));
      step(2, _mm512_add_epi32(base, _mm512_set1_epi32(4)));
      step(3, _mm512_add_epi32(base, _mm512_set1_epi32(6)));
      step(4, _mm512_add_epi32(base, _mm512_set1_epi32(8)));
      step(5, _mm512_add_epi32(base, _mm512_set1_epi32(10)));
      step(6, _mm512_add_epi32(base, _mm512_set1_epi32(12)));
      step(7, _mm512_add_epi32(base, _mm512_set1_epi32(14)));
    } else {
      for (int64_t p = 0; p < pairs; ++p) {
        step(p, _mm512_add_epi32(base, _mm512_set1_epi32(static_cast<int>(2 * p))));
      }
    }
  }
  for (int i = 0; i < kRO; ++i) y[r0 * y_stride + o0 + i] = _mm512_reduce_add_ps(acc[i]);
}

template <WeightType kType, int kRX>
void QRows(const WeightMatrix& w, const ActQ8View* x, int r0, float* y, size_t y_stride,
           int64_t o_begin, int64_t o_end) {
  int64_t o = o_begin;
  if constexpr (kRX == 1) {
    for (; o + 2 <= o_end; o += 2) QTileOneRow<kType, 2>(w, x[0], o, y, y_stride, r0);
    for (; o < o_end; ++o) QTileOneRow<kType, 1>(w, x[0], o, y, y_stride, r0);
    return;
  }
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
