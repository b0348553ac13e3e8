// The HTTP server over real loopback sockets: keep-alive and pipelining, streams, deadlines,
// limits, and a thousand idle, slow and half-open connections beside a real request.
#include "http/server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace daisy::http {
namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

int Dial(uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd < 0 || ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    if (fd >= 0) ::close(fd);
    return -1;
  }
  timeval tv{5, 0};  // no read in these tests waits longer
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  return fd;
}

void Send(int fd, const std::string& s) { ASSERT_EQ(::send(fd, s.data(), s.size(), MSG_NOSIGNAL), static_cast<ssize_t>(s.size())); }

struct Reply {
  int status = 0;
  std::string head, body;
  bool closed = false;  // the server closed the connection after it
};

// Reads one response (Content-Length or chunked body); status 0 when the connection ended first.
Reply Read(int fd, std::string& buffered) {
  Reply r;
  char buf[4096];
  auto fill = [&]() {
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) return false;
    buffered.append(buf, static_cast<size_t>(n));
    return true;
  };
  size_t end;
  while ((end = buffered.find("\r\n\r\n")) == std::string::npos) {
    if (!fill()) return r;
  }
  r.head = buffered.substr(0, end + 2);
  buffered.erase(0, end + 4);
  r.status = std::stoi(r.head.substr(9, 3));
  if (r.status == 100) return r;
  const size_t cl = r.head.find("Content-Length: ");
  if (cl != std::string::npos) {
    const size_t len = std::stoul(r.head.substr(cl + 16));
    while (buffered.size() < len) {
      if (!fill()) return r;
    }
    r.body = buffered.substr(0, len);
    buffered.erase(0, len);
  } else if (r.head.find("Transfer-Encoding: chunked") != std::string::npos) {
    while (true) {
      size_t nl;
      while ((nl = buffered.find("\r\n")) == std::string::npos) {
        if (!fill()) return r;
      }
      const size_t size = std::stoul(buffered.substr(0, nl), nullptr, 16);
      while (buffered.size() < nl + 2 + size + 2) {
        if (!fill()) return r;
      }
      r.body += buffered.substr(nl + 2, size);
      buffered.erase(0, nl + 2 + size + 2);
      if (size == 0) break;
    }
  }
  if (r.head.find("Connection: close") != std::string::npos) {
    r.closed = !fill();
  }
  return r;
}

Reply Exchange(uint16_t port, const std::string& request) {
  const int fd = Dial(port);
  std::string b;
  Send(fd, request);
  Reply r = Read(fd, b);
  ::close(fd);
  return r;
}

ServerOptions Options() {
  ServerOptions o;
  o.workers = 2;
  o.quick_workers = 1;
  o.error_body = [](int status, const std::string& m) { return "{\"status\":" + std::to_string(status) + ",\"m\":\"" + m + "\"}"; };
  return o;
}

std::unique_ptr<Server> Make(ServerOptions o) {
  auto s = Server::Create(std::move(o));
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  Server& srv = **s;
  srv.Route("GET", "/hello", [](const Request& r, Response& res) { res.body = "hello " + r.query; }, true);
  srv.Route("POST", "/echo", [](const Request& r, Response& res) { res.body = r.body; });
  srv.Route("GET", "/throw", [](const Request&, Response&) { throw std::runtime_error("boom"); });
  srv.Fallback([](const Request& r, Response& res) {
    res.status = 404;
    res.body = "none: " + r.path;
  });
  return std::move(*s);
}

TEST(HttpServer, KeepAlivePipeliningAndErrors) {
  auto s = Make(Options());
  ASSERT_TRUE(s->Start().ok());
  const int fd = Dial(s->port());
  std::string b;
  Send(fd, "GET /hello?a HTTP/1.1\r\n\r\nPOST /echo HTTP/1.1\r\nContent-Length: 5\r\n\r\nabcdeGET /nope HTTP/1.1\r\n\r\n");
  Reply r1 = Read(fd, b), r2 = Read(fd, b), r3 = Read(fd, b);
  EXPECT_EQ(r1.status, 200);
  EXPECT_EQ(r1.body, "hello a");
  EXPECT_EQ(r2.body, "abcde");
  EXPECT_EQ(r3.status, 404);
  EXPECT_EQ(r3.body, "none: /nope");
  Send(fd, "GET /throw HTTP/1.1\r\nConnection: close\r\n\r\n");
  Reply r4 = Read(fd, b);
  EXPECT_EQ(r4.status, 500);
  EXPECT_NE(r4.body.find("internal error: boom"), std::string::npos);
  EXPECT_TRUE(r4.closed);
  ::close(fd);
  Reply bad = Exchange(s->port(), "GET / HTTP/3.0\r\n\r\n");
  EXPECT_EQ(bad.status, 505);
  EXPECT_NE(bad.body.find("\"status\":505"), std::string::npos);
  EXPECT_TRUE(bad.closed);
  EXPECT_EQ(s->stats().malformed.load(), 1u);
}

