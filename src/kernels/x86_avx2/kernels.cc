// AVX2 + FMA + F16C kernels. Compiled with those flags; called only on CPUs that have them.
//
// Every dot product keeps one 8-lane float accumulator and walks its row in order, whatever
// tile it is computed in, so a (weight row, activation row) pair gives the same bits alone or
// in a batch (the KernelTable contract). Tiles only share loads between dots.
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "kernels/activations.h"
#include "kernels/int_matmul.h"
#include "kernels/kernel_table.h"
#include "kernels/quant/q4_0.h"
#include "kernels/quant/q8_0.h"

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

// 16 interleaved rows (one row group) against kRX activation rows; rows 0-7 of the group in
// one 8-lane accumulator, rows 8-15 in another. Per block: exact integer dots over eight
// 4-element steps, then one conversion and multiply-add per accumulator (see the AVX-512 file;
// the per-lane operation sequence does not depend on kRX). `prefetch` (the first pass over the
// weights: PrefetchSmallTiles) asks for every line kDecodePrefetchBytes ahead, a block at a time.
template <WeightType kType, int kRX>
void GroupTile(const WeightMatrix& w, const ActQ8View* x, int64_t g, float* y, size_t y_stride,
               int r0, int64_t o_begin, int64_t o_end, bool prefetch) {
  const int64_t nb = w.cols / kQBlock;
  constexpr int64_t kGroupBlockBytes = kType == WeightType::kQ4_0 ? kQ4_0GroupBlockBytes : kQ8_0GroupBlockBytes;
  const uint8_t* q = static_cast<const uint8_t*>(w.data) + g * nb * kGroupBlockBytes;
  const uint16_t* ws = w.scales + g * nb * kRowGroup;
  const __m256i mask = _mm256_set1_epi8(0x0f);
  const __m256i ones = _mm256_set1_epi16(1);
  const __m256i bias128 = _mm256_set1_epi8(static_cast<char>(0x80));
  __m256 acc[kRX][2];
  for (int j = 0; j < kRX; ++j) acc[j][0] = acc[j][1] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    __m256i iacc[kRX][2];
    // q4_0: pair sums of code (0..15) x q (-127..127) are within +-3810, so the eight steps of
    // a block add up in int16 (at most +-30480) and widen once per block; q8_0's products need
    // int32 at every step. Integer sums are exact either way: the bits do not change.
    __m256i hacc[kRX][2];
    for (int j = 0; j < kRX; ++j) {
      if constexpr (kType == WeightType::kQ4_0) {
        hacc[j][0] = hacc[j][1] = _mm256_setzero_si256();
      } else {
        iacc[j][0] = iacc[j][1] = _mm256_setzero_si256();
      }
    }
    const uint8_t* qb = q + b * kGroupBlockBytes;
    if (prefetch) PrefetchLines<0, kGroupBlockBytes>(qb + kDecodePrefetchBytes);
#pragma GCC unroll 8
    for (int s = 0; s < 8; ++s) {
      __m256i w0, w1;
      if constexpr (kType == WeightType::kQ4_0) {
        const __m256i raw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qb + s * 32));
        w0 = _mm256_and_si256(raw, mask);
        w1 = _mm256_and_si256(_mm256_srli_epi16(raw, 4), mask);
      } else {
        // Stored as q + 128: flip the top bit back to signed.
        w0 = _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(qb + s * 64)), bias128);
        w1 = _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(qb + s * 64 + 32)), bias128);
      }
