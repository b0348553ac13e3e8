#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "kernels/quant/q8_0.h"
#include "kernels/quant/q4_0.h"
#include "kernels/quant/float_formats.h"
#include "kernels/quant/int_layout.h"
#include "kernels/quant/int_quants.h"
#include "kernels/quant/search.h"
#include "kernels/quant/blocks.h"
#include "kernels/weights.h"
#include <cstring>

namespace daisy::kernels {
namespace {

TEST(Fp16, KnownValues) {
  EXPECT_EQ(Fp32ToFp16(0.f), 0x0000);
  EXPECT_EQ(Fp32ToFp16(-0.f), 0x8000);
  EXPECT_EQ(Fp32ToFp16(1.f), 0x3c00);
  EXPECT_EQ(Fp32ToFp16(-2.f), 0xc000);
  EXPECT_EQ(Fp32ToFp16(65504.f), 0x7bff);
  EXPECT_EQ(Fp32ToFp16(65520.f), 0x7c00);  // rounds to infinity
  EXPECT_EQ(Fp32ToFp16(std::numeric_limits<float>::infinity()), 0x7c00);
  EXPECT_EQ(Fp32ToFp16(5.9604645e-08f), 0x0001);  // smallest subnormal
  EXPECT_EQ(Fp32ToFp16(2.9802322e-08f), 0x0000);  // exactly half of it: ties to even (0)
  EXPECT_EQ(Fp32ToFp16(1.0009765625f), 0x3c01);
  EXPECT_EQ(Fp32ToFp16(1.00048828125f), 0x3c00);  // tie between 0x3c00 and 0x3c01: even
  EXPECT_EQ(Fp32ToFp16(1.00146484375f), 0x3c02);  // tie between 0x3c01 and 0x3c02: even
  EXPECT_TRUE(std::isnan(Fp16ToFp32(Fp32ToFp16(std::nanf("")))));
}

TEST(Fp16, EveryHalfRoundTrips) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = Fp16ToFp32(static_cast<uint16_t>(h));
    if (std::isnan(f)) continue;
    ASSERT_EQ(Fp32ToFp16(f), h) << "half 0x" << std::hex << h;
  }
}

TEST(Fp16, RoundsToNearest) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-70000.f, 70000.f);
  for (int i = 0; i < 100000; ++i) {
    const float x = dist(rng) * (i % 2 ? 1e-4f : 1.f);
    const uint16_t h = Fp32ToFp16(x);
    const float back = Fp16ToFp32(h);
    if (std::isinf(back)) continue;
    // No other half is closer.
    const float up = Fp16ToFp32(static_cast<uint16_t>(h + 1));
    const float down = Fp16ToFp32(static_cast<uint16_t>(h - 1));
    if ((h & 0x7fff) != 0 && (h & 0x7fff) != 0x7bff) {
      ASSERT_LE(std::fabs(back - x), std::fabs(up - x)) << x;
      ASSERT_LE(std::fabs(back - x), std::fabs(down - x)) << x;
    }
  }
}

// The rows (F16C where the CPU has it) give the scalar code's bits for every f32 bit pattern
// class: all 2^19 sign/exponent/top-mantissa prefixes, each with the low 13 bits (the ones
// rounded away) at the tie, around it, zero and full, plus every half for the way back. Rows
// of odd lengths cover the scalar tails.
TEST(Fp16, RowsMatchTheScalarCode) {
  const uint32_t lows[] = {0, 1, 0xfff, 0x1000, 0x1001, 0x1fff, 0x0800, 0x1800};
  std::vector<float> x;
  x.reserve((size_t{1} << 19) * std::size(lows));
  for (uint32_t hi = 0; hi < (1u << 19); ++hi) {
    for (const uint32_t lo : lows) x.push_back(std::bit_cast<float>((hi << 13) | lo));
  }
  for (const size_t n : {x.size(), size_t{13}, size_t{7}}) {
    std::vector<uint16_t> fast(n), slow(n);
    Fp32ToFp16Row(x.data(), fast.data(), n);
    Fp32ToFp16RowScalar(x.data(), slow.data(), n);
    for (size_t i = 0; i < n; ++i) {
      ASSERT_EQ(fast[i], slow[i]) << "f32 0x" << std::hex << std::bit_cast<uint32_t>(x[i]);
    }
    std::vector<float> rf(n), rs(n);
    RoundF16Row(x.data(), rf.data(), n);
    RoundF16RowScalar(x.data(), rs.data(), n);
    ASSERT_EQ(0, std::memcmp(rf.data(), rs.data(), n * sizeof(float)));
  }
  std::vector<uint16_t> halves(0x10000 + 5);
  for (size_t h = 0; h < halves.size(); ++h) halves[h] = static_cast<uint16_t>(h);
  std::vector<float> fast(halves.size()), slow(halves.size());
  Fp16ToFp32Row(halves.data(), fast.data(), halves.size());
  Fp16ToFp32RowScalar(halves.data(), slow.data(), halves.size());
  ASSERT_EQ(0, std::memcmp(fast.data(), slow.data(), fast.size() * sizeof(float)));
  // In place, as the activation rows of f16 weights use it.
  std::vector<float> same(x.begin(), x.begin() + 1001), expect(1001);
  RoundF16RowScalar(same.data(), expect.data(), same.size());
  RoundF16Row(same.data(), same.data(), same.size());
  ASSERT_EQ(0, std::memcmp(same.data(), expect.data(), same.size() * sizeof(float)));
}