TEST(HttpServer, TooLargeIsAnsweredEvenWhileTheClientKeepsSending) {
  ServerOptions o = Options();
  o.limits.max_body_bytes = 1000;
  auto s = Make(o);
  ASSERT_TRUE(s->Start().ok());
  const int fd = Dial(s->port());
  std::string b;
  Send(fd, "POST /echo HTTP/1.1\r\nContent-Length: 100000\r\n\r\n");
  // The body follows regardless; the server reads and drops it so the 413 is not lost to a reset.
  std::string chunk(20000, 'x');
  for (int i = 0; i < 5; ++i) ::send(fd, chunk.data(), chunk.size(), MSG_NOSIGNAL);
  Reply r = Read(fd, b);
  EXPECT_EQ(r.status, 413);
  EXPECT_NE(r.body.find("larger than 1000 bytes"), std::string::npos);
  ::close(fd);
}

TEST(HttpServer, ExpectContinueAndChunkedRequestBody) {
  auto s = Make(Options());
  ASSERT_TRUE(s->Start().ok());
  const int fd = Dial(s->port());
  std::string b;
  Send(fd, "POST /echo HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\n");
  Reply cont = Read(fd, b);
  EXPECT_EQ(cont.status, 100);
  Send(fd, "xyz");
  EXPECT_EQ(Read(fd, b).body, "xyz");
  Send(fd, "POST /echo HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n");
  EXPECT_EQ(Read(fd, b).body, "abcde");
  ::close(fd);
}

TEST(HttpServer, StreamsChunkedAndSeesTheClientLeave) {
  auto s = Server::Create(Options());
  ASSERT_TRUE(s.ok());
  std::atomic<bool> saw_gone{false};
  (*s)->Route("GET", "/count", [](const Request&, Response& res) {
    res.content_type = "text/event-stream";
    res.stream = [](StreamWriter& w) {
      for (char i = '0'; i < '5'; ++i) w.Write(std::string{'n', i, ';'});
      w.Write("");  // an empty piece is not the end of the body
    };
  });
  (*s)->Route("GET", "/forever", [&saw_gone](const Request&, Response& res) {
    res.stream = [&saw_gone](StreamWriter& w) {
      for (int i = 0; i < 500; ++i) {
        if (!w.Write("tick\n") || !w.Alive()) {
          saw_gone = true;
          return;
        }
        std::this_thread::sleep_for(10ms);
      }
    };
  });
  ASSERT_TRUE((*s)->Start().ok());
  Reply r = Exchange((*s)->port(), "GET /count HTTP/1.1\r\n\r\n");
  EXPECT_EQ(r.status, 200);
  EXPECT_NE(r.head.find("Transfer-Encoding: chunked"), std::string::npos);
  EXPECT_EQ(r.body, "n0;n1;n2;n3;n4;");
  // HTTP/1.0: no chunking, the body ends with the connection.
  const int fd10 = Dial((*s)->port());
  Send(fd10, "GET /count HTTP/1.0\r\n\r\n");
  std::string all;
  char buf[512];
  ssize_t n;
  while ((n = ::recv(fd10, buf, sizeof buf, 0)) > 0) all.append(buf, static_cast<size_t>(n));
  ::close(fd10);
  EXPECT_NE(all.find("\r\n\r\nn0;n1;n2;n3;n4;"), std::string::npos) << all;
  // A client that leaves mid-stream: the handler learns it within a few writes.
  const int fd = Dial((*s)->port());
  Send(fd, "GET /forever HTTP/1.1\r\n\r\n");
  ASSERT_GT(::recv(fd, buf, sizeof buf, 0), 0);
  ::close(fd);
  for (int i = 0; i < 200 && !saw_gone; ++i) std::this_thread::sleep_for(10ms);
  EXPECT_TRUE(saw_gone.load());
}

