#include "coord/scheduler.h"

#include <malloc.h>

#include <algorithm>

#include "base/log.h"
#include "base/strings.h"

namespace daisy::coord {

namespace {
using Clock = std::chrono::steady_clock;
double Since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }
}  // namespace

const char* FinishName(Finish f) {
  switch (f) {
    case Finish::kNone: return "none";
    case Finish::kStop: return "stop";
    case Finish::kLength: return "length";
    case Finish::kCancelled: return "cancelled";
    case Finish::kError: return "error";
  }
  return "?";
}

Request::Update Request::Wait(size_t have, std::chrono::milliseconds timeout) {
  std::unique_lock lock(mu_);
  cv_.wait_for(lock, timeout, [&] { return done_ || tokens_.size() > have; });
  Update u;
  if (tokens_.size() > have) u.tokens.assign(tokens_.begin() + static_cast<std::ptrdiff_t>(have), tokens_.end());
  if (logprobs_.size() > have) u.logprobs.assign(logprobs_.begin() + static_cast<std::ptrdiff_t>(have), logprobs_.end());
  u.done = done_;
  u.finish = finish_;
  u.error = error_;
  return u;
}

double Request::time_to_first_token() const {
  std::lock_guard lock(mu_);
  return ttft_;
}

void Request::Push(int32_t token, TokenLogprob logprob) {
  {
    std::lock_guard lock(mu_);
    if (tokens_.empty()) ttft_ = Since(submitted_);
    tokens_.push_back(token);
    if (params_.logprobs) logprobs_.push_back(std::move(logprob));
  }
  cv_.notify_all();
}

void Request::StopAtString() {
  std::lock_guard lock(mu_);
  stopped_at_string_ = true;
  cancelled_ = true;
  if (done_ && finish_ == Finish::kLength) {
    finish_ = Finish::kStop;
    if (length_to_stop_) ++*length_to_stop_;
  }
}

void Request::End(Finish f, Status error) {
  {
    std::lock_guard lock(mu_);
    if (done_) return;
    // The text reached a stop string in the tokens before the last (the reader saw them before
    // the scheduler ended the request at max_tokens): a stop, as the client is told.
    if (f == Finish::kLength && stopped_at_string_) {
      f = Finish::kStop;
      if (length_to_stop_) ++*length_to_stop_;
    }
    if (ttft_ == 0) ttft_ = Since(submitted_);
    done_ = true;
    finish_ = f;
    error_ = std::move(error);
  }
  cv_.notify_all();
}

struct Scheduler::Seq {
  std::shared_ptr<Request> req;
  int32_t id = 0;       // the pipeline's sequence id: never reused while the server runs
  int group = 0;
  std::unique_ptr<KController> k;  // speculating sequences only (before dec: dec borrows it)
  std::unique_ptr<SeqDecoder> dec;  // its prompt, history, drafts: the decode step (decode.h)
  int delivered = 0;    // tokens handed to the request
  bool in_flight = false;
  bool done = false;
};

struct Scheduler::Batch {
  uint64_t id = 0;
  Clock::time_point started;
  int group = 0;
  std::vector<Seq*> seqs;
  std::vector<bool> output;  // seqs[i] asked for a token
  int rows = 0;
  int prompt_rows = 0;  // of which prompt chunks
};

Scheduler::Scheduler(pipeline::Pipeline& pipe, SchedulerOptions options)
    : pipe_(pipe), o_(std::move(options)) {
  o_.micro_batches = std::max(1, o_.micro_batches);
  o_.max_seqs = std::max(1, o_.max_seqs);
  o_.max_batch_rows = std::max(1, o_.max_batch_rows);
  o_.prefill_chunk = std::clamp(o_.prefill_chunk, 1, o_.max_batch_rows);
  group_busy_.assign(o_.micro_batches, false);
  metrics_.max_seqs = o_.max_seqs;
  metrics_.seq_capacity = o_.seq_capacity;
  metrics_.micro_batches = o_.micro_batches;
  metrics_.spec_k_start = KController(o_.spec_k, o_.spec_k_max).current_k();
  times_.emplace(o_.spec_k, o_.spec_k_max, o_.max_batch_rows);
  if (o_.spec_start != nullptr) {
    times_->StartFrom(*o_.spec_start);
    learned_k_ = *times_;
    metrics_.spec_k_start = learned_k_->current_k();
  }
  learned_at_ = std::chrono::steady_clock::now();
  thread_ = std::thread([this] { Loop(); });
}

