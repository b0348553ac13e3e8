// The sampler against a reference distribution written here from the rules (llama.cpp's default
// order: repetition penalty, top-k, top-p, min-p, temperature): draws at many positions must be
// distributed as the reference says (chi-square), and tokens the filters remove never drawn.
#include "runtime/sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <set>
#include <string>
#include <vector>

namespace daisy::runtime {
namespace {

TEST(Sampler, GreedyIsArgmaxAndSeedsRepeat) {
  std::vector<float> logits = {0.1f, 2.0f, 2.0f, -1.0f, 1.5f};
  Sampler greedy({});
  EXPECT_EQ(greedy.Sample(logits, {}), 1);  // ties go to the lowest id
  SamplingParams p;
  p.temperature = 1.0f;
  p.top_k = 0;
  p.top_p = 1.0f;
  p.min_p = 0.0f;
  p.seed = 7;
  Sampler a(p), b(p);
  std::vector<int32_t> ta, tb;
  for (int i = 0; i < 50; ++i) {
    ta.push_back(a.Sample(logits, ta));
    tb.push_back(b.Sample(logits, tb));
  }
  EXPECT_EQ(ta, tb);
  std::map<int32_t, int> counts;
  for (int32_t t : ta) counts[t]++;
  EXPECT_GT(counts.size(), 2u);  // actually samples
  // top_k = 1 is greedy whatever the temperature; the penalty can change the winner.
  p.top_k = 1;
  Sampler k1(p);
  EXPECT_EQ(k1.Sample(logits, {}), 1);
  p.repeat_penalty = 2.0f;
  Sampler pen(p);
  const int32_t history[] = {1, 2};
  EXPECT_EQ(pen.Sample(logits, history), 4);
}

// The distribution the rules give, over every id (0 for the removed ones).
std::vector<double> Reference(const std::vector<float>& logits, const SamplingParams& p,
                              const std::vector<int32_t>& history) {
  const size_t n = logits.size();
  std::vector<double> l(logits.begin(), logits.end());
  if (p.repeat_penalty != 1.0f) {
    const size_t recent = p.repeat_last_n < 0 ? history.size() : std::min<size_t>(history.size(), p.repeat_last_n);
    std::set<int32_t> seen(history.end() - static_cast<std::ptrdiff_t>(recent), history.end());
    for (int32_t id : seen) l[id] = l[id] > 0 ? l[id] / p.repeat_penalty : l[id] * p.repeat_penalty;
  }
  std::vector<int32_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return l[a] > l[b]; });
  size_t keep = p.top_k > 0 ? std::min<size_t>(n, p.top_k) : n;
  std::vector<double> q(keep);
  double z = 0;
  for (size_t i = 0; i < keep; ++i) z += q[i] = std::exp(l[order[i]] - l[order[0]]);
  if (p.top_p < 1.0f) {
    double cum = 0;
    for (size_t i = 0; i < keep; ++i) {
      cum += q[i] / z;
      if (cum >= p.top_p) {
        keep = i + 1;
        break;
      }
    }
  }
  if (p.min_p > 0.0f) {
    size_t cut = 1;
    while (cut < keep && q[cut] >= p.min_p * q[0]) ++cut;
    keep = cut;
  }
  std::vector<double> dist(n, 0.0);
  double total = 0;
  for (size_t i = 0; i < keep; ++i) total += dist[order[i]] = std::exp((l[order[i]] - l[order[0]]) / p.temperature);
  for (double& d : dist) d /= total;
  return dist;
}

// Draws `draws` tokens (one per position, the same seed) and checks them against the reference:
// no removed token ever, and a chi-square below `limit` (cells of expected count >= 5; the
// limits are beyond the 99.99th percentile for their degrees of freedom).
void ExpectDistributedAsTheReference(const SamplingParams& p, const std::vector<int32_t>& history,
                                     const std::string& what) {
  const std::vector<float> logits = {2.0f, 1.7f, 1.5f, 1.2f, 0.9f, 0.5f, 0.1f, -0.3f, -0.8f, -1.5f, 3.1f, -2.0f};
  const std::vector<double> want = Reference(logits, p, history);
  constexpr int kDraws = 20000;
  std::vector<int> counts(logits.size(), 0);
  Sampler s(p);
  for (int i = 0; i < kDraws; ++i) {
    std::vector<int32_t> h = history;
    counts[s.Sample(logits, h, 1000 + i)]++;
  }
  double chi = 0;
  int cells = 0;
  for (size_t t = 0; t < logits.size(); ++t) {
    if (want[t] == 0) {
      EXPECT_EQ(counts[t], 0) << what << ": token " << t << " is filtered out but was drawn";
      continue;
    }
    const double e = want[t] * kDraws;
    if (e < 5) continue;
    chi += (counts[t] - e) * (counts[t] - e) / e;
    ++cells;
  }
  ASSERT_GT(cells, 1) << what;
  // df = cells - 1 <= 11: the 99.99th percentile is at most 37.7.
  EXPECT_LT(chi, 38.0) << what << " (" << cells << " cells)";
}

