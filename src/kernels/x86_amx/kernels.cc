// AMX (Intel's tile unit: Sapphire Rapids and later) for the prompt's q4_0 and q8_0 products.
// Compiled with the AVX-512 flags plus AMX-TILE/AMX-INT8; called only where the CPU has them
// and Linux has granted this process the tile state (kernel_table.cc).
//
// One tile instruction (tdpbssd) multiplies 16 activation rows by 16 weight rows over one
// 32-element block: C[j][o] = sum over the block of (signed weight code) * (activation int8),
// the exact integer that the AVX-512 kernel builds with eight vpdpbusd steps and its
// -offset * block_sum start. The tile is stored and, per activation row j, the same float
// operations as AVX-512's follow, in the same order:
//   acc[j] = fma(float(C[j]), row scales * d[j][b], acc[j])
// so every output has the AVX-512 kernel's bits, whether its activation row went through a
// tile or not. Rows that do not fill a tile of 16 (decoding, verifying a draft, a prompt's
// last rows) go to the AVX-512 kernel; batch invariance holds across the two.
//
// The weights of a row group are turned into tile form once (codes minus their offset, as
// int8, in the 8 x 64-byte layout tdpbssd reads, which is already the packed layout's step
// order: byte 4o + e of step s is element 4s + e of row o) and then serve every activation
// tile of the call from L1/L2.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <type_traits>
#include <vector>

#include "base/check.h"
#include "kernels/activations.h"
#include "kernels/int_matmul.h"
#include "kernels/kernel_table.h"
#include "kernels/quant/q4_0.h"
#include "kernels/quant/q8_0.h"

namespace daisy::kernels::amx {
namespace {

constexpr int kTileRows = 16;           // activation rows per tile
constexpr int64_t kTileBlockBytes = 512;  // one block of a row group in tile form: 8 steps x 64

// The palette-1 tile configuration (Intel SDM, LDTILECFG): tiles 0-3 are products (16 x 16
// int32), 4-5 activation blocks (16 rows x 32 bytes), 6-7 weight blocks (8 steps x 64 bytes).
struct alignas(64) TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};
static_assert(sizeof(TileConfig) == 64);

constexpr TileConfig MakeTileConfig() {
  TileConfig c;
  for (int t : {0, 1, 2, 3}) c.rows[t] = 16, c.colsb[t] = 64;
  for (int t : {4, 5}) c.rows[t] = 16, c.colsb[t] = 32;
  for (int t : {6, 7}) c.rows[t] = 8, c.colsb[t] = 64;
  return c;
}
// Constant data on purpose: g++ 12 does not count _tile_loadconfig as reading its operand, and
// dropped the stores that filled a local configuration (the tiles were then unconfigured).
constinit const TileConfig kTileConfig = MakeTileConfig();

// The tile configuration is per thread; each thread of the pool loads it at its first product.
void ConfigureTiles() {
  thread_local bool configured = false;
  if (configured) return;
  _tile_loadconfig(&kTileConfig);
  configured = true;
}

// Row group g's blocks in tile form (nb x 512 bytes) and its row scales as floats (nb x 16).
template <WeightType kType>
void GroupToTiles(const WeightMatrix& w, int64_t g, int8_t* tiles, float* scales) {
  const int64_t nb = w.cols / kQBlock;
  constexpr int64_t kGroupBlockBytes = kType == WeightType::kQ4_0 ? kQ4_0GroupBlockBytes : kQ8_0GroupBlockBytes;
  const uint8_t* q = static_cast<const uint8_t*>(w.data) + g * nb * kGroupBlockBytes;
  const uint16_t* ws = w.scales + g * nb * kRowGroup;
  const __m512i mask = _mm512_set1_epi8(0x0f);
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* qb = q + b * kGroupBlockBytes;
    int8_t* out = tiles + b * kTileBlockBytes;
    for (int s = 0; s < 8; ++s) {
      __m512i v;
      if constexpr (kType == WeightType::kQ4_0) {
        // As the AVX-512 kernel: low nibbles are rows 0-7, high nibbles rows 8-15; minus 8.
        const __m512i raw = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(qb + s * 32)));
        v = _mm512_sub_epi8(_mm512_and_si512(_mm512_mask_srli_epi16(raw, 0xFFFF0000u, raw, 4), mask),
                            _mm512_set1_epi8(8));
      } else {
        // Codes are stored plus 128; as int8, code - 128 is the code with its top bit flipped.
        v = _mm512_xor_si512(_mm512_loadu_si512(qb + s * 64), _mm512_set1_epi8(static_cast<char>(0x80)));
      }
      _mm512_store_si512(out + s * 64, v);
    }
    _mm512_store_ps(scales + b * kRowGroup,
                    _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(ws + b * kRowGroup))));
  }
}

