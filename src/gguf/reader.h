// gguf::Reader: a strictly validated, zero-copy view of a GGUF (v2 or v3, little-endian) file.
//
// Open() parses and checks the whole header, every metadata value and the tensor index before
// returning: every count, length, dimension, type and offset is bounded by the file size before
// anything is allocated, so a truncated or corrupt file yields a DataLoss Status naming the file,
// the offset and what was wrong — never a crash, a hang or a huge allocation. After Open(), all
// views (keys, strings, tensor data) point into the mapping and live as long as the Reader.
// Thread-compatible; const methods are safe to call concurrently.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/status.h"
#include "gguf/mapped_file.h"
#include "gguf/types.h"

namespace daisy::gguf {

// One metadata value. Scalars are widened into `u`/`i`/`f`; strings and arrays are views.
struct Value {
  ValueType type = ValueType::kUint8;
  uint64_t u = 0;  // unsigned integer types and bool
  int64_t i = 0;   // signed integer types
  double f = 0;    // float32, float64
  std::string_view str;  // kString
  // kArray only:
  ValueType elem_type = ValueType::kUint8;
  uint64_t count = 0;
  std::span<const uint8_t> raw;             // numeric/bool arrays: count * size bytes, little-endian
  std::vector<std::string_view> strings;    // string arrays

  bool IsInteger() const;
  // "uint32", "array[string; 128256]", ...
  std::string TypeName() const;
};

struct MetadataEntry {
  std::string_view key;
  Value value;
  uint64_t offset = 0;  // where the entry starts in the file, for diagnostics
};

struct TensorInfo {
  std::string_view name;
  TensorType type = TensorType::kF32;
  int n_dims = 0;
  int64_t ne[kMaxDims] = {1, 1, 1, 1};  // ne[0] is the innermost (contiguous) dimension
  uint64_t offset = 0;   // relative to the start of the data section
  uint64_t n_bytes = 0;
  uint64_t n_elements = 0;
};

class Reader {
 public:
  // Maps and validates `path`. Errors name the file: NotFound, IoError, DataLoss (malformed),
  // Unimplemented (a valid file of a GGUF version or byte order daisy does not read).
  static Result<Reader> Open(const std::filesystem::path& path);
  // Validates bytes owned by the caller (they must outlive the Reader); `name` is used in errors.
  static Result<Reader> FromBytes(std::span<const uint8_t> bytes, std::string name);

  Reader(Reader&&) noexcept = default;
  Reader& operator=(Reader&&) noexcept = default;

  const std::string& name() const { return name_; }
  uint32_t version() const { return version_; }
  uint32_t alignment() const { return alignment_; }
  uint64_t file_size() const { return bytes_.size(); }
  uint64_t data_offset() const { return data_offset_; }

  const std::vector<MetadataEntry>& metadata() const { return metadata_; }
  const std::vector<TensorInfo>& tensors() const { return tensors_; }

  // nullptr when absent.
  const Value* Find(std::string_view key) const;
  const TensorInfo* FindTensor(std::string_view name) const;
  // See MappedFile::Forget (no-op for FromBytes readers).
  void Forget(std::span<const uint8_t> range) const {
    if (file_) file_->Forget(range);
  }
  // See MappedFile::UnmapAll (no-op for FromBytes readers).
  void UnmapAll() const {
    if (file_) file_->UnmapAll();
  }
  // The tensor's bytes inside the mapping.
  std::span<const uint8_t> TensorData(const TensorInfo& tensor) const;

  // Typed getters. NotFound when the key is absent; InvalidArgument naming the key, its type
  // and the wanted type on a mismatch or an out-of-range value.
  Result<uint64_t> GetUint(std::string_view key) const;
  Result<int64_t> GetInt(std::string_view key) const;
  Result<double> GetFloat(std::string_view key) const;
  Result<bool> GetBool(std::string_view key) const;
  Result<std::string_view> GetString(std::string_view key) const;
  Result<std::span<const std::string_view>> GetStringArray(std::string_view key) const;
  Result<std::vector<double>> GetFloatArray(std::string_view key) const;
  Result<std::vector<int64_t>> GetIntArray(std::string_view key) const;

 private:
  Reader() = default;
  Status Parse();
  Status ParseHeaderAndIndex();

  std::string name_;
  std::unique_ptr<MappedFile> file_;  // null when built FromBytes
  std::span<const uint8_t> bytes_;
  uint32_t version_ = 0;
  uint32_t alignment_ = kDefaultAlignment;
  uint64_t data_offset_ = 0;
  std::vector<MetadataEntry> metadata_;
  std::vector<TensorInfo> tensors_;
  std::unordered_map<std::string_view, size_t> key_index_;
  std::unordered_map<std::string_view, size_t> tensor_index_;
};

}  // namespace daisy::gguf
