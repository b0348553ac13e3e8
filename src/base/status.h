// Status and Result<T>: how daisy reports failures of the environment (files, peers, user
// input). Bugs in daisy itself are not Statuses: they are DAISY_CHECK failures (check.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace daisy {

enum class StatusCode : uint8_t {
  kOk = 0,
  kInvalidArgument,  // the caller's input is wrong (flags, request, arguments)
  kDataLoss,         // a file or frame is malformed, truncated or corrupt
  kNotFound,
  kOutOfRange,       // a value is outside what daisy supports (sizes, counts, positions)
  kUnimplemented,    // valid input that daisy does not handle (yet)
  kUnavailable,      // a peer or resource cannot be reached right now
  kResourceExhausted,
  kInternal,
  kIoError,
  kPermissionDenied,  // authentication failed
  kDeadlineExceeded,  // a bounded wait ran out (a silent peer)
};

const char* StatusCodeName(StatusCode code);

// A cheap value: OK carries no allocation. Thread-compatible.
class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }

  // Returns a copy with `context` prepended: "context: message". Use it to say what was being
  // done when a lower layer failed.
  Status With(const std::string& context) const;

  // "DataLoss: model.gguf: truncated at offset 24 ..."; "OK" when ok.
  std::string ToString() const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

// printf-style constructors: InvalidArgument("bad --layers %d", n).
Status InvalidArgument(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
Status DataLoss(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
Status NotFound(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
Status OutOfRange(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
Status Unimplemented(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
Status Unavailable(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
Status ResourceExhausted(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
Status Internal(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
Status IoError(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
Status PermissionDenied(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
Status DeadlineExceeded(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

// Either a T or a non-OK Status. g++ 12 has no std::expected in C++20 mode.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Status status) : status_(std::move(status)) {  // NOLINT: implicit by design
    if (status_.ok()) status_ = Status(StatusCode::kInternal, "Result built from an OK Status");
  }

  bool ok() const { return value_.has_value(); }
  const Status& status() const { return status_; }

  // Precondition: ok(). Checked: taking the value of a failed Result is a bug.
  T& value() & { return Checked(); }
  const T& value() const& { return const_cast<Result*>(this)->Checked(); }
  T&& value() && { return std::move(Checked()); }
  T* operator->() { return &Checked(); }
  const T* operator->() const { return &const_cast<Result*>(this)->Checked(); }
  T& operator*() & { return Checked(); }
  const T& operator*() const& { return const_cast<Result*>(this)->Checked(); }

 private:
  T& Checked();
  std::optional<T> value_;
  Status status_;
};

[[noreturn]] void DieOnBadResultAccess(const Status& status);

template <typename T>
T& Result<T>::Checked() {
  if (!value_.has_value()) DieOnBadResultAccess(status_);
  return *value_;
}

}  // namespace daisy

// Returns early from the enclosing function when `expr` (a Status) is not OK.
#define DAISY_RETURN_IF_ERROR(expr)            \
  do {                                         \
    ::daisy::Status _daisy_status = (expr);    \
    if (!_daisy_status.ok()) return _daisy_status; \
  } while (0)

#define DAISY_CONCAT_INNER(a, b) a##b
#define DAISY_CONCAT(a, b) DAISY_CONCAT_INNER(a, b)

// DAISY_ASSIGN_OR_RETURN(auto x, FunctionReturningResult()); returns the Status on failure.
#define DAISY_ASSIGN_OR_RETURN(lhs, expr) \
  DAISY_ASSIGN_OR_RETURN_IMPL(DAISY_CONCAT(_daisy_result_, __LINE__), lhs, expr)
#define DAISY_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                                \
  if (!tmp.ok()) return tmp.status();               \
  lhs = std::move(tmp).value()