Scheduler::~Scheduler() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

Result<std::shared_ptr<Request>> Scheduler::Submit(RequestParams params) {
  if (params.prompt.empty()) return InvalidArgument("the prompt is empty: give at least one token");
  if (params.max_tokens < 1) return InvalidArgument("max_tokens must be at least 1 (is %d)", params.max_tokens);
  if (params.spec_k < -1 || params.spec_k > o_.spec_k_max) {
    return InvalidArgument("the request's K must be 0 (adaptive) to %d (this server's --spec-k-max), is %d",
                           o_.spec_k_max, params.spec_k);
  }
  const size_t need = params.prompt.size() + static_cast<size_t>(params.max_tokens);
  std::lock_guard lock(mu_);
  if (need > static_cast<size_t>(o_.seq_capacity)) {
    ++metrics_.rejected_too_long;
    return OutOfRange("the prompt (%zu tokens) plus max_tokens (%d) is longer than the context "
                      "of %d tokens", params.prompt.size(), params.max_tokens, o_.seq_capacity);
  }
  if (stop_) return Unavailable("the server is stopping");
  if (queue_.size() >= static_cast<size_t>(o_.max_queue)) {
    ++metrics_.rejected_queue_full;
    return ResourceExhausted("the server is busy: %zu requests are already waiting; try again later",
                             queue_.size());
  }
  auto r = std::make_shared<Request>(std::move(params));
  r->CountRestatedIn(length_to_stop_);
  queue_.push_back(r);
  metrics_.queued = static_cast<int>(queue_.size());
  cv_.notify_all();
  return r;
}

SchedulerMetrics Scheduler::metrics() const {
  std::lock_guard lock(mu_);
  SchedulerMetrics m = metrics_;
  // Requests counted at max_tokens whose text then turned out to end at a stop string.
  const uint64_t restated = *length_to_stop_;
  m.requests_by_finish[static_cast<int>(Finish::kLength)] -= restated;
  m.requests_by_finish[static_cast<int>(Finish::kStop)] += restated;
  const auto since = Clock::now() - std::chrono::seconds(10);
  uint64_t n = 0;
  for (const auto& [t, k] : recent_) n += t >= since ? k : 0;
  m.tokens_per_second = static_cast<double>(n) / 10.0;
  m.stage_failures = pipe_.stage_failures();  // thread-safe: counted by the ring's readers
  return m;
}

void Scheduler::Recount() {  // under mu_
  metrics_.queued = static_cast<int>(queue_.size());
  metrics_.active = static_cast<int>(active_.size());
  metrics_.in_flight = static_cast<int>(in_flight_.size());
  uint64_t kv = 0;
  for (const auto& s : active_) kv += s->dec->history().size();
  metrics_.kv_positions = kv;
}

bool Scheduler::Admit() {
  std::lock_guard lock(mu_);
  bool any = false;
  while (!queue_.empty() && active_.size() < static_cast<size_t>(o_.max_seqs)) {
    std::shared_ptr<Request> r = std::move(queue_.front());
    queue_.pop_front();
    if (r->cancelled()) {
      ++metrics_.requests_by_finish[static_cast<int>(r->cancel_finish())];
      r->End(r->cancel_finish());
      continue;
    }
    auto s = std::make_unique<Seq>();
    s->id = next_seq_;
    next_seq_ = next_seq_ == INT32_MAX ? 0 : next_seq_ + 1;
    std::vector<int> members(o_.micro_batches, 0);
    for (const auto& a : active_) ++members[a->group];
    s->group = static_cast<int>(std::min_element(members.begin(), members.end()) - members.begin());
    if (o_.drafter != nullptr && r->params().speculate) {
      s->k = std::make_unique<KController>(SpecK(r->params()), o_.spec_k_max, o_.max_batch_rows);
      // StartFrom ignores a controller of another kind (fixed K against adaptive).
      if (learned_k_) s->k->StartFrom(*learned_k_);
      if (SpecK(r->params()) == o_.spec_k) s->k->ShareTimes(*times_);
    }
    s->dec = std::make_unique<SeqDecoder>(s->id, r->params().prompt, r->params().sampling,
                                          r->params().max_tokens, s->k.get());
    if (r->params().logprobs) s->dec->WantTopLogprobs(r->params().top_logprobs);
    if (r->params().grammar && r->params().grammar_vocab) {
      s->dec->Constrain(std::make_unique<grammar::TokenConstraint>(r->params().grammar, r->params().grammar_vocab));
    }
    s->req = std::move(r);
    active_.push_back(std::move(s));
    any = true;
  }
  Recount();
  return any;
}

