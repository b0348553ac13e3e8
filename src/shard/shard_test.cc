// Shards: the split planner, compile -> load round trips that give bit-identical logits to the
// monolithic model when chained in one process, and every refusal (plain GGUF, another model,
// gaps, overlaps, order, format version).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <random>

#include "gguf/reader.h"
#include "model/generator.h"
#include "runtime/stage.h"
#include "shard/compile.h"
#include "shard/format.h"
#include "shard/load.h"
#include "shard/plan.h"
#include "testing/fixtures.h"

namespace daisy::shard {
namespace {

namespace fs = std::filesystem;

// A scratch directory per case, removed with the test binary's.
fs::path TempDir(const std::string& name) {
  static daisy::testing::TempDir root("shard-test");
  const fs::path p = root / name;
  fs::remove_all(p);
  fs::create_directories(p);
  return p;
}

fs::path MakeModel(const fs::path& dir, gguf::TensorType type, uint64_t seed, int layers, bool tied = false,
                   bool bias = false) {
  return daisy::testing::MakeModel({.layers = layers, .tied = tied, .bias = bias, .type = type, .seed = seed},
                                   dir / ("model-" + std::to_string(seed) + "-" + gguf::Traits(type).name + ".gguf"));
}

CompileReport MustCompile(const fs::path& model, const fs::path& out, int stages,
                          std::vector<int> layers = {}) {
  CompileOptions o;
  o.model = model;
  o.out_dir = out;
  o.stages = stages;
  o.layer_counts = std::move(layers);
  o.progress = false;
  auto r = Compile(o);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? *r : CompileReport{};
}

TEST(Plan, BalancedCountsTheHeadOnTheLastStage) {
  SplitCosts c;
  c.layer_bytes.assign(16, 100);
  c.head_bytes = 430;
  c.embed_bytes = 10000;  // stored, not read per token: does not move the split
  auto b = PlanBalanced(c, 2);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(*b, (std::vector<int>{0, 10, 16}));
  c.head_bytes = 0;
  EXPECT_EQ(PlanBalanced(c, 4).value(), (std::vector<int>{0, 4, 8, 12, 16}));
  EXPECT_EQ(PlanBalanced(c, 1).value(), (std::vector<int>{0, 16}));
  auto too_many = PlanBalanced(c, 17);
  ASSERT_FALSE(too_many.ok());
  EXPECT_NE(too_many.status().message().find("at least one layer"), std::string::npos);
}

TEST(Plan, ExplicitAndMemory) {
  const int counts[] = {3, 5};
  EXPECT_EQ(PlanExplicit(8, counts).value(), (std::vector<int>{0, 3, 8}));
  auto bad = PlanExplicit(9, counts);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("add up to 8 layers, the model has 9"), std::string::npos);
  const int zero[] = {0, 8};
  EXPECT_FALSE(PlanExplicit(8, zero).ok());

  SplitCosts c;
  c.layer_bytes.assign(12, 100);
  const uint64_t mem[] = {800, 400};
  EXPECT_EQ(PlanByMemory(c, mem).value(), (std::vector<int>{0, 8, 12}));
  const uint64_t small[] = {300, 300};
  auto nofit = PlanByMemory(c, small);
  ASSERT_FALSE(nofit.ok());
  EXPECT_NE(nofit.status().message().find("does not fit"), std::string::npos);

