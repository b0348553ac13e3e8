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

}  // namespace
}  // namespace daisy::kernels
