// Scheduler: serves many sequences at once over one Pipeline (a whole model, in-process stages
// or remote workers) with continuous batching.
//
// Active sequences are spread over M groups (default M = the number of stages); each group is a
// micro-batch: all its rows go through each stage as one batched forward, so one weight read
// serves every user in it, and the M micro-batches are in flight at different stages at once.
// Requests join and leave between steps. Policy per step of a group (docs/serving.md): every
// decoding sequence contributes its one row first; sequences still reading their prompt then
// add up to `prefill_chunk` prompt rows each while the micro-batch has room (`max_batch_rows`),
// so a long prompt is read in chunks alongside other users' decode rows instead of stalling
// them. Groups are served round-robin and a new sequence joins the smallest group.
//
// Admission: at most `max_seqs` sequences hold KV (each reserves `seq_capacity` positions on
// every stage); further requests wait in a FIFO queue of `max_queue`; beyond that Submit refuses
// (ResourceExhausted, HTTP 429). A request whose prompt plus max_tokens cannot fit in
// `seq_capacity` is refused at once (OutOfRange). A cancelled request (or a client gone) is
// released on every stage at its next step.
//
// Batch invariance makes every sequence's tokens the same as alone: each row depends only on its
// own sequence, and sampling draws are seeded by (seed, position).
//
// One thread runs the loop; Submit, Cancel and the Request accessors are thread-safe.
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

#include "coord/decode.h"
#include "coord/drafter.h"
#include "coord/k_controller.h"
#include "pipeline/pipeline.h"

namespace daisy::coord {

enum class Finish { kNone, kStop, kLength, kCancelled, kError };
const char* FinishName(Finish f);  // "stop", "length", "cancelled", "error"

struct RequestParams {
  std::vector<int32_t> prompt;
  int max_tokens = 16;
  runtime::SamplingParams sampling;
  bool stop_at_eog = true;  // end at an end-of-generation token (not delivered)
  bool speculate = true;    // draft and verify when the scheduler has a drafter
  int spec_k = -1;          // this request's K: -1 the scheduler's, 0 adaptive, N fixed (<= spec_k_max)
  // Constrained decoding (grammar/token_mask.h): every token keeps `grammar` alive over
  // `grammar_vocab`'s tokens; none: free.
  std::shared_ptr<const grammar::Grammar> grammar;
  std::shared_ptr<const grammar::TokenVocab> grammar_vocab;
  // Log-probabilities: of each generated token (`logprobs`), and of the `top_logprobs` most
  // likely tokens at its position (at most pipeline::Limits::max_top_k).
  bool logprobs = false;
  int top_logprobs = 0;
};

// A generated token's log-probability under the model (temperature 1, before top-k/top-p
// cuts; over the allowed tokens under a grammar) and the most likely alternatives.
struct TokenLogprob {
  float logprob = 0;
  std::vector<std::pair<int32_t, float>> top;
};

// One request, shared by the scheduler (which appends tokens) and its client (which reads them).
class Request {
 public:
  explicit Request(RequestParams p) : params_(std::move(p)) {}
  const RequestParams& params() const { return params_; }

  struct Update {
    std::vector<int32_t> tokens;  // new since `have`
    std::vector<TokenLogprob> logprobs;  // theirs, when the request asked for log-probabilities
    bool done = false;
    Finish finish = Finish::kNone;
    Status error;                 // when finish == kError
  };
  // Waits up to `timeout` for tokens beyond the first `have`, or the end.
  Update Wait(size_t have, std::chrono::milliseconds timeout);
  // Asks the scheduler to stop this request and free its KV (idempotent).
  void Cancel() { cancelled_ = true; }
  // The same, because the text reached one of the request's stop strings: it ends as kStop,
  // also when it had already ended at max_tokens (the stop string was in its last tokens; the
  // scheduler's outcome counts follow: Scheduler::metrics).
  void StopAtString();
  bool cancelled() const { return cancelled_; }
  // How a cancelled request ends.
  Finish cancel_finish() const { return stopped_at_string_ ? Finish::kStop : Finish::kCancelled; }
  // Seconds from Submit to the first token (0 before it).
  double time_to_first_token() const;
  // Speculative decoding: verifies with drafts, tokens drafted for this request, how many were
  // accepted, and the K of the last verify.
  int verifies() const { return verifies_; }
  int drafted() const { return drafted_; }
  int accepted() const { return accepted_; }
  int last_k() const { return last_k_; }
  void CountDrafts(int drafted, int accepted) {
    ++verifies_;
    drafted_ += drafted;
    accepted_ += accepted;
    last_k_ = drafted;
  }

