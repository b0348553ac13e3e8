#include "pipeline/worker.h"

#include <algorithm>
#include <future>

#include "base/log.h"
#include "base/strings.h"

namespace daisy::pipeline {
namespace {
constexpr transport::Millis kNextHopDeadline(10000);
// A Configure waits this long for the compute thread to finish the forward it is computing.
constexpr std::chrono::seconds kConfigureWait(60);
}  // namespace

struct Worker::Conn {
  Conn(transport::Socket s, std::string peer)
      : conn(std::make_shared<transport::Connection>(std::move(s), std::move(peer))) {}
  std::shared_ptr<transport::Connection> conn;
  enum Role { kNew, kCoordinator, kUpstream } role = kNew;
  uint64_t session = 0;
};

struct Worker::Task {
  enum class Kind { kForward, kRelease, kReset, kFree } kind = Kind::kForward;
  uint64_t session = 0;
  ForwardHeader header;
  std::vector<uint8_t> payload;  // the forward frame (activations inside)
  size_t act_offset = 0, act_bytes = 0;
  std::vector<int32_t> seqs;     // kRelease
  Configure config;              // kReset
  // kReset: what the stage kept (a resumed session), for the Configured answer.
  std::shared_ptr<std::promise<Configured>> kept;
};

Worker::Worker(shard::Shard shard, WorkerOptions options)
    : shard_(std::move(shard)), options_(std::move(options)) {}

Result<std::unique_ptr<Worker>> Worker::Start(shard::Shard shard, WorkerOptions options) {
  std::unique_ptr<Worker> w(new Worker(std::move(shard), std::move(options)));
  w->kernels_ = w->options_.kernels != nullptr ? w->options_.kernels : &kernels::BestKernels();
  w->pool_ = std::make_unique<runtime::ThreadPool>(w->options_.threads);
  DAISY_ASSIGN_OR_RETURN(w->listener_, transport::Listener::Listen(w->options_.listen));
  w->port_ = w->listener_.port();
  w->config_.seq_capacity = 1;  // no session yet: a minimal stage until the first Configure
  w->config_.max_seqs = 1;
  w->config_.max_rows = 1;
  w->compute_thread_ = std::thread([p = w.get()] { p->ComputeLoop(); });
  w->send_thread_ = std::thread([p = w.get()] { p->SendLoop(); });
  w->accept_thread_ = std::thread([p = w.get()] { p->AcceptLoop(); });
  return w;
}

Worker::~Worker() { Stop(); }

void Worker::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return;
    stopping_ = true;
    for (auto& c : conns_) c->conn->Shutdown();
    if (downstream_) downstream_->Shutdown();
  }
  listener_.Shutdown();
  tasks_cv_.notify_all();
  out_cv_.notify_all();
  if (accept_thread_.joinable()) accept_thread_.join();
  // No thread is added once stopping_ is set (AcceptLoop and HandleConfigure check it).
  std::vector<Handler> threads;
  {
    std::lock_guard<std::mutex> lock(mu_);
    threads.swap(threads_);
  }
  for (auto& h : threads) h.thread.join();
  if (compute_thread_.joinable()) compute_thread_.join();
  if (send_thread_.joinable()) send_thread_.join();
}

Limits Worker::CurrentLimits() {
  Limits l;
  l.max_rows = config_.max_rows;
  l.max_seqs = config_.max_seqs;
  l.d_model = shard_.info.d_model;
  l.n_vocab = shard_.info.n_vocab;
  return l;
}

void Worker::SpawnLocked(std::function<void()> fn) {
  std::erase_if(threads_, [](Handler& h) {
    if (!h.done->load()) return false;
    h.thread.join();  // it has finished: returns at once
    return true;
  });
  auto done = std::make_shared<std::atomic<bool>>(false);
  threads_.push_back({std::thread([fn = std::move(fn), done] {
                        fn();
                        done->store(true);
                      }),
                      done});
}

size_t Worker::connection_threads() {
  std::lock_guard<std::mutex> lock(mu_);
  return threads_.size();
}

