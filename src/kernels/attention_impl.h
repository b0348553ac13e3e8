// The attention algorithm (ops.h's AttentionArgs), written once and compiled into every kernel
// table's own file with that table's dot and axpy. Internal linkage on purpose: each ISA file
// gets a private copy built with its own flags, so no copy compiled with AVX instructions can be
// the one another table ends up calling (the ODR trap of inline functions in shared headers).
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/ops.h"

namespace daisy::kernels {
namespace {

template <float (*kDot)(const float*, const float*, int64_t),
          void (*kAxpy)(float, const float*, float*, int64_t)>
void AttentionWith(const AttentionArgs& a) {
  const int hd = a.head_dim;
  const int64_t span = a.end - a.begin;
  // Scores: each key is read once for all the heads of the group.
  for (int32_t t = a.begin; t < a.end; ++t) {
    const float* k = a.keys + static_cast<int64_t>(a.ring > 0 ? t % a.ring : t) * a.kv_stride;
    for (int g = 0; g < a.group; ++g) {
      a.scores[g * span + (t - a.begin)] = kDot(a.q + g * hd, k, hd) * a.scale;
    }
  }
  // Softmax per head: exp(s - max), the denominator summed in double.
  float inv[kMaxAttentionGroup];
  for (int g = 0; g < a.group; ++g) {
    float* s = a.scores + g * span;
    float max = -INFINITY;
    for (int64_t t = 0; t < span; ++t) max = s[t] > max ? s[t] : max;
    double sum = 0.0;
    for (int64_t t = 0; t < span; ++t) {
      s[t] = std::exp(s[t] - max);
      sum += s[t];
    }
    inv[g] = static_cast<float>(1.0 / sum);
    for (int i = 0; i < hd; ++i) a.out[g * hd + i] = 0.0f;
  }
  // Values: each read once, added into every head's output in position order.
  for (int32_t t = a.begin; t < a.end; ++t) {
    const float* v = a.values + static_cast<int64_t>(a.ring > 0 ? t % a.ring : t) * a.kv_stride;
    for (int g = 0; g < a.group; ++g) {
      kAxpy(a.scores[g * span + (t - a.begin)] * inv[g], v, a.out + g * hd, hd);
    }
  }
}

}  // namespace
}  // namespace daisy::kernels