TEST(Bf16, RoundsToNearestEven) {
  EXPECT_EQ(Fp32ToBf16(1.f), 0x3f80);
  EXPECT_EQ(Fp32ToBf16(std::bit_cast<float>(0x3f808000u)), 0x3f80);  // tie, even stays
  EXPECT_EQ(Fp32ToBf16(std::bit_cast<float>(0x3f818000u)), 0x3f82);  // tie, odd rounds up
  EXPECT_EQ(Fp32ToBf16(std::bit_cast<float>(0x3f808001u)), 0x3f81);
  EXPECT_EQ(Bf16ToFp32(0x3f80), 1.f);
  EXPECT_TRUE(std::isnan(Bf16ToFp32(Fp32ToBf16(std::nanf("")))));
}

std::vector<float> RandomRow(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.f, 1.f);
  std::vector<float> x(n);
  for (float& v : x) v = dist(rng);
  return x;
}

TEST(Q8_0, QuantizesWithinHalfAStep) {
  const std::vector<float> x = RandomRow(256, 1);
  std::vector<BlockQ8_0> q(256 / 32);
  QuantizeRowQ8_0(x.data(), q.data(), x.size());
  std::vector<float> y(x.size());
  DequantizeRowQ8_0(q.data(), y.data(), y.size());
  for (size_t b = 0; b < q.size(); ++b) {
    float amax = 0;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[b * 32 + j]));
    const float step = Fp16ToFp32(q[b].d);
    EXPECT_NEAR(step, amax / 127, amax / 127 * 1e-3);
    for (int j = 0; j < 32; ++j) EXPECT_LE(std::fabs(y[b * 32 + j] - x[b * 32 + j]), step * 0.5f + 1e-3f);
  }
}

TEST(Q4_0, KnownBlock) {
  // Largest magnitude -4 maps to q = 0 with d = 0.5; 3.5 maps to 15.
  float x[32] = {};
  x[0] = -4.f;
  x[1] = 3.5f;
  x[16] = 0.5f;
  BlockQ4_0 q;
  QuantizeRowQ4_0(x, &q, 32);
  EXPECT_EQ(Fp16ToFp32(q.d), 0.5f);
  EXPECT_EQ(q.qs[0], 0x90);  // low nibble x[0] -> 0, high nibble x[16] -> 9
  EXPECT_EQ(q.qs[1], 0x8f);  // x[1] -> 15, x[17] = 0 -> 8
  float y[32];
  DequantizeRowQ4_0(&q, y, 32);
  EXPECT_EQ(y[0], -4.f);
  EXPECT_EQ(y[1], 3.5f);
  EXPECT_EQ(y[16], 0.5f);
  EXPECT_EQ(y[2], 0.f);
}

TEST(Q4_0, QuantizesWithinHalfAStep) {
  const std::vector<float> x = RandomRow(512, 2);
  std::vector<BlockQ4_0> q(512 / 32);
  QuantizeRowQ4_0(x.data(), q.data(), x.size());
  std::vector<float> y(x.size());
  DequantizeRowQ4_0(q.data(), y.data(), y.size());
  for (size_t b = 0; b < q.size(); ++b) {
    const float step = std::fabs(Fp16ToFp32(q[b].d));
    for (int j = 0; j < 32; ++j) {
      // The top code (15) stands for 7*d: values beyond it clamp, up to one step away.
      const uint8_t code = j < 16 ? (q[b].qs[j] & 0x0f) : (q[b].qs[j - 16] >> 4);
      const float bound = code == 15 ? step : step * 0.5f;
      EXPECT_LE(std::fabs(y[b * 32 + j] - x[b * 32 + j]), bound + step * 1e-2f) << b << "," << j;
    }
  }
}

}  // namespace
}  // namespace daisy::kernels

