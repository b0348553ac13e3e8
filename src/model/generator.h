// Synthetic Llama models: real GGUF files with seeded random weights at real shapes, in every
// weight type daisy supports, streamed to disk one block of rows at a time (memory stays at a
// few MB whatever the model size).
//
// Weight scales keep the residual stream O(1) through any depth: each layer's attention and
// FFN outputs are scaled by 1/sqrt(n_layers), so the stream's variance grows by at most a small
// constant over the whole stack; the LM head is scaled so logits have standard deviation
// `logit_std`, large enough that top-2 margins are meaningful (near-ties are rare) yet finite.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>

#include "base/status.h"
#include "gguf/types.h"
#include "model/config.h"
#include "model/quant_mix.h"
#include "tokenizer/vocab.h"

namespace daisy::model {

struct GenerateOptions {
  ModelConfig config;          // n_vocab is taken from the vocabulary
  std::string name = "daisy-synthetic";
  gguf::TensorType type = gguf::TensorType::kF32;  // every 2-D weight (unless `mix`); norms are f32
  // Per-tensor types as llama-quantize's file type chooses them (quant_mix.h).
  std::optional<QuantMix> mix;
  uint64_t seed = 0;
  float logit_std = 8.0f;
  // Target/draft pairs for speculative decoding: the residual branches are scaled as for
  // `branch_layers` layers (0: n_layers), and layers from `scaled_from` on (-1: none) have their
  // attention and FFN outputs multiplied by `scaled_by`. A draft of M layers and a target with
  // branch_layers = scaled_from = M then share embeddings, head and the first M layers bit for
  // bit; the target's extra layers nudge the draft's logits by an amount `scaled_by` controls.
  int branch_layers = 0;
  int scaled_from = -1;
  float scaled_by = 1.0f;
  // Attention biases (attn_q/k/v/output.bias), as some Llama-architecture files carry.
  bool attention_bias = false;
  // Called now and then with (bytes written, total bytes).
  std::function<void(uint64_t, uint64_t)> progress;
};

// The weight types gen-model writes: those daisy computes with (kernels/quant/formats.h).
bool IsSupportedWeightType(gguf::TensorType type);

// Writes the model to `path`. The vocabulary's size sets n_vocab; when the shape asks for a
// larger vocabulary (the real Llama 3 size) the caller pads the vocabulary first.
Status GenerateModel(const GenerateOptions& options, const tokenizer::VocabData& vocab,
                     const std::filesystem::path& path);

// Adds reserved control tokens "<|reserved_special_token_K|>" until the vocabulary has `n`.
void PadVocab(tokenizer::VocabData& vocab, int n);

// Llama 3.1 rope frequency factors (rope_freqs.weight), head_dim / 2 values.
std::vector<float> Llama3RopeFactors(const ModelConfig& config);
// Synthetic LongRoPE factors (rope_factors_long/short.weight), head_dim / 2 values rising from 1
// as Phi-3.5's do: the short set to 2.5, the long set to 40 (the real ones come from a search
// over the trained model and cannot be derived).
std::vector<float> LongRopeFactors(const ModelConfig& config, bool long_set);

}  // namespace daisy::model
