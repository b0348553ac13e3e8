// The forward pass. Against an independent reference (a plain forward in double written here from
// the model's weights): every kernel table, Llama and the description's other features (NeoX
// RoPE, per-layer RoPE bases, sliding windows). Batch invariance (design.md invariant 1), for
// every weight type and kernel table: a sequence's logits are bit-identical alone, batched with
// other sequences of different lengths, prefilled in different chunk sizes, decoded several rows
// at a time, and on 1 or 2 threads. Plus the KV cache's errors and rewind.
#include "runtime/stage.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <numbers>
#include <cstring>
#include <functional>
#include <filesystem>
#include <map>
#include <random>

#include "model/generator.h"
#include "model/tensors.h"
#include "kernels/quant/float_formats.h"
#include "runtime/sampler.h"
#include "testing/fixtures.h"

namespace daisy::runtime {
namespace {

struct Fixture {
  std::unique_ptr<model::Model> model;
};

// A tiny generated model of `type` (the mapping stays valid after the file is removed); the
// small shape, 2 layers, for types of 256-element super-blocks (tiny's rows are 64 wide).
// Other architectures: Gemma 3 on 7 layers (the sixth global, the others local over 4
// positions).
Fixture MakeModel(gguf::TensorType type, int kv_heads = 2, const std::string& arch = "llama") {
  static daisy::testing::TempDir dir("stage-test");
  const auto path =
      dir / (arch + "-" + std::string(gguf::Traits(type).name) + "-" + std::to_string(kv_heads) + ".gguf");
  const bool super = gguf::Traits(type).block_size == 256;
  const bool gemma = arch == "gemma3";
  daisy::testing::MakeModel({.shape = super ? "small" : "tiny", .arch = arch, .sliding_window = gemma ? 4 : 0,
                             .layers = gemma ? 7 : super ? 2 : 0, .kv_heads = kv_heads, .tied = gemma,
                             .type = type, .seed = 99},
                            path);
  auto m = model::Model::Load(path);
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  std::filesystem::remove(path);
  return Fixture{std::move(m).value()};
}

using daisy::testing::RandomTokens;

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

// ---- the oracle: a plain forward in double ---------------------------------------------------

using Vec = std::vector<double>;

// Row o of `w` in double (through the reference dequantisation).
Vec Row(const kernels::WeightMatrix& w, int64_t o) {
  std::vector<float> f(w.cols);
  kernels::DequantizeRow(w, o, f.data());
  return Vec(f.begin(), f.end());
}

Vec MatVec(const kernels::WeightMatrix& w, const Vec& x) {
  Vec y(w.rows);
  for (int64_t o = 0; o < w.rows; ++o) {
    const Vec r = Row(w, o);
    for (int64_t i = 0; i < w.cols; ++i) y[o] += r[i] * x[i];
  }
  return y;
}

Vec RmsNormD(const Vec& x, const float* w, double eps) {
  double ss = 0;
  for (double v : x) ss += v * v;
  const double scale = 1 / std::sqrt(ss / x.size() + eps);
  Vec y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = x[i] * scale * w[i];
  return y;
}

// Rotates each head of v at position pos, as the description says.
void RopeD(Vec& v, int n_heads, const model::ModelConfig& c, const model::LayerSpec& layer, const float* factors,
           int pos) {
  const int hd = c.head_dim;
  for (int h = 0; h < n_heads; ++h) {
    for (int i = 0; i < hd / 2; ++i) {
      const double a = layer.rope_freq_scale * pos * std::pow(static_cast<double>(layer.rope_theta), -2.0 * i / hd) /
                       (factors ? factors[i] : 1.0);
      const int x = h * hd + (c.rope_mode == kernels::RopeMode::kNorm ? 2 * i : i);
      const int y = h * hd + (c.rope_mode == kernels::RopeMode::kNorm ? 2 * i + 1 : i + hd / 2);
      const double x0 = v[x], x1 = v[y];
      const double m = c.rope_attn_factor;  // cos and sin scaled (LongRoPE's attention factor)
      v[x] = x0 * m * std::cos(a) - x1 * m * std::sin(a);
      v[y] = x0 * m * std::sin(a) + x1 * m * std::cos(a);
    }
  }
}

// The logits after every prefix of `tokens`, as a model whose description is `m`'s computes them
// in a context of `context` positions (which picks LongRoPE's factor set).
std::vector<Vec> ReferenceForward(const model::Model& m, const std::vector<int32_t>& tokens, int context) {
  const model::ModelConfig& c = m.config();
  const model::Weights& w = m.weights();
  const float* factors = !c.longrope ? w.rope_freqs : c.UsesLongRopeFactors(context) ? w.rope_long : w.rope_short;
  const int hd = c.head_dim, group = c.n_heads / c.n_kv_heads;
  std::vector<std::vector<Vec>> keys(c.n_layers), values(c.n_layers);
  std::vector<Vec> logits;
  for (int pos = 0; pos < static_cast<int>(tokens.size()); ++pos) {
    Vec x = Row(w.token_embd, tokens[pos]);
    if (c.embed_scale) {
      for (double& e : x) e *= std::sqrt(static_cast<double>(c.d_model));
    }
    // Each head of v normed by `norm` (none: null).
    auto head_norms = [&](Vec& v, int heads, const float* norm) {
      for (int h = 0; norm != nullptr && h < heads; ++h) {
        const Vec n = RmsNormD(Vec(v.begin() + h * hd, v.begin() + (h + 1) * hd), norm, c.rms_eps);
        std::copy(n.begin(), n.end(), v.begin() + h * hd);
      }
    };
    for (int l = 0; l < c.n_layers; ++l) {
      const model::LayerWeights& L = w.layers[l];
      const Vec xn = RmsNormD(x, L.attn_norm, c.rms_eps);
      Vec q, k, v;
      if (L.wqkv.data != nullptr) {  // fused: q, k, v rows stacked
        const Vec qkv = MatVec(L.wqkv, xn);
        q.assign(qkv.begin(), qkv.begin() + c.q_dim());
        k.assign(qkv.begin() + c.q_dim(), qkv.begin() + c.q_dim() + c.kv_dim());
        v.assign(qkv.begin() + c.q_dim() + c.kv_dim(), qkv.end());
      } else {
        q = MatVec(L.wq, xn), k = MatVec(L.wk, xn), v = MatVec(L.wv, xn);
      }
      auto add = [](Vec& y, const float* b) {
        for (size_t i = 0; b != nullptr && i < y.size(); ++i) y[i] += b[i];
      };
      add(q, L.bq);
      add(k, L.bk);
      add(v, L.bv);
      head_norms(q, c.n_heads, L.q_norm);
      head_norms(k, c.n_kv_heads, L.k_norm);
      RopeD(q, c.n_heads, c, c.layers[l], factors, pos);
      RopeD(k, c.n_kv_heads, c, c.layers[l], factors, pos);
      const double score_scale = c.attn_q_scale != 0 ? c.attn_q_scale : 1 / std::sqrt(static_cast<double>(hd));
      keys[l].push_back(k);
      values[l].push_back(v);
      const int window = c.layers[l].sliding_window;
      const int begin = window > 0 ? std::max(0, pos + 1 - window) : 0;
      Vec att(c.q_dim(), 0.0);
      for (int h = 0; h < c.n_heads; ++h) {
        const int kvh = h / group;
        Vec s;
        double max = -1e300;
        for (int t = begin; t <= pos; ++t) {
          double d = 0;
          for (int i = 0; i < hd; ++i) d += q[h * hd + i] * keys[l][t][kvh * hd + i];
          s.push_back(d * score_scale);
          max = std::max(max, s.back());
        }
        double z = 0;
        for (double& e : s) z += (e = std::exp(e - max));
        for (int t = begin; t <= pos; ++t) {
          for (int i = 0; i < hd; ++i) att[h * hd + i] += s[t - begin] / z * values[l][t][kvh * hd + i];
        }
      }
      Vec o = MatVec(L.wo, att);
      add(o, L.bo);
      if (L.attn_post_norm != nullptr) o = RmsNormD(o, L.attn_post_norm, c.rms_eps);
      for (int i = 0; i < c.d_model; ++i) x[i] += o[i];
      const Vec fn = RmsNormD(x, L.ffn_norm, c.rms_eps);
      Vec g, u;
      if (L.w_gate_up.data != nullptr) {  // fused: gate rows, then up rows
        const Vec gu = MatVec(L.w_gate_up, fn);
        g.assign(gu.begin(), gu.begin() + c.d_ff);
        u.assign(gu.begin() + c.d_ff, gu.end());
      } else {
        g = MatVec(L.w_gate, fn);
        u = MatVec(L.w_up, fn);
      }
      for (size_t i = 0; i < g.size(); ++i) {
        const double a = g[i];
        // GELU as ggml defines it on the CPU: of the f16-rounded input, rounded to f16, for
        // |a| < 10 (a exactly above, 0 below).
        auto gelu = [](double z) {
          if (z <= -10) return 0.0;
          if (z >= 10) return z;
          const double h = kernels::Fp16ToFp32(kernels::Fp32ToFp16(static_cast<float>(z)));
          const double y = 0.5 * h * (1 + std::tanh(std::sqrt(2 / std::numbers::pi) * (h + 0.044715 * h * h * h)));
          return static_cast<double>(kernels::Fp16ToFp32(kernels::Fp32ToFp16(static_cast<float>(y))));
        };
        const double act = c.activation == model::Activation::kSilu ? a / (1 + std::exp(-a)) : gelu(a);
        g[i] = act * u[i];
      }
      Vec down = MatVec(L.w_down, g);
      if (L.ffn_post_norm != nullptr) down = RmsNormD(down, L.ffn_post_norm, c.rms_eps);
      for (int i = 0; i < c.d_model; ++i) x[i] += down[i];
    }
    logits.push_back(MatVec(w.output, RmsNormD(x, w.output_norm, c.rms_eps)));
  }
  return logits;
}

// Every kernel table's logits against the reference forward, for the model at `path`.
void ExpectMatchesTheReference(const std::filesystem::path& path, const std::string& what, double tolerance = 2e-3,
                               int context = 64) {
  auto m = model::Model::Load(path);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  const int vocab = (*m)->config().n_vocab;
  const std::vector<int32_t> tokens = RandomTokens(24, 5, vocab);
  const std::vector<Vec> want = ReferenceForward(**m, tokens, context);
  for (const kernels::KernelTable* table : kernels::AllSupportedKernels()) {
    ThreadPool pool(2);
    Stage stage(**m, StageOptions{.max_batch_rows = 8, .seq_capacity = context}, *table, pool);
    // Prefilled in chunks of 8: the window and the RoPE bases hold across chunks too.
    const auto got = RunSchedule(stage, {{0, tokens}}, {{{0, 8}}, {{0, 8}}, {{0, 8}}}).at(0);
    double worst = 0;
    for (size_t p = 0; p < tokens.size(); ++p) {
      for (int t = 0; t < vocab; ++t) worst = std::max(worst, std::fabs(got[p * vocab + t] - want[p][t]));
    }
    // f32 weights: only the summation order differs (logits are ~8 wide).
    EXPECT_LT(worst, tolerance) << what << " with " << table->name;
  }
}

TEST(Stage, MatchesAReferenceForward) {
  static daisy::testing::TempDir dir("stage-reference");
  const auto llama = daisy::testing::MakeModel({.kv_heads = 2, .type = gguf::TensorType::kF32, .seed = 3},
                                               dir / "llama.gguf");
  ExpectMatchesTheReference(llama, "llama");
  const auto rope31 = daisy::testing::MakeModel(
      {.shape = "small", .layers = 2, .type = gguf::TensorType::kF32, .seed = 4}, dir / "small.gguf");
  ExpectMatchesTheReference(rope31, "small");
  // Optional tensors: attention biases, which Llama files may carry.
  const auto bias = daisy::testing::MakeModel({.kv_heads = 2, .bias = true, .type = gguf::TensorType::kF32, .seed = 3},
                                              dir / "bias.gguf");
  ExpectMatchesTheReference(bias, "attention biases");
  // The description's features no Llama file states: each changes the logits, and each matches.
  const auto neox = daisy::testing::WithDescription(llama, dir / "neox.gguf", [](model::ModelConfig& c) {
    c.rope_mode = kernels::RopeMode::kNeox;
  });
  ExpectMatchesTheReference(neox, "NeoX RoPE");
  const auto bases = daisy::testing::WithDescription(llama, dir / "bases.gguf", [](model::ModelConfig& c) {
    c.layers[0].rope_theta = 1000.f;
    c.layers[1].rope_theta = 1e6f;
  });
  ExpectMatchesTheReference(bases, "per-layer RoPE bases");
  const auto window = daisy::testing::WithDescription(llama, dir / "window.gguf", [](model::ModelConfig& c) {
    c.layers[0].sliding_window = 5;
  });
  ExpectMatchesTheReference(window, "a sliding window on layer 0");
  // The other families' own ops.
  const auto qwen2 = daisy::testing::MakeModel({.arch = "qwen2", .kv_heads = 2, .type = gguf::TensorType::kF32, .seed = 5},
                                               dir / "qwen2.gguf");
  ExpectMatchesTheReference(qwen2, "qwen2 (q/k/v biases, NeoX RoPE)");
  const auto qwen3 = daisy::testing::MakeModel({.arch = "qwen3", .kv_heads = 2, .type = gguf::TensorType::kF32, .seed = 6},
                                               dir / "qwen3.gguf");
  ExpectMatchesTheReference(qwen3, "qwen3 (q/k norms)");
  const auto phi3 = daisy::testing::MakeModel({.arch = "phi3", .kv_heads = 2, .type = gguf::TensorType::kF32, .seed = 8},
                                              dir / "phi3.gguf");
  ExpectMatchesTheReference(phi3, "phi3 (fused q/k/v and gate/up, q scale)");
  // Phi-3.5's LongRoPE from 32 positions: the short factors in a context of 32, the long ones
  // in 64; both with the attention factor (1.55 here) on cos and sin.
  const auto longrope = daisy::testing::MakeModel(
      {.arch = "phi3", .kv_heads = 2, .longrope = 32, .type = gguf::TensorType::kF32, .seed = 9}, dir / "longrope.gguf");
  ExpectMatchesTheReference(longrope, "phi3 LongRoPE, short factors", 2e-3, 32);
  ExpectMatchesTheReference(longrope, "phi3 LongRoPE, long factors", 2e-3, 64);
  // Gemma 3: 7 layers (the sixth global), windows of 5 positions over 24 tokens, and a linear
  // RoPE scale on the global layer.
  const auto gemma = daisy::testing::WithDescription(
      daisy::testing::MakeModel({.arch = "gemma3", .sliding_window = 5, .layers = 7, .kv_heads = 1, .tied = true,
                                 .type = gguf::TensorType::kF32, .seed = 7},
                                dir / "gemma3-file.gguf"),
      dir / "gemma3.gguf", [](model::ModelConfig& c) { c.layers[5].rope_freq_scale = 0.25f; });
  ExpectMatchesTheReference(gemma, "gemma3 (scaled embeddings, GELU, post-norms, q/k norms, q scale, windows)", 1e-2);
}

TEST(Stage, DescriptionFeaturesChangeTheResult) {
  // The reference and the stage could agree by ignoring a feature together: each feature must
  // move the logits away from the plain Llama ones.
  static daisy::testing::TempDir dir("stage-features");
  const auto llama = daisy::testing::MakeModel({.kv_heads = 2, .type = gguf::TensorType::kF32, .seed = 3},
                                               dir / "llama.gguf");
  auto logits = [&](const std::filesystem::path& p) {
    auto m = model::Model::Load(p);
    EXPECT_TRUE(m.ok()) << m.status().ToString();
    ThreadPool pool(1);
    Stage stage(**m, StageOptions{.max_batch_rows = 32, .seq_capacity = 32}, kernels::ScalarKernels(), pool);
    return RunSchedule(stage, {{0, RandomTokens(12, 6, (*m)->config().n_vocab)}}, {{{0, 12}}}).at(0);
  };
  const auto base = logits(llama);
  for (const auto& [name, change] :
       std::vector<std::pair<std::string, std::function<void(model::ModelConfig&)>>>{
           {"neox", [](model::ModelConfig& c) { c.rope_mode = kernels::RopeMode::kNeox; }},
           {"bases", [](model::ModelConfig& c) { c.layers[1].rope_theta = 77.f; }},
           {"window", [](model::ModelConfig& c) { c.layers[1].sliding_window = 3; }}}) {
    const auto got = logits(daisy::testing::WithDescription(llama, dir / (name + ".gguf"), change));
    EXPECT_NE(std::memcmp(got.data(), base.data(), base.size() * sizeof(float)), 0) << name;
  }
}

TEST(Stage, LongRopeFactorSetFollowsTheContext) {
  // The same tokens in a context of 32 (short factors) and of 33 (long): different logits, and
  // the same as each other's set again at any larger or smaller capacity.
  static daisy::testing::TempDir dir("stage-longrope");
  const auto path = daisy::testing::MakeModel(
      {.arch = "phi3", .kv_heads = 2, .longrope = 32, .type = gguf::TensorType::kF32, .seed = 9}, dir / "longrope.gguf");
  auto m = model::Model::Load(path);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  const auto tokens = RandomTokens(12, 6, (*m)->config().n_vocab);
  auto logits = [&](int capacity, int rope_context) {
    ThreadPool pool(1);
    Stage stage(**m, StageOptions{.max_batch_rows = 32, .seq_capacity = capacity, .rope_context = rope_context},
                kernels::ScalarKernels(), pool);
    return RunSchedule(stage, {{0, tokens}}, {{{0, 12}}}).at(0);
  };
  const auto short_set = logits(32, 0), long_set = logits(33, 0);
  EXPECT_NE(std::memcmp(short_set.data(), long_set.data(), short_set.size() * sizeof(float)), 0);
  ExpectBitEqual(logits(16, 0), short_set, "capacity 16");
  ExpectBitEqual(logits(200, 0), long_set, "capacity 200");
  // Room for speculation's rows beyond the context asked for does not change the set.
  ExpectBitEqual(logits(45, 32), short_set, "capacity 45 for a context of 32");
}

TEST(Stage, NoWeightIsReadFromTheFileAfterLoading) {
  // Loading unmaps the file (Model::Open), so anything the forward pass still read from the
  // mapping would fault back in on the first prompt, from the disk when the page cache has let
  // it go (norm vectors did: ~3 ms a layer here). Every vector and matrix a stage uses is in the model's own memory, for each
  // family's optional tensors (biases, LongRoPE factors, Qwen 3's and Gemma's extra norms) and
  // for quantised and float weights.
  static daisy::testing::TempDir dir("stage-owned");
  const std::vector<std::pair<std::string, daisy::testing::ModelSpec>> specs = {
      {"llama q8_0 with biases", {.kv_heads = 2, .bias = true, .type = gguf::TensorType::kQ8_0, .seed = 3}},
      {"qwen3 f16", {.arch = "qwen3", .kv_heads = 2, .type = gguf::TensorType::kF16, .seed = 4}},
      {"phi3 LongRoPE f32", {.arch = "phi3", .kv_heads = 2, .longrope = 32, .type = gguf::TensorType::kF32, .seed = 9}},
      {"gemma3 q4_K", {.shape = "small", .arch = "gemma3", .sliding_window = 4, .layers = 7, .tied = true,
                       .type = gguf::TensorType::kQ4_K, .seed = 5}},
  };
  for (const auto& [what, spec] : specs) {
    SCOPED_TRACE(what);
    auto m = model::Model::Load(daisy::testing::MakeModel(spec, dir / (std::to_string(spec.seed) + ".gguf")));
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    const model::Model& model = **m;
    std::vector<std::span<const uint8_t>> file;
    for (const gguf::TensorInfo& t : model.reader().tensors()) file.push_back(model.reader().TensorData(t));
    int checked = 0;
    const auto expect_owned = [&](const void* p, std::string_view name) {
      if (p == nullptr) return;
      ++checked;
      const auto* b = static_cast<const uint8_t*>(p);
      for (const auto& f : file) {
        EXPECT_FALSE(b >= f.data() && b < f.data() + f.size()) << name << " is read from the file's mapping";
      }
    };
    const model::Weights& w = model.weights();
    expect_owned(w.token_embd.data, "token_embd");
    expect_owned(w.output.data, "output");
    expect_owned(w.output_norm, "output_norm");
    expect_owned(w.rope_freqs, "rope_freqs");
    expect_owned(w.rope_long, "rope_long");
    expect_owned(w.rope_short, "rope_short");
    for (const model::LayerWeights& l : w.layers) {
      for (const model::LayerTensor& t : model::LayerTensors(model.config())) {
        if (t.vector != nullptr) expect_owned(l.*t.vector, t.name);
        if (t.matrix != nullptr) expect_owned((l.*t.matrix).data, t.name);
      }
    }
    EXPECT_GE(checked, 10);
  }
  // The tensors the specs asked for are there to be checked.
  auto bias = model::Model::Load(dir / "3.gguf");
  ASSERT_TRUE(bias.ok());
  EXPECT_NE((*bias)->weights().layers[0].bq, nullptr);
}

struct Variant {
  std::string arch;
  gguf::TensorType type;
};
class BatchInvariance : public ::testing::TestWithParam<Variant> {};

TEST_P(BatchInvariance, LogitsDoNotDependOnTheBatch) {
  Fixture f = MakeModel(GetParam().type, 2, GetParam().arch);
  const int vocab = f.model->config().n_vocab;
  const std::map<int, std::vector<int32_t>> seqs = {
      {0, RandomTokens(21, 1, vocab)}, {1, RandomTokens(9, 2, vocab)}, {2, RandomTokens(14, 3, vocab)},
      {3, RandomTokens(5, 4, vocab)},  {4, RandomTokens(17, 5, vocab)}, {5, RandomTokens(3, 6, vocab)},
      {6, RandomTokens(11, 7, vocab)}, {7, RandomTokens(8, 8, vocab)}};
  for (const kernels::KernelTable* table : kernels::AllSupportedKernels()) {
    // The reference: sequence 0 alone, one prefill, on one thread. Every schedule below, on one
    // thread and on two, must give its bits.
    std::map<int, std::vector<float>> alone;
    {
      ThreadPool one(1);
      Stage stage(*f.model, StageOptions{.max_batch_rows = 128, .seq_capacity = 64}, *table, one);
      alone = RunSchedule(stage, seqs, {{{0, 21}}});
    }
    for (int threads : {1, 2}) {
      ThreadPool pool(threads);
      const std::string tag = std::string(table->name) + "/" + GetParam().arch + "/" + gguf::Traits(GetParam().type).name +
                              "/threads " + std::to_string(threads);
      auto fresh = [&] {
        return std::make_unique<Stage>(*f.model, StageOptions{.max_batch_rows = 128, .seq_capacity = 64},
                                       *table, pool);
      };
      // One prefill on this thread count (the matrix rows and attention heads split across
      // threads differently from one thread).
      auto s0 = fresh();
      ExpectBitEqual(RunSchedule(*s0, seqs, {{{0, 21}}}).at(0), alone.at(0), tag + " one prefill");
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

std::vector<Variant> LlamaOfEveryType() {
  std::vector<Variant> v;
  for (gguf::TensorType t :
       {gguf::TensorType::kF32, gguf::TensorType::kF16, gguf::TensorType::kBF16, gguf::TensorType::kQ8_0,
        gguf::TensorType::kQ4_0, gguf::TensorType::kQ4_1, gguf::TensorType::kQ5_0, gguf::TensorType::kQ5_1,
        gguf::TensorType::kIQ4_NL, gguf::TensorType::kQ2_K, gguf::TensorType::kQ3_K, gguf::TensorType::kQ4_K,
        gguf::TensorType::kQ5_K, gguf::TensorType::kQ6_K, gguf::TensorType::kIQ4_XS}) {
    v.push_back({"llama", t});
  }
  return v;
}
std::string VariantName(const ::testing::TestParamInfo<Variant>& p) {
  return p.param.arch + "_" + gguf::Traits(p.param.type).name;
}
INSTANTIATE_TEST_SUITE_P(AllTypes, BatchInvariance, ::testing::ValuesIn(LlamaOfEveryType()), VariantName);
// Every other family's own ops (biases, q/k norms, GELU, post-norms, sliding windows).
INSTANTIATE_TEST_SUITE_P(Families, BatchInvariance,
                         ::testing::Values(Variant{"qwen2", gguf::TensorType::kQ8_0},
                                           Variant{"qwen3", gguf::TensorType::kQ4_K},
                                           Variant{"phi3", gguf::TensorType::kQ4_0},
                                           Variant{"gemma3", gguf::TensorType::kF32},
                                           Variant{"gemma3", gguf::TensorType::kQ6_K}),
                         VariantName);

TEST(Stage, RewindRecomputesExactly) {
  Fixture f = MakeModel(gguf::TensorType::kQ8_0, 4);
  ThreadPool pool(2);
  Stage stage(*f.model, {.max_batch_rows = 32, .seq_capacity = 32}, kernels::BestKernels(), pool);
  const int vocab = f.model->config().n_vocab;
  const auto tokens = RandomTokens(12, 9, vocab);
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

}  // namespace
}  // namespace daisy::runtime

namespace daisy::runtime {
namespace {

TEST(Stage, SlidingWindowLayersKeepOnlyTheirWindow) {
  // Gemma 3 on 7 layers: six local layers over 5 positions, one global. With 8 rows a forward,
  // a local layer keeps 5 + 8 - 1 = 12 positions of a 64-position sequence.
  static daisy::testing::TempDir dir("stage-window");
  const auto path = daisy::testing::MakeModel({.arch = "gemma3", .sliding_window = 5, .layers = 7, .kv_heads = 2,
                                               .tied = true, .type = gguf::TensorType::kF32, .seed = 12},
                                              dir / "gemma3.gguf");
  auto m = model::Model::Load(path);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  ThreadPool pool(2);
  const StageOptions opts{.max_batch_rows = 8, .seq_capacity = 64};
  Stage stage(**m, opts, kernels::ScalarKernels(), pool);
  const size_t kv_dim = static_cast<size_t>((*m)->config().kv_dim());
  EXPECT_EQ(stage.kv().bytes_per_sequence(), (6 * 12 + 64) * 2 * kv_dim * sizeof(float));
  EXPECT_EQ(stage.kv().Slots(0), 12);
  EXPECT_FALSE(stage.kv().IsRing(5));
  // 30 tokens token by token (the rings wrap twice) give the bits of the same tokens in chunks.
  const int vocab = (*m)->config().n_vocab;
  const std::map<int, std::vector<int32_t>> seqs = {{0, RandomTokens(30, 9, vocab)}};
  Schedule one_by_one;
  for (int i = 0; i < 30; ++i) one_by_one.push_back({{0, 1}});
  const auto a = RunSchedule(stage, seqs, one_by_one).at(0);
  Stage chunked(**m, opts, kernels::ScalarKernels(), pool);
  const auto b = RunSchedule(chunked, seqs, {{{0, 8}}, {{0, 8}}, {{0, 8}}, {{0, 6}}}).at(0);
  ExpectBitEqual(a, b, "windowed rings, one row at a time against chunks of 8");
  // A rewind the rings still cover recomputes exactly; one further back is refused by name and
  // changes nothing.
  std::vector<float> out(vocab);
  const std::vector<BatchRow> back5 = {{0, 25, seqs.at(0)[25], true}};
  ASSERT_TRUE(stage.Forward(back5, {}, out).ok());
  EXPECT_EQ(std::memcmp(out.data(), &a[25 * vocab], vocab * sizeof(float)), 0);
  const std::vector<BatchRow> back20 = {{0, 6, seqs.at(0)[6], true}};
  const Status s = stage.Forward(back20, {}, out);
  EXPECT_EQ(s.code(), StatusCode::kOutOfRange);
  EXPECT_NE(s.message().find("no longer keeps"), std::string::npos) << s.message();
  EXPECT_EQ(stage.kv().Length(0), 26);
}

}  // namespace
}  // namespace daisy::runtime
