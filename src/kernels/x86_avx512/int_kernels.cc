// AVX-512 + VNNI matrix kernels of the integer family (quant/int_layout.h: q4_1, q5_0, q5_1,
// iq4_nl, q2_K..q6_K, iq4_xs). One template serves every format; what differs is read from the
// format's IntLayout at compile time.
//
// Per (row group, block) and activation row, each 32-bit lane is one weight row:
//   - a step's 64 code bytes (4 elements x 16 rows) come from the planes with one or two
//     shifts and masks (Codes below), and vpdpbusd adds code * activation for 4 elements;
//   - a sub-block's dot starts from -off * xsum (so the unsigned codes need no correction),
//     then is multiplied by the row's scale (vpmulld) and added to the block's integer sum;
//   - mins (K-quants) take one vpdpwssd per pair of sub-blocks: the rows' (min, min') int16
//     pairs times the activation's (xsum, xsum') pair;
//   - at the block's end: acc += (d * dx) * isum and acc += (e * dx) * msum (or e * s).
// Integer sums are exact, so the bits of a result depend only on its weight row and activation
// row: the per-lane float operations are the same whatever the tile (batch invariance).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <type_traits>
#include <utility>

#include "kernels/activations.h"
#include "kernels/kernel_table.h"
#include "kernels/quant/int_layout.h"
#include "kernels/int_matmul.h"

namespace daisy::kernels::avx512 {
namespace {

// Calls f(integral_constant<int, I>) for I = 0..N-1, unrolled at compile time.
template <int N, class F>
inline void Unroll(F&& f) {
  [&]<int... I>(std::integer_sequence<int, I...>) { (f(std::integral_constant<int, I>{}), ...); }(
      std::make_integer_sequence<int, N>{});
}

// Shift every 16-bit lane left by N (right by -N). Plane bits move inside their byte; what
// crosses a byte boundary is masked off by the caller.
template <int N>
inline __m512i Shift(__m512i v) {
  if constexpr (N > 0) return _mm512_slli_epi16(v, N);
  else if constexpr (N < 0) return _mm512_srli_epi16(v, -N);
  else return v;
}

inline int32_t Load4(const void* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// kIq4Values + 128, in every 128-bit lane (vpshufb looks up per lane).
inline __m512i Iq4Table() {
  alignas(16) static constexpr uint8_t kTable[16] = {1, 24, 45, 63, 79, 93, 106, 118, 129, 141, 153, 166, 181, 197, 217, 241};
  return _mm512_broadcast_i32x4(_mm_load_si128(reinterpret_cast<const __m128i*>(kTable)));
}

// The 64 code values of step kStep (elements 4 kStep .. 4 kStep + 3 of the 16 rows).
template <WeightType kType, int kStep>
inline __m512i Codes(const uint8_t* blk) {
  static constexpr IntLayout L = *IntLayoutOf(kType);
  __m512i code;
  if constexpr (L.base == CodeBase::kNib) {
    // [raw | raw]: low nibbles are rows 0-7, high nibbles (upper half shifted) rows 8-15.
    const __m512i raw =
        _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + L.base_at(kStep))));
    code = _mm512_and_si512(_mm512_mask_srli_epi16(raw, 0xFFFF0000u, raw, 4), _mm512_set1_epi8(0x0f));
  } else {
    const __m512i raw = _mm512_loadu_si512(blk + L.base_at(kStep));
    code = _mm512_and_si512(Shift<-2 * (kStep % 4)>(raw), _mm512_set1_epi8(3));
  }
  if constexpr (L.high != CodeHigh::kNone) {
    constexpr bool kOne = L.high == CodeHigh::kH1;
    constexpr int kFrom = L.high_bit(kStep);
    constexpr int kTo = L.high_shift();
    constexpr char kMask = static_cast<char>((kOne ? 1 : 3) << kTo);
    const __m512i h = _mm512_loadu_si512(blk + L.high_at(kStep));
    code = _mm512_or_si512(code, _mm512_and_si512(Shift<kTo - kFrom>(h), _mm512_set1_epi8(kMask)));
  }
  if constexpr (L.table) code = _mm512_shuffle_epi8(Iq4Table(), code);
  return code;
}