void Scheduler::Forget(const Seq& s) {
  if (o_.drafter != nullptr && s.k) o_.drafter->Release(s.id);
}

void Scheduler::End(Seq& s, Finish f, Status error) {
  s.done = true;
  {
    // Count before the waiter wakes, so whoever saw the request end also sees it counted.
    std::lock_guard lock(mu_);
    ++metrics_.requests_by_finish[static_cast<int>(f)];
  }
  s.req->End(f, std::move(error));
}

void Scheduler::DraftFor(int group) {
  if (o_.drafter == nullptr) return;
  std::vector<SeqDecoder*> decoding;
  for (auto& sp : active_) {
    const Seq& s = *sp;
    if (s.group == group && !s.in_flight && !s.done && s.dec->prompt_done()) decoding.push_back(s.dec.get());
  }
  if (decoding.empty()) return;
  const DraftReport r = DraftTogether(decoding, o_.max_batch_rows, *o_.drafter);
  if (!r.status.ok()) DAISY_LOG_WARN("serve: %s", r.status.message().c_str());
  std::lock_guard lock(mu_);
  metrics_.draft_seconds += r.seconds;
}

Result<bool> Scheduler::StartBatch(int group) {
  auto b = std::make_unique<Batch>();
  b->id = pipe_.NextId();
  b->group = group;
  pipeline::ForwardHeader h;
  h.id = b->id;
  h.dim = pipe_.config().d_model;
  std::vector<int32_t> tokens;
  // After a resume, the rows that only the first stages lost go in forwards of their own, which
  // end at the last stage that lacks them: one such forward at a time, before anything else.
  int32_t refill = -1;
  for (const auto& sp : active_) {
    const Seq& s = *sp;
    if (s.group == group && !s.in_flight && !s.done && s.dec->refill_stage() >= 0) {
      refill = s.dec->refill_stage();
      break;
    }
  }
  if (refill < 0) DraftFor(group);
  // Decode rows first (one per sequence, plus its drafts), then prompt chunks while there is room.
  int decode_seqs = 0;
  for (int pass = refill < 0 ? 0 : 1; pass < 2; ++pass) {
    for (auto& sp : active_) {
      Seq& s = *sp;
      if (s.group != group || s.in_flight || s.done) continue;
      if (s.dec->refill_stage() != refill) continue;
      const bool decoding = s.dec->prompt_done();
      if (decoding != (pass == 0)) continue;
      const int room = o_.max_batch_rows - b->rows;
      if (room <= 0) break;
      if (decoding) {
        s.dec->AddDecodeRows(h, tokens);
        ++decode_seqs;
      } else {
        b->prompt_rows += s.dec->AddPromptRows(h, tokens, std::min(o_.prefill_chunk, room));
      }
      b->rows += h.seqs.back().n_rows;
      b->seqs.push_back(&s);
      // A prompt chunk asks for a token only when it is the prompt's last.
      b->output.push_back(h.seqs.back().out.kind != pipeline::OutputKind::kNone);
      s.in_flight = true;
    }
  }
  if (b->seqs.empty()) return false;
  const auto start = Clock::now();
  b->started = start;
  const Status st = pipe_.Submit(h, tokens);
  {
    std::lock_guard lock(mu_);
    metrics_.submit_seconds += Since(start);
    ++metrics_.forwards;
    metrics_.forward_rows += static_cast<uint64_t>(b->rows);
    if (decode_seqs >= 2) ++metrics_.batched_decode_forwards;
  }
  group_busy_[group] = true;
  in_flight_.push_back(std::move(b));
  if (!st.ok()) return st;
  return true;
}