void Worker::AcceptLoop() {
  while (true) {
    std::string peer;
    auto s = listener_.Accept(&peer);
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return;
    if (!s.ok()) {
      DAISY_LOG_WARN("worker: %s", s.status().message().c_str());
      continue;
    }
    auto c = std::make_shared<Conn>(std::move(*s), peer);
    conns_.push_back(c);
    SpawnLocked([this, c] { Serve(c); });
  }
}

void Worker::Serve(std::shared_ptr<Conn> c) {
  const transport::ClusterKey* key = options_.key ? &*options_.key : nullptr;
  Status s = transport::AuthenticateAcceptor(*c->conn, key, kAuthTimeout, options_.tls.get());
  if (!s.ok()) {
    DAISY_LOG_WARN("worker: dropping %s: %s", c->conn->peer().c_str(), s.message().c_str());
  } else {
    while (true) {
      size_t max;
      {
        std::lock_guard<std::mutex> lock(mu_);
        const bool data_link = c->role != Conn::kNew && c->session == session_;
        max = data_link ? std::max(kMaxControlFrame, CurrentLimits().MaxForwardBytes()) : kMaxControlFrame;
      }
      auto f = c->conn->Receive(max);
      if (!f.ok()) {
        s = f.status();
        break;
      }
      s = Dispatch(c, *f);
      if (!s.ok()) break;
    }
    if (s.code() == StatusCode::kDataLoss || s.code() == StatusCode::kInvalidArgument) {
      DAISY_LOG_WARN("worker: closing the connection from %s: %s", c->conn->peer().c_str(),
                     s.message().c_str());
    } else {
      DAISY_LOG_DEBUG("worker: %s: %s", c->conn->peer().c_str(), s.message().c_str());
    }
  }
  c->conn->Shutdown();
  if (c->role != Conn::kNew) {
    EndSession(c->session, (c->role == Conn::kCoordinator ? std::string("the coordinator ") : std::string(kPreviousStageLost)) +
                               c->conn->peer() + " disconnected: " + s.message());
  }
  std::lock_guard<std::mutex> lock(mu_);
  std::erase(conns_, c);
}

Status Worker::Dispatch(const std::shared_ptr<Conn>& c, transport::Frame& f) {
  switch (f.type) {
    case kDescribe:
      return c->conn->Send(kShardInfo, EncodeShardInfo(shard_.info));
    case kConfigure: {
      Configure cfg;
      DAISY_RETURN_IF_ERROR(DecodeConfigure(f.payload, cfg));
      Configured kept;
      Status s = HandleConfigure(c, cfg, kept);
      if (!s.ok()) {
        DAISY_LOG_WARN("worker: configure from %s failed: %s", c->conn->peer().c_str(), s.message().c_str());
        return c->conn->Send(kError, EncodeError(0, s.message()));
      }
      return c->conn->Send(kConfigured, EncodeConfigured(kept));
    }
    case kJoin: {
      transport::Decoder d(f.payload, "join");
      uint64_t session = 0;
      DAISY_RETURN_IF_ERROR(d.Get(session));
      DAISY_RETURN_IF_ERROR(d.ExpectEnd());
      std::lock_guard<std::mutex> lock(mu_);
      if (session == 0 || session != session_ || c->role != Conn::kNew) {
        return InvalidArgument("join for session %llx, current session %llx",
                               static_cast<unsigned long long>(session),
                               static_cast<unsigned long long>(session_));
      }
      c->role = Conn::kUpstream;
      c->session = session;
      return Status::Ok();
    }
    case kForward: {
      Task t;
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (c->role == Conn::kNew || c->session != session_) {
          return InvalidArgument("a forward outside a session");
        }
        t.session = session_;
        std::span<const uint8_t> act;
        // Only the last stage reads the output requests; the others pass them on unread.
        DAISY_RETURN_IF_ERROR(DecodeForward(f.payload, CurrentLimits(), shard_.info.head(), t.header, act));
        t.act_offset = static_cast<size_t>(act.data() - f.payload.data());
        t.act_bytes = act.size();
      }
      t.kind = Task::Kind::kForward;
      t.payload = std::move(f.payload);
      Push(std::move(t));
      return Status::Ok();
    }
    case kPing: {
      uint64_t nonce = 0;
      DAISY_RETURN_IF_ERROR(DecodePing(f.payload, nonce));
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (c->role != Conn::kCoordinator || c->session != session_) return InvalidArgument("a ping outside a session");
      }
      // Answered here, on the reader thread: a worker busy computing still answers at once.
      return c->conn->Send(kPong, EncodePong({nonce, done_.load(), busy_.load(), static_cast<uint32_t>(held_.load())}));
    }
    case kRelease: {
      transport::Decoder d(f.payload, "release");
      uint32_t n = 0;
      DAISY_RETURN_IF_ERROR(d.Get(n));
      if (n > 65536) return DataLoss("release of %u sequences", n);
      Task t;
      t.kind = Task::Kind::kRelease;
      t.seqs.resize(n);
      for (int32_t& s : t.seqs) DAISY_RETURN_IF_ERROR(d.Get(s));
      DAISY_RETURN_IF_ERROR(d.ExpectEnd());
      std::lock_guard<std::mutex> lock(mu_);
      // After a session ends, a late release has nothing left to free.
      if (c->role != Conn::kCoordinator || c->session != session_) return Status::Ok();
      t.session = session_;
      tasks_.push_back(std::move(t));
      tasks_cv_.notify_one();
      return Status::Ok();
    }
    default:
      return DataLoss("unexpected frame type %u", f.type);
  }
}

