// The attention algorithm (ops.h's AttentionArgs), written once and compiled into every kernel
// table's own file with that table's dot and axpy. Internal linkage on purpose: each ISA file
// gets a private copy built with its own flags, so no copy compiled with AVX instructions can be
// the one another table ends up calling (the ODR trap of inline functions in shared headers).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "kernels/ops.h"

namespace daisy::kernels {
namespace {

// OpKernels::key_dots and weighted_rows.
using KeyDots = void (*)(const float* q, const float* const* keys, int n, int64_t hd, float* out);
using WeightedRows = void (*)(const float* p, const float* const* rows, int n, int64_t hd, float* out);

// KeyDots from a single dot: each key on its own.
template <float (*kDot)(const float*, const float*, int64_t)>
void EachKeyDot(const float* q, const float* const* keys, int n, int64_t hd, float* out) {
  for (int j = 0; j < n; ++j) out[j] = kDot(q, keys[j], hd);
}

// OpKernels::exp_sum with libm's exp, summed in order.
inline double ExpSumInOrder(float* s, int64_t n) {
  float max = -INFINITY;
  for (int64_t t = 0; t < n; ++t) max = s[t] > max ? s[t] : max;
  double sum = 0.0;
  for (int64_t t = 0; t < n; ++t) {
    s[t] = std::exp(s[t] - max);
    sum += s[t];
  }
  return sum;
}

// OpKernels::log_sum_exp with libm's exp in double, summed in order.
inline double LogSumExpInOrder(const float* x, int64_t n) {
  const double max = *std::max_element(x, x + n);
  double sum = 0;
  for (int64_t t = 0; t < n; ++t) sum += std::exp(static_cast<double>(x[t]) - max);
  return max + std::log(sum);
}

// Where positions t0 .. t0 + n - 1 are in `base` (keys or values): their rows, or ring slots.
inline void RowsAt(const AttentionArgs& a, const float* base, int32_t t0, int n, const float** rows) {
  for (int j = 0; j < n; ++j) {
    const int32_t t = t0 + j;
    rows[j] = base + static_cast<int64_t>(a.ring > 0 ? t % a.ring : t) * a.kv_stride;
  }
}

// WeightedRows from axpy: each row on its own.
template <void (*kAxpy)(float, const float*, float*, int64_t)>
void EachRowAxpy(const float* p, const float* const* rows, int n, int64_t hd, float* out) {
  for (int j = 0; j < n; ++j) kAxpy(p[j], rows[j], out, hd);
}

// Several WeightedRows over the same n rows, each set s with its own weights p[s] into its own
// out[s] (a block of values for every row and head of a call): the bits of m WeightedRows calls.
using WeightedSets = void (*)(const float* const* p, float* const* out, int m, const float* const* rows, int n,
                              int64_t hd);
template <WeightedRows kWeightedRows>
void EachSetWeighted(const float* const* p, float* const* out, int m, const float* const* rows, int n, int64_t hd) {
  for (int s = 0; s < m; ++s) kWeightedRows(p[s], rows, n, hd, out[s]);
}

// Several KeyDots of m queries q[s] against the same n keys into out[s]: the bits of m KeyDots
// calls.
using KeySets = void (*)(const float* const* q, float* const* out, int m, const float* const* keys, int n, int64_t hd);
template <KeyDots kKeyDots>
void EachKeySet(const float* const* q, float* const* out, int m, const float* const* keys, int n, int64_t hd) {
  for (int s = 0; s < m; ++s) kKeyDots(q[s], keys, n, hd, out[s]);
}

template <float (*kDot)(const float*, const float*, int64_t),
          void (*kAxpy)(float, const float*, float*, int64_t), KeyDots kKeyDots = EachKeyDot<kDot>,
          WeightedRows kWeightedRows = EachRowAxpy<kAxpy>, double (*kExpSum)(float*, int64_t) = ExpSumInOrder,
          WeightedSets kWeightedSets = EachSetWeighted<kWeightedRows>, KeySets kKeySets = EachKeySet<kKeyDots>>
void AttentionWith(const AttentionArgs& a) {
  const int hd = a.head_dim;
  const int32_t last_end = a.end + a.rows - 1;
  const int64_t stride = last_end - a.begin;  // each (row, head)'s scores: at most this many
  const auto begin_of = [&](int i) { return a.window > 0 ? std::max(a.begin, a.end + i - a.window) : a.begin; };
  const auto scores_of = [&](int i, int g) { return a.scores + (static_cast<int64_t>(i) * a.group + g) * stride; };
  // Scores: keys in blocks of kKeyBlock, each block scored for every row and head while it is
  // in L1 (the (row, head) pairs it serves whole together, up to kSets at a time). A score's bits
  // depend on its query and key only, wherever the block starts.
  constexpr int kSets = 32;
  const float* q_of[kSets];
  float* s_of[kSets];
  for (int32_t t0 = a.begin; t0 < last_end; t0 += kKeyBlock) {
    const int n = static_cast<int>(std::min<int64_t>(kKeyBlock, last_end - t0));
    const float* keys[kKeyBlock];
    RowsAt(a, a.keys, t0, n, keys);
    int m = 0;
    const auto flush = [&] {
      kKeySets(q_of, s_of, m, keys, n, hd);
      for (int k = 0; k < m; ++k) {
        for (int j = 0; j < n; ++j) s_of[k][j] *= a.scale;
      }
      m = 0;
    };
    for (int i = 0; i < a.rows; ++i) {
      const int32_t b = begin_of(i), lo = std::max(t0, b), hi = std::min(t0 + n, a.end + i);
      if (lo >= hi) continue;
      for (int g = 0; g < a.group; ++g) {
        const float* q = a.q + i * a.row_stride + g * hd;
        float* s = scores_of(i, g) + (lo - b);
        if (lo != t0 || hi != t0 + n) {  // part of the block: on its own
          kKeyDots(q, keys + (lo - t0), hi - lo, hd, s);
          for (int j = 0; j < hi - lo; ++j) s[j] *= a.scale;
          continue;
        }
        q_of[m] = q;
        s_of[m] = s;
        if (++m == kSets) flush();
      }
    }
    if (m > 0) flush();
  }
  // Softmax per row and head: exp(s - max), the denominator summed in double.
  float inv[kMaxAttentionRows * kMaxAttentionGroup];
  for (int i = 0; i < a.rows; ++i) {
    for (int g = 0; g < a.group; ++g) {
      inv[i * a.group + g] = static_cast<float>(1.0 / kExpSum(scores_of(i, g), a.end + i - begin_of(i)));
      float* out = a.out + i * a.row_stride + g * hd;
      for (int k = 0; k < hd; ++k) out[k] = 0.0f;
    }
  }
  // Values in blocks of kKeyBlock positions, each block added into every row's and head's
  // output, in position order; the (row, head) pairs a block serves whole go together, up to
  // kSets at a time.
  alignas(64) float p[kSets][kKeyBlock];
  const float* p_of[kSets];
  float* out_of[kSets];
  for (int32_t t0 = a.begin; t0 < last_end; t0 += kKeyBlock) {
    const int n = static_cast<int>(std::min<int64_t>(kKeyBlock, last_end - t0));
    const float* values[kKeyBlock];
    RowsAt(a, a.values, t0, n, values);
    int m = 0;
    for (int i = 0; i < a.rows; ++i) {
      const int32_t b = begin_of(i), lo = std::max(t0, b), hi = std::min(t0 + n, a.end + i);
      if (lo >= hi) continue;
      for (int g = 0; g < a.group; ++g) {
        const float* s = scores_of(i, g) + (lo - b);
        float* out = a.out + i * a.row_stride + g * hd;
        const float w = inv[i * a.group + g];
        if (lo != t0 || hi != t0 + n) {  // part of the block: on its own
          float part[kKeyBlock];
          for (int j = 0; j < hi - lo; ++j) part[j] = s[j] * w;
          kWeightedRows(part, values + (lo - t0), hi - lo, hd, out);
          continue;
        }
        for (int j = 0; j < n; ++j) p[m][j] = s[j] * w;
        p_of[m] = p[m];
        out_of[m] = out;
        if (++m == kSets) {
          kWeightedSets(p_of, out_of, m, values, n, hd);
          m = 0;
        }
      }
    }
    if (m > 0) kWeightedSets(p_of, out_of, m, values, n, hd);
  }
}

}  // namespace
}  // namespace daisy::kernels
