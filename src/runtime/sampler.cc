#include "runtime/sampler.h"

#include <algorithm>
#include <cmath>
#include <unordered_set>

namespace daisy::runtime {

int32_t Sampler::Argmax(std::span<const float> logits) {
  // The first index holding the largest logit, NaNs never winning (a NaN first entry stays the
  // answer): what one compare per entry against the best so far gives, in two passes that
  // vectorise (a vocabulary of 128k-256k entries per decoded token). First the largest value,
  // as per-lane maxima (x > m ? x : m is a SIMD max), then the first index equal to it.
  const size_t n = logits.size();
  if (n == 0) return 0;
  constexpr size_t kLanes = 16;
  float lane[kLanes];
  std::fill(std::begin(lane), std::end(lane), logits[0]);
  size_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (size_t j = 0; j < kLanes; ++j) lane[j] = logits[i + j] > lane[j] ? logits[i + j] : lane[j];
  }
  for (; i < n; ++i) lane[0] = logits[i] > lane[0] ? logits[i] : lane[0];
  float best = lane[0];
  for (size_t j = 1; j < kLanes; ++j) best = lane[j] > best ? lane[j] : best;
  for (size_t k = 0; k < n; ++k) {
    if (logits[k] == best) return static_cast<int32_t>(k);
  }
  return 0;  // logits[0] is NaN
}

void TopK(std::span<const float> logits, int k, std::vector<int32_t>& ids) {
  ids.resize(logits.size());
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>(i);
  k = std::clamp(k, 0, static_cast<int>(ids.size()));
  std::partial_sort(ids.begin(), ids.begin() + k, ids.end(), [&](int32_t a, int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  });
  ids.resize(k);
}

int32_t Sampler::Sample(std::span<const float> logits, std::span<const int32_t> history) {
  return Sample(logits, history, history.size());
}

uint64_t Sampler::DrawSeed(uint64_t seed, uint64_t position) {
  // SplitMix64 of (seed, position): independent draws per position, no carried state.
  uint64_t z = seed + 0x9e3779b97f4a7c15ull * (position + 1);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

void Sampler::Penalize(std::span<const float> logits, std::span<const int32_t> history) {
  candidates_.resize(logits.size());
  for (size_t i = 0; i < logits.size(); ++i) candidates_[i] = {static_cast<int32_t>(i), logits[i]};
  // Repetition penalty (CTRL-style, as llama.cpp): divide positive logits, multiply negative.
  if (params_.repeat_penalty != 1.0f && params_.repeat_last_n != 0) {
    const size_t n = params_.repeat_last_n < 0 ? history.size()
                                                : std::min<size_t>(history.size(), params_.repeat_last_n);
    std::unordered_set<int32_t> seen(history.end() - n, history.end());
    for (int32_t id : seen) {
      if (id < 0 || static_cast<size_t>(id) >= candidates_.size()) continue;
      float& l = candidates_[id].logit;
      l = l > 0 ? l / params_.repeat_penalty : l * params_.repeat_penalty;
    }
  }
}

int32_t Sampler::Sample(std::span<const float> logits, std::span<const int32_t> history,
                        uint64_t position) {
  if (params_.temperature <= 0.0f && (params_.repeat_penalty == 1.0f || params_.repeat_last_n == 0)) {
    return Argmax(logits);  // plain greedy: no copy of the vocabulary
  }
  if (params_.temperature <= 0.0f) {
    Penalize(logits, history);
    int32_t best = 0;
    for (size_t i = 1; i < candidates_.size(); ++i) {
      if (candidates_[i].logit > candidates_[best].logit) best = static_cast<int32_t>(i);
    }
    return best;
  }
  std::vector<Weighted> dist;
  const double total = Distribution(logits, history, dist);
  std::uniform_real_distribution<double> uniform(0.0, total);
  std::mt19937_64 rng(DrawSeed(params_.seed, position));
  double u = uniform(rng);
  for (const Weighted& c : dist) {
    u -= c.weight;
    if (u < 0) return c.id;
  }
  return dist.back().id;
}

double Sampler::Uniform(uint64_t seed, uint64_t position, uint64_t stream) {
  std::mt19937_64 rng(DrawSeed(seed ^ (0xd1b54a32d192ed03ull * (stream + 1)), position));
  return std::uniform_real_distribution<double>(0.0, 1.0)(rng);
}

double Sampler::Distribution(std::span<const float> logits, std::span<const int32_t> history,
                             std::vector<Weighted>& out) {
  Penalize(logits, history);
  // Highest logits first; ties by id for determinism.
  const auto order = [](const Candidate& a, const Candidate& b) {
    return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
  };
  size_t keep = candidates_.size();
  if (params_.top_k > 0 && static_cast<size_t>(params_.top_k) < keep) {
    keep = params_.top_k;
    std::partial_sort(candidates_.begin(), candidates_.begin() + keep, candidates_.end(), order);
  } else {
    std::sort(candidates_.begin(), candidates_.end(), order);
  }
  candidates_.resize(keep);
  // Probabilities at temperature 1 for the top-p and min-p cuts (llama.cpp applies them
  // before the temperature in its default chain).
  std::vector<double> p(keep);
  const float max = candidates_[0].logit;
  double sum = 0;
  for (size_t i = 0; i < keep; ++i) sum += p[i] = std::exp(static_cast<double>(candidates_[i].logit - max));
  if (params_.top_p < 1.0f) {
    double cum = 0;
    size_t cut = keep;
    for (size_t i = 0; i < keep; ++i) {
      cum += p[i] / sum;
      if (cum >= params_.top_p) {
        cut = i + 1;
        break;
      }
    }
    keep = cut;
  }
  if (params_.min_p > 0.0f) {
    size_t cut = 1;
    while (cut < keep && p[cut] >= params_.min_p * p[0]) ++cut;
    keep = cut;
  }
  // Temperature.
  out.resize(keep);
  double total = 0;
  for (size_t i = 0; i < keep; ++i) {
    out[i] = {candidates_[i].id, std::exp(static_cast<double>(candidates_[i].logit - max) / params_.temperature)};
    total += out[i].weight;
  }
  return total;
}

}  // namespace daisy::runtime
