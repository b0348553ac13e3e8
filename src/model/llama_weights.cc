#include "model/llama_weights.h"

#include <cstdlib>
#include <cstring>
#include <thread>

#include "base/strings.h"

namespace daisy::model {
namespace {

Result<kernels::WeightType> ToWeightType(gguf::TensorType t) {
  const kernels::WeightFormat* f = kernels::FindFormat(static_cast<uint32_t>(t));
  if (f == nullptr) {
    return Unimplemented("tensor type %s is not supported (%s)", gguf::Traits(t).name,
                         kernels::WeightFormatNames().c_str());
  }
  return f->type;
}

}  // namespace

Result<kernels::WeightMatrix> LlamaModel::PackedMatrix(const std::string& name, int64_t rows,
                                                       int64_t cols) {
  const char* file = reader_->name().c_str();
  // NAME.<format> (the packed bytes as i8) and NAME.scales (f16), for exactly one packed format.
  const gguf::TensorInfo* scales = reader_->FindTensor(name + ".scales");
  const gguf::TensorInfo* data = nullptr;
  kernels::WeightType type = kernels::WeightType::kF32;
  int found = 0;
  for (const kernels::WeightFormat& f : kernels::WeightFormats()) {
    if (!f.packed) continue;
    if (const gguf::TensorInfo* t = reader_->FindTensor(name + "." + f.name)) {
      data = t;
      type = f.type;
      ++found;
    }
  }
  if (scales == nullptr || found != 1) {
    return DataLoss("%s: tensor %s is missing", file, name.c_str());
  }
  if (cols % kernels::ColsMultiple(type) != 0) {
    return DataLoss("%s: packed tensor %s has rows of %lld, not a multiple of %lld", file,
                    name.c_str(), static_cast<long long>(cols),
                    static_cast<long long>(kernels::ColsMultiple(type)));
  }
  const size_t data_bytes = kernels::PackedDataBytes(type, rows, cols);
  const size_t scale_bytes = kernels::PackedScaleBytes(type, rows, cols);
  if (data->type != gguf::TensorType::kI8 || data->n_bytes != data_bytes ||
      scales->type != gguf::TensorType::kF16 || scales->n_bytes != scale_bytes) {
    return DataLoss("%s: packed tensor %s has %llu + %llu bytes (types %s, %s), expected %zu + "
                    "%zu (i8, f16) for [%lld, %lld] %s", file, name.c_str(),
                    static_cast<unsigned long long>(data->n_bytes),
                    static_cast<unsigned long long>(scales->n_bytes), gguf::Traits(data->type).name,
                    gguf::Traits(scales->type).name, data_bytes, scale_bytes,
                    static_cast<long long>(rows), static_cast<long long>(cols),
                    kernels::WeightTypeName(type));
  }
  const uint8_t* src_data = reader_->TensorData(*data).data();
  const uint8_t* src_scales = reader_->TensorData(*scales).data();
  kernels::WeightMatrix m{type, rows, cols, src_data, reinterpret_cast<const uint16_t*>(src_scales)};
  if (copy_packed_) {
    const size_t padded = (data_bytes + 63) / 64 * 64;
    AlignedBuffer buffer = AlignedBuffer::Allocate(padded + scale_bytes);
    if (buffer.data() == nullptr) {
      return ResourceExhausted("cannot allocate %zu bytes for %s", padded + scale_bytes, name.c_str());
    }
    std::memcpy(buffer.data(), src_data, data_bytes);
    std::memcpy(buffer.data() + padded, src_scales, scale_bytes);
    m.data = buffer.data();
    m.scales = reinterpret_cast<const uint16_t*>(buffer.data() + padded);
    storage_.push_back(std::move(buffer));
  }
  return m;
}

Result<kernels::WeightMatrix> LlamaModel::Matrix(const std::string& name, int64_t rows,
                                                 int64_t cols) {
  const gguf::TensorInfo* t = reader_->FindTensor(name);
  if (t == nullptr) return PackedMatrix(name, rows, cols);
  if (t->n_dims != 2 || t->ne[0] != cols || t->ne[1] != rows) {
    return DataLoss("%s: tensor %s has shape [%lld, %lld], expected [%lld, %lld]",
                    reader_->name().c_str(), name.c_str(), static_cast<long long>(t->ne[0]),
                    static_cast<long long>(t->n_dims > 1 ? t->ne[1] : 1),
                    static_cast<long long>(cols), static_cast<long long>(rows));
  }
  auto type = ToWeightType(t->type);
  if (!type.ok()) return type.status().With(reader_->name() + ": tensor " + name);
  if (cols % kernels::ColsMultiple(*type) != 0) {
    return Unimplemented("%s: tensor %s has rows of %lld, not a multiple of %lld",
                         reader_->name().c_str(), name.c_str(), static_cast<long long>(cols),
                         static_cast<long long>(kernels::ColsMultiple(*type)));
  }
  kernels::WeightMatrix m{*type, rows, cols, reader_->TensorData(*t).data(), nullptr};
  if (kernels::FormatOf(*type).packed) {
    const size_t data_bytes = kernels::PackedDataBytes(*type, rows, cols);
    const size_t scale_bytes = kernels::PackedScaleBytes(*type, rows, cols);
    const size_t total = (data_bytes + 63) / 64 * 64 + scale_bytes;
    AlignedBuffer buffer = AlignedBuffer::Allocate(total);  // huge pages: see aligned_buffer.h
    uint8_t* p = buffer.data();
    if (p == nullptr) return ResourceExhausted("cannot allocate %zu bytes for %s", total, name.c_str());
    storage_.push_back(std::move(buffer));
    auto* scales = reinterpret_cast<uint16_t*>(p + (data_bytes + 63) / 64 * 64);
    pending_.push_back({*type, m.data, rows, cols, p, scales});
    m.data = p;
    m.scales = scales;
  }
  return m;
}

Result<const float*> LlamaModel::Vector(const std::string& name, int64_t n) {
  const gguf::TensorInfo* t = reader_->FindTensor(name);
  if (t == nullptr) return DataLoss("%s: tensor %s is missing", reader_->name().c_str(), name.c_str());
  if (t->type != gguf::TensorType::kF32 || t->n_elements != static_cast<uint64_t>(n)) {
    return DataLoss("%s: tensor %s must be f32 with %lld elements (is %s with %llu)",
                    reader_->name().c_str(), name.c_str(), static_cast<long long>(n),
                    gguf::Traits(t->type).name, static_cast<unsigned long long>(t->n_elements));
  }
  // GGUF data offsets are aligned to at least 32 bytes: safe to read as floats.
  return reinterpret_cast<const float*>(reader_->TensorData(*t).data());
}

size_t LlamaModel::owned_bytes() const {
  size_t n = 0;
  for (const AlignedBuffer& b : storage_) n += b.size();
  return n;
}

Result<std::unique_ptr<LlamaModel>> LlamaModel::Load(const std::filesystem::path& path,
                                                     const LoadOptions& options) {
  DAISY_ASSIGN_OR_RETURN(gguf::Reader reader, gguf::Reader::Open(path));
  return Open(std::move(reader), options);
}

Result<std::unique_ptr<LlamaModel>> LlamaModel::Open(gguf::Reader reader,
                                                     const LoadOptions& options) {
  std::unique_ptr<LlamaModel> m(new LlamaModel());
  m->copy_packed_ = options.copy_packed;
  m->reader_ = std::make_unique<gguf::Reader>(std::move(reader));
  DAISY_ASSIGN_OR_RETURN(m->config_, LlamaConfig::FromGguf(*m->reader_));
  const LlamaConfig& c = m->config_;
  const int first = options.first_layer;
  const int last = options.last_layer < 0 ? c.n_layers : options.last_layer;
  if (first < 0 || first > last || last > c.n_layers) {
    return InvalidArgument("layer range [%d, %d) is outside the model's %d layers", first, last,
                           c.n_layers);
  }
  const int64_t d = c.d_model, q_dim = c.n_heads * c.head_dim, kv_dim = c.n_kv_heads * c.head_dim;
  LlamaWeights& w = m->weights_;
  if (options.embeddings || (options.head && c.tied_embeddings)) {
    DAISY_ASSIGN_OR_RETURN(w.token_embd, m->Matrix("token_embd.weight", c.n_vocab, d));
  }
  if (c.rope_scaling.enabled) {
    DAISY_ASSIGN_OR_RETURN(w.rope_freqs, m->Vector("rope_freqs.weight", c.head_dim / 2));
  }
  w.layers.resize(c.n_layers);
  for (int l = first; l < last; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    LayerWeights& L = w.layers[l];
    DAISY_ASSIGN_OR_RETURN(L.attn_norm, m->Vector(p + "attn_norm.weight", d));
    DAISY_ASSIGN_OR_RETURN(L.wq, m->Matrix(p + "attn_q.weight", q_dim, d));
    DAISY_ASSIGN_OR_RETURN(L.wk, m->Matrix(p + "attn_k.weight", kv_dim, d));
    DAISY_ASSIGN_OR_RETURN(L.wv, m->Matrix(p + "attn_v.weight", kv_dim, d));
    DAISY_ASSIGN_OR_RETURN(L.wo, m->Matrix(p + "attn_output.weight", d, q_dim));
    DAISY_ASSIGN_OR_RETURN(L.ffn_norm, m->Vector(p + "ffn_norm.weight", d));
    DAISY_ASSIGN_OR_RETURN(L.w_gate, m->Matrix(p + "ffn_gate.weight", c.d_ff, d));
    DAISY_ASSIGN_OR_RETURN(L.w_up, m->Matrix(p + "ffn_up.weight", c.d_ff, d));
    DAISY_ASSIGN_OR_RETURN(L.w_down, m->Matrix(p + "ffn_down.weight", d, c.d_ff));
  }
  if (options.head) {
    DAISY_ASSIGN_OR_RETURN(w.output_norm, m->Vector("output_norm.weight", d));
    if (c.tied_embeddings) {
      w.output = w.token_embd;
    } else {
      DAISY_ASSIGN_OR_RETURN(w.output, m->Matrix("output.weight", c.n_vocab, d));
    }
  }
  // Repack quantised tensors, spread over threads by tensor (they are independent).
  int threads = options.threads > 0 ? options.threads
                                    : static_cast<int>(std::thread::hardware_concurrency());
  if (threads < 1) threads = 1;
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      for (size_t i = t; i < m->pending_.size(); i += threads) {
        const Pending& p = m->pending_[i];
        kernels::PackFromGguf(p.type, p.src, p.rows, p.cols, p.data, p.scales);
      }
    });
  }
  for (auto& t : workers) t.join();
  m->pending_.clear();
  // Weights copied out of the file need not stay in the page cache as well (the few tensors
  // still read from the mapping, such as norm vectors, come back on first use).
  if (m->owned_bytes() >= m->reader_->file_size() / 2) m->reader_->DropCachedPages();
  return m;
}

}  // namespace daisy::model
