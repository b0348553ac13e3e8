// Perplexity's windows and sums, checked against teacher-forced scores of the same chunks, and
// the KL divergence against a base (zero against itself, positive against another quant).
#include "runtime/perplexity.h"

#include <gtest/gtest.h>

#include <cmath>

#include "runtime/generate.h"
#include "testing/fixtures.h"

namespace daisy::runtime {
namespace {

struct Models {
  daisy::testing::TempDir dir{"ppl-test"};
  std::unique_ptr<model::Model> f32, q8;
  Models() {
    f32 = model::Model::Load(daisy::testing::MakeModel({.type = gguf::TensorType::kF32, .seed = 4}, dir / "f32.gguf"))
              .value();
    q8 = model::Model::Load(daisy::testing::MakeModel({.type = gguf::TensorType::kQ8_0, .seed = 4}, dir / "q8.gguf"))
             .value();
  }
};

Models& Shared() {
  static Models m;
  return m;
}

// The scalar table: its log_sum_exp takes libm's exp in double, as Perplexity's own normaliser does,
// so the two sums agree to 1e-9. A SIMD table's normaliser is only within a few 1e-7 (kernels/ops.h):
// with the AVX2 table on a Zen 3 host the two means differed by 1.8e-9.
TEST(Perplexity, ChunksAreScoredAsLlamaPerplexityDoes) {
  ThreadPool pool(2);
  const int ctx = 16;
  const kernels::KernelTable& scalar = kernels::ScalarKernels();
  Stage stage(*Shared().f32, {.max_batch_rows = 8, .seq_capacity = ctx, .max_seqs = 1}, scalar, pool);
  const std::vector<int32_t> tokens = daisy::testing::RandomTokens(3 * ctx + 5, 11, 250);
  const int32_t bos = 1;
  auto r = Perplexity(stage, nullptr, tokens, {.n_ctx = ctx, .batch = 8, .bos = bos});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->chunks, 3);
  EXPECT_EQ(r->scored, 3 * (ctx - ctx / 2 - 1));
  EXPECT_FALSE(r->has_base);
  // The same sums from teacher-forced scores of each chunk (BOS first), positions ctx/2 .. ctx-2.
  double nll = 0;
  for (int c = 0; c < 3; ++c) {
    std::vector<int32_t> chunk(tokens.begin() + c * ctx, tokens.begin() + (c + 1) * ctx);
    chunk[0] = bos;
    Stage fresh(*Shared().f32, {.max_batch_rows = 8, .seq_capacity = ctx, .max_seqs = 1}, scalar, pool);
    auto s = Score(fresh, 0, chunk, 1, 8);
    ASSERT_TRUE(s.ok());
    for (int j = ctx / 2; j < ctx - 1; ++j) nll -= (*s)[j].next_logprob;
  }
  EXPECT_NEAR(r->nll, nll / static_cast<double>(r->scored), 1e-9);
  EXPECT_NEAR(r->ppl, std::exp(r->nll), 1e-9 * r->ppl);
  ASSERT_EQ(r->running_ppl.size(), 3u);
  EXPECT_EQ(r->running_ppl.back(), r->ppl);
  // At most --chunks.
  auto one = Perplexity(stage, nullptr, tokens, {.n_ctx = ctx, .batch = 8, .max_chunks = 1, .bos = bos});
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one->chunks, 1);
}

TEST(Perplexity, KlAgainstABase) {
  ThreadPool pool(2);
  const int ctx = 16;
  const StageOptions so{.max_batch_rows = 16, .seq_capacity = ctx, .max_seqs = 1};
  Stage f32(*Shared().f32, so, kernels::BestKernels(), pool);
  Stage f32_again(*Shared().f32, so, kernels::BestKernels(), pool);
  Stage q8(*Shared().q8, so, kernels::BestKernels(), pool);
  const std::vector<int32_t> tokens = daisy::testing::RandomTokens(2 * ctx, 12, 250);
  auto self = Perplexity(f32, &f32_again, tokens, {.n_ctx = ctx, .batch = 16});
  ASSERT_TRUE(self.ok());
  EXPECT_EQ(self->kl_mean, 0.0);
  EXPECT_EQ(self->kl_max, 0.0);
  EXPECT_EQ(self->same_top, 1.0);
  EXPECT_EQ(self->base_ppl, self->ppl);
  auto quant = Perplexity(q8, &f32, tokens, {.n_ctx = ctx, .batch = 16});
  ASSERT_TRUE(quant.ok());
  EXPECT_GT(quant->kl_mean, 0.0);
  EXPECT_LT(quant->kl_mean, 0.1);  // q8_0 stays close to f32
  EXPECT_GE(quant->kl_max, quant->kl_p99);
  EXPECT_GE(quant->kl_p99, quant->kl_median);
  EXPECT_EQ(quant->base_ppl, self->ppl);
}

TEST(Perplexity, BadRequestsAreRefused) {
  ThreadPool pool(1);
  Stage stage(*Shared().f32, {.max_batch_rows = 8, .seq_capacity = 16, .max_seqs = 1}, kernels::BestKernels(), pool);
  const std::vector<int32_t> tokens = daisy::testing::RandomTokens(31, 1, 250);
  auto shortr = Perplexity(stage, nullptr, tokens, {.n_ctx = 16, .batch = 8});
  ASSERT_FALSE(shortr.ok());
  EXPECT_NE(shortr.status().message().find("the text has 31 tokens; perplexity with a context of 16 needs at least 32"),
            std::string::npos) << shortr.status().message();
  auto wide = Perplexity(stage, nullptr, daisy::testing::RandomTokens(64, 1, 250), {.n_ctx = 32, .batch = 8});
  ASSERT_FALSE(wide.ok());
  EXPECT_NE(wide.status().message().find("holds 16 positions"), std::string::npos) << wide.status().message();
}

}  // namespace
}  // namespace daisy::runtime
