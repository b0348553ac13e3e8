#include "model/generator.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <cmath>
#include <numbers>
#include <thread>
#include <string>
#include <vector>

#include "base/check.h"
#include "base/strings.h"
#include "gguf/writer.h"
#include "kernels/quant/formats.h"
#include "model/tensors.h"

namespace daisy::model {
namespace {

using gguf::TensorType;

uint64_t SplitMix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

uint64_t HashName(std::string_view name) {  // FNV-1a
  uint64_t h = 0xcbf29ce484222325ull;
  for (char c : name) h = (h ^ static_cast<uint8_t>(c)) * 0x100000001b3ull;
  return h;
}

// How one tensor's values are drawn: uniform on [center - half_width, center + half_width].
struct Init {
  float center;
  float half_width;
};

Init Uniform(float stddev) { return {0.f, stddev * std::numbers::sqrt3_v<float>}; }

// Fills one row from its own RNG stream, so rows can be made in any order.
void FillRow(uint64_t seed, std::string_view tensor, int64_t row, Init init, float* out,
             int64_t n) {
  uint64_t state = seed ^ HashName(tensor) ^ (static_cast<uint64_t>(row) * 0xD1B54A32D192ED03ull);
  for (int64_t i = 0; i < n; i += 2) {
    const uint64_t r = SplitMix64(state);
    const float u0 = static_cast<float>(r >> 40) * (1.0f / 16777216.0f);  // [0, 1), 24 bits
    const float u1 = static_cast<float>((r >> 8) & 0xFFFFFF) * (1.0f / 16777216.0f);
    out[i] = init.center + init.half_width * (2.f * u0 - 1.f);
    if (i + 1 < n) out[i + 1] = init.center + init.half_width * (2.f * u1 - 1.f);
  }
}

struct TensorPlan {
  std::string name;
  TensorType type;
  int64_t cols;  // ne[0]
  int64_t rows;  // ne[1]; 1 for vectors
  bool is_vector;
  Init init;
  std::vector<float> fixed;  // explicit values (rope_freqs), else drawn from init
};

// Converts `rows` rows of `cols` floats to `type` into `out`, the rows shared out among the
// cores (the K-quants' scale searches cost hundreds of operations per weight).
void Encode(TensorType type, const float* x, int64_t rows, int64_t cols, std::vector<uint8_t>& out) {
  const size_t n = static_cast<size_t>(rows * cols);
  const auto& traits = gguf::Traits(type);
  out.resize(n / traits.block_size * traits.block_bytes);
  const kernels::WeightFormat* f = kernels::FindFormat(static_cast<uint32_t>(type));
  DAISY_CHECK(f != nullptr);
  const size_t row_bytes = static_cast<size_t>(cols) / traits.block_size * traits.block_bytes;
  const int threads = type == TensorType::kF32 || rows < 2
                          ? 1
                          : static_cast<int>(std::min<int64_t>(rows, std::max(1u, std::thread::hardware_concurrency())));
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    const int64_t a = rows * t / threads, b = rows * (t + 1) / threads;
    auto work = [=, &out] { f->quantize_row(x + a * cols, out.data() + a * row_bytes, (b - a) * cols); };
    if (t + 1 == threads) {
      work();
    } else {
      pool.emplace_back(work);
    }
  }
  for (std::thread& th : pool) th.join();
}

std::vector<TensorPlan> PlanTensors(const GenerateOptions& o, const QuantMix& mix, int n_vocab) {
  const ModelConfig& c = o.config;
  const MixModel mix_model{c.n_layers, c.n_heads, c.n_kv_heads, c.tied_embeddings};
  // The type of weight matrix `name` with rows of `cols`.
  auto W = [&](const std::string& name, int64_t cols) {
    return static_cast<TensorType>(kernels::FormatOf(MixTensorType(mix, mix_model, name, cols)).ggml_type);
  };
  const float d = static_cast<float>(c.d_model);
  const float q_dim = static_cast<float>(c.n_heads * c.head_dim);
  const float kv_dim = static_cast<float>(c.n_kv_heads * c.head_dim);
  const float branch_all =
      1.f / std::sqrt(static_cast<float>(o.branch_layers > 0 ? o.branch_layers : c.n_layers));
  const Init norm{1.f, 0.1f};
  std::vector<TensorPlan> t;
  // With tied embeddings the embedding is the LM head: its scale sets the logits' spread
  // (RMSNorm makes the stream's own scale irrelevant downstream).
  const float embd_std = c.tied_embeddings ? o.logit_std / std::sqrt(d) : 1.f;
  t.push_back({"token_embd.weight", W("token_embd.weight", c.d_model), c.d_model, n_vocab, false, Uniform(embd_std), {}});
  if (c.rope_scaling.enabled) {
    t.push_back({"rope_freqs.weight", TensorType::kF32, c.head_dim / 2, 1, true, {},
                 Llama3RopeFactors(c)});
  }
  if (c.longrope) {
    t.push_back({std::string(kRopeFactorsLong), TensorType::kF32, c.head_dim / 2, 1, true, {}, LongRopeFactors(c, true)});
    t.push_back({std::string(kRopeFactorsShort), TensorType::kF32, c.head_dim / 2, 1, true, {}, LongRopeFactors(c, false)});
  }
  for (int l = 0; l < c.n_layers; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    const float branch = o.scaled_from >= 0 && l >= o.scaled_from ? branch_all * o.scaled_by : branch_all;
    t.push_back({p + "attn_norm.weight", TensorType::kF32, c.d_model, 1, true, norm, {}});
    const bool fused = c.arch == "phi3";  // q/k/v in one matrix, gate/up in another
    if (fused) {
      t.push_back({p + "attn_qkv.weight", W(p + "attn_qkv.weight", c.d_model), c.d_model,
                   static_cast<int64_t>(q_dim + 2 * kv_dim), false, Uniform(1.f / std::sqrt(d)), {}});
    } else {
      t.push_back({p + "attn_q.weight", W(p + "attn_q.weight", c.d_model), c.d_model, static_cast<int64_t>(q_dim), false,
                   Uniform(1.f / std::sqrt(d)), {}});
      t.push_back({p + "attn_k.weight", W(p + "attn_k.weight", c.d_model), c.d_model, static_cast<int64_t>(kv_dim), false,
                   Uniform(1.f / std::sqrt(d)), {}});
      t.push_back({p + "attn_v.weight", W(p + "attn_v.weight", c.d_model), c.d_model, static_cast<int64_t>(kv_dim), false,
                   Uniform(1.f / std::sqrt(d)), {}});
    }
    t.push_back({p + "attn_output.weight", W(p + "attn_output.weight", static_cast<int64_t>(q_dim)), static_cast<int64_t>(q_dim), c.d_model, false,
                 Uniform(branch / std::sqrt(q_dim)), {}});
    // q/k/v biases: optional for Llama (--attention-bias, with an output bias), always Qwen2's.
    if (o.attention_bias || c.arch == "qwen2") {
      t.push_back({p + "attn_q.bias", TensorType::kF32, static_cast<int64_t>(q_dim), 1, true, Uniform(0.3f), {}});
      t.push_back({p + "attn_k.bias", TensorType::kF32, static_cast<int64_t>(kv_dim), 1, true, Uniform(0.3f), {}});
      t.push_back({p + "attn_v.bias", TensorType::kF32, static_cast<int64_t>(kv_dim), 1, true, Uniform(0.3f), {}});
    }
    if (o.attention_bias && c.arch != "qwen2") {
      t.push_back({p + "attn_output.bias", TensorType::kF32, c.d_model, 1, true, Uniform(0.3f * branch), {}});
    }
    if (c.qk_norm) {
      t.push_back({p + "attn_q_norm.weight", TensorType::kF32, c.head_dim, 1, true, norm, {}});
      t.push_back({p + "attn_k_norm.weight", TensorType::kF32, c.head_dim, 1, true, norm, {}});
    }
    // A norm after a block undoes its output projection's scale: the norm's weights carry the
    // branch scale instead, large against the stream the sqrt(d_model)-scaled embedding starts
    // (Gemma): else the tied head sees mostly the input token and repeats it.
    const float stream = c.embed_scale ? std::max(1.f, 40.f * embd_std * std::sqrt(d)) : 1.f;
    const Init post_norm{branch * stream, 0.1f * branch * stream};
    if (c.post_norms) {
      t.push_back({p + "post_attention_norm.weight", TensorType::kF32, c.d_model, 1, true, post_norm, {}});
    }
    t.push_back({p + "ffn_norm.weight", TensorType::kF32, c.d_model, 1, true, norm, {}});
    if (fused) {
      t.push_back({p + "ffn_up.weight", W(p + "ffn_up.weight", c.d_model), c.d_model, 2 * static_cast<int64_t>(c.d_ff),
                   false, Uniform(1.f / std::sqrt(d)), {}});
    } else {
      t.push_back({p + "ffn_gate.weight", W(p + "ffn_gate.weight", c.d_model), c.d_model, c.d_ff, false,
                   Uniform(1.f / std::sqrt(d)), {}});
      t.push_back({p + "ffn_up.weight", W(p + "ffn_up.weight", c.d_model), c.d_model, c.d_ff, false,
                   Uniform(1.f / std::sqrt(d)), {}});
    }
    // silu(gate) * up has an rms of about 0.5: the factor 2 restores unit scale.
    t.push_back({p + "ffn_down.weight", W(p + "ffn_down.weight", c.d_ff), c.d_ff, c.d_model, false,
                 Uniform(2.f * branch / std::sqrt(static_cast<float>(c.d_ff))), {}});
    if (c.post_norms) {
      t.push_back({p + "post_ffw_norm.weight", TensorType::kF32, c.d_model, 1, true, post_norm, {}});
    }
  }
  t.push_back({"output_norm.weight", TensorType::kF32, c.d_model, 1, true, norm, {}});
  if (!c.tied_embeddings) {
    t.push_back({"output.weight", W("output.weight", c.d_model), c.d_model, n_vocab, false,
                 Uniform(o.logit_std / std::sqrt(d)), {}});
  }
  return t;
}

void AddHyperParameters(const GenerateOptions& o, const QuantMix& mix, int n_vocab, gguf::Writer& w) {
  const ModelConfig& c = o.config;
  w.AddString("general.architecture", c.arch);
  w.AddString("general.name", o.name);
  w.AddUint32("general.file_type", mix.file_type);
  w.AddUint32("general.quantization_version", 2);
  w.AddUint64("daisy.synthetic.seed", o.seed);
  w.AddFloat32("daisy.synthetic.logit_std", o.logit_std);
  ModelConfig described = c;
  described.n_vocab = n_vocab;
  const Status family = described.WriteFamilyKeys(w);
  DAISY_CHECK(family.ok());  // GenerateModel made sure the description is the family's
}

}  // namespace

