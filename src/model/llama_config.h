// LlamaConfig: the hyper-parameters of a Llama-architecture GGUF, read and checked the way
// llama.cpp reads them (llama.* keys), and the named shapes `daisy gen-model` can make.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "gguf/reader.h"

namespace daisy::model {

// Set in pipeline shards (which may lack token_embd/output): whether the model ties its LM head
// to the embeddings. With it, llama.vocab_size gives the vocabulary size.
inline constexpr std::string_view kTiedEmbeddingsKey = "daisy.tied_embeddings";

// Llama 3.1's rope frequency scaling ("llama3" rope type), stored by converters as the
// rope_freqs.weight tensor computed from these factors.
struct RopeScaling {
  bool enabled = false;
  float factor = 8.0f;
  float low_freq_factor = 1.0f;
  float high_freq_factor = 4.0f;
  int original_context = 8192;
};

struct LlamaConfig {
  int n_vocab = 0;
  int d_model = 0;
  int n_layers = 0;
  int n_heads = 0;
  int n_kv_heads = 0;
  int head_dim = 0;  // d_model / n_heads unless the file says otherwise
  int d_ff = 0;
  int context_length = 0;
  float rms_eps = 1e-5f;
  float rope_theta = 10000.0f;
  bool tied_embeddings = false;  // no output.weight: the LM head reuses token_embd (Llama 3.2)
  RopeScaling rope_scaling;      // known at generation; at load, rope_freqs.weight says it all

  // Reads general.architecture == "llama" and the llama.* keys. Errors say which key is
  // missing or which value is inconsistent (for example heads not dividing d_model).
  static Result<LlamaConfig> FromGguf(const gguf::Reader& reader);
  Status Validate() const;
};

// A named shape: "tiny", "small" (test shapes of our own), "llama-3.2-1b", "llama-3.2-3b",
// "llama-3.1-8b", "llama-3.1-70b" (the real models' dimensions).
struct ModelShape {
  std::string name;
  LlamaConfig config;  // n_vocab: the real model's (0 = whatever the tokenizer has)
};

Result<ModelShape> FindShape(std::string_view name);
std::vector<std::string> ShapeNames();

}  // namespace daisy::model
