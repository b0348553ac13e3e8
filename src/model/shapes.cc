// The named shapes `daisy gen-model --shape` makes: two small test shapes of our own and the
// real Llama 3.x models' dimensions.
#include "base/strings.h"
#include "model/config.h"

namespace daisy::model {
namespace {

ModelConfig Shape(int d_model, int n_layers, int n_heads, int n_kv_heads, int d_ff, int ctx,
                  float theta, bool tied, int n_vocab, float scaling_factor) {
  ModelConfig c;
  c.n_vocab = n_vocab;
  c.d_model = d_model;
  c.n_layers = n_layers;
  c.n_heads = n_heads;
  c.n_kv_heads = n_kv_heads;
  c.head_dim = d_model / n_heads;
  c.d_ff = d_ff;
  c.context_length = ctx;
  c.rope_theta = theta;
  c.tied_embeddings = tied;
  c.rope_scaling.enabled = scaling_factor > 0;
  if (scaling_factor > 0) c.rope_scaling.factor = scaling_factor;
  return c;
}

}  // namespace

std::vector<std::string> ShapeNames() {
  return {"tiny", "small", "llama-3.2-1b", "llama-3.2-3b", "llama-3.1-8b", "llama-3.1-70b"};
}

Result<ModelShape> FindShape(std::string_view name) {
  constexpr int kLlama3Vocab = 128256;
  if (name == "tiny") return ModelShape{"tiny", Shape(64, 2, 4, 2, 192, 4096, 10000, false, 0, 0)};
  if (name == "small") {
    return ModelShape{"small", Shape(256, 4, 8, 2, 768, 4096, 500000, false, 0, 0)};
  }
  if (name == "llama-3.2-1b") {
    return ModelShape{std::string(name),
                      Shape(2048, 16, 32, 8, 8192, 131072, 500000, true, kLlama3Vocab, 32)};
  }
  if (name == "llama-3.2-3b") {
    return ModelShape{std::string(name),
                      Shape(3072, 28, 24, 8, 8192, 131072, 500000, true, kLlama3Vocab, 32)};
  }
  if (name == "llama-3.1-8b") {
    return ModelShape{std::string(name),
                      Shape(4096, 32, 32, 8, 14336, 131072, 500000, false, kLlama3Vocab, 8)};
  }
  if (name == "llama-3.1-70b") {
    return ModelShape{std::string(name),
                      Shape(8192, 80, 64, 8, 28672, 131072, 500000, false, kLlama3Vocab, 8)};
  }
  std::string known;
  for (const std::string& n : ShapeNames()) known += (known.empty() ? "" : ", ") + n;
  return InvalidArgument("unknown shape '%s' (known: %s)", EscapeForMessage(name).c_str(),
                         known.c_str());
}

}  // namespace daisy::model
