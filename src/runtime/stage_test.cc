// Batch invariance of the whole forward pass (design.md invariant 1), for every weight type and
// kernel table: a sequence's logits are bit-identical alone, batched with other sequences of
// different lengths, prefilled in different chunk sizes, decoded several rows at a time, and on
// 1 or 2 threads. Plus the KV cache's errors and rewind.
#include "runtime/stage.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <map>
#include <random>

#include "model/generator.h"
#include "runtime/sampler.h"
#include "tokenizer/hf_import.h"

namespace daisy::runtime {
namespace {

struct Fixture {
  std::filesystem::path path;
  std::unique_ptr<model::Model> model;
};

Fixture MakeModel(gguf::TensorType type, int kv_heads = 2) {
  Fixture f;
  f.path = std::filesystem::temp_directory_path() /
           ("stage-" + std::to_string(getpid()) + "-" + gguf::Traits(type).name + "-" +
            std::to_string(kv_heads) + ".gguf");
  model::GenerateOptions o;
  o.config = model::FindShape("tiny").value().config;
  o.config.n_kv_heads = kv_heads;
  o.type = type;
  o.seed = 99;
  EXPECT_TRUE(model::GenerateModel(o, tokenizer::BuiltinByteVocab(), f.path).ok());
  auto m = model::Model::Load(f.path);
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  f.model = std::move(m).value();
  std::filesystem::remove(f.path);  // the mapping stays valid
  return f;
}

std::vector<int32_t> Tokens(int n, uint32_t seed, int vocab) {
  std::mt19937 rng(seed);
  std::vector<int32_t> t(n);
  for (int32_t& x : t) x = static_cast<int32_t>(rng() % vocab);
  return t;
}

// Logits of every position of each sequence, fed in the given schedule: a list of steps, each
// a list of (sequence, number of new rows).
using Schedule = std::vector<std::vector<std::pair<int, int>>>;
std::map<int, std::vector<float>> RunSchedule(Stage& stage, const std::map<int, std::vector<int32_t>>& seqs,
                                      const Schedule& schedule) {
  const int vocab = stage.config().n_vocab;
  std::map<int, int> done;
  std::map<int, std::vector<float>> logits;
  for (const auto& step : schedule) {
    std::vector<BatchRow> rows;
    for (auto [seq, count] : step) {
      for (int i = 0; i < count; ++i) {
        const int pos = done[seq]++;
        rows.push_back({seq, pos, seqs.at(seq)[pos], true});
      }
    }
    std::vector<float> out(rows.size() * vocab);
    Status s = stage.Forward(rows, {}, out);
    EXPECT_TRUE(s.ok()) << s.ToString();
    for (size_t r = 0; r < rows.size(); ++r) {
      auto& dst = logits[rows[r].seq];
      dst.insert(dst.end(), out.begin() + r * vocab, out.begin() + (r + 1) * vocab);
    }
  }
  return logits;
}

void ExpectBitEqual(const std::vector<float>& a, const std::vector<float>& b, const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  ASSERT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0) << what;
}

class BatchInvariance : public ::testing::TestWithParam<gguf::TensorType> {};

TEST_P(BatchInvariance, LogitsDoNotDependOnTheBatch) {
  Fixture f = MakeModel(GetParam());
  const int vocab = f.model->config().n_vocab;
  const std::map<int, std::vector<int32_t>> seqs = {
      {0, Tokens(21, 1, vocab)}, {1, Tokens(9, 2, vocab)}, {2, Tokens(14, 3, vocab)},
      {3, Tokens(5, 4, vocab)},  {4, Tokens(17, 5, vocab)}, {5, Tokens(3, 6, vocab)},
      {6, Tokens(11, 7, vocab)}, {7, Tokens(8, 8, vocab)}};
  for (const kernels::KernelTable* table : kernels::AllSupportedKernels()) {
    std::vector<float> single_thread;
    for (int threads : {1, 2}) {
      ThreadPool pool(threads);
      const std::string tag = std::string(table->name) + "/" + gguf::Traits(GetParam()).name +
                              "/threads " + std::to_string(threads);
      auto fresh = [&] {
        return std::make_unique<Stage>(*f.model, StageOptions{.max_batch_rows = 128, .seq_capacity = 64},
                                       *table, pool);
      };
      // Sequence 0 alone, one prefill.
      auto alone_stage = fresh();
      const auto alone = RunSchedule(*alone_stage, seqs, {{{0, 21}}});
      if (threads == 1) single_thread = alone.at(0);
      ExpectBitEqual(alone.at(0), single_thread, tag + " vs 1 thread");
      // Alone, token by token.
      Schedule one_by_one;
      for (int i = 0; i < 21; ++i) one_by_one.push_back({{0, 1}});
      auto s1 = fresh();
      ExpectBitEqual(RunSchedule(*s1, seqs, one_by_one)[0], alone.at(0), tag + " one row at a time");
      // Chunks of 4 then verify-style blocks of 3 rows.
      auto s2 = fresh();
      ExpectBitEqual(RunSchedule(*s2, seqs, {{{0, 4}}, {{0, 4}}, {{0, 4}}, {{0, 3}}, {{0, 3}}, {{0, 3}}})[0],
                     alone.at(0), tag + " chunks");
      // Batched with 1..7 other sequences of different lengths, interleaved over steps.
      for (int others = 1; others <= 7; ++others) {
        Schedule mixed;
        std::vector<std::pair<int, int>> first{{0, 6}};
        for (int s = 1; s <= others; ++s) first.push_back({s, std::min<int>(2, seqs.at(s).size())});
        mixed.push_back(first);
        std::vector<std::pair<int, int>> second;
        for (int s = others; s >= 1; --s) {
          const int left = static_cast<int>(seqs.at(s).size()) - 2;
          if (left > 0) second.push_back({s, left});
        }
        second.push_back({0, 15});
        mixed.push_back(second);
        auto s3 = fresh();
        ExpectBitEqual(RunSchedule(*s3, seqs, mixed)[0], alone.at(0),
                       tag + " with " + std::to_string(others) + " others");
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllTypes, BatchInvariance,
                         ::testing::Values(gguf::TensorType::kF32, gguf::TensorType::kF16,
                                           gguf::TensorType::kBF16, gguf::TensorType::kQ8_0,
                                           gguf::TensorType::kQ4_0),
                         [](const auto& p) { return std::string(gguf::Traits(p.param).name); });

TEST(Stage, RewindRecomputesExactly) {
  Fixture f = MakeModel(gguf::TensorType::kQ8_0, 4);
  ThreadPool pool(2);
  Stage stage(*f.model, {.max_batch_rows = 32, .seq_capacity = 32}, kernels::BestKernels(), pool);
  const int vocab = f.model->config().n_vocab;
  const auto tokens = Tokens(12, 9, vocab);
  const auto first = RunSchedule(stage, {{0, tokens}}, {{{0, 12}}});
  // Rewind to position 7 (as a rejected speculation would) with different tokens, then back.
  std::vector<BatchRow> rows;
  for (int p = 7; p < 10; ++p) rows.push_back({0, p, (tokens[p] + 1) % vocab, false});
  std::vector<float> none;
  ASSERT_TRUE(stage.Forward(rows, {}, {}).ok());
  EXPECT_EQ(stage.kv().Length(0), 10);
  rows.clear();
  for (int p = 7; p < 12; ++p) rows.push_back({0, p, tokens[p], true});
  std::vector<float> out(5 * vocab);
  ASSERT_TRUE(stage.Forward(rows, {}, out).ok());
  const std::vector<float> tail(first.at(0).begin() + 7 * vocab, first.at(0).end());
  ExpectBitEqual(out, tail, "after rewind");
}

TEST(Stage, BadBatchesAreRefusedAndChangeNothing) {
  Fixture f = MakeModel(gguf::TensorType::kF32);
  ThreadPool pool(1);
  Stage stage(*f.model, {.max_batch_rows = 8, .seq_capacity = 10, .max_seqs = 2},
              kernels::ScalarKernels(), pool);
  const int vocab = f.model->config().n_vocab;
  std::vector<float> out(vocab);
  const BatchRow ok{0, 0, 1, true};
  ASSERT_TRUE(stage.Forward({&ok, 1}, {}, out).ok());
  struct Case {
    std::vector<BatchRow> rows;
    const char* error;
  } cases[] = {
      {{{0, 5, 1, true}}, "sequence 0 has 1 positions; rows cannot start at 5"},
      {{{1, 0, vocab, true}}, "outside the vocabulary"},
      {{{0, 1, 1, false}, {0, 3, 1, true}}, "jumps from position 1 to 3"},
      {{{0, 1, 1, false}, {1, 0, 1, false}, {0, 2, 1, true}}, "two separate runs"},
      {{{0, 1, 1, false}, {0, 2, 1, false}, {0, 3, 1, false}, {0, 4, 1, false}, {0, 5, 1, false},
        {0, 6, 1, false}, {0, 7, 1, false}, {0, 8, 1, false}, {0, 9, 1, false}},
       "exceeds this stage's maximum of 8"},
  };
  for (const Case& c : cases) {
    Status s = stage.Forward(c.rows, {}, out);
    EXPECT_FALSE(s.ok());
    EXPECT_NE(s.message().find(c.error), std::string::npos) << s.ToString();
    EXPECT_EQ(stage.kv().Length(0), 1);
  }
  // Capacity: positions 1..10 would need 11 slots.
  std::vector<BatchRow> long_rows;
  for (int p = 1; p <= 8; ++p) long_rows.push_back({0, p, 1, p == 8});
  ASSERT_TRUE(stage.Forward(long_rows, {}, out).ok());
  const BatchRow over[] = {{0, 9, 1, false}, {0, 10, 1, true}};
  Status s = stage.Forward(over, {}, out);
  EXPECT_NE(s.message().find("would reach 11 positions; the KV cache holds 10"), std::string::npos)
      << s.ToString();
  EXPECT_EQ(stage.kv().Length(0), 9);
  // A third sequence does not fit max_seqs = 2.
  const BatchRow s1{1, 0, 1, true}, s2{2, 0, 1, true};
  ASSERT_TRUE(stage.Forward({&s1, 1}, {}, out).ok());
  s = stage.Forward({&s2, 1}, {}, out);
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted) << s.ToString();
  stage.Release(1);
  EXPECT_TRUE(stage.Forward({&s2, 1}, {}, out).ok());
}

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

}  // namespace
}  // namespace daisy::runtime
