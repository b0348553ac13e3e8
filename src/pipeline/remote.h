// RemoteChain: the coordinator's side of the workers. Connects to every worker (with retry: start
// order does not matter), authenticates, asks each for its shard, checks that they and the
// coordinator's own shards form one model's pipeline, then configures the ring from the last
// stage back: each worker dials the next, the last answers the coordinator on the connection the
// coordinator opened. Forwards go to the first worker; results come back from the last. Any lost
// connection fails every pending forward at once with a message naming the worker; Reconnect()
// builds the ring again.
//
// Silence is failure too: every worker is pinged every `heartbeat` and answers from its reader
// thread, so a worker that answers nothing for `peer_timeout` (a stopped process, a hung host, a
// cut cable that TCP has not noticed) fails the ring naming it; and a forward with no result
// `forward_timeout` after it was sent fails the ring naming the first stage that has not
// finished it (its pongs say which forward each worker finished last).
#pragma once

#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "pipeline/messages.h"
#include "transport/auth.h"

namespace daisy::pipeline {

struct RemoteOptions {
  std::vector<transport::HostPort> workers;
  std::optional<transport::ClusterKey> key;
  std::shared_ptr<const transport::TlsContext> tls;  // set: links to the workers are TLS
  WireType wire = WireType::kF32;
  int max_rows = 256;
  int max_seqs = 64;
  int seq_capacity = 4096;
  int rope_context = 0;  // StageOptions::rope_context
  transport::Millis connect_deadline{30000};  // keep retrying unreachable workers this long
  transport::Millis forward_timeout{300000};  // a forward's result, at most this after sending (0: no bound)
  transport::Millis peer_timeout{10000};      // a worker silent this long fails the ring (0: never)
  transport::Millis heartbeat{1000};          // how often each worker is pinged
  // Standby workers: standby[i] (may be missing or empty) lists workers holding the same shard
  // as workers[i]; when the one in use is unreachable, the ring is built with the next that
  // answers and holds that shard (checked by fingerprint and stage).
  std::vector<std::vector<transport::HostPort>> standby;
};

class RemoteChain {
 public:
  // `local`: the shards the coordinator runs itself (stage 0 .. k-1), for the chain check.
  static Result<std::unique_ptr<RemoteChain>> Connect(const RemoteOptions& options,
                                                      std::vector<shard::ShardInfo> local);
  ~RemoteChain();

  // Sends a forward (activations [rows, d_model] as f32, converted to the wire type).
  Status Send(const ForwardHeader& h, std::span<const float> hidden);
  // Waits for forward `id`'s result (or the error a stage reported for it).
  Result<ResultMsg> Wait(uint64_t id);
  // Frees sequences on every worker.
  Status Release(std::span<const int32_t> seqs);
  bool broken();
  // Why the ring is down ("" while it is up).
  std::string why_broken();
  // Drops every link and builds the ring again (a restarted worker is picked up). A worker
  // that is still the one configured last keeps its KV cache of the sequences in `keep`, and
  // frees the rest before it answers: kept() says what it holds.
  Status Reconnect(std::span<const int32_t> keep = {});
  // Per worker, since the ring was last built: the sequences whose KV it kept, with their
  // lengths (empty for a worker that started afresh).
  const std::vector<std::map<int32_t, int32_t>>& kept() const { return kept_; }
  const std::vector<shard::ShardInfo>& shards() const { return infos_; }
  uint64_t wire_bytes_sent() const { return bytes_sent_; }
  // Per worker, the sequences holding KV there as its last pong said (-1: no pong yet, or the
  // ring is down). Thread-safe.
  std::vector<int64_t> held_sequences() const;
  // Per worker, the times the ring went down because of its link (lost, silent, a bad frame).
  std::vector<uint64_t> failures() const;

 private:
  explicit RemoteChain(RemoteOptions o, std::vector<shard::ShardInfo> local)
      : o_(std::move(o)), local_(std::move(local)), failures_(o_.workers.size(), 0),
        configured_(o_.workers.size(), 0), kept_(o_.workers.size()) {}
  Status Build(std::span<const int32_t> keep = {});
  void Close();
  void ReadLoop(size_t worker, std::shared_ptr<transport::Connection> conn, uint64_t generation);
  void PingLoop(uint64_t generation);
  // Takes the ring down (once per generation) for `why`; `worker`: the one whose link failed.
  void Fail(uint64_t generation, const std::string& why, std::optional<size_t> worker = std::nullopt);
  // "worker HOST:PORT (stage i)"
  std::string Who(size_t worker) const;
  // Under mu_: the first worker that has not finished forward `id` (its pongs), with why.
  std::string Laggard(uint64_t id) const;

  // Stage i's worker: the one in use (o_.workers[i], else a standby), connected and described;
  // tries each candidate, the one in use first, until `deadline`.
  Status Dial(size_t i, std::chrono::steady_clock::time_point deadline, std::shared_ptr<transport::Connection>& conn,
              shard::ShardInfo& info);

  RemoteOptions o_;
  std::vector<transport::HostPort> active_;  // per stage, the worker in use
  std::vector<shard::ShardInfo> local_;
  std::vector<shard::ShardInfo> infos_;  // of the workers
  Limits limits_;
  std::vector<std::shared_ptr<transport::Connection>> conns_;
  std::vector<std::thread> readers_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  uint64_t generation_ = 0;
  std::string broken_;  // why the current ring is down ("" while it is up)
  std::map<uint64_t, Result<ResultMsg>> done_;
  std::map<uint64_t, std::chrono::steady_clock::time_point> sent_;  // forwards awaiting results
  std::vector<Pong> progress_;  // per worker, its last pong
  std::vector<uint64_t> failures_;  // per worker, ring failures its link caused
  std::vector<uint64_t> configured_;  // per stage, the session its worker last confirmed (0: none)
  std::vector<std::map<int32_t, int32_t>> kept_;  // per stage, what its worker kept (Build)
  std::thread pinger_;
  uint64_t bytes_sent_ = 0;
};

}  // namespace daisy::pipeline
