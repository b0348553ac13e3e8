#include "model/generator.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "gguf/reader.h"
#include "kernels/quant/q8_0.h"
#include "kernels/quant/q4_0.h"
#include "kernels/quant/float_formats.h"
#include "tokenizer/hf_import.h"
#include "tokenizer/tokenizer.h"

namespace daisy::model {
namespace {

std::filesystem::path Temp(const std::string& name) {
  return std::filesystem::temp_directory_path() /
         (name + "-" + std::to_string(::getpid()) + ".gguf");
}

Result<gguf::Reader> Generate(const std::string& shape, gguf::TensorType type, uint64_t seed,
                              const std::filesystem::path& path, int layers = 0) {
  auto s = FindShape(shape);
  if (!s.ok()) return s.status();
  GenerateOptions o;
  o.config = s->config;
  if (layers > 0) o.config.n_layers = layers;
  o.type = type;
  o.seed = seed;
  DAISY_RETURN_IF_ERROR(GenerateModel(o, tokenizer::BuiltinByteVocab(), path));
  return gguf::Reader::Open(path);
}

TEST(GenModel, WritesAReadableModel) {
  const auto path = Temp("gen-tiny");
  auto r = Generate("tiny", gguf::TensorType::kQ8_0, 1, path);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  auto config = ModelConfig::FromGguf(*r);
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->d_model, 64);
  EXPECT_EQ(config->n_layers, 2);
  EXPECT_EQ(config->n_heads, 4);
  EXPECT_EQ(config->n_kv_heads, 2);
  EXPECT_FALSE(config->tied_embeddings);
  EXPECT_EQ(r->GetUint("general.file_type").value(), 7u);
  // 2 + 9 per layer + output norm + output.
  EXPECT_EQ(r->tensors().size(), 2u + 9u * 2u + 1u);
  EXPECT_EQ(r->FindTensor("blk.1.ffn_down.weight")->type, gguf::TensorType::kQ8_0);
  EXPECT_EQ(r->FindTensor("blk.1.ffn_norm.weight")->type, gguf::TensorType::kF32);
  auto tok = tokenizer::Tokenizer::FromGguf(*r);
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  EXPECT_EQ(tok->n_vocab(), config->n_vocab);
  std::filesystem::remove(path);
}

TEST(GenModel, SameSeedSameBytesOtherSeedOtherBytes) {
  const auto a = Temp("gen-a"), b = Temp("gen-b"), c = Temp("gen-c");
  auto ra = Generate("tiny", gguf::TensorType::kQ4_0, 5, a);
  auto rb = Generate("tiny", gguf::TensorType::kQ4_0, 5, b);
  auto rc = Generate("tiny", gguf::TensorType::kQ4_0, 6, c);
  ASSERT_TRUE(ra.ok() && rb.ok() && rc.ok());
  const auto* ta = ra->FindTensor("blk.0.attn_q.weight");
  const auto da = ra->TensorData(*ta);
  const auto db = rb->TensorData(*rb->FindTensor("blk.0.attn_q.weight"));
  const auto dc = rc->TensorData(*rc->FindTensor("blk.0.attn_q.weight"));
  EXPECT_TRUE(std::equal(da.begin(), da.end(), db.begin(), db.end()));
  EXPECT_FALSE(std::equal(da.begin(), da.end(), dc.begin(), dc.end()));
  for (const auto& p : {a, b, c}) std::filesystem::remove(p);
}

TEST(GenModel, WeightsHaveTheIntendedScale) {
  const auto path = Temp("gen-scale");
  auto r = Generate("small", gguf::TensorType::kF32, 3, path);
  ASSERT_TRUE(r.ok());
  const auto check_std = [&](const char* name, double want) {
    const auto* t = r->FindTensor(name);
    ASSERT_NE(t, nullptr) << name;
    const auto data = r->TensorData(*t);
    const float* x = reinterpret_cast<const float*>(data.data());
    double sum = 0, sum2 = 0;
    for (uint64_t i = 0; i < t->n_elements; ++i) {
      sum += x[i];
      sum2 += double(x[i]) * x[i];
    }
    const double n = static_cast<double>(t->n_elements);
    EXPECT_NEAR(sum / n, 0.0, want * 0.05) << name;
    EXPECT_NEAR(std::sqrt(sum2 / n), want, want * 0.05) << name;
  };
  check_std("blk.0.attn_q.weight", 1.0 / std::sqrt(256.0));
  check_std("blk.3.attn_output.weight", 1.0 / std::sqrt(4.0) / std::sqrt(256.0));
  check_std("output.weight", 8.0 / std::sqrt(256.0));
  check_std("token_embd.weight", 1.0);
  std::filesystem::remove(path);
}

TEST(GenModel, Llama31RopeFactorsFollowTheReferenceFormula) {
  auto shape = FindShape("llama-3.1-8b");
  ASSERT_TRUE(shape.ok());
  const std::vector<float> f = Llama3RopeFactors(shape->config);
  ASSERT_EQ(f.size(), 64u);
  EXPECT_EQ(f[0], 1.f);    // highest frequencies untouched
  EXPECT_EQ(f[63], 8.f);   // lowest frequencies divided by the factor
  for (size_t i = 1; i < f.size(); ++i) EXPECT_GE(f[i], f[i - 1]);  // smooth ramp between
}

TEST(GenModel, RejectsUnsupportedShapesAndTypes) {
  auto s = FindShape("llama-9b");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("unknown shape 'llama-9b'"), std::string::npos);
  GenerateOptions o;
  o.config = FindShape("tiny")->config;
  o.type = gguf::TensorType::kIQ2_XXS;
  Status st = GenerateModel(o, tokenizer::BuiltinByteVocab(), Temp("never"));
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("iq2_xxs is not supported"), std::string::npos) << st.ToString();
}

// A row the type's block does not divide falls back as llama-quantize's does: q4_K to q5_0,
// and to f16 when even 32 does not divide it.
TEST(GenModel, RowsTheBlockDoesNotDivideFallBack) {
  GenerateOptions o;
  o.config = FindShape("small")->config;
  o.config.n_layers = 1;
  o.config.d_ff = 800;  // ffn_down rows: not a multiple of 256, but of 32
  o.type = gguf::TensorType::kQ4_K;
  const auto path = Temp("fallback.gguf");
  ASSERT_TRUE(GenerateModel(o, tokenizer::BuiltinByteVocab(), path).ok());
  auto r = gguf::Reader::Open(path);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->FindTensor("blk.0.ffn_down.weight")->type, gguf::TensorType::kQ5_0);
  EXPECT_EQ(r->FindTensor("blk.0.ffn_up.weight")->type, gguf::TensorType::kQ4_K);
  o.type = gguf::TensorType::kQ4_0;
  o.config.d_ff = 48 + 256;  // 304: not a multiple of 32
  ASSERT_TRUE(GenerateModel(o, tokenizer::BuiltinByteVocab(), path).ok());
  r = gguf::Reader::Open(path);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->FindTensor("blk.0.ffn_down.weight")->type, gguf::TensorType::kF16);
}

}  // namespace
}  // namespace daisy::model
