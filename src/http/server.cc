#include "http/server.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>

#include "base/log.h"
#include "base/strings.h"

namespace daisy::http {

namespace {

using Clock = std::chrono::steady_clock;

constexpr Millis kLingerAfterError{2000};  // reading what a refused client still sends, so it sees the answer
constexpr Millis kDoomedDeadline{2000};    // a connection past the limit: its request, then 503
constexpr size_t kDoomedSlack = 64;        // connections past the limit answered 503; beyond, closed at once
constexpr Millis kSweepEvery{100};
constexpr size_t kReadChunk = 64 << 10;

// One non-blocking send of a small answer (errors, "100 Continue"): whatever the socket takes.
void SendSome(int fd, const std::string& s) {
  size_t off = 0;
  while (off < s.size()) {
    const ssize_t n = ::send(fd, s.data() + off, s.size() - off, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    off += static_cast<size_t>(n);
  }
}

// Whether the peer of a connected socket is still there: not closed, reset or hung up (bytes it
// sent meanwhile, a pipelined request, are left unread).
bool PeerAlive(int fd) {
  pollfd p{fd, POLLIN, 0};
  if (::poll(&p, 1, 0) <= 0) return true;
  if (p.revents & (POLLERR | POLLHUP | POLLNVAL)) return false;
  char c;
  const ssize_t n = ::recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
  return n > 0 || (n < 0 && (errno == EAGAIN || errno == EINTR));  // 0: the client closed
}

std::string Head(int status, const std::string& content_type, const std::string* length_or_null,
                 const std::vector<std::pair<std::string, std::string>>& headers, bool chunked, bool keep_alive) {
  std::string h = StrFormat("HTTP/1.1 %d %s\r\n", status, std::string(ReasonPhrase(status)).c_str());
  if (!content_type.empty()) h += "Content-Type: " + content_type + "\r\n";
  if (length_or_null) h += "Content-Length: " + *length_or_null + "\r\n";
  if (chunked) h += "Transfer-Encoding: chunked\r\n";
  for (const auto& [k, v] : headers) h += k + ": " + v + "\r\n";
  h += keep_alive ? "Connection: keep-alive\r\n\r\n" : "Connection: close\r\n\r\n";
  return h;
}

}  // namespace

struct Server::Conn {
  int fd = -1;
  RequestParser parser;
  std::string in;             // received, not yet fed to the parser (the next pipelined request)
  Clock::time_point since;    // accepted, or the last answer written (idle time counts from here)
  Clock::time_point begun;    // the current request's first byte
  bool busy = false;          // a worker has it (the loop neither reads nor closes it)
  bool closing = false;       // answered and half-closed: reading to EOF or close_by
  bool doomed = false;        // accepted past max_connections: answered 503 once its request is read
  Clock::time_point close_by;

  explicit Conn(int f, const Limits& l) : fd(f), parser(l) {}
};

struct Server::Pool {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<Conn*> queue;
  bool stop = false;
};

struct Server::Returned {
  std::mutex mu;
  std::vector<std::pair<Conn*, bool>> conns;  // (connection, keep it open)
};

// Blocking writes on a non-blocking socket: each wait for room bounded by the write timeout.
class Server::ConnWriter : public StreamWriter {
 public:
  ConnWriter(int fd, Millis timeout, bool chunked, const std::atomic<bool>& stopping)
      : fd_(fd), timeout_(timeout), chunked_(chunked), stopping_(stopping) {}

  bool Send(std::string_view s) {
    size_t off = 0;
    while (ok_ && off < s.size()) {
      if (stopping_) return ok_ = false;
      const ssize_t n = ::send(fd_, s.data() + off, s.size() - off, MSG_NOSIGNAL);
      if (n > 0) {
        off += static_cast<size_t>(n);
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        pollfd p{fd_, POLLOUT, 0};
        const int r = ::poll(&p, 1, static_cast<int>(timeout_.count()));
        if (r > 0 && !(p.revents & (POLLERR | POLLHUP))) continue;
        if (r < 0 && errno == EINTR) continue;
      }
      ok_ = false;
    }
    return ok_;
  }

  bool Write(std::string_view piece) override {
    if (piece.empty()) return ok_;  // an empty chunk would end the body
    if (!chunked_) return Send(piece);
    std::string framed = StrFormat("%zx\r\n", piece.size());
    framed.append(piece);
    framed += "\r\n";
    return Send(framed);
  }

  bool Alive() override { return ok_ && !stopping_ && PeerAlive(fd_); }

  bool ok() const { return ok_; }

