// AlignedBuffer: an owned, aligned block of memory. Large blocks are 2 MiB-aligned and advised
// to use transparent huge pages: inference sweeps its weights and caches on every token, and
// with 4 KiB pages the TLB misses (very expensive under virtualisation: measured here as a
// 3-10x slower decode on some runs) can cost more than the arithmetic. Move-only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

namespace daisy {

class AlignedBuffer {
 public:
  AlignedBuffer() = default;
  // nullptr data() when the allocation fails. Contents are uninitialised.
  static AlignedBuffer Allocate(size_t bytes);

  uint8_t* data() const { return data_.get(); }
  size_t size() const { return size_; }
  template <typename T>
  T* as() const {
    return reinterpret_cast<T*>(data_.get());
  }

 private:
  struct Free {
    void operator()(uint8_t* p) const;
  };
  std::unique_ptr<uint8_t[], Free> data_;
  size_t size_ = 0;
};

}  // namespace daisy
