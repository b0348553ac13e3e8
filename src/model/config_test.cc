// The model description: read from a family's keys and from a shard's description (one
// reader, both ways), written back, and the errors for what daisy does not run.
#include "model/config.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "model/arch.h"
#include "model/generator.h"
#include "model/model.h"
#include "model/tensors.h"
#include "tokenizer/hf_import.h"

namespace daisy::model {
namespace {

std::filesystem::path Temp(const std::string& name) {
  return std::filesystem::temp_directory_path() / (name + "-" + std::to_string(::getpid()) + ".gguf");
}

// Writes a GGUF with `keys` and one token_embd tensor of `vocab` rows; returns its reader.
Result<gguf::Reader> WriteKeys(const std::string& name, const std::function<void(gguf::Writer&)>& keys,
                               int vocab = 32, int d_model = 64) {
  const auto path = Temp(name);
  DAISY_ASSIGN_OR_RETURN(gguf::Writer w, gguf::Writer::Create(path));
  keys(w);
  const int64_t ne[2] = {d_model, vocab};
  DAISY_RETURN_IF_ERROR(w.AddTensor("token_embd.weight", gguf::TensorType::kF32, ne));
  std::vector<uint8_t> zeros(static_cast<size_t>(vocab) * d_model * 4);
  DAISY_RETURN_IF_ERROR(w.WriteTensorData(zeros));
  DAISY_RETURN_IF_ERROR(w.Finish().status());
  auto r = gguf::Reader::Open(path);
  std::filesystem::remove(path);  // the mapping stays valid
  return r;
}

ModelConfig Tiny() {
  ModelConfig c = FindShape("tiny")->config;
  c.n_vocab = 32;
  EXPECT_TRUE(c.Resolve().ok());
  return c;
}

TEST(ModelConfig, ReadsTheFamilyKeysThroughTheArchitectureTable) {
  const ModelConfig want = Tiny();
  auto r = WriteKeys("cfg-family", [&](gguf::Writer& w) {
    w.AddString("general.architecture", "llama");
    ASSERT_TRUE(want.WriteFamilyKeys(w).ok());
  });
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  auto c = ModelConfig::FromGguf(*r);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->arch, "llama");
  EXPECT_EQ(c->d_model, 64);
  EXPECT_EQ(c->head_dim, 16);
  EXPECT_EQ(c->n_vocab, 32);
  EXPECT_TRUE(c->tied_embeddings);  // no output.weight
  EXPECT_EQ(c->rope_mode, kernels::RopeMode::kNorm);
  ASSERT_EQ(c->layers.size(), 2u);
  EXPECT_EQ(c->layers[1].rope_theta, want.rope_theta);
  EXPECT_EQ(c->layers[1].sliding_window, 0);
  EXPECT_TRUE(c->CheckSupported().ok());
  EXPECT_FALSE(HasDescription(*r));
}

TEST(ModelConfig, HeadDimFromItsOwnKey) {
  ModelConfig want = Tiny();
  want.head_dim = 32;  // q_dim 128 != d_model 64, as Qwen3 and Gemma files have it
  auto r = WriteKeys("cfg-headdim", [&](gguf::Writer& w) {
    w.AddString("general.architecture", "llama");
    ASSERT_TRUE(want.WriteFamilyKeys(w).ok());
  });
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->GetUint("llama.attention.key_length").value(), 32u);
  auto c = ModelConfig::FromGguf(*r);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->head_dim, 32);
  EXPECT_EQ(c->q_dim(), 128);
}

TEST(ModelConfig, DescriptionRoundTripsEveryField) {
  ModelConfig want = Tiny();
  want.rope_mode = kernels::RopeMode::kNeox;
  want.tied_embeddings = false;
  want.layers[0] = {10000.f, 512};
  want.layers[1] = {1000000.f, 0};
  want.logit_softcap = 30.f;
  auto r = WriteKeys("cfg-desc", [&](gguf::Writer& w) { want.WriteDescription(w); });
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(HasDescription(*r));
  EXPECT_EQ(r->Find("llama.block_count"), nullptr);
  auto c = ModelConfig::FromGguf(*r);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->rope_mode, kernels::RopeMode::kNeox);
  EXPECT_FALSE(c->tied_embeddings);  // from the description, not from the tensors
  EXPECT_EQ(c->layers[0].sliding_window, 512);
  EXPECT_EQ(c->layers[1].rope_theta, 1000000.f);
  EXPECT_EQ(c->logit_softcap, 30.f);
  // A feature the recipe lacks is named when a model would be run.
  const Status s = c->CheckSupported();
  EXPECT_EQ(s.code(), StatusCode::kUnimplemented);
  EXPECT_NE(s.message().find("logit soft-cap"), std::string::npos) << s.message();
}

