#include "http/request.h"

#include <algorithm>
#include <cstring>

#include "base/strings.h"

namespace daisy::http {

namespace {

bool IsTokenChar(unsigned char c) {
  if (c >= '0' && c <= '9') return true;
  if ((c | 0x20) >= 'a' && (c | 0x20) <= 'z') return true;
  return std::strchr("!#$%&'*+-.^_`|~", c) != nullptr && c != 0;
}

bool IsToken(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return IsTokenChar(static_cast<unsigned char>(c)); });
}

bool EqualsNoCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    char x = a[i], y = b[i];
    if (x >= 'A' && x <= 'Z') x = static_cast<char>(x - 'A' + 'a');
    if (y >= 'A' && y <= 'Z') y = static_cast<char>(y - 'A' + 'a');
    if (x != y) return false;
  }
  return true;
}

std::string_view TrimOws(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// Splits a comma-separated header value into its trimmed, non-empty elements.
std::vector<std::string_view> Elements(std::string_view v) {
  std::vector<std::string_view> out;
  while (true) {
    const size_t comma = v.find(',');
    std::string_view e = TrimOws(v.substr(0, comma));
    if (!e.empty()) out.push_back(e);
    if (comma == std::string_view::npos) break;
    v.remove_prefix(comma + 1);
  }
  return out;
}

constexpr size_t kMaxChunkLine = 1024;  // a chunk-size line with its extensions
constexpr int kMaxLeadingEmptyLines = 8;

}  // namespace

std::optional<std::string_view> Request::Header(std::string_view name) const {
  for (const auto& [k, v] : headers) {
    if (EqualsNoCase(k, name)) return std::string_view(v);
  }
  return std::nullopt;
}

bool Request::KeepAlive() const {
  bool close = false, keep = false;
  for (const auto& [k, v] : headers) {
    if (!EqualsNoCase(k, "connection")) continue;
    for (std::string_view e : Elements(v)) {
      close |= EqualsNoCase(e, "close");
      keep |= EqualsNoCase(e, "keep-alive");
    }
  }
  if (close) return false;
  return minor_version >= 1 || keep;
}

void RequestParser::Reset() {
  state_ = State::kNeedMore;
  phase_ = Phase::kRequestLine;
  req_ = Request{};
  error_ = ParseError{};
  line_.clear();
  header_bytes_ = 0;
  body_left_ = 0;
  expect_continue_ = false;
  started_ = false;
}

RequestParser::State RequestParser::Fail(int status, std::string message) {
  error_ = {status, std::move(message)};
  state_ = State::kError;
  return state_;
}

RequestParser::State RequestParser::Feed(std::string_view data, size_t* consumed) {
  size_t used = 0;
  while (state_ == State::kNeedMore && used < data.size()) {
    std::string_view rest = data.substr(used);
    if (phase_ == Phase::kBody || phase_ == Phase::kChunkData) {
      const size_t n = static_cast<size_t>(std::min<uint64_t>(body_left_, rest.size()));
      req_.body.append(rest.data(), n);
      used += n;
      body_left_ -= n;
      if (body_left_ == 0) {
        if (phase_ == Phase::kBody) {
          phase_ = Phase::kDone;
          state_ = State::kDone;
        } else {
          phase_ = Phase::kChunkDataEnd;
        }
      }
      continue;
    }
    // A line: the request line, a header, a chunk-size line, the CR LF after a chunk, a trailer.
    started_ = true;
    const size_t nl = rest.find('\n');
    const size_t take = nl == std::string_view::npos ? rest.size() : nl + 1;
    const bool in_head = phase_ == Phase::kRequestLine || phase_ == Phase::kHeaders || phase_ == Phase::kTrailers;
    if (in_head) {
      header_bytes_ += take;
      if (phase_ == Phase::kRequestLine && line_.size() + take > limits_.max_target_bytes + 64) {
        Fail(414, StrFormat("the request line is longer than %zu bytes", limits_.max_target_bytes + 64));
        break;
      }
      if (header_bytes_ > limits_.max_header_bytes) {
        Fail(431, StrFormat("the request's headers are larger than %zu bytes", limits_.max_header_bytes));
        break;
      }
    } else if (line_.size() + take > kMaxChunkLine) {
      Fail(400, "a chunk-size line of the chunked body is too long");
      break;
    }
    line_.append(rest.data(), take);
    used += take;
    if (nl == std::string_view::npos) break;
    line_.pop_back();  // '\n'
    if (!line_.empty() && line_.back() == '\r') line_.pop_back();
    State s = State::kNeedMore;
    switch (phase_) {
      case Phase::kRequestLine: s = RequestLine(); break;
      case Phase::kHeaders: s = HeaderLine(); break;
      case Phase::kChunkSize: s = ChunkSizeLine(); break;
      case Phase::kChunkDataEnd:
        if (!line_.empty()) {
          s = Fail(400, "a chunk of the chunked body is longer than its size says");
          break;
        }
        phase_ = Phase::kChunkSize;
        break;
      case Phase::kTrailers: s = TrailerLine(); break;
      default: break;
    }
    line_.clear();
    if (s != State::kNeedMore) break;
  }
  *consumed = used;
  return state_;
}

