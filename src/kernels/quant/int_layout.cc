#include "kernels/quant/int_layout.h"

#include <cstring>

#include "base/check.h"
#include "kernels/quant/float_formats.h"

namespace daisy::kernels {
namespace {

// The -dmin the value formula adds (negating an f16 is exact: flip its sign bit).
uint16_t Negated(uint16_t h) { return static_cast<uint16_t>(h ^ 0x8000u); }

// A 32-element block's 4-bit code of element e (byte j: elements j and j + 16).
int Nibble32(const uint8_t* qs, int e) { return e < 16 ? qs[e] & 15 : qs[e - 16] >> 4; }
// 2-bit code of element e of a q2_K/q3_K super-block.
int TwoBits(const uint8_t* qs, int e) { return (qs[32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3; }
// 4-bit code of element e of a q4_K/q5_K super-block.
int NibbleK(const uint8_t* qs, int e) {
  const int c = e / 64, w = e % 64;
  return w < 32 ? qs[32 * c + w] & 15 : qs[32 * c + w - 32] >> 4;
}

}  // namespace

void DecomposeBlock(WeightType type, const uint8_t* block, RowBlock& out) {
  out = RowBlock{};
  switch (type) {
    case WeightType::kQ4_1: {
      const auto* b = reinterpret_cast<const BlockQ4_1*>(block);
      for (int e = 0; e < 32; ++e) out.code[e] = static_cast<uint8_t>(Nibble32(b->qs, e));
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
      for (int e = 0; e < 32; ++e) out.code[e] = static_cast<uint8_t>(Nibble32(qs, e) | (((qh >> e) & 1) << 4));
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
      for (int e = 0; e < 32; ++e) out.code[e] = static_cast<uint8_t>(Nibble32(b->qs, e));
      out.d = b->d;
      break;
    }
    case WeightType::kQ2K: {
      const auto* b = reinterpret_cast<const BlockQ2K*>(block);
      for (int e = 0; e < 256; ++e) out.code[e] = static_cast<uint8_t>(TwoBits(b->qs, e));
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
      for (int e = 0; e < 256; ++e) {
        out.code[e] = static_cast<uint8_t>(TwoBits(b->qs, e) | (((b->hmask[e % 32] >> (e / 32)) & 1) << 2));
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
      for (int e = 0; e < 256; ++e) {
        int code = NibbleK(five ? b5->qs : b4->qs, e);
        if (five) code |= ((b5->qh[e % 32] >> (2 * (e / 64) + (e % 64) / 32)) & 1) << 4;
        out.code[e] = static_cast<uint8_t>(code);
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
      for (int e = 0; e < 256; ++e) {
        const int h = e / 128, k = (e % 128) / 32, j = e % 32;
        const int low = (b->ql[64 * h + j + 32 * (k & 1)] >> (4 * (k >> 1))) & 0xF;
        const int high = (b->qh[32 * h + j] >> (2 * k)) & 3;
        out.code[e] = static_cast<uint8_t>(low | (high << 4));
      }
      for (int j = 0; j < 16; ++j) out.scale[j] = b->scales[j];
      out.d = b->d;
      break;
    }
    case WeightType::kIq4Xs: {
      const auto* b = reinterpret_cast<const BlockIq4Xs*>(block);
      for (int e = 0; e < 256; ++e) out.code[e] = static_cast<uint8_t>(Nibble32(b->qs + 16 * (e / 32), e % 32));
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

void PackIntBlock(const IntLayout& layout, const RowBlock* const rows[kRowGroup], uint8_t* data, uint16_t* scales) {
  static const RowBlock kZero{};
  std::memset(data, 0, layout.bytes());
  for (int l = 0; l < kRowGroup; ++l) {
    const RowBlock& r = rows[l] != nullptr ? *rows[l] : kZero;
    for (int e = 0; e < layout.block; ++e) {
      const int code = r.code[e], s = e / 4, t = e % 4;
      if (layout.base == CodeBase::kNib) {
        data[layout.base_at(s) + (l % 8) * 4 + t] |= static_cast<uint8_t>((code & 15) << (l < 8 ? 0 : 4));
      } else {
        data[layout.base_at(s) + l * 4 + t] |= static_cast<uint8_t>((code & 3) << (2 * (s % 4)));
      }
      const int hi = code >> layout.high_shift();
      if (layout.high != CodeHigh::kNone) {
        const int mask = layout.high == CodeHigh::kH1 ? 1 : 3;
        data[layout.high_at(s) + l * 4 + t] |= static_cast<uint8_t>((hi & mask) << layout.high_bit(s));
      }
    }
    for (int j = 0; j < layout.nsub(); ++j) {
      uint8_t* sc = data + layout.scales_at() + IntLayout::SubIndex(j, l);
      switch (layout.scales) {
        case SubScales::kNone: break;
        case SubScales::kInt8: *sc = static_cast<uint8_t>(r.scale[j]); break;
        case SubScales::kInt8AndMin:
          *sc = static_cast<uint8_t>(r.scale[j]);
          data[layout.mins_at() + IntLayout::SubIndex(j, l)] = r.min[j];
          break;
        case SubScales::kNibbles: *sc = static_cast<uint8_t>((r.scale[j] & 15) | (r.min[j] << 4)); break;
      }
    }
    scales[l] = r.d;
    if (layout.f16s() == 2) scales[kRowGroup + l] = r.e;
  }
}

void UnpackIntRow(const IntLayout& layout, const uint8_t* data, const uint16_t* scales, int row, RowBlock& out) {
  out = RowBlock{};
  for (int e = 0; e < layout.block; ++e) {
    const int s = e / 4, t = e % 4;
    int code;
    if (layout.base == CodeBase::kNib) {
      code = (data[layout.base_at(s) + (row % 8) * 4 + t] >> (row < 8 ? 0 : 4)) & 15;
    } else {
      code = (data[layout.base_at(s) + row * 4 + t] >> (2 * (s % 4))) & 3;
    }
    if (layout.high != CodeHigh::kNone) {
      const int mask = layout.high == CodeHigh::kH1 ? 1 : 3;
      code |= ((data[layout.high_at(s) + row * 4 + t] >> layout.high_bit(s)) & mask) << layout.high_shift();
    }
    out.code[e] = static_cast<uint8_t>(code);
  }
  for (int j = 0; j < layout.nsub(); ++j) {
    const uint8_t sc = data[layout.scales_at() + IntLayout::SubIndex(j, row)];
    switch (layout.scales) {
      case SubScales::kNone: out.scale[j] = 1; break;
      case SubScales::kInt8: out.scale[j] = static_cast<int8_t>(sc); break;
      case SubScales::kInt8AndMin:
        out.scale[j] = static_cast<int8_t>(sc);
        out.min[j] = data[layout.mins_at() + IntLayout::SubIndex(j, row)];
        break;
      case SubScales::kNibbles:
        out.scale[j] = static_cast<int8_t>(sc & 15);
        out.min[j] = static_cast<uint8_t>(sc >> 4);
        break;
    }
  }
  if (layout.extra == Extra::kSum) {
    for (int j = 0; j < layout.nsub(); ++j) out.min[j] = 1;
  }
  out.d = scales[row];
  if (layout.f16s() == 2) out.e = scales[kRowGroup + row];
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
