#include "http/request.h"

#include <gtest/gtest.h>

#include <string>

namespace daisy::http {
namespace {

using State = RequestParser::State;

// Feeds `text` in pieces of `step` bytes; returns the final state and the bytes consumed.
State FeedInSteps(RequestParser& p, const std::string& text, size_t step, size_t* total) {
  *total = 0;
  State s = State::kNeedMore;
  while (*total < text.size() && s == State::kNeedMore) {
    const size_t n = std::min(step, text.size() - *total);
    size_t used = 0;
    s = p.Feed(std::string_view(text).substr(*total, n), &used);
    *total += used;
    if (used < n) break;
  }
  return s;
}

TEST(RequestParser, PostWithBodyAtEverySplit) {
  const std::string req =
      "POST /v1/completions?x=1 HTTP/1.1\r\nHost: a\r\nContent-Type: application/json\r\n"
      "Content-Length: 13\r\n\r\n{\"prompt\":\"h\"}";
  for (size_t step : {1, 2, 3, 7, 64, 4096}) {
    RequestParser p;
    size_t used = 0;
    ASSERT_EQ(FeedInSteps(p, req + "GET /next", step, &used), State::kDone) << step;
    EXPECT_EQ(used, req.size() - 1) << step;  // the body is 13 bytes: "{...}" without the last '}'
    EXPECT_EQ(p.request().method, "POST");
    EXPECT_EQ(p.request().target, "/v1/completions?x=1");
    EXPECT_EQ(p.request().path, "/v1/completions");
    EXPECT_EQ(p.request().query, "x=1");
    EXPECT_EQ(p.request().body, "{\"prompt\":\"h\"");
    EXPECT_EQ(p.request().Header("content-type").value_or(""), "application/json");
    EXPECT_TRUE(p.request().KeepAlive());
  }
}

TEST(RequestParser, PipelinedRequestsOneAfterTheOther) {
  const std::string two = "GET /health HTTP/1.1\r\n\r\nGET /metrics HTTP/1.1\r\nConnection: close\r\n\r\n";
  RequestParser p;
  size_t used = 0;
  ASSERT_EQ(p.Feed(two, &used), State::kDone);
  EXPECT_EQ(p.request().path, "/health");
  p.Reset();
  size_t used2 = 0;
  ASSERT_EQ(p.Feed(std::string_view(two).substr(used), &used2), State::kDone);
  EXPECT_EQ(p.request().path, "/metrics");
  EXPECT_FALSE(p.request().KeepAlive());
  EXPECT_EQ(used + used2, two.size());
}

TEST(RequestParser, ChunkedBodyWithExtensionsAndTrailers) {
  const std::string req =
      "POST /p HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5;ext=1\r\nhello\r\n7\r\n, world\r\n0\r\nX-T: 1\r\n\r\n";
  for (size_t step : {1, 5, 1000}) {
    RequestParser p;
    size_t used = 0;
    ASSERT_EQ(FeedInSteps(p, req, step, &used), State::kDone) << step;
    EXPECT_EQ(used, req.size());
    EXPECT_EQ(p.request().body, "hello, world");
  }
}

TEST(RequestParser, Http10AndKeepAlive) {
  RequestParser p;
  size_t used = 0;
  ASSERT_EQ(p.Feed("GET / HTTP/1.0\r\n\r\n", &used), State::kDone);
  EXPECT_EQ(p.request().minor_version, 0);
  EXPECT_FALSE(p.request().KeepAlive());
  p.Reset();
  ASSERT_EQ(p.Feed("GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n", &used), State::kDone);
  EXPECT_TRUE(p.request().KeepAlive());
  p.Reset();
  ASSERT_EQ(p.Feed("GET / HTTP/1.1\r\nConnection: foo, close\r\n\r\n", &used), State::kDone);
  EXPECT_FALSE(p.request().KeepAlive());
}

TEST(RequestParser, BareLineFeedsAndLeadingEmptyLinesAndAbsoluteForm) {
  RequestParser p;
  size_t used = 0;
  ASSERT_EQ(p.Feed("\r\n\nGET http://example:80/v1/models?a HTTP/1.1\nHost: x\n\n", &used), State::kDone);
  EXPECT_EQ(p.request().path, "/v1/models");
  EXPECT_EQ(p.request().query, "a");
  p.Reset();
  ASSERT_EQ(p.Feed("GET http://example HTTP/1.1\r\n\r\n", &used), State::kDone);
  EXPECT_EQ(p.request().path, "/");
}

TEST(RequestParser, ExpectContinueOnceHeadersAreRead) {
  RequestParser p;
  size_t used = 0;
  ASSERT_EQ(p.Feed("POST /p HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n", &used),
            State::kNeedMore);
  EXPECT_TRUE(p.HeadersRead());
  EXPECT_TRUE(p.WantsContinue());
  p.ContinueSent();
  EXPECT_FALSE(p.WantsContinue());
  ASSERT_EQ(p.Feed("ok", &used), State::kDone);
  EXPECT_EQ(p.request().body, "ok");
}

struct Bad {
  std::string text;
  int status;
  std::string says;
};

TEST(RequestParser, RefusesWithTheRightStatus) {
  Limits small;
  small.max_body_bytes = 100;
  small.max_header_bytes = 300;
  small.max_headers = 4;
  small.max_target_bytes = 50;
  const std::vector<Bad> cases = {
      {"GET\r\n\r\n", 400, "malformed request line"},
      {"GET  / HTTP/1.1\r\n\r\n", 400, "malformed request line"},
      {"G(T / HTTP/1.1\r\n\r\n", 400, "method"},
      {"GET / HTTP/2.0\r\n\r\n", 505, "HTTP/1.0 and HTTP/1.1"},
      {"GET / HTXP/1.1\r\n\r\n", 400, "version"},
      {"GET nothing HTTP/1.1\r\n\r\n", 400, "target"},
      {"GET /" + std::string(60, 'a') + " HTTP/1.1\r\n\r\n", 414, "target"},
      {"GET /" + std::string(400, 'a'), 414, "request line"},
      {"GET / HTTP/1.1\r\nX: " + std::string(400, 'v') + "\r\n\r\n", 431, "headers"},
      {"GET / HTTP/1.1\r\nA: 1\r\nB: 1\r\nC: 1\r\nD: 1\r\nE: 1\r\n\r\n", 431, "more than 4 headers"},
      {"GET / HTTP/1.1\r\nA: 1\r\n folded\r\n\r\n", 400, "folding"},
      {"GET / HTTP/1.1\r\nNoColon\r\n\r\n", 400, "no ':'"},
      {"GET / HTTP/1.1\r\nBad Name: 1\r\n\r\n", 400, "name"},
      {"GET / HTTP/1.1\r\nA: x\x01y\r\n\r\n", 400, "control character"},
      {"POST / HTTP/1.1\r\nContent-Length: 101\r\n\r\n", 413, "larger than 100 bytes"},
      {"POST / HTTP/1.1\r\nContent-Length: 99999999999999999999999\r\n\r\n", 400, "Content-Length"},
      {"POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n", 400, "Content-Length"},
      {"POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", 400, "conflicting"},
      {"POST / HTTP/1.1\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n", 400, "both"},
      {"POST / HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", 501, "Transfer-Encoding"},
      {"POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", 400, "HTTP/1.0"},
      {"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", 400, "chunk size"},
      {"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n65\r\n", 413, "larger than 100"},
      {"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabc\r\n", 400, "longer than its size"},
      {"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n" + std::string(2000, '1'), 400, "too long"},
      {"POST / HTTP/1.1\r\nExpect: something\r\n\r\n", 417, "Expect"},
      {"\r\n\r\n\r\n\r\n\r\n\r\n\r\n\r\n\r\n\r\n", 400, "request line"},
  };
  for (const Bad& b : cases) {
    RequestParser p(small);
    size_t used = 0;
    ASSERT_EQ(FeedInSteps(p, b.text, 3, &used), State::kError) << b.text;
    EXPECT_EQ(p.error().status, b.status) << b.text;
    EXPECT_NE(p.error().message.find(b.says), std::string::npos) << b.text << " -> " << p.error().message;
  }
}

// Found by fuzz_http: the answer must not depend on how the bytes were split by the network.
TEST(RequestParser, TheSameErrorWhateverTheSplit) {
  Limits small;
  small.max_header_bytes = 300;
  small.max_target_bytes = 50;
  const std::string text = "GET /" + std::string(400, 'a');
  for (size_t step : {1, 3, 1000}) {
    RequestParser p(small);
    size_t used = 99;
    ASSERT_EQ(FeedInSteps(p, text, step, &used), State::kError);
    EXPECT_EQ(p.error().status, 414) << step;
  }
  RequestParser p;
  size_t used = 99;
  ASSERT_EQ(p.Feed("GET / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nab\r\n", &used), State::kError);
  EXPECT_EQ(used, 53u);  // set on an error too
}

TEST(RequestParser, ChunkedBodiesAddUpAgainstTheLimit) {
  Limits small;
  small.max_body_bytes = 10;
  RequestParser p(small);
  size_t used = 0;
  EXPECT_EQ(p.Feed("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n6\r\nabcdef\r\n6\r\n", &used), State::kError);
  EXPECT_EQ(p.error().status, 413);
}

TEST(RequestParser, IdleUntilTheFirstByte) {
  RequestParser p;
  EXPECT_FALSE(p.Started());
  size_t used = 0;
  EXPECT_EQ(p.Feed("G", &used), State::kNeedMore);
  EXPECT_TRUE(p.Started());
  EXPECT_FALSE(p.HeadersRead());
  p.Reset();
  EXPECT_FALSE(p.Started());
}

TEST(ReasonPhrase, KnownAndUnknown) {
  EXPECT_EQ(ReasonPhrase(503), "Service Unavailable");
  EXPECT_EQ(ReasonPhrase(299), "");
}

}  // namespace
}  // namespace daisy::http
