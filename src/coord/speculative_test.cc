// Speculative decoding end to end: greedy output token for token identical to plain decoding
// (draft model and prompt lookup, fixed and adaptive K, whole model, in-process split and a
// worker over loopback), the drafters, and sampling reproducible for a seed. The accept/reject
// rule itself is tested in pipeline/outputs_test.cc.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <random>

#include "model/generator.h"
#include "coord/drafter.h"
#include "coord/generate.h"
#include "pipeline/pipeline.h"
#include "testing/topology.h"
#include "pipeline/worker.h"
#include "shard/load.h"
#include "tokenizer/hf_import.h"

namespace daisy::coord {
namespace {

using pipeline::Pipeline;

namespace fs = std::filesystem;
constexpr int kCapacity = 256;

struct Env {
  daisy::testing::TempDir tmp{"speculative-test"};
  fs::path dir = tmp.path;
  Env() {
    // A 6-layer target whose first 2 layers, embeddings and head are the draft's.
    daisy::testing::MakeTargetAndDraft(dir, 6, 2, 11, 0.15f);
    daisy::testing::CompileShards(dir / "target.gguf", dir / "2", 2);
  }
};

Env& TheEnv() {
  static Env* env = new Env();
  return *env;
}

// The target (or `model`) whole, split in this process, or with stage 1 over loopback.
struct Topology : daisy::testing::Topology {
  explicit Topology(const std::string& kind, const fs::path& model = TheEnv().dir / "target.gguf")
      : daisy::testing::Topology({.kind = kind, .model = model, .shards = TheEnv().dir / "2", .capacity = kCapacity}) {}
};

using daisy::testing::Prompt;

// A prompt that repeats a short pattern, so prompt lookup has something to find.
std::vector<int32_t> Repetitive(int salt) {
  std::vector<int32_t> t;
  for (int r = 0; r < 4; ++r) {
    for (int i = 0; i < 5; ++i) t.push_back((i * 29 + salt * 7) % 250 + 1);
  }
  return t;
}

std::vector<int32_t> Plain(Pipeline& p, const std::vector<int32_t>& prompt, int n,
                           runtime::SamplingParams sp = {}) {
  GenerateOptions g;
  g.max_tokens = n;
  g.prefill_chunk = 64;  // the stages' rows per forward
  g.sampling = sp;
  auto ids = Generate(p, 0, prompt, g, nullptr, nullptr);
  EXPECT_TRUE(ids.ok()) << ids.status().ToString();
  return ids.ok() ? *ids : std::vector<int32_t>{};
}

std::vector<int32_t> Speculative(Pipeline& p, Drafter& d, const std::vector<int32_t>& prompt, int n, int k,
                                 GenerateStats& st, runtime::SamplingParams sp = {}) {
  GenerateOptions g;
  g.max_tokens = n;
  g.prefill_chunk = 64;
  g.sampling = sp;
  g.drafter = &d;
  g.spec_k = k;
  g.spec_k_max = 8;
  auto ids = Generate(p, 1, prompt, g, nullptr, &st);
  EXPECT_TRUE(ids.ok()) << ids.status().ToString();
  return ids.ok() ? *ids : std::vector<int32_t>{};
}

void ExpectGreedyIdentical(const std::string& kind, bool lookup) {
  Topology target(kind);
  Topology draft_model("whole", TheEnv().dir / "draft.gguf");
  ModelDrafter model_drafter(*draft_model.p);
  LookupDrafter lookup_drafter;
  Drafter& drafter = lookup ? static_cast<Drafter&>(lookup_drafter) : model_drafter;
  int verifies = 0, drafted = 0, accepted = 0, stops = 0;
  for (int salt = 0; salt < 4; ++salt) {
    const auto prompt = lookup ? Repetitive(salt) : Prompt(3 + salt * 9, salt);
    const int n = 30 + salt * 17;
    const auto want = Plain(*target.p, prompt, n);
    for (int k : {0, 1, 3, 7}) {
      GenerateStats st;
      EXPECT_EQ(Speculative(*target.p, drafter, prompt, n, k, st), want)
          << kind << (lookup ? " lookup" : " draft") << " prompt " << salt << " k " << k;
      EXPECT_EQ(st.generated, n);
      verifies += st.verifies;
      stops += st.confidence_stops;
      drafted += st.drafted;
      accepted += st.accepted;
    }
  }
  // Both outcomes happened: drafts accepted and drafts rejected.
  EXPECT_GT(verifies, 0);
  EXPECT_GT(accepted, 0);
  EXPECT_LT(accepted, drafted);
  // With a draft model, adaptive K let the draft's confidence end some drafting.
  if (!lookup) {
    EXPECT_GT(stops, 0);
  }
}

TEST(Speculative, GreedyWithADraftModelIsIdenticalOnTheWholeModel) { ExpectGreedyIdentical("whole", false); }
TEST(Speculative, GreedyWithADraftModelIsIdenticalOnAnInProcessSplit) { ExpectGreedyIdentical("split", false); }
TEST(Speculative, GreedyWithADraftModelIsIdenticalOverLoopback) { ExpectGreedyIdentical("remote", false); }
TEST(Speculative, GreedyWithPromptLookupIsIdenticalOnTheWholeModel) { ExpectGreedyIdentical("whole", true); }
TEST(Speculative, GreedyWithPromptLookupIsIdenticalOverLoopback) { ExpectGreedyIdentical("remote", true); }

TEST(Speculative, PromptLookupDraftsTheMostRecentMatchAndRepeatsAShortLoop) {
  LookupDrafter lookup;
  std::vector<int32_t> draft;
  std::vector<DraftDistribution> q;
  const auto propose = [&](std::vector<int32_t> history, int k) {
    EXPECT_TRUE(lookup.Propose(0, history, k, {}, draft, q).ok());
    EXPECT_EQ(q.size(), draft.size());
    return draft;
  };
  // The longest matching suffix ("6 7") wins over a more recent shorter one ("7", followed by 2).
  EXPECT_EQ(propose({5, 6, 7, 8, 9, 1, 7, 2, 6, 7}, 3), (std::vector<int32_t>{8, 9, 1}));
  EXPECT_EQ(propose({1, 2, 3, 4, 9, 2, 3, 4, 8, 1, 2, 3, 4}, 2), (std::vector<int32_t>{8, 1}));
  // A loop of period 3 drafts K tokens, read on as the loop.
  EXPECT_EQ(propose({9, 1, 2, 3, 1, 2, 3, 1}, 7), (std::vector<int32_t>{2, 3, 1, 2, 3, 1, 2}));
  EXPECT_EQ(propose({4, 4}, 5), (std::vector<int32_t>{4, 4, 4, 4, 4}));
  // Nothing matches: no drafts.
  EXPECT_TRUE(propose({1, 2, 3}, 4).empty());
  EXPECT_TRUE(propose({1}, 4).empty());
}

TEST(Speculative, ADraftCatchesUpOnALongPromptInChunks) {
  // 150 prompt tokens: more than the draft pipeline's 64 rows per forward.
  Topology target("whole");
  Topology draft_model("whole", TheEnv().dir / "draft.gguf");
  ModelDrafter drafter(*draft_model.p, 64);
  const auto prompt = Prompt(150, 2);
  GenerateStats st;
  EXPECT_EQ(Speculative(*target.p, drafter, prompt, 40, 3, st), Plain(*target.p, prompt, 40));
  EXPECT_GT(st.verifies, 0);
}

TEST(Speculative, ADraftModelDraftsForManySequencesAtOnceAsForEachAlone) {
  // The same jobs proposed one by one (64 rows a forward) and jointly (16 rows a forward, so the
  // 150-token catch-up is chunked and the short ones are packed together): the same drafts and
  // the same draft distributions, bit for bit, in a first round and after a partial acceptance.
  Topology alone_model("whole", TheEnv().dir / "draft.gguf");
  Topology joint_model("whole", TheEnv().dir / "draft.gguf");
  ModelDrafter alone(*alone_model.p, 64), joint(*joint_model.p, 16);
  runtime::SamplingParams greedy, sampled;
  sampled.temperature = 0.8f;
  sampled.seed = 77;
  std::vector<std::vector<int32_t>> histories = {Prompt(150, 2), Prompt(9, 3), Prompt(7, 1), Prompt(5, 4)};
  const std::vector<int> ks = {3, 5, 4, 0};
  const std::vector<const runtime::SamplingParams*> sp = {&greedy, &greedy, &sampled, &greedy};
  for (int round = 0; round < 2; ++round) {
    std::vector<DraftJob> jobs(histories.size());
    for (size_t i = 0; i < jobs.size(); ++i) {
      jobs[i].seq = static_cast<int32_t>(i + 1);
      jobs[i].history = histories[i];
      jobs[i].k = ks[i];
      jobs[i].sampling = sp[i];
    }
    joint.ProposeAll(jobs);
    int rows = 0;
    for (size_t i = 0; i < jobs.size(); ++i) {
      SCOPED_TRACE(::testing::Message() << "round " << round << ", sequence " << i + 1);
      std::vector<int32_t> draft;
      std::vector<DraftDistribution> q;
      ASSERT_TRUE(alone.Propose(jobs[i].seq, histories[i], ks[i], *sp[i], draft, q).ok());
      ASSERT_TRUE(jobs[i].status.ok()) << jobs[i].status.message();
      EXPECT_EQ(jobs[i].draft, draft);
      EXPECT_EQ(jobs[i].q, q);
      EXPECT_EQ(jobs[i].draft.size(), static_cast<size_t>(ks[i]));
      EXPECT_EQ(jobs[i].seconds > 0, ks[i] > 0);
      if (ks[i] > 0) {
        EXPECT_EQ(sp[i] == &sampled, !jobs[i].q[0].empty());
      }
      rows += jobs[i].rows;
    }
    EXPECT_EQ(joint.last_rows(), rows);
    if (round == 0) {
      // Every draft ran: the whole history once, then each draft but the last.
      EXPECT_EQ(jobs[0].rows, 150 + 3 - 1);
      EXPECT_EQ(jobs[3].rows, 0);
    } else {
      // The cache kept the accepted drafts: only the correction and the new drafts ran.
      EXPECT_EQ(jobs[1].rows, 1 + 5 - 1);
    }
    // The verify takes the first two drafts of each and corrects the third (token 1 here).
    for (size_t i = 0; i < histories.size() && round == 0; ++i) {
      const size_t settled = histories[i].size();
      for (size_t d = 0; d < std::min<size_t>(2, jobs[i].draft.size()); ++d) histories[i].push_back(jobs[i].draft[d]);
      histories[i].push_back(1);
      alone.Settled(jobs[i].seq, settled + std::min<size_t>(2, jobs[i].draft.size()));
      joint.Settled(jobs[i].seq, settled + std::min<size_t>(2, jobs[i].draft.size()));
    }
  }
}

// A draft's confidence is the probability the draft model gave it: greedily, its argmax's, the
// same bits as plain decoding on the draft model reports (batch invariance). Asked after each
// draft, `more` ends the drafting: the drafts so far are kept, with their confidences.
TEST(Speculative, ADraftModelReportsItsConfidenceInEachDraftAndStopsWhenAsked) {
  Topology draft_model("whole", TheEnv().dir / "draft.gguf");
  Topology plain_model("whole", TheEnv().dir / "draft.gguf");
  ModelDrafter drafter(*draft_model.p);
  const auto prompt = Prompt(9, 5);
  GenerateOptions g;
  g.max_tokens = 6;
  GenerateStats plain;
  auto ids = Generate(*plain_model.p, 0, prompt, g, nullptr, &plain);
  ASSERT_TRUE(ids.ok()) << ids.status().ToString();
  runtime::SamplingParams greedy;
  DraftJob all;
  all.seq = 1;
  all.history = prompt;
  all.k = 5;
  all.sampling = &greedy;
  std::vector<std::vector<float>> asked;
  all.more = [&](std::span<const float> c) {
    asked.emplace_back(c.begin(), c.end());
    return true;
  };
  drafter.ProposeAll(std::span<DraftJob>(&all, 1));
  ASSERT_TRUE(all.status.ok()) << all.status.message();
  ASSERT_EQ(all.draft, std::vector<int32_t>(ids->begin(), ids->begin() + 5));
  ASSERT_EQ(all.confidence.size(), 5u);
  for (size_t i = 0; i < 5; ++i) {
    EXPECT_EQ(all.confidence[i], std::exp(plain.logprobs[i])) << i;
    EXPECT_GT(all.confidence[i], 0.0f);
    EXPECT_LE(all.confidence[i], 1.0f);
  }
  // Asked after every draft but the k-th, with the confidences so far.
  ASSERT_EQ(asked.size(), 4u);
  for (size_t i = 0; i < asked.size(); ++i) {
    EXPECT_EQ(asked[i], std::vector<float>(all.confidence.begin(), all.confidence.begin() + i + 1));
  }
  DraftJob two = all;
  two.more = [](std::span<const float> c) { return c.size() < 2; };
  drafter.Settled(1, prompt.size());
  drafter.ProposeAll(std::span<DraftJob>(&two, 1));
  ASSERT_TRUE(two.status.ok());
  EXPECT_EQ(two.draft, std::vector<int32_t>(all.draft.begin(), all.draft.begin() + 2));
  EXPECT_EQ(two.confidence, std::vector<float>(all.confidence.begin(), all.confidence.begin() + 2));
  // Sampled: the drawn token's probability under q.
  runtime::SamplingParams sampled;
  sampled.temperature = 0.8f;
  sampled.seed = 3;
  DraftJob drawn = all;
  drawn.sampling = &sampled;
  drawn.more = nullptr;
  drafter.Settled(1, prompt.size());
  drafter.ProposeAll(std::span<DraftJob>(&drawn, 1));
  ASSERT_TRUE(drawn.status.ok());
  ASSERT_EQ(drawn.confidence.size(), drawn.draft.size());
  for (size_t i = 0; i < drawn.draft.size(); ++i) {
    float want = -1;
    for (auto [id, prob] : drawn.q[i]) {
      if (id == drawn.draft[i]) want = prob;
    }
    EXPECT_EQ(drawn.confidence[i], want) << i;
  }
}

TEST(Speculative, GreedyWithARepetitionPenaltyIsIdentical) {
  Topology target("whole");
  Topology draft_model("whole", TheEnv().dir / "draft.gguf");
  ModelDrafter drafter(*draft_model.p);
  runtime::SamplingParams sp;
  sp.repeat_penalty = 1.3f;
  sp.repeat_last_n = 16;
  const auto prompt = Prompt(9, 3);
  GenerateStats st;
  EXPECT_EQ(Speculative(*target.p, drafter, prompt, 60, 4, st, sp), Plain(*target.p, prompt, 60, sp));
  EXPECT_GT(st.accepted, 0);
}

TEST(Speculative, SamplingIsReproducibleForASeed) {
  Topology target("remote");
  Topology draft_model("whole", TheEnv().dir / "draft.gguf");
  ModelDrafter drafter(*draft_model.p);
  runtime::SamplingParams sp;
  sp.temperature = 0.8f;
  sp.seed = 77;
  const auto prompt = Prompt(7, 1);
  GenerateStats a, b;
  // A fixed K: with adaptive K the drafts, and so the draws, depend on measured times.
  const auto first = Speculative(*target.p, drafter, prompt, 50, 4, a, sp);
  EXPECT_EQ(Speculative(*target.p, drafter, prompt, 50, 4, b, sp), first);
  EXPECT_EQ(first.size(), 50u);
  EXPECT_GT(a.accepted, 0);
}

// The chi-square quantile at p = 1e-4 (Wilson-Hilferty).
double ChiSquareLimit(int df) {
  const double z = 3.719, k = df;
  return k * std::pow(1 - 2 / (9 * k) + z * std::sqrt(2 / (9 * k)), 3);
}

// Whether two samples of one categorical variable (equal sizes) look alike: the two-sample
// chi-square over cells with at least 10 draws in all (the rest pooled into one cell).
void ExpectSameDistribution(const std::map<int32_t, int>& a, const std::map<int32_t, int>& b, const std::string& what) {
  std::map<int32_t, std::pair<int, int>> cells;
  for (auto [t, n] : a) cells[t].first += n;
  for (auto [t, n] : b) cells[t].second += n;
  double chi = 0;
  int df = -1, pooled_a = 0, pooled_b = 0;
  for (auto [t, ab] : cells) {
    if (ab.first + ab.second < 10) {
      pooled_a += ab.first, pooled_b += ab.second;
      continue;
    }
    chi += double(ab.first - ab.second) * (ab.first - ab.second) / (ab.first + ab.second);
    ++df;
  }
  if (pooled_a + pooled_b > 0) {
    chi += double(pooled_a - pooled_b) * (pooled_a - pooled_b) / (pooled_a + pooled_b);
    ++df;
  }
  ASSERT_GE(df, 2) << what << ": too few distinct tokens to compare";
  EXPECT_LT(chi, ChiSquareLimit(df)) << what << " (chi-square " << chi << ", " << df << " degrees of freedom)";
}

// Sampled speculative decoding is exact in distribution, end to end: over many seeds, each of
// the first tokens after the prompt is distributed as plain sampling's (the draws differ seed by
// seed: verification spends its own random numbers).
void ExpectSampledSpeculationIsPlainSampling(Drafter& drafter, const std::vector<int32_t>& prompt, float temperature,
                                             const std::string& what) {
  Topology target("whole");
  constexpr int kSeeds = 1200, kTokens = 4;
  std::vector<std::map<int32_t, int>> plain(kTokens), spec(kTokens);
  int verifies = 0, accepted = 0, drafted = 0;
  for (int seed = 1; seed <= kSeeds; ++seed) {
    runtime::SamplingParams sp;
    sp.temperature = temperature;
    sp.top_k = 6;
    sp.top_p = 1.0f;
    sp.min_p = 0.0f;
    sp.seed = static_cast<uint64_t>(seed);
    const auto a = Plain(*target.p, prompt, kTokens, sp);
    GenerateStats st;
    const auto b = Speculative(*target.p, drafter, prompt, kTokens, 3, st, sp);
    ASSERT_EQ(a.size(), static_cast<size_t>(kTokens));
    ASSERT_EQ(b.size(), static_cast<size_t>(kTokens));
    for (int i = 0; i < kTokens; ++i) {
      plain[i][a[i]]++;
      spec[i][b[i]]++;
    }
    verifies += st.verifies, accepted += st.accepted, drafted += st.drafted;
  }
  // Verification really decided: drafts were both taken and refused.
  EXPECT_GT(verifies, kSeeds / 2);
  EXPECT_GT(accepted, 0) << what;
  EXPECT_LT(accepted, drafted) << what;
  for (int i = 1; i < kTokens; ++i) ExpectSameDistribution(plain[i], spec[i], what + ", token " + std::to_string(i));
}

TEST(Speculative, SampledSpeculationWithADraftModelDrawsFromThePlainDistribution) {
  Topology draft_model("whole", TheEnv().dir / "draft.gguf");
  ModelDrafter drafter(*draft_model.p);
  ExpectSampledSpeculationIsPlainSampling(drafter, Prompt(7, 2), 1.0f, "draft model");
}

TEST(Speculative, SampledSpeculationWithPromptLookupDrawsFromThePlainDistribution) {
  LookupDrafter drafter;
  // Hot enough that the sampled text leaves the prompt's loop, so some lookups are refused.
  ExpectSampledSpeculationIsPlainSampling(drafter, Repetitive(3), 4.0f, "prompt lookup");
}

}  // namespace
}  // namespace daisy::coord