template <WeightType kType>
using ViewOf = std::conditional_t<IntLayoutOf(kType)->block == 256, ActQ8KView, ActQ8View>;

// 16 rows (one row group) against kRX activation rows.
// `prefetch` (the first pass over a run of row groups: PrefetchSmallTiles) asks for the weights
// kDecodePrefetchBytes ahead as it goes, every line: a block's lines at its start (32-element
// blocks) or a pair of sub-blocks' share of them with that pair (super-blocks).
template <WeightType kType, int kRX>
void Tile(const WeightMatrix& w, const ViewOf<kType>* x, int64_t g, float* y, size_t y_stride, int r0,
          int64_t o_begin, int64_t o_end, bool prefetch) {
  static constexpr IntLayout L = *IntLayoutOf(kType);
  constexpr int kBytes = L.bytes();
  constexpr int kStepsPerSub = L.sub / 4;
  const int64_t nb = w.cols / L.block;
  const uint8_t* base = static_cast<const uint8_t*>(w.data) + g * nb * kBytes;
  const uint16_t* fs = w.scales + g * nb * kRowGroup * L.f16s();
  __m512 acc[kRX];
  for (int r = 0; r < kRX; ++r) acc[r] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* blk = base + b * kBytes;
    __m512i isum[kRX], msum[kRX];
    if constexpr (L.nsub() == 1) {
      if (prefetch) PrefetchLines<0, kBytes>(blk + kDecodePrefetchBytes);
      // A 32-element block: one sub-block, scale 1.
      for (int r = 0; r < kRX; ++r) {
        isum[r] = L.off != 0 ? _mm512_set1_epi32(-L.off * x[r].block_sum[b]) : _mm512_setzero_si512();
      }
      Unroll<8>([&](auto s) {
        const __m512i wv = Codes<kType, s.value>(blk);
        for (int r = 0; r < kRX; ++r) {
          isum[r] = _mm512_dpbusd_epi32(isum[r], wv, _mm512_set1_epi32(Load4(x[r].qs + b * 32 + s.value * 4)));
        }
      });
    } else {
      for (int r = 0; r < kRX; ++r) isum[r] = msum[r] = _mm512_setzero_si512();
      // Sums of the activation over sub-blocks (int16, pairs adjacent).
      const int16_t* xs[kRX];
      for (int r = 0; r < kRX; ++r) xs[r] = L.sub == 16 ? x[r].sum16 + b * 16 : x[r].sum32 + b * 8;
      Unroll<L.nsub() / 2>([&](auto p) {
        constexpr int P = p.value;
        constexpr int kShare = kBytes / (L.nsub() / 2);
        if (prefetch) PrefetchLines<P * kShare, (P + 1) * kShare>(blk + kDecodePrefetchBytes);
        const __m256i raw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + L.scales_at() + P * 32));
        // Each row's (scale[2P], scale[2P + 1]) as int16.
        __m512i pair;
        if constexpr (L.scales == SubScales::kNibbles) {
          pair = _mm512_and_si512(_mm512_cvtepu8_epi16(raw), _mm512_set1_epi16(0x000F));
        } else {
          pair = _mm512_cvtepi8_epi16(raw);
        }
        Unroll<2>([&](auto half) {
          constexpr int J = 2 * P + half.value;
          const __m512i scale = half.value == 0 ? _mm512_srai_epi32(_mm512_slli_epi32(pair, 16), 16)
                                                : _mm512_srai_epi32(pair, 16);
          __m512i dot[kRX];
          for (int r = 0; r < kRX; ++r) {
            dot[r] = L.off != 0 ? _mm512_set1_epi32(-L.off * xs[r][J]) : _mm512_setzero_si512();
          }
          Unroll<kStepsPerSub>([&](auto t) {
            constexpr int S = J * kStepsPerSub + t.value;
            const __m512i wv = Codes<kType, S>(blk);
            for (int r = 0; r < kRX; ++r) {
              dot[r] = _mm512_dpbusd_epi32(dot[r], wv, _mm512_set1_epi32(Load4(x[r].qs + b * L.block + S * 4)));
            }
          });
          for (int r = 0; r < kRX; ++r) isum[r] = _mm512_add_epi32(isum[r], _mm512_mullo_epi32(scale, dot[r]));
        });
        if constexpr (L.extra == Extra::kMins) {
          __m512i mins;
          if constexpr (L.scales == SubScales::kNibbles) {
            mins = _mm512_srli_epi16(_mm512_cvtepu8_epi16(raw), 4);
          } else {
            mins = _mm512_cvtepu8_epi16(
                _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + L.mins_at() + P * 32)));
          }
          for (int r = 0; r < kRX; ++r) {
            msum[r] = _mm512_dpwssd_epi32(msum[r], mins, _mm512_set1_epi32(Load4(xs[r] + 2 * P)));
          }
        }
      });
    }
    const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(fs + b * kRowGroup * L.f16s())));
    for (int r = 0; r < kRX; ++r) {
      acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[r]), _mm512_mul_ps(d, _mm512_set1_ps(x[r].d[b])), acc[r]);
    }
    if constexpr (L.extra != Extra::kNone) {
      const __m512 e = _mm512_cvtph_ps(
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(fs + b * kRowGroup * L.f16s() + kRowGroup)));
      for (int r = 0; r < kRX; ++r) {
        if constexpr (L.extra == Extra::kMins) {
          acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(msum[r]), _mm512_mul_ps(e, _mm512_set1_ps(x[r].d[b])), acc[r]);
        } else {
          acc[r] = _mm512_fmadd_ps(e, _mm512_set1_ps(x[r].s[b]), acc[r]);
        }
      }
    }
  }
  const int64_t first = std::max<int64_t>(o_begin, g * kRowGroup);
  const int64_t last = std::min<int64_t>({o_end, g * kRowGroup + kRowGroup, w.rows});
  const __mmask16 keep = static_cast<__mmask16>(((1u << (last - first)) - 1) << (first - g * kRowGroup));
  for (int r = 0; r < kRX; ++r) _mm512_mask_storeu_ps(y + (r0 + r) * y_stride + g * kRowGroup, keep, acc[r]);
}

}  // namespace

