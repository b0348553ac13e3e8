#include "runtime/perplexity.h"

#include <algorithm>
#include <cmath>

namespace daisy::runtime {
namespace {

// Log-probabilities of one row of logits, in double.
void LogSoftmax(const float* logits, int n, std::vector<double>& out) {
  out.resize(n);
  double max = -INFINITY;
  for (int i = 0; i < n; ++i) max = std::max(max, static_cast<double>(logits[i]));
  double sum = 0;
  for (int i = 0; i < n; ++i) sum += std::exp(static_cast<double>(logits[i]) - max);
  const double log_z = max + std::log(sum);
  for (int i = 0; i < n; ++i) out[i] = static_cast<double>(logits[i]) - log_z;
}

int ArgMax(const std::vector<double>& v) {
  return static_cast<int>(std::max_element(v.begin(), v.end()) - v.begin());
}

// Logits of rows [first, last) of one chunk (positions 0..n_ctx-1 of a fresh sequence).
Status ChunkLogits(Stage& stage, const std::vector<int32_t>& chunk, int first, int last, int batch,
                   std::vector<float>& logits) {
  const int vocab = stage.config().n_vocab;
  stage.Release(0);
  logits.assign(static_cast<size_t>(last - first) * vocab, 0.f);
  std::vector<BatchRow> rows;
  std::vector<float> out;
  const int n = static_cast<int>(chunk.size());
  for (int b = 0; b < n; b += batch) {
    const int e = std::min(n, b + batch);
    rows.clear();
    int wanted = 0;
    for (int p = b; p < e; ++p) {
      const bool want = p >= first && p < last;
      rows.push_back({0, p, chunk[p], want});
      wanted += want;
    }
    out.resize(static_cast<size_t>(wanted) * vocab);
    DAISY_RETURN_IF_ERROR(stage.Forward(rows, {}, out));
    int k = 0;
    for (int p = b; p < e; ++p) {
      if (p < first || p >= last) continue;
      std::copy(out.begin() + static_cast<size_t>(k) * vocab, out.begin() + static_cast<size_t>(k + 1) * vocab,
                logits.begin() + static_cast<size_t>(p - first) * vocab);
      ++k;
    }
  }
  stage.Release(0);
  return Status::Ok();
}

double Quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  const size_t i = std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size() - 1) + 0.5));
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(i), v.end());
  return v[i];
}

}  // namespace

Result<PerplexityReport> Perplexity(Stage& model, Stage* base, const std::vector<int32_t>& tokens,
                                    const PerplexityOptions& o,
                                    const std::function<void(const PerplexityReport&)>& progress) {
  if (o.n_ctx < 4) return InvalidArgument("the context (%d) must be at least 4 tokens", o.n_ctx);
  if (o.batch < 1) return InvalidArgument("the batch (%d) must be at least 1 row", o.batch);
  if (model.options().seq_capacity < o.n_ctx || model.options().max_batch_rows < std::min(o.batch, o.n_ctx)) {
    return InvalidArgument("the model's stage holds %d positions and %d rows; the run needs %d and %d",
                           model.options().seq_capacity, model.options().max_batch_rows, o.n_ctx,
                           std::min(o.batch, o.n_ctx));
  }
  if (static_cast<int64_t>(tokens.size()) < 2 * static_cast<int64_t>(o.n_ctx)) {
    return InvalidArgument("the text has %zu tokens; perplexity with a context of %d needs at least %d (2 x the "
                           "context): give a longer text or a smaller --ctx", tokens.size(), o.n_ctx, 2 * o.n_ctx);
  }
  const int vocab = model.config().n_vocab;
  if (base != nullptr && base->config().n_vocab != vocab) {
    return InvalidArgument("the base model has %d tokens in its vocabulary, the model %d: they cannot be compared",
                           base->config().n_vocab, vocab);
  }
  int chunks = static_cast<int>(tokens.size() / o.n_ctx);
  if (o.max_chunks > 0) chunks = std::min(chunks, o.max_chunks);
  const int first = o.n_ctx / 2, last = o.n_ctx - 1;  // rows whose next token is scored
  const int batch = std::min(o.batch, o.n_ctx);
  PerplexityReport report;
  report.has_base = base != nullptr;
  std::vector<float> logits, base_logits;
  std::vector<double> lp, base_lp, nlls, kls;
  double nll_sum = 0, nll_sq = 0, base_nll_sum = 0;
  int64_t same = 0;
  for (int c = 0; c < chunks; ++c) {
    std::vector<int32_t> chunk(tokens.begin() + static_cast<std::ptrdiff_t>(c) * o.n_ctx,
                               tokens.begin() + static_cast<std::ptrdiff_t>(c + 1) * o.n_ctx);
    if (o.bos >= 0) chunk[0] = o.bos;
    DAISY_RETURN_IF_ERROR(ChunkLogits(model, chunk, first, last, batch, logits));
    if (base != nullptr) DAISY_RETURN_IF_ERROR(ChunkLogits(*base, chunk, first, last, batch, base_logits));
    for (int j = first; j < last; ++j) {
      const int32_t next = chunk[j + 1];
      LogSoftmax(&logits[static_cast<size_t>(j - first) * vocab], vocab, lp);
      const double nll = -lp[next];
      nll_sum += nll;
      nll_sq += nll * nll;
      nlls.push_back(nll);
      if (base != nullptr) {
        LogSoftmax(&base_logits[static_cast<size_t>(j - first) * vocab], vocab, base_lp);
        base_nll_sum += -base_lp[next];
        double kl = 0;
        for (int v = 0; v < vocab; ++v) kl += std::exp(base_lp[v]) * (base_lp[v] - lp[v]);
        kls.push_back(std::max(0.0, kl));
        same += ArgMax(lp) == ArgMax(base_lp);
      }
    }
    report.chunks = c + 1;
    report.scored = static_cast<int64_t>(nlls.size());
    const double n = static_cast<double>(report.scored);
    report.nll = nll_sum / n;
    report.nll_stderr = n > 1 ? std::sqrt(std::max(0.0, nll_sq / n - report.nll * report.nll) / (n - 1)) : 0;
    report.ppl = std::exp(report.nll);
    report.running_ppl.push_back(report.ppl);
    if (base != nullptr) {
      report.base_nll = base_nll_sum / n;
      report.base_ppl = std::exp(report.base_nll);
      double sum = 0, sq = 0;
      for (double k : kls) {
        sum += k;
        sq += k * k;
      }
      report.kl_mean = sum / n;
      report.kl_stderr = n > 1 ? std::sqrt(std::max(0.0, sq / n - report.kl_mean * report.kl_mean) / (n - 1)) : 0;
      report.kl_median = Quantile(kls, 0.5);
      report.kl_p99 = Quantile(kls, 0.99);
      report.kl_max = *std::max_element(kls.begin(), kls.end());
      report.same_top = static_cast<double>(same) / n;
    }
    if (progress) progress(report);
  }
  return report;
}

}  // namespace daisy::runtime
