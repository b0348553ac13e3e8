// AVX2 matrix kernels of the integer family (quant/int_layout.h), one template for every format
// (see the AVX-512 file for the arithmetic). AVX2 has no vpdpbusd: a step's products go through
// vpmaddubsw (code x activation, adjacent pairs summed into int16), several steps add up in int16
// while they cannot overflow, then vpmaddwd by the rows' scales widens them into the int32 sums.
// The 16 rows of a group are done as two halves of 8 (one 8-lane register each), which keeps a
// tile's accumulators in the 16 registers. Offsets of scaled formats are taken off at the end of
// the block from the scale-weighted activation sums (vpmaddwd on the (scale, scale') pairs).
// iq4 codes are looked up as their signed values, products taken as |code| x (sign-adjusted x),
// so no offset is needed. Integer sums are exact: the results are the AVX-512 file's bits up to
// float rounding, and each dot's float operations do not depend on the tile (batch invariance).
//
// Up to 4 activation rows share a pass over a half (every format: a block's code bytes are
// unpacked once for all of them). A half-tile is `flatten`: g++ 12 left the step lambdas as calls
// (their accumulator arrays then live in memory), which halved the K-quants' and iq4_xs's speed
// (docs/benchmarks.md, "AVX2-only hosts"). It needs -O3 as well: at -O2 the row loops stay loops
// over arrays and the kernels run at half speed.
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <type_traits>
#include <utility>

#include "kernels/activations.h"
#include "kernels/int_matmul.h"
#include "kernels/kernel_table.h"
#include "kernels/quant/int_layout.h"

namespace daisy::kernels::avx2 {
namespace {

template <int N, class F>
inline void Unroll(F&& f) {
  [&]<int... I>(std::integer_sequence<int, I...>) { (f(std::integral_constant<int, I>{}), ...); }(
      std::make_integer_sequence<int, N>{});
}

template <int N>
inline __m256i Shift(__m256i v) {
  if constexpr (N > 0) return _mm256_slli_epi16(v, N);
  else if constexpr (N < 0) return _mm256_srli_epi16(v, -N);
  else return v;
}

// An empty asm that takes and gives back v in a register: the sum chain before it cannot be
// reassociated with the one after. The signed formats (iq4) widen every step's products into
// the int32 sums; g++ 12 regrouped those 64 additions a block into trees whose partial sums went
// to the stack (the 4-row iq4_xs tile: ~530 stack accesses a block, ~125 pinned; matmul of 128
// rows -31%). The other formats add 2-8 steps in int16 first; pinning their sums measured no
// clear gain (this host's noise) and is not done.
inline void Pin(__m256i& v) { asm("" : "+x"(v)); }

inline int32_t Load4(const void* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

inline __m256i Iq4SignedTable() {
  alignas(16) static constexpr int8_t kTable[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                                    1,    13,   25,  38,  53,  69,  89,  113};
  return _mm256_broadcastsi128_si256(_mm_load_si128(reinterpret_cast<const __m128i*>(kTable)));
}

// Step kStep's 32 code bytes for rows 8 kHalf .. 8 kHalf + 7 (iq4: the signed values).
template <WeightType kType, int kStep, int kHalf>
inline __m256i Codes(const uint8_t* blk) {
  static constexpr IntLayout L = *IntLayoutOf(kType);
  __m256i code;
  if constexpr (L.base == CodeBase::kNib) {
    const __m256i raw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + L.base_at(kStep)));
    code = _mm256_and_si256(kHalf == 0 ? raw : _mm256_srli_epi16(raw, 4), _mm256_set1_epi8(0x0f));
  } else {
    const __m256i raw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + L.base_at(kStep) + kHalf * 32));
    code = _mm256_and_si256(Shift<-2 * (kStep % 4)>(raw), _mm256_set1_epi8(3));
  }
  if constexpr (L.high != CodeHigh::kNone) {
    constexpr bool kOne = L.high == CodeHigh::kH1;
    constexpr int kFrom = L.high_bit(kStep);
    constexpr int kTo = L.high_shift();
    constexpr char kMask = static_cast<char>((kOne ? 1 : 3) << kTo);
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + L.high_at(kStep) + kHalf * 32));
    code = _mm256_or_si256(code, _mm256_and_si256(Shift<kTo - kFrom>(h), _mm256_set1_epi8(kMask)));
  }
  if constexpr (L.table) code = _mm256_shuffle_epi8(Iq4SignedTable(), code);
  return code;
}

