// The model description: read from a family's keys and from a shard's description (one
// reader, both ways), written back, and the errors for what daisy does not run.
#include "model/config.h"

#include <gtest/gtest.h>

#include <cmath>
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
// `vectors`: more f32 tensors of that many elements each (named), zero-filled.
Result<gguf::Reader> WriteKeys(const std::string& name, const std::function<void(gguf::Writer&)>& keys,
                               int vocab = 32, int d_model = 64,
                               const std::vector<std::pair<std::string, int64_t>>& vectors = {}) {
  const auto path = Temp(name);
  DAISY_ASSIGN_OR_RETURN(gguf::Writer w, gguf::Writer::Create(path));
  keys(w);
  const int64_t ne[2] = {d_model, vocab};
  DAISY_RETURN_IF_ERROR(w.AddTensor("token_embd.weight", gguf::TensorType::kF32, ne));
  for (const auto& [tensor, n] : vectors) {
    const int64_t vne[1] = {n};
    DAISY_RETURN_IF_ERROR(w.AddTensor(tensor, gguf::TensorType::kF32, vne));
  }
  std::vector<uint8_t> zeros(static_cast<size_t>(vocab) * d_model * 4);
  DAISY_RETURN_IF_ERROR(w.WriteTensorData(zeros));
  for (const auto& [tensor, n] : vectors) {
    DAISY_RETURN_IF_ERROR(w.WriteTensorData(std::vector<uint8_t>(static_cast<size_t>(n) * 4)));
  }
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
  want.layers[0] = {10000.f, 1.0f, 512};
  want.layers[1] = {1000000.f, 0.125f, 0};
  want.logit_softcap = 30.f;
  want.attn_q_scale = 0.0625f;
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
  EXPECT_EQ(c->layers[1].rope_freq_scale, 0.125f);
  EXPECT_EQ(c->layers[0].rope_freq_scale, 1.0f);
  EXPECT_EQ(c->attn_q_scale, 0.0625f);
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
  EXPECT_NE(c.status().message().find("architecture 'mamba' is not supported (daisy runs: llama, qwen2, qwen3, gemma3, phi3)"),
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
  EXPECT_NE(c2.status().message().find("per-layer attention for 1, 1 and 1 layers, the model has 2"), std::string::npos)
      << c2.status().message();
  ModelConfig neg = Tiny();
  neg.layers[0].sliding_window = -3;
  auto r3 = WriteKeys("cfg-neg", [&](gguf::Writer& w) { neg.WriteDescription(w); });
  ASSERT_TRUE(r3.ok());
  EXPECT_FALSE(ModelConfig::FromGguf(*r3).ok());
}

TEST(ModelConfig, ALayerCountBeyondAnyModelIsRefusedBeforeAnythingIsSizedFromIt) {
  // A malformed file's block_count sizes per-layer tables: millions of layers would take
  // gigabytes before the first missing tensor is noticed (the GGUF fuzzer found one).
  ModelConfig want = Tiny();
  want.n_layers = kMaxLayers + 1;
  want.layers.clear();  // UniformLayers() has none for a count out of range
  auto r = WriteKeys("cfg-layers", [&](gguf::Writer& w) {
    w.AddString("general.architecture", "llama");
    ASSERT_TRUE(want.WriteFamilyKeys(w).ok());
  });
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  auto c = ModelConfig::FromGguf(*r);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(c.status().message().find("llama.block_count = 4097 is out of range (1..4096 layers)"), std::string::npos)
      << c.status().message();
  EXPECT_FALSE(want.Validate().ok());
  want.n_layers = kMaxLayers;
  want.layers = want.UniformLayers();
  EXPECT_EQ(want.layers.size(), static_cast<size_t>(kMaxLayers));
  EXPECT_TRUE(want.Validate().ok());
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

namespace daisy::model {
namespace {

// A family's keys as its converter writes them, read back: what the family implies included.
Result<ModelConfig> RoundTripFamily(const std::string& name, const ModelConfig& want) {
  auto r = WriteKeys(name, [&](gguf::Writer& w) {
    w.AddString("general.architecture", want.arch);
    ASSERT_TRUE(want.WriteFamilyKeys(w).ok());
  });
  if (!r.ok()) return r.status();
  return ModelConfig::FromGguf(*r);
}

TEST(ModelConfig, FamiliesReadTheirOwnKeys) {
  // Gemma 3 1B: every sixth layer global (base 1e6), the others local over 512 positions with
  // base 10000; q scaled by 1 / sqrt(256).
  ModelConfig gemma = FindShape("gemma-3-1b")->config;
  gemma.n_vocab = 100;
  ASSERT_TRUE(gemma.Resolve().ok());
  auto g = RoundTripFamily("cfg-gemma3", gemma);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_EQ(g->arch, "gemma3");
  EXPECT_EQ(g->head_dim, 256);
  EXPECT_TRUE(g->embed_scale && g->qk_norm && g->post_norms);
  EXPECT_EQ(g->activation, Activation::kGeluTanh);
  EXPECT_EQ(g->rope_mode, kernels::RopeMode::kNeox);
  EXPECT_EQ(g->attn_q_scale, 1.0f / 16);
  ASSERT_EQ(g->layers.size(), 26u);
  for (int l = 0; l < 26; ++l) {
    const bool global = l % 6 == 5;
    EXPECT_EQ(g->layers[l].sliding_window, global ? 0 : 512) << l;
    EXPECT_EQ(g->layers[l].rope_theta, global ? 1e6f : 10000.f) << l;
  }
  EXPECT_TRUE(g->CheckSupported().ok());
  // Gemma 3 4B: linear RoPE scaling (factor 8) on the global layers only.
  ModelConfig gemma4b = FindShape("gemma-3-4b")->config;
  gemma4b.n_vocab = 100;
  ASSERT_TRUE(gemma4b.Resolve().ok());
  auto g4 = RoundTripFamily("cfg-gemma3-4b", gemma4b);
  ASSERT_TRUE(g4.ok()) << g4.status().ToString();
  EXPECT_EQ(g4->layers[5].rope_freq_scale, 0.125f);
  EXPECT_EQ(g4->layers[4].rope_freq_scale, 1.0f);
  EXPECT_EQ(g4->layers[4].sliding_window, 1024);
  // Qwen3: head_dim from its key, q/k norms, NeoX; Qwen2: NeoX; Phi-3: q scaled.
  ModelConfig qwen3 = FindShape("qwen3-0.6b")->config;
  ASSERT_TRUE(qwen3.Resolve().ok());
  auto q3 = RoundTripFamily("cfg-qwen3", qwen3);
  ASSERT_TRUE(q3.ok()) << q3.status().ToString();
  EXPECT_EQ(q3->head_dim, 128);
  EXPECT_TRUE(q3->qk_norm);
  EXPECT_FALSE(q3->post_norms);
  EXPECT_EQ(q3->rms_eps, 1e-6f);
  ModelConfig phi = FindShape("phi-3-mini")->config;
  ASSERT_TRUE(phi.Resolve().ok());
  auto p3 = RoundTripFamily("cfg-phi3", phi);
  ASSERT_TRUE(p3.ok()) << p3.status().ToString();
  EXPECT_EQ(p3->attn_q_scale, 1.0f / std::sqrt(96.0f));
  EXPECT_EQ(p3->n_kv_heads, 32);
  // A window Qwen2's keys cannot state is refused when writing.
  ModelConfig windowed = FindShape("qwen2.5-0.5b")->config;
  windowed.sliding_window = 64;
  windowed.layers.clear();
  ASSERT_TRUE(windowed.Resolve().ok());
  EXPECT_FALSE(windowed.CheckFamilyKeys().ok());
}

TEST(ModelConfig, LongRopeFromPhi3Files) {
  // Phi-3.5 mini: LongRoPE from 4,096 to 131,072 positions; the attention factor as its
  // converter computes it, sqrt(1 + ln 32 / ln 4096).
  ModelConfig phi = FindShape("phi-3.5-mini")->config;
  ASSERT_TRUE(phi.Resolve().ok());
  EXPECT_TRUE(phi.longrope);
  EXPECT_NEAR(phi.rope_attn_factor, std::sqrt(1 + std::log(32.0) / std::log(4096.0)), 1e-6);
  EXPECT_NEAR(phi.rope_attn_factor, 1.1902, 1e-4);  // the value in Phi-3.5-mini's GGUF
  const std::vector<std::pair<std::string, int64_t>> factors = {{std::string(kRopeFactorsLong), 48},
                                                               {std::string(kRopeFactorsShort), 48}};
  auto write = [&](const std::string& name, const ModelConfig& c, const std::vector<std::pair<std::string, int64_t>>& v) {
    return WriteKeys(name, [&](gguf::Writer& w) {
      w.AddString("general.architecture", c.arch);
      ASSERT_TRUE(c.WriteFamilyKeys(w).ok());
    }, 32064, 64, v);
  };
  auto r = write("cfg-longrope", phi, factors);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->GetUint("phi3.rope.scaling.original_context_length").value(), 4096u);
  auto c = ModelConfig::FromGguf(*r);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_TRUE(c->longrope);  // from the tensors
  EXPECT_EQ(c->rope_original_context, 4096);
  EXPECT_EQ(c->rope_attn_factor, phi.rope_attn_factor);
  EXPECT_FALSE(c->UsesLongRopeFactors(4096));
  EXPECT_TRUE(c->UsesLongRopeFactors(4097));
  // The description keeps both.
  auto d = WriteKeys("cfg-longrope-desc", [&](gguf::Writer& w) { c->WriteDescription(w); }, 32064, 64, factors);
  ASSERT_TRUE(d.ok());
  auto dc = ModelConfig::FromGguf(*d);
  ASSERT_TRUE(dc.ok()) << dc.status().ToString();
  EXPECT_TRUE(dc->longrope);
  EXPECT_EQ(dc->rope_original_context, 4096);
  EXPECT_EQ(dc->rope_attn_factor, phi.rope_attn_factor);
  // One set without the other, and the factors in a family llama.cpp reads none for.
  auto half = write("cfg-longrope-half", phi, {factors[0]});
  ASSERT_TRUE(half.ok());
  auto hc = ModelConfig::FromGguf(*half);
  ASSERT_FALSE(hc.ok());
  EXPECT_NE(hc.status().message().find("rope_factors_long.weight without rope_factors_short.weight"), std::string::npos)
      << hc.status().message();
  ModelConfig qwen = FindShape("qwen2.5-0.5b")->config;
  ASSERT_TRUE(qwen.Resolve().ok());
  auto q = write("cfg-longrope-qwen", qwen, factors);
  ASSERT_TRUE(q.ok());
  auto qc = ModelConfig::FromGguf(*q);
  ASSERT_FALSE(qc.ok());
  EXPECT_EQ(qc.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(qc.status().message().find("for phi3 only"), std::string::npos) << qc.status().message();
}

TEST(ModelConfig, RefusesRopeScalingItCannotCompute) {
  ModelConfig c = FindShape("qwen2.5-0.5b")->config;
  ASSERT_TRUE(c.Resolve().ok());
  auto r = WriteKeys("cfg-yarn", [&](gguf::Writer& w) {
    w.AddString("general.architecture", "qwen2");
    ASSERT_TRUE(c.WriteFamilyKeys(w).ok());
    w.AddString("qwen2.rope.scaling.type", "yarn");
    w.AddFloat32("qwen2.rope.scaling.factor", 4.0f);
  });
  ASSERT_TRUE(r.ok());
  auto got = ModelConfig::FromGguf(*r);
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(got.status().message().find("RoPE scaling 'yarn' is not supported"), std::string::npos)
      << got.status().message();
}

}  // namespace
}  // namespace daisy::model