// Adds one block's products (c: 16 activation rows x 16 weight rows, int32) to the rows'
// float sums, exactly as the AVX-512 kernel adds a block. d: the 16 rows' scales of block b.
inline void AddBlock(const int32_t (&c)[kTileRows][kRowGroup], const float* scales, const float* d, int64_t b,
                     __m512 (&acc)[kTileRows]) {
  const __m512 scale = _mm512_load_ps(scales + b * kRowGroup);
#pragma GCC unroll 16
  for (int j = 0; j < kTileRows; ++j) {
    acc[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_load_si512(c[j])), _mm512_mul_ps(scale, _mm512_set1_ps(d[j])),
                             acc[j]);
  }
}

// Tile instructions with the tile number a template argument (g++'s _tile_* macros paste their
// argument's spelling into the register name, so they take only literal numbers). Each names
// the memory it touches ("memory"), which g++ 12's own tileloadd does not.
template <int kT>
inline void TileLoad(const void* base, size_t stride) {
  __asm__ volatile("tileloadd (%0,%1,1), %%tmm%c2" ::"r"(base), "r"(stride), "n"(kT) : "memory");
}
template <int kT>
inline void TileStore(void* base, size_t stride) {
  __asm__ volatile("tilestored %%tmm%c2, (%0,%1,1)" ::"r"(base), "r"(stride), "n"(kT) : "memory");
}
template <int kT>
inline void TileZero() {
  __asm__ volatile("tilezero %%tmm%c0" ::"n"(kT));
}
// C += A * B, signed bytes by signed bytes.
template <int kC, int kA, int kB>
inline void TileDpbssd() {
  __asm__ volatile("tdpbssd %%tmm%c2, %%tmm%c1, %%tmm%c0" ::"n"(kC), "n"(kA), "n"(kB));
}

// Block b's products of 16 activation rows (in tile form) and a row group, into product tile
// kT (activation tile 4 + kT, weight tile 6 + kT).
template <int kT>
inline void IssueBlock(const int8_t* act_tiles, const int8_t* tiles, int64_t b) {
  TileLoad<4 + kT>(act_tiles + b * kTileBlockBytes, kQBlock);
  TileLoad<6 + kT>(tiles + b * kTileBlockBytes, 64);
  TileZero<kT>();
  TileDpbssd<kT, 4 + kT, 6 + kT>();
}

// 16 activation rows (act_tiles: their blocks in tile form, 16 rows x 32 bytes each; d: their
// block scales, 16 per block) against row group g (in tile form); writes the group's rows
// that `keep` marks.
//
// A tile store is not forwarded to the loads that read it back: they wait until it has retired
// and reached the cache, and it retires only after everything before it. So block k's product
// is stored before block k - 1 is added to the sums, and block k + 1's multiply is issued
// between the two: the tile unit and the vector units then work side by side.
void TileRows(int64_t nb, const int8_t* tiles, const float* scales, const int8_t* act_tiles, const float* d,
              float* y, size_t y_stride, int64_t g, __mmask16 keep, const uint8_t* next_group,
              int64_t next_bytes_per_block) {
  // Every loop over acc is unrolled: an index not known at compile time would keep the sums
  // in memory instead of registers.
  __m512 acc[kTileRows];
#pragma GCC unroll 16
  for (int j = 0; j < kTileRows; ++j) acc[j] = _mm512_setzero_ps();
  alignas(64) int32_t c[2][kTileRows][kRowGroup];
  const auto add = [&](int t, int64_t b) {
    // The next row group's weights come from memory while this one computes (the first
    // activation tile of a group asks for them, a block at a time, into L2).
    if (next_group != nullptr) {
      for (int64_t off = 0; off < next_bytes_per_block; off += 64) {
        _mm_prefetch(reinterpret_cast<const char*>(next_group + b * next_bytes_per_block + off), _MM_HINT_T1);
      }
    }
    AddBlock(c[t], scales, d + b * kTileRows, b, acc);
  };
  IssueBlock<0>(act_tiles, tiles, 0);
  for (int64_t k = 0;;) {
    // Block k (even) is in product tile 0.
    TileStore<0>(c[0], 64);
    if (k + 1 < nb) IssueBlock<1>(act_tiles, tiles, k + 1);
    if (k > 0) add(1, k - 1);
    if (++k >= nb) break;
    // Block k (odd) is in product tile 1.
    TileStore<1>(c[1], 64);
    if (k + 1 < nb) IssueBlock<0>(act_tiles, tiles, k + 1);
    add(0, k - 1);
    if (++k >= nb) break;
  }
  add(static_cast<int>((nb - 1) % 2), nb - 1);
#pragma GCC unroll 16
  for (int j = 0; j < kTileRows; ++j) _mm512_mask_storeu_ps(y + j * y_stride + g * kRowGroup, keep, acc[j]);
}

