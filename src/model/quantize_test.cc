// daisy quantize: the file it writes is the one gen-model writes for the same weights in that
// mix (same types, same bytes), with the input's metadata and the file type set; bad inputs are
// refused; the error it reports is the error of the bytes it wrote.
#include "model/quantize.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>

#include "gguf/reader.h"
#include "kernels/quant/formats.h"
#include "model/generator.h"
#include "tokenizer/hf_import.h"

namespace daisy::model {
namespace {

namespace fs = std::filesystem;

fs::path Temp(const std::string& name) {
  return fs::temp_directory_path() / (name + "-" + std::to_string(::getpid()) + ".gguf");
}

fs::path Make(const std::string& name, const std::optional<QuantMix>& mix, gguf::TensorType type) {
  const fs::path path = Temp(name);
  GenerateOptions o;
  o.config = FindShape("small")->config;
  o.config.n_layers = 3;
  o.seed = 9;
  o.type = type;
  o.mix = mix;
  EXPECT_TRUE(GenerateModel(o, tokenizer::BuiltinByteVocab(), path).ok());
  return path;
}

TEST(Quantize, WritesWhatGenModelWritesForTheSameWeights) {
  const fs::path f32 = Make("q-f32", std::nullopt, gguf::TensorType::kF32);
  for (const char* name : {"q4_k_m", "q3_k_m", "iq4_xs", "q5_1"}) {
    const QuantMix mix = *FindQuantMix(name);
    const fs::path direct = Make(std::string("q-direct-") + name, mix, gguf::TensorType::kF32);
    const fs::path out = Temp(std::string("q-out-") + name);
    auto report = QuantizeModel({f32, out, mix, 2, nullptr});
    ASSERT_TRUE(report.ok()) << report.status().ToString();
    auto a = gguf::Reader::Open(direct);
    auto b = gguf::Reader::Open(out);
    ASSERT_TRUE(a.ok() && b.ok());
    ASSERT_EQ(a->tensors().size(), b->tensors().size());
    for (size_t i = 0; i < a->tensors().size(); ++i) {
      const gguf::TensorInfo& ta = a->tensors()[i];
      const gguf::TensorInfo& tb = b->tensors()[i];
      EXPECT_EQ(ta.name, tb.name);
      EXPECT_EQ(ta.type, tb.type) << name << " " << ta.name;
      const auto da = a->TensorData(ta), db = b->TensorData(tb);
      ASSERT_TRUE(std::equal(da.begin(), da.end(), db.begin(), db.end())) << name << " " << ta.name;
    }
    EXPECT_EQ(*b->GetUint("general.file_type"), mix.file_type);
    EXPECT_EQ(*b->GetString("general.name"), *a->GetString("general.name"));
    EXPECT_EQ(b->GetStringArray("tokenizer.ggml.tokens")->size(), a->GetStringArray("tokenizer.ggml.tokens")->size());
    // The norms are copied.
    EXPECT_EQ(report->quantised, 23) << name;  // 3 layers x 7 matrices, embeddings, head
    EXPECT_EQ(report->all.tensors, 23);
    EXPECT_GT(report->all.relative_rmse(), 0.001) << name;
    EXPECT_LT(report->all.relative_rmse(), 0.15) << name;
    fs::remove(direct);
    fs::remove(out);
  }
  // The error reported is that of the bytes written: q8_0's is far below q4_K's.
  const fs::path q8 = Temp("q-q8");
  auto r8 = QuantizeModel({f32, q8, *FindQuantMix("q8_0"), 1, nullptr});
  ASSERT_TRUE(r8.ok());
  EXPECT_EQ(r8->by_type.size(), 1u);
  EXPECT_LT(r8->all.relative_rmse(), 0.01);
  EXPECT_NEAR(r8->by_type.at("q8_0").bits_per_weight(), 8.5, 1e-9);
  // From a q8_0 file (an allowed input): same types as from f32, q8_0's error carried along.
  const fs::path from8 = Temp("q-from8");
  auto rk = QuantizeModel({q8, from8, *FindQuantMix("q6_k"), 2, nullptr});
  ASSERT_TRUE(rk.ok()) << rk.status().ToString();
  EXPECT_NEAR(rk->by_type.at("q6_K").bits_per_weight(), 6.5625, 1e-9);
  for (const fs::path& p : {f32, q8, from8}) fs::remove(p);
}

TEST(Quantize, ALowBitInputIsRefused) {
  const fs::path q4 = Make("q-q4", std::nullopt, gguf::TensorType::kQ4_K);
  const fs::path out = Temp("q-never");
  auto r = QuantizeModel({q4, out, *FindQuantMix("q3_k_m"), 1, nullptr});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("is q4_K; quantize from an f32, f16, bf16 or q8_0 file"), std::string::npos)
      << r.status().message();
  EXPECT_FALSE(fs::exists(out));
  EXPECT_FALSE(fs::exists(out.string() + ".partial"));
  // The same mix as the file's types: nothing to convert, the bytes are copied.
  auto same = QuantizeModel({q4, out, Pure(*FindQuantMix("q4_k_s")), 1, nullptr});
  ASSERT_TRUE(same.ok()) << same.status().ToString();
  EXPECT_EQ(same->quantised, 0);
  fs::remove(q4);
  fs::remove(out);
}

}  // namespace
}  // namespace daisy::model
