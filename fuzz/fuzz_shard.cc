// Shard files (docs/shard-format.md): any bytes as a shard — header, description, chain checks,
// weights bound and packed, copied or mapped. Errors are fine; crashes, huge allocations and
// undefined behaviour are not.
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <string>

#include "shard/load.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const int fd = ::memfd_create("fuzz.daisy", MFD_CLOEXEC);
  if (fd < 0) return 0;
  size_t at = 0;
  while (at < size) {
    const ssize_t n = ::write(fd, data + at, size - at);
    if (n <= 0) break;
    at += static_cast<size_t>(n);
  }
  const std::string path = "/proc/self/fd/" + std::to_string(fd);
  for (bool copy : {false, true}) (void)daisy::shard::LoadShard(path, copy);
  ::close(fd);
  return 0;
}
