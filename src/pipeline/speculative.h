// Speculative decoding on the coordinator: a Drafter proposes tokens, the pipeline verifies the
// last accepted token plus K drafts as K+1 rows of one forward, and the last stage decides
// acceptance itself (OutputKind::kVerify), answering with the accepted drafts plus one token.
// Rejected positions need no message: the next forward's start_pos rolls every stage back, and
// the draft model's cache rolls back the same way. docs/speculative.md states the rules.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <vector>

#include "pipeline/pipeline.h"

namespace daisy::pipeline {

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
  explicit ModelDrafter(Pipeline& draft, int max_rows = 64) : draft_(draft), max_rows_(std::max(1, max_rows)) {}
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
  Pipeline& draft_;
  int max_rows_;
  std::map<int32_t, size_t> cached_;  // per sequence: leading history positions in the draft's KV
};

// Checks what one forward returned for a sequence that sent `draft` (empty for a plain decode)
// before any of it is used: 1 to K+1 tokens, each in [0, n_vocab), all but the last equal to
// the drafts (the accepted ones; the last is the correction or the bonus token). `out` may be
// null (the sequence missing from the result). Both decode loops (Generate, the scheduler) use it.
Status CheckSettled(const SeqResult* out, std::span<const int32_t> draft, int32_t n_vocab);

// Chooses K per sequence (docs/speculative.md): the acceptance rate a (decayed geometric
// estimate) gives the expected tokens per verify E(K) = (1 - a^(K+1)) / (1 - a); the cost of a
// step is the verify's measured time at that K (a moving average per K; between measured K
// interpolated, beyond them extrapolated along the least-squares line through them) plus K times
// the drafter's time per row. K moves to the best of K-2 .. K+1 by E(K) / cost, so it climbs one
// step at a time and never leaps on one lucky verify; only a warm start's first choice (times
// learned by another sequence, StartFrom) may go to any K. The first verify of a cold start
// drafts kStartK; the second explores (so two K are measured): up two if the first took every
// draft, up one if all but the last, else down one. At K = 0, a 1-token probe every 8 steps keeps the acceptance estimate
// alive. A fixed K skips all this.
//
// Acceptance comes in runs (stretches of text the draft follows, gaps where it does not), so
// the rate used to choose K is the one of the current state: after a verify that took every
// draft, or after one that rejected one (or drafted none). Each state's rate is its own decayed
// counts shrunk towards the overall rate by two pseudo-drafts, so a state seen rarely borrows
// the overall one. K is one per sequence: in a followed stretch it climbs, at a gap it falls.
//
// In a batch (daisy serve: the decoding sequences of one micro-batch verify in one forward) a
// step's time is the whole batch's, so the K are chosen together for the batch's tokens per
// second, not each sequence's own (ChooseTogether), and the verify times are kept per batch row
// count (K plus the others' rows). A batch of one is the rule above.
//
// With a draft model, a sequence verifying alone is also gated by the draft's confidence
// (Gating, MoreDrafts): once two row counts are measured, while acceptance is below
// kGateBelow, Choose() allows up to k_max and drafting stops at the first draft after which
// one more is not worth its cost: the chance every draft so far is taken (each draft's
// acceptance as learned for its confidence) times the acceptance rate, against the marginal
// verify row and draft at the recent tokens per second.
class KController {
 public:
  static constexpr int kStartK = 4;
  static constexpr double kGateBelow = 0.9;  // acceptance above which confidences are not used
  static constexpr int kConfidenceBins = 10;
  static constexpr double kDecay = 0.95;  // of the acceptance counts, per verify
  static constexpr double kShrink = 2;    // pseudo-drafts at the overall rate in each state's rate
  // `max_rows`: the most rows a batch verifies in one forward (0: k_max + 1, one sequence).
  KController(int fixed_k, int k_max, int max_rows = 0);
  // Starts a new sequence from what another sequence's controller learned: the per-K verify
  // times and the drafter's time (properties of the pipeline and its links), its K, its
  // acceptance as a prior worth two drafts, and its decayed per-state counts (how often drafts
  // are taken after a full verify and after a miss: properties of the pair). A short generation
  // then skips the exploration from kStartK. Ignored when the two differ in k_max or fixed K.
  void StartFrom(const KController& other);
  // What a controller learned that outlives one run (daisy run/serve --spec-profile keep it in a
  // file between runs): the pair's acceptance, per state and per confidence tenth, the verify
  // times by batch rows - 1 (0: not measured) and the drafter's time per row.
  struct Learned {
    int fixed_k = 0, k_max = 0, k = 0;
    double alpha = 0;
    double state_successes[2] = {}, state_trials[2] = {};
    double conf_successes[kConfidenceBins] = {}, conf_trials[kConfidenceBins] = {};
    std::vector<double> verify_seconds;
    double draft_seconds = 0;
  };
  // The confidence counts a profile keeps per tenth at most (scaled down past it), so a long
  // history does not outweigh what this run shows.
  static constexpr double kProfileTrials = 400;
  // Pseudo-measurements of no shift in the mean difference from a profile's times (Known).
  static constexpr double kShiftPrior = 1;
  Learned Export() const;
  // Starts from a profile as StartFrom does from another sequence, but the times are another
  // run's: a network's delay may have changed, which adds the same to every row count. So a
  // profile's time stands in for a row count this run has not measured, shifted by the mean
  // difference between this run's measurements and the profile's times at the same row counts
  // (times for more rows than this controller's table holds are left out). False (nothing
  // taken) when the profile is for another fixed K or k_max.
  bool Restore(const Learned& learned);
  // From now on the verify times are `with`'s table, which every controller sharing it reads
  // and writes (the times are the batch's, the same for all its sequences: record each batch's
  // once). Ignored when the two differ in table size.
  void ShareTimes(const KController& with);
  // Chooses K for the sequences of one batch together (daisy serve's micro-batch), for the
  // batch's tokens per second: `cs` share one table of times (ShareTimes); `caps[i]` bounds
  // sequence i's K (tokens still wanted); `plain` sequences decode beside them without drafts.
  // Each K may move as alone (down two, up one), but jointly: from every K at its lowest, the
  // next draft goes to the sequence likeliest to have it taken (its state's acceptance to the
  // power of its K + 1), and the allocation with the best expected tokens over the step's time
  // (the table's time at the batch's rows, plus the longest drafting) wins. So a batch whose
  // rows just spill into another pass over the weights steps back together, which sequences
  // moving one at a time would not. Until the table has two row counts measured, each sequence
  // chooses in turn given the others (Choose(Others)), which explores as alone.
  static std::vector<int> ChooseTogether(std::span<KController* const> cs, std::span<const int> caps, int plain);
  // The K the next Choose() moves from (the K last chosen; kStartK at first), or the fixed K.
  int current_k() const { return fixed_ > 0 ? fixed_ : k_; }
  int Choose() { return Choose(Others()); }
  // One verify: `k` drafted, `accepted` of them taken; `seconds` for the target's forward, which
  // also ran `other_rows` rows of other sequences (seconds < 0: not a clean measurement, such as
  // a batch that carried prompt rows; only the acceptance counts).
  // `confidence`: the draft model's in each of the k drafts (empty: none, as prompt lookup).
  void Verified(int k, int accepted, double seconds, int other_rows = 0, std::span<const float> confidence = {});
  // Whether drafting is gated by the draft's confidence now (see the class comment): an
  // adaptive K, verify times at two row counts or more, confidences seen, acceptance below
  // kGateBelow. Choose() then returns k_max for a sequence alone.
  bool Gating() const;
  // After a draft, with the confidences of the drafts so far: whether to draft another. Always
  // true when not Gating() or in a batch (other_rows > 0: the batch's K were chosen together).
  bool MoreDrafts(std::span<const float> confidence, int other_rows = 0) const;
  // A draft's chance of being taken (the ones before it taken) for its confidence: the
  // acceptance seen at confidences in its tenth of [0, 1], shrunk towards the overall rate.
  double Calibrated(float confidence) const;
  // The drafter spent `seconds` running `rows` rows (at least the drafts).
  void Drafted(int rows, double seconds);
  // The overall acceptance estimate (reported per request and in /metrics).
  double acceptance() const { return alpha_; }
  // The estimate in the current state (after a verify that took every draft, or not).
  double StateAcceptance() const;
  // The controller's estimate of one step's seconds when drafting k (for tests and docs).
  double StepSeconds(int k) const;

