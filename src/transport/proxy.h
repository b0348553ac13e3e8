// A WAN emulator between two stages (`daisy proxy`): a TCP forwarder that delays every chunk by
// a fixed latency plus uniform jitter and limits bandwidth. Each direction has a reader that
// stamps each chunk (up to 64 KiB) with its release time and a writer that sends it when that
// time comes — a release-time queue, so many chunks are in flight at once as on a real link
// (a per-chunk sleep would serialise traffic). Chunks never overtake each other.
// Faults, for tests of what a broken network does to a pipeline: Cut() ends every link open now
// part-way through the next piece of data it forwards (mid-frame: the peers see a truncated
// frame, then end of stream); Stall() makes every link open now go silent (it keeps reading and
// drops everything, so neither side notices anything but silence); with `blackhole` the proxy
// accepts connections and never answers. Links opened after a fault work normally.
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
  bool blackhole = false;  // accept, read nothing, answer nothing, never connect onwards
};

class Proxy {
 public:
  static Result<std::unique_ptr<Proxy>> Start(const ProxyOptions& options);
  ~Proxy();
  uint16_t port() const { return port_; }
  void Stop();
  // Fault injection on the links open now; returns how many were hit.
  size_t Cut();
  size_t Stall();

 private:
  struct Link;
  explicit Proxy(const ProxyOptions& o) : o_(o) {}
  void AcceptLoop();
  size_t Strike(int fault);  // a Link::Fault on every link open now that has none yet

  ProxyOptions o_;
  Listener listener_;
  uint16_t port_ = 0;
  std::mutex mu_;
  bool stopping_ = false;
  std::vector<std::shared_ptr<Link>> links_;
  std::vector<Socket> held_;  // blackhole connections
  std::thread accept_thread_;
};

}  // namespace daisy::transport
