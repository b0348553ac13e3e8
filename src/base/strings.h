// Small string helpers with no dependencies.
#pragma once

#include <cstdarg>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace daisy {

std::string StrFormat(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
std::string VStrFormat(const char* fmt, va_list ap);

// "1.50 GiB", "12.0 MiB", "512 B".
std::string HumanBytes(uint64_t bytes);

// Splits on `sep`; empty pieces are kept ("a,,b" -> {"a", "", "b"}).
std::vector<std::string> StrSplit(std::string_view text, char sep);

// Quotes `text` for a diagnostic: printable ASCII kept, the rest \xNN-escaped, cut at `max_len`.
std::string EscapeForMessage(std::string_view text, size_t max_len = 64);

// "1/2/3": the numbers joined by `sep`.
std::string JoinNumbers(const std::vector<size_t>& numbers, char sep = '/');

// Appends the UTF-8 encoding of `cpt` (< 0x110000) to `out`.
void AppendUtf8(uint32_t cpt, std::string& out);

}  // namespace daisy
