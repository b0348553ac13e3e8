#include "runtime/generate.h"

#include <algorithm>
#include <cmath>

#include "runtime/sampler.h"

namespace daisy::runtime {

Result<std::vector<PositionScore>> Score(Stage& stage, int32_t seq,
                                         const std::vector<int32_t>& tokens, int top_k,
                                         int chunk) {
  if (tokens.empty()) return InvalidArgument("nothing to score");
  const int vocab = stage.config().n_vocab;
  chunk = std::max(1, std::min(chunk, stage.options().max_batch_rows));
  std::vector<PositionScore> scores;
  std::vector<float> logits;
  std::vector<BatchRow> rows;
  std::vector<int32_t> order;
  for (size_t begin = 0; begin < tokens.size(); begin += chunk) {
    const size_t end = std::min(tokens.size(), begin + chunk);
    rows.clear();
    for (size_t p = begin; p < end; ++p) rows.push_back({seq, static_cast<int32_t>(p), tokens[p], true});
    logits.resize(rows.size() * vocab);
    DAISY_RETURN_IF_ERROR(stage.Forward(rows, {}, logits));
    for (size_t r = 0; r < rows.size(); ++r) {
      const std::span<const float> l(&logits[r * vocab], vocab);
      const double log_z = stage.kernels().ops.log_sum_exp(l.data(), static_cast<int64_t>(l.size()));
      PositionScore s;
      const size_t p = begin + r;
      if (p + 1 < tokens.size()) {
        s.next = tokens[p + 1];
        s.next_logprob = l[s.next] - log_z;
      }
      TopK(l, top_k, order);
      for (int32_t id : order) s.top.push_back({id, l[id] - log_z});
      scores.push_back(std::move(s));
    }
  }
  return scores;
}

}  // namespace daisy::runtime
