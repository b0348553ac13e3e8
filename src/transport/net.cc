#include "transport/net.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>
#include <vector>

namespace daisy::transport {
namespace {

Result<addrinfo*> Resolve(const HostPort& at, bool passive) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  if (passive) hints.ai_flags = AI_PASSIVE;
  addrinfo* res = nullptr;
  const std::string port = std::to_string(at.port);
  const int rc = getaddrinfo(at.host.empty() ? nullptr : at.host.c_str(), port.c_str(), &hints, &res);
  if (rc != 0) return Unavailable("cannot resolve %s: %s", at.ToString().c_str(), gai_strerror(rc));
  return res;
}

}  // namespace

Result<HostPort> ParseHostPort(const std::string& text) {
  std::string host, port;
  if (!text.empty() && text[0] == '[') {
    const size_t close = text.find(']');
    if (close == std::string::npos || close + 1 >= text.size() || text[close + 1] != ':') {
      return InvalidArgument("'%s' is not HOST:PORT", text.c_str());
    }
    host = text.substr(1, close - 1);
    port = text.substr(close + 2);
  } else {
    const size_t colon = text.rfind(':');
    if (colon == std::string::npos) return InvalidArgument("'%s' is not HOST:PORT", text.c_str());
    host = text.substr(0, colon);
    port = text.substr(colon + 1);
  }
  char* end = nullptr;
  const long p = std::strtol(port.c_str(), &end, 10);
  if (host.empty() || port.empty() || *end != '\0' || p < 0 || p > 65535) {
    return InvalidArgument("'%s' is not HOST:PORT (port 0-65535)", text.c_str());
  }
  return HostPort{host, static_cast<uint16_t>(p)};
}

Socket& Socket::operator=(Socket&& o) noexcept {
  if (this != &o) {
    Close();
    fd_ = o.fd_;
    o.fd_ = -1;
  }
  return *this;
}

void Socket::Close() {
  if (fd_ >= 0) {
    ::close(fd_);
    fd_ = -1;
  }
}

void Socket::Shutdown() {
  if (fd_ >= 0) ::shutdown(fd_, SHUT_RDWR);
}

Status Socket::SendAll(std::span<const std::span<const uint8_t>> pieces) {
  std::vector<iovec> iov;
  for (auto p : pieces) {
    if (!p.empty()) iov.push_back({const_cast<uint8_t*>(p.data()), p.size()});
  }
  size_t at = 0;
  while (at < iov.size()) {
    // sendmsg with MSG_NOSIGNAL: a peer that went away is an error here, never a SIGPIPE that
    // kills the process (the coordinator and tests do not ignore the signal).
    msghdr msg{};
    msg.msg_iov = &iov[at];
    msg.msg_iovlen = std::min<size_t>(iov.size() - at, IOV_MAX);
    const ssize_t n = ::sendmsg(fd_, &msg, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Unavailable("send failed: %s", std::strerror(errno));
    }
    size_t left = static_cast<size_t>(n);
    while (left > 0 && at < iov.size()) {
      if (left >= iov[at].iov_len) {
        left -= iov[at].iov_len;
        ++at;
      } else {
        iov[at].iov_base = static_cast<uint8_t*>(iov[at].iov_base) + left;
        iov[at].iov_len -= left;
        left = 0;
      }
    }
  }
  return Status::Ok();
}

Status Socket::RecvAll(std::span<uint8_t> out, Millis timeout) {
  size_t got = 0;
  // The bound is on silence: it restarts whenever bytes arrive, so a large frame arriving
  // slowly is not cut off.
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (got < out.size()) {
    if (timeout.count() > 0) {
      const auto left = std::chrono::duration_cast<Millis>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return DeadlineExceeded("timed out");
      pollfd p{fd_, POLLIN, 0};
      const int rc = ::poll(&p, 1, static_cast<int>(left.count()));
      if (rc < 0 && errno == EINTR) continue;
      if (rc == 0) return DeadlineExceeded("timed out");
    }
    const ssize_t n = ::recv(fd_, out.data() + got, out.size() - got, 0);
    if (n == 0) return Unavailable("connection closed by the peer");
    if (n < 0) {
      if (errno == EINTR) continue;
      return Unavailable("receive failed: %s", std::strerror(errno));
    }
    got += static_cast<size_t>(n);
    deadline = std::chrono::steady_clock::now() + timeout;
  }
  return Status::Ok();
}

void ConfigureStream(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
  int idle = 5, interval = 2, count = 3;  // a dead peer is noticed within ~11 s when idle
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval, sizeof(interval));
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &count, sizeof(count));
}

