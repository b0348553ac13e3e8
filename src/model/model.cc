#include "model/model.h"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <optional>
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

Result<kernels::WeightMatrix> Model::PackedMatrix(const std::string& name, int64_t rows,
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
  used_.insert(std::string(data->name));
  used_.insert(std::string(scales->name));
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

Result<kernels::WeightMatrix> Model::Matrix(const std::string& name, int64_t rows,
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
  used_.insert(name);
  if (cols % kernels::ColsMultiple(*type) != 0) {
    return Unimplemented("%s: tensor %s has rows of %lld, not a multiple of %lld",
                         reader_->name().c_str(), name.c_str(), static_cast<long long>(cols),
                         static_cast<long long>(kernels::ColsMultiple(*type)));
  }
  kernels::WeightMatrix m{*type, rows, cols, reader_->TensorData(*t).data(), nullptr};
  if (!kernels::FormatOf(*type).packed && copy_float_) {
    // Float weights are used as the file has them; copied into huge-page memory all the same
    // (LoadOptions::copy_float).
    const size_t bytes = t->n_bytes;
    AlignedBuffer buffer = AlignedBuffer::Allocate(bytes);
    if (buffer.data() == nullptr) return ResourceExhausted("cannot allocate %zu bytes for %s", bytes, name.c_str());
    pending_.push_back({*type, m.data, bytes, rows, cols, buffer.data(), nullptr, true, name});
    m.data = buffer.data();
    storage_.push_back(std::move(buffer));
  }
  if (kernels::FormatOf(*type).packed) {
    const size_t data_bytes = kernels::PackedDataBytes(*type, rows, cols);
    const size_t scale_bytes = kernels::PackedScaleBytes(*type, rows, cols);
    const size_t total = (data_bytes + 63) / 64 * 64 + scale_bytes;
    AlignedBuffer buffer = AlignedBuffer::Allocate(total);  // huge pages: see aligned_buffer.h
    uint8_t* p = buffer.data();
    if (p == nullptr) return ResourceExhausted("cannot allocate %zu bytes for %s", total, name.c_str());
    storage_.push_back(std::move(buffer));
    auto* scales = reinterpret_cast<uint16_t*>(p + (data_bytes + 63) / 64 * 64);
    // Its scales are checked as it is packed (Repack: in parallel, reading the file once).
    pending_.push_back({*type, m.data, static_cast<size_t>(t->n_bytes), rows, cols, p, scales, false, name});
    m.data = p;
    m.scales = scales;
  }
  return m;
}

Result<const float*> Model::Vector(const std::string& name, int64_t n) {
  const gguf::TensorInfo* t = reader_->FindTensor(name);
  if (t == nullptr) return DataLoss("%s: tensor %s is missing", reader_->name().c_str(), name.c_str());
  if (t->type != gguf::TensorType::kF32 || t->n_elements != static_cast<uint64_t>(n)) {
    return DataLoss("%s: tensor %s must be f32 with %lld elements (is %s with %llu)",
                    reader_->name().c_str(), name.c_str(), static_cast<long long>(n),
                    gguf::Traits(t->type).name, static_cast<unsigned long long>(t->n_elements));
  }
  used_.insert(name);
  // Copied out of the file like the matrices: Open unmaps the file after loading, and a vector
  // read from the mapping would fault its page back in on the first forward, from the disk when
  // the page cache has let it go (two norms a layer; ~3 ms a layer on this VM's disk when the
  // cache was dropped, ~100 ms of a 1B model's first prompt).
  const size_t bytes = static_cast<size_t>(n) * sizeof(float);
  AlignedBuffer buffer = AlignedBuffer::Allocate(bytes);
  if (buffer.data() == nullptr) return ResourceExhausted("cannot allocate %zu bytes for %s", bytes, name.c_str());
  std::memcpy(buffer.data(), reader_->TensorData(*t).data(), bytes);
  const float* v = buffer.as<float>();
  storage_.push_back(std::move(buffer));
  return v;
}

size_t Model::owned_bytes() const {
  size_t n = 0;
  for (const AlignedBuffer& b : storage_) n += b.size();
  return n;
}

Result<std::unique_ptr<Model>> Model::Load(const std::filesystem::path& path, const LoadOptions& options) {
  DAISY_ASSIGN_OR_RETURN(gguf::Reader reader, gguf::Reader::Open(path));
  return Open(std::move(reader), options);
}

Status Model::Bind(const LoadOptions& options, int first, int last) {
  const ModelConfig& c = config_;
  Weights& w = weights_;
  if (options.embeddings || (options.head && c.tied_embeddings)) {
    DAISY_ASSIGN_OR_RETURN(w.token_embd, Matrix(std::string(kTokenEmbd), c.n_vocab, c.d_model));
  }
  if (c.rope_scaling.enabled) {
    DAISY_ASSIGN_OR_RETURN(w.rope_freqs, Vector(std::string(kRopeFreqs), c.head_dim / 2));
  }
  if (c.longrope) {
    DAISY_ASSIGN_OR_RETURN(w.rope_long, Vector(std::string(kRopeFactorsLong), c.head_dim / 2));
    DAISY_ASSIGN_OR_RETURN(w.rope_short, Vector(std::string(kRopeFactorsShort), c.head_dim / 2));
  }
  w.layers.resize(c.n_layers);
  for (int l = first; l < last; ++l) {
    const std::string prefix = "blk." + std::to_string(l) + ".";
    for (const LayerTensor& t : LayerTensors(c)) {
      const std::string name = prefix + std::string(t.name);
      const bool present = reader_->FindTensor(name) != nullptr ||
                           reader_->FindTensor(name + ".scales") != nullptr;
      if (!t.required && !present) continue;  // optional and absent: not used
      if (t.vector != nullptr) {
        DAISY_ASSIGN_OR_RETURN(w.layers[l].*t.vector, Vector(name, DimValue(c, t.cols)));
      } else {
        DAISY_ASSIGN_OR_RETURN(w.layers[l].*t.matrix, Matrix(name, DimValue(c, t.rows), DimValue(c, t.cols)));
      }
    }
  }
  if (options.head) {
    DAISY_ASSIGN_OR_RETURN(w.output_norm, Vector(std::string(kOutputNorm), c.d_model));
    if (c.tied_embeddings) {
      w.output = w.token_embd;
    } else {
      DAISY_ASSIGN_OR_RETURN(w.output, Matrix(std::string(kOutput), c.n_vocab, c.d_model));
    }
  }
  return CheckEveryTensorUsed(first, last);
}

Status Model::CheckEveryTensorUsed(int first, int last) const {
  for (const gguf::TensorInfo& t : reader_->tensors()) {
    const std::string_view name = t.name;
    const int layer = LayerOf(name);
    // Another stage's layers, and the embeddings or head when this one does not need them, are
    // simply not loaded; a tensor of a loaded layer, or one no model has, that nothing took
    // would be weights the recipe skips.
    if (layer >= 0 ? layer < first || layer >= last : IsGlobalTensor(name)) continue;
    if (used_.count(std::string(name)) != 0) continue;
    // A shard's packed halves (NAME.<format>, NAME.scales) of a global tensor not loaded here.
    const size_t dot = name.rfind('.');
    if (layer < 0 && dot != std::string_view::npos && IsGlobalTensor(name.substr(0, dot))) continue;
    return Unimplemented("%s: tensor %.*s is not one daisy's %s recipe uses (this model's "
                         "architecture or variant is not supported)", reader_->name().c_str(),
                         static_cast<int>(name.size()), name.data(), config_.arch.c_str());
  }
  return Status::Ok();
}

Status Model::Repack(int threads) {
  // Quantised tensors, spread over threads by tensor (they are independent).
  if (threads < 1) threads = static_cast<int>(std::thread::hardware_concurrency());
  if (threads < 1) threads = 1;
  // A bad scale stops the tensors after the first bad one found so far, never those before it:
  // the error reported is the first bad tensor's in binding order, however the threads ran.
  std::vector<std::optional<kernels::BadScale>> bad(pending_.size());
  std::atomic<size_t> first_bad{pending_.size()};
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([this, t, threads, &bad, &first_bad] {
      for (size_t i = t; i < pending_.size(); i += threads) {
        if (i > first_bad.load(std::memory_order_relaxed)) break;
        const Pending& p = pending_[i];
        if (p.copy) {
          std::memcpy(p.data, p.src, p.src_bytes);
        } else if ((bad[i] = kernels::CheckAndPackFromGguf(p.type, p.src, p.rows, p.cols, p.data, p.scales))) {
          size_t seen = first_bad.load();
          while (i < seen && !first_bad.compare_exchange_weak(seen, i)) {
          }
        }
        // The file's copy is not read again: its pages leave this process's memory now rather
        // than at the end, so the peak is not the file plus its copy.
        reader_->Forget(std::span<const uint8_t>(static_cast<const uint8_t*>(p.src), p.src_bytes));
      }
    });
  }
  for (auto& t : workers) t.join();
  const size_t i = first_bad.load();
  if (i < pending_.size()) {
    const Pending& p = pending_[i];
    const int64_t row_blocks = p.cols / kernels::FormatOf(p.type).block_elems;
    return DataLoss("%s: tensor %s: %s; the file is corrupt", reader_->name().c_str(), p.name.c_str(),
                    kernels::DescribeBadScale(*bad[i], row_blocks).c_str());
  }
  pending_.clear();
  return Status::Ok();
}

