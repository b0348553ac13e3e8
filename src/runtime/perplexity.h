// Perplexity over a text, as llama-perplexity computes it, and how far a model's next-token
// distributions are from a base model's on the same tokens (how llama.cpp users judge a quant:
// mean KL divergence and how often the most likely token is the same).
//
// The tokens are cut into chunks of n_ctx; each chunk is evaluated from an empty cache with its
// first token replaced by BOS (when the model has one), and only the second half of the chunk is
// scored (every token there has at least n_ctx / 2 tokens of context): the log-probability of
// token j + 1 after tokens 0..j, for j in [n_ctx / 2, n_ctx - 1).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "base/status.h"
#include "runtime/stage.h"

namespace daisy::runtime {

struct PerplexityOptions {
  int n_ctx = 512;
  int batch = 512;      // rows per forward
  int max_chunks = -1;  // -1: every whole chunk of the text
  int32_t bos = -1;     // put at each chunk's start (-1: the chunk's own first token)
};

struct PerplexityReport {
  int chunks = 0;
  int64_t scored = 0;      // tokens scored
  double nll = 0;          // mean negative log-likelihood (nats)
  double nll_stderr = 0;   // its standard error over the scored tokens
  double ppl = 0;          // exp(nll)
  std::vector<double> running_ppl;  // after each chunk
  // With a base model:
  bool has_base = false;
  double base_nll = 0, base_ppl = 0;
  double kl_mean = 0, kl_stderr = 0, kl_median = 0, kl_p99 = 0, kl_max = 0;  // KL(base || model), nats
  double same_top = 0;  // fraction of scored positions whose most likely token is the base's
};

// `model` and `base` (nullable) are whole-model stages with room for one sequence of n_ctx
// and batches of `batch` rows; both see exactly the same tokens. Errors: too short a text
// (fewer than 2 * n_ctx tokens, as llama-perplexity requires), bad options, forward errors.
// `progress` is called after each chunk with the report so far.
Result<PerplexityReport> Perplexity(Stage& model, Stage* base, const std::vector<int32_t>& tokens,
                                    const PerplexityOptions& options,
                                    const std::function<void(const PerplexityReport&)>& progress = nullptr);

}  // namespace daisy::runtime
