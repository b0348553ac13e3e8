// AMX (Intel's tile unit: Sapphire Rapids and later) for the prompt's q4_0 and q8_0 products,
// and those of the super-block formats with 32-element sub-blocks (q4_K, q5_K, iq4_xs: below).
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

#include "base/check.h"
#include "kernels/activations.h"
#include "kernels/int_matmul.h"
#include "kernels/kernel_table.h"
#include "kernels/quant/int_layout.h"
#include "kernels/quant/q4_0.h"
#include "kernels/quant/q8_0.h"

namespace daisy::kernels::amx {
namespace {

constexpr int kTileRows = 16;           // activation rows per tile
constexpr int64_t kTileBlockBytes = 512;  // one block of a row group in tile form: 8 steps x 64

// The palette-1 tile configuration (Intel SDM, LDTILECFG): tiles 0-1 are products (16 x 16
// int32; 2-3 are configured alike and unused), 4-5 activation blocks (16 rows x 32 bytes), 6-7
// weight blocks (8 steps x 64 bytes).
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

// The tile work of 16 activation rows against one row group, over nk 32-element pieces (blocks,
// or a super-block's sub-blocks) in tile form: calls add(c, k) with each piece's products
// (c: 16 activation rows x 16 weight rows, int32), in ascending k.
//
// A tile store is not forwarded to the loads that read it back: they wait until it has retired
// and reached the cache, and it retires only after everything before it. So piece k's product
// is stored before piece k - 1 is added, and piece k + 1's multiply is issued between the two.
template <class Add>
inline void TileChain(int64_t nk, const int8_t* tiles, const int8_t* act_tiles, Add&& add) {
  alignas(64) int32_t c[2][kTileRows][kRowGroup];
  IssueBlock<0>(act_tiles, tiles, 0);
  for (int64_t k = 0;;) {
    // Piece k (even) is in product tile 0.
    TileStore<0>(c[0], 64);
    if (k + 1 < nk) IssueBlock<1>(act_tiles, tiles, k + 1);
    if (k > 0) add(c[1], k - 1);
    if (++k >= nk) break;
    // Piece k (odd) is in product tile 1.
    TileStore<1>(c[1], 64);
    if (k + 1 < nk) IssueBlock<0>(act_tiles, tiles, k + 1);
    add(c[0], k - 1);
    if (++k >= nk) break;
  }
  add(c[(nk - 1) % 2], nk - 1);
}

// The next row group's weights come from memory while this one computes: the first activation
// tile of a group asks for them, a piece at a time, into L2.
inline void PrefetchPiece(const uint8_t* next_group, int64_t bytes_per_piece, int64_t k) {
  if (next_group == nullptr) return;
  for (int64_t off = 0; off < bytes_per_piece; off += 64) {
    _mm_prefetch(reinterpret_cast<const char*>(next_group + k * bytes_per_piece + off), _MM_HINT_T1);
  }
}

// 16 activation rows (act_tiles: their blocks in tile form, 16 rows x 32 bytes each; d: their
// block scales, 16 per block) against row group g (in tile form); writes the group's rows
// that `keep` marks.
void TileRows(int64_t nb, const int8_t* tiles, const float* scales, const int8_t* act_tiles, const float* d,
              float* y, size_t y_stride, int64_t g, __mmask16 keep, const uint8_t* next_group,
              int64_t next_bytes_per_block) {
  // Every loop over acc is unrolled: an index not known at compile time would keep the sums
  // in memory instead of registers.
  __m512 acc[kTileRows];
#pragma GCC unroll 16
  for (int j = 0; j < kTileRows; ++j) acc[j] = _mm512_setzero_ps();
  TileChain(nb, tiles, act_tiles, [&](const int32_t (&c)[kTileRows][kRowGroup], int64_t b) {
    PrefetchPiece(next_group, next_bytes_per_block, b);
    AddBlock(c, scales, d + b * kTileRows, b, acc);
  });
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

// Activation row r's int8 codes (qs, nk 32-element pieces) into tile form: per tile of 16 rows
// and piece, the rows' 32 bytes one after another (a tile load then reads 8 whole cache lines
// instead of 16 rows' halves).
void RowToTiles(const int8_t* qs, int64_t nk, int r, int8_t* act_tiles) {
  const int64_t t = r / kTileRows, j = r % kTileRows;
  for (int64_t k = 0; k < nk; ++k) {
    std::memcpy(act_tiles + ((t * nk + k) * kTileRows + j) * kQBlock, qs + k * kQBlock, kQBlock);
  }
}

// The lanes of row group g that are in [o_begin, o_end) and exist.
__mmask16 GroupLanes(int64_t g, int64_t o_begin, int64_t o_end, int64_t rows) {
  const int64_t first = std::max<int64_t>(o_begin, g * kRowGroup);
  const int64_t last = std::min<int64_t>({o_end, g * kRowGroup + kRowGroup, rows});
  return static_cast<__mmask16>(((1u << (last - first)) - 1) << (first - g * kRowGroup));
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
    // Activation rows in tile form, and their block scales likewise.
    for (int r = 0; r < tiled; ++r) {
      const ActQ8View x = ViewActQ8(static_cast<const uint8_t*>(act) + r * act_stride, w.cols);
      RowToTiles(x.qs, nb, r, act_tiles);
      const int64_t base = (r / kTileRows) * nb;
      for (int64_t b = 0; b < nb; ++b) act_d[(base + b) * kTileRows + r % kTileRows] = x.d[b];
    }
    const int64_t g_begin = o_begin / kRowGroup, g_end = (o_end + kRowGroup - 1) / kRowGroup;
    const uint8_t* data = static_cast<const uint8_t*>(w.data);
    for (int64_t g = g_begin; g < g_end; ++g) {
      GroupToTiles<kType>(w, g, tiles, scales);
      const __mmask16 keep = GroupLanes(g, o_begin, o_end, w.rows);
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

// ---- the integer family's super-block formats with 32-element sub-blocks -----------------
// (q4_K, q5_K, iq4_xs: quant/int_layout.h). The tile unit multiplies each sub-block (its codes
// minus their offset, as int8: avx512::SignedCodeTiles) by 16 activation rows: the exact integer
// that the AVX-512 kernel builds with -off * xsum and eight vpdpbusd. Then, as AVX-512 does:
// the block's integer sum of (row's sub-block scale * sub-block dot), its mins term with
// vpdpwssd, and the two float steps, in AVX-512's order. The rows' float sums stay in memory
// (the integer sums take the registers).

// One row group's side data, per block: the sub-block scales as int32 (nsub x 16), the mins as
// the int16 pairs vpdpwssd reads (nsub / 2 vectors of 32), the f16 d and e as floats (16 each).
template <WeightType kType>
void GroupSideData(const WeightMatrix& w, int64_t g, int32_t* scales, int16_t* mins, float* d, float* e) {
  static constexpr IntLayout L = *IntLayoutOf(kType);
  const int64_t nb = w.cols / L.block;
  const uint8_t* base = static_cast<const uint8_t*>(w.data) + g * nb * L.bytes();
  const uint16_t* fs = w.scales + g * nb * kRowGroup * L.f16s();
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* blk = base + b * L.bytes();
    for (int j = 0; j < L.nsub(); ++j) {
      for (int r = 0; r < kRowGroup; ++r) {
        scales[(b * L.nsub() + j) * kRowGroup + r] =
            static_cast<int8_t>(blk[L.scales_at() + IntLayout::SubIndex(j, r)]);
      }
    }
    if constexpr (L.extra == Extra::kMins) {
      for (int p = 0; p < L.nsub() / 2; ++p) {
        _mm512_store_si512(mins + (b * (L.nsub() / 2) + p) * 32,
                           _mm512_cvtepu8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + L.mins_at() + p * 32))));
      }
    }
    const __m256i* f = reinterpret_cast<const __m256i*>(fs + b * kRowGroup * L.f16s());
    _mm512_store_ps(d + b * kRowGroup, _mm512_cvtph_ps(_mm256_loadu_si256(f)));
    if constexpr (L.extra != Extra::kNone) _mm512_store_ps(e + b * kRowGroup, _mm512_cvtph_ps(_mm256_loadu_si256(f + 1)));
  }
}

// 16 activation rows against row group g. dx: the rows' scales per block (16 per block); xs:
// their sums per pair of sub-blocks as the int32 vpdpwssd broadcasts (nsub / 2 x 16 per block).
template <WeightType kType>
void IntTileRows(int64_t nb, const int8_t* tiles, const int32_t* scales, const int16_t* mins, const float* d,
                 const float* e, const int8_t* act_tiles, const float* dx, const int32_t* xs, float* y,
                 size_t y_stride, int64_t g, __mmask16 keep, const uint8_t* next_group) {
  static constexpr IntLayout L = *IntLayoutOf(kType);
  constexpr int kSub = L.nsub();
  alignas(64) float acc[kTileRows][kRowGroup] = {};
  __m512i isum[kTileRows];
#pragma GCC unroll 16
  for (int j = 0; j < kTileRows; ++j) isum[j] = _mm512_setzero_si512();
  TileChain(nb * kSub, tiles, act_tiles, [&](const int32_t (&c)[kTileRows][kRowGroup], int64_t k) {
    PrefetchPiece(next_group, L.bytes() / kSub, k);
    const __m512i sc = _mm512_load_si512(scales + k * kRowGroup);
#pragma GCC unroll 16
    for (int j = 0; j < kTileRows; ++j) {
      isum[j] = _mm512_add_epi32(isum[j], _mm512_mullo_epi32(sc, _mm512_load_si512(c[j])));
    }
    if (k % kSub != kSub - 1) return;
    // The block's end.
    const int64_t b = k / kSub;
    const __m512 dv = _mm512_load_ps(d + b * kRowGroup);
#pragma GCC unroll 16
    for (int j = 0; j < kTileRows; ++j) {
      const __m512 dxj = _mm512_set1_ps(dx[b * kTileRows + j]);
      __m512 a = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[j]), _mm512_mul_ps(dv, dxj), _mm512_load_ps(acc[j]));
      isum[j] = _mm512_setzero_si512();
      if constexpr (L.extra == Extra::kMins) {
        __m512i msum = _mm512_setzero_si512();
        for (int p = 0; p < kSub / 2; ++p) {
          msum = _mm512_dpwssd_epi32(msum, _mm512_load_si512(mins + (b * (kSub / 2) + p) * 32),
                                     _mm512_set1_epi32(xs[(b * (kSub / 2) + p) * kTileRows + j]));
        }
        a = _mm512_fmadd_ps(_mm512_cvtepi32_ps(msum), _mm512_mul_ps(_mm512_load_ps(e + b * kRowGroup), dxj), a);
      }
      _mm512_store_ps(acc[j], a);
    }
  });
  for (int j = 0; j < kTileRows; ++j) {
    _mm512_mask_storeu_ps(y + j * y_stride + g * kRowGroup, keep, _mm512_load_ps(acc[j]));
  }
}