#pragma GCC unroll 8
      for (int j = 0; j < kRX; ++j) {
        int32_t four;
        std::memcpy(&four, x[j].qs + b * kQBlock + s * 4, 4);
        const __m256i xv = _mm256_set1_epi32(four);
        if constexpr (kType == WeightType::kQ4_0) {
          hacc[j][0] = _mm256_add_epi16(hacc[j][0], _mm256_maddubs_epi16(w0, xv));
          hacc[j][1] = _mm256_add_epi16(hacc[j][1], _mm256_maddubs_epi16(w1, xv));
        } else {
          // |w| * (x with w's sign): signed products through the unsigned-signed multiply.
          const __m256i p0 = _mm256_maddubs_epi16(_mm256_sign_epi8(w0, w0), _mm256_sign_epi8(xv, w0));
          const __m256i p1 = _mm256_maddubs_epi16(_mm256_sign_epi8(w1, w1), _mm256_sign_epi8(xv, w1));
          iacc[j][0] = _mm256_add_epi32(iacc[j][0], _mm256_madd_epi16(p0, ones));
          iacc[j][1] = _mm256_add_epi32(iacc[j][1], _mm256_madd_epi16(p1, ones));
        }
      }
    }
    if constexpr (kType == WeightType::kQ4_0) {
      // Nibble codes are q + 8: start from -8 * sum(x).
      for (int j = 0; j < kRX; ++j) {
        const __m256i start = _mm256_set1_epi32(-8 * x[j].block_sum[b]);
        iacc[j][0] = _mm256_add_epi32(start, _mm256_madd_epi16(hacc[j][0], ones));
        iacc[j][1] = _mm256_add_epi32(start, _mm256_madd_epi16(hacc[j][1], ones));
      }
    }
    const __m256 s0 = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(ws + b * kRowGroup)));
    const __m256 s1 =
        _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(ws + b * kRowGroup + 8)));
    for (int j = 0; j < kRX; ++j) {
      const __m256 xd = _mm256_set1_ps(x[j].d[b]);
      acc[j][0] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(iacc[j][0]), _mm256_mul_ps(s0, xd), acc[j][0]);
      acc[j][1] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(iacc[j][1]), _mm256_mul_ps(s1, xd), acc[j][1]);
    }
  }
  const int64_t first = std::max<int64_t>(o_begin, g * kRowGroup);
  const int64_t last = std::min<int64_t>({o_end, g * kRowGroup + kRowGroup, w.rows});
  for (int j = 0; j < kRX; ++j) {
    alignas(32) float out[16];
    _mm256_store_ps(out, acc[j][0]);
    _mm256_store_ps(out + 8, acc[j][1]);
    for (int64_t o = first; o < last; ++o) y[(r0 + j) * y_stride + o] = out[o - g * kRowGroup];
  }
}

