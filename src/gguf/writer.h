// gguf::Writer: writes a GGUF v3 file, streaming tensor data as it is produced so that memory
// stays constant whatever the model size.
//
// Usage: Create(); Add*() metadata; AddTensor() for every tensor (the index, in file order);
// then for each tensor in that order, WriteTensorData() its bytes in as many pieces as wanted;
// finally Finish(). Metadata and the tensor index are buffered (they are small); tensor data
// goes straight to the file. Thread-compatible.
#pragma once

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include <unordered_map>

#include "base/status.h"
#include "gguf/reader.h"
#include "gguf/types.h"

namespace daisy::gguf {

class Writer {
 public:
  // Opens `path` for writing (truncating it). The file is written to `path` directly; on any
  // error the partial file is removed by Abandon() / the destructor unless Finish() succeeded.
  static Result<Writer> Create(const std::filesystem::path& path,
                               uint32_t alignment = kDefaultAlignment);

  Writer(Writer&&) noexcept;
  Writer& operator=(Writer&&) noexcept;
  ~Writer();

  // Metadata. Keys must be unique (a duplicate is an InvalidArgument when Finish()/BeginData()
  // runs). Only valid before the first WriteTensorData().
  void AddString(std::string_view key, std::string_view value);
  void AddUint32(std::string_view key, uint32_t value);
  void AddInt32(std::string_view key, int32_t value);
  void AddUint64(std::string_view key, uint64_t value);
  void AddFloat32(std::string_view key, float value);
  void AddBool(std::string_view key, bool value);
  void AddStringArray(std::string_view key, std::span<const std::string> values);
  void AddInt32Array(std::string_view key, std::span<const int32_t> values);
  void AddFloat32Array(std::string_view key, std::span<const float> values);

  // Any value a Reader produced (every scalar type, strings, arrays of scalars or strings):
  // copies metadata from one file to another unchanged.
  void AddValue(std::string_view key, const Value& value);

  // Where `key`'s value starts in the file (for a string: its u64 length), known as soon as
  // the key is added (the header layout is fixed by then). Lets a caller patch a fixed-size
  // value after Finish(), for example a checksum of data written later.
  Result<uint64_t> ValueOffset(std::string_view key) const;

  // Declares the next tensor; `ne` lists dimensions innermost first (ggml order).
  Status AddTensor(std::string_view name, TensorType type, std::span<const int64_t> ne);

  // Appends bytes of the current tensor. A tensor's pieces must add up to exactly its size;
  // the writer then pads to the alignment and moves on to the next declared tensor.
  Status WriteTensorData(std::span<const uint8_t> bytes);

  // Writes any remaining header (a file with no tensors), checks every tensor was written in
  // full, flushes and closes. Returns the final file size.
  Result<uint64_t> Finish();

  uint64_t bytes_written() const { return bytes_written_; }

 private:
  Writer() = default;
  void KeyHeader(std::string_view key, ValueType type);
  Status WriteHeaderIfNeeded();
  Status Put(const void* data, size_t n);
  Status Pad();

  struct PendingTensor {
    std::string name;
    uint64_t n_bytes;
  };

  std::filesystem::path path_;
  std::FILE* file_ = nullptr;
  uint32_t alignment_ = kDefaultAlignment;
  std::string kv_bytes_;      // encoded metadata entries
  uint64_t n_kv_ = 0;
  std::string tensor_index_;  // encoded tensor infos
  std::vector<PendingTensor> tensors_;
  uint64_t next_data_offset_ = 0;
  std::unordered_set<std::string> keys_;
  std::unordered_map<std::string, uint64_t> value_offsets_;  // into kv_bytes_
  std::string first_error_;   // a metadata error, reported at the header write
  bool header_written_ = false;
  bool finished_ = false;
  size_t current_ = 0;          // index of the tensor being written
  uint64_t current_written_ = 0;
  uint64_t bytes_written_ = 0;
};

}  // namespace daisy::gguf