Status Worker::HandleConfigure(const std::shared_ptr<Conn>& c, const Configure& cfg, Configured& kept) {
  if (cfg.session == 0) return InvalidArgument("session 0 is reserved");
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (c->role == Conn::kUpstream) return InvalidArgument("configure on a data link");
  }
  const bool last = shard_.info.head();
  if (last != cfg.next_hop.empty()) {
    return InvalidArgument(last ? "this worker holds the last stage but was given a next hop"
                                : "this worker is not the last stage but was given no next hop");
  }
  // Replace any previous session: its links close, its sequences are forgotten.
  EndSession(0, "a new coordinator session");
  std::shared_ptr<transport::Connection> down;
  if (!last) {
    DAISY_ASSIGN_OR_RETURN(transport::HostPort hop, transport::ParseHostPort(cfg.next_hop));
    DAISY_ASSIGN_OR_RETURN(transport::Socket s, transport::ConnectWithRetry(hop, kNextHopDeadline));
    down = std::make_shared<transport::Connection>(std::move(s), hop.ToString());
    DAISY_RETURN_IF_ERROR(transport::AuthenticateDialer(*down, options_.key ? &*options_.key : nullptr,
                                                        kAuthTimeout, options_.tls.get())
                              .With("next stage " + hop.ToString()));
    transport::Encoder join;
    join.Put<uint64_t>(cfg.session);
    DAISY_RETURN_IF_ERROR(down->Send(kJoin, join.bytes()));
  }
  std::unique_lock<std::mutex> lock(mu_);
  if (stopping_) return Unavailable("stopping");
  session_ = cfg.session;
  config_ = cfg;
  c->role = Conn::kCoordinator;
  c->session = cfg.session;
  coordinator_ = c;
  downstream_ = down;
  Task reset;
  reset.kind = Task::Kind::kReset;
  reset.session = cfg.session;
  reset.config = cfg;
  reset.kept = std::make_shared<std::promise<Configured>>();
  std::future<Configured> answer = reset.kept->get_future();
  tasks_.push_back(std::move(reset));
  tasks_cv_.notify_one();
  if (down) SpawnLocked([this, down, s = cfg.session] { WatchDownstream(down, s); });
  lock.unlock();
  // The compute thread takes the reset after the forward it may be computing: what it keeps
  // includes that forward's rows.
  if (answer.wait_for(kConfigureWait) != std::future_status::ready) {
    return DeadlineExceeded("the stage did not finish its forward within %lld s",
                            static_cast<long long>(kConfigureWait.count()));
  }
  try {
    kept = answer.get();
  } catch (const std::future_error&) {
    return Unavailable("stopping");
  }
  DAISY_LOG_INFO("worker: session %llx: %s -> %s (%s wire)%s", static_cast<unsigned long long>(cfg.session),
                 c->conn->peer().c_str(), last ? "coordinator" : cfg.next_hop.c_str(), WireTypeName(cfg.wire),
                 cfg.resume == 0 ? "" : StrFormat(", resuming with %zu sequences kept", kept.kept.size()).c_str());
  return Status::Ok();
}