namespace daisy::kernels {
namespace {

// Packing: the documented byte layout (q8_0.h, q4_0.h), padding rows, and DequantizeRow of the
// packed matrix equal to dequantising the GGUF rows, for every packed format of the table.
TEST(Packing, LayoutAndRoundTrip) {
  std::mt19937 rng(5);
  std::normal_distribution<float> dist;
  for (const WeightFormat& f : WeightFormats()) {
    const int64_t rows = 21, cols = 2 * ColsMultiple(f.type);  // a second, padded row group; two blocks
    std::vector<float> x(rows * cols);
    for (float& v : x) v = dist(rng);
    std::vector<uint8_t> gguf(GgufBytes(f.type, rows, cols));
    f.quantize_row(x.data(), gguf.data(), rows * cols);
    std::vector<uint8_t> data(PackedDataBytes(f.type, rows, cols));
    std::vector<uint16_t> scales(PackedScaleBytes(f.type, rows, cols) / 2);
    PackFromGguf(f.type, gguf.data(), rows, cols, data.data(), scales.data());
    const WeightMatrix w{f.type, rows, cols, data.data(), scales.empty() ? nullptr : scales.data()};
    std::vector<float> want(cols), got(cols);
    for (int64_t o = 0; o < rows; ++o) {
      f.dequantize_row(gguf.data() + GgufBytes(f.type, o, cols), want.data(), cols);
      DequantizeRow(w, o, got.data());
      ASSERT_EQ(std::memcmp(want.data(), got.data(), cols * 4), 0) << f.name << " row " << o;
    }
    if (!f.packed) {
      EXPECT_EQ(std::memcmp(data.data(), gguf.data(), gguf.size()), 0) << f.name;
      continue;
    }
    // Padding rows 21..31 of the second group: scale +0, value 0.
    if (f.layout != nullptr) {
      for (int l = rows - kRowGroup; l < kRowGroup; ++l) {
        RowBlock r;
        UnpackIntRow(*f.layout, data.data() + (1 * 2 + 1) * f.group_block_bytes,
                     scales.data() + (1 * 2 + 1) * f.group_scales, l, r);
        EXPECT_EQ(r.d, 0) << f.name;
        EXPECT_EQ(r.e, 0) << f.name;
        for (int e = 0; e < f.block_elems; ++e) ASSERT_EQ(r.code[e], 0) << f.name;
      }
      continue;
    }
    int8_t q[kRowGroup][kQBlock];
    f.unpack_block(data.data() + (1 * 2 + 1) * f.group_block_bytes, q);
    for (int l = rows - kRowGroup; l < kRowGroup; ++l) {
      EXPECT_EQ(scales[(1 * 2 + 1) * kRowGroup + l], 0) << f.name;
      for (int e = 0; e < kQBlock; ++e) ASSERT_EQ(q[l][e], 0) << f.name;
    }
  }
  // The byte of (row 3, element 5) of the first block, as the headers document it.
  std::vector<float> x(kRowGroup * 32);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(static_cast<int>(i % 15) - 7);
  std::vector<BlockQ8_0> b8(kRowGroup);
  QuantizeRowQ8_0(x.data(), b8.data(), x.size());
  std::vector<uint8_t> d8(kQ8_0GroupBlockBytes);
  uint16_t s8[kRowGroup];
  PackFromGguf(WeightType::kQ8_0, b8.data(), kRowGroup, 32, d8.data(), s8);
  EXPECT_EQ(d8[64 * 1 + 4 * 3 + 1], static_cast<uint8_t>(b8[3].qs[5] + 128));
  std::vector<BlockQ4_0> b4(kRowGroup);
  QuantizeRowQ4_0(x.data(), b4.data(), x.size());
  std::vector<uint8_t> d4(kQ4_0GroupBlockBytes);
  uint16_t s4[kRowGroup];
  PackFromGguf(WeightType::kQ4_0, b4.data(), kRowGroup, 32, d4.data(), s4);
  const int lo = b4[3].qs[5] & 0x0f, hi = b4[11].qs[5] & 0x0f;  // rows 3 and 3 + 8, element 5
  EXPECT_EQ(d4[32 * 1 + 4 * 3 + 1], static_cast<uint8_t>(lo | (hi << 4)));
  EXPECT_EQ(s4[3], b4[3].d);
}

// Checking the scales while packing: the same bytes as PackFromGguf when every scale is finite,
// and on a bad one the block FindBadScale finds over the whole matrix (the first in row order,
// though a later row group's block is bad too).
TEST(Packing, CheckAndPackFindsTheFirstBadScaleInRowOrder) {
  std::mt19937 rng(6);
  std::normal_distribution<float> dist;
  for (const WeightFormat& f : WeightFormats()) {
    SCOPED_TRACE(f.name);
    const int64_t rows = 37, cols = 2 * ColsMultiple(f.type);  // three row groups, the last partial
    std::vector<float> x(rows * cols);
    for (float& v : x) v = dist(rng);
    std::vector<uint8_t> gguf(GgufBytes(f.type, rows, cols));
    f.quantize_row(x.data(), gguf.data(), rows * cols);
    const size_t data_bytes = PackedDataBytes(f.type, rows, cols), scale_count = PackedScaleBytes(f.type, rows, cols) / 2;
    std::vector<uint8_t> want(data_bytes), got(data_bytes);
    std::vector<uint16_t> want_scales(scale_count), got_scales(scale_count);
    PackFromGguf(f.type, gguf.data(), rows, cols, want.data(), want_scales.data());
    EXPECT_FALSE(CheckAndPackFromGguf(f.type, gguf.data(), rows, cols, got.data(), got_scales.data()));
    EXPECT_EQ(want, got);
    EXPECT_EQ(want_scales, got_scales);
    // Every byte of two blocks 0xff (each f16 field NaN): row 35's first, then row 20's second.
    const int64_t nb = cols / f.block_elems;
    for (const int64_t block : {35 * nb, 20 * nb + 1}) {
      std::memset(gguf.data() + block * f.block_bytes, 0xff, f.block_bytes);
    }
    const auto whole = FindBadScale(f.type, gguf.data(), rows * nb);
    const auto bad = CheckAndPackFromGguf(f.type, gguf.data(), rows, cols, got.data(), got_scales.data());
    if (!whole) {  // a float format: no scales to check
      EXPECT_FALSE(bad);
      continue;
    }
    ASSERT_TRUE(bad);
    EXPECT_EQ(bad->block, 20 * nb + 1);
    EXPECT_EQ(bad->block, whole->block);
    EXPECT_STREQ(bad->field, whole->field);
    EXPECT_EQ(bad->bits, 0xffff);
  }
}

}  // namespace
}  // namespace daisy::kernels

