#include "shard/compile.h"

#include <sys/mman.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <optional>

#include "base/log.h"
#include "base/strings.h"
#include "gguf/writer.h"
#include "kernels/weights.h"
#include "model/config.h"
#include "model/tensors.h"

namespace daisy::shard {
namespace {

using Clock = std::chrono::steady_clock;

// The format a source tensor is repacked into in a shard (none: copied as it is).
std::optional<kernels::WeightType> PackedType(gguf::TensorType t) {
  const kernels::WeightFormat* f = kernels::FindFormat(static_cast<uint32_t>(t));
  if (f == nullptr || !f->packed) return std::nullopt;
  return f->type;
}

using model::LayerOf;

// The bytes a source tensor takes in a shard.
uint64_t ShardBytes(const gguf::TensorInfo& t) {
  if (auto type = PackedType(t.type); type && t.n_dims == 2) {
    return kernels::PackedDataBytes(*type, t.ne[1], t.ne[0]) +
           kernels::PackedScaleBytes(*type, t.ne[1], t.ne[0]);
  }
  return t.n_bytes;
}

// Tells the kernel the pages of [p, p + n) will not be read again, so a streaming pass over a
// model larger than memory does not fill the process's resident set with file pages.
void DropPages(const uint8_t* p, size_t n) {
  static const uintptr_t kPage = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t begin = (reinterpret_cast<uintptr_t>(p) + kPage - 1) & ~(kPage - 1);
  const uintptr_t end = (reinterpret_cast<uintptr_t>(p) + n) & ~(kPage - 1);
  if (end > begin) madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
}

class Progress {
 public:
  Progress(bool enabled, uint64_t total) : enabled_(enabled), total_(total), start_(Clock::now()) {}
  void Add(uint64_t bytes, int stage, int n_stages) {
    done_ += bytes;
    const auto now = Clock::now();
    if (!enabled_ || now - last_ < std::chrono::seconds(1)) return;
    last_ = now;
    const double s = std::chrono::duration<double>(now - start_).count();
    std::fprintf(stderr, "compile: stage %d/%d, %s of %s (%.0f%%), %.0f MB/s\n", stage + 1,
                 n_stages, HumanBytes(done_).c_str(), HumanBytes(total_).c_str(),
                 100.0 * done_ / std::max<uint64_t>(total_, 1), done_ / 1e6 / std::max(s, 1e-9));
  }

 private:
  bool enabled_;
  uint64_t total_;
  uint64_t done_ = 0;
  Clock::time_point start_, last_{};
};

class Compiler {
 public:
  Compiler(const CompileOptions& o, gguf::Reader& src) : o_(o), src_(src) {}

  Result<CompileReport> Run();

 private:
  Result<std::vector<int>> Plan(const model::ModelConfig& c);
  std::vector<const gguf::TensorInfo*> StageTensors(int stage, int n_stages,
                                                    std::span<const int> bounds);
  Status WriteStage(int stage, std::span<const int> bounds, const std::filesystem::path& tmp);
  Status WriteTensor(gguf::Writer& w, const gguf::TensorInfo& t, int stage, int n_stages);
  uint64_t TensorHash(const gguf::TensorInfo& t);

