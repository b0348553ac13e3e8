// The packed layout of the integer formats beyond q8_0/q4_0 (q4_1, q5_0, q5_1, iq4_nl and the
// K-quants q2_K..q6_K, iq4_xs): one description (IntLayout) that every kernel table reads, so
// that a new format of this family is a row of the table, a GGUF decomposition and nothing
// else.
//
// Every such format computes, for each row and block of `block` elements,
//
//   value(e) = d * scale[j] * (code(e) - off) + e_scale * min[j]       (j = e / sub)
//
// with unsigned integer codes, small integer scales and mins per sub-block of `sub` elements,
// and one or two f16 numbers (d, e_scale) per row and block. Dot products with quantised
// activations (x = dx * xq) then need only integers inside a block:
//
//   dot = dx * (d * sum_j scale[j] * (sum_e code * xq - off * xsum_j) + e_scale * sum_j min[j] * xsum_j)
//
// where xsum_j is the sum of the activation's integers over sub-block j (Q8_K keeps them per 16
// and per 32 elements as int16; activations.h). The 32-element formats have one sub-block (scale 1) and, for q4_1 and
// q5_1, the e_scale term uses the activation block's rounded sum (Q8_1's s) as llama.cpp does.
//
// Packed bytes of one (row group of 16 rows, block), read front to back by the kernels (one
// ascending stream per block, which the hardware prefetchers follow at full memory speed; two
// interleaved planes 2 KiB apart measured at less than half of it):
//   head    the sub-block scales, int8 [nsub / 2][16 rows][2]: sub-blocks in pairs, so that 32
//           bytes widened to int16 are each row's (scale[2p], scale[2p + 1]), one vpdpwssd /
//           pmaddwd operand (q2_K: one byte scale | min << 4 per sub-block, same order); then
//           the mins, uint8, same order, when the format has separate mins;
//   chunks  of chunk_steps() steps each: the 64 bytes of the high plane (the bits above the
//           base, if any: 1 bit (h1) or 2 bits (h2) per code), then the base plane's bytes (the
//           low bits of every code: 4 bits (nib) or 2 bits (l2)).
// and in the f16 `scales` array of the matrix, per (row group, block): d[16] then e_scale[16].
// Codes are laid out in steps of 4 elements x 16 rows, the 64 bytes one vpdpbusd reads (lane =
// row, byte = element), so a kernel turns plane bytes into one step with a shift and a mask.
// With t = the step's index inside its chunk:
//   nib: 32 bytes per step; byte 4k + e holds element 4s + e of row k (low nibble) and of row
//        8 + k (high nibble) (as q4_0.h);
//   l2: 64 bytes per 4 steps; byte 4r + e holds element 4s + e of row r in bits 2(t % 4);
//   h1: 64 bytes per chunk of 8 steps; byte 4r + e holds element 4s + e of row r in bit t;
//   h2: 64 bytes per chunk of 4 steps; the same in bits 2t.
// iq4_nl/iq4_xs codes are indices into kIq4Values; their code value is kIq4Values[index] + 128
// (unsigned, 1..241) with off = 128.
#pragma once

#include <cstdint>

#include "kernels/quant/blocks.h"
#include "kernels/quant/formats.h"

namespace daisy::kernels {

enum class CodeBase : uint8_t { kNib, kL2 };
enum class CodeHigh : uint8_t { kNone, kH1, kH2 };
enum class SubScales : uint8_t {
  kNone,        // one sub-block, scale 1
  kInt8,        // int8 scale per sub-block
  kInt8AndMin,  // int8 scale and uint8 min per sub-block
  kNibbles,     // one byte per sub-block: scale | min << 4 (q2_K)
};
enum class Extra : uint8_t {
  kNone,  // no e_scale
  kMins,  // e_scale * sum_j min[j] * xsum_j (e_scale = -dmin of the K-quants)
  kSum,   // e_scale * s of the Q8_1 activation block (q4_1, q5_1: e_scale = m)
};

struct IntLayout {
  int block;  // elements per block (32 or 256)
  int sub;    // elements per scale
  CodeBase base;
  CodeHigh high;
  bool table;  // codes are indices into kIq4Values
  int off;     // subtracted from each code value
  SubScales scales;
  Extra extra;