Result<std::unique_ptr<Model>> Model::Open(gguf::Reader reader, const LoadOptions& options) {
  std::unique_ptr<Model> m(new Model());
  m->copy_packed_ = options.copy_packed;
  m->copy_float_ = options.copy_float;
  m->reader_ = std::make_unique<gguf::Reader>(std::move(reader));
  DAISY_ASSIGN_OR_RETURN(m->config_, ModelConfig::FromGguf(*m->reader_));
  const ModelConfig& c = m->config_;
  DAISY_RETURN_IF_ERROR(c.CheckSupported().With(m->reader_->name()));
  const int first = options.first_layer;
  const int last = options.last_layer < 0 ? c.n_layers : options.last_layer;
  if (first < 0 || first > last || last > c.n_layers) {
    return InvalidArgument("layer range [%d, %d) is outside the model's %d layers", first, last,
                           c.n_layers);
  }
  DAISY_RETURN_IF_ERROR(m->Bind(options, first, last));
  DAISY_RETURN_IF_ERROR(m->Repack(options.threads));
  // Weights copied out of the file need not stay mapped in this process as well (nothing is read
  // from the mapping after this unless float weights are served from it: LoadOptions::copy_float).
  // The page cache keeps the file: a restart reads it from memory (MappedFile::UnmapAll).
  if (m->owned_bytes() >= m->reader_->file_size() / 2) m->reader_->UnmapAll();
  return m;
}

}  // namespace daisy::model
