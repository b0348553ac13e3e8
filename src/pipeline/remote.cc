#include "pipeline/remote.h"

#include <chrono>

#include <openssl/rand.h>

#include "base/log.h"

namespace daisy::pipeline {
namespace {
constexpr transport::Millis kConfigureTimeout(30000);
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
  std::vector<std::thread> readers;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& c : conns_) c->Shutdown();
    conns_.clear();
    readers.swap(readers_);
    ++generation_;
    if (broken_.empty()) broken_ = "closed";
  }
  cv_.notify_all();
  for (auto& t : readers) t.join();
}

Status RemoteChain::Build() {
  const transport::ClusterKey* key = o_.key ? &*o_.key : nullptr;
  std::vector<std::shared_ptr<transport::Connection>> conns;
  std::vector<shard::ShardInfo> infos;
  for (const transport::HostPort& w : o_.workers) {
    auto s = transport::ConnectWithRetry(w, o_.connect_deadline);
    if (!s.ok()) return s.status().With("worker " + w.ToString());
    auto conn = std::make_shared<transport::Connection>(std::move(*s), w.ToString());
    DAISY_RETURN_IF_ERROR(transport::AuthenticateDialer(*conn, key, kAuthTimeout).With("worker " + w.ToString()));
    DAISY_RETURN_IF_ERROR(conn->Send(kDescribe, std::span<const uint8_t>{}));
    DAISY_ASSIGN_OR_RETURN(transport::Frame f, conn->Receive(kMaxControlFrame, kAuthTimeout));
    shard::ShardInfo info;
    if (f.type != kShardInfo) return DataLoss("worker %s: unexpected reply type %u", w.ToString().c_str(), f.type);
    DAISY_RETURN_IF_ERROR(DecodeShardInfo(f.payload, info));
    info.file = w.ToString() + " (" + info.file + ")";
    infos.push_back(info);
    conns.push_back(conn);
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
    cfg.next_hop = i + 1 < conns.size() ? o_.workers[i + 1].ToString() : "";
    cfg.wire = o_.wire;
    cfg.max_rows = o_.max_rows;
    cfg.max_seqs = o_.max_seqs;
    cfg.seq_capacity = o_.seq_capacity;
    DAISY_RETURN_IF_ERROR(conns[i]->Send(kConfigure, EncodeConfigure(cfg)));
    DAISY_ASSIGN_OR_RETURN(transport::Frame f, conns[i]->Receive(kMaxControlFrame, kConfigureTimeout));
    if (f.type == kError) {
      uint64_t id;
      std::string message;
      DAISY_RETURN_IF_ERROR(DecodeError(f.payload, id, message));
      return Unavailable("worker %s: %s", o_.workers[i].ToString().c_str(), message.c_str());
    }
    if (f.type != kConfigured) return DataLoss("worker %s: unexpected reply type %u", o_.workers[i].ToString().c_str(), f.type);
  }
  limits_.max_rows = o_.max_rows;
  limits_.max_seqs = o_.max_seqs;
  limits_.d_model = infos.back().d_model;
  limits_.n_vocab = infos.back().n_vocab;
  std::lock_guard<std::mutex> lock(mu_);
  infos_ = std::move(infos);
  conns_ = std::move(conns);
  broken_.clear();
  const uint64_t gen = ++generation_;
  for (size_t i = 0; i < conns_.size(); ++i) {
    readers_.emplace_back([this, i, conn = conns_[i], gen] { ReadLoop(i, conn, gen); });
  }
  return Status::Ok();
}

void RemoteChain::Fail(uint64_t generation, const std::string& why) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (generation != generation_ || !broken_.empty()) return;
    broken_ = why;
    for (auto& c : conns_) c->Shutdown();
  }
  DAISY_LOG_WARN("pipeline: %s", why.c_str());
  cv_.notify_all();
}

void RemoteChain::ReadLoop(size_t worker, std::shared_ptr<transport::Connection> conn, uint64_t gen) {
  const bool last = worker + 1 == o_.workers.size();
  const std::string who = "worker " + conn->peer() + " (stage " +
                          std::to_string(local_.size() + worker) + ")";
  while (true) {
    auto f = conn->Receive(last ? limits_.MaxResultBytes() : kMaxControlFrame);
    if (!f.ok()) {
      Fail(gen, who + ": " + (f.status().code() == StatusCode::kUnavailable
                                  ? "connection lost (" + f.status().message() + ")"
                                  : f.status().message()));
      return;
    }
    if (f->type == kResult && last) {
      ResultMsg r;
      Status s = DecodeResult(f->payload, limits_, r);
      if (!s.ok()) {
        Fail(gen, who + ": " + s.message());
        return;
      }
      std::lock_guard<std::mutex> lock(mu_);
      done_.emplace(r.id, std::move(r));
      cv_.notify_all();
    } else if (f->type == kError) {
      uint64_t id = 0;
      std::string message;
      Status s = DecodeError(f->payload, id, message);
      if (!s.ok() || id == 0) {
        Fail(gen, who + ": " + (s.ok() ? message : s.message()));
        return;
      }
      std::lock_guard<std::mutex> lock(mu_);
      done_.emplace(id, Unavailable("%s", message.c_str()));
      cv_.notify_all();
    } else {
      Fail(gen, who + ": unexpected frame type " + std::to_string(f->type));
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

Result<ResultMsg> RemoteChain::Wait(uint64_t id) {
  std::unique_lock<std::mutex> lock(mu_);
  const auto ready = [&] { return done_.count(id) != 0 || !broken_.empty(); };
  if (o_.forward_timeout.count() > 0) {
    if (!cv_.wait_for(lock, o_.forward_timeout, ready)) {
      return Unavailable("no result from the pipeline within %lld ms",
                         static_cast<long long>(o_.forward_timeout.count()));
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
  transport::Encoder e;
  e.Put<uint32_t>(static_cast<uint32_t>(seqs.size()));
  for (int32_t s : seqs) e.Put<int32_t>(s);
  std::vector<std::shared_ptr<transport::Connection>> conns;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!broken_.empty()) return Status::Ok();  // nothing left to free
    conns = conns_;
  }
  for (auto& c : conns) DAISY_RETURN_IF_ERROR(c->Send(kRelease, e.bytes()));
  return Status::Ok();
}

bool RemoteChain::broken() {
  std::lock_guard<std::mutex> lock(mu_);
  return !broken_.empty();
}

Status RemoteChain::Reconnect() {
  Close();
  {
    std::lock_guard<std::mutex> lock(mu_);
    done_.clear();
  }
  return Build();
}

}  // namespace daisy::pipeline
