#include "pipeline/outputs.h"

#include <algorithm>
#include <cmath>

#include "runtime/sampler.h"

namespace daisy::pipeline {

int LogitRows(const SeqRows& s) {
  if (s.out.kind == OutputKind::kNone) return 0;
  return s.out.all_rows || s.out.kind == OutputKind::kVerify ? s.n_rows : 1;
}

ResultMsg ComputeOutputs(uint64_t id, std::span<const SeqRows> seqs, std::span<const float> logits,
                         int n_vocab, const kernels::OpKernels& ops) {
  ResultMsg r;
  r.id = id;
  size_t at = 0;
  std::vector<int32_t> order;
  std::vector<float> masked;
  for (const SeqRows& s : seqs) {
    SeqResult sr;
    sr.seq = s.seq;
    const int n = LogitRows(s);
    std::span<const float> seq_logits = logits.subspan(at * n_vocab, static_cast<size_t>(n) * n_vocab);
    if (!s.out.masks.empty() && n > 0) {
      // Constrained: disallowed tokens get no probability (a mask allowing nothing is ignored).
      masked.assign(seq_logits.begin(), seq_logits.end());
      for (int i = 0; i < n; ++i) {
        const std::vector<uint32_t>& m = s.out.masks[std::min<size_t>(i, s.out.masks.size() - 1)];
        bool any = false;
        for (uint32_t w : m) any = any || w != 0;
        if (!any) continue;
        float* row = &masked[static_cast<size_t>(i) * n_vocab];
        for (int t = 0; t < n_vocab; ++t) {
          const size_t w = static_cast<size_t>(t) >> 5;
          if (w >= m.size() || !((m[w] >> (t & 31)) & 1)) row[t] = -INFINITY;
        }
      }
      seq_logits = masked;
    }
    if (s.out.kind == OutputKind::kVerify) {
      Verify(s.out, seq_logits, n_vocab, ops, sr.rows);
      at += n;
      r.seqs.push_back(std::move(sr));
      continue;
    }
    for (int i = 0; i < n; ++i, ++at) {
      const std::span<const float> l = seq_logits.subspan(static_cast<size_t>(i) * n_vocab, n_vocab);
      RowOutput row;
      const double log_z = ops.log_sum_exp(l.data(), static_cast<int64_t>(l.size()));
      switch (s.out.kind) {
        case OutputKind::kNone: break;
        case OutputKind::kArgmax:
        case OutputKind::kLogits:
          row.token = runtime::Sampler::Argmax(l);
          if (s.out.kind == OutputKind::kLogits) row.logits.assign(l.begin(), l.end());
          break;
        case OutputKind::kTopK:
          runtime::TopK(l, s.out.top_k, order);
          for (int32_t t : order) row.top.push_back({t, static_cast<float>(l[t] - log_z)});
          row.token = order[0];
          break;
        case OutputKind::kVerify: break;  // handled above
        case OutputKind::kSample: {
          runtime::Sampler sampler(s.out.sampling);
          // With all_rows, row i's token sits at position - (n - 1) + i.
          const uint64_t pos = s.out.position + i - (n - 1);
          row.token = sampler.Sample(l, s.out.history, pos);
          break;
        }
      }
      row.logprob = row.token >= 0 ? static_cast<float>(l[row.token] - log_z) : 0.0f;
      if (s.out.top_k > 0 && s.out.kind != OutputKind::kTopK && s.out.kind != OutputKind::kNone) {
        runtime::TopK(l, s.out.top_k, order);  // the alternatives, with the token's own log-probability
        for (int32_t t : order) row.top.push_back({t, static_cast<float>(l[t] - log_z)});
      }
      sr.rows.push_back(std::move(row));
    }
    r.seqs.push_back(std::move(sr));
  }
  return r;
}

void Verify(const OutputSpec& out, std::span<const float> logits, int n_vocab, const kernels::OpKernels& ops,
            std::vector<RowOutput>& rows) {
  const runtime::SamplingParams& sp = out.sampling;
  const bool penalty = sp.repeat_penalty != 1.0f && sp.repeat_last_n != 0;
  const bool greedy = sp.temperature <= 0;
  runtime::Sampler sampler(sp);
  std::vector<int32_t> history = out.history;  // grows with the accepted drafts (penalty)
  std::vector<runtime::Sampler::Weighted> p;
  const int k = static_cast<int>(out.draft.size());
  std::vector<int32_t> order;
  auto emit = [&](std::span<const float> l, int32_t token) {
    const double log_z = ops.log_sum_exp(l.data(), static_cast<int64_t>(l.size()));
    RowOutput row{token, static_cast<float>(l[token] - log_z), {}, {}};
    if (out.top_k > 0) {
      runtime::TopK(l, out.top_k, order);
      for (int32_t t : order) row.top.push_back({t, static_cast<float>(l[t] - log_z)});
    }
    rows.push_back(std::move(row));
  };
  for (int i = 0; i <= k; ++i) {
    const std::span<const float> l = logits.subspan(static_cast<size_t>(i) * n_vocab, n_vocab);
    const uint64_t pos = out.position + i;
    if (greedy) {
      // What plain greedy decoding would pick here; a draft survives only if it is that token.
      const int32_t want = penalty ? sampler.Sample(l, history, pos) : runtime::Sampler::Argmax(l);
      if (i < k && out.draft[i] == want) {
        emit(l, want);
        history.push_back(want);
        continue;
      }
      emit(l, want);
      return;
    }
    if (i == k) {  // every draft accepted: the bonus token, drawn as plain sampling would
      emit(l, sampler.Sample(l, history, pos));
      return;
    }
    // Speculative sampling: accept draft d with probability min(1, p(d) / q(d)); on a reject,
    // draw from max(0, p - q) renormalised. The output is distributed as p exactly.
    const double total = sampler.Distribution(l, history, p);
    const int32_t d = out.draft[i];
    auto q_of = [&](int32_t id) -> double {
      if (out.draft_q[i].empty()) return id == d ? 1.0 : 0.0;
      for (auto [qid, prob] : out.draft_q[i]) {
        if (qid == id) return prob;
      }
      return 0.0;
    };
    double p_d = 0;
    for (const auto& c : p) p_d += c.id == d ? c.weight / total : 0.0;
    const double q_d = q_of(d);
    if (q_d > 0 && runtime::Sampler::Uniform(sp.seed, pos, 1) * q_d < p_d) {
      emit(l, d);
      history.push_back(d);
      continue;
    }
    double residual = 0;
    for (auto& c : p) {
      c.weight = std::max(0.0, c.weight / total - q_of(c.id));
      residual += c.weight;
    }
    int32_t pick = p.front().id;  // (only if rounding left no residual mass)
    double u = runtime::Sampler::Uniform(sp.seed, pos, 2) * residual;
    for (const auto& c : p) {
      if (c.weight <= 0) continue;
      pick = c.id;
      u -= c.weight;
      if (u < 0) break;
    }
    emit(l, pick);
    return;
  }
}

}  // namespace daisy::pipeline
