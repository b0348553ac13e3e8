// KController: chooses how many tokens to draft per verify (docs/speculative.md).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

namespace daisy::coord {

// Chooses K per sequence (docs/speculative.md): the acceptance rate a (decayed geometric
// estimate) gives the expected tokens per verify E(K) = (1 - a^(K+1)) / (1 - a); the cost of a
// step is the verify's measured time at that K (a moving average per K; between measured K
// interpolated, beyond them extrapolated along the least-squares line through them) plus K times
// the drafter's time per row. K moves to the best of K-2 .. K+1 by E(K) / cost, so it climbs one
// step at a time and never leaps on one lucky verify; only a warm start's first choice (times
// learned by another sequence, StartFrom) may go to any K. The first verify of a cold start
// drafts kStartK; the second explores (so two K are measured): up two if the first took every
// draft, up one if all but the last, else down one. At K = 0, a 1-token probe every 8 steps
// keeps the acceptance estimate alive (alone, further apart while probes find drafting does not
// pay: kProbeEveryMost). A fixed K skips all this.
//
// K = 0's own time is measured, not only extrapolated from the verifies (which a tiny target,
// whose one-row forward costs half a two-row one's, gets wrong): a sequence alone decodes a few
// steps plainly (a trial, PlainTrialDue) while what its drafting steps gave, timed whole
// (Stepped), is within kPlainTrialBelow of what a plain step may give. A plain step right after
// a drafting one is not timed (it pays for the switch: caches, a pipeline's threads gone to
// sleep while the draft ran), so while K = 0 is not measured a plain step the rule chooses
// after drafting is followed by a second one, which is. Whole steps also show what a drafting
// step costs beyond its verify and drafts (Unseen), which counts in every K > 0's cost; and once
// two plain steps are timed, drafting steps that gave less than kPlainWins of plain decoding's
// tokens a second overrule the model (PlainIsFaster: K = 0, probes aside; after one timed
// plain step already below kPlainWinsClearly). So a pair whose drafting costs about what it
// saves (a tiny target on one node) falls back to plain decoding; its probes then draft one
// token, not as many as the confidences allow.
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
  // At K = 0 a probe drafts every kProbeEvery steps. Alone, a probe after which K stays 0
  // doubles that (up to kProbeEveryMost) unless it had every draft taken and plain decoding is
  // not measured faster (PlainIsFaster); then it is kProbeEvery again.
  static constexpr int kProbeEvery = 8;
  static constexpr int kProbeEveryMost = 32;
  // A trial: kPlainTrialSteps plain steps in a row, while drafting steps (whole steps as
  // Stepped timed them; else the best K's expected rate) give fewer than kPlainTrialBelow times
  // the tokens per second a plain step may give: first at step kPlainTrialFrom (after the first
  // verifies), again kPlainTrialEvery steps after the last plain step while it is still a
  // close call, until two plain steps are timed.
  static constexpr double kPlainTrialBelow = 1.15;
  // Plain decoding wins when drafting steps gave less than this times its rate; from the first
  // timed plain step already when they gave less than kPlainWinsClearly times it (a tiny target
  // on one node: drafting at 0.45 of plain decoding's rate would otherwise go on to a second
  // trial, eight steps later).
  static constexpr double kPlainWins = 0.9;
  static constexpr double kPlainWinsClearly = 0.5;
  static constexpr int kPlainTrialSteps = 2;  // in a row: the first, after drafting, is not timed
  // Timed plain steps that measure K = 0: trials stop there, and PlainIsFaster may speak.
  static constexpr int kPlainTimedSteps = 2;
  static constexpr int kPlainTrialFrom = 5;
  static constexpr int kPlainTrialEvery = 8;
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
  // A whole decode step of a sequence alone, as its decode loop saw it (from the last step's
  // end to this one's: drafting, the forward and everything around them), after its Verified:
  // `k` drafted. What a drafting step costs beyond its verify and its drafts, less what a plain
  // step costs beyond its forward (Unseen), counts in every K > 0's cost for a sequence alone.
  void Stepped(int k, double seconds);
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
  // Whether a sequence alone, whose best K expects `best_rate`, should decode the next step
  // plainly to measure K = 0 (kPlainTrialBelow).
  bool PlainTrialDue(double best_rate) const;
  // Whether timed plain steps (two at least) gave more than drafting steps (whole, Stepped) by
  // more than noise (kPlainWins), or one timed plain step gave far more (kPlainWinsClearly).
  bool PlainIsFaster() const;
  // What whole steps (Stepped) showed a drafting step costs beyond its verify and drafts, more
  // than a plain step beyond its forward (0 until a drafting step is timed so).
  double Unseen() const;
  double VerifySeconds(int rows_less_one) const;
  int fixed_, k_max_, k_;
  int last_k_ = -1;  // the K of the last verify (a plain trial's aside)
  bool last_plain_ = false;  // the last verify was a plain step (K = 0)
  int state_ = 0;  // 0 after a rejection (or no drafts), 1 after a verify that took every draft
  int last_missed_ = 0;  // drafts the last verify did not take
  bool plain_trial_ = false;  // the last Choose() was a plain trial's step (PlainTrialDue)
  int trial_left_ = 0;        // plain steps still to come in this trial
  bool probed_ = false;       // the last Choose() was a probe at K = 0
  int probe_every_ = kProbeEvery, last_probe_step_ = 0;
  int last_plain_step_ = 0;   // steps_ at the last verify with K = 0
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
  // Whole steps alone (Stepped): the last verify's seconds (< 0: not alone or not clean), the
  // drafter's seconds before it, the drafter's seconds since, and the seconds beyond those of
  // plain and drafting steps (moving averages).
  double last_verify_seconds_ = -1, last_draft_seconds_ = 0, step_draft_seconds_ = 0;
  int last_tokens_ = 0;  // the last verify's tokens
  Timing plain_extra_, drafting_extra_;
  // Drafting whole steps' tokens and seconds (decayed sums): what drafting gave, for
  // PlainTrialDue.
  double drafting_steps_tokens_ = 0, drafting_steps_seconds_ = 0;
};

}  // namespace daisy::coord
