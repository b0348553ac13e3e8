// AVX-512 (F, BW, VL, DQ) + VNNI kernels. Compiled with those flags; called only on CPUs that
// have them. The bf16 tile (BTile) also needs AVX512-BF16: a target attribute of its own, called
// only when Bf16Dots() says the CPU has it.
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

#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/activations.h"
#include "kernels/int_matmul.h"
#include "kernels/kernel_table.h"
#include "kernels/quant/q4_0.h"
#include "kernels/quant/q8_0.h"

namespace daisy::kernels::avx512 {
namespace {

// 16 interleaved rows (one row group) against kRX activation rows. Each 32-bit lane is one
// output row: per block, eight vpdpbusd steps (4 elements each) accumulate the exact integer
// dot starting from -offset * block_sum, then one conversion and one multiply-add with
// (row scale * activation scale) add the block to the lane's float sum. The per-lane sequence
// of operations is the same whatever kRX is (the batch-invariance contract).
template <WeightType kType, int kRX>
void GroupTile(const WeightMatrix& w, const ActQ8View* x, int64_t g, float* y, size_t y_stride,
               int r0, int64_t o_begin, int64_t o_end, bool prefetch) {
  const int64_t nb = w.cols / kQBlock;
  constexpr int kOffset = kType == WeightType::kQ4_0 ? 8 : 128;
  constexpr int64_t kGroupBlockBytes = kType == WeightType::kQ4_0 ? kQ4_0GroupBlockBytes : kQ8_0GroupBlockBytes;
  const uint8_t* q = static_cast<const uint8_t*>(w.data) + g * nb * kGroupBlockBytes;
  const uint16_t* ws = w.scales + g * nb * kRowGroup;
  const __m512i mask = _mm512_set1_epi8(0x0f);
  __m512 acc[kRX];
  for (int j = 0; j < kRX; ++j) acc[j] = _mm512_setzero_ps();
  // Integer sums are exact, so a block's eight steps can be split over independent partial
  // sums (shorter dependency chains: with one activation row, a single chain of eight
  // vpdpbusd would leave the core waiting on their latency) without changing any result.
  constexpr int kChains = kRX >= 4 ? 1 : (kRX >= 2 ? 2 : 4);
  for (int64_t b = 0; b < nb; ++b) {
    __m512i iacc[kRX][kChains];
#pragma GCC unroll 8
    for (int j = 0; j < kRX; ++j) {
      iacc[j][0] = _mm512_set1_epi32(-kOffset * x[j].block_sum[b]);
      for (int c = 1; c < kChains; ++c) iacc[j][c] = _mm512_setzero_si512();
    }
    const uint8_t* qb = q + b * kGroupBlockBytes;
    // Software prefetch. With PrefetchSmallTiles (Intel; AMD from Zen 5) every line of the
    // block 16 blocks ahead, in the first pass over the weights whatever the tile's width: on
    // an Intel Xeon (Sapphire Rapids) it gave decoding +17-19% (q4_0, one and two threads)
    // and +7% (q8_0, two threads); on an AMD Zen 5 +8-18% for one row and 10-50% for 4-64
    // rows (kernel benchmark, --prefetch-ab). Without it (older AMD: on a Zen 4 it took
    // one-thread q8_0 decoding from ~21 to ~15 tok/s, as if it kept the hardware prefetcher
    // from running ahead), tiles of 5-8 rows ask for a block's first line only, which measured
    // slightly faster for a prompt there. docs/benchmarks.md.
    if (prefetch) {
      PrefetchLines<0, kGroupBlockBytes>(qb + 16 * kGroupBlockBytes);
    } else if constexpr (kRX >= 5) {
      _mm_prefetch(reinterpret_cast<const char*>(qb) + 16 * kGroupBlockBytes, _MM_HINT_T0);
    }
#pragma GCC unroll 8
    for (int s = 0; s < 8; ++s) {
      __m512i wv;
      if constexpr (kType == WeightType::kQ4_0) {
        // [raw | raw]: low nibbles are rows 0-7, high nibbles (upper half shifted) rows 8-15.
        const __m512i raw = _mm512_broadcast_i64x4(
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qb + s * 32)));
        wv = _mm512_and_si512(_mm512_mask_srli_epi16(raw, 0xFFFF0000u, raw, 4), mask);
      } else {
        wv = _mm512_loadu_si512(qb + s * 64);
      }
#pragma GCC unroll 8
      for (int j = 0; j < kRX; ++j) {
        int32_t four;
        std::memcpy(&four, x[j].qs + b * kQBlock + s * 4, 4);
        iacc[j][s % kChains] = _mm512_dpbusd_epi32(iacc[j][s % kChains], wv, _mm512_set1_epi32(four));
      }
    }
#pragma GCC unroll 8
    for (int j = 0; j < kRX; ++j) {
      for (int c = 1; c < kChains; ++c) iacc[j][0] = _mm512_add_epi32(iacc[j][0], iacc[j][c]);
    }
    const __m512 scale = _mm512_cvtph_ps(
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ws + b * kRowGroup)));
#pragma GCC unroll 8
    for (int j = 0; j < kRX; ++j) {
      acc[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(iacc[j][0]),
                               _mm512_mul_ps(scale, _mm512_set1_ps(x[j].d[b])), acc[j]);
    }
  }
  // Write the rows of this group that are in [o_begin, o_end) (and exist).
  const int64_t first = std::max<int64_t>(o_begin, g * kRowGroup);
  const int64_t last = std::min<int64_t>({o_end, g * kRowGroup + kRowGroup, w.rows});
  const __mmask16 keep = static_cast<__mmask16>(((1u << (last - first)) - 1) << (first - g * kRowGroup));
  for (int j = 0; j < kRX; ++j) {
    _mm512_mask_storeu_ps(y + (r0 + j) * y_stride + g * kRowGroup, keep, acc[j]);
  }
}

}  // namespace