template <WeightType kType>
using ViewOf = std::conditional_t<IntLayoutOf(kType)->block == 256, ActQ8KView, ActQ8View>;

constexpr int Log2(int v) { return v <= 1 ? 0 : 1 + Log2(v / 2); }

// Rows 8 kH0 .. 8 (kH0 + kNH) - 1 of row group g (one half or both) against kRX activation rows.
// `prefetch` (the first pass over a run of row groups: PrefetchSmallTiles): the pass over the
// lower half (or both) asks for the weights kDecodePrefetchBytes ahead as it goes, every line
// (the upper half's pass reads them from cache).
template <WeightType kType, int kRX, int kH0, int kNH>
[[gnu::flatten]] void HalfTile(const WeightMatrix& w, const ViewOf<kType>* x, int64_t g, float* y,
                               size_t y_stride, int r0, int64_t o_begin, int64_t o_end, bool prefetch) {
  static constexpr IntLayout L = *IntLayoutOf(kType);
  constexpr int kBytes = L.bytes();
  constexpr int kStepsPerSub = L.sub / 4;
  constexpr bool kSigned = L.table;
  constexpr int kOff = kSigned ? 0 : L.off;
  // Steps whose int16 pair sums cannot overflow: 2 * max code * 127 per step.
  constexpr int kFlush = kSigned ? 1 : std::min(kStepsPerSub, 32767 / (2 * L.code_max() * 127));
  static_assert(kFlush >= 1 && kStepsPerSub % kFlush == 0);
  const int64_t nb = w.cols / L.block;
  const uint8_t* base = static_cast<const uint8_t*>(w.data) + g * nb * kBytes;
  const uint16_t* fs = w.scales + g * nb * kRowGroup * L.f16s();
  const __m256i ones = _mm256_set1_epi16(1);
  __m256 acc[kRX][kNH];
  for (int r = 0; r < kRX; ++r) {
    for (int h = 0; h < kNH; ++h) acc[r][h] = _mm256_setzero_ps();
  }
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* blk = base + b * kBytes;
    __m256i isum[kRX][kNH], msum[kRX][kNH];
    for (int r = 0; r < kRX; ++r) {
      for (int h = 0; h < kNH; ++h) isum[r][h] = msum[r][h] = _mm256_setzero_si256();
    }
    // Products of one step for every activation row and half, added to hacc (int16 pairs).
    auto step = [&](auto s, __m256i (*hacc)[kNH], auto xq_of) {
      Unroll<kNH>([&](auto hh) {
        constexpr int h = hh.value;
        const __m256i wv = Codes<kType, decltype(s)::value, kH0 + h>(blk);
        const __m256i aw = kSigned ? _mm256_sign_epi8(wv, wv) : wv;
        for (int r = 0; r < kRX; ++r) {
          __m256i xv = _mm256_set1_epi32(Load4(xq_of(r)));
          if constexpr (kSigned) xv = _mm256_sign_epi8(xv, wv);
          hacc[r][h] = _mm256_add_epi16(hacc[r][h], _mm256_maddubs_epi16(aw, xv));
        }
      });
    };
    if constexpr (L.nsub() == 1) {
      if (kH0 == 0 && prefetch) PrefetchLines<0, kBytes>(blk + kDecodePrefetchBytes);
      Unroll<8 / kFlush>([&](auto f) {
        __m256i hacc[kRX][kNH];
        for (int r = 0; r < kRX; ++r) {
          for (int h = 0; h < kNH; ++h) hacc[r][h] = _mm256_setzero_si256();
        }
        Unroll<kFlush>([&](auto t) {
          constexpr int S = f.value * kFlush + t.value;
          step(std::integral_constant<int, S>{}, hacc, [&](int r) { return x[r].qs + b * 32 + S * 4; });
        });
        for (int r = 0; r < kRX; ++r) {
          for (int h = 0; h < kNH; ++h) {
            isum[r][h] = _mm256_add_epi32(isum[r][h], _mm256_madd_epi16(hacc[r][h], ones));
            if constexpr (kSigned) Pin(isum[r][h]);
          }
        }
      });
      if constexpr (kOff != 0) {
        for (int r = 0; r < kRX; ++r) {
          const __m256i off = _mm256_set1_epi32(kOff * x[r].block_sum[b]);
          for (int h = 0; h < kNH; ++h) isum[r][h] = _mm256_sub_epi32(isum[r][h], off);
        }
      }
    } else {
      const int16_t* xs[kRX];
      for (int r = 0; r < kRX; ++r) xs[r] = L.sub == 16 ? x[r].sum16 + b * 16 : x[r].sum32 + b * 8;
      Unroll<L.nsub() / 2>([&](auto p) {
        constexpr int P = p.value;
        constexpr int kShare = kBytes / (L.nsub() / 2);
        if (kH0 == 0 && prefetch) {
          PrefetchLines<P * kShare, (P + 1) * kShare>(blk + kDecodePrefetchBytes);
        }
        // Each row's (scale[2P], scale[2P + 1]) as int16, per half.
        __m256i pair[kNH];
        Unroll<kNH>([&](auto hh) {
          constexpr int h = hh.value;
          const __m128i raw =
              _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + L.scales_at() + P * 32 + (kH0 + h) * 16));
          if constexpr (L.scales == SubScales::kNibbles) {
            pair[h] = _mm256_and_si256(_mm256_cvtepu8_epi16(raw), _mm256_set1_epi16(0x000F));
          } else {
            pair[h] = _mm256_cvtepi8_epi16(raw);
          }
        });
        Unroll<2>([&](auto half) {
          constexpr int J = 2 * P + half.value;
          // (scale[J], scale[J]) in every 32-bit lane (vpshufb indexes within each 128-bit lane).
          const __m256i pick = half.value == 0
                                   ? _mm256_setr_epi8(0, 1, 0, 1, 4, 5, 4, 5, 8, 9, 8, 9, 12, 13, 12, 13, 0, 1, 0, 1,
                                                      4, 5, 4, 5, 8, 9, 8, 9, 12, 13, 12, 13)
                                   : _mm256_setr_epi8(2, 3, 2, 3, 6, 7, 6, 7, 10, 11, 10, 11, 14, 15, 14, 15, 2, 3, 2,
                                                      3, 6, 7, 6, 7, 10, 11, 10, 11, 14, 15, 14, 15);
          __m256i dup[kNH];
          for (int h = 0; h < kNH; ++h) dup[h] = _mm256_shuffle_epi8(pair[h], pick);
          Unroll<kStepsPerSub / kFlush>([&](auto f) {
            __m256i hacc[kRX][kNH];
            for (int r = 0; r < kRX; ++r) {
              for (int h = 0; h < kNH; ++h) hacc[r][h] = _mm256_setzero_si256();
            }
            Unroll<kFlush>([&](auto t) {
              constexpr int S = J * kStepsPerSub + f.value * kFlush + t.value;
              step(std::integral_constant<int, S>{}, hacc, [&](int r) { return x[r].qs + b * L.block + S * 4; });
            });
            for (int r = 0; r < kRX; ++r) {
              for (int h = 0; h < kNH; ++h) {
                isum[r][h] = _mm256_add_epi32(isum[r][h], _mm256_madd_epi16(hacc[r][h], dup[h]));
                if constexpr (kSigned) Pin(isum[r][h]);
              }
            }
          });
        });
        if constexpr (L.extra == Extra::kMins || kOff != 0) {
          // Mins, or (offset formats) the scales: times the activation's sub-block sums.
          __m256i by[kNH];
          Unroll<kNH>([&](auto hh) {
            constexpr int h = hh.value;
            if constexpr (L.extra != Extra::kMins) {
              by[h] = pair[h];
            } else if constexpr (L.scales == SubScales::kNibbles) {
              by[h] = _mm256_srli_epi16(_mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(
                                            blk + L.scales_at() + P * 32 + (kH0 + h) * 16))),
                                        4);
            } else {
              by[h] = _mm256_cvtepu8_epi16(
                  _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + L.mins_at() + P * 32 + (kH0 + h) * 16)));
            }
          });
          for (int r = 0; r < kRX; ++r) {
            const __m256i xp = _mm256_set1_epi32(Load4(xs[r] + 2 * P));
            for (int h = 0; h < kNH; ++h) msum[r][h] = _mm256_add_epi32(msum[r][h], _mm256_madd_epi16(by[h], xp));
          }
        }
      });
      if constexpr (L.extra != Extra::kMins && kOff != 0) {
        static_assert((1 << Log2(kOff)) == kOff, "offsets are powers of two");
        for (int r = 0; r < kRX; ++r) {
          for (int h = 0; h < kNH; ++h) {
            isum[r][h] = _mm256_sub_epi32(isum[r][h], _mm256_slli_epi32(msum[r][h], Log2(kOff)));
          }
        }
      }
    }
    for (int h = 0; h < kNH; ++h) {
      const uint16_t* fb = fs + b * kRowGroup * L.f16s() + (kH0 + h) * 8;
      const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(fb)));
      for (int r = 0; r < kRX; ++r) {
        acc[r][h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[r][h]), _mm256_mul_ps(d, _mm256_set1_ps(x[r].d[b])),
                                    acc[r][h]);
      }
      if constexpr (L.extra != Extra::kNone) {
        const __m256 e = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(fb + kRowGroup)));
        for (int r = 0; r < kRX; ++r) {
          if constexpr (L.extra == Extra::kMins) {
            acc[r][h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(msum[r][h]), _mm256_mul_ps(e, _mm256_set1_ps(x[r].d[b])),
                                        acc[r][h]);
          } else {
            acc[r][h] = _mm256_fmadd_ps(e, _mm256_set1_ps(x[r].s[b]), acc[r][h]);
          }
        }
      }
    }
  }
  alignas(32) float out[8];
  for (int h = 0; h < kNH; ++h) {
    const int64_t row0 = g * kRowGroup + (kH0 + h) * 8;
    for (int r = 0; r < kRX; ++r) {
      _mm256_store_ps(out, acc[r][h]);
      for (int l = 0; l < 8; ++l) {
        const int64_t o = row0 + l;
        if (o >= o_begin && o < o_end && o < w.rows) y[(r0 + r) * y_stride + o] = out[l];
      }
    }
  }
}