TEST(HttpServer, AHandlerLearnsThatItsClientLeft) {
  auto s = Server::Create(Options());
  ASSERT_TRUE(s.ok());
  std::atomic<int> seen_gone{0};
  (*s)->Route("GET", "/long", [&seen_gone](const Request& r, Response& res) {
    for (int i = 0; i < 500; ++i) {
      if (!r.client_alive()) {
        seen_gone = i + 1;
        return;
      }
      std::this_thread::sleep_for(10ms);
    }
    res.body = "never";
  });
  ASSERT_TRUE((*s)->Start().ok());
  const int fd = Dial((*s)->port());
  Send(fd, "GET /long HTTP/1.1\r\n\r\n");
  std::this_thread::sleep_for(100ms);
  ::close(fd);
  for (int i = 0; i < 200 && seen_gone == 0; ++i) std::this_thread::sleep_for(10ms);
  EXPECT_GT(seen_gone.load(), 5);    // alive while the client waited
  EXPECT_LT(seen_gone.load(), 100);  // and told within a few checks of its leaving
}

TEST(HttpServer, SlowAndIdleClientsMeetTheirDeadlines) {
  ServerOptions o = Options();
  o.header_timeout = 300ms;
  o.body_timeout = 600ms;
  o.idle_timeout = 400ms;
  auto s = Make(o);
  ASSERT_TRUE(s->Start().ok());
  const int slow_head = Dial(s->port()), slow_body = Dial(s->port()), idle = Dial(s->port());
  const auto t0 = Clock::now();
  Send(slow_head, "GET /hello HTTP/1.1\r\nHost: x");
  Send(slow_body, "POST /echo HTTP/1.1\r\nContent-Length: 10\r\n\r\nabc");
  std::string b1, b2;
  Reply h = Read(slow_head, b1);
  EXPECT_EQ(h.status, 408);
  EXPECT_NE(h.body.find("headers did not arrive within 300 ms"), std::string::npos);
  Reply d = Read(slow_body, b2);
  EXPECT_EQ(d.status, 408);
  EXPECT_NE(d.body.find("body did not arrive within 600 ms"), std::string::npos);
  char c;
  EXPECT_EQ(::recv(idle, &c, 1, 0), 0);  // closed without a word
  EXPECT_LT(Clock::now() - t0, 2s);
  EXPECT_EQ(s->stats().timed_out.load(), 2u);
  EXPECT_EQ(s->stats().idle_closed.load(), 1u);
  for (int fd : {slow_head, slow_body, idle}) ::close(fd);
}

TEST(HttpServer, FullServerAnswers503AndRecovers) {
  ServerOptions o = Options();
  o.max_connections = 8;
  auto s = Make(o);
  ASSERT_TRUE(s->Start().ok());
  std::vector<int> held;
  for (int i = 0; i < 8; ++i) held.push_back(Dial(s->port()));
  std::this_thread::sleep_for(100ms);  // all eight accepted
  Reply r = Exchange(s->port(), "GET /hello HTTP/1.1\r\n\r\n");
  EXPECT_EQ(r.status, 503);
  EXPECT_NE(r.body.find("too many open connections (8)"), std::string::npos) << r.body;
  for (int fd : held) ::close(fd);
  Reply ok;
  for (int i = 0; i < 50 && ok.status != 200; ++i) {
    std::this_thread::sleep_for(20ms);
    ok = Exchange(s->port(), "GET /hello HTTP/1.1\r\n\r\n");
  }
  EXPECT_EQ(ok.status, 200);
}