RequestParser::State RequestParser::RequestLine() {
  if (line_.empty()) {
    // RFC 9112 2.2: empty lines before the request line are ignored (a few).
    if (header_bytes_ > kMaxLeadingEmptyLines * 2) return Fail(400, "the request does not start with a request line");
    return State::kNeedMore;
  }
  const size_t sp1 = line_.find(' ');
  const size_t sp2 = sp1 == std::string::npos ? std::string::npos : line_.find(' ', sp1 + 1);
  if (sp2 == std::string::npos || line_.find(' ', sp2 + 1) != std::string::npos) {
    return Fail(400, "malformed request line (want: METHOD target HTTP/1.1)");
  }
  const std::string_view method(line_.data(), sp1);
  const std::string_view target(line_.data() + sp1 + 1, sp2 - sp1 - 1);
  const std::string_view version(line_.data() + sp2 + 1, line_.size() - sp2 - 1);
  if (!IsToken(method)) return Fail(400, "malformed request line: the method is not a token");
  if (target.empty()) return Fail(400, "malformed request line: empty request target");
  if (target.size() > limits_.max_target_bytes) {
    return Fail(414, StrFormat("the request target is longer than %zu bytes", limits_.max_target_bytes));
  }
  for (char c : target) {
    const auto u = static_cast<unsigned char>(c);
    if (u <= 0x20 || u == 0x7f) return Fail(400, "malformed request line: a control character in the target");
  }
  if (version.size() != 8 || version.substr(0, 5) != "HTTP/" || version[6] != '.' || version[5] < '0' ||
      version[5] > '9' || version[7] < '0' || version[7] > '9') {
    return Fail(400, "malformed request line: the version is not HTTP/1.x");
  }
  if (version[5] != '1') return Fail(505, "only HTTP/1.0 and HTTP/1.1 are served");
  req_.method = std::string(method);
  req_.target = std::string(target);
  req_.minor_version = version[7] - '0';
  std::string_view t = target;
  std::string origin;  // the origin-form: path and query
  if (t.front() != '/' && t != "*") {
    // absolute-form ("http://host:port/path"), as sent to proxies: the path is what counts here.
    const size_t scheme = t.find("://");
    if (scheme == std::string_view::npos || !IsToken(t.substr(0, scheme))) {
      return Fail(400, "malformed request target (want a path starting with '/')");
    }
    t.remove_prefix(scheme + 3);
    const size_t slash = t.find_first_of("/?");
    if (slash == std::string_view::npos) t = {};
    else t.remove_prefix(slash);
    if (t.empty() || t.front() == '?') origin = "/";
  }
  origin.append(t.data(), t.size());
  const size_t q = origin.find('?');
  req_.path = origin.substr(0, q);
  if (q != std::string::npos) req_.query = origin.substr(q + 1);
  phase_ = Phase::kHeaders;
  return State::kNeedMore;
}

RequestParser::State RequestParser::HeaderLine() {
  if (line_.empty()) return HeadersDone();
  if (line_.front() == ' ' || line_.front() == '\t') {
    return Fail(400, "malformed header: a continuation line (obsolete line folding is not accepted)");
  }
  const size_t colon = line_.find(':');
  if (colon == std::string::npos) return Fail(400, "malformed header line (no ':')");
  const std::string_view name(line_.data(), colon);
  if (!IsToken(name)) return Fail(400, "malformed header: the name is not a token");
  const std::string_view value = TrimOws(std::string_view(line_).substr(colon + 1));
  for (char c : value) {
    const auto u = static_cast<unsigned char>(c);
    if ((u < 0x20 && u != '\t') || u == 0x7f) return Fail(400, "malformed header: a control character in a value");
  }
  if (req_.headers.size() >= limits_.max_headers) {
    return Fail(431, StrFormat("the request has more than %zu headers", limits_.max_headers));
  }
  req_.headers.emplace_back(std::string(name), std::string(value));
  return State::kNeedMore;
}

