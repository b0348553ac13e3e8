#include "pipeline/remote.h"

#include <algorithm>
#include <chrono>

#include <openssl/rand.h>

#include "base/log.h"
#include "base/strings.h"

namespace daisy::pipeline {
namespace {
constexpr transport::Millis kConfigureTimeout(30000);
using Clock = std::chrono::steady_clock;
double Seconds(transport::Millis m) { return static_cast<double>(m.count()) / 1000.0; }
}  // namespace

Result<std::unique_ptr<RemoteChain>> RemoteChain::Connect(const RemoteOptions& options,
                                                          std::vector<shard::ShardInfo> local) {
  if (options.workers.empty()) return InvalidArgument("no workers");
  std::unique_ptr<RemoteChain> c(new RemoteChain(options, std::move(local)));
  DAISY_RETURN_IF_ERROR(c->Build());
  return c;
}

RemoteChain::~RemoteChain() { Close(); }

void RemoteChain::Close() {
  std::vector<std::thread> threads;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& c : conns_) c->Shutdown();
    conns_.clear();
    threads.swap(readers_);
    if (pinger_.joinable()) threads.push_back(std::move(pinger_));
    ++generation_;
    if (broken_.empty()) broken_ = "closed";
  }
  cv_.notify_all();
  for (auto& t : threads) t.join();
}

std::string RemoteChain::Who(size_t worker) const {
  const transport::HostPort& w = worker < active_.size() ? active_[worker] : o_.workers[worker];
  return "worker " + w.ToString() + " (stage " + std::to_string(local_.size() + worker) + ")";
}

Status RemoteChain::Dial(size_t i, Clock::time_point deadline, std::shared_ptr<transport::Connection>& conn,
                         shard::ShardInfo& info) {
  const transport::ClusterKey* key = o_.key ? &*o_.key : nullptr;
  std::vector<transport::HostPort> candidates{active_[i]};
  auto add = [&](const transport::HostPort& h) {
    if (std::none_of(candidates.begin(), candidates.end(), [&](const auto& c) { return c.ToString() == h.ToString(); })) {
      candidates.push_back(h);
    }
  };
  add(o_.workers[i]);
  if (i < o_.standby.size()) {
    for (const auto& h : o_.standby[i]) add(h);
  }
  // Without standbys: keep retrying the one worker until the deadline. With them: a short try
  // of each in turn, round after round.
  const transport::Millis each = candidates.size() == 1 ? transport::Millis(0) : transport::Millis(1000);
  Status last = Unavailable("no attempt");
  std::vector<std::string> refused;
  do {
    for (const transport::HostPort& w : candidates) {
      if (std::find(refused.begin(), refused.end(), w.ToString()) != refused.end()) continue;
      const auto left = std::chrono::duration_cast<transport::Millis>(deadline - Clock::now());
      const transport::Millis wait = each.count() == 0 ? std::max(left, transport::Millis(1)) : std::clamp(left, transport::Millis(1), each);
      auto s = transport::ConnectWithRetry(w, wait);
      if (!s.ok()) {
        last = s.status().With("worker " + w.ToString());
        continue;
      }
      auto c = std::make_shared<transport::Connection>(std::move(*s), w.ToString());
      // The handshake within what is left of the deadline (at least a second, at most kAuthTimeout).
      const transport::Millis answer = std::clamp(
          std::chrono::duration_cast<transport::Millis>(deadline - Clock::now()), transport::Millis(1000), kAuthTimeout);
      Status st = transport::AuthenticateDialer(*c, key, answer, o_.tls.get());
      if (st.ok()) st = c->Send(kDescribe, std::span<const uint8_t>{});
      shard::ShardInfo got;
      if (st.ok()) {
        auto f = c->Receive(kMaxControlFrame, answer);
        if (!f.ok()) {
          st = f.status();
        } else if (f->type != kShardInfo) {
          st = DataLoss("unexpected reply type %u", f->type);
        } else {
          st = DecodeShardInfo(f->payload, got);
        }
      }
      // A standby must hold this stage's shard of this model.
      const int stage = static_cast<int>(local_.size() + i);
      if (st.ok() && (w.ToString() != o_.workers[i].ToString() || !infos_.empty())) {
        const std::string& want = !local_.empty() ? local_.front().fingerprint : (i < infos_.size() ? infos_[i].fingerprint : "");
        if (static_cast<int>(got.stage) != stage || (!want.empty() && got.fingerprint != want)) {
          st = InvalidArgument("holds stage %d of model %s, not stage %d of %s", static_cast<int>(got.stage),
                                  got.fingerprint.c_str(), stage, want.c_str());
        }
      }
      if (st.code() == StatusCode::kDeadlineExceeded) {
        // Connected, then silence: a hung process (it may come back) or not a daisy worker.
        c->Shutdown();
        last = DeadlineExceeded("accepted the connection but did not answer within %lld ms (hung, or not a daisy worker)",
                                static_cast<long long>(answer.count()))
                   .With("worker " + w.ToString());
        continue;
      }
      if (!st.ok()) {
        // It answered and is not usable (its key, its shard): no point retrying it.
        c->Shutdown();
        if (candidates.size() == 1) return st.With("worker " + w.ToString());
        last = st.With("worker " + w.ToString());
        DAISY_LOG_WARN("pipeline: not using %s for stage %d: %s", w.ToString().c_str(), stage, st.message().c_str());
        refused.push_back(w.ToString());
        continue;
      }
      if (w.ToString() != active_[i].ToString()) {
        DAISY_LOG_WARN("pipeline: stage %d moves to worker %s", stage, w.ToString().c_str());
      }
      active_[i] = w;
      got.file = w.ToString() + " (" + got.file + ")";
      info = std::move(got);
      conn = std::move(c);
      return Status::Ok();
    }
  } while (Clock::now() < deadline && refused.size() < candidates.size());
  return last;
}

