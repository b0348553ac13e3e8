#include "coord/k_controller.h"

#include <algorithm>
#include <cmath>

namespace daisy::coord {

KController::KController(int fixed_k, int k_max, int max_rows)
    : fixed_(fixed_k), k_max_(std::max(1, k_max)), k_(std::min(kStartK, k_max_)),
      verify_(std::make_shared<std::vector<Timing>>(static_cast<size_t>(std::max(k_max_ + 1, max_rows)))) {}

void KController::ShareTimes(const KController& with) {
  if (with.verify_->size() == verify_->size()) verify_ = with.verify_;
}

void KController::StartFrom(const KController& other) {
  if (other.k_max_ != k_max_ || other.fixed_ != fixed_ || other.verify_->size() != verify_->size()) return;
  verify_ = std::make_shared<std::vector<Timing>>(*other.verify_);
  t_draft_ = other.t_draft_;
  k_ = other.k_;
  alpha_ = other.alpha_;
  successes_ = 2 * alpha_, trials_ = 2;
  // How often drafts are taken after a full verify and after a miss is, like the rate itself, a
  // property of the target/draft pair more than of one text: the decayed counts carry over.
  std::copy(std::begin(other.state_successes_), std::end(other.state_successes_), state_successes_);
  std::copy(std::begin(other.state_trials_), std::end(other.state_trials_), state_trials_);
  // So is how often a draft is taken at each confidence.
  std::copy(std::begin(other.conf_successes_), std::end(other.conf_successes_), conf_successes_);
  std::copy(std::begin(other.conf_trials_), std::end(other.conf_trials_), conf_trials_);
  // And the times of a profile the other started from, with what its run learned of their shift.
  profile_ = other.profile_;
  shift_sum_ = other.shift_sum_, shift_n_ = other.shift_n_;
}

KController::Learned KController::Export() const {
  Learned l;
  l.fixed_k = fixed_, l.k_max = k_max_, l.k = k_, l.alpha = alpha_;
  std::copy(std::begin(state_successes_), std::end(state_successes_), l.state_successes);
  std::copy(std::begin(state_trials_), std::end(state_trials_), l.state_trials);
  for (int b = 0; b < kConfidenceBins; ++b) {
    const double scale = conf_trials_[b] > kProfileTrials ? kProfileTrials / conf_trials_[b] : 1;
    l.conf_successes[b] = conf_successes_[b] * scale, l.conf_trials[b] = conf_trials_[b] * scale;
  }
  for (int j = 0; j < static_cast<int>(verify_->size()); ++j) {
    double seconds = 0;
    l.verify_seconds.push_back(Known(j, seconds) ? seconds : 0);
  }
  while (!l.verify_seconds.empty() && l.verify_seconds.back() == 0) l.verify_seconds.pop_back();
  l.draft_seconds = t_draft_;
  return l;
}

bool KController::Restore(const Learned& l) {
  if (l.fixed_k != fixed_ || l.k_max != k_max_) return false;
  KController from(fixed_, k_max_, static_cast<int>(verify_->size()));
  from.k_ = std::clamp(l.k, 0, k_max_);
  from.alpha_ = std::clamp(l.alpha, 0.0, 1.0);
  for (int s = 0; s < 2; ++s) {
    from.state_trials_[s] = std::max(0.0, l.state_trials[s]);
    from.state_successes_[s] = std::clamp(l.state_successes[s], 0.0, from.state_trials_[s]);
  }
  for (int b = 0; b < kConfidenceBins; ++b) {
    from.conf_trials_[b] = std::max(0.0, l.conf_trials[b]);
    from.conf_successes_[b] = std::clamp(l.conf_successes[b], 0.0, from.conf_trials_[b]);
  }
  from.profile_.assign(l.verify_seconds.begin(),
                       l.verify_seconds.begin() + static_cast<std::ptrdiff_t>(std::min(l.verify_seconds.size(), verify_->size())));
  for (double& t : from.profile_) t = std::isfinite(t) && t > 0 ? t : 0;
  from.t_draft_ = std::max(0.0, l.draft_seconds);
  StartFrom(from);
  return true;
}

double KController::StateAcceptance() const {
  return (state_successes_[state_] + kShrink * alpha_) / (state_trials_[state_] + kShrink);
}

KController::Others KController::Others::Of(std::span<const Others> each, size_t i) {
  Others o;
  for (size_t j = 0; j < each.size(); ++j) {
    if (j == i) continue;
    o.rows += each[j].rows;
    o.tokens += each[j].tokens;
    o.draft_seconds = std::max(o.draft_seconds, each[j].draft_seconds);
  }
  return o;
}

KController::Others KController::Brings(int k) const { return {1 + k, ExpectedTokens(k), k * t_draft_}; }

bool KController::Known(int j, double& seconds) const {
  const Timing& t = (*verify_)[j];
  if (t.n > 0) {
    seconds = t.seconds;
    return true;
  }
  if (j < static_cast<int>(profile_.size()) && profile_[j] > 0) {
    seconds = std::max(profile_[j] + shift_sum_ / (shift_n_ + kShiftPrior), 1e-6);
    return true;
  }
  return false;
}

int KController::MeasuredRowCounts() const {
  int n = 0;
  double seconds;
  for (int j = 0; j < static_cast<int>(verify_->size()); ++j) n += Known(j, seconds) ? 1 : 0;
  return n;
}

double KController::ExpectedTokens(int k) const {
  const double a = std::clamp(StateAcceptance(), 0.0, 0.999);
  return (1 - std::pow(a, std::max(k, 0) + 1)) / (1 - a);
}

double KController::VerifySeconds(int k) const {
  const int last = static_cast<int>(verify_->size()) - 1;
  double at = 0, t_lo = 0, t_hi = 0;
  if (k <= last && Known(k, at)) return at;
  // A plain step's time (one row) says nothing of a verify's where a verify's is known: one
  // row may take another path (a matrix-vector product). So K >= 1 are estimated from K >= 1.
  int first = 0;
  for (int j = 1; j <= last && k >= 1; ++j) {
    if (Known(j, at)) {
      first = 1;
      break;
    }
  }
  // The nearest known row counts on each side; between them, interpolate.
  int lo = std::min(k, last + 1) - 1, hi = k + 1;
  while (lo >= first && !Known(lo, t_lo)) --lo;
  while (hi <= last && !Known(hi, t_hi)) ++hi;
  if (lo >= first && hi <= last) {
    const double f = static_cast<double>(k - lo) / (hi - lo);
    return t_lo + f * (t_hi - t_lo);
  }
  // Beyond them: along the least-squares line through the known ones (slope at least 0).
  double sw = 0, sk = 0, st = 0, skk = 0, skt = 0;
  for (int j = first; j <= last; ++j) {
    double t;
    if (!Known(j, t)) continue;
    sw += 1, sk += j, st += t, skk += double(j) * j, skt += j * t;
  }
  if (sw == 0) return 0;
  const double var = skk / sw - (sk / sw) * (sk / sw);
  const double slope = var > 0 ? std::max(0.0, (skt / sw - (sk / sw) * (st / sw)) / var) : 0;
  const int nearest = lo >= first ? lo : hi;
  return std::max((lo >= first ? t_lo : t_hi) + (k - nearest) * slope, 1e-6);
}

double KController::StepSeconds(int k) const { return VerifySeconds(k) + k * t_draft_; }

int KController::Choose(const Others& others) {
  ++steps_;
  if (fixed_ > 0) return fixed_;
  if (trial_left_ > 0 && others.rows == 0) {
    --trial_left_;
    plain_trial_ = true;
    return 0;
  }
  const int measured = MeasuredRowCounts();
  if (measured == 0) return k_;
  double known_at_k;
  if (measured == 1 && (Known(k_, known_at_k) || last_k_ == k_)) {
    // Explore: a second K gives the cost a slope. Which way, and how far, the first verify
    // tells: every draft taken, up two; all but the last, up one; fewer, down one.
    const int step = last_missed_ == 0 ? 2 : last_missed_ == 1 ? 1 : -1;
    int next = std::clamp(k_ + step, 0, k_max_);
    if (next == k_) next = k_ < k_max_ ? k_ + 1 : k_ - 1;
    k_ = next;
    return k_;
  }
  const int rows = std::max(0, others.rows);
  // The first choice from learned times (a warm start) may go anywhere: the K it starts from is
  // another sequence's, perhaps chosen in a batch of another size.
  const bool fresh = last_k_ < 0;
  int best = k_;
  double best_rate = -1;
  // Gated, the drafts actually verified may stop well below k_: K down to two below them are
  // candidates too, so k_ is not held up by times measured once at K that are no longer drafted.
  const int from = std::min(k_, last_k_ >= 0 ? last_k_ : k_);
  for (int kk = fresh ? 0 : std::max(0, from - 2); kk <= std::min(k_max_, fresh ? k_max_ : k_ + 1); ++kk) {
    const double tokens = ExpectedTokens(kk) + others.tokens;
    // Alone, a drafting step also costs what whole steps showed beyond its verify and drafts.
    const double unseen = rows == 0 && kk > 0 ? Unseen() : 0;
    const double seconds = VerifySeconds(kk + rows) + std::max(kk * t_draft_, others.draft_seconds) + unseen;
    const double rate = tokens / std::max(seconds, 1e-9);
    if (rate > best_rate) best_rate = rate, best = kk;
  }
  // Alone, once plain steps are timed, what whole drafting steps gave overrules the model
  // where it falls short of plain decoding (by more than noise).
  const bool vetoed = others.rows == 0 && best > 0 && PlainIsFaster();
  if (vetoed) best = 0;
  k_ = best;
  // Alone, K = 0 is measured like any other K while it is a close call: without a measurement
  // its time is extrapolated from the drafting K, which a pair whose draft costs about as much
  // as the target's verify (a tiny target, one node) gets wrong by the verify's extra rows.
  if (others.rows == 0 && k_ > 0 && PlainTrialDue(best_rate)) {
    plain_trial_ = true;
    trial_left_ = kPlainTrialSteps - 1;
    return 0;
  }
  // A probe that left K at 0 and did not have all its drafts taken puts the next one twice as
  // far off (alone; up to kProbeEveryMost): where drafting costs what it saves, probes are what
  // plain decoding still pays for it. One whose drafts were all taken brings them back to
  // kProbeEvery, so a draft that became good is found as soon as before, unless whole steps
  // still show plain decoding faster (whether the rule or the veto chose K = 0).
  if (probed_) {
    const bool failed = k_ == 0 && others.rows == 0 && (state_ == 0 || PlainIsFaster());
    probe_every_ = failed ? std::min(2 * probe_every_, kProbeEveryMost) : kProbeEvery;
    probed_ = false;
  }
  if (k_ == 0) {
    // Probe, so the acceptance estimate can recover (gated: as far as the confidences go).
    if (steps_ - last_probe_step_ >= probe_every_) {
      last_probe_step_ = steps_;
      probed_ = true;
      // Where plain decoding is measured faster, one draft is enough to see whether the draft
      // came back: gated, a probe's drafts run to the confidences' stop at a verify's cost.
      return others.rows == 0 && Gating() && !PlainIsFaster() ? k_max_ : 1;
    }
    // Alone, a plain step right after drafting is not timed (Verified): while K = 0 is not
    // measured, one the rule chose is followed by another, which is (a trial's second step).
    if (others.rows == 0 && !last_plain_ && (*verify_)[0].n < kPlainTimedSteps) trial_left_ = 1;
    return 0;
  }
  // Alone and gated, the draft's confidences end the drafting (MoreDrafts); k_ keeps following
  // the rule above for when gating stops.
  if (others.rows == 0 && Gating()) return k_max_;
  return k_;
}

bool KController::PlainTrialDue(double best_rate) const {
  const Timing& plain = (*verify_)[0];
  // kPlainTimedSteps plain steps measure it (the first may be slow: buffers and caches warm);
  // K = 0's time is then the rule's to keep up, as any K's.
  if (plain.n >= kPlainTimedSteps || (plain.n == 0 ? steps_ < kPlainTrialFrom : steps_ - last_plain_step_ < kPlainTrialEvery)) {
    return false;
  }
  // What drafting steps gave (whole steps, when timed so), else what the rule expects of them,
  // against what a plain step may take: no longer than any verify (it has fewer rows), however
  // far above that the verifies' line meets K = 0.
  const double drafting_rate = drafting_steps_seconds_ > 0 ? drafting_steps_tokens_ / drafting_steps_seconds_ : best_rate;
  double plain_seconds = VerifySeconds(0);
  for (int j = 1; j < static_cast<int>(verify_->size()); ++j) {
    double t;
    if (Known(j, t)) plain_seconds = std::min(plain_seconds, t);
  }
  return drafting_rate < kPlainTrialBelow / std::max(plain_seconds, 1e-9);
}

bool KController::PlainIsFaster() const {
  const Timing& plain = (*verify_)[0];
  if (plain.n == 0 || drafting_steps_seconds_ <= 0) return false;
  const double plain_rate = 1 / std::max(plain.seconds + (plain_extra_.n > 0 ? plain_extra_.seconds : 0), 1e-9);
  const double share = plain.n >= kPlainTimedSteps ? kPlainWins : kPlainWinsClearly;
  return drafting_steps_tokens_ / drafting_steps_seconds_ < share * plain_rate;
}

double KController::Unseen() const {
  if (drafting_extra_.n == 0) return 0;
  return std::max(0.0, drafting_extra_.seconds - (plain_extra_.n > 0 ? plain_extra_.seconds : 0));
}

void KController::Stepped(int k, double seconds) {
  if (fixed_ > 0 || !(seconds > 0) || last_verify_seconds_ < 0) return;
  const double seen = last_verify_seconds_ + (k > 0 ? last_draft_seconds_ : 0);
  // A stall (a pipeline's pause, a slow reader of the output) is not the step's cost: at most
  // the seen time again counts.
  const double extra = std::clamp(seconds - seen, 0.0, seen);
  Timing& t = k > 0 ? drafting_extra_ : plain_extra_;
  t.seconds = t.n == 0 ? extra : t.seconds + (extra - t.seconds) / std::min(t.n + 1, 8);
  ++t.n;
  if (k > 0) {
    constexpr double kRecent = 0.8;  // per drafting step
    drafting_steps_tokens_ = drafting_steps_tokens_ * kRecent + last_tokens_;
    drafting_steps_seconds_ = drafting_steps_seconds_ * kRecent + seen + extra;
  }
}

namespace {

int ConfidenceBin(float confidence) {
  if (!(confidence >= 0)) return 0;  // NaN (a broken draft forward) counts as no confidence
  return std::clamp(static_cast<int>(confidence * KController::kConfidenceBins), 0, KController::kConfidenceBins - 1);
}

}  // namespace

double KController::Calibrated(float confidence) const {
  const int b = ConfidenceBin(confidence);
  return (conf_successes_[b] + kShrink * alpha_) / (conf_trials_[b] + kShrink);
}

bool KController::Gating() const {
  if (fixed_ > 0 || alpha_ >= kGateBelow || MeasuredRowCounts() < 2) return false;
  return std::any_of(std::begin(conf_trials_), std::end(conf_trials_), [](double t) { return t > 0; });
}

bool KController::MoreDrafts(std::span<const float> confidence, int other_rows) const {
  if (other_rows > 0 || confidence.empty() || !Gating()) return true;
  const int i = static_cast<int>(confidence.size());
  double all_taken = 1;
  for (float c : confidence) all_taken *= Calibrated(c);
  // The bar: the recent tokens per second (before any, the rule's expectation at its K).
  const double bar = recent_seconds_ > 0 ? recent_tokens_ / recent_seconds_
                                         : ExpectedTokens(k_) / std::max(StepSeconds(k_), 1e-9);
  const double cost = VerifySeconds(i + 1) - VerifySeconds(i) + t_draft_;
  return all_taken * std::clamp(alpha_, 0.0, 0.999) > bar * cost;
}

std::vector<int> KController::ChooseTogether(std::span<KController* const> cs, std::span<const int> caps, int plain) {
  const size_t n = cs.size();
  std::vector<int> ks(n, 0);
  if (n == 0) return ks;
  const int measured = cs[0]->MeasuredRowCounts();
  const bool shared = std::all_of(cs.begin(), cs.end(), [&](const KController* c) { return c->verify_ == cs[0]->verify_; });
  if (n == 1 || measured < 2 || !shared) {
    // One at a time, each given the others' current K (and the ones before it their new K).
    std::vector<Others> own(n + static_cast<size_t>(std::max(0, plain)), Others{1, 1.0, 0.0});
    for (size_t i = 0; i < n; ++i) own[i] = cs[i]->Brings(cs[i]->current_k());
    for (size_t i = 0; i < n; ++i) {
      ks[i] = std::clamp(cs[i]->Choose(Others::Of(own, i)), 0, std::max(0, caps[i]));
      own[i] = cs[i]->Brings(ks[i]);
    }
    return ks;
  }
  std::vector<int> hi(n);
  std::vector<double> a(n);
  int rows = std::max(0, plain);
  double tokens = std::max(0, plain);
  for (size_t i = 0; i < n; ++i) {
    KController& c = *cs[i];
    ++c.steps_;
    const int cap = std::max(0, caps[i]);
    if (c.fixed_ > 0) {
      ks[i] = hi[i] = std::min(c.fixed_, cap);
    } else if (c.last_k_ < 0) {  // its first choice: anywhere, as alone
      ks[i] = 0;
      hi[i] = std::min(c.k_max_, cap);
    } else {
      ks[i] = std::min(std::max(0, c.k_ - 2), cap);
      hi[i] = std::min({c.k_max_, c.k_ + 1, cap});
    }
    a[i] = std::clamp(c.StateAcceptance(), 0.0, 0.999);
    rows += 1 + ks[i];
    tokens += c.ExpectedTokens(ks[i]);
  }
  auto rate = [&] {
    double draft = 0;
    for (size_t i = 0; i < n; ++i) draft = std::max(draft, ks[i] * cs[i]->t_draft_);
    return tokens / std::max(cs[0]->VerifySeconds(rows - 1) + draft, 1e-9);
  };
  std::vector<int> best = ks;
  double best_rate = rate();
  while (true) {
    size_t pick = n;
    double gain = -1;
    for (size_t i = 0; i < n; ++i) {
      const double g = std::pow(a[i], ks[i] + 1);  // the chance one more draft is taken
      if (ks[i] < hi[i] && g > gain) gain = g, pick = i;
    }
    if (pick == n) break;
    ++ks[pick], ++rows, tokens += gain;
    const double r = rate();
    if (r > best_rate) best_rate = r, best = ks;
  }
  for (size_t i = 0; i < n; ++i) {
    KController& c = *cs[i];
    if (c.fixed_ > 0) continue;
    c.k_ = best[i];
    // At K = 0, the probe as alone keeps the acceptance estimate alive.
    if (c.k_ == 0 && c.steps_ % 8 == 0 && caps[i] > 0) best[i] = 1;
  }
  return best;
}

void KController::Verified(int k, int accepted, double seconds, int other_rows, std::span<const float> confidence) {
  if (k < 0 || k > k_max_) return;
  // Drafts are tried in order until the first rejection: `accepted` taken of
  // accepted + (a rejection ? 1 : 0) tried; each tried one counts under its confidence.
  const int tried = accepted + (accepted < k ? 1 : 0);
  for (int j = 0; j < std::min(tried, static_cast<int>(confidence.size())); ++j) {
    const int b = ConfidenceBin(confidence[j]);
    conf_successes_[b] += j < accepted ? 1 : 0;
    conf_trials_[b] += 1;
  }
  const size_t at = static_cast<size_t>(k) + static_cast<size_t>(std::max(0, other_rows));
  // A plain step right after a drafting one is not timed: it pays for the switch (caches, a
  // pipeline's threads gone to sleep while the draft ran), which plain decoding does not.
  const bool switched = at == 0 && !last_plain_;
  if (seconds >= 0 && at < verify_->size() && !switched) {
    Timing& t = (*verify_)[at];
    if (at < profile_.size() && profile_[at] > 0) {
      // A profile's times stand in for row counts not measured yet, shifted by how far this
      // run's measurements are from them on average (a changed network delay shifts them all).
      shift_sum_ += seconds - profile_[at];
      ++shift_n_;
      // A row count's first measurement averages in with the profile's time (shifted) as if
      // measured three times before, as a warm start's would.
      if (t.n == 0) {
        Known(static_cast<int>(at), t.seconds);
        t.n = 3;
      }
    }
    // The first measurement sets it; then a moving average over about the last 4. But K = 0's
    // first two come from plain trials (PlainTrialDue), far apart and few: a first use's
    // slowness (buffers, caches) would outlast them in an average, so the smaller counts.
    if (at == 0 && t.n == 1) {
      t.seconds = std::min(t.seconds, seconds);
    } else {
      t.seconds = t.n == 0 ? seconds : t.seconds + (seconds - t.seconds) / std::min(t.n + 1, 4);
    }
    ++t.n;
  }
  // A trial's plain steps leave the K the rule moves from as the drafting left it.
  if (!(k == 0 && plain_trial_)) last_k_ = k;
  last_plain_ = k == 0;
  last_verify_seconds_ = other_rows <= 0 ? seconds : -1;
  last_tokens_ = std::clamp(accepted, 0, k) + 1;
  last_draft_seconds_ = step_draft_seconds_;
  step_draft_seconds_ = 0;
  if (k == 0) last_plain_step_ = steps_;
  if (seconds >= 0 && other_rows <= 0) {
    constexpr double kRecent = 0.9;  // per verify
    recent_tokens_ = recent_tokens_ * kRecent + std::clamp(accepted, 0, k) + 1;
    recent_seconds_ = recent_seconds_ * kRecent + seconds + k * t_draft_;
  }
  if (k > 0) {
    // The geometric estimate, decayed.
    successes_ = successes_ * kDecay + accepted;
    trials_ = trials_ * kDecay + tried;
    alpha_ = successes_ / trials_;
    state_successes_[state_] = state_successes_[state_] * kDecay + accepted;
    state_trials_[state_] = state_trials_[state_] * kDecay + tried;
  }
  // A plain trial says nothing of the drafts: the state stays the one the drafting left.
  if (k == 0 && plain_trial_) {
    plain_trial_ = false;
    return;
  }
  plain_trial_ = false;
  state_ = k > 0 && accepted == k ? 1 : 0;
  last_missed_ = k - std::clamp(accepted, 0, k);
}

void KController::Drafted(int rows, double seconds) {
  if (rows <= 0) return;
  step_draft_seconds_ += seconds;
  const double per = seconds / rows;
  t_draft_ = t_draft_ == 0 ? per : 0.8 * t_draft_ + 0.2 * per;
}

}  // namespace daisy::coord
