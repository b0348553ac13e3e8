// A worker as a network peer sees it: a real pipeline::Worker (the last stage of a small model,
// so it never dials anywhere) in this process, and each input is what one connection sends it
// after the authentication (open cluster): Describe, Configure, Join, Forward (computed on the
// model), Ping, Release, in any order and shape. The worker must answer or close that
// connection and keep serving; crashes, hangs and sanitizer reports are findings. The shard
// comes from $DAISY_FUZZ_SHARD (scripts/fuzz.sh compiles one). KV is capped at 64 MB: without
// --kv-budget a worker sizes its KV by what the coordinator's Configure asks.
#include <sys/socket.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>

#include "pipeline/worker.h"
#include "shard/load.h"
#include "transport/auth.h"
#include "transport/net.h"

namespace {

using namespace daisy;

pipeline::Worker* TheWorker() {
  static std::unique_ptr<pipeline::Worker> worker = [] {
    const char* path = std::getenv("DAISY_FUZZ_SHARD");
    if (path == nullptr) {
      std::fprintf(stderr, "fuzz_worker: set DAISY_FUZZ_SHARD to the last stage of a compiled model\n");
      std::abort();
    }
    auto shard = shard::LoadShard(path);
    if (!shard.ok() || !shard->info.head()) {
      std::fprintf(stderr, "fuzz_worker: %s: %s\n", path, shard.ok() ? "not the last stage" : shard.status().message().c_str());
      std::abort();
    }
    pipeline::WorkerOptions o;
    o.listen = {"127.0.0.1", 0};
    o.threads = 1;
    o.kv_budget_bytes = size_t{64} << 20;
    auto w = pipeline::Worker::Start(std::move(*shard), std::move(o));
    if (!w.ok()) std::abort();
    return std::move(*w);
  }();
  return worker.get();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 1 << 16) return 0;
  pipeline::Worker* w = TheWorker();
  auto s = transport::Connect({"127.0.0.1", w->port()}, transport::Millis(2000));
  if (!s.ok()) std::abort();  // the worker stopped accepting: a finding
  const int fd = s->fd();
  transport::Connection conn(std::move(*s), "worker");
  if (!transport::AuthenticateDialer(conn, nullptr, transport::Millis(2000)).ok()) std::abort();
  // The input as raw bytes on the authenticated link, then hang up and read what comes back.
  size_t at = 0;
  while (at < size) {
    const ssize_t n = ::send(fd, data + at, size - at, MSG_NOSIGNAL);
    if (n <= 0) break;  // the worker closed the connection early: fine
    at += static_cast<size_t>(n);
  }
  ::shutdown(fd, SHUT_WR);
  for (int i = 0; i < 256; ++i) {
    auto f = conn.Receive(size_t{1} << 20, transport::Millis(2000));
    if (!f.ok()) {
      if (f.status().code() == StatusCode::kDeadlineExceeded) std::abort();  // a worker that hangs
      break;
    }
  }
  return 0;
}