template <WeightType kType>
void QMatmul(const WeightMatrix& w, const void* act, size_t act_stride, int n_rows, float* y,
             size_t y_stride, int64_t o_begin, int64_t o_end) {
  const int64_t g_begin = o_begin / kRowGroup, g_end = (o_end + kRowGroup - 1) / kRowGroup;
  // Up to 8 activation rows per pass over a row group (8 float and 8 integer accumulators of
  // the 32 registers). More rows are split into passes of nearly equal size: 9 rows as 5 + 4,
  // not 8 + 1, since a pass of one row pays the whole unpacking of the weights for one dot.
  constexpr int kMaxRX = 8;
  const int passes = (n_rows + kMaxRX - 1) / kMaxRX;
  // Row groups in blocks of about 256 KiB of weights, which stay in L2 while every activation
  // row passes over them: a long prompt reads each weight from memory once.
  constexpr int64_t kGroupBytes = (kType == WeightType::kQ4_0 ? kQ4_0GroupBlockBytes : kQ8_0GroupBlockBytes) + 32;
  const int64_t per_block =
      std::max<int64_t>(1, (256 << 10) / (kGroupBytes * (w.cols / kQBlock)));
  for (int64_t gb = g_begin; gb < g_end; gb += per_block) {
    const int64_t ge = std::min(g_end, gb + per_block);
    for (int p = 0, r = 0; p < passes; ++p) {
      ActQ8View x[kMaxRX];
      const int n = n_rows / passes + (p < n_rows % passes ? 1 : 0);
      for (int j = 0; j < n; ++j) {
        x[j] = ViewActQ8(static_cast<const uint8_t*>(act) + (r + j) * act_stride, w.cols);
      }
      const bool pf = p == 0 && PrefetchSmallTiles();  // later passes read the block from L2
      for (int64_t g = gb; g < ge; ++g) {
        switch (n) {
          case 8: GroupTile<kType, 8>(w, x, g, y, y_stride, r, o_begin, o_end, pf); break;
          case 7: GroupTile<kType, 7>(w, x, g, y, y_stride, r, o_begin, o_end, pf); break;
          case 6: GroupTile<kType, 6>(w, x, g, y, y_stride, r, o_begin, o_end, pf); break;
          case 5: GroupTile<kType, 5>(w, x, g, y, y_stride, r, o_begin, o_end, pf); break;
          case 4: GroupTile<kType, 4>(w, x, g, y, y_stride, r, o_begin, o_end, pf); break;
          case 3: GroupTile<kType, 3>(w, x, g, y, y_stride, r, o_begin, o_end, pf); break;
          case 2: GroupTile<kType, 2>(w, x, g, y, y_stride, r, o_begin, o_end, pf); break;
          default: GroupTile<kType, 1>(w, x, g, y, y_stride, r, o_begin, o_end, pf); break;
        }
      }
      r += n;
    }
  }
}