Status RemoteChain::Build(std::span<const int32_t> keep) {
  if (active_.empty()) active_ = o_.workers;
  std::vector<std::shared_ptr<transport::Connection>> conns;
  std::vector<shard::ShardInfo> infos;
  const auto deadline = Clock::now() + o_.connect_deadline;
  for (size_t i = 0; i < o_.workers.size(); ++i) {
    std::shared_ptr<transport::Connection> conn;
    shard::ShardInfo info;
    DAISY_RETURN_IF_ERROR(Dial(i, deadline, conn, info));
    infos.push_back(std::move(info));
    conns.push_back(std::move(conn));
  }
  std::vector<shard::ShardInfo> chain = local_;
  chain.insert(chain.end(), infos.begin(), infos.end());
  DAISY_RETURN_IF_ERROR(shard::CheckChain(chain));
  uint64_t session = 0;
  while (session == 0) RAND_bytes(reinterpret_cast<unsigned char*>(&session), sizeof(session));
  // From the last stage back, so each worker's next hop already belongs to the session.
  for (size_t i = conns.size(); i-- > 0;) {
    Configure cfg;
    cfg.session = session;
    cfg.next_hop = i + 1 < conns.size() ? active_[i + 1].ToString() : "";
    cfg.wire = o_.wire;
    cfg.max_rows = o_.max_rows;
    cfg.max_seqs = o_.max_seqs;
    cfg.seq_capacity = o_.seq_capacity;
    cfg.rope_context = o_.rope_context;
    cfg.resume = configured_[i];  // its KV is kept if it is still the worker we configured last
    cfg.keep.assign(keep.begin(), keep.end());
    DAISY_RETURN_IF_ERROR(conns[i]->Send(kConfigure, EncodeConfigure(cfg)));
    DAISY_ASSIGN_OR_RETURN(transport::Frame f, conns[i]->Receive(kMaxControlFrame, kConfigureTimeout));
    if (f.type == kError) {
      uint64_t id;
      std::string message;
      DAISY_RETURN_IF_ERROR(DecodeError(f.payload, id, message));
      return Unavailable("worker %s: %s", active_[i].ToString().c_str(), message.c_str());
    }
    if (f.type != kConfigured) return DataLoss("worker %s: unexpected reply type %u", active_[i].ToString().c_str(), f.type);
    Configured answer;
    DAISY_RETURN_IF_ERROR(DecodeConfigured(f.payload, o_.max_seqs, answer).With("worker " + active_[i].ToString()));
    configured_[i] = session;
    kept_[i].clear();
    for (const auto& [seq, length] : answer.kept) kept_[i][seq] = length;
  }
  limits_.max_rows = o_.max_rows;
  limits_.max_seqs = o_.max_seqs;
  limits_.d_model = infos.back().d_model;
  limits_.n_vocab = infos.back().n_vocab;
  std::lock_guard<std::mutex> lock(mu_);
  infos_ = std::move(infos);
  conns_ = std::move(conns);
  broken_.clear();
  sent_.clear();
  progress_.assign(conns_.size(), Pong{});
  const uint64_t gen = ++generation_;
  for (size_t i = 0; i < conns_.size(); ++i) {
    readers_.emplace_back([this, i, conn = conns_[i], gen] { ReadLoop(i, conn, gen); });
  }
  // Pongs say how far each worker got: a silence bound and a forward bound both need them.
  if (o_.peer_timeout.count() > 0 || o_.forward_timeout.count() > 0) {
    pinger_ = std::thread([this, gen] { PingLoop(gen); });
  }
  return Status::Ok();
}