namespace daisy::kernels {
namespace {

// Every format's quantiser, on Gaussian weights: the dequantised values are within the error a
// format of that many bits gives (relative RMSE), and the same input gives the same bytes.
TEST(IntQuants, RoundTripErrorFitsTheBits) {
  const std::pair<const char*, double> bound[] = {
      {"q8_0", 0.01}, {"q4_0", 0.12}, {"q4_1", 0.12}, {"q5_0", 0.06}, {"q5_1", 0.06}, {"iq4_nl", 0.1},
      {"q2_K", 0.45}, {"q3_K", 0.22}, {"q4_K", 0.1},  {"q5_K", 0.05}, {"q6_K", 0.025}, {"iq4_xs", 0.1}};
  std::mt19937 rng(17);
  std::normal_distribution<float> dist;
  const int64_t n = 256 * 64;
  std::vector<float> x(n), y(n);
  for (float& v : x) v = dist(rng);
  for (const auto& [name, max_rel] : bound) {
    const WeightFormat& f = *FindFormat(std::string_view(name));
    std::vector<uint8_t> q(GgufBytes(f.type, 1, n)), again(q.size());
    f.quantize_row(x.data(), q.data(), n);
    f.quantize_row(x.data(), again.data(), n);
    EXPECT_EQ(q, again) << name;
    f.dequantize_row(q.data(), y.data(), n);
    double err = 0, ref = 0;
    for (int64_t i = 0; i < n; ++i) {
      err += (double(y[i]) - x[i]) * (double(y[i]) - x[i]);
      ref += double(x[i]) * x[i];
    }
    const double rel = std::sqrt(err / ref);
    EXPECT_LT(rel, max_rel) << name;
    EXPECT_GT(rel, max_rel / 20) << name << ": suspiciously exact";
  }
}

// ggml's affine search (make_qkx2_quants) fits better than the plain min/max codes it starts
// from: never worse on any group, and better on average.
TEST(IntQuants, ScaleSearchBeatsMinMax) {
  std::mt19937 rng(3);
  std::normal_distribution<float> dist;
  double searched = 0, plain = 0;
  for (int g = 0; g < 500; ++g) {
    float x[32], w[32];
    for (int i = 0; i < 32; ++i) {
      x[i] = dist(rng);
      w[i] = std::fabs(x[i]);
    }
    uint8_t L[32], Laux[32];
    float min_a, min_b;
    auto error = [&](float scale, float min) {
      double e = 0;
      for (int i = 0; i < 32; ++i) e += w[i] * (scale * L[i] - min - x[i]) * (scale * L[i] - min - x[i]);
      return e;
    };
    const float sa = quant::MakeQkx2Quants(32, 15, x, w, L, &min_a, Laux, -1.f, 0.1f, 20, false);
    const double ea = error(sa, min_a);
    const float sb = quant::MakeQkx2Quants(32, 15, x, w, L, &min_b, Laux, -1.f, 0.1f, 0, false);
    const double eb = error(sb, min_b);
    EXPECT_LE(ea, eb * (1 + 1e-5)) << "group " << g;
    searched += ea;
    plain += eb;
  }
  EXPECT_LT(searched, 0.9 * plain);
}

// Known blocks: dequantisation follows ggml's layout (blocks.h), checked on hand-made blocks.
TEST(IntQuants, DequantisationFollowsGgmlLayouts) {
  // q4_K: scale/min pairs 0..3 in bytes 0..7 (6 bits), 4..7 split over bytes 8..11 and the top
  // bits of 0..7. Element 64c + j is qs[32c + j] low nibble; 64c + 32 + j the high one.
  BlockQ4K b4{};
  b4.d = Fp32ToFp16(0.5f);
  b4.dmin = Fp32ToFp16(0.25f);
  b4.scales[1] = 3;                // scale 1 (elements 32..63) = 3
  b4.scales[5] = 2;                // min 1 = 2
  b4.scales[9] = 0x45;             // scale 5 low nibble 5, min 5 low nibble 4
  b4.scales[1] |= 1 << 6;          // scale 5 high bits 01 -> 21
  b4.qs[32 * 2 + 7] = 0x9c;        // elements 128 + 7 (code 12) and 160 + 7 (code 9)
  float y[256];
  DequantizeQ4K(&b4, y, 256);
  EXPECT_EQ(y[32], 0.5f * 3 * 0 - 0.25f * 2);      // element 32: code 0 of qs[0] high nibble
  EXPECT_EQ(y[128 + 7], 0.f);                       // scale 4 = 0, min 4 = 0
  EXPECT_EQ(y[160 + 7], 0.5f * 21 * 9 - 0.25f * 4);  // sub-block 5
  // q6_K: element 128h + 32k + j: low nibble from ql[64h + j + 32 (k & 1)] >> 4 (k >> 1), high
  // bits from qh[32h + j] >> 2k; value d * scale[e / 16] * (code - 32).
  BlockQ6K b6{};
  b6.d = Fp32ToFp16(0.125f);
  for (int i = 0; i < 16; ++i) b6.scales[i] = static_cast<int8_t>(i - 8);
  b6.ql[64 + 5 + 32] = 0xa0;   // h = 1, k = 3, j = 5: high nibble a
  b6.qh[32 + 5] = 0x80;        // its high bits (k = 3): 2
  DequantizeQ6K(&b6, y, 256);
  const int e = 128 + 96 + 5;
  EXPECT_EQ(y[e], 0.125f * static_cast<float>(e / 16 - 8) * static_cast<float>((0xa | (2 << 4)) - 32));
  EXPECT_EQ(y[0], 0.125f * -8 * -32);
  // iq4_xs: six-bit scales (stored + 32): low nibbles in scales_l, high two bits in scales_h.
  BlockIq4Xs bx{};
  bx.d = Fp32ToFp16(1.f);
  bx.scales_l[1] = 0x70;           // sub-block 3 low nibble 7
  bx.scales_h = 2 << 6;            // sub-block 3 high bits 2 -> 39 - 32 = 7
  bx.qs[16 * 3 + 2] = 0xf0;        // element 96 + 2 index 0, 96 + 18 index 15
  DequantizeIq4Xs(&bx, y, 256);
  EXPECT_EQ(y[96 + 2], 7.f * -127);
  EXPECT_EQ(y[96 + 18], 7.f * 113);
  EXPECT_EQ(y[0], -32.f * -127);   // scale 0 stored 0 -> -32
}

}  // namespace
}  // namespace daisy::kernels