void Worker::WatchDownstream(std::shared_ptr<transport::Connection> down, uint64_t session) {
  // The next stage sends nothing on this link: any frame or the end of the stream ends it.
  auto f = down->Receive(kMaxControlFrame);
  EndSession(session, kNextStageLost + down->peer() + " disconnected" +
                          (f.ok() ? "" : ": " + f.status().message()));
}

void Worker::EndSession(uint64_t session, const std::string& why) {
  std::lock_guard<std::mutex> lock(mu_);
  if (session_ == 0 || (session != 0 && session != session_)) return;
  if (session != 0) {
    DAISY_LOG_WARN("worker: session %llx ended: %s", static_cast<unsigned long long>(session_),
                   why.c_str());
    // Tell the coordinator why before the links close, so it reports the stage that failed
    // (say, the next one) rather than whichever closed link it happened to read first. Best
    // effort: a small frame on a link that may itself be the one that went away.
    if (coordinator_) (void)coordinator_->conn->Send(kError, EncodeError(0, why));
  }
  for (auto& c : conns_) {
    if (c->role != Conn::kNew && c->session == session_) c->conn->Shutdown();
  }
  if (downstream_) downstream_->Shutdown();
  downstream_.reset();
  coordinator_.reset();
  // The KV cache stays for a while: the coordinator may resume this session (a cut link, a
  // neighbour restarted) and re-read only what was lost.
  ended_session_ = session_;
  ended_at_ = std::chrono::steady_clock::now();
  session_ = 0;
  tasks_cv_.notify_one();
}

void Worker::Push(Task task) {
  std::lock_guard<std::mutex> lock(mu_);
  tasks_.push_back(std::move(task));
  tasks_cv_.notify_one();
}

void Worker::Send(std::shared_ptr<transport::Connection> to, uint16_t type, std::vector<uint8_t> a,
                  std::vector<uint8_t> b, uint64_t session) {
  std::lock_guard<std::mutex> lock(mu_);
  out_.push_back({std::move(to), type, std::move(a), std::move(b), session});
  out_cv_.notify_one();
}

void Worker::SendLoop() {
  while (true) {
    Outgoing o;
    {
      std::unique_lock<std::mutex> lock(mu_);
      out_cv_.wait(lock, [&] { return stopping_ || !out_.empty(); });
      if (stopping_) return;
      o = std::move(out_.front());
      out_.pop_front();
    }
    const std::span<const uint8_t> pieces[2] = {o.a, o.b};
    Status s = o.to->Send(o.type, pieces);
    if (!s.ok()) {
      // The next stage gone shows here first when a forward was on its way to it: say so, so the
      // coordinator puts the failure down to that stage, not to this one.
      bool next;
      {
        std::lock_guard<std::mutex> lock(mu_);
        next = o.to == downstream_;
      }
      EndSession(o.session, (next ? std::string(kNextStageLost) : std::string("cannot send to ")) + o.to->peer() +
                                (next ? " cannot be sent to: " : ": ") + s.message());
    }
  }
}

