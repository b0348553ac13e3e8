// HTTP/1.1 requests as the server's parser reads them off a connection: the first byte picks the
// size of the pieces the rest arrives in (one byte at a time up to whole). The parser must never
// crash, and a request split into pieces must parse exactly as it does whole (same state, same
// request and bytes consumed, or the same error): the event loop feeds it whatever recv returns.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "http/request.h"

namespace {

using daisy::http::RequestParser;

struct Outcome {
  RequestParser::State state;
  size_t consumed;
};

Outcome Run(RequestParser& p, std::string_view in, size_t step) {
  size_t total = 0;
  while (total < in.size()) {
    const std::string_view piece = in.substr(total, step);
    size_t used = 0;
    const RequestParser::State s = p.Feed(piece, &used);
    if (used > piece.size()) std::abort();
    total += used;
    if (s != RequestParser::State::kNeedMore) return {s, total};
    if (used < piece.size()) std::abort();  // kNeedMore takes every byte it is given
  }
  return {p.state(), total};
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1 || size > 1 << 16) return 0;
  const size_t step = 1 + data[0] % 64;
  const std::string_view in(reinterpret_cast<const char*>(data + 1), size - 1);
  daisy::http::Limits limits;
  limits.max_body_bytes = 4096;  // small limits, so the fuzzer reaches them
  limits.max_header_bytes = 2048;
  limits.max_target_bytes = 256;
  limits.max_headers = 16;
  RequestParser whole(limits), split(limits);
  const Outcome a = Run(whole, in, in.size() + 1), b = Run(split, in, step);
  if (a.state != b.state) std::abort();
  if (a.state == RequestParser::State::kDone && a.consumed != b.consumed) std::abort();
  if (a.state == RequestParser::State::kDone) {
    const auto &x = whole.request(), &y = split.request();
    if (x.method != y.method || x.path != y.path || x.query != y.query || x.body != y.body ||
        x.headers != y.headers || x.body.size() > limits.max_body_bytes) {
      std::abort();
    }
    // A pipelined next request parses from where this one ended.
    whole.Reset();
    Run(whole, in.substr(a.consumed), step);
  } else if (a.state == RequestParser::State::kError) {
    if (whole.error().status != split.error().status || whole.error().message != split.error().message) std::abort();
  }
  return 0;
}