Status Scheduler::FinishOldest() {
  Batch& b = *in_flight_.front();
  const auto start = Clock::now();
  auto r = pipe_.Wait(b.id);
  {
    std::lock_guard lock(mu_);
    metrics_.wait_seconds += Since(start);
  }
  if (!r.ok()) return r.status();
  uint64_t generated = 0, prompt = 0;
  // The forward's time, for the K controllers, with how many rows the others ran (-1: prompt
  // chunks made it no measure of a decode step).
  const double seconds = b.prompt_rows > 0 ? -1 : Since(b.started);
  bool timed = false;  // the batch's time goes into the shared table once
  for (size_t i = 0; i < b.seqs.size(); ++i) {
    Seq& s = *b.seqs[i];
    s.in_flight = false;
    if (!b.output[i]) continue;
    if (s.delivered == 0) prompt += s.dec->prompt_size();
    // The verify is accounted before its tokens are pushed: the last push may end the request
    // and wake its waiter, who then reads the request's draft counts (usage).
    const bool shares = s.k && SpecK(s.req->params()) == o_.spec_k;  // times_
    const double t = shares && timed ? -1 : seconds;
    timed = timed || shares;
    const int drafted = static_cast<int>(s.dec->draft().size());
    auto settled = s.dec->Settle(*r, pipe_.config().n_vocab, t, b.rows, o_.drafter);
    if (!settled.ok()) {
      End(s, Finish::kError, settled.status());
      continue;
    }
    if (drafted > 0) {
      const int accepted = static_cast<int>(settled->size()) - 1;
      s.req->CountDrafts(drafted, accepted);
      std::lock_guard lock(mu_);
      ++metrics_.verifies;
      metrics_.drafted_tokens += static_cast<uint64_t>(drafted);
      metrics_.accepted_tokens += static_cast<uint64_t>(accepted);
    }
    // What the next request of the server's own kind starts from: a request that chose another K
    // leaves it alone.
    if (shares) {
      learned_k_ = *s.k;
      learned_unsaved_ = true;
      if (std::chrono::steady_clock::now() - learned_at_ >= std::chrono::duration<double>(o_.learned_every)) {
        HandOverLearned();
      }
      std::lock_guard lock(mu_);
      metrics_.spec_k_start = s.k->current_k();
    }
    for (size_t j = 0; j < settled->size() && !s.done; ++j) {
      const int32_t token = (*settled)[j].token;
      ++s.delivered;
      ++generated;
      if (s.req->params().stop_at_eog && o_.is_eog && o_.is_eog(token)) {
        End(s, Finish::kStop);
        break;
      }
      s.req->Push(token, {(*settled)[j].logprob, std::move((*settled)[j].top)});
      if (s.delivered >= s.req->params().max_tokens) End(s, Finish::kLength);
    }
  }
  {
    std::lock_guard lock(mu_);
    metrics_.generated_tokens += generated;
    metrics_.prompt_tokens += prompt;
    const auto now = Clock::now();
    recent_.emplace_back(now, generated);
    while (!recent_.empty() && recent_.front().first < now - std::chrono::seconds(10)) recent_.pop_front();
  }
  group_busy_[b.group] = false;
  in_flight_.pop_front();
  return Status::Ok();
}

void Scheduler::Sweep() {
  std::vector<int32_t> release;
  for (auto& s : active_) {
    if (s->in_flight) continue;
    if (!s->done && s->req->cancelled()) End(*s, s->req->cancel_finish());
    if (s->done) {
      release.push_back(s->id);
      Forget(*s);
    }
  }
  if (release.empty()) return;
  const Status st = pipe_.Release(release);
  if (!st.ok()) DAISY_LOG_WARN("serve: releasing %zu sequences: %s", release.size(), st.message().c_str());
  std::erase_if(active_, [](const std::unique_ptr<Seq>& s) { return s->done && !s->in_flight; });
  std::lock_guard lock(mu_);
  Recount();
}