bool IsSupportedWeightType(TensorType type) {
  return kernels::FindFormat(static_cast<uint32_t>(type)) != nullptr;
}

std::vector<float> Llama3RopeFactors(const ModelConfig& c) {
  const RopeScaling& s = c.rope_scaling;
  const double low_wavelen = s.original_context / s.low_freq_factor;
  const double high_wavelen = s.original_context / s.high_freq_factor;
  std::vector<float> factors;
  for (int i = 0; i < c.head_dim; i += 2) {
    const double freq = 1.0 / std::pow(static_cast<double>(c.rope_theta),
                                       static_cast<double>(i) / c.head_dim);
    const double wavelen = 2 * std::numbers::pi / freq;
    if (wavelen < high_wavelen) {
      factors.push_back(1.f);
    } else if (wavelen > low_wavelen) {
      factors.push_back(s.factor);
    } else {
      const double smooth = (s.original_context / wavelen - s.low_freq_factor) /
                            (s.high_freq_factor - s.low_freq_factor);
      factors.push_back(static_cast<float>(1.0 / ((1 - smooth) / s.factor + smooth)));
    }
  }
  return factors;
}

std::vector<float> LongRopeFactors(const ModelConfig& c, bool long_set) {
  const int n = c.head_dim / 2;
  std::vector<float> factors;
  for (int i = 0; i < n; ++i) {
    const double t = n > 1 ? static_cast<double>(i) / (n - 1) : 0.0;
    factors.push_back(static_cast<float>(long_set ? 1.0 + 39.0 * t * t * t : 1.0 + 1.5 * t * t));
  }
  return factors;
}

