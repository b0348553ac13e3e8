// The model description: what a model is, apart from how it is computed. One table of
// architectures (arch.h) says, per family, its GGUF key prefix and which features it uses; a
// ModelConfig is one model's resolved description — its dimensions, its features and its
// per-layer attention — read in one place (FromGguf) from either a model file (the family's own
// keys, `llama.*` for Llama) or a daisy shard (the description itself, `daisy.model.*` keys,
// docs/shard-format.md). The runtime's recipe (runtime/stage.h) reads only this.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "gguf/reader.h"
#include "gguf/writer.h"
#include "kernels/ops.h"

namespace daisy::model {

// The gated feed-forward's activation: silu(gate) * up (SwiGLU) or gelu(gate) * up (GeGLU).
enum class Activation : uint8_t { kSilu = 0, kGeluTanh = 1 };
const char* ActivationName(Activation a);
const char* RopeModeName(kernels::RopeMode m);

// Llama 3.1's rope frequency scaling ("llama3" rope type), stored by converters as the
// rope_freqs.weight tensor computed from these factors.
struct RopeScaling {
  bool enabled = false;
  float factor = 8.0f;
  float low_freq_factor = 1.0f;
  float high_freq_factor = 4.0f;
  int original_context = 8192;
};

// Attention of one layer: its RoPE base, its linear RoPE scale and its window.
struct LayerSpec {
  float rope_theta = 10000.0f;
  float rope_freq_scale = 1.0f;  // angles multiplied by this (linear RoPE scaling: 1 / factor)
  int32_t sliding_window = 0;  // positions attended (itself included); 0: every earlier position
  bool operator==(const LayerSpec&) const = default;
};

// The most layers a model may have: far beyond any released model (Llama 3.1 405B has 126), and
// small enough that the per-layer tables a description sizes from its block_count stay small
// whatever a malformed file says.
inline constexpr int kMaxLayers = 4096;

struct ModelConfig {
  std::string arch = "llama";  // a row of the architecture table (arch.h)
  int n_vocab = 0;
  int d_model = 0;
  int n_layers = 0;
  int n_heads = 0;
  int n_kv_heads = 0;
  int head_dim = 0;  // from the family's own key, else d_model / n_heads
  int d_ff = 0;
  int context_length = 0;
  float rms_eps = 1e-5f;
  float rope_theta = 10000.0f;  // the base of every layer unless `layers` says otherwise
  float rope_freq_scale = 1.0f;  // linear RoPE scaling of the global layers (1 / rope.scaling.factor)
  // Interleaved local and global attention (Gemma 3): with swa_pattern P > 0, layer l is local
  // when l % P < P - 1 (attends `sliding_window` positions, RoPE base rope_theta_swa, unscaled);
  // with P = 0 and a window, every layer is local. Resolve() turns these into `layers`.
  int32_t sliding_window = 0;
  int32_t swa_pattern = 0;
  float rope_theta_swa = 10000.0f;
  kernels::RopeMode rope_mode = kernels::RopeMode::kNorm;
  Activation activation = Activation::kSilu;
  bool tied_embeddings = false;  // no output.weight: the LM head reuses token_embd (Llama 3.2)
  RopeScaling rope_scaling;      // known at generation; at load, rope_freqs.weight says it all
  // Phi-3's LongRoPE (rope_factors_long/short.weight, one factor per pair as rope_freqs): a
  // sequence that may hold more than rope_original_context positions (the stage's KV capacity,
  // as llama.cpp decides by its context size) uses the long factors, else the short ones.
  // Known at generation; at load, the tensors say it.
  bool longrope = false;
  int rope_original_context = 0;  // rope.scaling.original_context_length (0: context_length)
  // cos and sin multiplied by this (rope.scaling.attn_factor, any family; LongRoPE's
  // sqrt(1 + ln(context / original) / ln(original))).
  float rope_attn_factor = 1.0f;
  // Features some families use (none of them Llama's): embeddings multiplied by sqrt(d_model),
  // per-head q/k RMS norms, norms after the attention and FFN blocks, tanh soft-caps on the
  // final logits and on attention scores (0: none).
  bool embed_scale = false;
  bool qk_norm = false;
  bool post_norms = false;
  float logit_softcap = 0;
  float attn_softcap = 0;
  // Gemma 3 multiplies q by this before attention and leaves the scores unscaled; 0: the
  // scores are scaled by 1 / sqrt(head_dim) (everyone else).
  float attn_q_scale = 0;
  // Per layer (n_layers entries; empty until FromGguf/Resolve fills it).
  std::vector<LayerSpec> layers;

  // Reads a model file's family keys (general.architecture names a row of arch.h) or a shard's
  // description. Errors say which key is missing or which value is inconsistent (for example
  // heads not dividing d_model), or which architecture or feature daisy does not run.
  static Result<ModelConfig> FromGguf(const gguf::Reader& reader);
  // Fills `layers` from the uniform values (and the local/global pattern) when empty, then
  // checks the dimensions.
  Status Resolve();
  // The per-layer attention the uniform values describe.
  std::vector<LayerSpec> UniformLayers() const;
  Status Validate() const;
  // What this build cannot compute of the description: Unimplemented naming the feature and
  // the architecture, or OK.
  Status CheckSupported() const;

  // Writes the description as daisy.model.* keys (a shard) / as the family's own GGUF keys (a
  // model file, as its converter would).
  // WriteFamilyKeys writes only what CheckFamilyKeys accepts: the family's features, uniform
  // layers.
  void WriteDescription(gguf::Writer& w) const;
  Status CheckFamilyKeys() const;
  Status WriteFamilyKeys(gguf::Writer& w) const;

  // What the model uses beyond the plain Llama block, as short phrases ("neox rope",
  // "q/k norms", "sliding window 512 (22 of 26 layers)", ...): for daisy inspect and logs.
  std::vector<std::string> FeatureNames() const;

  // Turns LongRoPE on from `original` positions to context_length, with the attention factor
  // Phi-3's converter writes: sqrt(1 + ln(context / original) / ln(original)), 1 when the
  // context is not longer.
  void EnableLongRope(int original);
  // Whether a stage holding `seq_capacity` positions per sequence rotates by the long factors.
  bool UsesLongRopeFactors(int seq_capacity) const {
    return longrope && seq_capacity > (rope_original_context > 0 ? rope_original_context : context_length);
  }

  int q_dim() const { return n_heads * head_dim; }
  int kv_dim() const { return n_kv_heads * head_dim; }
};

// The key of a shard's description: "daisy.model." + name.
std::string DescriptionKey(std::string_view name);
// Whether `reader` holds a description (a shard) rather than family keys.
bool HasDescription(const gguf::Reader& reader);

// A named shape: "tiny", "small" (test shapes of our own), "llama-3.2-1b", "llama-3.2-3b",
// "llama-3.1-8b", "llama-3.1-70b" (the real models' dimensions).
struct ModelShape {
  std::string name;
  ModelConfig config;  // n_vocab: the real model's (0 = whatever the tokenizer has)
};

Result<ModelShape> FindShape(std::string_view name);
std::vector<std::string> ShapeNames();

}  // namespace daisy::model