void Scheduler::Fail(const Status& why) {
  const bool ring_down = pipe_.broken();
  if (!ring_down) {
    // One forward failed (the rest of the ring is fine): end its sequences only.
    Batch& b = *in_flight_.front();
    for (Seq* s : b.seqs) {
      s->in_flight = false;
      if (!s->done) End(*s, Finish::kError, why);
    }
    group_busy_[b.group] = false;
    in_flight_.pop_front();
    return;
  }
  // The ring is down: every sequence's KV is gone with it.
  {
    std::lock_guard lock(mu_);
    ++metrics_.ring_failures;
  }
  if (o_.resume_wait > 0) {
    // Keep the requests: once the ring is back, each reads its history again and goes on.
    int kept = 0;
    for (auto& s : active_) {
      s->in_flight = false;
      if (!s->done) ++kept;
    }
    in_flight_.clear();
    std::fill(group_busy_.begin(), group_busy_.end(), false);
    if (!broken_) {
      pause_started_ = Clock::now();
      // The stages whose workers broke the ring this time: their failure counts went up.
      const std::vector<uint64_t> failures = pipe_.stage_failures();
      failures_seen_.resize(failures.size(), 0);
      pause_stages_.clear();
      for (size_t i = 0; i < failures.size(); ++i) {
        if (failures[i] > failures_seen_[i]) pause_stages_.push_back(i);
      }
      failures_seen_ = failures;
      DAISY_LOG_WARN("serve: %s; holding %d requests for up to %g s while the pipeline is rebuilt",
                     why.message().c_str(), kept, o_.resume_wait);
    }
    broken_ = true;
    last_failure_ = why;
    // Each decoder keeps its state as of the failure: once the ring is back, Restart compares it
    // with what the stages kept.
    return;
  }
  DAISY_LOG_WARN("serve: %s", why.message().c_str());
  for (auto& s : active_) {
    s->in_flight = false;
    if (!s->done) End(*s, Finish::kError, why);
    Forget(*s);
  }
  in_flight_.clear();
  std::fill(group_busy_.begin(), group_busy_.end(), false);
  active_.clear();
  broken_ = true;
  std::lock_guard lock(mu_);
  Recount();
}

void Scheduler::HandOverLearned() {
  if (!o_.on_learned) return;
  o_.on_learned(*learned_k_);
  learned_at_ = std::chrono::steady_clock::now();
  learned_unsaved_ = false;
}

