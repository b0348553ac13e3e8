#include "base/log.h"

#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <string>

#include "base/strings.h"

namespace daisy {
namespace {
// Written once by main() before threads start; read-only afterwards.
std::atomic<LogLevel> g_level{LogLevel::kInfo};

const char* LevelTag(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug: return "debug";
    case LogLevel::kInfo: return "info";
    case LogLevel::kWarning: return "warning";
    case LogLevel::kError: return "error";
    case LogLevel::kQuiet: return "";
  }
  return "";
}
}  // namespace

void SetLogLevel(LogLevel level) { g_level.store(level); }
LogLevel GetLogLevel() { return g_level.load(); }

void Log(LogLevel level, const char* fmt, ...) {
  if (level < g_level.load(std::memory_order_relaxed)) return;
  va_list ap;
  va_start(ap, fmt);
  std::string line = VStrFormat(fmt, ap);
  va_end(ap);
  // One fprintf per line so concurrent lines do not interleave mid-line.
  std::fprintf(stderr, "daisy %s: %s\n", LevelTag(level), line.c_str());
}

}  // namespace daisy
