#include "coord/drafter.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <tuple>

#include "coord/chunker.h"

namespace daisy::coord {

using pipeline::ForwardHeader;
using pipeline::kMaxDraftSupport;
using pipeline::OutputKind;
using pipeline::ResultMsg;
using pipeline::RowOutput;
using pipeline::SeqResult;
using pipeline::SeqRows;

Status LookupDrafter::Propose(int32_t, std::span<const int32_t> history, int k, const runtime::SamplingParams&,
                              std::vector<int32_t>& draft, std::vector<DraftDistribution>& q) {
  draft.clear();
  q.clear();
  const int n = static_cast<int>(history.size());
  for (int g = std::min(max_ngram_, n - 1); g >= min_ngram_; --g) {
    const auto suffix = history.subspan(n - g);
    // The most recent earlier occurrence: its continuation is the likeliest to repeat.
    for (int at = n - g - 1; at >= 0; --at) {
      if (!std::equal(suffix.begin(), suffix.end(), history.begin() + at)) continue;
      // Past the end of the history the continuation is the draft itself: the match is `n - at - g`
      // tokens back, and a text that repeats with that period keeps repeating (a loop shorter
      // than K still fills the draft).
      for (int i = at + g; static_cast<int>(draft.size()) < k; ++i) draft.push_back(i < n ? history[i] : draft[i - n]);
      q.resize(draft.size());  // point masses
      return Status::Ok();
    }
  }
  return Status::Ok();
}

namespace {

// The draft's distribution from its top tokens' log-probabilities: the sampling filters and the
// temperature applied over those candidates only, normalised.
DraftDistribution DraftQ(const std::vector<std::pair<int32_t, float>>& top, const runtime::SamplingParams& sp) {
  std::vector<float> logits(top.size());
  for (size_t i = 0; i < top.size(); ++i) logits[i] = top[i].second;
  runtime::SamplingParams local = sp;
  local.repeat_penalty = 1.0f;  // any q is exact; the penalty stays the target's business
  runtime::Sampler sampler(local);
  std::vector<runtime::Sampler::Weighted> w;
  const double total = sampler.Distribution(logits, {}, w);
  DraftDistribution q;
  for (const auto& c : w) q.push_back({top[c.id].first, static_cast<float>(c.weight / total)});
  // Rounded to float, the mass may miss 1 by an ulp or so: the draw below uses exactly these.
  return q;
}

// The drawn candidate: its token and its probability under q.
const std::pair<int32_t, float>& DrawFrom(const DraftDistribution& q, double u) {
  double total = 0;
  for (auto [id, prob] : q) total += prob;
  u *= total;
  for (const auto& c : q) {
    u -= c.second;
    if (u < 0) return c;
  }
  return q.back();
}

}  // namespace

void Drafter::ProposeAll(std::span<DraftJob> jobs) {
  for (DraftJob& j : jobs) {
    j.Reset();
    if (j.k <= 0) continue;
    const auto t0 = std::chrono::steady_clock::now();
    j.status = Propose(j.seq, j.history, j.k, *j.sampling, j.draft, j.q);
    j.rows = last_rows_;
    j.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
}

struct ModelDrafter::Live {
  DraftJob* job;
  std::vector<int32_t> feed;  // rows to run next: the catch-up, then the last draft
  int32_t start;              // the feed's first position
  size_t* cached;             // the job's entry in cached_
};

void ModelDrafter::Step(std::vector<Live>& live) {
  const auto t0 = std::chrono::steady_clock::now();
  const size_t max_rows = static_cast<size_t>(max_rows_);
  std::vector<uint64_t> ids;
  ForwardHeader h;
  std::vector<int32_t> tokens;
  Status submitted = Status::Ok();
  auto flush = [&] {
    if (h.seqs.empty() || !submitted.ok()) return;
    h.id = draft_.NextId();
    h.dim = draft_.config().d_model;
    submitted = draft_.Submit(h, tokens);
    if (submitted.ok()) ids.push_back(h.id);
    h.seqs.clear();
    tokens.clear();
  };
  for (size_t i = 0; i < live.size(); ++i) {
    Live& l = live[i];
    const DraftJob& j = *l.job;
    Chunker feed(l.feed, l.start);
    // A catch-up longer than one forward: its leading chunks go alone and ask for nothing.
    while (feed.left() > max_rows) {
      flush();
      const Chunk c = feed.Take(max_rows);
      h.seqs.push_back(SeqRows{j.seq, c.start, static_cast<int32_t>(c.tokens.size()), {}});
      h.seqs.back().out.kind = OutputKind::kNone;
      tokens.assign(c.tokens.begin(), c.tokens.end());
      flush();
    }
    // The rest (at most one forward's rows) packs with the other sequences' feeds.
    if (static_cast<size_t>(h.total_rows()) + feed.left() > max_rows) flush();
    const Chunk c = feed.Take(max_rows);
    SeqRows rows{j.seq, c.start, static_cast<int32_t>(c.tokens.size()), {}};
    if (j.sampling->temperature > 0) {
      rows.out.kind = OutputKind::kTopK;
      rows.out.top_k = static_cast<uint16_t>(std::min(kMaxDraftSupport, draft_.config().n_vocab));
    }
    h.seqs.push_back(std::move(rows));
    tokens.insert(tokens.end(), c.tokens.begin(), c.tokens.end());
  }
  flush();
  // Every submitted forward is waited for, even after an error, so the ring stays in step.
  std::vector<const RowOutput*> got(live.size(), nullptr);
  std::vector<ResultMsg> results;
  results.reserve(ids.size());
  Status waited = Status::Ok();
  for (uint64_t id : ids) {
    auto r = draft_.Wait(id);
    if (!r.ok()) {
      if (waited.ok()) waited = r.status();
      continue;
    }
    results.push_back(std::move(*r));
    for (const SeqResult& x : results.back().seqs) {
      if (x.rows.size() != 1) continue;
      for (size_t i = 0; i < live.size(); ++i) {
        if (live[i].job->seq == x.seq) got[i] = &x.rows[0];
      }
    }
  }
  const Status failed = !submitted.ok() ? submitted : waited;
  // Each job is charged the whole step: drafting for a batch lasts as long as its longest job.
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::vector<Live> next;
  for (size_t i = 0; i < live.size(); ++i) {
    Live& l = live[i];
    DraftJob& j = *l.job;
    j.seconds += took;
    if (!failed.ok() || got[i] == nullptr) {
      j.status = !failed.ok() ? failed : Internal("the draft model returned no token for sequence %d", j.seq);
      continue;  // its cache keeps only what earlier steps settled
    }
    const RowOutput& row = *got[i];
    int32_t token = row.token;
    float confidence = std::exp(row.logprob);
    DraftDistribution qi;
    if (j.sampling->temperature > 0) {
      qi = DraftQ(row.top, *j.sampling);
      if (qi.empty()) {
        j.status = Internal("the draft model returned no candidates for sequence %d", j.seq);
        continue;
      }
      const uint64_t position = j.history.size() + j.draft.size();
      std::tie(token, confidence) = DrawFrom(qi, runtime::Sampler::Uniform(j.sampling->seed, position, 3));
    }
    l.start += static_cast<int32_t>(l.feed.size());
    j.rows += static_cast<int>(l.feed.size());
    *l.cached = static_cast<size_t>(l.start);
    j.draft.push_back(token);
    j.q.push_back(std::move(qi));
    j.confidence.push_back(confidence);
    l.feed.assign(1, token);
    // The stop depends only on the draft's side (its confidences) and on what was settled
    // before: the accept/reject rule stays exact.
    if (static_cast<int>(j.draft.size()) < j.k && (!j.more || j.more(j.confidence))) next.push_back(std::move(l));
  }
  live = std::move(next);
}

void ModelDrafter::ProposeAll(std::span<DraftJob> jobs) {
  std::vector<Live> live;
  last_rows_ = 0;
  for (DraftJob& j : jobs) {
    j.Reset();
    if (j.k <= 0 || j.history.empty()) continue;
    // Catch the draft's cache up with the history (rows from `cached` on: start_pos rolls back
    // whatever it held past that), then draft one token per step.
    size_t& cached = cached_[j.seq];
    cached = std::min(cached, j.history.size() - 1);
    live.push_back(Live{&j, std::vector<int32_t>(j.history.begin() + static_cast<std::ptrdiff_t>(cached), j.history.end()),
                        static_cast<int32_t>(cached), &cached});
  }
  while (!live.empty()) Step(live);
  for (const DraftJob& j : jobs) last_rows_ += j.rows;
}

Status ModelDrafter::Propose(int32_t seq, std::span<const int32_t> history, int k,
                             const runtime::SamplingParams& sampling, std::vector<int32_t>& draft,
                             std::vector<DraftDistribution>& q) {
  DraftJob j;
  j.seq = seq;
  j.history = history;
  j.k = k;
  j.sampling = &sampling;
  ProposeAll(std::span<DraftJob>(&j, 1));
  draft = std::move(j.draft);
  q = std::move(j.q);
  return j.status;
}

void ModelDrafter::Settled(int32_t seq, size_t n) {
  auto it = cached_.find(seq);
  if (it != cached_.end()) it->second = std::min(it->second, n);
}

void ModelDrafter::Release(int32_t seq) {
  cached_.erase(seq);
  const int32_t s[1] = {seq};
  (void)draft_.Release(s);
}

}  // namespace daisy::coord