 private:
  // What the other sequences of a batch bring to each step: their rows (one each, plus their
  // drafts), the tokens they expect from it, and the seconds their drafting takes. A batch's
  // drafts run together, a forward per draft position (ModelDrafter::ProposeAll), so drafting
  // takes as long as the longest: K drafts cost max(K * t_draft_, draft_seconds).
  struct Others {
    int rows = 0;
    double tokens = 0;
    double draft_seconds = 0;
    // Sequence i's others, from what each sequence of the batch brings (its own rows, tokens
    // and drafting seconds): the sums of rows and tokens and the longest drafting but its own.
    static Others Of(std::span<const Others> each, size_t i);
  };
  // Choose() as one of a batch: the rate counts the others' tokens, rows and drafting.
  int Choose(const Others& others);
  // What this sequence brings to a batch's step when it drafts k (the tokens by its state's
  // acceptance).
  Others Brings(int k) const;
  double ExpectedTokens(int k) const;
  // The verify time at `j` + 1 rows if known: measured, or else a profile's (Restore) shifted
  // by this run's mean difference from it where measured.
  bool Known(int j, double& seconds) const;
  int MeasuredRowCounts() const;
  double VerifySeconds(int rows_less_one) const;
  int fixed_, k_max_, k_;
  int last_k_ = -1;  // the K of the last verify
  int state_ = 0;  // 0 after a rejection (or no drafts), 1 after a verify that took every draft
  int last_missed_ = 0;  // drafts the last verify did not take
  double alpha_ = 0.7;
  double successes_ = 1.4, trials_ = 2;  // overall; the prior: 70% over two drafts
  double state_successes_[2] = {0, 0}, state_trials_[2] = {0, 0};
  struct Timing {
    double seconds = 0;
    int n = 0;
  };
  // Per batch rows - 1 (K, alone): moving average of the forward's time. Shared by the
  // controllers of one server's batches (ShareTimes); a copy of a controller shares it too.
  std::shared_ptr<std::vector<Timing>> verify_;
  double t_draft_ = 0;
  int steps_ = 0;
  // Per confidence bin: drafts taken and tried (counted like the acceptance, undecayed).
  double conf_successes_[kConfidenceBins] = {}, conf_trials_[kConfidenceBins] = {};
  // A profile's verify times by rows - 1 (0: none), and the sum and count of this run's
  // measurements' differences from them.
  std::vector<double> profile_;
  double shift_sum_ = 0;
  int shift_n_ = 0;
  // Recent tokens per second (decayed sums of each verify's tokens and its step's seconds).
  double recent_tokens_ = 0, recent_seconds_ = 0;
};

}  // namespace daisy::pipeline
