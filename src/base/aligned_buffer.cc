#include "base/aligned_buffer.h"

#include <sys/mman.h>

#include <cstdlib>

namespace daisy {

void AlignedBuffer::Free::operator()(uint8_t* p) const { std::free(p); }

AlignedBuffer AlignedBuffer::Allocate(size_t bytes) {
  constexpr size_t kHuge = size_t{2} << 20;
  constexpr size_t kLine = 64;
  const bool huge = bytes >= kHuge;
  const size_t align = huge ? kHuge : kLine;
  const size_t rounded = (bytes + align - 1) / align * align;
  AlignedBuffer b;
  auto* p = static_cast<uint8_t*>(std::aligned_alloc(align, rounded == 0 ? align : rounded));
  if (p == nullptr) return b;
  if (huge) madvise(p, rounded, MADV_HUGEPAGE);  // advice only: failure is harmless
  b.data_.reset(p);
  b.size_ = bytes;
  return b;
}

}  // namespace daisy