template void QMatmul<WeightType::kQ4_0>(const WeightMatrix&, const void*, size_t, int, float*, size_t, int64_t, int64_t);
template void QMatmul<WeightType::kQ8_0>(const WeightMatrix&, const void*, size_t, int, float*, size_t, int64_t, int64_t);

namespace {

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

// kRO weight rows (row-major) against kRX activation rows. Each weight row is a stream of its
// own, a page long at the 1B shape's 2,048 columns (f16), and a hardware prefetcher stops at
// a page's end: so a tile of the first pass over an output block (kPrefetch:
// PrefetchFloatRows) asks, line by line as it goes, for the next tile's rows. On an AMD Zen 5 the one-row f16/bf16
// product read 29 / 26 GB/s with it against 21 / 19 without (4 alternating runs each;
// docs/benchmarks.md).
template <WeightType kType, int kRO, int kRX, bool kPrefetch = false>
void FTile(const WeightMatrix& w, const float* const* x, int64_t o0, float* y, size_t y_stride,
           int r0) {
  const int64_t n = w.cols;
  constexpr int64_t kElem = kType == WeightType::kF32 ? 4 : 2;
  __m512 acc[kRO][kRX];
  for (int i = 0; i < kRO; ++i) {
    for (int j = 0; j < kRX; ++j) acc[i][j] = _mm512_setzero_ps();
  }
  for (int64_t k = 0; k < n; k += 16) {
    if constexpr (kPrefetch) {
      if ((k * kElem) % 64 == 0) {
        for (int i = 0; i < kRO; ++i) {
          _mm_prefetch(static_cast<const char*>(w.data) + ((o0 + kRO + i) * n + k) * kElem, _MM_HINT_T0);
        }
      }
    }
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

// bf16 weights with AVX512-BF16 (Bf16Dots): kRO weight rows against kRX activation rows (xb:
// already packed to bf16, BfRows), 32 columns a step. vdpbf16ps adds to lane i the products of
// columns 2i and 2i + 1 (exact in float: 8-bit significands), summed first. Per lane the same
// sequence whatever kRO and kRX (batch invariance).
template <int kRO, int kRX, bool kPrefetch = false>
__attribute__((target("avx512bf16"))) void BTile(const WeightMatrix& w, const uint16_t* const* xb, int64_t o0,
                                                 float* y, size_t y_stride, int r0) {
  const int64_t n = w.cols;
  const uint16_t* wd = static_cast<const uint16_t*>(w.data);
  __m512 acc[kRO][kRX];
  for (int i = 0; i < kRO; ++i) {
    for (int j = 0; j < kRX; ++j) acc[i][j] = _mm512_setzero_ps();
  }
  for (int64_t k = 0; k < n; k += 32) {
    if constexpr (kPrefetch) {
      for (int i = 0; i < kRO; ++i) _mm_prefetch(reinterpret_cast<const char*>(wd + (o0 + kRO + i) * n + k), _MM_HINT_T0);
    }
    __m512bh xv[kRX];
    for (int j = 0; j < kRX; ++j) xv[j] = reinterpret_cast<__m512bh>(_mm512_loadu_si512(xb[j] + k));
    for (int i = 0; i < kRO; ++i) {
      const __m512bh wv = reinterpret_cast<__m512bh>(_mm512_loadu_si512(wd + (o0 + i) * n + k));
      for (int j = 0; j < kRX; ++j) acc[i][j] = _mm512_dpbf16_ps(acc[i][j], wv, xv[j]);
    }
  }
  for (int i = 0; i < kRO; ++i) {
    for (int j = 0; j < kRX; ++j) y[(r0 + j) * y_stride + o0 + i] = _mm512_reduce_add_ps(acc[i][j]);
  }
}

// Activation rows of bf16 weights (bf16 values held as floats: ActType::kBF16Rounded) packed to
// bf16, exactly, into out[j * cols ...]; cols is a multiple of 32.
__attribute__((target("avx512bf16"))) void BfRows(const float* const* x, int n, int64_t cols, uint16_t* out) {
  for (int j = 0; j < n; ++j) {
    for (int64_t k = 0; k < cols; k += 32) {
      const __m512bh b = _mm512_cvtne2ps_pbh(_mm512_loadu_ps(x[j] + k + 16), _mm512_loadu_ps(x[j] + k));
      _mm512_storeu_si512(out + j * cols + k, reinterpret_cast<__m512i>(b));
    }
  }
}

template <int kRX>
void BRows(const WeightMatrix& w, const uint16_t* const* x, int r0, float* y, size_t y_stride, int64_t ob,
           int64_t oe, bool prefetch) {
  int64_t o = ob;
  if (prefetch) {
    for (; o + 4 <= oe; o += 4) BTile<4, kRX, true>(w, x, o, y, y_stride, r0);
  }
  for (; o + 4 <= oe; o += 4) BTile<4, kRX>(w, x, o, y, y_stride, r0);
  for (; o < oe; ++o) BTile<1, kRX>(w, x, o, y, y_stride, r0);
}

template <WeightType kType, int kRX>
void FRows(const WeightMatrix& w, const float* const* x, int r0, float* y, size_t y_stride,
           int64_t ob, int64_t oe, bool prefetch) {
  int64_t o = ob;
  if (prefetch) {
    for (; o + 4 <= oe; o += 4) FTile<kType, 4, kRX, true>(w, x, o, y, y_stride, r0);
  }
  for (; o + 4 <= oe; o += 4) FTile<kType, 4, kRX>(w, x, o, y, y_stride, r0);
  for (; o < oe; ++o) FTile<kType, 1, kRX>(w, x, o, y, y_stride, r0);
}

template <WeightType kType>
void FMatmul(const WeightMatrix& w, const void* act, size_t act_stride, int n_rows, float* y,
             size_t y_stride, int64_t o_begin, int64_t o_end) {
  constexpr int64_t kOBlock = 32;
  const bool prefetch = PrefetchFloatRows();
  const bool bf16_dots = kType == WeightType::kBF16 && Bf16Dots();
  for (int64_t ob = o_begin; ob < o_end; ob += kOBlock) {
    const int64_t oe = ob + kOBlock < o_end ? ob + kOBlock : o_end;
    for (int r = 0; r < n_rows; r += 4) {
      const float* x[4];
      const int n = n_rows - r >= 4 ? 4 : n_rows - r;
      const bool pf = prefetch && r == 0;  // the first pass reads the rows from memory; later ones from cache
      for (int j = 0; j < n; ++j) {
        x[j] = reinterpret_cast<const float*>(static_cast<const uint8_t*>(act) +
                                              (r + j) * act_stride);
      }
      if constexpr (kType == WeightType::kBF16) {
        if (bf16_dots) {
          // Packed once for the output block's tiles (each would otherwise pack them itself).
          thread_local std::vector<uint16_t> packed;
          if (packed.size() < static_cast<size_t>(4 * w.cols)) packed.resize(4 * w.cols);
          BfRows(x, n, w.cols, packed.data());
          const uint16_t* xb[4];
          for (int j = 0; j < n; ++j) xb[j] = packed.data() + j * w.cols;
          switch (n) {
            case 4: BRows<4>(w, xb, r, y, y_stride, ob, oe, pf); break;
            case 3: BRows<3>(w, xb, r, y, y_stride, ob, oe, pf); break;
            case 2: BRows<2>(w, xb, r, y, y_stride, ob, oe, pf); break;
            default: BRows<1>(w, xb, r, y, y_stride, ob, oe, pf); break;
          }
          continue;
        }
      }
      switch (n) {
        case 4: FRows<kType, 4>(w, x, r, y, y_stride, ob, oe, pf); break;
        case 3: FRows<kType, 3>(w, x, r, y, y_stride, ob, oe, pf); break;
        case 2: FRows<kType, 2>(w, x, r, y, y_stride, ob, oe, pf); break;
        default: FRows<kType, 1>(w, x, r, y, y_stride, ob, oe, pf); break;
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

}  // namespace daisy::kernels::avx512