  // Scheduler side.
  void Push(int32_t token, TokenLogprob logprob = {});
  // Ends the request (once; a kLength after StopAtString is a kStop).
  void End(Finish f, Status error = Status::Ok());
  // Where to count a request whose kLength became a kStop (the scheduler's, at Submit).
  void CountRestatedIn(std::shared_ptr<std::atomic<uint64_t>> length_to_stop) { length_to_stop_ = std::move(length_to_stop); }

 private:
  RequestParams params_;
  std::atomic<bool> cancelled_{false}, stopped_at_string_{false};
  std::shared_ptr<std::atomic<uint64_t>> length_to_stop_;
  std::atomic<int> verifies_{0}, drafted_{0}, accepted_{0}, last_k_{0};
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<int32_t> tokens_;
  std::vector<TokenLogprob> logprobs_;
  bool done_ = false;
  Finish finish_ = Finish::kNone;
  Status error_;
  std::chrono::steady_clock::time_point submitted_ = std::chrono::steady_clock::now();
  double ttft_ = 0;
};

struct SchedulerOptions {
  int micro_batches = 1;     // M: micro-batches in flight (set it to the number of stages)
  int max_seqs = 8;          // sequences holding KV at once
  int max_queue = 64;        // requests waiting for a slot
  int seq_capacity = 4096;   // KV positions per sequence
  int max_batch_rows = 256;  // rows per micro-batch forward
  int prefill_chunk = 64;    // prompt rows per sequence per step
  std::function<bool(int32_t)> is_eog;
  // Speculative decoding (docs/speculative.md): sequences draft with `drafter` (null: none)
  // and verify K+1 rows in their micro-batch; K per sequence, adaptive unless spec_k > 0.
  Drafter* drafter = nullptr;
  int spec_k = 0;
  int spec_k_max = 8;
  // Where the server's adaptive sequences start (a controller restored from a profile,
  // KController::Restore; null: the prior), and a callback given what they learned: from the
  // loop thread, at most every `learned_every` seconds after a verify and once when the
  // scheduler stops (daisy serve --spec-profile saves it).
  const KController* spec_start = nullptr;
  std::function<void(const KController&)> on_learned;
  double learned_every = 30;
  // Resume: when the workers' ring goes down (a worker died, hung past its timeout or was
  // restarted), keep the requests in flight and rebuild the ring for up to this many seconds;
  // then every sequence reads its whole history again (prompt and generated tokens, as a
  // prompt) and goes on, its output identical to an uninterrupted run. 0: fail them at once.
  double resume_wait = 0;
};

struct SchedulerMetrics {
  uint64_t requests_by_finish[5] = {};  // indexed by Finish
  uint64_t rejected_queue_full = 0, rejected_too_long = 0;
  uint64_t prompt_tokens = 0, generated_tokens = 0;
  uint64_t forwards = 0, forward_rows = 0;
  uint64_t batched_decode_forwards = 0;  // forwards that decoded two sequences or more at once
  double submit_seconds = 0;  // in the coordinator's own stages (and sending)
  double wait_seconds = 0;    // waiting for the rest of the ring
  int queued = 0, active = 0, in_flight = 0;
  uint64_t kv_positions = 0;      // KV positions the active sequences fill
  double tokens_per_second = 0;   // generated, over the last 10 s
  int max_seqs = 0, seq_capacity = 0, micro_batches = 0;
  uint64_t verifies = 0, drafted_tokens = 0, accepted_tokens = 0;  // speculative decoding
  double draft_seconds = 0;  // in the drafter
  int spec_k_start = 0;      // the K the next adaptive speculative sequence starts from
  // Resume (SchedulerOptions::resume_wait): times the ring went down, times it came back with
  // requests resumed, tokens read again to rebuild their KV, and seconds paused.
  uint64_t ring_failures = 0, resumes = 0, refilled_tokens = 0;
  double paused_seconds = 0;
  // Per stage, the sequences holding KV there (workers: as of their last pong; -1: unknown).
  std::vector<int64_t> stage_sequences;
  std::vector<uint64_t> stage_failures;  // per stage, ring failures its worker caused
  std::vector<uint64_t> stage_refilled_tokens;  // per stage, tokens read again on resumes
  // Per stage, the resumes after, and the seconds paused by, failures of its worker.
  std::vector<uint64_t> stage_resumes;
  std::vector<double> stage_paused_seconds;
};

class Scheduler {
 public:
  using Clock = std::chrono::steady_clock;
  Scheduler(pipeline::Pipeline& pipe, SchedulerOptions options);
  ~Scheduler();  // stops: pending requests end with an error
  Scheduler(const Scheduler&) = delete;

