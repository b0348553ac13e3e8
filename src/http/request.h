// HTTP/1.1 requests: an incremental parser that knows no sockets (RFC 9112's message syntax, the
// part a JSON API server needs). Bytes are fed as they arrive; the parser says when a request is
// whole, or which 4xx/5xx it deserves. Every size is bounded before anything is kept: the request
// line, the header section, the number of headers, the body (Content-Length checked before one
// body byte is read), chunk sizes and trailers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace daisy::http {

struct Limits {
  size_t max_target_bytes = 8 << 10;    // the request-target (path and query): 414 beyond
  size_t max_header_bytes = 64 << 10;   // request line and headers together: 431 beyond
  size_t max_headers = 128;             // 431 beyond
  size_t max_body_bytes = size_t{8} << 20;  // 413 beyond
};

struct Request {
  std::string method;  // as sent ("GET", "POST", ...)
  std::string target;  // as sent: "/v1/models?x=1"
  std::string path;    // target up to '?' (an absolute-form target's path: "http://h/p" -> "/p")
  std::string query;   // after '?', undecoded
  int minor_version = 1;  // HTTP/1.<minor>
  std::vector<std::pair<std::string, std::string>> headers;  // in order, names as sent
  std::string body;       // de-chunked
  // Set by the server for the handler: whether the client is still connected (a handler that
  // works long before answering stops when it is gone).
  std::function<bool()> client_alive;

  // The first header of that name (case-insensitive), or nullopt.
  std::optional<std::string_view> Header(std::string_view name) const;
  // Whether the connection stays open after the answer (HTTP/1.1 unless "Connection: close";
  // HTTP/1.0 only with "Connection: keep-alive").
  bool KeepAlive() const;
};

// A request the parser refuses: the status to answer with and why.
struct ParseError {
  int status = 400;
  std::string message;
};

class RequestParser {
 public:
  explicit RequestParser(Limits limits = {}) : limits_(limits) {}

  enum class State {
    kNeedMore,  // feed more bytes
    kDone,      // request() is whole; bytes after it were not consumed
    kError,     // error() says why; the connection must be closed after answering it
  };
  // Consumes bytes from `data` (fewer than all once the request is whole: the rest belong to the
  // next request on the connection) and stores how many in *consumed (after an error: how many
  // were read before it, which depends on how the bytes were split).
  State Feed(std::string_view data, size_t* consumed);
  State state() const { return state_; }
  const Request& request() const { return req_; }
  Request& request() { return req_; }
  const ParseError& error() const { return error_; }
  // True once the headers are read and the body is not: when the client sent
  // "Expect: 100-continue", the server says "100 Continue" at that point (once).
  bool WantsContinue() const { return expect_continue_ && phase_ >= Phase::kBody && state_ == State::kNeedMore; }
  void ContinueSent() { expect_continue_ = false; }
  // Whether any byte of a request has arrived (an idle keep-alive connection has none).
  bool Started() const { return started_; }
  // Whether the request line and headers are all read.
  bool HeadersRead() const { return phase_ >= Phase::kBody; }
  // Ready for the next request on the same connection.
  void Reset();

 private:
  enum class Phase { kRequestLine, kHeaders, kBody, kChunkSize, kChunkData, kChunkDataEnd, kTrailers, kDone };
  State Fail(int status, std::string message);
  // A whole line (without CR LF) is in line_; handle it.
  State RequestLine();
  State HeaderLine();
  State HeadersDone();
  State ChunkSizeLine();
  State TrailerLine();

  Limits limits_;
  State state_ = State::kNeedMore;
  Phase phase_ = Phase::kRequestLine;
  Request req_;
  ParseError error_;
  std::string line_;
  size_t header_bytes_ = 0;
  uint64_t body_left_ = 0;  // Content-Length or the current chunk's bytes not read yet
  bool expect_continue_ = false;
  bool started_ = false;
};

// "200" -> "OK" and so on, for the status line ("" for codes it does not know).
std::string_view ReasonPhrase(int status);

}  // namespace daisy::http