// Grows `p` (64-byte aligned) to hold `bytes`; a thread keeps its buffers between calls.
struct Free {
  void operator()(void* p) const { std::free(p); }
};
template <class T>
T* Reserve(std::unique_ptr<T[], Free>& p, size_t& have, size_t count) {
  if (have < count) {
    p.reset(static_cast<T*>(std::aligned_alloc(64, (count * sizeof(T) + 63) / 64 * 64)));
    DAISY_CHECK(p != nullptr);
    have = count;
  }
  return p.get();
}

template <WeightType kType>
void QMatmul(const WeightMatrix& w, const void* act, size_t act_stride, int n_rows, float* y, size_t y_stride,
             int64_t o_begin, int64_t o_end) {
  const int tiles_of_rows = n_rows / kTileRows;
  const int tiled = tiles_of_rows * kTileRows;
  if (tiles_of_rows > 0) {
    ConfigureTiles();
    const int64_t nb = w.cols / kQBlock;
    constexpr int64_t kGroupBlockBytes = kType == WeightType::kQ4_0 ? kQ4_0GroupBlockBytes : kQ8_0GroupBlockBytes;
    // Per thread, grown to the largest call seen: one row group in tile form with its scales,
    // and the activation rows in tile form with theirs.
    struct Scratch {
      std::unique_ptr<int8_t[], Free> tiles, act_tiles;
      std::unique_ptr<float[], Free> scales, act_d;
      size_t tiles_n = 0, act_tiles_n = 0, scales_n = 0, act_d_n = 0;
    };
    thread_local Scratch sc;
    int8_t* tiles = Reserve(sc.tiles, sc.tiles_n, nb * kTileBlockBytes);
    float* scales = Reserve(sc.scales, sc.scales_n, nb * kRowGroup);
    int8_t* act_tiles = Reserve(sc.act_tiles, sc.act_tiles_n, tiles_of_rows * nb * kTileBlockBytes);
    float* act_d = Reserve(sc.act_d, sc.act_d_n, tiles_of_rows * nb * kTileRows);
    // Activation rows in tile form: per tile of 16 rows and block, the rows' 32 bytes one after
    // another (a tile load then reads 8 whole cache lines instead of 16 rows' halves), and the
    // rows' block scales likewise.
    for (int r = 0; r < tiled; ++r) {
      const ActQ8View x = ViewActQ8(static_cast<const uint8_t*>(act) + r * act_stride, w.cols);
      const int64_t base = (r / kTileRows) * nb;
      for (int64_t b = 0; b < nb; ++b) {
        std::memcpy(act_tiles + ((base + b) * kTileRows + r % kTileRows) * kQBlock, x.qs + b * kQBlock, kQBlock);
        act_d[(base + b) * kTileRows + r % kTileRows] = x.d[b];
      }
    }
    const int64_t g_begin = o_begin / kRowGroup, g_end = (o_end + kRowGroup - 1) / kRowGroup;
    const uint8_t* data = static_cast<const uint8_t*>(w.data);
    for (int64_t g = g_begin; g < g_end; ++g) {
      GroupToTiles<kType>(w, g, tiles, scales);
      const int64_t first = std::max<int64_t>(o_begin, g * kRowGroup);
      const int64_t last = std::min<int64_t>({o_end, g * kRowGroup + kRowGroup, w.rows});
      const __mmask16 keep = static_cast<__mmask16>(((1u << (last - first)) - 1) << (first - g * kRowGroup));
      const uint8_t* next = g + 1 < g_end ? data + (g + 1) * nb * kGroupBlockBytes : nullptr;
      for (int t = 0; t < tiles_of_rows; ++t) {
        TileRows(nb, tiles, scales, act_tiles + t * nb * kTileBlockBytes, act_d + t * nb * kTileRows,
                 y + t * kTileRows * y_stride, y_stride, g, keep, t == 0 ? next : nullptr, kGroupBlockBytes);
      }
    }
  }
  if (tiled < n_rows) {
    avx512::QMatmul<kType>(w, static_cast<const uint8_t*>(act) + tiled * act_stride, act_stride, n_rows - tiled,
                           y + tiled * y_stride, y_stride, o_begin, o_end);
  }
}

}  // namespace

// The kernels AMX replaces in the AVX-512 table (kernel_table.cc builds the "amx" set from
// AVX-512's with these in place of its own).
extern constinit const MatmulKernel kMatmuls[] = {
    {WeightType::kQ8_0, QMatmul<WeightType::kQ8_0>},
    {WeightType::kQ4_0, QMatmul<WeightType::kQ4_0>},
};
extern constinit const size_t kMatmulCount = sizeof(kMatmuls) / sizeof(kMatmuls[0]);

}  // namespace daisy::kernels::amx
