// The K-quant super-blocks q2_K, q3_K, q4_K, q5_K and q6_K.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/quant/blocks.h"
#include "kernels/quant/float_formats.h"
#include "kernels/quant/int_quants.h"
#include "kernels/quant/search.h"

namespace daisy::kernels {

using quant::MakeQ3Quants;
using quant::MakeQkx2Quants;
using quant::MakeQxQuants;
using quant::NearestInt;

// ---- q2_K ---------------------------------------------------------------------------------

void QuantizeQ2K(const float* x, void* blocks, int64_t n) {
  auto* y = static_cast<BlockQ2K*>(blocks);
  constexpr float kQ4Scale = 15.f;
  for (int64_t i = 0; i < n / kSuperBlock; ++i, x += kSuperBlock) {
    uint8_t L[kSuperBlock], Laux[16];
    float weights[16], mins[16], scales[16];
    float max_scale = 0, max_min = 0;
    for (int j = 0; j < 16; ++j) {
      for (int l = 0; l < 16; ++l) weights[l] = std::fabs(x[16 * j + l]);
      scales[j] = MakeQkx2Quants(16, 3, x + 16 * j, weights, L + 16 * j, &mins[j], Laux, -0.5f, 0.1f, 15, true);
      max_scale = std::max(max_scale, scales[j]);
      max_min = std::max(max_min, mins[j]);
    }
    if (max_scale > 0) {
      const float iscale = kQ4Scale / max_scale;
      for (int j = 0; j < 16; ++j) y[i].scales[j] = static_cast<uint8_t>(NearestInt(iscale * scales[j]));
      y[i].d = Fp32ToFp16(max_scale / kQ4Scale);
    } else {
      std::memset(y[i].scales, 0, 16);
      y[i].d = Fp32ToFp16(0.f);
    }
    if (max_min > 0) {
      const float iscale = kQ4Scale / max_min;
      for (int j = 0; j < 16; ++j) y[i].scales[j] |= static_cast<uint8_t>(NearestInt(iscale * mins[j]) << 4);
      y[i].dmin = Fp32ToFp16(max_min / kQ4Scale);
    } else {
      y[i].dmin = Fp32ToFp16(0.f);
    }
    for (int j = 0; j < 16; ++j) {
      const float d = Fp16ToFp32(y[i].d) * (y[i].scales[j] & 0xF);
      if (!d) continue;
      const float dm = Fp16ToFp32(y[i].dmin) * (y[i].scales[j] >> 4);
      for (int ii = 0; ii < 16; ++ii) {
        L[16 * j + ii] = static_cast<uint8_t>(std::max(0, std::min(3, NearestInt((x[16 * j + ii] + dm) / d))));
      }
    }
    for (int j = 0; j < kSuperBlock; j += 128) {
      for (int l = 0; l < 32; ++l) {
        y[i].qs[j / 4 + l] =
            static_cast<uint8_t>(L[j + l] | (L[j + l + 32] << 2) | (L[j + l + 64] << 4) | (L[j + l + 96] << 6));
      }
    }
  }
}

void DequantizeQ2K(const void* blocks, float* y, int64_t n) {
  const auto* x = static_cast<const BlockQ2K*>(blocks);
  for (int64_t i = 0; i < n / kSuperBlock; ++i) {
    const float d = Fp16ToFp32(x[i].d), min = Fp16ToFp32(x[i].dmin);
    for (int e = 0; e < kSuperBlock; ++e) {
      const uint8_t sc = x[i].scales[e / 16];
      const float dl = d * (sc & 0xF), ml = min * (sc >> 4);
      const int q = (x[i].qs[32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3;
      *y++ = dl * q - ml;
    }
  }
}

// ---- q3_K ---------------------------------------------------------------------------------

void QuantizeQ3K(const float* x, void* blocks, int64_t n) {
  auto* y = static_cast<BlockQ3K*>(blocks);
  for (int64_t i = 0; i < n / kSuperBlock; ++i, x += kSuperBlock) {
    int8_t L[kSuperBlock];
    float scales[16];
    float max_scale = 0, amax = 0;
    for (int j = 0; j < 16; ++j) {
      scales[j] = MakeQ3Quants(16, 4, x + 16 * j, L + 16 * j, true);
      if (std::fabs(scales[j]) > amax) {
        amax = std::fabs(scales[j]);
        max_scale = scales[j];
      }
    }
    std::memset(y[i].scales, 0, 12);
    if (max_scale) {
      const float iscale = -32.f / max_scale;
      for (int j = 0; j < 16; ++j) {
        int8_t l = static_cast<int8_t>(NearestInt(iscale * scales[j]));
        l = static_cast<int8_t>(std::max<int>(-32, std::min<int>(31, l)) + 32);
        if (j < 8) {
          y[i].scales[j] = l & 0xF;
        } else {
          y[i].scales[j - 8] |= static_cast<uint8_t>((l & 0xF) << 4);
        }
        l = static_cast<int8_t>(l >> 4);
        y[i].scales[j % 4 + 8] |= static_cast<uint8_t>(l << (2 * (j / 4)));
      }
      y[i].d = Fp32ToFp16(1 / iscale);
    } else {
      y[i].d = Fp32ToFp16(0.f);
    }
    for (int j = 0; j < 16; ++j) {
      const int sc = ScaleQ3K(j, y[i].scales) - 32;
      const float d = Fp16ToFp32(y[i].d) * sc;
      if (!d) continue;
      for (int ii = 0; ii < 16; ++ii) {
        L[16 * j + ii] = static_cast<int8_t>(std::max(-4, std::min(3, NearestInt(x[16 * j + ii] / d))) + 4);
      }
    }
    std::memset(y[i].hmask, 0, 32);
    for (int j = 0; j < kSuperBlock; ++j) {
      if (L[j] > 3) {
        y[i].hmask[j % 32] |= static_cast<uint8_t>(1 << (j / 32));
        L[j] = static_cast<int8_t>(L[j] - 4);
      }
    }
    for (int j = 0; j < kSuperBlock; j += 128) {
      for (int l = 0; l < 32; ++l) {
        y[i].qs[j / 4 + l] =
            static_cast<uint8_t>(L[j + l] | (L[j + l + 32] << 2) | (L[j + l + 64] << 4) | (L[j + l + 96] << 6));
      }
    }
  }
}

void DequantizeQ3K(const void* blocks, float* y, int64_t n) {
  const auto* x = static_cast<const BlockQ3K*>(blocks);
  for (int64_t i = 0; i < n / kSuperBlock; ++i) {
    const float d_all = Fp16ToFp32(x[i].d);
    for (int e = 0; e < kSuperBlock; ++e) {
      const float dl = d_all * (ScaleQ3K(e / 16, x[i].scales) - 32);
      const int low = (x[i].qs[32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3;
      const int high = (x[i].hmask[e % 32] >> (e / 32)) & 1;
      *y++ = dl * (low - (high ? 0 : 4));
    }
  }
}

// ---- q4_K and q5_K ------------------------------------------------------------------------

namespace {

// The shared part of q4_K and q5_K: per 32 elements an affine fit (weights av_x + |x|), the
// eight scales and mins quantised to six bits against two f16 super-scales, then the codes
// refit to the quantised scales. Writes d, dmin, the 12 scale bytes and L (codes 0..nmax).
void QuantizeScaleMin(const float* x, int nmax, float rmin, int nstep, uint16_t* d_out, uint16_t* dmin_out,
                      uint8_t* scale_bytes, uint8_t* L) {
  uint8_t Laux[32];
  float weights[32], mins[8], scales[8];
  float max_scale = 0, max_min = 0;
  for (int j = 0; j < 8; ++j) {
    float sum_x2 = 0;
    for (int l = 0; l < 32; ++l) sum_x2 += x[32 * j + l] * x[32 * j + l];
    const float av_x = std::sqrt(sum_x2 / 32);
    for (int l = 0; l < 32; ++l) weights[l] = av_x + std::fabs(x[32 * j + l]);
    scales[j] = MakeQkx2Quants(32, nmax, x + 32 * j, weights, L + 32 * j, &mins[j], Laux, rmin, 0.1f, nstep, false);
    max_scale = std::max(max_scale, scales[j]);
    max_min = std::max(max_min, mins[j]);
  }
  const float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
  const float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
  for (int j = 0; j < 8; ++j) {
    const uint8_t ls = std::min<uint8_t>(63, static_cast<uint8_t>(NearestInt(inv_scale * scales[j])));
    const uint8_t lm = std::min<uint8_t>(63, static_cast<uint8_t>(NearestInt(inv_min * mins[j])));
    if (j < 4) {
      scale_bytes[j] = ls;
      scale_bytes[j + 4] = lm;
    } else {
      scale_bytes[j + 4] = static_cast<uint8_t>((ls & 0xF) | ((lm & 0xF) << 4));
      scale_bytes[j - 4] |= static_cast<uint8_t>((ls >> 4) << 6);
      scale_bytes[j] |= static_cast<uint8_t>((lm >> 4) << 6);
    }
  }
  *d_out = Fp32ToFp16(max_scale / 63.f);
  *dmin_out = Fp32ToFp16(max_min / 63.f);
  for (int j = 0; j < 8; ++j) {
    uint8_t sc, m;
    ScaleMinK4(j, scale_bytes, &sc, &m);
    const float d = Fp16ToFp32(*d_out) * sc;
    if (!d) continue;
    const float dm = Fp16ToFp32(*dmin_out) * m;
    for (int ii = 0; ii < 32; ++ii) {
      L[32 * j + ii] = static_cast<uint8_t>(std::max(0, std::min(nmax, NearestInt((x[32 * j + ii] + dm) / d))));
    }
  }
}

}  // namespace

void QuantizeQ4K(const float* x, void* blocks, int64_t n) {
  auto* y = static_cast<BlockQ4K*>(blocks);
  for (int64_t i = 0; i < n / kSuperBlock; ++i, x += kSuperBlock) {
    uint8_t L[kSuperBlock];
    std::memset(y[i].scales, 0, 12);
    QuantizeScaleMin(x, 15, -1.f, 20, &y[i].d, &y[i].dmin, y[i].scales, L);
    uint8_t* q = y[i].qs;
    for (int j = 0; j < kSuperBlock; j += 64, q += 32) {
      for (int l = 0; l < 32; ++l) q[l] = static_cast<uint8_t>(L[j + l] | (L[j + l + 32] << 4));
    }
  }
}

void DequantizeQ4K(const void* blocks, float* y, int64_t n) {
  const auto* x = static_cast<const BlockQ4K*>(blocks);
  for (int64_t i = 0; i < n / kSuperBlock; ++i) {
    const float d = Fp16ToFp32(x[i].d), min = Fp16ToFp32(x[i].dmin);
    const uint8_t* q = x[i].qs;
    for (int j = 0; j < 8; j += 2, q += 32) {
      uint8_t sc, m;
      ScaleMinK4(j, x[i].scales, &sc, &m);
      const float d1 = d * sc, m1 = min * m;
      ScaleMinK4(j + 1, x[i].scales, &sc, &m);
      const float d2 = d * sc, m2 = min * m;
      for (int l = 0; l < 32; ++l) *y++ = d1 * (q[l] & 0xF) - m1;
      for (int l = 0; l < 32; ++l) *y++ = d2 * (q[l] >> 4) - m2;
    }
  }
}

void QuantizeQ5K(const float* x, void* blocks, int64_t n) {
  auto* y = static_cast<BlockQ5K*>(blocks);
  for (int64_t i = 0; i < n / kSuperBlock; ++i, x += kSuperBlock) {
    uint8_t L[kSuperBlock];
    std::memset(y[i].scales, 0, 12);
    QuantizeScaleMin(x, 31, -0.5f, 15, &y[i].d, &y[i].dmin, y[i].scales, L);
    uint8_t* qh = y[i].qh;
    uint8_t* ql = y[i].qs;
    std::memset(qh, 0, 32);
    uint8_t m1 = 1, m2 = 2;
    for (int c = 0; c < kSuperBlock; c += 64, ql += 32) {
      for (int j = 0; j < 32; ++j) {
        int l1 = L[c + j];
        if (l1 > 15) {
          l1 -= 16;
          qh[j] |= m1;
        }
        int l2 = L[c + j + 32];
        if (l2 > 15) {
          l2 -= 16;
          qh[j] |= m2;
        }
        ql[j] = static_cast<uint8_t>(l1 | (l2 << 4));
      }
      m1 = static_cast<uint8_t>(m1 << 2);
      m2 = static_cast<uint8_t>(m2 << 2);
    }
  }
}

void DequantizeQ5K(const void* blocks, float* y, int64_t n) {
  const auto* x = static_cast<const BlockQ5K*>(blocks);
  for (int64_t i = 0; i < n / kSuperBlock; ++i) {
    const float d = Fp16ToFp32(x[i].d), min = Fp16ToFp32(x[i].dmin);
    const uint8_t* ql = x[i].qs;
    const uint8_t* qh = x[i].qh;
    uint8_t u1 = 1, u2 = 2;
    for (int j = 0; j < 8; j += 2, ql += 32) {
      uint8_t sc, m;
      ScaleMinK4(j, x[i].scales, &sc, &m);
      const float d1 = d * sc, m1 = min * m;
      ScaleMinK4(j + 1, x[i].scales, &sc, &m);
      const float d2 = d * sc, m2 = min * m;
      for (int l = 0; l < 32; ++l) *y++ = d1 * ((ql[l] & 0xF) + (qh[l] & u1 ? 16 : 0)) - m1;
      for (int l = 0; l < 32; ++l) *y++ = d2 * ((ql[l] >> 4) + (qh[l] & u2 ? 16 : 0)) - m2;
      u1 = static_cast<uint8_t>(u1 << 2);
      u2 = static_cast<uint8_t>(u2 << 2);
    }
  }
}

// ---- q6_K ---------------------------------------------------------------------------------

void QuantizeQ6K(const float* x, void* blocks, int64_t n) {
  auto* y = static_cast<BlockQ6K*>(blocks);
  for (int64_t i = 0; i < n / kSuperBlock; ++i, x += kSuperBlock) {
    int8_t L[kSuperBlock];
    float scales[16];
    float max_scale = 0, max_abs_scale = 0;
    for (int ib = 0; ib < 16; ++ib) {
      scales[ib] = MakeQxQuants(16, 32, x + 16 * ib, L + 16 * ib, 1);
      if (std::fabs(scales[ib]) > max_abs_scale) {
        max_abs_scale = std::fabs(scales[ib]);
        max_scale = scales[ib];
      }
    }
    if (max_abs_scale < 1e-15f) {
      std::memset(&y[i], 0, sizeof(BlockQ6K));
      continue;
    }
    const float iscale = -128.f / max_scale;
    y[i].d = Fp32ToFp16(1 / iscale);
    for (int ib = 0; ib < 16; ++ib) y[i].scales[ib] = static_cast<int8_t>(std::min(127, NearestInt(iscale * scales[ib])));
    for (int j = 0; j < 16; ++j) {
      const float d = Fp16ToFp32(y[i].d) * y[i].scales[j];
      if (!d) continue;
      for (int ii = 0; ii < 16; ++ii) {
        L[16 * j + ii] = static_cast<int8_t>(std::max(-32, std::min(31, NearestInt(x[16 * j + ii] / d))) + 32);
      }
    }
    uint8_t* ql = y[i].ql;
    uint8_t* qh = y[i].qh;
    for (int j = 0; j < kSuperBlock; j += 128, ql += 64, qh += 32) {
      for (int l = 0; l < 32; ++l) {
        const int q1 = L[j + l] & 0xF, q2 = L[j + l + 32] & 0xF;
        const int q3 = L[j + l + 64] & 0xF, q4 = L[j + l + 96] & 0xF;
        ql[l] = static_cast<uint8_t>(q1 | (q3 << 4));
        ql[l + 32] = static_cast<uint8_t>(q2 | (q4 << 4));
        qh[l] = static_cast<uint8_t>((L[j + l] >> 4) | ((L[j + l + 32] >> 4) << 2) | ((L[j + l + 64] >> 4) << 4) |
                                     ((L[j + l + 96] >> 4) << 6));
      }
    }
  }
}

void DequantizeQ6K(const void* blocks, float* y, int64_t n) {
  const auto* x = static_cast<const BlockQ6K*>(blocks);
  for (int64_t i = 0; i < n / kSuperBlock; ++i, y += kSuperBlock) {
    const float d = Fp16ToFp32(x[i].d);
    for (int e = 0; e < kSuperBlock; ++e) {
      const int h = e / 128, k = (e % 128) / 32, j = e % 32;
      const int low = (x[i].ql[64 * h + j + 32 * (k & 1)] >> (4 * (k >> 1))) & 0xF;
      const int high = (x[i].qh[32 * h + j] >> (2 * k)) & 3;
      const int q = static_cast<int8_t>(low | (high << 4)) - 32;
      y[e] = d * x[i].scales[e / 16] * q;
    }
  }
}

}  // namespace daisy::kernels