RequestParser::State RequestParser::HeadersDone() {
  std::optional<uint64_t> length;
  bool chunked = false, has_te = false;
  for (const auto& [k, v] : req_.headers) {
    if (EqualsNoCase(k, "content-length")) {
      for (std::string_view e : Elements(v)) {
        if (e.size() > 19 || !std::all_of(e.begin(), e.end(), [](char c) { return c >= '0' && c <= '9'; })) {
          return Fail(400, "malformed Content-Length");
        }
        const uint64_t n = std::stoull(std::string(e));
        if (length && *length != n) return Fail(400, "conflicting Content-Length headers");
        length = n;
      }
      if (!length) return Fail(400, "malformed Content-Length");
    } else if (EqualsNoCase(k, "transfer-encoding")) {
      has_te = true;
      const std::vector<std::string_view> codings = Elements(v);
      for (size_t i = 0; i < codings.size(); ++i) {
        if (!EqualsNoCase(codings[i], "chunked") || chunked) {
          return Fail(501, "unsupported Transfer-Encoding (only chunked is accepted)");
        }
        chunked = true;
      }
    } else if (EqualsNoCase(k, "expect")) {
      if (!EqualsNoCase(TrimOws(v), "100-continue")) return Fail(417, "unsupported Expect (only 100-continue)");
      expect_continue_ = req_.minor_version >= 1;
    }
  }
  if (has_te && length) return Fail(400, "both Transfer-Encoding and Content-Length were sent");
  if (has_te && req_.minor_version == 0) return Fail(400, "Transfer-Encoding in an HTTP/1.0 request");
  if (has_te && !chunked) return Fail(400, "malformed Transfer-Encoding");
  if (chunked) {
    phase_ = Phase::kChunkSize;
    return State::kNeedMore;
  }
  if (length.value_or(0) > limits_.max_body_bytes) {
    return Fail(413, StrFormat("the request body is larger than %zu bytes", limits_.max_body_bytes));
  }
  if (length.value_or(0) == 0) {
    expect_continue_ = false;
    phase_ = Phase::kDone;
    state_ = State::kDone;
    return state_;
  }
  body_left_ = *length;
  req_.body.reserve(static_cast<size_t>(*length));
  phase_ = Phase::kBody;
  return State::kNeedMore;
}

RequestParser::State RequestParser::ChunkSizeLine() {
  std::string_view l(line_);
  const size_t semi = l.find(';');
  const std::string_view size = TrimOws(l.substr(0, semi));
  if (size.empty() || size.size() > 15) return Fail(400, "malformed chunk size in the chunked body");
  uint64_t n = 0;
  for (char c : size) {
    int d = -1;
    if (c >= '0' && c <= '9') d = c - '0';
    if ((c | 0x20) >= 'a' && (c | 0x20) <= 'f') d = (c | 0x20) - 'a' + 10;
    if (d < 0) return Fail(400, "malformed chunk size in the chunked body");
    n = n * 16 + static_cast<uint64_t>(d);
  }
  if (n > limits_.max_body_bytes - req_.body.size()) {
    return Fail(413, StrFormat("the request body is larger than %zu bytes", limits_.max_body_bytes));
  }
  if (n == 0) {
    phase_ = Phase::kTrailers;
    return State::kNeedMore;
  }
  body_left_ = n;
  phase_ = Phase::kChunkData;
  return State::kNeedMore;
}

RequestParser::State RequestParser::TrailerLine() {
  if (!line_.empty()) return State::kNeedMore;  // trailers are read (bounded with the headers) and dropped
  phase_ = Phase::kDone;
  state_ = State::kDone;
  return state_;
}

std::string_view ReasonPhrase(int status) {
  switch (status) {
    case 100: return "Continue";
    case 200: return "OK";
    case 204: return "No Content";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 409: return "Conflict";
    case 413: return "Content Too Large";
    case 414: return "URI Too Long";
    case 417: return "Expectation Failed";
    case 422: return "Unprocessable Content";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    case 504: return "Gateway Timeout";
    case 505: return "HTTP Version Not Supported";
    default: return "";
  }
}

}  // namespace daisy::http
