// Drafters for speculative decoding on the coordinator: a Drafter proposes tokens, the pipeline
// verifies the last accepted token plus K drafts as K+1 rows of one forward, and the last stage
// decides acceptance itself (pipeline::OutputKind::kVerify, pipeline/outputs.h), answering with
// the accepted drafts plus one token. Rejected positions need no message: the next forward's
// start_pos rolls every stage back, and the draft model's cache rolls back the same way.
// docs/speculative.md states the rules.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <vector>

#include "pipeline/pipeline.h"
#include "runtime/sampler.h"

namespace daisy::coord {

using DraftDistribution = std::vector<std::pair<int32_t, float>>;

// One sequence's part of a joint proposal (Drafter::ProposeAll).
struct DraftJob {
  int32_t seq = 0;
  std::span<const int32_t> history;  // all of the sequence's tokens so far
  int k = 0;                         // drafts wanted (0: none)
  const runtime::SamplingParams* sampling = nullptr;
  // Asked after each draft, with the draft model's confidence in each draft so far, whether to
  // draft another (KController::MoreDrafts); empty: draft k. Only a draft model asks.
  std::function<bool(std::span<const float>)> more;
  // What came back: the drafts (maybe fewer than k) and their distributions, as from Propose;
  // the draft model's confidence in each draft (the probability it gave the draft: the argmax's
  // when greedy, the drawn token's under q when sampling; empty from prompt lookup); the rows
  // run through a draft model for this sequence (catch-up and drafts) and the seconds of the
  // draft forwards it had rows in (shared with the other jobs in them); the error, if any.
  std::vector<int32_t> draft;
  std::vector<DraftDistribution> q;
  std::vector<float> confidence;
  int rows = 0;
  double seconds = 0;
  Status status;
  // Clears what came back, before a proposal fills it in.
  void Reset() {
    draft.clear();
    q.clear();
    confidence.clear();
    rows = 0;
    seconds = 0;
    status = Status::Ok();
  }
};

class Drafter {
 public:
  virtual ~Drafter() = default;
  // Drafts for several sequences at once (the decoding sequences of one micro-batch). The default
  // proposes for each in turn; ModelDrafter runs them as rows of one forward per drafted
  // position, one pass over the draft's weights for all of them, and batch invariance makes
  // each sequence's drafts the same bits as drafting it alone. A failed draft forward fails the
  // jobs still drafting (their `status`, keeping what they drafted before).
  virtual void ProposeAll(std::span<DraftJob> jobs);
  // Up to `k` tokens to follow `history` (all of sequence `seq`'s tokens so far). With
  // sampling (temperature > 0), each drafted token is drawn from the distribution put in `q`
  // (empty: all mass on the token). May propose fewer, or none.
  virtual Status Propose(int32_t seq, std::span<const int32_t> history, int k,
                         const runtime::SamplingParams& sampling, std::vector<int32_t>& draft,
                         std::vector<DraftDistribution>& q) = 0;
  // The first `n` tokens of the last history given to Propose, then the accepted drafts, are
  // now the sequence's settled tokens (the rest of what was proposed was rejected).
  virtual void Settled(int32_t /*seq*/, size_t /*n*/) {}
  virtual void Release(int32_t /*seq*/) {}
  // Rows the last Propose ran through a draft model: the drafts plus the tokens it caught up
  // on (0 without a model). The K controller charges drafting time per row, so the catch-up
  // after steps without drafts is not mistaken for a dear draft.
  int last_rows() const { return last_rows_; }

 protected:
  int last_rows_ = 0;
};

// Prompt lookup: the continuation of the most recent earlier occurrence of the longest suffix
// (max_ngram down to min_ngram tokens) of the history, K tokens, read on past the history's end
// as a repeat with the match's period. Needs no model; drafts are certain (point masses).
class LookupDrafter : public Drafter {
 public:
  explicit LookupDrafter(int max_ngram = 3, int min_ngram = 1) : max_ngram_(max_ngram), min_ngram_(min_ngram) {}
  Status Propose(int32_t seq, std::span<const int32_t> history, int k, const runtime::SamplingParams& sampling,
                 std::vector<int32_t>& draft, std::vector<DraftDistribution>& q) override;

 private:
  int max_ngram_, min_ngram_;
};

// A small draft model (same vocabulary) run whole on the coordinator, with its own KV cache per
// sequence. Greedy drafts are its argmax; sampled drafts are drawn from its distribution over
// its top kMaxDraftSupport tokens (the sampling filters and temperature applied there), which
// is the q sent for verification.
class ModelDrafter : public Drafter {
 public:
  // `max_rows`: the most rows the draft pipeline takes in one forward (catching up is chunked).
  explicit ModelDrafter(pipeline::Pipeline& draft, int max_rows = 64) : draft_(draft), max_rows_(std::max(1, max_rows)) {}
  Status Propose(int32_t seq, std::span<const int32_t> history, int k, const runtime::SamplingParams& sampling,
                 std::vector<int32_t>& draft, std::vector<DraftDistribution>& q) override;
  void ProposeAll(std::span<DraftJob> jobs) override;
  void Settled(int32_t seq, size_t n) override;
  void Release(int32_t seq) override;

 private:
  struct Live;
  // One drafted position for every live job: runs each job's feed (its catch-up, or its last
  // draft) from its start, packed into forwards of at most max_rows_ rows, and appends the
  // next draft to each. A job that fails gets the error and is done.
  void Step(std::vector<Live>& live);
  pipeline::Pipeline& draft_;
  int max_rows_;
  std::map<int32_t, size_t> cached_;  // per sequence: leading history positions in the draft's KV
};

}  // namespace daisy::coord