TEST(ModelConfig, RefusesUnknownArchitecturesAndMalformedDescriptions) {
  auto r = WriteKeys("cfg-arch", [](gguf::Writer& w) { w.AddString("general.architecture", "mamba"); });
  ASSERT_TRUE(r.ok());
  auto c = ModelConfig::FromGguf(*r);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(c.status().message().find("architecture 'mamba' is not supported (daisy runs: llama)"),
            std::string::npos) << c.status().message();
  // Per-layer arrays of the wrong length, and a window out of range.
  ModelConfig bad = Tiny();
  auto short_layers = WriteKeys("cfg-short", [&](gguf::Writer& w) {
    bad.WriteDescription(w);
  });
  ASSERT_TRUE(short_layers.ok());
  bad.layers.pop_back();
  auto r2 = WriteKeys("cfg-short2", [&](gguf::Writer& w) { bad.WriteDescription(w); });
  ASSERT_TRUE(r2.ok());
  auto c2 = ModelConfig::FromGguf(*r2);
  ASSERT_FALSE(c2.ok());
  EXPECT_NE(c2.status().message().find("per-layer attention for 1 and 1 layers, the model has 2"), std::string::npos)
      << c2.status().message();
  ModelConfig neg = Tiny();
  neg.layers[0].sliding_window = -3;
  auto r3 = WriteKeys("cfg-neg", [&](gguf::Writer& w) { neg.WriteDescription(w); });
  ASSERT_TRUE(r3.ok());
  EXPECT_FALSE(ModelConfig::FromGguf(*r3).ok());
}

TEST(ModelConfig, FamilyKeysCannotSayWhatTheFamilyLacks) {
  ModelConfig c = Tiny();
  c.layers[1].sliding_window = 64;
  EXPECT_FALSE(c.CheckFamilyKeys().ok());
  c = Tiny();
  c.rope_mode = kernels::RopeMode::kNeox;  // not Llama's
  EXPECT_FALSE(c.CheckFamilyKeys().ok());
  EXPECT_TRUE(Tiny().CheckFamilyKeys().ok());
}

TEST(TensorBinding, AnUnknownLayerTensorIsRefusedByName) {
  // A generated model plus one stray tensor in layer 1: the loader and the compiler's check
  // both refuse it, naming it.
  const auto path = Temp("cfg-stray");
  GenerateOptions o;
  o.config = FindShape("tiny")->config;
  ASSERT_TRUE(GenerateModel(o, tokenizer::BuiltinByteVocab(), path).ok());
  auto src = gguf::Reader::Open(path);
  ASSERT_TRUE(src.ok());
  const auto stray = Temp("cfg-stray2");
  {
    auto w = gguf::Writer::Create(stray);
    ASSERT_TRUE(w.ok());
    for (const gguf::MetadataEntry& e : src->metadata()) {
      if (e.key != "general.alignment") w->AddValue(e.key, e.value);
    }
    for (const gguf::TensorInfo& t : src->tensors()) {
      ASSERT_TRUE(w->AddTensor(t.name, t.type, std::span<const int64_t>(t.ne, t.n_dims)).ok());
    }
    const int64_t ne[1] = {64};
    ASSERT_TRUE(w->AddTensor("blk.1.attn_q_norm.weight", gguf::TensorType::kF32, ne).ok());
    for (const gguf::TensorInfo& t : src->tensors()) ASSERT_TRUE(w->WriteTensorData(src->TensorData(t)).ok());
    std::vector<uint8_t> bias(64 * 4);
    ASSERT_TRUE(w->WriteTensorData(bias).ok());
    ASSERT_TRUE(w->Finish().ok());
  }
  auto m = Model::Load(stray);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("tensor blk.1.attn_q_norm.weight is not one daisy's llama recipe uses"),
            std::string::npos) << m.status().message();
  // A stage holding only layer 0 does not load layer 1 and so does not mind.
  EXPECT_TRUE(Model::Load(stray, {.first_layer = 0, .last_layer = 1, .head = false}).ok());
  auto r = gguf::Reader::Open(stray);
  ASSERT_TRUE(r.ok());
  const Status names = CheckTensorNames(*r, ModelConfig::FromGguf(*r).value());
  EXPECT_NE(names.message().find("blk.1.attn_q_norm.weight"), std::string::npos) << names.message();
  EXPECT_TRUE(CheckTensorNames(*src, ModelConfig::FromGguf(*src).value()).ok());
  std::filesystem::remove(path);
  std::filesystem::remove(stray);
}

TEST(TensorBinding, LayerOf) {
  EXPECT_EQ(LayerOf("blk.12.attn_q.weight"), 12);
  EXPECT_EQ(LayerOf("blk.0.x"), 0);
  EXPECT_EQ(LayerOf("blk.x.attn_q.weight"), -1);
  EXPECT_EQ(LayerOf("blk.3"), -1);
  EXPECT_EQ(LayerOf("token_embd.weight"), -1);
}

}  // namespace
}  // namespace daisy::model
