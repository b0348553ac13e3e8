#include "kernels/quant/int_layout.h"

#include <cstring>

#include "base/check.h"
#include "kernels/quant/float_formats.h"

namespace daisy::kernels {
namespace {

// The -dmin the value formula adds (negating an f16 is exact: flip its sign bit).
uint16_t Negated(uint16_t h) { return static_cast<uint16_t>(h ^ 0x8000u); }

// A 32-element block's 4-bit codes (byte j: elements j and j + 16).
void Nibbles32(const uint8_t* qs, uint8_t* code) {
  for (int j = 0; j < 16; ++j) {
    code[j] = qs[j] & 15;
    code[j + 16] = qs[j] >> 4;
  }
}
// The 2-bit codes of a q2_K/q3_K super-block: element 128 a + 32 k + j is bits 2k of qs[32 a + j].
void TwoBitsK(const uint8_t* qs, uint8_t* code) {
  for (int a = 0; a < 2; ++a) {
    for (int k = 0; k < 4; ++k) {
      for (int j = 0; j < 32; ++j) code[128 * a + 32 * k + j] = (qs[32 * a + j] >> (2 * k)) & 3;
    }
  }
}
// The 4-bit codes of a q4_K/q5_K super-block: chunk c of 64 elements is qs[32 c ..]'s low nibbles
// then its high nibbles.
void NibblesK(const uint8_t* qs, uint8_t* code) {
  for (int c = 0; c < 4; ++c) {
    for (int w = 0; w < 32; ++w) {
      code[64 * c + w] = qs[32 * c + w] & 15;
      code[64 * c + 32 + w] = qs[32 * c + w] >> 4;
    }
  }
}

}  // namespace

void DecomposeBlock(WeightType type, const uint8_t* block, RowBlock& out) {
  out = RowBlock{};
  switch (type) {
    case WeightType::kQ4_1: {
      const auto* b = reinterpret_cast<const BlockQ4_1*>(block);
      Nibbles32(b->qs, out.code);
      out.d = b->d;
      out.e = b->m;
      break;
    }
    case WeightType::kQ5_0:
    case WeightType::kQ5_1: {
      const uint8_t* qs = type == WeightType::kQ5_0 ? reinterpret_cast<const BlockQ5_0*>(block)->qs
                                                     : reinterpret_cast<const BlockQ5_1*>(block)->qs;
      const uint8_t* qhb = type == WeightType::kQ5_0 ? reinterpret_cast<const BlockQ5_0*>(block)->qh
                                                      : reinterpret_cast<const BlockQ5_1*>(block)->qh;
      uint32_t qh;
      std::memcpy(&qh, qhb, 4);
      Nibbles32(qs, out.code);
      for (int e = 0; e < 32; ++e) out.code[e] |= static_cast<uint8_t>(((qh >> e) & 1) << 4);
      if (type == WeightType::kQ5_0) {
        out.d = reinterpret_cast<const BlockQ5_0*>(block)->d;
      } else {
        out.d = reinterpret_cast<const BlockQ5_1*>(block)->d;
        out.e = reinterpret_cast<const BlockQ5_1*>(block)->m;
      }
      break;
    }
    case WeightType::kIq4Nl: {
      const auto* b = reinterpret_cast<const BlockIq4Nl*>(block);
      Nibbles32(b->qs, out.code);
      out.d = b->d;
      break;
    }
    case WeightType::kQ2K: {
      const auto* b = reinterpret_cast<const BlockQ2K*>(block);
      TwoBitsK(b->qs, out.code);
      for (int j = 0; j < 16; ++j) {
        out.scale[j] = static_cast<int8_t>(b->scales[j] & 15);
        out.min[j] = static_cast<uint8_t>(b->scales[j] >> 4);
      }
      out.d = b->d;
      out.e = Negated(b->dmin);
      break;
    }
    case WeightType::kQ3K: {
      const auto* b = reinterpret_cast<const BlockQ3K*>(block);
      TwoBitsK(b->qs, out.code);
      // Element 32 i + j's high bit is bit i of hmask[j].
      for (int i = 0; i < 8; ++i) {
        for (int j = 0; j < 32; ++j) out.code[32 * i + j] |= static_cast<uint8_t>(((b->hmask[j] >> i) & 1) << 2);
      }
      for (int j = 0; j < 16; ++j) out.scale[j] = static_cast<int8_t>(ScaleQ3K(j, b->scales) - 32);
      out.d = b->d;
      break;
    }
    case WeightType::kQ4K:
    case WeightType::kQ5K: {
      const bool five = type == WeightType::kQ5K;
      const auto* b4 = reinterpret_cast<const BlockQ4K*>(block);
      const auto* b5 = reinterpret_cast<const BlockQ5K*>(block);
      const uint8_t* scales = five ? b5->scales : b4->scales;
      NibblesK(five ? b5->qs : b4->qs, out.code);
      if (five) {
        // Element 32 i + j's fifth bit is bit i of qh[j].
        for (int i = 0; i < 8; ++i) {
          for (int j = 0; j < 32; ++j) out.code[32 * i + j] |= static_cast<uint8_t>(((b5->qh[j] >> i) & 1) << 4);
        }
      }
      for (int j = 0; j < 8; ++j) {
        uint8_t sc, m;
        ScaleMinK4(j, scales, &sc, &m);
        out.scale[j] = static_cast<int8_t>(sc);
        out.min[j] = m;
      }
      out.d = five ? b5->d : b4->d;
      out.e = Negated(five ? b5->dmin : b4->dmin);
      break;
    }
    case WeightType::kQ6K: {
      const auto* b = reinterpret_cast<const BlockQ6K*>(block);
      // Element 128 h + 32 k + j: low nibble from ql, two high bits from qh.
      for (int h = 0; h < 2; ++h) {
        for (int k = 0; k < 4; ++k) {
          const uint8_t* ql = b->ql + 64 * h + 32 * (k & 1);
          const uint8_t* qh = b->qh + 32 * h;
          uint8_t* code = out.code + 128 * h + 32 * k;
          for (int j = 0; j < 32; ++j) {
            code[j] = static_cast<uint8_t>(((ql[j] >> (4 * (k >> 1))) & 0xF) | (((qh[j] >> (2 * k)) & 3) << 4));
          }
        }
      }
      for (int j = 0; j < 16; ++j) out.scale[j] = b->scales[j];
      out.d = b->d;
      break;
    }
    case WeightType::kIq4Xs: {
      const auto* b = reinterpret_cast<const BlockIq4Xs*>(block);
      for (int i = 0; i < 8; ++i) Nibbles32(b->qs + 16 * i, out.code + 32 * i);
      for (int j = 0; j < 8; ++j) out.scale[j] = static_cast<int8_t>(ScaleIq4Xs(j, *b) - 32);
      out.d = b->d;
      break;
    }
    default: DAISY_CHECK(false);  // not a format of the family
  }
  const IntLayout& layout = *IntLayoutOf(type);
  if (layout.scales == SubScales::kNone) out.scale[0] = 1;
  if (layout.extra == Extra::kSum) out.min[0] = 1;
}

template <IntLayout L>
void PackIntBlockFor(const RowBlock* const rows[kRowGroup], uint8_t* data, uint16_t* scales) {
  static const RowBlock kZero{};
  std::memset(data, 0, L.bytes());
  for (int l = 0; l < kRowGroup; ++l) {
    const RowBlock& r = rows[l] != nullptr ? *rows[l] : kZero;
    for (int s = 0; s < L.block / 4; ++s) {
      uint8_t* base = data + L.base_at(s) + (L.base == CodeBase::kNib ? (l % 8) * 4 : l * 4);
      [[maybe_unused]] uint8_t* high = data + L.high_at(s) + l * 4;
      for (int t = 0; t < 4; ++t) {
        const int code = r.code[4 * s + t];
        if constexpr (L.base == CodeBase::kNib) {
          base[t] |= static_cast<uint8_t>((code & 15) << (l < 8 ? 0 : 4));
        } else {
          base[t] |= static_cast<uint8_t>((code & 3) << (2 * (s % 4)));
        }
        if constexpr (L.high != CodeHigh::kNone) {
          constexpr int kMask = L.high == CodeHigh::kH1 ? 1 : 3;
          high[t] |= static_cast<uint8_t>(((code >> L.high_shift()) & kMask) << L.high_bit(s));
        }
      }
    }
    for (int j = 0; j < L.nsub(); ++j) {
      uint8_t* sc = data + L.scales_at() + IntLayout::SubIndex(j, l);
      if constexpr (L.scales == SubScales::kInt8) {
        *sc = static_cast<uint8_t>(r.scale[j]);
      } else if constexpr (L.scales == SubScales::kInt8AndMin) {
        *sc = static_cast<uint8_t>(r.scale[j]);
        data[L.mins_at() + IntLayout::SubIndex(j, l)] = r.min[j];
      } else if constexpr (L.scales == SubScales::kNibbles) {
        *sc = static_cast<uint8_t>((r.scale[j] & 15) | (r.min[j] << 4));
      }
    }
    scales[l] = r.d;
    if constexpr (L.f16s() == 2) scales[kRowGroup + l] = r.e;
  }
}

#define DAISY_PACK_INT_BLOCK(layout) \
  template void PackIntBlockFor<layout>(const RowBlock* const[kRowGroup], uint8_t*, uint16_t*);
DAISY_PACK_INT_BLOCK(kLayoutQ4_1)
DAISY_PACK_INT_BLOCK(kLayoutQ5_0)
DAISY_PACK_INT_BLOCK(kLayoutQ5_1)
DAISY_PACK_INT_BLOCK(kLayoutIq4Nl)
DAISY_PACK_INT_BLOCK(kLayoutQ2K)
DAISY_PACK_INT_BLOCK(kLayoutQ3K)
DAISY_PACK_INT_BLOCK(kLayoutQ4K)
DAISY_PACK_INT_BLOCK(kLayoutQ5K)
DAISY_PACK_INT_BLOCK(kLayoutQ6K)
DAISY_PACK_INT_BLOCK(kLayoutIq4Xs)
#undef DAISY_PACK_INT_BLOCK

namespace {

template <IntLayout L>
void UnpackIntRowFor(const uint8_t* data, const uint16_t* scales, int row, RowBlock& out) {
  out = RowBlock{};
  for (int s = 0; s < L.block / 4; ++s) {
    // A step's 4 elements share their bytes' places and shifts (nib: row % 8's bytes, the high
    // nibble for rows 8-15; l2: the step's 2 bits).
    const uint8_t* base = data + L.base_at(s) + (L.base == CodeBase::kNib ? (row % 8) * 4 : row * 4);
    [[maybe_unused]] const uint8_t* high = data + L.high_at(s) + row * 4;
    for (int t = 0; t < 4; ++t) {
      int code;
      if constexpr (L.base == CodeBase::kNib) {
        code = (base[t] >> (row < 8 ? 0 : 4)) & 15;
      } else {
        code = (base[t] >> (2 * (s % 4))) & 3;
      }
      if constexpr (L.high != CodeHigh::kNone) {
        constexpr int kMask = L.high == CodeHigh::kH1 ? 1 : 3;
        code |= ((high[t] >> L.high_bit(s)) & kMask) << L.high_shift();
      }
      out.code[4 * s + t] = static_cast<uint8_t>(code);
    }
  }
  for (int j = 0; j < L.nsub(); ++j) {
    const uint8_t sc = data[L.scales_at() + IntLayout::SubIndex(j, row)];
    if constexpr (L.scales == SubScales::kNone) {
      out.scale[j] = 1;
    } else if constexpr (L.scales == SubScales::kInt8) {
      out.scale[j] = static_cast<int8_t>(sc);
    } else if constexpr (L.scales == SubScales::kInt8AndMin) {
      out.scale[j] = static_cast<int8_t>(sc);
      out.min[j] = data[L.mins_at() + IntLayout::SubIndex(j, row)];
    } else {
      out.scale[j] = static_cast<int8_t>(sc & 15);
      out.min[j] = static_cast<uint8_t>(sc >> 4);
    }
    if constexpr (L.extra == Extra::kSum) out.min[j] = 1;
  }
  out.d = scales[row];
  if constexpr (L.f16s() == 2) out.e = scales[kRowGroup + row];
}

// Calls f.template operator()<L>() with the family's layout equal to `layout` (as a constant).
template <class F>
void WithLayout(const IntLayout& layout, F&& f) {
  if (layout == kLayoutQ4_1) return f.template operator()<kLayoutQ4_1>();
  if (layout == kLayoutQ5_0) return f.template operator()<kLayoutQ5_0>();
  if (layout == kLayoutQ5_1) return f.template operator()<kLayoutQ5_1>();
  if (layout == kLayoutIq4Nl) return f.template operator()<kLayoutIq4Nl>();
  if (layout == kLayoutQ2K) return f.template operator()<kLayoutQ2K>();
  if (layout == kLayoutQ3K) return f.template operator()<kLayoutQ3K>();
  if (layout == kLayoutQ4K) return f.template operator()<kLayoutQ4K>();
  if (layout == kLayoutQ5K) return f.template operator()<kLayoutQ5K>();
  if (layout == kLayoutQ6K) return f.template operator()<kLayoutQ6K>();
  if (layout == kLayoutIq4Xs) return f.template operator()<kLayoutIq4Xs>();
  DAISY_CHECK(false);  // a layout not of the family
}

}  // namespace

void PackIntBlock(const IntLayout& layout, const RowBlock* const rows[kRowGroup], uint8_t* data, uint16_t* scales) {
  WithLayout(layout, [&]<IntLayout L>() { PackIntBlockFor<L>(rows, data, scales); });
}

void UnpackIntRow(const IntLayout& layout, const uint8_t* data, const uint16_t* scales, int row, RowBlock& out) {
  WithLayout(layout, [&]<IntLayout L>() { UnpackIntRowFor<L>(data, scales, row, out); });
}

void DequantizeRowBlock(const IntLayout& layout, const RowBlock& in, float* out) {
  const float d = Fp16ToFp32(in.d), e = Fp16ToFp32(in.e);
  for (int j = 0; j < layout.nsub(); ++j) {
    const float dl = d * in.scale[j];
    for (int i = j * layout.sub; i < (j + 1) * layout.sub; ++i) {
      const float v = dl * (CodeValue(layout, in.code[i]) - layout.off);
      out[i] = layout.extra == Extra::kNone ? v : v + e * in.min[j];
    }
  }
}

}  // namespace daisy::kernels