template <WeightType kType>
void IntQMatmul(const WeightMatrix& w, const void* act, size_t act_stride, int n_rows, float* y, size_t y_stride,
                int64_t o_begin, int64_t o_end) {
  static constexpr IntLayout L = *IntLayoutOf(kType);
  static_assert(L.block == 256 && L.sub == 32 && L.extra != Extra::kSum);
  const int tiles_of_rows = n_rows / kTileRows;
  const int tiled = tiles_of_rows * kTileRows;
  if (tiles_of_rows > 0) {
    ConfigureTiles();
    const int64_t nb = w.cols / L.block, nk = w.cols / kQBlock;
    constexpr int kPairs = L.nsub() / 2;
    struct Scratch {
      std::unique_ptr<int8_t[], Free> tiles, act_tiles;
      std::unique_ptr<int32_t[], Free> scales, xs;
      std::unique_ptr<int16_t[], Free> mins;
      std::unique_ptr<float[], Free> d, e, dx;
      size_t tiles_n = 0, act_tiles_n = 0, scales_n = 0, xs_n = 0, mins_n = 0, d_n = 0, e_n = 0, dx_n = 0;
    };
    thread_local Scratch sc;
    int8_t* tiles = Reserve(sc.tiles, sc.tiles_n, nk * kTileBlockBytes);
    int32_t* scales = Reserve(sc.scales, sc.scales_n, nk * kRowGroup);
    int16_t* mins = Reserve(sc.mins, sc.mins_n, nb * kPairs * 32);
    float* d = Reserve(sc.d, sc.d_n, nb * kRowGroup);
    float* e = Reserve(sc.e, sc.e_n, nb * kRowGroup);
    int8_t* act_tiles = Reserve(sc.act_tiles, sc.act_tiles_n, tiles_of_rows * nk * kTileBlockBytes);
    float* dx = Reserve(sc.dx, sc.dx_n, tiles_of_rows * nb * kTileRows);
    int32_t* xs = Reserve(sc.xs, sc.xs_n, tiles_of_rows * nb * kPairs * kTileRows);
    for (int r = 0; r < tiled; ++r) {
      const ActQ8KView x = ViewActQ8K(static_cast<const uint8_t*>(act) + r * act_stride, w.cols);
      RowToTiles(x.qs, nk, r, act_tiles);
      const int t = r / kTileRows, j = r % kTileRows;
      for (int64_t b = 0; b < nb; ++b) {
        dx[(t * nb + b) * kTileRows + j] = x.d[b];
        for (int p = 0; p < kPairs; ++p) {
          int32_t pair;
          std::memcpy(&pair, x.sum32 + b * L.nsub() + 2 * p, 4);
          xs[((t * nb + b) * kPairs + p) * kTileRows + j] = pair;
        }
      }
    }
    const int64_t g_begin = o_begin / kRowGroup, g_end = (o_end + kRowGroup - 1) / kRowGroup;
    const uint8_t* data = static_cast<const uint8_t*>(w.data);
    for (int64_t g = g_begin; g < g_end; ++g) {
      avx512::SignedCodeTiles<kType>(w, g, tiles);
      GroupSideData<kType>(w, g, scales, mins, d, e);
      const __mmask16 keep = GroupLanes(g, o_begin, o_end, w.rows);
      const uint8_t* next = g + 1 < g_end ? data + (g + 1) * nb * L.bytes() : nullptr;
      for (int t = 0; t < tiles_of_rows; ++t) {
        IntTileRows<kType>(nb, tiles, scales, mins, d, e, act_tiles + t * nk * kTileBlockBytes,
                           dx + t * nb * kTileRows, xs + t * nb * kPairs * kTileRows, y + t * kTileRows * y_stride,
                           y_stride, g, keep, t == 0 ? next : nullptr);
      }
    }
  }
  if (tiled < n_rows) {
    avx512::IntMatmul<kType>(w, static_cast<const uint8_t*>(act) + tiled * act_stride, act_stride, n_rows - tiled,
                             y + tiled * y_stride, y_stride, o_begin, o_end);
  }
}

}  // namespace

// The kernels AMX replaces in the AVX-512 table (kernel_table.cc builds the "amx" set from
// AVX-512's with these in place of its own).
extern constinit const MatmulKernel kMatmuls[] = {
    {WeightType::kQ8_0, QMatmul<WeightType::kQ8_0>},
    {WeightType::kQ4_0, QMatmul<WeightType::kQ4_0>},
    {WeightType::kQ4K, IntQMatmul<WeightType::kQ4K>},
    {WeightType::kQ5K, IntQMatmul<WeightType::kQ5K>},
    {WeightType::kIq4Xs, IntQMatmul<WeightType::kIq4Xs>},
};
extern constinit const size_t kMatmulCount = sizeof(kMatmuls) / sizeof(kMatmuls[0]);

}  // namespace daisy::kernels::amx
