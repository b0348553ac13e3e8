// Logging to stderr. The level is a process-wide setting made once in main() (before any thread
// starts); everything else receives no logger state.
#pragma once

namespace daisy {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarning = 2, kError = 3, kQuiet = 4 };

// Call from main() before starting threads.
void SetLogLevel(LogLevel level);
LogLevel GetLogLevel();

void Log(LogLevel level, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

}  // namespace daisy

#define DAISY_LOG_INFO(...) ::daisy::Log(::daisy::LogLevel::kInfo, __VA_ARGS__)
#define DAISY_LOG_WARN(...) ::daisy::Log(::daisy::LogLevel::kWarning, __VA_ARGS__)
#define DAISY_LOG_ERROR(...) ::daisy::Log(::daisy::LogLevel::kError, __VA_ARGS__)
#define DAISY_LOG_DEBUG(...) ::daisy::Log(::daisy::LogLevel::kDebug, __VA_ARGS__)
