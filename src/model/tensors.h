// Tensor binding: which GGUF tensors a model's weights are, by name and shape, as one table per
// block structure rather than fields bound by hand. A layer's row names its tensor ("blk.N."
// + name), its shape in the description's dimensions, and the LayerWeights field it fills; an
// optional tensor that is absent stays null (not used). Tensors a file carries that no row takes
// are refused by name (llama.cpp refuses them too): daisy never runs a model whose recipe would
// silently skip some of its weights.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "base/status.h"
#include "gguf/reader.h"
#include "kernels/weights.h"
#include "model/config.h"

namespace daisy::model {

struct LayerWeights {
  const float* attn_norm = nullptr;  // [d_model]
  kernels::WeightMatrix wq;          // [n_heads * head_dim, d_model]
  kernels::WeightMatrix wk;          // [n_kv_heads * head_dim, d_model]
  kernels::WeightMatrix wv;          // [n_kv_heads * head_dim, d_model]
  kernels::WeightMatrix wo;          // [d_model, n_heads * head_dim]
  // Phi-3's fused matrices (wq/wk/wv and w_gate/w_up then unused): q, k and v rows stacked;
  // gate rows then up rows.
  kernels::WeightMatrix wqkv;        // [q_dim + 2 kv_dim, d_model]
  kernels::WeightMatrix w_gate_up;   // [2 d_ff, d_model]
  // Optional attention biases (null: none), added after their projections.
  const float* bq = nullptr;         // [n_heads * head_dim]
  const float* bk = nullptr;         // [n_kv_heads * head_dim]
  const float* bv = nullptr;         // [n_kv_heads * head_dim]
  const float* bo = nullptr;         // [d_model]
  // Per-head RMS norms of q and k before RoPE (Qwen3, Gemma 3), or null.
  const float* q_norm = nullptr;     // [head_dim]
  const float* k_norm = nullptr;     // [head_dim]
  // Norms of the attention and FFN outputs before the residual add (Gemma 3), or null.
  const float* attn_post_norm = nullptr;  // [d_model]
  const float* ffn_post_norm = nullptr;   // [d_model]
  const float* ffn_norm = nullptr;   // [d_model]
  kernels::WeightMatrix w_gate;      // [d_ff, d_model]
  kernels::WeightMatrix w_up;        // [d_ff, d_model]
  kernels::WeightMatrix w_down;      // [d_model, d_ff]
};

// A dimension of the description, for tensor shapes.
enum class Dim : uint8_t { kOne, kDModel, kQDim, kKvDim, kQkvDim, kDFF, k2DFF, kVocab, kHeadDim, kHalfHeadDim };
int64_t DimValue(const ModelConfig& c, Dim d);

struct LayerTensor {
  std::string_view name;  // after "blk.N."
  Dim rows, cols;         // a vector is [1, cols]
  const float* LayerWeights::*vector;            // f32 vectors (norms)
  kernels::WeightMatrix LayerWeights::*matrix;   // matrices (one of the two is null)
  bool required;
};

// The layer tensors of the model's family (its block structure and optional tensors).
std::span<const LayerTensor> LayerTensors(const ModelConfig& c);

// Tensors outside the layers that a model may hold.
inline constexpr std::string_view kTokenEmbd = "token_embd.weight";
inline constexpr std::string_view kOutputNorm = "output_norm.weight";
inline constexpr std::string_view kOutput = "output.weight";
inline constexpr std::string_view kRopeFreqs = "rope_freqs.weight";
inline constexpr std::string_view kRopeFactorsLong = "rope_factors_long.weight";   // Phi-3 LongRoPE
inline constexpr std::string_view kRopeFactorsShort = "rope_factors_short.weight";
bool IsGlobalTensor(std::string_view name);

// Every tensor of a model file is one the recipe takes: Unimplemented naming the first that is
// not (a model this build cannot run). For tools that do not load weights (daisy compile).
Status CheckTensorNames(const gguf::Reader& reader, const ModelConfig& c);

// The layer of a "blk.<L>.…" tensor, or -1 for tensors outside the layers.
int LayerOf(std::string_view name);

}  // namespace daisy::model