  EXPECT_EQ(ParseBytes("16G").value(), 16ull << 30);
  EXPECT_EQ(ParseBytes("512M").value(), 512ull << 20);
  EXPECT_EQ(ParseBytes("1000").value(), 1000u);
  EXPECT_FALSE(ParseBytes("16Q").ok());
  EXPECT_FALSE(ParseBytes("-1G").ok());
  EXPECT_FALSE(ParseBytes("").ok());
}

runtime::StageOptions OptionsFor(const ShardInfo& info) {
  runtime::StageOptions o;
  o.first_layer = info.first_layer;
  o.last_layer = info.last_layer;
  o.embeddings = info.embeddings();
  o.head = info.head();
  o.max_batch_rows = 16;
  o.seq_capacity = 64;
  o.max_seqs = 2;
  return o;
}

// Logits of every position of `tokens`, prefilled in chunks of 5 then one at a time, through
// the given chain of stages.
std::vector<float> ChainLogits(std::vector<std::unique_ptr<runtime::Stage>>& chain,
                               const std::vector<int32_t>& tokens) {
  const int vocab = chain.back()->config().n_vocab, d = chain.back()->config().d_model;
  std::vector<float> all;
  size_t pos = 0;
  while (pos < tokens.size()) {
    const size_t n = pos < 10 ? std::min<size_t>(5, tokens.size() - pos) : 1;
    std::vector<runtime::BatchRow> rows;
    for (size_t i = 0; i < n; ++i) {
      rows.push_back({0, static_cast<int32_t>(pos + i), tokens[pos + i], true});
    }
    std::vector<float> hidden;
    for (size_t s = 0; s < chain.size(); ++s) {
      const bool last = s + 1 == chain.size();
      std::vector<float> out(n * (last ? vocab : d));
      Status st = chain[s]->Forward(rows, hidden, out);
      EXPECT_TRUE(st.ok()) << st.ToString();
      hidden = std::move(out);
    }
    all.insert(all.end(), hidden.begin(), hidden.end());
    pos += n;
  }
  return all;
}

class CompileTest : public ::testing::TestWithParam<std::tuple<gguf::TensorType, bool, bool>> {};

TEST_P(CompileTest, ShardsChainedGiveTheMonolithicLogitsBitForBit) {
  const auto [type, tied, bias] = GetParam();
  std::string name = "chain-";
  name += gguf::Traits(type).name;
  if (tied) name += "-tied";
  if (bias) name += "-bias";
  const fs::path dir = TempDir(name);
  const fs::path model_path = MakeModel(dir, type, 7, 6, tied, bias);
  runtime::ThreadPool pool(2);
  const auto& kernels = kernels::BestKernels();
  std::vector<int32_t> tokens(14);
  std::mt19937 rng(3);
  for (int32_t& t : tokens) t = static_cast<int32_t>(rng() % 200);

  auto mono_model = model::Model::Load(model_path);
  ASSERT_TRUE(mono_model.ok());
  std::vector<std::unique_ptr<runtime::Stage>> mono;
  runtime::StageOptions mo;
  mo.max_batch_rows = 16;
  mo.seq_capacity = 64;
  mo.max_seqs = 2;
  mono.push_back(std::make_unique<runtime::Stage>(**mono_model, mo, kernels, pool));
  const std::vector<float> expected = ChainLogits(mono, tokens);

  for (int stages : {1, 2, 3}) {
    const fs::path out = dir / fs::path(std::string(1, static_cast<char>('0' + stages)));
    CompileReport report = MustCompile(model_path, out, stages);
    ASSERT_EQ(report.shards.size(), static_cast<size_t>(stages));
    std::vector<Shard> shards;
    std::vector<ShardInfo> infos;
    for (bool copy : {false, true}) {
      shards.clear();
      infos.clear();
      for (int s = 0; s < stages; ++s) {
        auto shard = LoadShard(ShardPath(out, s), copy);
        ASSERT_TRUE(shard.ok()) << shard.status().ToString();
        EXPECT_EQ(shard->info.fingerprint, report.fingerprint);
        infos.push_back(shard->info);
        shards.push_back(std::move(*shard));
      }
      ASSERT_TRUE(CheckChain(infos).ok()) << CheckChain(infos).ToString();
      std::vector<std::unique_ptr<runtime::Stage>> chain;
      for (auto& s : shards) {
        chain.push_back(std::make_unique<runtime::Stage>(*s.model, OptionsFor(s.info), kernels, pool));
      }
      const std::vector<float> got = ChainLogits(chain, tokens);
      ASSERT_EQ(got.size(), expected.size());
      EXPECT_EQ(std::memcmp(got.data(), expected.data(), got.size() * sizeof(float)), 0)
          << stages << " stages, copy " << copy;
    }
  }
  // Only stage 0 carries the tokenizer.
  auto r0 = gguf::Reader::Open(ShardPath(dir / "2", 0));
  auto r1 = gguf::Reader::Open(ShardPath(dir / "2", 1));
  EXPECT_NE(r0->Find("tokenizer.ggml.tokens"), nullptr);
  EXPECT_EQ(r1->Find("tokenizer.ggml.tokens"), nullptr);
  fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Types, CompileTest,
                         ::testing::Values(std::tuple{gguf::TensorType::kQ4_0, false, false},
                                           std::tuple{gguf::TensorType::kQ8_0, true, false},
                                           std::tuple{gguf::TensorType::kF16, false, false},
                                           std::tuple{gguf::TensorType::kF32, true, false},
                                           // The integer family's packed layout (32-element blocks
                                           // on the tiny shape's 64-wide rows).
                                           std::tuple{gguf::TensorType::kQ5_1, true, false},
                                           std::tuple{gguf::TensorType::kIQ4_NL, false, false},
                                           // Optional tensors (attention biases) travel in shards.
                                           std::tuple{gguf::TensorType::kQ4_0, false, true}));

std::vector<ShardInfo> Infos(const fs::path& dir, int n) {
  std::vector<ShardInfo> v;
  for (int s = 0; s < n; ++s) {
    auto r = gguf::Reader::Open(ShardPath(dir, s));
    EXPECT_TRUE(r.ok());
    v.push_back(ReadShardInfo(*r).value());
  }
  return v;
}

void ExpectRefused(const std::vector<ShardInfo>& chain, const std::string& words) {
  Status s = CheckChain(chain);
  ASSERT_FALSE(s.ok()) << "accepted a chain that should fail with: " << words;
  EXPECT_NE(s.message().find(words), std::string::npos) << s.message();
}

TEST(Shards, WrongChainsAreRefusedWithTheReason) {
  const fs::path dir = TempDir("refuse");
  const fs::path a = MakeModel(dir, gguf::TensorType::kQ8_0, 1, 6);
  const fs::path b = MakeModel(dir, gguf::TensorType::kQ8_0, 2, 6);  // same shape, other weights
  const CompileReport ra = MustCompile(a, dir / "a", 2, {3, 3});
  const CompileReport rb = MustCompile(b, dir / "b", 2, {3, 3});
  EXPECT_NE(ra.fingerprint, rb.fingerprint);
  MustCompile(a, dir / "a24", 2, {2, 4});
  MustCompile(a, dir / "a42", 2, {4, 2});
  MustCompile(a, dir / "a3", 3);
  const auto A = Infos(dir / "a", 2), B = Infos(dir / "b", 2);
  const auto A24 = Infos(dir / "a24", 2), A42 = Infos(dir / "a42", 2), A3 = Infos(dir / "a3", 3);
  EXPECT_TRUE(CheckChain(A).ok());
  ExpectRefused({A[0], B[1]}, "belongs to another model");
  ExpectRefused({A[1], A[0]}, "give the shards in stage order");
  ExpectRefused({A[0]}, "but the pipeline has 1 stages");
  ExpectRefused({A24[0], A[1]}, "layers skip to 3 (the previous stage ends at layer 1)");
  ExpectRefused({A42[0], A[1]}, "layers overlap at 3 (the previous stage ends at layer 3)");
  ExpectRefused({A3[0], A3[1], A[1]}, "but the pipeline has 3 stages");

  // A plain GGUF is not a shard.
  auto plain = gguf::Reader::Open(a);
  auto not_shard = ReadShardInfo(*plain);
  ASSERT_FALSE(not_shard.ok());
  EXPECT_NE(not_shard.status().message().find("is not a daisy shard"), std::string::npos);
  // Compiling a shard again is refused.
  CompileOptions again;
  again.model = ShardPath(dir / "a", 0);
  again.out_dir = dir / "again";
  again.stages = 1;
  again.progress = false;
  auto r = Compile(again);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("already a daisy shard"), std::string::npos);
  // More stages than layers.
  again.model = a;
  again.stages = 7;
  r = Compile(again);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("cannot split 6 layers into 7 stages"), std::string::npos);
  EXPECT_FALSE(fs::exists(dir / "again" / "stage-0.daisy"));

  // Another format version: patch the u32 value in place.
  const fs::path shard = ShardPath(dir / "a", 1);
  {
    auto reader = gguf::Reader::Open(shard);
    ASSERT_TRUE(reader.ok());
    const gguf::MetadataEntry* entry = nullptr;
    for (const auto& e : reader->metadata()) {
      if (e.key == kKeyFormatVersion) entry = &e;
    }
    ASSERT_NE(entry, nullptr);
    const long value_at = static_cast<long>(entry->offset + 8 + kKeyFormatVersion.size() + 4);
    std::FILE* f = std::fopen(shard.c_str(), "r+b");
    ASSERT_NE(f, nullptr);
    const uint32_t v = kFormatVersion + 1;
    ASSERT_EQ(std::fseek(f, value_at, SEEK_SET), 0);
    ASSERT_EQ(std::fwrite(&v, 4, 1, f), 1u);
    std::fclose(f);
  }
  auto loaded = LoadShard(shard);
  ASSERT_FALSE(loaded.ok());
  const std::string want = "shard format version " + std::to_string(kFormatVersion + 1) +
                           ", this daisy reads version " + std::to_string(kFormatVersion);
  EXPECT_NE(loaded.status().message().find(want), std::string::npos) << loaded.status().message();
  fs::remove_all(dir);
}

