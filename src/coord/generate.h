// One sequence through a Pipeline, for `daisy run` on every topology: the prompt in chunks
// streamed without waiting, then one forward per step (with drafts when speculating), the steps
// written once in SeqDecoder (decode.h) as the scheduler's are.
#pragma once

#include <functional>
#include <vector>

#include "base/status.h"
#include "coord/decode.h"
#include "coord/drafter.h"
#include "coord/k_controller.h"
#include "pipeline/pipeline.h"

namespace daisy::coord {

// Runs `s`'s prompt through `p` in chunks of at most `chunk` rows, every chunk submitted before
// any result is awaited (the ring keeps them in order); the last chunk asks for the first token.
// Returns the last chunk's result.
Result<pipeline::ResultMsg> Prefill(pipeline::Pipeline& p, SeqDecoder& s, size_t chunk);

struct GenerateOptions {
  int max_tokens = 16;
  int prefill_chunk = 256;  // rows per forward (the pipeline's max_batch_rows at most)
  runtime::SamplingParams sampling;
  std::function<bool(int32_t)> is_eog;
  // Speculative decoding (docs/speculative.md): drafts from `drafter` (null: plain decoding),
  // `spec_k` per verify (0: adaptive, up to spec_k_max).
  Drafter* drafter = nullptr;
  int spec_k = 0;
  int spec_k_max = 12;
  // The K controller to use (null: a fresh one for spec_k, spec_k_max); the caller's keeps what
  // it learned (daisy run --spec-profile restores it before and saves it after).
  KController* k_control = nullptr;
  // When the workers' ring goes down (a worker lost, silent or restarted): seconds to wait for
  // it to come back, then read the history again and go on exactly where it was (0: fail at once).
  double resume_wait = 0;
};

struct GenerateStats {
  int prompt_tokens = 0;
  double prompt_seconds = 0;
  int generated = 0;
  double decode_seconds = 0;
  std::vector<float> logprobs;  // of each generated token, as the last stage computed it
  int steps = 0;      // decode forwards
  int verifies = 0;   // of them, those that carried drafts
  int drafted = 0;
  int accepted = 0;
  std::vector<int> k_chosen;             // drafts per verify
  std::vector<int> accepted_per_verify;  // of them, accepted
  std::vector<std::vector<float>> draft_confidence;  // per verify, the draft model's in each draft
  int confidence_stops = 0;  // verifies whose drafting the draft's confidence ended below K
  std::vector<double> verify_seconds;    // each verify's forward
  std::vector<double> forward_seconds;   // each decode forward's (verifies included), in order
  int resumes = 0;             // times the ring came back and the sequence went on
  size_t refilled_tokens = 0;  // tokens sent again to rebuild its KV (what the first stage read again)
  std::vector<size_t> stage_refilled_tokens;  // per stage, the tokens it read again
  double paused_seconds = 0;   // waiting for the ring
};

// One sequence: chunked prefill, then one forward per step. Greedy asks the last stage for the
// argmax; sampling for a token drawn there (the seed and the position travel with the forward,
// plus the recent tokens when a repetition penalty is on). Generation ends at max_tokens, at an
// end-of-generation token (included) or when `on_token` returns false. The sequence is released
// on every stage (and in the drafter) at the end, also on failure. With options.resume_wait, a
// ring that goes down is waited for and the sequence resumes: the same ids as uninterrupted.
Result<std::vector<int32_t>> Generate(pipeline::Pipeline& p, int32_t seq, const std::vector<int32_t>& prompt,
                                      const GenerateOptions& options,
                                      const std::function<bool(int32_t)>& on_token, GenerateStats* stats);

}  // namespace daisy::coord
