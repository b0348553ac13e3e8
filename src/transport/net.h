// TCP sockets for daisy's links: persistent, TCP_NODELAY, keep-alive, every blocking call bounded
// by a timeout. Blocking I/O on dedicated threads (one reader per connection): a pipeline has a
// handful of long-lived connections, so threads are simpler than an event loop and as fast.
#pragma once

#include <chrono>
#include <cstdint>
#include <span>
#include <string>

#include "base/status.h"

namespace daisy::transport {

using Millis = std::chrono::milliseconds;

struct HostPort {
  std::string host;
  uint16_t port = 0;
  std::string ToString() const { return host + ":" + std::to_string(port); }
};

// "127.0.0.1:7000", "localhost:7000", "[::1]:7000". Port 0 is allowed (listen on any port).
Result<HostPort> ParseHostPort(const std::string& text);

// An owned socket; closing is idempotent. Move-only.
class Socket {
 public:
  Socket() = default;
  explicit Socket(int fd) : fd_(fd) {}
  Socket(Socket&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  Socket& operator=(Socket&& o) noexcept;
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;
  ~Socket() { Close(); }

  int fd() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  void Close();
  // Wakes any thread blocked on this socket (it sees end of stream) without closing the fd.
  void Shutdown();

  // Writes all bytes of all pieces (one sendmsg per batch of pieces), or fails: Unavailable when
  // the peer is gone (no SIGPIPE).
  Status SendAll(std::span<const std::span<const uint8_t>> pieces);
  // Reads exactly out.size() bytes. Unavailable on end of stream or error; DeadlineExceeded
  // ("timed out") when `timeout` (> 0) passes with no byte arriving.
  Status RecvAll(std::span<uint8_t> out, Millis timeout = Millis(0));

 private:
  int fd_ = -1;
};

// A socket bound to `at` and listening (SO_REUSEADDR, close-on-exec; non-blocking if asked), and
// the port it got (port 0: any free port). Unavailable, naming the address, when it cannot bind.
Result<Socket> ListenSocket(const HostPort& at, int backlog, bool nonblocking, uint16_t* port);

class Listener {
 public:
  // Binds and listens (SO_REUSEADDR). Port 0 picks a free port: see port().
  static Result<Listener> Listen(const HostPort& at);
  uint16_t port() const { return port_; }
  // Waits for a connection; Unavailable once Shutdown() was called.
  Result<Socket> Accept(std::string* peer);
  void Shutdown();

 private:
  Socket socket_;
  uint16_t port_ = 0;
};

// One connection attempt, bounded by `timeout`. The socket gets TCP_NODELAY and keep-alive.
Result<Socket> Connect(const HostPort& to, Millis timeout);
// Retries with exponential back-off (50 ms doubling to 1 s) until `deadline` passes: peers may
// start in any order.
Result<Socket> ConnectWithRetry(const HostPort& to, Millis deadline);

void ConfigureStream(int fd);  // TCP_NODELAY, SO_KEEPALIVE with short probes

// True when a connected socket's two ends are one address and port. A connect to a loopback
// port with nothing listening may, rarely, be given that very port as its own and open a
// connection to itself (TCP simultaneous open); Connect refuses such a socket.
bool ConnectedToItself(int fd);

}  // namespace daisy::transport
