// GGUF's blocks of the integer formats beyond q8_0/q4_0, byte for byte as ggml lays them out
// (ggml-common.h): the 32-element "legacy" blocks q4_1, q5_0, q5_1 and iq4_nl, and the
// 256-element super-blocks of the K-quants (q2_K..q6_K) and iq4_xs. Every scale is f16 bits.
//
// Element order inside a block (what dequantisation gives back, element e of the block):
//   q4_1, q5_0, q5_1, iq4_nl: byte j holds element j (low nibble) and j + 16 (high nibble);
//     q5's fifth bits: bit e of the 32-bit qh.
//   q4_K, q5_K: per 64 elements, 32 bytes: element 64c + j low nibble, 64c + 32 + j high;
//     q5_K's fifth bit of element 64c + j is qh[j] bit 2c, of 64c + 32 + j bit 2c + 1.
//   q6_K: per 128 elements, ql[64] and qh[32]: element 128h + 32k + j has low nibble
//     ql[64h + j + 32 (k & 1)] >> 4 (k >> 1) and high two bits qh[32h + j] >> 2k.
//   q2_K, q3_K: per 128 elements, 32 bytes: element 128h + 32k + j is qs[32h + j] >> 2k & 3;
//     q3_K's third bit of element e is hmask[e % 32] bit e / 32.
//   iq4_xs: per 32 elements, 16 bytes as iq4_nl.
// Scales: q4_K/q5_K: 8 six-bit (scale, min) pairs in 12 bytes (ScaleMinK4); q3_K: 16 six-bit
// scales in 12 bytes, stored + 32; q2_K: per 16 elements one byte, scale | min << 4; q6_K:
// int8 per 16 elements; iq4_xs: six-bit per 32 elements, stored + 32, low nibbles in scales_l,
// high two bits in scales_h.
#pragma once

#include <cstdint>

namespace daisy::kernels {

inline constexpr int kSuperBlock = 256;  // QK_K

struct BlockQ4_1 {
  uint16_t d, m;  // x = d * code + m
  uint8_t qs[16];
};
struct BlockQ5_0 {
  uint16_t d;  // x = d * (code - 16)
  uint8_t qh[4];
  uint8_t qs[16];
};
struct BlockQ5_1 {
  uint16_t d, m;  // x = d * code + m
  uint8_t qh[4];
  uint8_t qs[16];
};
struct BlockIq4Nl {
  uint16_t d;  // x = d * kIq4Values[code]
  uint8_t qs[16];
};
struct BlockQ2K {
  uint8_t scales[16];  // scale | min << 4, per 16 elements
  uint8_t qs[64];
  uint16_t d, dmin;  // x = d * scale * code - dmin * min
};
struct BlockQ3K {
  uint8_t hmask[32];
  uint8_t qs[64];
  uint8_t scales[12];  // 16 six-bit values, each scale + 32
  uint16_t d;          // x = d * scale * (code - 4)
};
struct BlockQ4K {
  uint16_t d, dmin;  // x = d * scale * code - dmin * min
  uint8_t scales[12];
  uint8_t qs[128];
};
struct BlockQ5K {
  uint16_t d, dmin;
  uint8_t scales[12];
  uint8_t qh[32];
  uint8_t qs[128];
};
struct BlockQ6K {
  uint8_t ql[128];
  uint8_t qh[64];
  int8_t scales[16];
  uint16_t d;  // x = d * scale * (code - 32)
};
struct BlockIq4Xs {
  uint16_t d;  // x = d * (scale - 32) * kIq4Values[code]
  uint16_t scales_h;
  uint8_t scales_l[4];
  uint8_t qs[128];
};
static_assert(sizeof(BlockQ4_1) == 20 && sizeof(BlockQ5_0) == 22 && sizeof(BlockQ5_1) == 24 &&
              sizeof(BlockIq4Nl) == 18);
static_assert(sizeof(BlockQ2K) == 84 && sizeof(BlockQ3K) == 110 && sizeof(BlockQ4K) == 144 &&
              sizeof(BlockQ5K) == 176 && sizeof(BlockQ6K) == 210 && sizeof(BlockIq4Xs) == 136);

// The 16 values of the non-linear 4-bit formats (iq4_nl, iq4_xs).
inline constexpr int8_t kIq4Values[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                          1,    13,   25,  38,  53,  69,  89,  113};

// Scale and min j (0..7) of a q4_K/q5_K block's 12 scale bytes.
inline void ScaleMinK4(int j, const uint8_t* q, uint8_t* scale, uint8_t* min) {
  if (j < 4) {
    *scale = q[j] & 63;
    *min = q[j + 4] & 63;
  } else {
    *scale = static_cast<uint8_t>((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
    *min = static_cast<uint8_t>((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
  }
}

// Scale j (0..15) of a q3_K block, as stored (scale + 32, 0..63).
inline int ScaleQ3K(int j, const uint8_t* s) {
  const int low = j < 8 ? s[j] & 0xF : s[j - 8] >> 4;
  return low | (((s[8 + j % 4] >> (2 * (j / 4))) & 3) << 4);
}

// Scale j (0..7) of an iq4_xs block, as stored (scale + 32, 0..63).
inline int ScaleIq4Xs(int j, const BlockIq4Xs& b) {
  return ((b.scales_l[j / 2] >> (4 * (j % 2))) & 0xF) | (((b.scales_h >> (2 * j)) & 3) << 4);
}

}  // namespace daisy::kernels
