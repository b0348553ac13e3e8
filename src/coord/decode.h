// One sequence's decoding, written once for both decode loops (Generate for `daisy run`, the
// Scheduler for `daisy serve`): its prompt read in chunks, then per step its rows of a forward —
// the last settled token plus the drafts in flight — and what came back settled: checked, handed
// to its K controller and to the drafter, appended to its history.
//
//   SeqDecoder s(seq, prompt, sampling, k);          // k: its K controller, or null
//   while (!s.prompt_done()) s.AddPromptRows(h, tokens, chunk);   // forwards of prompt chunks
//   DraftTogether(decoders, ...);                     // per step: drafts for the batch's sequences
//   s.AddDecodeRows(h, tokens);                       // its rows in the step's forward
//   auto settled = s.Settle(result, n_vocab, seconds, other_rows, drafter);
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "base/status.h"
#include "coord/drafter.h"
#include "coord/k_controller.h"
#include "grammar/token_mask.h"
#include "pipeline/protocol.h"
#include "runtime/sampler.h"

namespace daisy::coord {

// What the last stage returns for the next token of a sequence whose tokens so far are
// `history`: the argmax when greedy (temperature 0, no repetition penalty), else a token drawn
// there, seeded by (seed, position), with the recent tokens when a penalty is on.
pipeline::OutputSpec NextTokenSpec(const runtime::SamplingParams& sp, std::span<const int32_t> history);

// Checks what one forward returned for a sequence that sent `draft` (empty for a plain decode)
// before any of it is used: 1 to K+1 tokens, each in [0, n_vocab), all but the last equal to
// the drafts (the accepted ones; the last is the correction or the bonus token). `out` may be
// null (the sequence missing from the result).
Status CheckSettled(const pipeline::SeqResult* out, std::span<const int32_t> draft, int32_t n_vocab);

// Thread-compatible: one owner (the thread running the decode loop).
class SeqDecoder {
 public:
  // `k` (may be null: no drafting) must outlive the decoder; `max_tokens` bounds the drafts to
  // what is still wanted.
  SeqDecoder(int32_t seq, std::span<const int32_t> prompt, const runtime::SamplingParams& sampling,
             int max_tokens, KController* k);
  SeqDecoder(const SeqDecoder&) = delete;
  SeqDecoder& operator=(const SeqDecoder&) = delete;

  // Constrained decoding: every token (drafts included) must keep `c`'s grammar alive; each
  // output row carries its mask (pipeline::OutputSpec::masks). Drafts are cut at the first one
  // the grammar refuses. Set before the prompt's last chunk is sent.
  void Constrain(std::unique_ptr<grammar::TokenConstraint> c) { constraint_ = std::move(c); }
  bool constrained() const { return constraint_ != nullptr; }
  // Every output row also returns the `n` most likely tokens' log-probabilities.
  void WantTopLogprobs(int n) { top_logprobs_ = n; }

  int32_t seq() const { return seq_; }
  const std::vector<int32_t>& history() const { return history_; }
  const runtime::SamplingParams& sampling() const { return sampling_; }
  KController* k() const { return k_; }
  int generated() const { return generated_; }
  size_t prompt_size() const { return prompt_size_; }

  // The prompt: its next chunk of at most `max_rows` rows; the last chunk asks for the first
  // token (as `out` when given, else NextTokenSpec), the others for nothing. Returns the rows.
  bool prompt_done() const { return prefilled_ == prefill_size_; }
  // The pipeline went down and lost some of this sequence's KV: `held[i]` positions of it
  // survive on stage i (pipeline::Pipeline::HeldLengths). The history (prompt and settled
  // tokens) is read again as a prompt where it was lost: the rows every stage holds are skipped,
  // rows only some stages lack go in forwards that end at the last stage lacking them
  // (refill_stage()), and the last token goes through every stage, asking for the next token
  // exactly as the interrupted step would (same position, same draw). Drafts in flight are
  // dropped. If a stage would have to rewind more than `max_rewind` positions on the way (a
  // sliding-window layer may not keep them), every stage reads from the start. Returns per stage
  // the tokens it reads again (rows it was sent before: a prompt's rows never sent yet are not
  // counted).
  std::vector<size_t> Restart(std::span<const int32_t> held, int32_t max_rewind);
  // The stage the next prompt chunk ends at: the last that lacks part of the history after a
  // Restart (-1: every stage; that chunk may be batched with anything else).
  int32_t refill_stage() const { return refill_stage_; }
  int AddPromptRows(pipeline::ForwardHeader& h, std::vector<int32_t>& tokens, size_t max_rows);