 private:
  int fd_;
  Millis timeout_;
  bool chunked_;
  const std::atomic<bool>& stopping_;
  bool ok_ = true;
};

Server::Server(ServerOptions o) : o_(std::move(o)) {}

Server::~Server() { Stop(); }

void Server::Route(std::string method, std::string path, Handler handler, bool quick) {
  routes_.push_back({std::move(method), std::move(path), std::move(handler), quick});
}

Result<std::unique_ptr<Server>> Server::Create(ServerOptions options) {
  std::unique_ptr<Server> s(new Server(std::move(options)));
  // Idle connections are cheap here, so let there be many: the soft descriptor limit up to the
  // hard one, and the connection limit under it with room for the process's other files.
  rlimit rl{};
  if (::getrlimit(RLIMIT_NOFILE, &rl) == 0) {
    if (rl.rlim_cur < rl.rlim_max) {
      rl.rlim_cur = rl.rlim_max;
      ::setrlimit(RLIMIT_NOFILE, &rl);
      ::getrlimit(RLIMIT_NOFILE, &rl);
    }
    const size_t room = rl.rlim_cur > 256 + kDoomedSlack ? rl.rlim_cur - 256 - kDoomedSlack : 16;
    if (s->o_.max_connections > room) {
      DAISY_LOG_WARN("HTTP connections limited to %zu by the open-file limit (%llu)", room,
                     static_cast<unsigned long long>(rl.rlim_cur));
      s->o_.max_connections = room;
    }
  }
  auto listener = transport::ListenSocket({s->o_.host, s->o_.port}, 1024, /*nonblocking=*/true, &s->port_);
  if (!listener.ok()) {
    return Unavailable("%s (in use, or not an address of this machine)", listener.status().message().c_str());
  }
  s->listener_ = std::move(*listener);
  s->epoll_fd_ = ::epoll_create1(EPOLL_CLOEXEC);
  s->wake_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (s->epoll_fd_ < 0 || s->wake_fd_ < 0) return Internal("epoll/eventfd: %s", std::strerror(errno));
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = s->listener_.fd();
  ::epoll_ctl(s->epoll_fd_, EPOLL_CTL_ADD, s->listener_.fd(), &ev);
  ev.data.fd = s->wake_fd_;
  ::epoll_ctl(s->epoll_fd_, EPOLL_CTL_ADD, s->wake_fd_, &ev);
  s->long_pool_ = std::make_unique<Pool>();
  s->quick_pool_ = std::make_unique<Pool>();
  s->returned_ = std::make_unique<Returned>();
  return s;
}

Status Server::Start() {
  if (started_) return Internal("the HTTP server is already started");
  started_ = true;
  threads_.emplace_back([this] { Loop(); });
  for (int i = 0; i < std::max(1, o_.workers); ++i) threads_.emplace_back([this] { Work(*long_pool_); });
  for (int i = 0; i < std::max(1, o_.quick_workers); ++i) threads_.emplace_back([this] { Work(*quick_pool_); });
  return Status::Ok();
}

void Server::Stop() {
  if (!listener_.valid()) return;
  stopping_ = true;
  if (started_) {
    Wake();
    threads_[0].join();  // the loop: from here on only this thread touches conns_
    for (auto& c : conns_) {
      if (c && c->busy) ::shutdown(c->fd, SHUT_RDWR);  // a streaming worker's next write fails
    }
    for (Pool* p : {long_pool_.get(), quick_pool_.get()}) {
      std::lock_guard<std::mutex> lk(p->mu);
      p->stop = true;
      p->cv.notify_all();
    }
    for (size_t i = 1; i < threads_.size(); ++i) threads_[i].join();
    threads_.clear();
  }
  for (auto& c : conns_) {
    if (c) ::close(c->fd);
    c.reset();
  }
  listener_.Close();
  if (epoll_fd_ >= 0) ::close(epoll_fd_);
  if (wake_fd_ >= 0) ::close(wake_fd_);
  epoll_fd_ = wake_fd_ = -1;
}

void Server::Wake() {
  const uint64_t one = 1;
  [[maybe_unused]] ssize_t n = ::write(wake_fd_, &one, sizeof one);
}

std::string Server::ErrorBody(int status, const std::string& message) const {
  if (o_.error_body) return o_.error_body(status, message);
  return message;
}

void Server::Loop() {
  epoll_event events[256];
  Clock::time_point last_sweep = Clock::now();
  while (!stopping_) {
    const int n = ::epoll_wait(epoll_fd_, events, 256, static_cast<int>(kSweepEvery.count()));
    for (int i = 0; i < n; ++i) {
      const int fd = events[i].data.fd;
      if (fd == listener_.fd()) {
        Accept();
      } else if (fd == wake_fd_) {
        uint64_t v;
        [[maybe_unused]] ssize_t r = ::read(wake_fd_, &v, sizeof v);
        TakeReturned();
      } else if (static_cast<size_t>(fd) < conns_.size() && conns_[fd] && !conns_[fd]->busy) {
        OnReadable(*conns_[fd]);
      }
    }
    if (Clock::now() - last_sweep >= kSweepEvery) {
      Sweep();
      last_sweep = Clock::now();
    }
  }
}

void Server::Accept() {
  while (true) {
    const int fd = ::accept4(listener_.fd(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno == EMFILE || errno == ENFILE) {
        // Out of descriptors: the pending connection stays in the backlog; the sweep retries.
        ++stats_.refused_busy;
        ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, listener_.fd(), nullptr);
        DAISY_LOG_WARN("HTTP: out of file descriptors (%s); not accepting for a moment", std::strerror(errno));
      }
      return;
    }
    ++stats_.accepted;
    if (conn_count_ >= o_.max_connections + kDoomedSlack) {
      ++stats_.refused_busy;
      ::close(fd);
      continue;
    }
    const int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (static_cast<size_t>(fd) >= conns_.size()) conns_.resize(static_cast<size_t>(fd) + 1);
    conns_[fd] = std::make_unique<Conn>(fd, o_.limits);
    Conn& c = *conns_[fd];
    c.since = Clock::now();
    c.doomed = conn_count_ >= o_.max_connections;
    ++conn_count_;
    ++stats_.open;
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLRDHUP;
    ev.data.fd = fd;
    ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev);
  }
}