void Scheduler::Loop() {
  while (true) {
    Admit();
    Sweep();
    bool stopping;
    std::vector<int64_t> held = pipe_.stage_sequences();  // the local stages are this thread's
    {
      std::lock_guard lock(mu_);
      stopping = stop_;
      metrics_.stage_sequences = std::move(held);
    }
    if (broken_ && !active_.empty()) {
      std::vector<int32_t> keep;
      for (const auto& s : active_) {
        if (!s->done) keep.push_back(s->id);
      }
      const Status st = pipe_.Recover(keep);
      const bool resuming = o_.resume_wait > 0;
      if (st.ok()) {
        broken_ = false;
        if (resuming) {
          uint64_t refill = 0;
          int resumed = 0;
          std::vector<uint64_t> per_stage(static_cast<size_t>(pipe_.n_stages()), 0);
          for (auto& s : active_) {
            if (s->done) continue;
            const std::vector<size_t> read = s->dec->Restart(pipe_.HeldLengths(s->id), o_.max_batch_rows / 2);
            refill += read.front();
            for (size_t i = 0; i < read.size() && i < per_stage.size(); ++i) per_stage[i] += read[i];
            ++resumed;
          }
          const double paused = Since(pause_started_);
          // The old ring's buffers are free now, but glibc keeps freed heap pages (its mmap
          // threshold rises after the first large free), so every rebuild would leave a few MB
          // of resident memory behind (measured by bench/soak.mjs): give them back.
          ::malloc_trim(0);
          std::vector<size_t> shown(per_stage.begin(), per_stage.end());
          DAISY_LOG_INFO("serve: the pipeline is back after %.1f s; resuming %d requests (tokens to read again per stage: %s)",
                         paused, resumed, JoinNumbers(shown).c_str());
          std::lock_guard lock(mu_);
          ++metrics_.resumes;
          metrics_.refilled_tokens += refill;
          metrics_.stage_refilled_tokens.resize(per_stage.size(), 0);
          for (size_t i = 0; i < per_stage.size(); ++i) metrics_.stage_refilled_tokens[i] += per_stage[i];
          metrics_.paused_seconds += paused;
          metrics_.stage_resumes.resize(per_stage.size(), 0);
          metrics_.stage_paused_seconds.resize(per_stage.size(), 0);
          for (size_t i : pause_stages_) {
            if (i >= per_stage.size()) continue;
            ++metrics_.stage_resumes[i];
            metrics_.stage_paused_seconds[i] += paused;
          }
        } else {
          DAISY_LOG_INFO("serve: the pipeline is back");
        }
      } else if (resuming && Since(pause_started_) < o_.resume_wait) {
        // Not back yet: try again shortly (cancelled requests are swept meanwhile).
        std::unique_lock lock(mu_);
        cv_.wait_for(lock, std::chrono::milliseconds(200), [&] { return stop_; });
        continue;
      } else {
        const Status gone = resuming ? Unavailable("%s; the pipeline was not back within %g s (%s)",
                                                   last_failure_.message().c_str(), o_.resume_wait,
                                                   st.message().c_str())
                                     : st;
        for (auto& s : active_) {
          if (!s->done) End(*s, Finish::kError, gone);
          Forget(*s);
        }
        active_.clear();
        if (resuming) {
          const double paused = Since(pause_started_);
          std::lock_guard lock(mu_);
          metrics_.paused_seconds += paused;
          metrics_.stage_paused_seconds.resize(static_cast<size_t>(pipe_.n_stages()), 0);
          for (size_t i : pause_stages_) {
            if (i < metrics_.stage_paused_seconds.size()) metrics_.stage_paused_seconds[i] += paused;
          }
        }
      }
    }
    // Start micro-batches for idle groups, round-robin, while slots are free.
    while (!stopping && !broken_ && in_flight_.size() < static_cast<size_t>(o_.micro_batches)) {
      bool started = false;
      for (int k = 0; k < o_.micro_batches && !started; ++k) {
        const int g = (next_group_ + k) % o_.micro_batches;
        if (group_busy_[g]) continue;
        auto r = StartBatch(g);
        if (!r.ok()) {
          // Submit failed: its batch is the newest in flight; fail from the oldest.
          while (!in_flight_.empty()) {
            if (in_flight_.size() == 1) {
              Fail(r.status());
              break;
            }
            const Status st = FinishOldest();
            if (!st.ok()) Fail(st);
          }
          started = true;
          break;
        }
        if (*r) {
          started = true;
          next_group_ = (g + 1) % o_.micro_batches;
        }
      }
      if (!started) break;
    }
    {
      std::lock_guard lock(mu_);
      Recount();
    }
    if (in_flight_.empty()) {
      // Idle (or stopping): a good moment to hand over what the sequences learned.
      if (learned_unsaved_) HandOverLearned();
      if (stopping) break;
      std::unique_lock lock(mu_);
      // Idle: wake for a new request, a stop, or (cheaply) to look at cancellations.
      cv_.wait_for(lock, std::chrono::milliseconds(50), [&] { return stop_ || !queue_.empty(); });
      continue;
    }
    const Status st = FinishOldest();
    if (!st.ok()) Fail(st);
  }
  const Status stopped = Unavailable("the server is stopping");
  for (auto& s : active_) {
    if (!s->done) End(*s, Finish::kError, stopped);
    Forget(*s);
  }
  std::lock_guard lock(mu_);
  for (auto& r : queue_) r->End(Finish::kError, stopped);
  queue_.clear();
}

}  // namespace daisy::coord
