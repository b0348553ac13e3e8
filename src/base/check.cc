#include "base/check.h"

namespace daisy::internal {

void CheckFailed(const char* file, int line, const char* expr, const char* detail) {
  std::fprintf(stderr, "daisy: CHECK failed at %s:%d: %s %s\n", file, line, expr, detail);
  std::fflush(stderr);
  std::abort();
}

}  // namespace daisy::internal