template <WeightType kType>
void QMatmul(const WeightMatrix& w, const void* act, size_t act_stride, int n_rows, float* y,
             size_t y_stride, int64_t o_begin, int64_t o_end) {
  const int64_t g_begin = o_begin / kRowGroup, g_end = (o_end + kRowGroup - 1) / kRowGroup;
  constexpr int kMaxRX = 3;
  // Row groups in blocks of about 256 KiB of weights, which stay in L2 while every activation
  // row passes over them: a long prompt reads each weight from memory once.
  constexpr int64_t kGroupBytes = (kType == WeightType::kQ4_0 ? kQ4_0GroupBlockBytes : kQ8_0GroupBlockBytes) + 32;
  const int64_t per_block =
      std::max<int64_t>(1, (256 << 10) / (kGroupBytes * (w.cols / kQBlock)));
  for (int64_t gb = g_begin; gb < g_end; gb += per_block) {
    const int64_t ge = std::min(g_end, gb + per_block);
    for (int r = 0; r < n_rows; r += kMaxRX) {
      ActQ8View x[kMaxRX];
      const int n = n_rows - r >= kMaxRX ? kMaxRX : n_rows - r;
      for (int j = 0; j < n; ++j) {
        x[j] = ViewActQ8(static_cast<const uint8_t*>(act) + (r + j) * act_stride, w.cols);
      }
      const bool pf = r == 0 && PrefetchSmallTiles();  // later passes read the block from L2
      for (int64_t g = gb; g < ge; ++g) {
        switch (n) {
          case 3: GroupTile<kType, 3>(w, x, g, y, y_stride, r, o_begin, o_end, pf); break;
          case 2: GroupTile<kType, 2>(w, x, g, y, y_stride, r, o_begin, o_end, pf); break;
          default: GroupTile<kType, 1>(w, x, g, y, y_stride, r, o_begin, o_end, pf); break;
        }
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

// kPrefetch (decoding: PrefetchFloatRows) asks, line by line as it goes, for the next tile's
// weight rows, as the AVX-512 file does (each row is a stream about a page long).
template <WeightType kType, int kRO, int kRX, bool kPrefetch = false>
void FTile(const WeightMatrix& w, const float* const* x, int64_t o0, float* y, size_t y_stride,
           int r0) {
  const int64_t n = w.cols;
  constexpr int64_t kElem = kType == WeightType::kF32 ? 4 : 2;
  __m256 acc[kRO][kRX];
  for (int i = 0; i < kRO; ++i) {
    for (int j = 0; j < kRX; ++j) acc[i][j] = _mm256_setzero_ps();
  }
  for (int64_t k = 0; k < n; k += 8) {
    if constexpr (kPrefetch) {
      if ((k * kElem) % 64 == 0) {
        for (int i = 0; i < kRO; ++i) {
          _mm_prefetch(static_cast<const char*>(w.data) + ((o0 + kRO + i) * n + k) * kElem, _MM_HINT_T0);
        }
      }
    }
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
  const bool prefetch = PrefetchFloatRows();
  for (int64_t ob = o_begin; ob < o_end; ob += kOBlock) {
    const int64_t oe = ob + kOBlock < o_end ? ob + kOBlock : o_end;
    for (int r = 0; r < n_rows; r += 2) {
      const float* x[2];
      const int n = n_rows - r >= 2 ? 2 : 1;
      const bool pf = prefetch && r == 0;  // the first pass reads the rows from memory; later ones from cache
      for (int j = 0; j < n; ++j) {
        x[j] = reinterpret_cast<const float*>(static_cast<const uint8_t*>(act) +
                                              (r + j) * act_stride);
      }
      int64_t o = ob;
      if (n == 2) {
        if (pf) {
          for (; o + 4 <= oe; o += 4) FTile<kType, 4, 2, true>(w, x, o, y, y_stride, r);
        }
        for (; o + 4 <= oe; o += 4) FTile<kType, 4, 2>(w, x, o, y, y_stride, r);
        for (; o < oe; ++o) FTile<kType, 1, 2>(w, x, o, y, y_stride, r);
      } else {
        if (pf) {
          for (; o + 4 <= oe; o += 4) FTile<kType, 4, 1, true>(w, x, o, y, y_stride, r);
        }
        for (; o + 4 <= oe; o += 4) FTile<kType, 4, 1>(w, x, o, y, y_stride, r);
        for (; o < oe; ++o) FTile<kType, 1, 1>(w, x, o, y, y_stride, r);
      }
    }
  }
}

}  // namespace

extern constinit const MatmulKernel kMatmuls[] = {
    {WeightType::kF32, FMatmul<WeightType::kF32>},   {WeightType::kF16, FMatmul<WeightType::kF16>},
    {WeightType::kBF16, FMatmul<WeightType::kBF16>}, {WeightType::kQ8_0, QMatmul<WeightType::kQ8_0>},
    {WeightType::kQ4_0, QMatmul<WeightType::kQ4_0>},
    {WeightType::kQ4_1, IntMatmul<WeightType::kQ4_1>},   {WeightType::kQ5_0, IntMatmul<WeightType::kQ5_0>},
    {WeightType::kQ5_1, IntMatmul<WeightType::kQ5_1>},   {WeightType::kIq4Nl, IntMatmul<WeightType::kIq4Nl>},
    {WeightType::kQ2K, IntMatmul<WeightType::kQ2K>},     {WeightType::kQ3K, IntMatmul<WeightType::kQ3K>},
    {WeightType::kQ4K, IntMatmul<WeightType::kQ4K>},     {WeightType::kQ5K, IntMatmul<WeightType::kQ5K>},
    {WeightType::kQ6K, IntMatmul<WeightType::kQ6K>},     {WeightType::kIq4Xs, IntMatmul<WeightType::kIq4Xs>},
};
extern constinit const size_t kMatmulCount = sizeof(kMatmuls) / sizeof(kMatmuls[0]);

}  // namespace daisy::kernels::avx2
