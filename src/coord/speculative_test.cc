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
#include "pipeline/test_topology.h"
#include "pipeline/worker.h"
#include "shard/load.h"
#include "tokenizer/hf_import.h"

namespace daisy::coord {
namespace {

using pipeline::Pipeline;
namespace testing = pipeline::testing;

namespace fs = std::filesystem;
constexpr int kCapacity = 256;

struct Env {
  testing::TempDir tmp{"speculative-test"};
  fs::path dir = tmp.path;
  Env() {
    // A 6-layer target whose first 2 layers, embeddings and head are the draft's.
    model::GenerateOptions o;
    o.config = model::FindShape("tiny").value().config;
    o.config.n_layers = 6;
    o.type = gguf::TensorType::kQ8_0;
    o.seed = 11;
    o.branch_layers = o.scaled_from = 2;
    o.scaled_by = 0.15f;
    EXPECT_TRUE(model::GenerateModel(o, tokenizer::BuiltinByteVocab(), dir / "target.gguf").ok());
    model::GenerateOptions d = o;
    d.config.n_layers = 2;
    d.scaled_from = -1;
    EXPECT_TRUE(model::GenerateModel(d, tokenizer::BuiltinByteVocab(), dir / "draft.gguf").ok());
    testing::CompileShards(dir / "target.gguf", dir / "2", 2);
  }
};

Env& TheEnv() {
  static Env* env = new Env();
  return *env;
}

// The target (or `model`) whole, split in this process, or with stage 1 over loopback.
struct Topology : testing::Topology {
  explicit Topology(const std::string& kind, const fs::path& model = TheEnv().dir / "target.gguf")
      : testing::Topology({.kind = kind, .model = model, .shards = TheEnv().dir / "2", .capacity = kCapacity}) {}
};

std::vector<int32_t> Prompt(int n, int salt) {
  std::vector<int32_t> t;
  for (int i = 0; i < n; ++i) t.push_back((i * 37 + salt * 13) % 250 + 1);
  return t;
}

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

}  // namespace
}  // namespace daisy::coord