void Worker::ComputeLoop() {
  std::vector<float> hidden_in, hidden_out;
  while (true) {
    Task t;
    std::shared_ptr<transport::Connection> coordinator, downstream;
    WireType wire;
    {
      std::unique_lock<std::mutex> lock(mu_);
      while (!stopping_ && tasks_.empty()) {
        if (session_ != 0 || ended_session_ == 0) {
          tasks_cv_.wait(lock);
        } else if (std::chrono::steady_clock::now() < ended_at_ + options_.keep_ended_session) {
          tasks_cv_.wait_until(lock, ended_at_ + options_.keep_ended_session);  // an ended session's KV awaits a resume
        } else {
          DAISY_LOG_INFO("worker: session %llx was not resumed; freeing its KV cache",
                         static_cast<unsigned long long>(ended_session_));
          ended_session_ = 0;
          Task release_all;
          release_all.kind = Task::Kind::kFree;
          tasks_.push_back(std::move(release_all));
        }
      }
      if (stopping_) {
        tasks_.clear();  // a Configure waiting for its reset gets a broken promise, at once
        return;
      }
      t = std::move(tasks_.front());
      tasks_.pop_front();
      if (t.kind == Task::Kind::kReset) ended_session_ = 0;
      const bool stale = (t.kind == Task::Kind::kForward || t.kind == Task::Kind::kRelease) && t.session != session_;
      if (stale) continue;  // a stale session's work
      if (coordinator_) coordinator = coordinator_->conn;
      downstream = downstream_;
      wire = config_.wire;
    }
    if (t.kind == Task::Kind::kReset || t.kind == Task::Kind::kFree) {
      Configure c = t.config;
      if (t.kind == Task::Kind::kFree) c.max_rows = c.max_seqs = c.seq_capacity = 1;  // a minimal stage, no KV
      const runtime::StageOptions o = StageOptionsFor(
          shard_.info, {.max_batch_rows = c.max_rows, .seq_capacity = c.seq_capacity, .max_seqs = c.max_seqs,
                        .kv_budget_bytes = options_.kv_budget_bytes, .rope_context = c.rope_context});
      Configured kept;
      // A resumed session keeps the KV of the one it continues if the stage is the same shape.
      const bool keep = t.kind == Task::Kind::kReset && c.resume != 0 && c.resume == stage_session_ && stage_ != nullptr &&
                        stage_options_.max_batch_rows == o.max_batch_rows &&
                        stage_options_.seq_capacity == o.seq_capacity && stage_options_.max_seqs == o.max_seqs &&
                        stage_options_.rope_context == o.rope_context;
      if (keep) {
        // What the coordinator no longer holds goes now, before the answer: a release sent
        // after it could overtake a forward of a sequence id used again.
        kept.kept = stage_->KeepOnly(c.keep);
      } else {
        stage_.reset();
        stage_ = std::make_unique<LocalStage>(*shard_.model, o, *kernels_, *pool_);
        stage_options_ = o;
      }
      stage_session_ = t.kind == Task::Kind::kReset ? t.session : 0;
      held_ = stage_->stage().kv().n_sequences();
      if (t.kept) t.kept->set_value(std::move(kept));
      continue;
    }
    if (t.kind == Task::Kind::kRelease) {
      for (int32_t s : t.seqs) stage_->Release(s);
      held_ = stage_->stage().kv().n_sequences();
      continue;
    }
    const ForwardHeader& h = t.header;
    const int n = h.total_rows();
    busy_ = h.id;
    hidden_in.resize(static_cast<size_t>(n) * h.dim);
    DecodeRows(h.wire, t.payload.data() + t.act_offset, n, h.dim, hidden_in.data());
    ResultMsg result;
    Status s = stage_->Run(h, {}, hidden_in, hidden_out, &result);
    done_ = h.id;
    busy_ = 0;
    held_ = stage_->stage().kv().n_sequences();
    if (!s.ok()) {
      if (coordinator) {
        Send(coordinator, kError,
             EncodeError(h.id, "stage " + std::to_string(shard_.info.stage) + ": " + s.message()), {},
             t.session);
      }
      continue;
    }
    if (shard_.info.head()) {
      if (coordinator) Send(coordinator, kResult, EncodeResult(result), {}, t.session);
    } else if (h.last_stage == shard_.info.stage) {
      // The forward ends here (a resume filling the KV up to this stage): say it is done.
      ResultMsg done;
      done.id = h.id;
      if (coordinator) Send(coordinator, kResult, EncodeResult(done), {}, t.session);
    } else if (downstream) {
      // The header goes on as it came (the routing, and the last stage's requests unread), but
      // for its wire type byte (offset 8), which says what this link carries.
      std::vector<uint8_t> header(t.payload.begin(), t.payload.begin() + static_cast<std::ptrdiff_t>(t.act_offset));
      header[8] = static_cast<uint8_t>(wire);
      std::vector<uint8_t> act(static_cast<size_t>(n) * WireRowBytes(wire, h.dim));
      EncodeRows(wire, hidden_out.data(), n, h.dim, act.data());
      Send(downstream, kForward, std::move(header), std::move(act), t.session);
    }
  }
}

}  // namespace daisy::pipeline
