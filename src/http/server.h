// An HTTP/1.1 server whose connections cost no thread until a request is whole.
//
// One event-loop thread (epoll) accepts connections and reads requests with RequestParser under
// deadlines: the headers must arrive within `header_timeout` of a request's first byte, the body
// within `body_timeout`; an idle keep-alive connection is closed after `idle_timeout`. Idle,
// slow and half-open clients therefore hold only a socket and a buffer, never a worker: a
// thousand of them do not delay a real request. A whole request goes to a worker thread (a pool
// for long requests, such as streamed completions, and a small one for quick ones, so /health
// answers while every long worker streams); the worker runs the handler, writes the answer
// (Content-Length, or chunked for a stream) and hands a keep-alive connection back to the loop.
// Past `max_connections` open connections, or `max_pending` whole requests waiting for a
// worker, a client gets a 503 with the reason, read to the end of its request first so the
// answer is not lost to a reset.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "base/status.h"
#include "http/request.h"
#include "transport/net.h"

namespace daisy::http {

using Millis = std::chrono::milliseconds;

// Writes a streamed answer's pieces (chunked on HTTP/1.1). Used on the handler's worker thread.
class StreamWriter {
 public:
  virtual ~StreamWriter() = default;
  // False once the client is gone or stopped reading for the write timeout.
  virtual bool Write(std::string_view piece) = 0;
  // Whether the client is still connected (a closed or reset connection is not).
  virtual bool Alive() = 0;
};

struct Response {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;
  // Set for a streamed answer: run after the head is sent; writes the body through the writer.
  std::function<void(StreamWriter&)> stream;
};

using Handler = std::function<void(const Request&, Response&)>;

struct ServerOptions {
  std::string host = "127.0.0.1";
  uint16_t port = 0;  // 0: any free port
  Limits limits;
  int workers = 64;       // long requests handled at once (a stream holds one for its length)
  int quick_workers = 2;  // threads for the routes registered as quick
  size_t max_connections = 4096;  // open connections, idle ones included (capped by RLIMIT_NOFILE)
  size_t max_pending = 1024;      // whole requests waiting for a worker
  Millis header_timeout{10000};   // a request's first byte to the end of its headers
  Millis body_timeout{60000};     // a request's first byte to the end of its body
  Millis idle_timeout{60000};     // a keep-alive connection with no request in it
  Millis write_timeout{30000};    // a client that takes none of our bytes for this long is dropped
  // The body of an answer the server gives itself (timeouts, malformed requests, 503, 404): the
  // status and a sentence. Content type application/json.
  std::function<std::string(int status, const std::string& message)> error_body;
};

// What the server counts. Thread-safe; read by /metrics.
struct ServerStats {
  std::atomic<uint64_t> accepted{0};       // connections
  std::atomic<int64_t> open{0};            // connections open now
  std::atomic<uint64_t> requests{0};       // whole requests handed to a handler
  std::atomic<uint64_t> refused_busy{0};   // 503: too many connections or pending requests
  std::atomic<uint64_t> timed_out{0};      // 408: a request not whole within its deadline
  std::atomic<uint64_t> malformed{0};      // 4xx/5xx from the parser
  std::atomic<uint64_t> idle_closed{0};    // keep-alive connections closed for idleness
};

class Server {
 public:
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;
  ~Server();

  // Routes are registered before Start. `quick`: runs on the quick pool (must not block long).
  void Route(std::string method, std::string path, Handler handler, bool quick = false);
  // For a request no route matches (path unknown, or known with another method): quick pool.
  void Fallback(Handler handler) { fallback_ = std::move(handler); }
  // The methods routed for `path` ("GET", "GET, POST"), or "" for a path with no route: what a
  // fallback answers 405 with (an Allow header) rather than 404.
  std::string AllowedMethods(std::string_view path) const;

  // Binds and listens; the loop and the workers start. Unavailable when the address cannot be bound.
  static Result<std::unique_ptr<Server>> Create(ServerOptions options);
  Status Start();
  uint16_t port() const { return port_; }
  const ServerStats& stats() const { return stats_; }
  // Stops accepting, drops every connection (streams see their writes fail) and joins the threads.
  void Stop();

 private:
  struct Conn;
  struct Pool;
  class ConnWriter;
  explicit Server(ServerOptions o);

  void Loop();
  void Accept();
  void OnReadable(Conn& c);
  // Feeds c's buffered bytes to its parser; dispatches, answers an error, or waits for more.
  void Advance(Conn& c);
  void Dispatch(Conn& c);
  // Answers from the loop thread (a small answer: one non-blocking send), then closes gracefully.
  void AnswerAndClose(Conn& c, int status, const std::string& message);
  void Close(Conn& c);
  void Sweep();
  void TakeReturned();
  void Work(Pool& pool);
  void Handle(Conn& c);
  const Handler* Find(const Request& r, bool* quick) const;
  std::string ErrorBody(int status, const std::string& message) const;
  void Wake();

  struct RouteEntry {
    std::string method, path;
    Handler handler;
    bool quick = false;
  };

  ServerOptions o_;
  std::vector<RouteEntry> routes_;
  Handler fallback_;
  ServerStats stats_;
  transport::Socket listener_;
  int epoll_fd_ = -1, wake_fd_ = -1;
  uint16_t port_ = 0;
  std::atomic<bool> stopping_{false};
  std::unique_ptr<Pool> long_pool_, quick_pool_;
  std::vector<std::unique_ptr<Conn>> conns_;  // indexed by fd
  size_t conn_count_ = 0;
  struct Returned;
  std::unique_ptr<Returned> returned_;
  std::vector<std::thread> threads_;
  bool started_ = false;
};

}  // namespace daisy::http
