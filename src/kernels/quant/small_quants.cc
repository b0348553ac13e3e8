// The 32-element blocks q4_1, q5_0, q5_1, iq4_nl, and iq4_xs (the same codes in super-blocks).
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>

#include "kernels/quant/blocks.h"
#include "kernels/quant/float_formats.h"
#include "kernels/quant/int_quants.h"
#include "kernels/quant/search.h"

namespace daisy::kernels {
namespace {

constexpr int kBlock = 32;

// min and max of a block.
void Range(const float* x, float* lo, float* hi) {
  float min = FLT_MAX, max = -FLT_MAX;
  for (int j = 0; j < kBlock; ++j) {
    if (x[j] < min) min = x[j];
    if (x[j] > max) max = x[j];
  }
  *lo = min;
  *hi = max;
}

// The value of largest magnitude, with its sign.
float SignedMax(const float* x) {
  float amax = 0.f, max = 0.f;
  for (int j = 0; j < kBlock; ++j) {
    if (amax < std::fabs(x[j])) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  }
  return max;
}

}  // namespace

void QuantizeQ4_1(const float* x, void* blocks, int64_t n) {
  auto* y = static_cast<BlockQ4_1*>(blocks);
  for (int64_t b = 0; b < n / kBlock; ++b, x += kBlock) {
    float min, max;
    Range(x, &min, &max);
    const float d = (max - min) / 15;
    const float id = d ? 1.0f / d : 0.0f;
    y[b].d = Fp32ToFp16(d);
    y[b].m = Fp32ToFp16(min);
    for (int j = 0; j < 16; ++j) {
      const int q0 = std::min(15, static_cast<int>(static_cast<int8_t>((x[j] - min) * id + 0.5f)));
      const int q1 = std::min(15, static_cast<int>(static_cast<int8_t>((x[j + 16] - min) * id + 0.5f)));
      y[b].qs[j] = static_cast<uint8_t>(q0 | (q1 << 4));
    }
  }
}

void DequantizeQ4_1(const void* blocks, float* y, int64_t n) {
  const auto* x = static_cast<const BlockQ4_1*>(blocks);
  for (int64_t b = 0; b < n / kBlock; ++b, y += kBlock) {
    const float d = Fp16ToFp32(x[b].d), m = Fp16ToFp32(x[b].m);
    for (int j = 0; j < 16; ++j) {
      y[j] = (x[b].qs[j] & 0x0F) * d + m;
      y[j + 16] = (x[b].qs[j] >> 4) * d + m;
    }
  }
}

void QuantizeQ5_0(const float* x, void* blocks, int64_t n) {
  auto* y = static_cast<BlockQ5_0*>(blocks);
  for (int64_t b = 0; b < n / kBlock; ++b, x += kBlock) {
    const float d = SignedMax(x) / -16;
    const float id = d ? 1.0f / d : 0.0f;
    y[b].d = Fp32ToFp16(d);
    uint32_t qh = 0;
    for (int j = 0; j < 16; ++j) {
      const int q0 = std::min(31, static_cast<int>(static_cast<int8_t>(x[j] * id + 16.5f)));
      const int q1 = std::min(31, static_cast<int>(static_cast<int8_t>(x[j + 16] * id + 16.5f)));
      y[b].qs[j] = static_cast<uint8_t>((q0 & 0x0F) | ((q1 & 0x0F) << 4));
      qh |= static_cast<uint32_t>((q0 & 0x10) >> 4) << j;
      qh |= static_cast<uint32_t>((q1 & 0x10) >> 4) << (j + 16);
    }
    std::memcpy(y[b].qh, &qh, 4);
  }
}

void DequantizeQ5_0(const void* blocks, float* y, int64_t n) {
  const auto* x = static_cast<const BlockQ5_0*>(blocks);
  for (int64_t b = 0; b < n / kBlock; ++b, y += kBlock) {
    const float d = Fp16ToFp32(x[b].d);
    uint32_t qh;
    std::memcpy(&qh, x[b].qh, 4);
    for (int j = 0; j < 16; ++j) {
      const int q0 = ((x[b].qs[j] & 0x0F) | (((qh >> j) << 4) & 0x10)) - 16;
      const int q1 = ((x[b].qs[j] >> 4) | ((qh >> (j + 12)) & 0x10)) - 16;
      y[j] = q0 * d;
      y[j + 16] = q1 * d;
    }
  }
}

void QuantizeQ5_1(const float* x, void* blocks, int64_t n) {
  auto* y = static_cast<BlockQ5_1*>(blocks);
  for (int64_t b = 0; b < n / kBlock; ++b, x += kBlock) {
    float min, max;
    Range(x, &min, &max);
    const float d = (max - min) / 31;
    const float id = d ? 1.0f / d : 0.0f;
    y[b].d = Fp32ToFp16(d);
    y[b].m = Fp32ToFp16(min);
    uint32_t qh = 0;
    for (int j = 0; j < 16; ++j) {
      const int q0 = static_cast<uint8_t>((x[j] - min) * id + 0.5f);
      const int q1 = static_cast<uint8_t>((x[j + 16] - min) * id + 0.5f);
      y[b].qs[j] = static_cast<uint8_t>((q0 & 0x0F) | ((q1 & 0x0F) << 4));
      qh |= static_cast<uint32_t>((q0 & 0x10) >> 4) << j;
      qh |= static_cast<uint32_t>((q1 & 0x10) >> 4) << (j + 16);
    }
    std::memcpy(y[b].qh, &qh, 4);
  }
}

void DequantizeQ5_1(const void* blocks, float* y, int64_t n) {
  const auto* x = static_cast<const BlockQ5_1*>(blocks);
  for (int64_t b = 0; b < n / kBlock; ++b, y += kBlock) {
    const float d = Fp16ToFp32(x[b].d), m = Fp16ToFp32(x[b].m);
    uint32_t qh;
    std::memcpy(&qh, x[b].qh, 4);
    for (int j = 0; j < 16; ++j) {
      const int q0 = (x[b].qs[j] & 0x0F) | (((qh >> j) << 4) & 0x10);
      const int q1 = (x[b].qs[j] >> 4) | ((qh >> (j + 12)) & 0x10);
      y[j] = q0 * d + m;
      y[j + 16] = q1 * d + m;
    }
  }
}

void QuantizeIq4Nl(const float* x, void* blocks, int64_t n) {
  auto* y = static_cast<BlockIq4Nl*>(blocks);
  for (int64_t b = 0; b < n / kBlock; ++b) {
    uint16_t unused_h = 0;
    quant::QuantizeIq4Group(kBlock, x + b * kBlock, &y[b].d, y[b].qs, &unused_h, nullptr, 7);
  }
}

void DequantizeIq4Nl(const void* blocks, float* y, int64_t n) {
  const auto* x = static_cast<const BlockIq4Nl*>(blocks);
  for (int64_t b = 0; b < n / kBlock; ++b, y += kBlock) {
    const float d = Fp16ToFp32(x[b].d);
    for (int j = 0; j < 16; ++j) {
      y[j] = d * kIq4Values[x[b].qs[j] & 0xf];
      y[j + 16] = d * kIq4Values[x[b].qs[j] >> 4];
    }
  }
}

void QuantizeIq4Xs(const float* x, void* blocks, int64_t n) {
  auto* y = static_cast<BlockIq4Xs*>(blocks);
  for (int64_t b = 0; b < n / kSuperBlock; ++b) {
    quant::QuantizeIq4Group(kSuperBlock, x + b * kSuperBlock, &y[b].d, y[b].qs, &y[b].scales_h, y[b].scales_l, 7);
  }
}

void DequantizeIq4Xs(const void* blocks, float* y, int64_t n) {
  const auto* x = static_cast<const BlockIq4Xs*>(blocks);
  for (int64_t b = 0; b < n / kSuperBlock; ++b) {
    const float d = Fp16ToFp32(x[b].d);
    const uint8_t* qs = x[b].qs;
    for (int ib = 0; ib < kSuperBlock / kBlock; ++ib, y += kBlock, qs += 16) {
      const float dl = d * (ScaleIq4Xs(ib, x[b]) - 32);
      for (int j = 0; j < 16; ++j) {
        y[j] = dl * kIq4Values[qs[j] & 0xf];
        y[j + 16] = dl * kIq4Values[qs[j] >> 4];
      }
    }
  }
}

}  // namespace daisy::kernels