void Server::OnReadable(Conn& c) {
  static thread_local std::string buf(kReadChunk, '\0');
  for (int round = 0; round < 4; ++round) {
    const ssize_t n = ::recv(c.fd, buf.data(), buf.size(), 0);
    if (n > 0) {
      if (c.closing) continue;  // draining what a refused client still sends
      c.in.append(buf.data(), static_cast<size_t>(n));
      Advance(c);
      if (c.busy || !conns_[c.fd]) return;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    Close(c);  // end of stream or an error: nothing more can be answered on it
    return;
  }
}

void Server::Advance(Conn& c) {
  if (c.in.empty() || c.closing) return;
  const bool was_started = c.parser.Started();
  size_t used = 0;
  const RequestParser::State st = c.parser.Feed(c.in, &used);
  c.in.erase(0, used);
  if (!was_started && c.parser.Started()) c.begun = Clock::now();
  if (c.parser.WantsContinue()) {
    SendSome(c.fd, "HTTP/1.1 100 Continue\r\n\r\n");
    c.parser.ContinueSent();
  }
  if (st == RequestParser::State::kError) {
    ++stats_.malformed;
    AnswerAndClose(c, c.parser.error().status, c.parser.error().message);
  } else if (st == RequestParser::State::kDone) {
    if (c.doomed) {
      ++stats_.refused_busy;
      AnswerAndClose(c, 503,
                     StrFormat("the server has too many open connections (%zu); try again later", o_.max_connections));
    } else {
      Dispatch(c);
    }
  }
}

std::string Server::AllowedMethods(std::string_view path) const {
  std::string allow;
  for (const RouteEntry& e : routes_) {
    if (e.path == path) allow += (allow.empty() ? "" : ", ") + e.method;
  }
  return allow;
}

const Handler* Server::Find(const Request& r, bool* quick) const {
  for (const RouteEntry& e : routes_) {
    if (e.path == r.path && e.method == r.method) {
      *quick = e.quick;
      return &e.handler;
    }
  }
  *quick = true;
  return nullptr;
}

void Server::Dispatch(Conn& c) {
  bool quick = true;
  Find(c.parser.request(), &quick);
  Pool& pool = quick ? *quick_pool_ : *long_pool_;
  {
    std::lock_guard<std::mutex> lk(pool.mu);
    if (pool.queue.size() < o_.max_pending) {
      ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, c.fd, nullptr);
      c.busy = true;
      pool.queue.push_back(&c);
      pool.cv.notify_one();
      return;
    }
  }
  ++stats_.refused_busy;
  AnswerAndClose(c, 503, StrFormat("the server is busy: %zu requests are waiting for a worker; try again later",
                                   o_.max_pending));
}