void RemoteChain::Fail(uint64_t generation, const std::string& why, std::optional<size_t> worker) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (generation != generation_ || !broken_.empty()) return;
    broken_ = why;
    if (worker && *worker < failures_.size()) ++failures_[*worker];
    // Shutting the sockets down also wakes a sender blocked on a peer that reads nothing.
    for (auto& c : conns_) c->Shutdown();
  }
  DAISY_LOG_WARN("pipeline: %s", why.c_str());
  cv_.notify_all();
}

void RemoteChain::PingLoop(uint64_t gen) {
  // Sends only: the readers judge silence (a ping blocked behind a full socket is harmless, as
  // the reader of that link fails the ring, which shuts the socket and unblocks it).
  std::vector<std::shared_ptr<transport::Connection>> conns;
  {
    std::lock_guard<std::mutex> lock(mu_);
    conns = conns_;
  }
  for (uint64_t nonce = 1;; ++nonce) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait_for(lock, o_.heartbeat, [&] { return generation_ != gen || !broken_.empty(); });
      if (generation_ != gen || !broken_.empty()) return;
    }
    const std::vector<uint8_t> ping = EncodePing(nonce);
    for (auto& c : conns) (void)c->Send(kPing, ping);
  }
}

void RemoteChain::ReadLoop(size_t worker, std::shared_ptr<transport::Connection> conn, uint64_t gen) {
  const bool last = worker + 1 == o_.workers.size();
  const std::string who = Who(worker);
  while (true) {
    auto f = conn->Receive(last ? limits_.MaxResultBytes() : kMaxControlFrame, o_.peer_timeout);
    if (!f.ok()) {
      std::string why = f.status().message();
      if (f.status().code() == StatusCode::kDeadlineExceeded) {
        why = StrFormat("no answer for %.0f s (the process is stopped or hung, or the network to it "
                        "is cut)", Seconds(o_.peer_timeout));
      } else if (f.status().code() == StatusCode::kUnavailable) {
        why = "connection lost (" + why + ")";
      }
      Fail(gen, who + ": " + why, worker);
      return;
    }
    if (f->type == kPong) {
      Pong p;
      Status s = DecodePong(f->payload, p);
      if (!s.ok()) {
        Fail(gen, who + ": " + s.message(), worker);
        return;
      }
      std::lock_guard<std::mutex> lock(mu_);
      if (generation_ == gen) progress_[worker] = p;
    } else if (f->type == kResult) {
      // From the last stage; from another, only the empty result of a forward that ended there.
      ResultMsg r;
      Status s = DecodeResult(f->payload, limits_, r);
      if (s.ok() && !last && !r.seqs.empty()) s = DataLoss("a result with outputs from a stage before the last");
      if (!s.ok()) {
        Fail(gen, who + ": " + s.message(), worker);
        return;
      }
      std::lock_guard<std::mutex> lock(mu_);
      sent_.erase(r.id);
      done_.emplace(r.id, std::move(r));
      cv_.notify_all();
    } else if (f->type == kError) {
      uint64_t id = 0;
      std::string message;
      Status s = DecodeError(f->payload, id, message);
      if (!s.ok() || id == 0) {
        // A worker whose neighbour went away says so: the failure is that neighbour's stage.
        size_t culprit = worker;
        if (s.ok() && message.starts_with(kNextStageLost) && worker + 1 < o_.workers.size()) culprit = worker + 1;
        if (s.ok() && message.starts_with(kPreviousStageLost) && worker > 0) culprit = worker - 1;
        Fail(gen, who + ": " + (s.ok() ? message : s.message()), culprit);
        return;
      }
      std::lock_guard<std::mutex> lock(mu_);
      sent_.erase(id);
      done_.emplace(id, Unavailable("%s", message.c_str()));
      cv_.notify_all();
    } else {
      Fail(gen, who + ": unexpected frame type " + std::to_string(f->type), worker);
      return;
    }
  }
}

