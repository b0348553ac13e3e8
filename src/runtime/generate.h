// Teacher-forced scoring through a whole-model Stage: log-probabilities at every position
// (`daisy score`). Generation goes through coord::Generate on every topology.
#pragma once

#include <cstdint>
#include <vector>

#include "base/status.h"
#include "runtime/stage.h"

namespace daisy::runtime {

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
