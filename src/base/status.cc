#include "base/status.h"

#include <cstdarg>
#include <cstdio>
#include <cstdlib>

#include "base/strings.h"

namespace daisy {

const char* StatusCodeName(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return "OK";
    case StatusCode::kInvalidArgument: return "InvalidArgument";
    case StatusCode::kDataLoss: return "DataLoss";
    case StatusCode::kNotFound: return "NotFound";
    case StatusCode::kOutOfRange: return "OutOfRange";
    case StatusCode::kUnimplemented: return "Unimplemented";
    case StatusCode::kUnavailable: return "Unavailable";
    case StatusCode::kPermissionDenied: return "PermissionDenied";
    case StatusCode::kDeadlineExceeded: return "DeadlineExceeded";
    case StatusCode::kResourceExhausted: return "ResourceExhausted";
    case StatusCode::kInternal: return "Internal";
    case StatusCode::kIoError: return "IoError";
  }
  return "Unknown";
}

Status Status::With(const std::string& context) const {
  if (ok()) return *this;
  return Status(code_, context + ": " + message_);
}

std::string Status::ToString() const {
  if (ok()) return "OK";
  return std::string(StatusCodeName(code_)) + ": " + message_;
}

void DieOnBadResultAccess(const Status& status) {
  std::fprintf(stderr, "daisy: value() of a failed Result: %s\n", status.ToString().c_str());
  std::abort();
}

#define DAISY_DEFINE_STATUS_CTOR(Name)          \
  Status Name(const char* fmt, ...) {           \
    va_list ap;                                 \
    va_start(ap, fmt);                          \
    std::string message = VStrFormat(fmt, ap);  \
    va_end(ap);                                 \
    return Status(StatusCode::k##Name, std::move(message)); \
  }

DAISY_DEFINE_STATUS_CTOR(InvalidArgument)
DAISY_DEFINE_STATUS_CTOR(DataLoss)
DAISY_DEFINE_STATUS_CTOR(NotFound)
DAISY_DEFINE_STATUS_CTOR(OutOfRange)
DAISY_DEFINE_STATUS_CTOR(Unimplemented)
DAISY_DEFINE_STATUS_CTOR(Unavailable)
DAISY_DEFINE_STATUS_CTOR(PermissionDenied)
DAISY_DEFINE_STATUS_CTOR(DeadlineExceeded)
DAISY_DEFINE_STATUS_CTOR(ResourceExhausted)
DAISY_DEFINE_STATUS_CTOR(Internal)
DAISY_DEFINE_STATUS_CTOR(IoError)

#undef DAISY_DEFINE_STATUS_CTOR

}  // namespace daisy