  const CompileOptions& o_;
  gguf::Reader& src_;
  model::ModelConfig config_;
  std::map<std::string_view, uint64_t> hashes_;  // per source tensor, XXH3-64 of its bytes
  std::optional<Progress> progress_;
  std::vector<uint8_t> chunk_, scales_;
  std::vector<uint64_t> fp_offsets_;  // per stage: where the fingerprint's characters go
};

Result<std::vector<int>> Compiler::Plan(const model::ModelConfig& c) {
  if (!o_.layer_counts.empty()) {
    if (o_.stages != 0 && o_.stages != static_cast<int>(o_.layer_counts.size())) {
      return InvalidArgument("--stages %d but --layers lists %zu stages", o_.stages,
                             o_.layer_counts.size());
    }
    return PlanExplicit(c.n_layers, o_.layer_counts);
  }
  SplitCosts costs;
  costs.layer_bytes.assign(c.n_layers, 0);
  for (const gguf::TensorInfo& t : src_.tensors()) {
    const std::string_view name = t.name;
    const int layer = LayerOf(name);
    if (layer >= 0 && layer < c.n_layers) {
      costs.layer_bytes[layer] += ShardBytes(t);
    } else if (name == "token_embd.weight") {
      costs.embed_bytes += ShardBytes(t);
    } else if (name == "output.weight" || name == "output_norm.weight") {
      costs.head_bytes += ShardBytes(t);
    } else {
      costs.shared_bytes += ShardBytes(t);
    }
  }
  if (!o_.memory.empty()) {
    if (o_.stages != 0 && o_.stages != static_cast<int>(o_.memory.size())) {
      return InvalidArgument("--stages %d but --memory lists %zu nodes", o_.stages, o_.memory.size());
    }
    SplitCosts stored = costs;
    if (c.tied_embeddings && o_.memory.size() > 1) stored.head_bytes += costs.embed_bytes;
    return PlanByMemory(stored, o_.memory);
  }
  if (c.tied_embeddings) costs.head_bytes += costs.embed_bytes;  // the head reads all of it
  return PlanBalanced(costs, o_.stages);
}

std::vector<const gguf::TensorInfo*> Compiler::StageTensors(int stage, int n_stages,
                                                            std::span<const int> bounds) {
  std::vector<const gguf::TensorInfo*> out;
  const bool last = stage == n_stages - 1;
  for (const gguf::TensorInfo& t : src_.tensors()) {
    const std::string_view name = t.name;
    const int layer = LayerOf(name);
    bool take = false;
    if (layer >= 0) {
      take = layer >= bounds[stage] && layer < bounds[stage + 1];
    } else if (name == "token_embd.weight") {
      take = stage == 0 || (last && config_.tied_embeddings);
    } else if (name == "output.weight" || name == "output_norm.weight") {
      take = last;
    } else {
      take = true;  // rope_freqs and anything else shared by every layer
    }
    if (take) out.push_back(&t);
  }
  return out;
}

uint64_t Compiler::TensorHash(const gguf::TensorInfo& t) {
  auto it = hashes_.find(t.name);
  if (it != hashes_.end()) return it->second;
  const auto data = src_.TensorData(t);
  XXH3_state_t* state = XXH3_createState();
  XXH3_64bits_reset(state);
  constexpr size_t kPiece = 8 << 20;
  for (size_t off = 0; off < data.size(); off += kPiece) {
    const size_t n = std::min(kPiece, data.size() - off);
    XXH3_64bits_update(state, data.data() + off, n);
    DropPages(data.data() + off, n);
  }
  const uint64_t h = XXH3_64bits_digest(state);
  XXH3_freeState(state);
  hashes_.emplace(t.name, h);
  return h;
}

Status Compiler::WriteTensor(gguf::Writer& w, const gguf::TensorInfo& t, int stage, int n_stages) {
  const auto src = src_.TensorData(t);
  // Hashed on the way (once per source tensor), while the pages are in memory anyway.
  XXH3_state_t* hash = hashes_.count(t.name) != 0 ? nullptr : XXH3_createState();
  if (hash != nullptr) XXH3_64bits_reset(hash);
  struct HashDone {
    Compiler* c;
    const gguf::TensorInfo& t;
    XXH3_state_t* h;
    ~HashDone() {
      if (h == nullptr) return;
      c->hashes_.emplace(t.name, XXH3_64bits_digest(h));
      XXH3_freeState(h);
    }
  } done{this, t, hash};
  auto consume = [&](const uint8_t* p, size_t n) {
    if (hash != nullptr) XXH3_64bits_update(hash, p, n);
    DropPages(p, n);
  };
  const auto packed = PackedType(t.type);
  if (!packed || t.n_dims != 2) {  // copied as it is
    constexpr size_t kPiece = 8 << 20;
    for (size_t off = 0; off < src.size(); off += kPiece) {
      const size_t n = std::min(kPiece, src.size() - off);
      DAISY_RETURN_IF_ERROR(w.WriteTensorData(src.subspan(off, n)));
      consume(src.data() + off, n);
      progress_->Add(n, stage, n_stages);
    }
    return Status::Ok();
  }
  // Packed: data first, chunk by chunk of 64 row groups; the scales of the whole matrix wait in
  // memory (1/9 of the data for q4_0, 1/17 for q8_0) and follow.
  const int64_t rows = t.ne[1], cols = t.ne[0];
  const size_t row_bytes = src.size() / rows;
  constexpr int64_t kChunkRows = 64 * kernels::kRowGroup;
  scales_.resize(kernels::PackedScaleBytes(*packed, rows, cols));
  size_t scales_at = 0;
  for (int64_t r0 = 0; r0 < rows; r0 += kChunkRows) {
    const int64_t n = std::min(kChunkRows, rows - r0);
    chunk_.resize(kernels::PackedDataBytes(*packed, n, cols));
    const size_t scale_bytes = kernels::PackedScaleBytes(*packed, n, cols);
    // Scales checked as the model loader checks them: a NaN one would be every stage's NaN.
    if (auto bad = kernels::CheckAndPackFromGguf(*packed, src.data() + r0 * row_bytes, n, cols, chunk_.data(),
                                                 reinterpret_cast<uint16_t*>(scales_.data() + scales_at))) {
      const int64_t row_blocks = cols / kernels::FormatOf(*packed).block_elems;
      bad->block += r0 * row_blocks;
      return DataLoss("%s: tensor %.*s: %s; the file is corrupt", src_.name().c_str(), static_cast<int>(t.name.size()),
                      t.name.data(), kernels::DescribeBadScale(*bad, row_blocks).c_str());
    }
    scales_at += scale_bytes;
    DAISY_RETURN_IF_ERROR(w.WriteTensorData(chunk_));
    consume(src.data() + r0 * row_bytes, n * row_bytes);
    progress_->Add(n * row_bytes, stage, n_stages);
  }
  return w.WriteTensorData(scales_);
}

Status Compiler::WriteStage(int stage, std::span<const int> bounds, const std::filesystem::path& tmp) {
  const int n_stages = static_cast<int>(bounds.size()) - 1;
  DAISY_ASSIGN_OR_RETURN(gguf::Writer w, gguf::Writer::Create(tmp, kAlignment));
  // The source's keys but its family's own (the description says all of it) and the tokenizer
  // after stage 0.
  const std::string family = config_.arch + ".";
  for (const gguf::MetadataEntry& e : src_.metadata()) {
    if (e.key == "general.alignment" || e.key.starts_with(family) || e.key.starts_with("daisy.model.") ||
        (stage != 0 && e.key.starts_with("tokenizer."))) {
      continue;
    }
    w.AddValue(e.key, e.value);
  }
  config_.WriteDescription(w);
  w.AddUint32(kKeyFormatVersion, kFormatVersion);
  w.AddString(kKeyFingerprint, std::string(kFingerprintChars, '0'));  // patched at the end
  w.AddUint32(kKeyStage, static_cast<uint32_t>(stage));
  w.AddUint32(kKeyStages, static_cast<uint32_t>(n_stages));
  w.AddUint32(kKeyFirstLayer, static_cast<uint32_t>(bounds[stage]));
  w.AddUint32(kKeyLastLayer, static_cast<uint32_t>(bounds[stage + 1]));
  const auto tensors = StageTensors(stage, n_stages, bounds);
  for (const gguf::TensorInfo* t : tensors) {
    const auto packed = PackedType(t->type);
    if (packed && t->n_dims == 2) {
      const int64_t rows = t->ne[1], cols = t->ne[0];
      const int64_t data_ne[1] = {static_cast<int64_t>(kernels::PackedDataBytes(*packed, rows, cols))};
      const int64_t scale_ne[1] = {static_cast<int64_t>(kernels::PackedScaleBytes(*packed, rows, cols) / 2)};
      const std::string base(t->name);
      DAISY_RETURN_IF_ERROR(w.AddTensor(base + "." + kernels::WeightTypeName(*packed),
                                        gguf::TensorType::kI8, data_ne));
      DAISY_RETURN_IF_ERROR(w.AddTensor(base + ".scales", gguf::TensorType::kF16, scale_ne));
    } else {
      DAISY_RETURN_IF_ERROR(w.AddTensor(t->name, t->type, std::span<const int64_t>(t->ne, t->n_dims)));
    }
  }
  for (const gguf::TensorInfo* t : tensors) DAISY_RETURN_IF_ERROR(WriteTensor(w, *t, stage, n_stages));
  DAISY_ASSIGN_OR_RETURN(uint64_t fp_offset, w.ValueOffset(kKeyFingerprint));
  DAISY_RETURN_IF_ERROR(w.Finish().status());
  // Remember where the fingerprint's characters are (after the string's u64 length).
  fp_offsets_.push_back(fp_offset + 8);
  return Status::Ok();
}

Result<CompileReport> Compiler::Run() {
  const auto start = Clock::now();
  if (src_.Find(kKeyFormatVersion) != nullptr) {
    return InvalidArgument("%s is already a daisy shard; compile the original GGUF",
                           src_.name().c_str());
  }
  DAISY_ASSIGN_OR_RETURN(config_, model::ModelConfig::FromGguf(src_));
  DAISY_RETURN_IF_ERROR(config_.CheckSupported().With(src_.name()));
  DAISY_RETURN_IF_ERROR(model::CheckTensorNames(src_, config_));
  DAISY_ASSIGN_OR_RETURN(std::vector<int> bounds, Plan(config_));
  const int n_stages = static_cast<int>(bounds.size()) - 1;
  uint64_t total = 0;
  for (int s = 0; s < n_stages; ++s) {
    for (const gguf::TensorInfo* t : StageTensors(s, n_stages, bounds)) total += t->n_bytes;
  }
  progress_.emplace(o_.progress, total);
  std::error_code ec;
  std::filesystem::create_directories(o_.out_dir, ec);
  if (ec) return IoError("%s: cannot create the directory: %s", o_.out_dir.c_str(), ec.message().c_str());
  std::vector<std::filesystem::path> tmps;
  auto cleanup = [&] {
    for (const auto& p : tmps) std::filesystem::remove(p, ec);
  };
  for (int s = 0; s < n_stages; ++s) {
    tmps.push_back(ShardPath(o_.out_dir, s).string() + ".tmp");
    if (o_.progress) {
      std::fprintf(stderr, "compile: stage %d/%d: layers %d-%d%s%s\n", s + 1, n_stages, bounds[s],
                   bounds[s + 1] - 1, s == 0 ? " + embeddings" : "",
                   s == n_stages - 1 ? " + head" : "");
    }
    Status st = WriteStage(s, bounds, tmps.back());
    if (!st.ok()) {
      cleanup();
      return st;
    }
  }
  // The fingerprint: every metadata byte and the tensor index of the source, then every
  // tensor's hash in index order.
  XXH3_state_t* state = XXH3_createState();
  XXH3_128bits_reset(state);
  // The header region: everything before the tensor data.
  const gguf::TensorInfo* any = src_.tensors().empty() ? nullptr : &src_.tensors().front();
  if (any != nullptr) {
    const uint8_t* base = src_.TensorData(*any).data() - src_.data_offset() - any->offset;
    XXH3_128bits_update(state, base, src_.data_offset());
  }
  for (const gguf::TensorInfo& t : src_.tensors()) {
    const uint64_t h = TensorHash(t);
    XXH3_128bits_update(state, &h, sizeof(h));
  }
  const XXH128_hash_t digest = XXH3_128bits_digest(state);
  XXH3_freeState(state);
  CompileReport report;
  report.fingerprint = StrFormat("%016llx%016llx", static_cast<unsigned long long>(digest.high64),
                                 static_cast<unsigned long long>(digest.low64));
  for (int s = 0; s < n_stages; ++s) {
    std::FILE* f = std::fopen(tmps[s].c_str(), "r+b");
    const bool ok = f != nullptr && std::fseek(f, static_cast<long>(fp_offsets_[s]), SEEK_SET) == 0 &&
                    std::fwrite(report.fingerprint.data(), 1, kFingerprintChars, f) == kFingerprintChars;
    const bool closed = f != nullptr && std::fclose(f) == 0;
    if (!ok || !closed) {
      cleanup();
      return IoError("%s: cannot write the fingerprint: %s", tmps[s].c_str(), std::strerror(errno));
    }
  }
  for (int s = 0; s < n_stages; ++s) {
    const auto path = ShardPath(o_.out_dir, s);
    std::filesystem::rename(tmps[s], path, ec);
    if (ec) {
      cleanup();
      return IoError("%s: cannot rename into place: %s", path.c_str(), ec.message().c_str());
    }
    DAISY_ASSIGN_OR_RETURN(gguf::Reader r, gguf::Reader::Open(path));
    DAISY_ASSIGN_OR_RETURN(ShardInfo info, ReadShardInfo(r));
    report.shards.push_back({info, path, r.file_size()});
  }
  report.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return report;
}

}  // namespace

std::filesystem::path ShardPath(const std::filesystem::path& dir, int stage) {
  return dir / ("stage-" + std::to_string(stage) + std::string(kFileSuffix));
}

Result<CompileReport> Compile(const CompileOptions& options) {
  DAISY_ASSIGN_OR_RETURN(gguf::Reader src, gguf::Reader::Open(options.model));
  Compiler compiler(options, src);
  return compiler.Run();
}

}  // namespace daisy::shard