Status RemoteChain::Send(const ForwardHeader& h, std::span<const float> hidden) {
  std::shared_ptr<transport::Connection> first;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!broken_.empty()) return Unavailable("the pipeline is down: %s", broken_.c_str());
    first = conns_.front();
    sent_[h.id] = Clock::now();
  }
  ForwardHeader out = h;
  out.wire = o_.wire;
  const int n = h.total_rows();
  std::vector<uint8_t> act(static_cast<size_t>(n) * WireRowBytes(o_.wire, h.dim));
  EncodeRows(o_.wire, hidden.data(), n, h.dim, act.data());
  const std::vector<uint8_t> header = EncodeForwardHeader(out);
  const std::span<const uint8_t> pieces[2] = {header, act};
  bytes_sent_ += header.size() + act.size() + transport::kHeaderBytes;
  Status s = first->Send(kForward, pieces);
  if (s.ok()) return Status::Ok();
  // A worker whose session ends reports why on its link before closing it, and a reset link
  // still delivers what arrived first: give the readers a moment to name the stage that failed
  // (say, the one after the worker this send went to) rather than "connection reset".
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait_for(lock, std::chrono::milliseconds(500), [&] { return !broken_.empty(); });
  if (!broken_.empty()) return Unavailable("the pipeline is down: %s", broken_.c_str());
  return Unavailable("the pipeline is down: worker %s: %s", first->peer().c_str(), s.message().c_str());
}

std::string RemoteChain::Laggard(uint64_t id) const {
  for (size_t i = 0; i < progress_.size(); ++i) {
    const Pong& p = progress_[i];
    if (p.done >= id) continue;
    return Who(i) + (p.nonce == 0   ? " has not reported its progress" :
                     p.busy == id   ? " is still computing it" :
                     p.done == 0    ? " has finished no forward" :
                                      StrFormat(" has not finished it (by its last report it had finished forward %llu)",
                                                static_cast<unsigned long long>(p.done)));
  }
  return "every worker has finished it, but no result arrived";
}

Result<ResultMsg> RemoteChain::Wait(uint64_t id) {
  std::unique_lock<std::mutex> lock(mu_);
  const auto ready = [&] { return done_.count(id) != 0 || !broken_.empty(); };
  const uint64_t gen = generation_;
  if (o_.forward_timeout.count() > 0) {
    // The bound counts from the send: a forward queued behind others has no more time.
    const auto it = sent_.find(id);
    const auto deadline = (it != sent_.end() ? it->second : Clock::now()) + o_.forward_timeout;
    if (!cv_.wait_until(lock, deadline, ready)) {
      const std::string why = StrFormat("no result for forward %llu within %.0f s: %s",
                                        static_cast<unsigned long long>(id), Seconds(o_.forward_timeout),
                                        Laggard(id).c_str());
      lock.unlock();
      Fail(gen, why);
      lock.lock();
    }
  } else {
    cv_.wait(lock, ready);
  }
  auto it = done_.find(id);
  if (it == done_.end()) return Unavailable("the pipeline is down: %s", broken_.c_str());
  Result<ResultMsg> r = std::move(it->second);
  done_.erase(it);
  return r;
}

Status RemoteChain::Release(std::span<const int32_t> seqs) {
  for (auto& stage : kept_) {
    for (int32_t s : seqs) stage.erase(s);
  }
  transport::Encoder e;
  e.Put<uint32_t>(static_cast<uint32_t>(seqs.size()));
  for (int32_t s : seqs) e.Put<int32_t>(s);
  std::vector<std::shared_ptr<transport::Connection>> conns;
  {
    std::lock_guard<std::mutex> lock(mu_);
    // A ring that is down frees nothing now: the next Build's Configure says what each worker
    // kept, and the sequences that ended meanwhile are released then (Pipeline::Recover).
    if (!broken_.empty()) return Status::Ok();
    conns = conns_;
  }
  for (auto& c : conns) DAISY_RETURN_IF_ERROR(c->Send(kRelease, e.bytes()));
  return Status::Ok();
}

bool RemoteChain::broken() {
  std::lock_guard<std::mutex> lock(mu_);
  return !broken_.empty();
}

std::string RemoteChain::why_broken() {
  std::lock_guard<std::mutex> lock(mu_);
  return broken_;
}

Status RemoteChain::Reconnect(std::span<const int32_t> keep) {
  Close();
  {
    std::lock_guard<std::mutex> lock(mu_);
    done_.clear();
    sent_.clear();
  }
  return Build(keep);
}

std::vector<int64_t> RemoteChain::held_sequences() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<int64_t> out(o_.workers.size(), -1);
  if (!broken_.empty()) return out;  // the last pongs are of a ring that is gone
  for (size_t i = 0; i < progress_.size() && i < out.size(); ++i) {
    if (progress_[i].nonce != 0) out[i] = progress_[i].held;
  }
  return out;
}

std::vector<uint64_t> RemoteChain::failures() const {
  std::lock_guard<std::mutex> lock(mu_);
  return failures_;
}

}  // namespace daisy::pipeline