TEST(Shards, ANonFiniteScaleIsRefusedNamingTensorBlockAndRow) {
  // Compiling checks every quantised block's scale as the model loader does: a NaN one would be
  // NaN logits on every request through that stage.
  const fs::path dir = TempDir("nan-scale");
  const fs::path model = MakeModel(dir, gguf::TensorType::kQ8_0, 3, 6);
  const std::string name = "blk.4.ffn_down.weight";  // stage 1's
  {
    auto reader = gguf::Reader::Open(model);
    ASSERT_TRUE(reader.ok());
    const gguf::TensorInfo* t = reader->FindTensor(name);
    ASSERT_NE(t, nullptr);
    const long row_bytes = static_cast<long>(t->n_bytes / static_cast<uint64_t>(t->ne[1]));
    const long at = static_cast<long>(reader->data_offset() + t->offset) + 37 * row_bytes + 34;  // row 37, block 1: d
    std::FILE* f = std::fopen(model.c_str(), "r+b");
    ASSERT_NE(f, nullptr);
    const uint16_t nan = 0x7e00;
    ASSERT_EQ(std::fseek(f, at, SEEK_SET), 0);
    ASSERT_EQ(std::fwrite(&nan, 2, 1, f), 1u);
    std::fclose(f);
  }
  CompileOptions o;
  o.model = model;
  o.out_dir = dir / "out";
  o.stages = 2;
  o.layer_counts = {3, 3};
  o.progress = false;
  auto r = Compile(o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("tensor " + name +
                                      ": block 1 of row 37 has a scale d that is not a finite number (f16 0x7e00); "
                                      "the file is corrupt"),
            std::string::npos)
      << r.status().message();
  EXPECT_FALSE(fs::exists(ShardPath(dir / "out", 1)));
  fs::remove_all(dir);
}

}  // namespace
}  // namespace daisy::shard