// One activation row: both halves in one pass over the group's blocks (their accumulators fit
// the registers). More rows: a pass per half, which keeps every row's accumulators in
// registers; the second pass reads the blocks from cache.
template <WeightType kType, int kRX>
void Tile(const WeightMatrix& w, const ViewOf<kType>* x, int64_t g, float* y, size_t y_stride, int r0,
          int64_t o_begin, int64_t o_end, bool prefetch) {
  const bool lower = o_begin < g * kRowGroup + 8;
  const bool upper = o_end > g * kRowGroup + 8 && g * kRowGroup + 8 < w.rows;
  if constexpr (kRX == 1) {
    if (lower && upper) return HalfTile<kType, 1, 0, 2>(w, x, g, y, y_stride, r0, o_begin, o_end, prefetch);
  }
  if (lower) HalfTile<kType, kRX, 0, 1>(w, x, g, y, y_stride, r0, o_begin, o_end, prefetch);
  if (upper) HalfTile<kType, kRX, 1, 1>(w, x, g, y, y_stride, r0, o_begin, o_end, prefetch);
}

}  // namespace

template <WeightType kType>
void IntMatmul(const WeightMatrix& w, const void* act, size_t act_stride, int n_rows, float* y, size_t y_stride,
               int64_t o_begin, int64_t o_end) {
  static constexpr IntLayout L = *IntLayoutOf(kType);
  using View = ViewOf<kType>;
  const int64_t g_begin = o_begin / kRowGroup, g_end = (o_end + kRowGroup - 1) / kRowGroup;
  constexpr int kMaxRX = 4;
  const int passes = (n_rows + kMaxRX - 1) / kMaxRX;
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
        if (n == 4) Tile<kType, 4>(w, x, g, y, y_stride, r, o_begin, o_end, pf);
        if (n == 3) Tile<kType, 3>(w, x, g, y, y_stride, r, o_begin, o_end, pf);
        if (n == 2) Tile<kType, 2>(w, x, g, y, y_stride, r, o_begin, o_end, pf);
        if (n == 1) Tile<kType, 1>(w, x, g, y, y_stride, r, o_begin, o_end, pf);
      }
      r += n;
    }
  }
}

#define DAISY_INT_MATMUL(T)                                                                                  \
  template void IntMatmul<WeightType::T>(const WeightMatrix&, const void*, size_t, int, float*, size_t, int64_t, \
                                         int64_t);
DAISY_INT_MATMUL(kQ4_1)
DAISY_INT_MATMUL(kQ5_0)
DAISY_INT_MATMUL(kQ5_1)
DAISY_INT_MATMUL(kIq4Nl)
DAISY_INT_MATMUL(kQ2K)
DAISY_INT_MATMUL(kQ3K)
DAISY_INT_MATMUL(kQ4K)
DAISY_INT_MATMUL(kQ5K)
DAISY_INT_MATMUL(kQ6K)
DAISY_INT_MATMUL(kIq4Xs)
#undef DAISY_INT_MATMUL

}  // namespace daisy::kernels::avx2