void Server::AnswerAndClose(Conn& c, int status, const std::string& message) {
  const std::string body = ErrorBody(status, message);
  const std::string length = std::to_string(body.size());
  SendSome(c.fd, Head(status, o_.error_body ? "application/json" : "text/plain", &length, {}, false, false) + body);
  ::shutdown(c.fd, SHUT_WR);
  c.closing = true;
  c.in.clear();
  c.close_by = Clock::now() + kLingerAfterError;
}

void Server::Close(Conn& c) {
  const int fd = c.fd;
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
  ::close(fd);
  conns_[fd].reset();
  --conn_count_;
  --stats_.open;
}

void Server::Sweep() {
  // Accepting again after running out of descriptors.
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = listener_.fd();
  if (::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, listener_.fd(), &ev) == 0) Accept();
  const Clock::time_point now = Clock::now();
  for (auto& p : conns_) {
    if (!p || p->busy) continue;
    Conn& c = *p;
    if (c.closing) {
      if (now >= c.close_by) Close(c);
    } else if (c.doomed && now - c.since >= kDoomedDeadline) {
      ++stats_.refused_busy;
      AnswerAndClose(c, 503,
                     StrFormat("the server has too many open connections (%zu); try again later", o_.max_connections));
    } else if (c.parser.Started() && !c.parser.HeadersRead() && now - c.begun >= o_.header_timeout) {
      ++stats_.timed_out;
      AnswerAndClose(c, 408, StrFormat("the request's headers did not arrive within %lld ms",
                                       static_cast<long long>(o_.header_timeout.count())));
    } else if (c.parser.Started() && now - c.begun >= o_.body_timeout) {
      ++stats_.timed_out;
      AnswerAndClose(c, 408, StrFormat("the request's body did not arrive within %lld ms",
                                       static_cast<long long>(o_.body_timeout.count())));
    } else if (!c.parser.Started() && now - c.since >= o_.idle_timeout) {
      ++stats_.idle_closed;
      Close(c);
    }
  }
}

void Server::TakeReturned() {
  std::vector<std::pair<Conn*, bool>> back;
  {
    std::lock_guard<std::mutex> lk(returned_->mu);
    back.swap(returned_->conns);
  }
  for (auto [c, keep] : back) {
    c->busy = false;
    if (!keep) {
      Close(*c);
      continue;
    }
    c->parser.Reset();
    c->since = Clock::now();
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLRDHUP;
    ev.data.fd = c->fd;
    ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, c->fd, &ev);
    Advance(*c);  // a pipelined request already read
  }
}

void Server::Work(Pool& pool) {
  while (true) {
    Conn* c = nullptr;
    {
      std::unique_lock<std::mutex> lk(pool.mu);
      pool.cv.wait(lk, [&] { return pool.stop || !pool.queue.empty(); });
      if (pool.stop) return;
      c = pool.queue.front();
      pool.queue.pop_front();
    }
    Handle(*c);
  }
}

void Server::Handle(Conn& c) {
  Request& req = c.parser.request();
  const int fd = c.fd;
  req.client_alive = [this, fd] { return !stopping_ && PeerAlive(fd); };
  Response res;
  bool quick = false;
  const Handler* h = Find(req, &quick);
  try {
    if (h) {
      (*h)(req, res);
    } else if (fallback_) {
      fallback_(req, res);
    } else {
      res.status = 404;
      res.body = ErrorBody(404, "no such endpoint: " + req.method + " " + req.path);
    }
  } catch (const std::exception& e) {
    res = Response{};
    res.status = 500;
    res.body = ErrorBody(500, std::string("internal error: ") + e.what());
  }
  ++stats_.requests;
  bool keep = req.KeepAlive() && !stopping_;
  const bool chunked = res.stream && req.minor_version >= 1;
  if (res.stream && !chunked) keep = false;  // HTTP/1.0: the body ends with the connection
  ConnWriter w(c.fd, o_.write_timeout, chunked, stopping_);
  const std::string length = std::to_string(res.body.size());
  std::string head = Head(res.status, res.content_type, res.stream ? nullptr : &length, res.headers, chunked, keep);
  if (res.stream) {
    if (w.Send(head)) {
      res.stream(w);
      if (chunked && w.ok()) w.Send("0\r\n\r\n");
    }
  } else {
    head += res.body;
    w.Send(head);
  }
  if (!w.ok()) keep = false;
  if (!keep) ::shutdown(c.fd, SHUT_WR);
  {
    std::lock_guard<std::mutex> lk(returned_->mu);
    returned_->conns.emplace_back(&c, keep);
  }
  Wake();
}

}  // namespace daisy::http