  // Decoding: the drafts a verify may still carry (the tokens wanted, less the one the verify
  // adds itself), the drafts in flight, and this step's rows: the last settled token, then the
  // drafts, asking for a verify (or the next token when there are none).
  int DraftCap() const { return max_tokens_ - generated_ - 1; }
  const std::vector<int32_t>& draft() const { return draft_; }
  const std::vector<float>& confidence() const { return confidence_; }
  int decode_rows() const { return 1 + static_cast<int>(draft_.size()); }
  void AddDecodeRows(pipeline::ForwardHeader& h, std::vector<int32_t>& tokens);

  // Takes what forward `r` returned for this sequence: checks it (CheckSettled), feeds the K
  // controller a decode step's verify (`seconds` < 0: not a clean measurement, such as a batch
  // that also read prompts; `forward_rows`: all the forward's rows), tells `drafter` (may be null)
  // which tokens are settled, appends the tokens to the history and returns them: the accepted
  // drafts and one more (the first token, after the prompt's last chunk). The caller decides how
  // many it uses (a stop may come first). The drafts are cleared.
  Result<std::vector<pipeline::RowOutput>> Settle(const pipeline::ResultMsg& r, int32_t n_vocab, double seconds,
                                                  int forward_rows, Drafter* drafter);

 private:
  friend struct DraftReport DraftTogether(std::span<SeqDecoder* const> seqs, int max_rows, Drafter& drafter);
  int32_t seq_;
  std::vector<int32_t> history_;  // the prompt, then every settled token
  size_t prompt_size_;
  size_t prefill_size_;           // rows to read as a prompt: the prompt, or after Restart the history
  size_t prefilled_ = 0;          // prompt rows sent
  int32_t refill_stage_ = -1;     // the next prompt chunk ends at this stage (-1: goes through all)
  std::vector<int32_t> kept_;     // after Restart: per stage, the history positions it still holds
  // The last stage lacking position `p` of the history (-1: the last stage lacks it, or p is the
  // history's last position: every stage reads it), and the next position where that changes.
  int32_t RefillStage(int32_t p) const;
  int32_t NextRefillBreak(int32_t p) const;
  runtime::SamplingParams sampling_;
  int max_tokens_;
  KController* k_;
  int generated_ = 0;
  // The drafts in flight (empty: a plain step), their distributions and the draft model's
  // confidence in each.
  std::vector<int32_t> draft_;
  std::vector<DraftDistribution> q_;
  std::vector<float> confidence_;
  bool decode_step_ = false;  // the rows in flight are a decode step's (AddDecodeRows)
  // When the last Settle ended (none after a Restart or an error): whole steps are timed from it.
  std::optional<std::chrono::steady_clock::time_point> settled_at_;
  std::unique_ptr<grammar::TokenConstraint> constraint_;
  int top_logprobs_ = 0;
};

// What DraftTogether did.
struct DraftReport {
  double seconds = 0;        // in the drafter
  int confidence_stops = 0;  // sequences whose drafting the draft's confidence ended below K
  Status status;             // the first drafting error (those sequences decode without drafts)
};

// Drafts for the decoding sequences of one forward, together: their K chosen jointly for the
// batch's tokens per second (KController::ChooseTogether; sequences without a K controller
// decode beside them, one row each), each within its DraftCap, the forward's rows within
// `max_rows` (in the order given), then one Drafter::ProposeAll for all of them. Each drafting
// sequence's controller is charged its share of the draft forwards; a sequence verifying alone
// may have its drafting ended by the draft's confidence (KController::MoreDrafts).
DraftReport DraftTogether(std::span<SeqDecoder* const> seqs, int max_rows, Drafter& drafter);

}  // namespace daisy::coord
