#include "runtime/generate.h"

#include <algorithm>
#include <chrono>
#include <cmath>

namespace daisy::runtime {
namespace {
double Since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}
}  // namespace

Result<std::vector<int32_t>> Generate(Stage& stage, int32_t seq, const std::vector<int32_t>& prompt,
                                      const GenerateOptions& options,
                                      const std::function<bool(int32_t)>& on_token,
                                      GenerateStats* stats) {
  if (prompt.empty()) return InvalidArgument("empty prompt: give at least one token");
  const int vocab = stage.config().n_vocab;
  const int chunk = std::max(1, std::min(options.prefill_chunk, stage.options().max_batch_rows));
  std::vector<float> logits(vocab);
  std::vector<BatchRow> rows;
  GenerateStats local;
  GenerateStats& st = stats != nullptr ? *stats : local;
  st = {};
  st.prompt_tokens = static_cast<int>(prompt.size());

  auto start = std::chrono::steady_clock::now();
  for (size_t begin = 0; begin < prompt.size(); begin += chunk) {
    const size_t end = std::min(prompt.size(), begin + chunk);
    rows.clear();
    for (size_t p = begin; p < end; ++p) {
      rows.push_back({seq, static_cast<int32_t>(p), prompt[p], p + 1 == prompt.size()});
    }
    const bool last = end == prompt.size();
    DAISY_RETURN_IF_ERROR(stage.Forward(rows, {}, std::span<float>(logits.data(), last ? vocab : 0)));
  }
  st.prompt_seconds = Since(start);

  Sampler sampler(options.sampling);
  std::vector<int32_t> history = prompt;
  std::vector<int32_t> generated;
  start = std::chrono::steady_clock::now();
  for (int i = 0; i < options.max_tokens; ++i) {
    const int32_t token = sampler.Sample(logits, history);
    generated.push_back(token);
    history.push_back(token);
    const bool keep_going = on_token ? on_token(token) : true;
    if (!keep_going || (options.is_eog && options.is_eog(token)) || i + 1 == options.max_tokens) {
      break;
    }
    const BatchRow row{seq, static_cast<int32_t>(history.size() - 1), token, true};
    DAISY_RETURN_IF_ERROR(stage.Forward({&row, 1}, {}, logits));
  }
  st.generated = static_cast<int>(generated.size());
  st.decode_seconds = Since(start);
  return generated;
}

Result<std::vector<PositionScore>> Score(Stage& stage, int32_t seq,
                                         const std::vector<int32_t>& tokens, int top_k,
                                         int chunk) {
  if (tokens.empty()) return InvalidArgument("nothing to score");
  const int vocab = stage.config().n_vocab;
  chunk = std::max(1, std::min(chunk, stage.options().max_batch_rows));
  std::vector<PositionScore> scores;
  std::vector<float> logits;
  std::vector<BatchRow> rows;
  std::vector<int32_t> order(vocab);
  for (size_t begin = 0; begin < tokens.size(); begin += chunk) {
    const size_t end = std::min(tokens.size(), begin + chunk);
    rows.clear();
    for (size_t p = begin; p < end; ++p) rows.push_back({seq, static_cast<int32_t>(p), tokens[p], true});
    logits.resize(rows.size() * vocab);
    DAISY_RETURN_IF_ERROR(stage.Forward(rows, {}, logits));
    for (size_t r = 0; r < rows.size(); ++r) {
      const float* l = &logits[r * vocab];
      const double max = *std::max_element(l, l + vocab);
      double sum = 0;
      for (int i = 0; i < vocab; ++i) sum += std::exp(l[i] - max);
      const double log_z = max + std::log(sum);
      PositionScore s;
      const size_t p = begin + r;
      if (p + 1 < tokens.size()) {
        s.next = tokens[p + 1];
        s.next_logprob = l[s.next] - log_z;
      }
      for (int i = 0; i < vocab; ++i) order[i] = i;
      const int k = std::min(top_k, vocab);
      std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int32_t a, int32_t b) {
        return l[a] > l[b] || (l[a] == l[b] && a < b);
      });
      for (int i = 0; i < k; ++i) s.top.push_back({order[i], l[order[i]] - log_z});
      scores.push_back(std::move(s));
    }
  }
  return scores;
}

}  // namespace daisy::runtime
