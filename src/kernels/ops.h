// The element-wise work of a transformer layer, per row (or per row and KV head): RMS norm,
// rotary embeddings, the gated activation, the residual add, and attention over one sequence's
// KV history. Each op has a scalar reference (ref/ops.cc) and SIMD versions (x86_*/ops.cc) in
// the kernel tables (kernel_table.h). Math only: a caller (runtime::Stage) splits rows over its
// threads and hands each call one row's spans.
//
// Exactness: rms_norm, rope, silu_mul and add give the scalar reference's bits in every table
// (tests compare them with memcmp): the same operations in the same order per element,
// vectorised only where that holds. Sums that ggml takes in double (norm squares, softmax
// denominators) stay sequential, and exp is libm's. The ISA files are compiled with
// -ffp-contract=off so the compiler fuses nothing the reference does not. dot, axpy and so
// attention sum in SIMD lanes with fused multiply-adds: like the matrix kernels they differ from
// the reference in rounding only (within a tested tolerance), and like them their bits for a
// row never depend on other rows.
#pragma once

#include <cstdint>

namespace daisy::kernels {

// How RoPE pairs the elements of a head (llama.cpp's rope types): kNorm rotates (2i, 2i+1)
// (Llama), kNeox rotates (i, i + head_dim / 2) (GPT-NeoX, Qwen, Gemma, Phi-3).
enum class RopeMode : uint8_t { kNorm = 0, kNeox = 1 };

// The rotation of pair i at position `pos`: cs[2i] = cos(a_i) * mscale, cs[2i+1] = sin(a_i) *
// mscale with a_i = freq_scale * (pos * theta^(-2i / head_dim) / factor_i) for i < head_dim / 2
// (factors: Llama 3.1's rope_freqs or Phi-3's LongRoPE factors, or null for none; freq_scale:
// linear scaling, 1 for none; mscale: rope.scaling.attn_factor, 1 for none), the power built by
// repeated multiplication as ggml does. Scalar code shared by every table: a forward computes
// each row's angles once and every layer and head reuses them.
void RopeAngles(int32_t pos, int head_dim, float theta, const float* factors, float freq_scale, float mscale,
                float* cs);

// gate[i] = gelu(gate[i]) * up[i] with ggml's tanh GELU as its CPU backend computes it: through
// a table of the f16 GELU of every f16 input (gate rounded to f16), 0 below -10, identity above
// 10. Scalar code shared by every table (a table lookup does not vectorise usefully).
void GeluMul(float* gate, const float* up, int64_t n);

// Attention for `rows` consecutive positions of one sequence and one KV head: the `group` query
// heads of row i that share the KV head attend to the positions [begin_i, end_i) of their
// sequence, end_i = end + i, begin_i = begin, or max(begin, end_i - window) with a window. Per
// row and head h of the group:
//   s_t = dot(q_h, k_t) * scale;  p_t = exp(s_t - max s) / sum p (the sum in double)
//   out_h = sum_t p_t v_t  (accumulated in t order)
// Each key and value is read once for the whole group and all the rows (a long prompt's rows
// would otherwise each stream the sequence's keys and values from the L3 cache); a row's bits
// are those it gets alone (rows = 1).
inline constexpr int kMaxAttentionGroup = 128;  // query heads per KV head, at most
inline constexpr int kMaxAttentionRows = 16;    // rows of one call, at most
struct AttentionArgs {
  const float* q = nullptr;  // row i: q + i * row_stride, [group][head_dim]
  float* out = nullptr;      // row i: out + i * row_stride, [group][head_dim]
  int group = 1;
  int head_dim = 0;
  const float* keys = nullptr;    // key of position t at keys + t * kv_stride (or its ring slot)
  const float* values = nullptr;  // value of position t at values + t * kv_stride (or its ring slot)
  int64_t kv_stride = 0;
  int32_t ring = 0;  // > 0: position t is at slot t % ring (a sliding-window layer's ring)
  int32_t begin = 0, end = 0;  // row 0's positions
  int32_t window = 0;          // > 0: each row's positions start at most this far back
  int rows = 1;                // 1 .. kMaxAttentionRows
  int64_t row_stride = 0;
  float scale = 1.0f;
  float* scores = nullptr;  // scratch: AttentionScores(rows, group, end + rows - 1 - begin) floats
};
inline int64_t AttentionScores(int rows, int group, int64_t span) { return int64_t{rows} * group * span; }

// Keys attention scores together (OpKernels::key_dots).
inline constexpr int kKeyBlock = 16;

struct OpKernels {
  // y = x / sqrt(mean(x^2) + eps) * w over d elements (squares summed in double, as ggml).
  void (*rms_norm)(const float* x, const float* w, int64_t d, float eps, float* y);
  // Rotates n_heads heads of head_dim floats at v (heads adjacent) in place by the angles cs of
  // RopeAngles.
  void (*rope)(float* v, int n_heads, int head_dim, const float* cs, RopeMode mode);
  // gate[i] = silu(gate[i]) * up[i]
  void (*silu_mul)(float* gate, const float* up, int64_t n);
  // gate[i] = gelu(gate[i]) * up[i] (GeluMul above in every table so far)
  void (*gelu_mul)(float* gate, const float* up, int64_t n);
  // y[i] += x[i]
  void (*add)(float* y, const float* x, int64_t n);
  float (*dot)(const float* a, const float* b, int64_t n);
  // y[i] += a * x[i]
  void (*axpy)(float a, const float* x, float* y, int64_t n);
  void (*attention)(const AttentionArgs& args);
  // out[j] = q . keys[j] for j < n (n <= kKeyBlock), each over hd floats: attention's scores. A
  // score's bits depend only on q and its key, not on n or the other keys (batch invariance).
  void (*key_dots)(const float* q, const float* const* keys, int n, int64_t hd, float* out);
  // out[i] = p[j] * rows[j][i] + out[i] for j = 0 .. n - 1 in turn, fused, over hd floats (n <=
  // kKeyBlock): attention's value sums, the same bits as n axpy calls.
  void (*weighted_rows)(const float* p, const float* const* rows, int n, int64_t hd, float* out);
  // Softmax's numerators: s[t] = exp(s[t] - max(s)) in place for t < n; returns their sum in
  // double. The order of the sum is the table's own, fixed by n alone.
  double (*exp_sum)(float* s, int64_t n);
  // log(sum over t < n of exp(x[t])), as max(x) + log(sum of exp(x[t] - max(x))) with the sum in
  // double (n >= 1): the normaliser of a row's log-probabilities (logit - log_sum_exp), over a
  // vocabulary at every output row. The scalar table takes libm's exp in double; SIMD tables
  // their exp_sum's exponentials (within 2 ulp of a float), so the result differs from the
  // reference's by rounding (a few 1e-7 relative), and for a row never depends on other rows.
  double (*log_sum_exp)(const float* x, int64_t n);
};

}  // namespace daisy::kernels