TEST(HttpServer, QuickRoutesAnswerWhileEveryWorkerIsBusyAndTheQueueIsBounded) {
  ServerOptions o = Options();
  o.workers = 1;
  o.max_pending = 1;
  auto s = Server::Create(o);
  ASSERT_TRUE(s.ok());
  std::mutex mu;
  std::condition_variable cv;
  bool release = false;
  std::atomic<int> entered{0};
  (*s)->Route("GET", "/block", [&](const Request&, Response& res) {
    ++entered;
    std::unique_lock<std::mutex> lk(mu);
    cv.wait(lk, [&] { return release; });
    res.body = "done";
  });
  (*s)->Route("GET", "/health", [](const Request&, Response& res) { res.body = "ok"; }, true);
  ASSERT_TRUE((*s)->Start().ok());
  const int a = Dial((*s)->port()), b = Dial((*s)->port());
  Send(a, "GET /block HTTP/1.1\r\n\r\n");
  for (int i = 0; i < 100 && entered == 0; ++i) std::this_thread::sleep_for(10ms);
  Send(b, "GET /block HTTP/1.1\r\n\r\n");  // waits for the one worker
  std::this_thread::sleep_for(100ms);
  Reply full = Exchange((*s)->port(), "GET /block HTTP/1.1\r\n\r\n");
  EXPECT_EQ(full.status, 503);
  EXPECT_NE(full.body.find("busy: 1 requests are waiting"), std::string::npos) << full.body;
  EXPECT_EQ(Exchange((*s)->port(), "GET /health HTTP/1.1\r\n\r\n").body, "ok");
  {
    std::lock_guard<std::mutex> lk(mu);
    release = true;
  }
  cv.notify_all();
  std::string ba, bb;
  EXPECT_EQ(Read(a, ba).body, "done");
  EXPECT_EQ(Read(b, bb).body, "done");
  ::close(a);
  ::close(b);
}

// The measure: a thousand idle, slow and half-open connections must not delay a real
// request by more than a second (thread-per-connection servers stall until their read timeout).
TEST(HttpServer, AThousandIdleSlowAndHalfOpenConnectionsDoNotDelayARealRequest) {
  rlimit rl{};
  ::getrlimit(RLIMIT_NOFILE, &rl);
  rl.rlim_cur = rl.rlim_max;
  ::setrlimit(RLIMIT_NOFILE, &rl);
  ::getrlimit(RLIMIT_NOFILE, &rl);
  if (rl.rlim_cur < 2300) GTEST_SKIP() << "needs 2,300 descriptors (client and server side); the hard limit is " << rl.rlim_cur;
  ServerOptions o = Options();
  o.workers = 4;
  auto s = Make(o);
  ASSERT_TRUE(s->Start().ok());
  std::vector<int> crowd;
  for (int i = 0; i < 1000; ++i) {
    const int fd = Dial(s->port());
    ASSERT_GE(fd, 0) << i;
    crowd.push_back(fd);
    if (i % 4 == 1) Send(fd, "POST /echo HTTP/1.1\r\nContent-Le");                       // half a header
    if (i % 4 == 2) Send(fd, "POST /echo HTTP/1.1\r\nContent-Length: 100\r\n\r\nabc");    // half a body
    if (i % 4 == 3) ::shutdown(fd, SHUT_WR);                                              // half-closed
  }
  std::this_thread::sleep_for(200ms);
  for (int round = 0; round < 5; ++round) {
    const auto t0 = Clock::now();
    Reply r = Exchange(s->port(), "POST /echo HTTP/1.1\r\nContent-Length: 4\r\n\r\nreal");
    const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    EXPECT_EQ(r.body, "real");
    EXPECT_LT(ms, 1000.0) << "round " << round;
  }
  EXPECT_GE(s->stats().open.load(), 700);  // the crowd is still connected (half-open ones may be gone)
  for (int fd : crowd) ::close(fd);
}

TEST(HttpServer, StopEndsStreamsAndRefusesAnotherBind) {
  auto s = Server::Create(Options());
  ASSERT_TRUE(s.ok());
  (*s)->Route("GET", "/forever", [](const Request&, Response& res) {
    res.stream = [](StreamWriter& w) {
      while (w.Write("x") && w.Alive()) std::this_thread::sleep_for(5ms);
    };
  });
  ASSERT_TRUE((*s)->Start().ok());
  ServerOptions same = Options();
  same.port = (*s)->port();
  auto clash = Server::Create(same);
  ASSERT_FALSE(clash.ok());
  EXPECT_NE(clash.status().message().find("cannot listen on 127.0.0.1:"), std::string::npos);
  const int fd = Dial((*s)->port());
  Send(fd, "GET /forever HTTP/1.1\r\n\r\n");
  char buf[64];
  ASSERT_GT(::recv(fd, buf, sizeof buf, 0), 0);
  const auto t0 = Clock::now();
  (*s)->Stop();
  EXPECT_LT(Clock::now() - t0, 2s);
  ::close(fd);
}

}  // namespace
}  // namespace daisy::http
