// The scale searches of ggml's reference quantisers: for a group of values, the scale (and min)
// and integer codes that minimise a weighted error, not just the ones min/max give. They make
// the same choices as ggml's (same candidates, same arithmetic order), so a file daisy
// quantises is the file llama-quantize would write from the same floats (without an imatrix).
#pragma once

#include <cstdint>
#include <cstring>

namespace daisy::kernels::quant {

// Round to nearest, ties to even, for |x| < 2^22 (ggml's nearest_int); as std::nearbyint in the
// default rounding mode there. Inline, so loops over activations vectorise (a call per value
// was ~18% of a prompt's time in the q8 activation rows).
inline int NearestInt(float x) {
  // Adding 1.5 * 2^23 leaves the rounded integer in the low mantissa bits.
  const float biased = x + 12582912.f;
  int32_t bits;
  std::memcpy(&bits, &biased, sizeof(bits));
  return (bits & 0x007fffff) - 0x00400000;
}

// Symmetric codes in [-nmax, nmax - 1], stored + nmax in L; returns the scale. rmse_type 1
// weighs by x^2 and tries 18 scales around nmax / max (make_qx_quants; q6_K).
float MakeQxQuants(int n, int nmax, const float* x, int8_t* L, int rmse_type);

// q3_K's symmetric search with iterative code refinement (make_q3_quants); L stored + nmax.
float MakeQ3Quants(int n, int nmax, const float* x, int8_t* L, bool do_rmse);

// Affine codes in [0, nmax] with a min <= 0: tries nstep + 1 scales from (nmax + rmin) to
// (nmax + rmin + nstep * rdelta) / (max - min), each refit by weighted least squares, keeping
// the best (make_qkx2_quants; q2_K, q4_K, q5_K). Returns the scale; *the_min = -min.
float MakeQkx2Quants(int n, int nmax, const float* x, const float* weights, uint8_t* L, float* the_min,
                     uint8_t* Laux, float rmin, float rdelta, int nstep, bool use_mad);

// Index of the value of `values` (n ascending) nearest x (best_index_int8).
int BestIndex(int n, const int8_t* values, float x);

// iq4_nl / iq4_xs: per 32-element block the scale among 2 ntry + 1 candidates that fits the
// non-linear values best; with several blocks (iq4_xs) the block scales are then quantised to
// six bits against one f16 super-scale (quantize_row_iq4_nl_impl without an imatrix).
// Writes the f16 super-scale (or the block's scale), the packed codes and, for several
// blocks, the six-bit scales.
void QuantizeIq4Group(int super_block_size, const float* x, uint16_t* dh, uint8_t* q4, uint16_t* scales_h,
                      uint8_t* scales_l, int ntry);

}  // namespace daisy::kernels::quant
