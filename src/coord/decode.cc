#include "coord/decode.h"

#include <algorithm>
#include <chrono>

#include "coord/chunker.h"

namespace daisy::coord {

using pipeline::OutputKind;
using pipeline::OutputSpec;

OutputSpec NextTokenSpec(const runtime::SamplingParams& sp, std::span<const int32_t> history) {
  OutputSpec o;
  const bool penalty = sp.repeat_penalty != 1.0f && sp.repeat_last_n != 0;
  if (sp.temperature <= 0 && !penalty) return o;  // kArgmax
  o.kind = OutputKind::kSample;
  o.sampling = sp;
  o.position = history.size();
  if (penalty) {
    const size_t n = sp.repeat_last_n < 0 ? history.size()
                                          : std::min<size_t>(history.size(), sp.repeat_last_n);
    o.history.assign(history.end() - static_cast<std::ptrdiff_t>(std::min<size_t>(n, 4096)), history.end());
  }
  return o;
}

Status CheckSettled(const pipeline::SeqResult* out, std::span<const int32_t> draft, int32_t n_vocab) {
  const size_t n_out = out != nullptr ? out->rows.size() : 0;
  if (n_out < 1 || n_out > draft.size() + 1) {
    return Internal("the last stage returned %zu tokens for sequence %d (%zu drafted)", n_out,
                    out != nullptr ? out->seq : -1, draft.size());
  }
  for (size_t j = 0; j < n_out; ++j) {
    const int32_t token = out->rows[j].token;
    if (token < 0 || token >= n_vocab || (j + 1 < n_out && token != draft[j])) {
      return DataLoss("the last stage returned token %d at output %zu for sequence %d", token, j, out->seq);
    }
  }
  return Status::Ok();
}

SeqDecoder::SeqDecoder(int32_t seq, std::span<const int32_t> prompt, const runtime::SamplingParams& sampling,
                       int max_tokens, KController* k)
    : seq_(seq), history_(prompt.begin(), prompt.end()), prompt_size_(prompt.size()), prefill_size_(prompt.size()),
      sampling_(sampling),
      max_tokens_(max_tokens), k_(k) {}

int SeqDecoder::AddPromptRows(pipeline::ForwardHeader& h, std::vector<int32_t>& tokens, size_t max_rows) {
  // A refill's chunk ends where the set of stages lacking the rows changes, and its forward at
  // the last of them; the history's last row goes through every stage.
  const bool refill = refill_stage_ >= 0;
  const size_t end = refill ? static_cast<size_t>(NextRefillBreak(static_cast<int32_t>(prefilled_))) : prefill_size_;
  Chunker prompt(std::span<const int32_t>(history_).first(end), 0, prefilled_);
  const Chunk c = prompt.Take(max_rows);
  prefilled_ = prompt.taken();
  pipeline::SeqRows rows{seq_, c.start, static_cast<int32_t>(c.tokens.size()), {}};
  if (refill) {
    h.last_stage = refill_stage_;
    refill_stage_ = RefillStage(static_cast<int32_t>(prefilled_));
    rows.out.kind = OutputKind::kNone;
  } else if (prompt.done()) {
    rows.out = NextTokenSpec(sampling_, history_);
    rows.out.top_k = static_cast<uint16_t>(top_logprobs_);
    if (constraint_) rows.out.masks.push_back(constraint_->Next().words);
  } else {
    rows.out.kind = OutputKind::kNone;
  }
  h.seqs.push_back(std::move(rows));
  tokens.insert(tokens.end(), c.tokens.begin(), c.tokens.end());
  return static_cast<int>(c.tokens.size());
}

void SeqDecoder::AddDecodeRows(pipeline::ForwardHeader& h, std::vector<int32_t>& tokens) {
  decode_step_ = true;
  if (constraint_) {
    // Drafts the grammar refuses cannot be accepted: cut them off before they are sent.
    size_t keep = 0;
    while (keep < draft_.size() && constraint_->Allows(std::span<const int32_t>(draft_).first(keep), draft_[keep])) ++keep;
    draft_.resize(keep);
    if (q_.size() > keep) q_.resize(keep);
    if (confidence_.size() > keep) confidence_.resize(keep);
  }
  pipeline::SeqRows rows{seq_, static_cast<int32_t>(history_.size() - 1), decode_rows(),
                         NextTokenSpec(sampling_, history_)};
  rows.out.top_k = static_cast<uint16_t>(top_logprobs_);
  if (constraint_) {
    for (size_t i = 0; i <= draft_.size(); ++i) {
      rows.out.masks.push_back(constraint_->Next(std::span<const int32_t>(draft_).first(i)).words);
    }
  }
  if (!draft_.empty()) {
    rows.out.kind = OutputKind::kVerify;
    rows.out.position = history_.size();
    rows.out.draft = draft_;
    rows.out.draft_q = q_;
  }
  h.seqs.push_back(std::move(rows));
  tokens.push_back(history_.back());
  tokens.insert(tokens.end(), draft_.begin(), draft_.end());
}

std::vector<size_t> SeqDecoder::Restart(std::span<const int32_t> held, int32_t max_rewind) {
  const int32_t n = static_cast<int32_t>(history_.size());
  const size_t stages = held.size();
  // What a stage holds counts up to the history's last token (which is read again in any case,
  // for the next token), and only what was sent of it: a stage may also hold drafts that were
  // not accepted, or rows of a forward whose result never came back.
  const int32_t valid = prompt_done() ? n - 1 : std::min<int32_t>(n - 1, static_cast<int32_t>(prefilled_));
  kept_.resize(stages);
  for (size_t i = 0; i < stages; ++i) kept_[i] = std::clamp(held[i], 0, valid);
  const int32_t from = stages == 0 ? 0 : *std::min_element(kept_.begin(), kept_.end());
  // Walk the plan the chunks will follow: each position goes through the stages up to the last
  // that lacks it. A stage that holds more than a chunk's start rewinds to it, which a
  // sliding-window layer allows only so far back: past that, everything is read from the start.
  // Counted as read again: the rows sent before the failure (a prompt's rows never sent are a
  // first read).
  const int32_t sent = prompt_done() ? n : static_cast<int32_t>(prefilled_);
  std::vector<size_t> read(stages, 0);
  std::vector<int32_t> length(held.begin(), held.end());
  bool rewinds_ok = true;
  const auto run = [&](size_t last, int32_t p, int32_t end) {
    for (size_t i = 0; i <= last; ++i) {
      if (p > 0 && length[i] - p > max_rewind) rewinds_ok = false;
      read[i] += static_cast<size_t>(std::max(0, std::min(end, sent) - p));
      length[i] = end;
    }
  };
  int32_t p = from;
  for (int32_t last = RefillStage(p); last >= 0; last = RefillStage(p)) {
    const int32_t end = NextRefillBreak(p);
    run(static_cast<size_t>(last), p, end);
    p = end;
  }
  if (stages > 0) run(stages - 1, p, n);  // the rest (at least the last token) through every stage
  if (!rewinds_ok) {
    kept_.assign(stages, 0);
    read.assign(stages, static_cast<size_t>(sent));
  }
  prefill_size_ = history_.size();
  prefilled_ = rewinds_ok ? static_cast<size_t>(from) : 0;
  refill_stage_ = RefillStage(static_cast<int32_t>(prefilled_));
  decode_step_ = false;
  settled_at_.reset();
  draft_.clear();
  q_.clear();
  confidence_.clear();
  return read;
}

int32_t SeqDecoder::RefillStage(int32_t p) const {
  const int32_t n = static_cast<int32_t>(history_.size());
  if (kept_.empty() || p >= n - 1) return -1;
  int32_t last = -1;
  for (size_t i = 0; i < kept_.size(); ++i) {
    if (kept_[i] <= p) last = static_cast<int32_t>(i);
  }
  // Lacking on the last stage too: from here on every stage reads, as for any prompt.
  return last == static_cast<int32_t>(kept_.size()) - 1 ? -1 : last;
}

int32_t SeqDecoder::NextRefillBreak(int32_t p) const {
  int32_t next = static_cast<int32_t>(history_.size()) - 1;
  for (int32_t k : kept_) {
    if (k > p) next = std::min(next, k);
  }
  return next;
}

Result<std::vector<pipeline::RowOutput>> SeqDecoder::Settle(const pipeline::ResultMsg& r, int32_t n_vocab,
                                                            double seconds, int forward_rows, Drafter* drafter) {
  const pipeline::SeqResult* out = nullptr;
  for (const pipeline::SeqResult& x : r.seqs) {
    if (x.seq == seq_) out = &x;
  }
  const bool decode_step = decode_step_;
  decode_step_ = false;
  const auto now = std::chrono::steady_clock::now();
  const auto since = settled_at_;
  settled_at_ = now;
  const Status bad = CheckSettled(out, draft_, n_vocab);
  if (!bad.ok()) {
    settled_at_.reset();
    draft_.clear();
    q_.clear();
    confidence_.clear();
    return bad;
  }
  const size_t settled = history_.size();
  const int k = static_cast<int>(draft_.size());
  const int accepted = static_cast<int>(out->rows.size()) - 1;
  // The forward that ends the prompt is no verify: only decode steps teach the controller.
  if (k_ != nullptr && decode_step) {
    k_->Verified(k, accepted, seconds, forward_rows - 1 - k, confidence_);
    // A whole step alone, from the last one's end (the prompt's last chunk included).
    if (since && forward_rows == 1 + k && seconds >= 0) {
      k_->Stepped(k, std::chrono::duration<double>(now - *since).count());
    }
  }
  if (k > 0 && drafter != nullptr) drafter->Settled(seq_, settled + static_cast<size_t>(accepted));
  if (constraint_) {
    for (const pipeline::RowOutput& row : out->rows) {
      if (!constraint_->Accept(row.token)) {
        draft_.clear();
        q_.clear();
        confidence_.clear();
        return Internal("the last stage returned token %d for sequence %d, which its grammar does not allow",
                        row.token, seq_);
      }
    }
  }
  for (const pipeline::RowOutput& row : out->rows) history_.push_back(row.token);
  generated_ += static_cast<int>(out->rows.size());
  draft_.clear();
  q_.clear();
  confidence_.clear();
  return out->rows;
}

DraftReport DraftTogether(std::span<SeqDecoder* const> seqs, int max_rows, Drafter& drafter) {
  DraftReport report;
  // The K of every drafting sequence, chosen together for the batch's rate.
  std::vector<KController*> controllers;
  std::vector<int> caps;
  int plain = 0;
  for (SeqDecoder* s : seqs) {
    s->draft_.clear();
    s->q_.clear();
    s->confidence_.clear();
    if (s->k_ == nullptr) {
      ++plain;
      continue;
    }
    controllers.push_back(s->k_);
    caps.push_back(s->DraftCap());
  }
  const std::vector<int> chosen = KController::ChooseTogether(controllers, caps, plain);
  std::vector<DraftJob> jobs;
  std::vector<SeqDecoder*> whose;
  int rows = 0;  // the forward's decode rows so far, as the sequences will lay them out
  size_t next = 0;
  for (SeqDecoder* s : seqs) {
    const int room = max_rows - rows;
    if (room <= 0) break;
    ++rows;
    if (s->k_ == nullptr) continue;
    const int k = std::min(chosen[next++], room - 1);
    if (k <= 0) continue;
    rows += k;
    DraftJob j;
    j.seq = s->seq_;
    j.history = s->history_;
    j.k = k;
    j.sampling = &s->sampling_;
    // Alone in the forward (the others' rows 0), the draft's confidences may end it early.
    j.more = [c = s->k_, &rows, k](std::span<const float> conf) { return c->MoreDrafts(conf, rows - 1 - k); };
    jobs.push_back(std::move(j));
    whose.push_back(s);
  }
  if (jobs.empty()) return report;
  const auto t0 = std::chrono::steady_clock::now();
  drafter.ProposeAll(jobs);
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  for (size_t i = 0; i < jobs.size(); ++i) {
    SeqDecoder& s = *whose[i];
    DraftJob& j = jobs[i];
    // Each sequence is charged the draft forwards it was in (KController::Others).
    s.k_->Drafted(std::max(static_cast<int>(j.draft.size()), j.rows), j.seconds);
    if (!j.status.ok()) {
      if (report.status.ok()) report.status = j.status.With("drafting for sequence " + std::to_string(s.seq_));
      continue;
    }
    if (j.more && !j.confidence.empty() && static_cast<int>(j.draft.size()) < j.k) ++report.confidence_stops;
    s.draft_ = std::move(j.draft);
    s.q_ = std::move(j.q);
    s.confidence_ = std::move(j.confidence);
  }
  return report;
}

}  // namespace daisy::coord
