#include "gguf/reader.h"

#include <gtest/gtest.h>

#include "gguf/test_util.h"
#include "gguf/writer.h"

namespace daisy::gguf {
namespace {

using testing::MakeSampleGguf;

TEST(GgufRoundTrip, MetadataOfEveryType) {
  const std::vector<uint8_t> bytes = MakeSampleGguf();
  auto r = Reader::FromBytes(bytes, "sample.gguf");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->version(), 3u);
  EXPECT_EQ(r->alignment(), kDefaultAlignment);
  EXPECT_EQ(r->GetString("general.architecture").value(), "llama");
  EXPECT_EQ(r->GetUint("llama.block_count").value(), 2u);
  EXPECT_EQ(r->GetInt("test.int32").value(), -7);
  EXPECT_EQ(r->GetUint("test.uint64").value(), 1ull << 40);
  EXPECT_EQ(r->GetFloat("test.float32").value(), 0.5);
  EXPECT_EQ(r->GetBool("test.bool").value(), true);
  auto tokens = r->GetStringArray("tokenizer.ggml.tokens");
  ASSERT_TRUE(tokens.ok());
  ASSERT_EQ(tokens->size(), 4u);
  EXPECT_EQ((*tokens)[1], "");
  EXPECT_EQ((*tokens)[2], "\xe4\xb8\x96");
  EXPECT_EQ(r->GetIntArray("tokenizer.ggml.token_type").value(),
            (std::vector<int64_t>{1, 1, 1, 3}));
  EXPECT_EQ(r->GetFloatArray("tokenizer.ggml.scores").value(),
            (std::vector<double>{0, -1, -2, -3}));
}

TEST(GgufRoundTrip, TypedGettersExplainMismatches) {
  const std::vector<uint8_t> bytes = MakeSampleGguf();
  auto r = Reader::FromBytes(bytes, "sample.gguf");
  ASSERT_TRUE(r.ok());
  auto missing = r->GetUint("llama.nope");
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(missing.status().message(), "sample.gguf: metadata key 'llama.nope' is missing");
  auto wrong = r->GetString("llama.block_count");
  EXPECT_EQ(wrong.status().message(),
            "sample.gguf: metadata key 'llama.block_count' is uint32, expected string");
  EXPECT_EQ(r->GetUint("test.int32").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r->GetStringArray("tokenizer.ggml.scores").status().message(),
            "sample.gguf: metadata key 'tokenizer.ggml.scores' is array[float32; 4], expected "
            "array of strings");
}

TEST(GgufRoundTrip, TensorsAreZeroCopyViews) {
  const std::vector<uint8_t> bytes = MakeSampleGguf();
  auto r = Reader::FromBytes(bytes, "sample.gguf");
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->tensors().size(), 3u);
  const TensorInfo* a = r->FindTensor("a.weight");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->n_dims, 2);
  EXPECT_EQ(a->ne[0], 8);
  EXPECT_EQ(a->ne[1], 3);
  EXPECT_EQ(a->n_bytes, 96u);
  auto data = r->TensorData(*a);
  EXPECT_EQ(data.data(), bytes.data() + r->data_offset() + a->offset);
  for (size_t i = 0; i < data.size(); ++i) ASSERT_EQ(data[i], static_cast<uint8_t>(i));
  const TensorInfo* b = r->FindTensor("b.weight");
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->offset % 32, 0u);
  auto bd = r->TensorData(*b);
  for (size_t i = 0; i < bd.size(); ++i) ASSERT_EQ(bd[i], static_cast<uint8_t>(3 * i));
  const TensorInfo* c = r->FindTensor("c.weight");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->type, TensorType::kQ8_0);
  EXPECT_EQ(c->n_bytes, 68u);
  auto cd = r->TensorData(*c);
  for (size_t i = 0; i < cd.size(); ++i) ASSERT_EQ(cd[i], static_cast<uint8_t>(7 * i));
  EXPECT_EQ(r->FindTensor("d.weight"), nullptr);
}

TEST(GgufRoundTrip, CustomAlignment) {
  const std::vector<uint8_t> bytes = MakeSampleGguf(64);
  auto r = Reader::FromBytes(bytes, "aligned.gguf");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->alignment(), 64u);
  EXPECT_EQ(r->data_offset() % 64, 0u);
  for (const TensorInfo& t : r->tensors()) EXPECT_EQ(t.offset % 64, 0u);
}

TEST(GgufRoundTrip, ReadsVersion2) {
  std::vector<uint8_t> bytes = MakeSampleGguf();
  bytes[4] = 2;  // v2 and v3 share the layout for little-endian files
  auto r = Reader::FromBytes(bytes, "v2.gguf");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->version(), 2u);
}

TEST(GgufRoundTrip, OpenMapsAFile) {
  const auto path = testing::TempPath("open");
  {
    auto w = Writer::Create(path);
    ASSERT_TRUE(w.ok());
    w->AddString("general.name", "x");
    ASSERT_TRUE(w->Finish().ok());
  }
  auto r = Reader::Open(path);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->GetString("general.name").value(), "x");
  EXPECT_TRUE(r->tensors().empty());
  std::filesystem::remove(path);
  auto gone = Reader::Open(path);
  EXPECT_EQ(gone.status().code(), StatusCode::kNotFound);
}

TEST(GgufWriter, RejectsMisuse) {
  const auto path = testing::TempPath("misuse");
  auto w = Writer::Create(path);
  ASSERT_TRUE(w.ok());
  w->AddUint32("k", 1);
  w->AddUint32("k", 2);
  const int64_t ne[] = {33};
  EXPECT_FALSE(w->AddTensor("q", TensorType::kQ4_0, ne).ok());  // not a multiple of 32
  const int64_t ok_ne[] = {4};
  ASSERT_TRUE(w->AddTensor("t", TensorType::kF32, ok_ne).ok());
  EXPECT_FALSE(w->AddTensor("t", TensorType::kF32, ok_ne).ok());
  const uint8_t data[16] = {};
  auto s = w->WriteTensorData(data);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("duplicate metadata key 'k'"), std::string::npos) << s.ToString();
}

TEST(GgufWriter, IncompleteTensorFailsAndLeavesNoFile) {
  const auto path = testing::TempPath("incomplete");
  {
    auto w = Writer::Create(path);
    ASSERT_TRUE(w.ok());
    const int64_t ne[] = {4};
    ASSERT_TRUE(w->AddTensor("t", TensorType::kF32, ne).ok());
    const uint8_t data[8] = {};
    ASSERT_TRUE(w->WriteTensorData(data).ok());
    auto r = w->Finish();
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("tensor 't' got 8 of its 16 bytes"), std::string::npos);
  }
  EXPECT_FALSE(std::filesystem::exists(path));
}

}  // namespace
}  // namespace daisy::gguf