template <WeightType kType>
void IntMatmul(const WeightMatrix& w, const void* act, size_t act_stride, int n_rows, float* y, size_t y_stride,
               int64_t o_begin, int64_t o_end) {
  static constexpr IntLayout L = *IntLayoutOf(kType);
  using View = ViewOf<kType>;
  const int64_t g_begin = o_begin / kRowGroup, g_end = (o_end + kRowGroup - 1) / kRowGroup;
  // Activation rows per pass over a row group: each row keeps 2 (32-element formats), 3
  // (super-blocks without mins: iq4_xs, q6_K, q3_K) or 4 (with mins) accumulators in registers;
  // 8, 6 and 5 rows leave room for the codes (5 measured ~3% faster than 4 for q4_K/q5_K, 6 than
  // 4 ~8-14% for iq4_xs/q6_K/q3_K). More rows are split into passes of nearly equal size.
  constexpr int kMaxRX = L.nsub() == 1 ? 8 : L.extra == Extra::kMins ? 5 : 6;
  const int passes = (n_rows + kMaxRX - 1) / kMaxRX;
  // Row groups in runs of about 256 KiB of weights, which stay in L2 while every pass reads them.
  const int64_t per_run = std::max<int64_t>(1, (256 << 10) / (static_cast<int64_t>(L.bytes()) * (w.cols / L.block)));
  for (int64_t gb = g_begin; gb < g_end; gb += per_run) {
    const int64_t ge = std::min(g_end, gb + per_run);
    for (int p = 0, r = 0; p < passes; ++p) {
      View x[kMaxRX];
      const int n = n_rows / passes + (p < n_rows % passes ? 1 : 0);
      for (int j = 0; j < n; ++j) {
        const void* row = static_cast<const uint8_t*>(act) + (r + j) * act_stride;
        if constexpr (std::is_same_v<View, ActQ8KView>) {
          x[j] = ViewActQ8K(row, w.cols);
        } else {
          x[j] = ViewActQ8(row, w.cols);
        }
      }
      const bool pf = p == 0 && PrefetchSmallTiles();  // later passes read the run from L2
      for (int64_t g = gb; g < ge; ++g) {
        if constexpr (kMaxRX == 8) {
          switch (n) {
            case 8: Tile<kType, 8>(w, x, g, y, y_stride, r, o_begin, o_end, pf); break;
            case 7: Tile<kType, 7>(w, x, g, y, y_stride, r, o_begin, o_end, pf); break;
            default: break;
          }
        }
        if constexpr (kMaxRX >= 5) {
          switch (n) {
            case 6: Tile<kType, 6>(w, x, g, y, y_stride, r, o_begin, o_end, pf); break;
            case 5: Tile<kType, 5>(w, x, g, y, y_stride, r, o_begin, o_end, pf); break;
            default: break;
          }
        }
        switch (n) {
          case 4: Tile<kType, 4>(w, x, g, y, y_stride, r, o_begin, o_end, pf); break;
          case 3: Tile<kType, 3>(w, x, g, y, y_stride, r, o_begin, o_end, pf); break;
          case 2: Tile<kType, 2>(w, x, g, y, y_stride, r, o_begin, o_end, pf); break;
          case 1: Tile<kType, 1>(w, x, g, y, y_stride, r, o_begin, o_end, pf); break;
          default: break;
        }
      }
      r += n;
    }
  }
}