void PadVocab(tokenizer::VocabData& vocab, int n) {
  for (int k = 0; static_cast<int>(vocab.tokens.size()) < n; ++k) {
    vocab.tokens.push_back("<|reserved_special_token_" + std::to_string(k) + "|>");
    if (!vocab.token_types.empty()) {
      vocab.token_types.push_back(static_cast<int32_t>(tokenizer::TokenType::kControl));
    }
    if (!vocab.scores.empty()) vocab.scores.push_back(0.f);
  }
}

Status GenerateModel(const GenerateOptions& options, const tokenizer::VocabData& vocab,
                     const std::filesystem::path& path) {
  if (!options.mix && !IsSupportedWeightType(options.type)) {
    return InvalidArgument("weight type %s is not supported (%s)", gguf::Traits(options.type).name,
                           kernels::WeightFormatNames().c_str());
  }
  const QuantMix mix = options.mix ? *options.mix
                                   : PureMix(kernels::FindFormat(static_cast<uint32_t>(options.type))->type);
  ModelConfig config = options.config;
  config.n_vocab = static_cast<int>(vocab.tokens.size());
  if (config.layers.size() != static_cast<size_t>(config.n_layers)) config.layers.clear();
  DAISY_RETURN_IF_ERROR(config.Resolve());
  // The file states the model in its family's own keys, so they must be able to say it.
  DAISY_RETURN_IF_ERROR(config.CheckFamilyKeys());
  // Rows a type's block does not divide fall back as llama-quantize's do (quant_mix.h).
  GenerateOptions o = options;
  o.config = config;

  DAISY_ASSIGN_OR_RETURN(gguf::Writer writer, gguf::Writer::Create(path));
  AddHyperParameters(o, mix, config.n_vocab, writer);
  tokenizer::WriteVocab(vocab, writer);
  const std::vector<TensorPlan> plan = PlanTensors(o, mix, config.n_vocab);
  uint64_t total = 0;
  for (const TensorPlan& t : plan) {
    const int64_t ne2[] = {t.cols, t.rows};
    DAISY_RETURN_IF_ERROR(
        writer.AddTensor(t.name, t.type, std::span(ne2, t.is_vector ? 1 : 2)));
    total += static_cast<uint64_t>(t.rows * t.cols) / gguf::Traits(t.type).block_size *
             gguf::Traits(t.type).block_bytes;
  }

  // Rows are produced in chunks of about 4 MB of floats, encoded, and written.
  std::vector<float> rows;
  std::vector<uint8_t> bytes;
  uint64_t done = 0;
  auto last_report = std::chrono::steady_clock::now();
  for (const TensorPlan& t : plan) {
    if (!t.fixed.empty()) {
      Encode(t.type, t.fixed.data(), 1, t.cols, bytes);
      DAISY_RETURN_IF_ERROR(writer.WriteTensorData(bytes));
      done += bytes.size();
      continue;
    }
    const int64_t chunk = std::max<int64_t>(1, (1 << 20) / t.cols);
    rows.resize(static_cast<size_t>(std::min(chunk, t.rows) * t.cols));
    for (int64_t r0 = 0; r0 < t.rows; r0 += chunk) {
      const int64_t n_rows = std::min(chunk, t.rows - r0);
      for (int64_t r = 0; r < n_rows; ++r) {
        FillRow(o.seed, t.name, r0 + r, t.init, rows.data() + r * t.cols, t.cols);
      }
      Encode(t.type, rows.data(), n_rows, t.cols, bytes);
      DAISY_RETURN_IF_ERROR(writer.WriteTensorData(bytes));
      done += bytes.size();
      const auto now = std::chrono::steady_clock::now();
      if (o.progress && now - last_report > std::chrono::seconds(1)) {
        o.progress(done, total);
        last_report = now;
      }
    }
  }
  DAISY_RETURN_IF_ERROR(writer.Finish().status());
  if (o.progress) o.progress(total, total);
  return Status::Ok();
}

}  // namespace daisy::model
