// The named shapes `daisy gen-model --shape` makes: two small test shapes of our own and the
// real models' dimensions (from their released config.json), each in its family's architecture.
#include "base/strings.h"
#include "model/arch.h"
#include "model/config.h"

namespace daisy::model {
namespace {

struct ShapeRow {
  const char* name;
  const char* arch;
  int d_model, n_layers, n_heads, n_kv_heads, head_dim, d_ff, ctx;
  float theta;
  bool tied;
  int n_vocab;           // 0: whatever the tokenizer has
  float llama3_scaling;  // Llama 3.1's rope_freqs factor (0: none)
  float rms_eps;
  int sliding_window;    // Gemma 3's local layers
  float linear_scaling;  // rope.scaling.factor (0: none)
  int longrope_original;  // Phi-3's LongRoPE: the original context (0: none)
};

constexpr ShapeRow kShapes[] = {
    {"tiny", "llama", 64, 2, 4, 2, 16, 192, 4096, 10000, false, 0, 0, 1e-5f, 0, 0, 0},
    {"small", "llama", 256, 4, 8, 2, 32, 768, 4096, 500000, false, 0, 0, 1e-5f, 0, 0, 0},
    {"llama-3.2-1b", "llama", 2048, 16, 32, 8, 64, 8192, 131072, 500000, true, 128256, 32, 1e-5f, 0, 0, 0},
    {"llama-3.2-3b", "llama", 3072, 28, 24, 8, 128, 8192, 131072, 500000, true, 128256, 32, 1e-5f, 0, 0, 0},
    {"llama-3.1-8b", "llama", 4096, 32, 32, 8, 128, 14336, 131072, 500000, false, 128256, 8, 1e-5f, 0, 0, 0},
    {"llama-3.1-70b", "llama", 8192, 80, 64, 8, 128, 28672, 131072, 500000, false, 128256, 8, 1e-5f, 0, 0, 0},
    // Mistral 7B v0.3 (Llama architecture, SentencePiece vocabulary of 32,768).
    {"mistral-7b", "llama", 4096, 32, 32, 8, 128, 14336, 32768, 1000000, false, 32768, 0, 1e-5f, 0, 0, 0},
    {"qwen2.5-0.5b", "qwen2", 896, 24, 14, 2, 64, 4864, 32768, 1000000, true, 151936, 0, 1e-6f, 0, 0, 0},
    {"qwen2.5-7b", "qwen2", 3584, 28, 28, 4, 128, 18944, 32768, 1000000, false, 152064, 0, 1e-6f, 0, 0, 0},
    {"qwen3-0.6b", "qwen3", 1024, 28, 16, 8, 128, 3072, 40960, 1000000, true, 151936, 0, 1e-6f, 0, 0, 0},
    {"qwen3-8b", "qwen3", 4096, 36, 32, 8, 128, 12288, 40960, 1000000, false, 151936, 0, 1e-6f, 0, 0, 0},
    {"gemma-3-1b", "gemma3", 1152, 26, 4, 1, 256, 6912, 32768, 1000000, true, 262144, 0, 1e-6f, 512, 0, 0},
    {"gemma-3-4b", "gemma3", 2560, 34, 8, 4, 256, 10240, 131072, 1000000, true, 262208, 0, 1e-6f, 1024, 8, 0},
    // Phi-3 mini 4k (its sliding window of 2047 is not written: llama.cpp disables it).
    {"phi-3-mini", "phi3", 3072, 32, 32, 32, 96, 8192, 4096, 10000, false, 32064, 0, 1e-5f, 0, 0, 0},
    // Phi-3.5 mini (and Phi-3 mini 128k): the same block, LongRoPE from 4,096 to 131,072 positions.
    {"phi-3.5-mini", "phi3", 3072, 32, 32, 32, 96, 8192, 131072, 10000, false, 32064, 0, 1e-5f, 0, 0, 4096},
};

ModelConfig FromRow(const ShapeRow& s) {
  ModelConfig c;
  c.n_vocab = s.n_vocab;
  c.d_model = s.d_model;
  c.n_layers = s.n_layers;
  c.n_heads = s.n_heads;
  c.n_kv_heads = s.n_kv_heads;
  c.head_dim = s.head_dim;
  c.d_ff = s.d_ff;
  c.context_length = s.ctx;
  c.rope_theta = s.theta;
  c.tied_embeddings = s.tied;
  c.rms_eps = s.rms_eps;
  c.rope_scaling.enabled = s.llama3_scaling > 0;
  if (s.llama3_scaling > 0) c.rope_scaling.factor = s.llama3_scaling;
  c.sliding_window = s.sliding_window;
  if (s.linear_scaling > 0) c.rope_freq_scale = 1.0f / s.linear_scaling;
  if (s.longrope_original > 0) c.EnableLongRope(s.longrope_original);
  ApplyArch(*FindArch(s.arch), c);  // last: what the family implies depends on the dimensions
  return c;
}

}  // namespace

std::vector<std::string> ShapeNames() {
  std::vector<std::string> names;
  for (const ShapeRow& s : kShapes) names.push_back(s.name);
  return names;
}

Result<ModelShape> FindShape(std::string_view name) {
  for (const ShapeRow& s : kShapes) {
    if (name == s.name) return ModelShape{s.name, FromRow(s)};
  }
  std::string known;
  for (const std::string& n : ShapeNames()) known += (known.empty() ? "" : ", ") + n;
  return InvalidArgument("unknown shape '%s' (known: %s)", EscapeForMessage(name).c_str(),
                         known.c_str());
}

}  // namespace daisy::model