template <WeightType kType>
void SignedCodeTiles(const WeightMatrix& w, int64_t g, int8_t* out) {
  static constexpr IntLayout L = *IntLayoutOf(kType);
  const int64_t nb = w.cols / L.block;
  const uint8_t* base = static_cast<const uint8_t*>(w.data) + g * nb * L.bytes();
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* blk = base + b * L.bytes();
    int8_t* o = out + b * (L.block / 4) * 64;
    Unroll<L.block / 4>([&](auto s) {
      const __m512i code = Codes<kType, s.value>(blk);
      _mm512_storeu_si512(o + s.value * 64, _mm512_sub_epi8(code, _mm512_set1_epi8(static_cast<char>(L.off))));
    });
  }
}
template void SignedCodeTiles<WeightType::kQ4K>(const WeightMatrix&, int64_t, int8_t*);
template void SignedCodeTiles<WeightType::kQ5K>(const WeightMatrix&, int64_t, int8_t*);
template void SignedCodeTiles<WeightType::kIq4Xs>(const WeightMatrix&, int64_t, int8_t*);

template void IntMatmul<WeightType::kQ4_1>(const WeightMatrix&, const void*, size_t, int, float*, size_t, int64_t, int64_t);
template void IntMatmul<WeightType::kQ5_0>(const WeightMatrix&, const void*, size_t, int, float*, size_t, int64_t, int64_t);
template void IntMatmul<WeightType::kQ5_1>(const WeightMatrix&, const void*, size_t, int, float*, size_t, int64_t, int64_t);
template void IntMatmul<WeightType::kIq4Nl>(const WeightMatrix&, const void*, size_t, int, float*, size_t, int64_t, int64_t);
template void IntMatmul<WeightType::kQ2K>(const WeightMatrix&, const void*, size_t, int, float*, size_t, int64_t, int64_t);
template void IntMatmul<WeightType::kQ3K>(const WeightMatrix&, const void*, size_t, int, float*, size_t, int64_t, int64_t);
template void IntMatmul<WeightType::kQ4K>(const WeightMatrix&, const void*, size_t, int, float*, size_t, int64_t, int64_t);
template void IntMatmul<WeightType::kQ5K>(const WeightMatrix&, const void*, size_t, int, float*, size_t, int64_t, int64_t);
template void IntMatmul<WeightType::kQ6K>(const WeightMatrix&, const void*, size_t, int, float*, size_t, int64_t, int64_t);
template void IntMatmul<WeightType::kIq4Xs>(const WeightMatrix&, const void*, size_t, int, float*, size_t, int64_t, int64_t);

}  // namespace daisy::kernels::avx512
