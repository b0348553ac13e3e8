// MappedFile: a read-only memory mapping of a whole file. Move-only owner; views into it
// (std::span, std::string_view) stay valid while it lives. Thread-safe for concurrent reads.
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>

#include "base/status.h"

namespace daisy::gguf {

class MappedFile {
 public:
  // Maps `path` read-only. Errors: NotFound, IoError (with the OS reason), InvalidArgument
  // for a directory. An empty file maps to an empty span.
  static Result<MappedFile> Open(const std::filesystem::path& path);

  MappedFile() = default;
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  std::span<const uint8_t> bytes() const { return {data_, size_}; }
  // Unmaps every page of the file from this process (they are read again when touched), for
  // callers that copied what they need. The page cache keeps them, as the kernel's reclaimable
  // memory: the next start of the same file reads them from memory, not from the disk (dropping
  // them cost each restart +5.3 s for a 733 MB file at 150 MB/s: docs/benchmarks.md).
  void UnmapAll() const;
  // Unmaps the whole pages inside `range` (a part of bytes()) from this process: a reader that
  // streams through a big file keeps its resident memory at the part it is working on.
  void Forget(std::span<const uint8_t> range) const;

 private:
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace daisy::gguf
