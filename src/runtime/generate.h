// One sequence through a whole-model Stage: chunked prefill, then token-by-token decode; and
// teacher-forced scoring (log-probabilities at every position). The multi-user scheduler
// (issue #5) replaces this for serving; `daisy run` and the tests use it directly.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "base/status.h"
#include "runtime/sampler.h"
#include "runtime/stage.h"

namespace daisy::runtime {

struct GenerateOptions {
  int max_tokens = 16;
  int prefill_chunk = 256;  // rows per prefill forward (at most the stage's max_batch_rows)
  SamplingParams sampling;
  std::function<bool(int32_t)> is_eog;  // stop after such a token (null: never stop early)
};

struct GenerateStats {
  int prompt_tokens = 0;
  double prompt_seconds = 0;
  int generated = 0;
  double decode_seconds = 0;  // from the first generated token's forward to the last
};

// Generates up to max_tokens after `prompt` in sequence `seq` (which must be new or released),
// calling on_token(id) for each; on_token returning false stops. Returns the generated ids.
Result<std::vector<int32_t>> Generate(Stage& stage, int32_t seq, const std::vector<int32_t>& prompt,
                                      const GenerateOptions& options,
                                      const std::function<bool(int32_t)>& on_token,
                                      GenerateStats* stats);

struct PositionScore {
  int32_t next = -1;          // the token that follows (-1 at the last position)
  double next_logprob = 0;    // its log-probability
  std::vector<std::pair<int32_t, double>> top;  // the k most likely, best first
};

// Log-probabilities after each prefix of `tokens` (teacher forcing), computed in double from
// the logits.
Result<std::vector<PositionScore>> Score(Stage& stage, int32_t seq,
                                         const std::vector<int32_t>& tokens, int top_k,
                                         int chunk);

}  // namespace daisy::runtime
