// The adaptive K rule (KController) against simulated pipelines whose costs and acceptance are
// known: it must settle near the best fixed K (its expected throughput within 5% of the best),
// never leap far on one lucky verify, and fall back to plain decoding when drafts are useless.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>

#include "pipeline/speculative.h"

namespace daisy::pipeline {
namespace {

// A simulated pipeline: a verify of K drafts takes t0 + K * t_row (times a noise factor), the
// draft model t_draft per drafted token, and each draft is accepted with probability a.
struct Sim {
  double t0, t_row, t_draft, a, noise = 0.1;
  double Expected(int k) const { return (1 - std::pow(a, k + 1)) / (1 - a); }
  double Cost(int k) const { return t0 + k * (t_row + t_draft); }
  double Rate(int k) const { return Expected(k) / Cost(k); }
  double BestRate(int k_max) const {
    double best = 0;
    for (int k = 0; k <= k_max; ++k) best = std::max(best, Rate(k));
    return best;
  }
};

struct Outcome {
  double rate;  // expected tokens over expected time, over the steps after a warm-up
  std::vector<int> ks;
};

Outcome Simulate(const Sim& sim, int steps, uint32_t seed, int warm_up, int k_max = 12) {
  KController c(0, k_max);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(0, 1);
  double tokens = 0, seconds = 0;
  Outcome o;
  for (int i = 0; i < steps; ++i) {
    const int k = c.Choose();
    o.ks.push_back(k);
    EXPECT_GE(k, 0);
    EXPECT_LE(k, k_max);
    if (k > 0) c.Drafted(k, k * sim.t_draft * (1 + sim.noise * (u(rng) - 0.5)));
    int accepted = 0;
    while (accepted < k && u(rng) < sim.a) ++accepted;
    c.Verified(k, accepted, (sim.t0 + k * sim.t_row) * (1 + sim.noise * (u(rng) - 0.5)));
    if (i >= warm_up) tokens += sim.Expected(k), seconds += sim.Cost(k);
  }
  o.rate = tokens / seconds;
  return o;
}

// Settled (after 40 steps) within 5% of the best fixed K on average over seeds; and from the
// start, over a short generation's 25 verifies, within 10%.
void ExpectNearBest(const Sim& sim) {
  const double best = sim.BestRate(12);
  double settled = 0, early = 0;
  constexpr int kSeeds = 8;
  for (uint32_t seed = 1; seed <= kSeeds; ++seed) {
    const Outcome o = Simulate(sim, 200, seed, 40);
    EXPECT_GT(o.rate, 0.9 * best) << "seed " << seed;
    settled += o.rate;
    early += Simulate(sim, 25, seed, 0).rate;
  }
  EXPECT_GT(settled / kSeeds, 0.95 * best);
  EXPECT_GT(early / kSeeds, 0.9 * best);
  std::printf("best %.5f settled %.3f early %.3f of it\n", best, settled / kSeeds / best, early / kSeeds / best);
}

// Shapes of what the benchmarks measured (docs/benchmarks.md), in milliseconds.
TEST(KController, SettlesNearTheBestFixedKOnOneNodeWithADearDraft) {
  ExpectNearBest({.t0 = 50, .t_row = 15, .t_draft = 12, .a = 0.72});  // best K: 1-2
}

TEST(KController, SettlesNearTheBestFixedKOnOneNodeWithACheapDraft) {
  ExpectNearBest({.t0 = 285, .t_row = 37, .t_draft = 28, .a = 0.78});  // best K: 3
}

TEST(KController, SettlesNearTheBestFixedKBehindSlowLinks) {
  ExpectNearBest({.t0 = 250, .t_row = 15, .t_draft = 12, .a = 0.72});   // 100 ms a hop: K 4-6
  ExpectNearBest({.t0 = 400, .t_row = 10, .t_draft = 5, .a = 0.9});     // high acceptance: K 10+
}

TEST(KController, FallsBackToPlainDecodingWhenDraftsAreUseless) {
  const Sim sim{.t0 = 50, .t_row = 15, .t_draft = 12, .a = 0.05};
  const Outcome o = Simulate(sim, 200, 7, 40);
  EXPECT_GT(o.rate, 0.9 * sim.Rate(0));
  // K = 0 except a 1-token probe every 8 steps.
  int probes = 0;
  for (size_t i = 100; i < o.ks.size(); ++i) {
    EXPECT_LE(o.ks[i], 1);
    probes += o.ks[i];
  }
  EXPECT_GT(probes, 5);
  EXPECT_LT(probes, 20);
}

TEST(KController, ClimbsOneStepAtATime) {
  KController c(0, 12);
  int k = c.Choose();
  EXPECT_EQ(k, KController::kStartK);
  for (int i = 0; i < 20; ++i) {
    c.Drafted(k, 0.001 * k);
    c.Verified(k, k, 0.1 + 0.001 * k);  // every draft accepted, rows nearly free
    const int next = c.Choose();
    EXPECT_LE(next, k + 1) << "step " << i;
    k = next;
  }
  EXPECT_EQ(k, 12);  // and reaches k_max when that pays
}

TEST(KController, AFixedKIsKept) {
  KController c(5, 12);
  for (int i = 0; i < 10; ++i) {
    EXPECT_EQ(c.Choose(), 5);
    c.Verified(5, 0, 1.0);
  }
}

}  // namespace
}  // namespace daisy::pipeline
