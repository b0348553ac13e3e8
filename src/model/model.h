// Model: a GGUF model (or a daisy shard of one) opened for inference — its description
// (config.h) plus weight views in the kernels' packed layout, bound through the tensor table
// (tensors.h). f32/f16/bf16 tensors are zero-copy views into the mapped file. Tensors of a
// packed format (the format table, kernels/quant/formats.h) in a plain GGUF are repacked once
// at load (scales split from quants; see kernels/weights.h), which costs one pass over them and
// a second copy in memory, as llama.cpp's own Q4_0 repacking does. A pre-compiled shard
// (shard/format.h) stores them already packed, as two tensors NAME.<format> (i8, the packed
// bytes) and NAME.scales (f16); those are bound where they lie, so loading a shard is mmap and
// nothing else.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "base/aligned_buffer.h"
#include "base/status.h"
#include "gguf/reader.h"
#include "kernels/weights.h"
#include "model/config.h"
#include "model/tensors.h"

namespace daisy::model {

struct Weights {
  kernels::WeightMatrix token_embd;    // [n_vocab, d_model]
  const float* rope_freqs = nullptr;   // [head_dim / 2] Llama 3.1 frequency factors, or null
  const float* rope_long = nullptr;    // [head_dim / 2] Phi-3 LongRoPE factors, or null
  const float* rope_short = nullptr;
  std::vector<LayerWeights> layers;    // n_layers entries; only the loaded range is bound
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
  // The same for float weight matrices (f32, f16, bf16), which are used as the file stores them
  // (a memcpy per tensor at load; the file's pages are let go tensor by tensor, so the peak is
  // not the file plus its copy). Decode streams every weight once a token; this keeps it off
  // 4 KiB pages. On the Intel host an f16 1B model decoded alike either way (docs/benchmarks.md).
  bool copy_float = true;
};

class Model {
 public:
  // Opens, validates (the description is one daisy computes; every tensor present with the
  // expected shape and a supported type; no tensor the recipe would skip) and loads. Errors name
  // the file and the tensor.
  static Result<std::unique_ptr<Model>> Load(const std::filesystem::path& path,
                                             const LoadOptions& options = {});
  // The same from an opened file.
  static Result<std::unique_ptr<Model>> Open(gguf::Reader reader, const LoadOptions& options = {});

  const ModelConfig& config() const { return config_; }
  const Weights& weights() const { return weights_; }
  const gguf::Reader& reader() const { return *reader_; }
  // Bytes of weights held in daisy's own (huge-page-advised) memory rather than the mapping.
  size_t owned_bytes() const;

 private:
  Model() = default;
  Status Bind(const LoadOptions& options, int first, int last);
  Status CheckEveryTensorUsed(int first, int last) const;
  Result<kernels::WeightMatrix> Matrix(const std::string& name, int64_t rows, int64_t cols);
  Result<kernels::WeightMatrix> PackedMatrix(const std::string& name, int64_t rows, int64_t cols);
  Result<const float*> Vector(const std::string& name, int64_t n);
  // Packs (or copies) every pending tensor over `threads` threads, checking the quantised ones'
  // scales in the same pass; the error is the first bad tensor's in binding order.
  Status Repack(int threads);

  ModelConfig config_;
  std::unique_ptr<gguf::Reader> reader_;
  Weights weights_;
  std::set<std::string> used_;  // tensor names bound
  struct Pending {  // a tensor waiting to be repacked, or copied as it is
    kernels::WeightType type;
    const void* src;
    size_t src_bytes;  // its bytes in the file, forgotten by the mapping once done
    int64_t rows, cols;
    void* data;
    uint16_t* scales;
    bool copy;
    std::string name;  // for errors
  };
  std::vector<Pending> pending_;
  bool copy_packed_ = false;
  bool copy_float_ = true;
  std::vector<AlignedBuffer> storage_;
};

}  // namespace daisy::model
