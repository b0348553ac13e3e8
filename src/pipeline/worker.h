// Worker: serves one shard (`daisy worker`). Accepts connections, authenticates each before
// parsing anything else, and serves the current session — set up by a coordinator's Configure:
// forwards arrive from the coordinator (stage 1) or from the previous stage (a Join link), run
// on the shard's stage, and go to the next stage (a persistent connection this worker dials) or,
// from the last stage, straight back to the coordinator. A reader thread per connection, one
// compute thread and one sender thread: receiving, computing and sending overlap, so several
// forwards can be in flight. A malformed frame closes only that connection.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "pipeline/local_stage.h"
#include "pipeline/messages.h"
#include "shard/load.h"
#include "transport/auth.h"

namespace daisy::pipeline {

struct WorkerOptions {
  transport::HostPort listen;
  std::optional<transport::ClusterKey> key;  // none: open cluster
  std::shared_ptr<const transport::TlsContext> tls;  // set: every link of this worker is TLS
  int threads = 0;                           // compute threads (0: all cores)
  size_t kv_budget_bytes = 0;                // 0: no budget beyond the sequence limits
  const kernels::KernelTable* kernels = nullptr;  // null: the best for this CPU
  // A session that ended (its coordinator or a neighbour gone) leaves its KV cache this long
  // for the coordinator to resume it (Configure::resume), then it is freed.
  std::chrono::milliseconds keep_ended_session{std::chrono::minutes(10)};
};

class Worker {
 public:
  static Result<std::unique_ptr<Worker>> Start(shard::Shard shard, WorkerOptions options);
  ~Worker();
  uint16_t port() const { return port_; }
  const shard::ShardInfo& info() const { return shard_.info; }
  // Sequences holding KV on this worker's stage now (updated after each task). Thread-safe.
  size_t held_sequences() const { return held_.load(); }
  // Connection threads not yet joined (finished ones are joined as new connections arrive).
  size_t connection_threads();
  // Closes every connection and joins every thread.
  void Stop();

 private:
  struct Conn;
  struct Task;
  Worker(shard::Shard shard, WorkerOptions options);
  void AcceptLoop();
  void Serve(std::shared_ptr<Conn> c);
  Status Dispatch(const std::shared_ptr<Conn>& c, transport::Frame& f);
  Status HandleConfigure(const std::shared_ptr<Conn>& c, const Configure& cfg, Configured& kept);
  void WatchDownstream(std::shared_ptr<transport::Connection> down, uint64_t session);
  void EndSession(uint64_t session, const std::string& why);
  void ComputeLoop();
  void SendLoop();
  void Push(Task task);
  void Send(std::shared_ptr<transport::Connection> to, uint16_t type, std::vector<uint8_t> a,
            std::vector<uint8_t> b, uint64_t session);
  Limits CurrentLimits();

  shard::Shard shard_;
  WorkerOptions options_;
  const kernels::KernelTable* kernels_;
  std::unique_ptr<runtime::ThreadPool> pool_;
  std::unique_ptr<LocalStage> stage_;  // compute thread only
  runtime::StageOptions stage_options_;  // compute thread only: stage_'s
  uint64_t stage_session_ = 0;           // compute thread only: the session stage_'s KV belongs to
  // The last forward the compute thread finished, and the one it is computing (0: none): what
  // a Pong reports.
  std::atomic<uint64_t> done_{0}, busy_{0};
  std::atomic<size_t> held_{0};
  transport::Listener listener_;
  uint16_t port_ = 0;

  std::mutex mu_;  // guards everything below
  bool stopping_ = false;
  uint64_t session_ = 0;  // 0: none
  // The session that ended last, while its KV cache is kept for a resume (0: none), and when.
  uint64_t ended_session_ = 0;
  std::chrono::steady_clock::time_point ended_at_;
  Configure config_;
  std::shared_ptr<Conn> coordinator_;
  std::shared_ptr<transport::Connection> downstream_;
  std::vector<std::shared_ptr<Conn>> conns_;
  // Connection readers and downstream watchers. A finished one is joined when the next starts,
  // so a long-lived worker that sees many connections does not keep their threads.
  struct Handler {
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> done;
  };
  std::vector<Handler> threads_;
  void SpawnLocked(std::function<void()> fn);  // mu_ held
  std::deque<Task> tasks_;
  std::condition_variable tasks_cv_;
  struct Outgoing {
    std::shared_ptr<transport::Connection> to;
    uint16_t type;
    std::vector<uint8_t> a, b;
    uint64_t session;
  };
  std::deque<Outgoing> out_;
  std::condition_variable out_cv_;
  std::thread accept_thread_, compute_thread_, send_thread_;
};

}  // namespace daisy::pipeline