  // Queues a request. Errors: InvalidArgument (empty prompt, bad max_tokens), OutOfRange (can
  // never fit the KV), ResourceExhausted (the queue is full), Unavailable (stopping).
  Result<std::shared_ptr<Request>> Submit(RequestParams params);
  SchedulerMetrics metrics() const;
  const SchedulerOptions& options() const { return o_; }

 private:
  struct Seq;
  struct Batch;
  void Loop();
  // Gives on_learned (if any) what learned_k_ holds, and notes when.
  void HandOverLearned();
  bool Admit();                       // moves queued requests into free slots
  // Drafts for the group's decoding sequences, all at once (DraftTogether), as many as the
  // batch has rows for; each sequence's drafts wait in its decoder.
  void DraftFor(int group);
  Result<bool> StartBatch(int group);  // false when the group has nothing to run
  Status FinishOldest();               // waits for the oldest micro-batch and applies it
  // A request's K: its own (`spec_k` >= 0), else the server's (0: adaptive).
  int SpecK(const RequestParams& p) const { return p.spec_k >= 0 ? p.spec_k : o_.spec_k; }
  void Sweep();                        // ends cancelled sequences, releases finished ones
  void Fail(const Status& why);        // the oldest micro-batch (or the whole ring) failed
  void End(Seq& s, Finish f, Status error = Status::Ok());
  void Forget(const Seq& s);           // frees the drafter's state for s
  void Recount();

  pipeline::Pipeline& pipe_;
  SchedulerOptions o_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<Request>> queue_;
  bool stop_ = false;
  SchedulerMetrics metrics_;
  // Requests counted as kLength in metrics_ that ended as kStop (Request::StopAtString).
  std::shared_ptr<std::atomic<uint64_t>> length_to_stop_ = std::make_shared<std::atomic<uint64_t>>(0);
  std::deque<std::pair<std::chrono::steady_clock::time_point, uint64_t>> recent_;  // tokens per step
  // Loop thread only.
  std::vector<std::unique_ptr<Seq>> active_;
  std::deque<std::unique_ptr<Batch>> in_flight_;
  std::vector<bool> group_busy_;
  int next_group_ = 0;
  int32_t next_seq_ = 0;
  bool broken_ = false;
  Clock::time_point pause_started_;  // when the ring went down (resume)
  std::vector<uint64_t> failures_seen_;  // per stage, its failures as of the last pause
  std::vector<size_t> pause_stages_;     // the stages whose workers caused the current pause
  Status last_failure_;              // why
  // The controller of the sequence that verified last: a new sequence starts from what it
  // learned about the pipeline (verify time per K, drafting time) and the drafts (K, acceptance).
  std::optional<KController> learned_k_;
  // The verify times by batch rows every adaptive sequence of the server's own kind reads and
  // writes: a batch's time is the same for all its sequences, and one table learns it faster.
  std::optional<KController> times_;
  // When on_learned last had learned_k_, and whether it has changed since.
  std::chrono::steady_clock::time_point learned_at_;
  bool learned_unsaved_ = false;
  std::thread thread_;
};

}  // namespace daisy::coord
