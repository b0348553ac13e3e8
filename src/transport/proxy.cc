#include "transport/proxy.h"

#include <sys/socket.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <random>

#include "base/log.h"

namespace daisy::transport {
namespace {
using Clock = std::chrono::steady_clock;
constexpr size_t kChunk = 64 << 10;
}  // namespace

// One client connection: two sockets, two directions, four threads.
struct Proxy::Link {
  enum Fault { kNone, kCut, kStalled };
  Socket a, b;  // client side, target side
  std::atomic<int> fault{kNone};
  struct Direction {
    std::mutex mu;
    std::condition_variable cv;
    std::deque<std::pair<Clock::time_point, std::vector<uint8_t>>> queue;
    bool eof = false;
    Clock::time_point last_release{}, link_free{};
    std::mt19937_64 rng;
  } ab, ba;
  std::vector<std::thread> threads;
};

Result<std::unique_ptr<Proxy>> Proxy::Start(const ProxyOptions& options) {
  if (options.delay_ms < 0 || options.jitter_ms < 0 || options.rate_mbit < 0) {
    return InvalidArgument("delay, jitter and rate must not be negative");
  }
  std::unique_ptr<Proxy> p(new Proxy(options));
  DAISY_ASSIGN_OR_RETURN(p->listener_, Listener::Listen(options.listen));
  p->port_ = p->listener_.port();
  p->accept_thread_ = std::thread([raw = p.get()] { raw->AcceptLoop(); });
  return p;
}

Proxy::~Proxy() { Stop(); }

void Proxy::Stop() {
  std::vector<std::shared_ptr<Link>> links;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return;
    stopping_ = true;
    links = links_;
    for (Socket& h : held_) h.Shutdown();
  }
  listener_.Shutdown();
  if (accept_thread_.joinable()) accept_thread_.join();
  for (auto& l : links) {
    l->a.Shutdown();
    l->b.Shutdown();
    for (auto* d : {&l->ab, &l->ba}) {
      std::lock_guard<std::mutex> lock(d->mu);
      d->eof = true;
      d->queue.clear();
      d->cv.notify_all();
    }
    for (auto& t : l->threads) t.join();
  }
}

size_t Proxy::Strike(int fault) {
  std::lock_guard<std::mutex> lock(mu_);
  size_t n = 0;
  for (auto& l : links_) {
    int none = Link::kNone;
    if (l->fault.compare_exchange_strong(none, fault)) ++n;
  }
  return n;
}

size_t Proxy::Cut() { return Strike(Link::kCut); }
size_t Proxy::Stall() { return Strike(Link::kStalled); }

void Proxy::AcceptLoop() {
  uint64_t n = 0;
  while (true) {
    std::string peer;
    auto s = listener_.Accept(&peer);
    if (!s.ok()) {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_) return;
      continue;
    }
    if (o_.blackhole) {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_) return;
      held_.push_back(std::move(*s));
      continue;
    }
    auto target = Connect(o_.to, Millis(5000));
    if (!target.ok()) {
      DAISY_LOG_WARN("proxy: %s: %s", peer.c_str(), target.status().message().c_str());
      continue;  // the client's socket closes
    }
    auto link = std::make_shared<Link>();
    link->a = std::move(*s);
    link->b = std::move(*target);
    link->ab.rng.seed(o_.seed + 2 * n);
    link->ba.rng.seed(o_.seed + 2 * n + 1);
    ++n;
    const auto pump = [this, link](Socket& from, Socket& to, Link::Direction& d) {
      std::thread reader([this, &from, &d] {
        std::uniform_real_distribution<double> jitter(0.0, o_.jitter_ms);
        std::vector<uint8_t> buf(kChunk);
        while (true) {
          const ssize_t got = ::recv(from.fd(), buf.data(), buf.size(), 0);
          std::lock_guard<std::mutex> lock(d.mu);
          if (got <= 0 || d.eof) {
            d.eof = true;
            d.cv.notify_all();
            return;
          }
          const auto now = Clock::now();
          auto release = now + std::chrono::duration_cast<Clock::duration>(
                                   std::chrono::duration<double, std::milli>(o_.delay_ms + jitter(d.rng)));
          if (o_.rate_mbit > 0) {  // the link transmits one chunk after another
            const auto tx = std::chrono::duration_cast<Clock::duration>(
                std::chrono::duration<double>(got * 8.0 / (o_.rate_mbit * 1e6)));
            d.link_free = std::max(d.link_free, now) + tx;
            release += d.link_free - now;
          }
          release = std::max(release, d.last_release);  // in order
          d.last_release = release;
          d.queue.emplace_back(release, std::vector<uint8_t>(buf.begin(), buf.begin() + got));
          d.cv.notify_all();
        }
      });
      std::thread writer([&to, &d, &from, link] {
        while (true) {
          std::unique_lock<std::mutex> lock(d.mu);
          d.cv.wait(lock, [&] { return d.eof || !d.queue.empty(); });
          if (d.queue.empty()) {  // eof and drained: pass the close on
            ::shutdown(to.fd(), SHUT_WR);
            return;
          }
          const auto release = d.queue.front().first;
          if (Clock::now() < release) {
            d.cv.wait_until(lock, release);
            continue;
          }
          std::vector<uint8_t> chunk = std::move(d.queue.front().second);
          d.queue.pop_front();
          lock.unlock();
          const int fault = link->fault.load();
          if (fault == Link::kStalled) continue;  // silence: read, dropped
          if (fault == Link::kCut && chunk.size() > 1) chunk.resize(chunk.size() / 2);
          const std::span<const uint8_t> piece[1] = {chunk};
          if (fault == Link::kCut || !to.SendAll(piece).ok()) {
            if (fault == Link::kCut) {
              (void)to.SendAll(piece);  // part of what was in flight, then the link is gone
              link->a.Shutdown();
              link->b.Shutdown();
            }
            from.Shutdown();
            std::lock_guard<std::mutex> l2(d.mu);
            d.eof = true;
            d.queue.clear();
            return;
          }
        }
      });
      link->threads.push_back(std::move(reader));
      link->threads.push_back(std::move(writer));
    };
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return;
    pump(link->a, link->b, link->ab);
    pump(link->b, link->a, link->ba);
    links_.push_back(link);
  }
}

}  // namespace daisy::transport