// The rule Argmax keeps: the first index of the largest entry, one compare per entry.
int32_t FirstLargest(const std::vector<float>& v) {
  int32_t best = 0;
  for (size_t i = 1; i < v.size(); ++i) {
    if (v[i] > v[best]) best = static_cast<int32_t>(i);
  }
  return best;
}

TEST(Sampler, ArgmaxIsTheFirstLargestWithTiesNansAndSignedZeros) {
  const float nan = std::nanf(""), inf = INFINITY;
  std::vector<std::vector<float>> cases = {
      {1.0f},
      {nan, 3.0f, 5.0f},              // a NaN first entry stays the answer
      {1.0f, nan, 3.0f, nan, 3.0f},   // NaNs never win; ties go to the first
      {-inf, -inf, -inf},
      {-0.0f, 0.0f, -1.0f},
      {-1.0f, 0.0f, -0.0f, 0.0f},
  };
  // Vocabulary-sized rows: the largest in every lane position and in the tail, repeated.
  for (size_t n : {15u, 16u, 17u, 33u, 1000u, 128256u}) {
    for (size_t at : {size_t{0}, n / 3, n - 1}) {
      std::vector<float> v(n);
      for (size_t i = 0; i < n; ++i) v[i] = std::sin(static_cast<float>(i) * 0.37f);
      v[at] = 7.0f;
      if (at + 16 < n) v[at + 16] = 7.0f;  // the same value again, in the same lane
      if (at > 0) v[at - 1] = nan;
      cases.push_back(v);
    }
  }
  for (const auto& v : cases) EXPECT_EQ(Sampler::Argmax(v), FirstLargest(v)) << "size " << v.size();
  EXPECT_EQ(Sampler::Argmax(cases[1]), 0);
  EXPECT_EQ(Sampler::Argmax(cases[2]), 2);
  EXPECT_EQ(Sampler::Argmax(cases[4]), 0);
  EXPECT_EQ(Sampler::Argmax(cases[5]), 1);
}

TEST(Sampler, EachFilterDrawsFromTheReferenceDistribution) {
  SamplingParams base;
  base.temperature = 1.0f;
  base.top_k = 0;
  base.top_p = 1.0f;
  base.min_p = 0.0f;
  base.seed = 42;
  ExpectDistributedAsTheReference(base, {}, "temperature 1");
  SamplingParams p = base;
  p.temperature = 0.6f;
  ExpectDistributedAsTheReference(p, {}, "temperature 0.6");
  p = base;
  p.top_k = 3;
  ExpectDistributedAsTheReference(p, {}, "top-k 3");
  p = base;
  p.top_p = 0.7f;
  ExpectDistributedAsTheReference(p, {}, "top-p 0.7");
  p = base;
  p.min_p = 0.2f;
  ExpectDistributedAsTheReference(p, {}, "min-p 0.2");
  p = base;
  p.temperature = 1.5f, p.top_k = 6, p.top_p = 0.9f, p.min_p = 0.05f;
  ExpectDistributedAsTheReference(p, {}, "all filters at temperature 1.5");
  p = base;
  p.repeat_penalty = 1.8f;
  p.repeat_last_n = 3;
  // Ids 10 (the top logit, divided) and 9 (negative, multiplied) are recent; 0 is too old.
  ExpectDistributedAsTheReference(p, {0, 5, 10, 9}, "repetition penalty");
}

TEST(Sampler, TheFiltersRemoveWhatTheySay) {
  const std::vector<float> logits = {2.0f, 1.7f, 1.5f, 1.2f, 0.9f, 0.5f, 0.1f, -0.3f, -0.8f, -1.5f, 3.1f, -2.0f};
  SamplingParams p;
  p.temperature = 1.0f;
  p.top_k = 3;
  p.top_p = 1.0f;
  p.min_p = 0.0f;
  Sampler s(p);
  std::vector<Sampler::Weighted> dist;
  s.Distribution(logits, {}, dist);
  std::vector<int32_t> ids;
  for (const auto& c : dist) ids.push_back(c.id);
  EXPECT_EQ(ids, (std::vector<int32_t>{10, 0, 1}));  // best first
  p.top_k = 0;
  p.min_p = 0.5f;  // keeps the logits within log(2) of the best: only 10
  Sampler m(p);
  m.Distribution(logits, {}, dist);
  EXPECT_EQ(dist.size(), 1u);
}

}  // namespace
}  // namespace daisy::runtime
