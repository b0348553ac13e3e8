#include "base/memory_stats.h"

#include <filesystem>
#include <system_error>

#include <sys/resource.h>

#include <cstdio>
#include <cstring>

namespace daisy {

uint64_t PeakRssBytes() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<uint64_t>(usage.ru_maxrss) * 1024;
}

uint64_t HugePageBytes() {
  FILE* f = std::fopen("/proc/self/smaps_rollup", "r");
  if (f == nullptr) return 0;
  char line[256];
  uint64_t kib = 0;
  while (std::fgets(line, sizeof line, f) != nullptr) {
    unsigned long long v = 0;
    if (std::sscanf(line, "AnonHugePages: %llu kB", &v) == 1) {
      kib = v;
      break;
    }
  }
  std::fclose(f);
  return kib * 1024;
}

int ProcessThreads() {
  std::error_code ec;
  int n = 0;
  for (std::filesystem::directory_iterator it("/proc/self/task", ec), end; !ec && it != end; it.increment(ec)) ++n;
  return ec ? 0 : n;
}

}  // namespace daisy