Result<Socket> ListenSocket(const HostPort& at, int backlog, bool nonblocking, uint16_t* port) {
  DAISY_ASSIGN_OR_RETURN(addrinfo * res, Resolve(at, true));
  std::string last_error = "no address";
  for (addrinfo* a = res; a != nullptr; a = a->ai_next) {
    Socket s(::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | (nonblocking ? SOCK_NONBLOCK : 0), a->ai_protocol));
    if (!s.valid()) continue;
    int one = 1;
    setsockopt(s.fd(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (::bind(s.fd(), a->ai_addr, a->ai_addrlen) != 0 || ::listen(s.fd(), backlog) != 0) {
      last_error = std::strerror(errno);
      continue;
    }
    sockaddr_storage ss{};
    socklen_t len = sizeof(ss);
    getsockname(s.fd(), reinterpret_cast<sockaddr*>(&ss), &len);
    *port = ntohs(ss.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port
                                           : reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
    freeaddrinfo(res);
    return s;
  }
  freeaddrinfo(res);
  return Unavailable("cannot listen on %s: %s", at.ToString().c_str(), last_error.c_str());
}

Result<Listener> Listener::Listen(const HostPort& at) {
  Listener l;
  DAISY_ASSIGN_OR_RETURN(l.socket_, ListenSocket(at, 64, /*nonblocking=*/false, &l.port_));
  return l;
}

Result<Socket> Listener::Accept(std::string* peer) {
  while (true) {
    sockaddr_storage ss{};
    socklen_t len = sizeof(ss);
    const int fd = ::accept4(socket_.fd(), reinterpret_cast<sockaddr*>(&ss), &len, SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      return Unavailable("accept failed: %s", std::strerror(errno));
    }
    if (peer != nullptr) {
      char host[INET6_ADDRSTRLEN] = "?";
      uint16_t port = 0;
      if (ss.ss_family == AF_INET) {
        auto* in = reinterpret_cast<sockaddr_in*>(&ss);
        inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
        port = ntohs(in->sin_port);
      } else if (ss.ss_family == AF_INET6) {
        auto* in = reinterpret_cast<sockaddr_in6*>(&ss);
        inet_ntop(AF_INET6, &in->sin6_addr, host, sizeof(host));
        port = ntohs(in->sin6_port);
      }
      *peer = std::string(host) + ":" + std::to_string(port);
    }
    ConfigureStream(fd);
    return Socket(fd);
  }
}

void Listener::Shutdown() { socket_.Shutdown(); }

Result<Socket> Connect(const HostPort& to, Millis timeout) {
  DAISY_ASSIGN_OR_RETURN(addrinfo * res, Resolve(to, false));
  std::string last_error = "no address";
  for (addrinfo* a = res; a != nullptr; a = a->ai_next) {
    Socket s(::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol));
    if (!s.valid()) continue;
    int rc = ::connect(s.fd(), a->ai_addr, a->ai_addrlen);
    if (rc != 0 && errno == EINPROGRESS) {
      pollfd p{s.fd(), POLLOUT, 0};
      rc = ::poll(&p, 1, static_cast<int>(timeout.count()));
      if (rc == 1) {
        int err = 0;
        socklen_t len = sizeof(err);
        getsockopt(s.fd(), SOL_SOCKET, SO_ERROR, &err, &len);
        rc = err == 0 ? 0 : -1;
        errno = err;
      } else {
        errno = rc == 0 ? ETIMEDOUT : errno;
        rc = -1;
      }
    }
    if (rc != 0) {
      last_error = std::strerror(errno);
      continue;
    }
    if (ConnectedToItself(s.fd())) {
      last_error = "nothing listens there (the connection reached itself)";
      continue;
    }
    const int flags = fcntl(s.fd(), F_GETFL);
    fcntl(s.fd(), F_SETFL, flags & ~O_NONBLOCK);
    ConfigureStream(s.fd());
    freeaddrinfo(res);
    return s;
  }
  freeaddrinfo(res);
  return Unavailable("cannot connect to %s: %s", to.ToString().c_str(), last_error.c_str());
}

bool ConnectedToItself(int fd) {
  sockaddr_storage local{}, peer{};
  socklen_t local_len = sizeof(local), peer_len = sizeof(peer);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&local), &local_len) != 0 ||
      getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &peer_len) != 0) {
    return false;
  }
  return local_len == peer_len && std::memcmp(&local, &peer, local_len) == 0;
}

Result<Socket> ConnectWithRetry(const HostPort& to, Millis deadline) {
  const auto until = std::chrono::steady_clock::now() + deadline;
  Millis backoff(50);
  while (true) {
    auto s = Connect(to, Millis(2000));
    if (s.ok() || std::chrono::steady_clock::now() + backoff >= until) return s;
    std::this_thread::sleep_for(backoff);
    backoff = std::min(backoff * 2, Millis(1000));
  }
}

}  // namespace daisy::transport
