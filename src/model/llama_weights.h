// LlamaModel: a Llama GGUF opened for inference — hyper-parameters plus weight views in the
// kernels' packed layout. f32/f16/bf16 tensors are zero-copy views into the mapped file.
// q8_0/q4_0 tensors of a plain GGUF are repacked once at load (scales split from quants; see
// kernels/weights.h), which costs one pass over them and a second copy in memory, as
// llama.cpp's own Q4_0 repacking does. A pre-compiled shard (shard/format.h) stores them
// already packed, as two tensors NAME.q8_0|NAME.q4_0 (i8, the packed bytes) and NAME.scales
// (f16); those are bound where they lie, so loading a shard is mmap and nothing else.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "base/aligned_buffer.h"
#include "base/status.h"
#include "gguf/reader.h"
#include "kernels/weights.h"
#include "model/llama_config.h"

namespace daisy::model {

struct LayerWeights {
  const float* attn_norm = nullptr;  // [d_model]
  kernels::WeightMatrix wq;          // [n_heads * head_dim, d_model]
  kernels::WeightMatrix wk;          // [n_kv_heads * head_dim, d_model]
  kernels::WeightMatrix wv;          // [n_kv_heads * head_dim, d_model]
  kernels::WeightMatrix wo;          // [d_model, n_heads * head_dim]
  const float* ffn_norm = nullptr;   // [d_model]
  kernels::WeightMatrix w_gate;      // [d_ff, d_model]
  kernels::WeightMatrix w_up;        // [d_ff, d_model]
  kernels::WeightMatrix w_down;      // [d_model, d_ff]
};

struct LlamaWeights {
  kernels::WeightMatrix token_embd;  // [n_vocab, d_model]
  const float* rope_freqs = nullptr; // [head_dim / 2] Llama 3.1 frequency factors, or null
  std::vector<LayerWeights> layers;
  const float* output_norm = nullptr;  // [d_model]
  kernels::WeightMatrix output;        // [n_vocab, d_model] (token_embd when tied)
};

// Which layers to load: [first_layer, last_layer), and whether the embeddings and the head are
// needed. Unloaded tensors are neither read nor repacked.
struct LoadOptions {
  int first_layer = 0;
  int last_layer = -1;  // -1: through the last layer
  bool embeddings = true;
  bool head = true;
  int threads = 0;      // repacking threads (0: all cores)
  // Copy pre-packed weights out of the mapping into 2 MiB-page anonymous memory (one memcpy per
  // tensor). Page-cache mappings use 4 KiB pages, which can make decode several times slower
  // on machines where TLB misses are expensive (see docs/architecture.md).
  bool copy_packed = false;
};

class LlamaModel {
 public:
  // Opens, validates (every tensor present with the expected shape and a supported type) and
  // loads. Errors name the file and the tensor.
  static Result<std::unique_ptr<LlamaModel>> Load(const std::filesystem::path& path,
                                                  const LoadOptions& options = {});
  // The same from an opened file.
  static Result<std::unique_ptr<LlamaModel>> Open(gguf::Reader reader,
                                                  const LoadOptions& options = {});

  const LlamaConfig& config() const { return config_; }
  const LlamaWeights& weights() const { return weights_; }
  const gguf::Reader& reader() const { return *reader_; }
  // Bytes of weights held in daisy's own (huge-page-advised) memory rather than the mapping.
  size_t owned_bytes() const;

 private:
  LlamaModel() = default;
  Result<kernels::WeightMatrix> Matrix(const std::string& name, int64_t rows, int64_t cols);
  Result<kernels::WeightMatrix> PackedMatrix(const std::string& name, int64_t rows, int64_t cols);
  Result<const float*> Vector(const std::string& name, int64_t n);

  LlamaConfig config_;
  std::unique_ptr<gguf::Reader> reader_;
  LlamaWeights weights_;
  struct Pending {  // a quantised tensor waiting to be repacked
    kernels::WeightType type;
    const void* src;
    int64_t rows, cols;
    void* data;
    uint16_t* scales;
  };
  std::vector<Pending> pending_;
  bool copy_packed_ = false;
  std::vector<AlignedBuffer> storage_;
};

}  // namespace daisy::model