  constexpr bool operator==(const IntLayout&) const = default;
  constexpr int nsub() const { return block / sub; }
  constexpr int high_shift() const { return base == CodeBase::kNib ? 4 : 2; }
  constexpr int scales_at() const { return 0; }
  constexpr int mins_at() const { return scales == SubScales::kNone ? 0 : nsub() * kRowGroup; }
  constexpr int head_bytes() const { return mins_at() + (scales == SubScales::kInt8AndMin ? nsub() * kRowGroup : 0); }
  // Steps per chunk: one 64-byte high vector's worth (h1: 8, h2: 4), else 8 (nib) or 4 (l2).
  constexpr int chunk_steps() const {
    return high == CodeHigh::kH1 ? 8 : high == CodeHigh::kH2 ? 4 : base == CodeBase::kNib ? 8 : 4;
  }
  constexpr int chunk_high_bytes() const { return high == CodeHigh::kNone ? 0 : 64; }
  constexpr int base_step_bytes() const { return base == CodeBase::kNib ? 32 : 16; }
  constexpr int chunk_bytes() const { return chunk_high_bytes() + chunk_steps() * base_step_bytes(); }
  constexpr int bytes() const { return head_bytes() + (block / 4 / chunk_steps()) * chunk_bytes(); }
  // Where step s's data lives: its chunk's high vector, and its base bytes (nib: the step's 32
  // bytes; l2: the 64-byte vector holding it, in bits 2 (s % 4)).
  constexpr int chunk_at(int s) const { return head_bytes() + (s / chunk_steps()) * chunk_bytes(); }
  constexpr int high_at(int s) const { return chunk_at(s); }
  constexpr int base_at(int s) const {
    const int t = s % chunk_steps();
    return chunk_at(s) + chunk_high_bytes() + (base == CodeBase::kNib ? t * 32 : (t / 4) * 64);
  }
  // The bit of step s's high part in its high vector (h1: one bit, h2: two).
  constexpr int high_bit(int s) const { return high == CodeHigh::kH1 ? s % chunk_steps() : 2 * (s % chunk_steps()); }
  // Byte of sub-block j, row l in the scales (or mins) area.
  static constexpr int SubIndex(int j, int l) { return (j / 2) * 2 * kRowGroup + l * 2 + j % 2; }
  constexpr int f16s() const { return extra == Extra::kNone ? 1 : 2; }  // per row and block
  constexpr int code_max() const {
    const int low = base == CodeBase::kNib ? 15 : 3;
    const int bits = high == CodeHigh::kH1 ? 1 : high == CodeHigh::kH2 ? 2 : 0;
    return table ? 241 : ((low + 1) << bits) - 1;
  }
};

// One row's block, decomposed (what packing writes and unpacking reads back).
struct RowBlock {
  uint8_t code[256] = {};  // raw codes (an index into kIq4Values for the table formats)
  int8_t scale[16] = {};
  uint8_t min[16] = {};
  uint16_t d = 0, e = 0;  // f16 bits
};

// The code value a raw code stands for (table formats: kIq4Values[code] + 128).
inline int CodeValue(const IntLayout& layout, int raw);

// Writes one (row group, block): `rows` are the 16 rows' decompositions (nullptr: padding row,
// all zeros). `data` receives layout.bytes() bytes, `scales` 16 * layout.f16s() f16 values.
// The template is the same code with the layout known at compile time (offsets without
// divisions: loading a model packs every block of its weights this way).
template <IntLayout L>
void PackIntBlockFor(const RowBlock* const rows[kRowGroup], uint8_t* data, uint16_t* scales);
void PackIntBlock(const IntLayout& layout, const RowBlock* const rows[kRowGroup], uint8_t* data, uint16_t* scales);
// Reads row `row` of one packed (row group, block) back.
void UnpackIntRow(const IntLayout& layout, const uint8_t* data, const uint16_t* scales, int row, RowBlock& out);
// Dequantises a decomposed row block as ggml does (value formula above, left to right).
void DequantizeRowBlock(const IntLayout& layout, const RowBlock& in, float* out);

// The family's layouts: {block, sub, base, high, table, off, scales, extra}.
inline constexpr IntLayout kLayoutQ4_1 = {32, 32, CodeBase::kNib, CodeHigh::kNone, false, 0, SubScales::kNone, Extra::kSum};
inline constexpr IntLayout kLayoutQ5_0 = {32, 32, CodeBase::kNib, CodeHigh::kH1, false, 16, SubScales::kNone, Extra::kNone};
inline constexpr IntLayout kLayoutQ5_1 = {32, 32, CodeBase::kNib, CodeHigh::kH1, false, 0, SubScales::kNone, Extra::kSum};
inline constexpr IntLayout kLayoutIq4Nl = {32, 32, CodeBase::kNib, CodeHigh::kNone, true, 128, SubScales::kNone, Extra::kNone};
inline constexpr IntLayout kLayoutQ2K = {256, 16, CodeBase::kL2, CodeHigh::kNone, false, 0, SubScales::kNibbles, Extra::kMins};
inline constexpr IntLayout kLayoutQ3K = {256, 16, CodeBase::kL2, CodeHigh::kH1, false, 4, SubScales::kInt8, Extra::kNone};
inline constexpr IntLayout kLayoutQ4K = {256, 32, CodeBase::kNib, CodeHigh::kNone, false, 0, SubScales::kInt8AndMin, Extra::kMins};
inline constexpr IntLayout kLayoutQ5K = {256, 32, CodeBase::kNib, CodeHigh::kH1, false, 0, SubScales::kInt8AndMin, Extra::kMins};
inline constexpr IntLayout kLayoutQ6K = {256, 16, CodeBase::kNib, CodeHigh::kH2, false, 32, SubScales::kInt8, Extra::kNone};
inline constexpr IntLayout kLayoutIq4Xs = {256, 32, CodeBase::kNib, CodeHigh::kNone, true, 128, SubScales::kInt8, Extra::kNone};

// The layout of `type`, or nullptr for formats that are not of this family.
constexpr const IntLayout* IntLayoutOf(WeightType type) {
  switch (type) {
    case WeightType::kQ4_1: return &kLayoutQ4_1;
    case WeightType::kQ5_0: return &kLayoutQ5_0;
    case WeightType::kQ5_1: return &kLayoutQ5_1;
    case WeightType::kIq4Nl: return &kLayoutIq4Nl;
    case WeightType::kQ2K: return &kLayoutQ2K;
    case WeightType::kQ3K: return &kLayoutQ3K;
    case WeightType::kQ4K: return &kLayoutQ4K;
    case WeightType::kQ5K: return &kLayoutQ5K;
    case WeightType::kQ6K: return &kLayoutQ6K;
    case WeightType::kIq4Xs: return &kLayoutIq4Xs;
    default: return nullptr;
  }
}

// GGUF block -> RowBlock (`type` has an IntLayout).
void DecomposeBlock(WeightType type, const uint8_t* block, RowBlock& out);

inline int CodeValue(const IntLayout& layout, int raw) {
  return layout.table ? kIq4Values[raw & 15] + 128 : raw;
}

}  // namespace daisy::kernels
