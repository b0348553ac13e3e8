// A WAN emulator between two stages (`daisy proxy`): a TCP forwarder that delays every chunk by
// a fixed latency plus uniform jitter and limits bandwidth. Each direction has a reader that
// stamps each chunk (up to 64 KiB) with its release time and a writer that sends it when that
// time comes — a release-time queue, so many chunks are in flight at once as on a real link
// (a per-chunk sleep would serialise traffic). Chunks never overtake each other.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "base/status.h"
#include "transport/net.h"

namespace daisy::transport {

struct ProxyOptions {
  HostPort listen;
  HostPort to;
  double delay_ms = 0;
  double jitter_ms = 0;
  double rate_mbit = 0;  // 0: unlimited
  uint64_t seed = 1;
};

class Proxy {
 public:
  static Result<std::unique_ptr<Proxy>> Start(const ProxyOptions& options);
  ~Proxy();
  uint16_t port() const { return port_; }
  void Stop();

 private:
  struct Link;
  explicit Proxy(const ProxyOptions& o) : o_(o) {}
  void AcceptLoop();

  ProxyOptions o_;
  Listener listener_;
  uint16_t port_ = 0;
  std::mutex mu_;
  bool stopping_ = false;
  std::vector<std::shared_ptr<Link>> links_;
  std::thread accept_thread_;
};

}  // namespace daisy::transport
