// The architecture table: one row per model family daisy runs. A row gives the family's
// general.architecture name (also the prefix of its GGUF keys: `llama.embedding_length`) and
// the features it uses; ModelConfig::FromGguf (config.h) reads a file through its row, and the
// tensor binding (tensors.h) knows which optional tensors the family may carry. Adding a family
// is a row here, its tensors' row in tensors.cc, and whatever ops it needs that the recipe
// (runtime/stage.cc) lacks.
#pragma once

#include <string>
#include <string_view>

#include "base/status.h"
#include "gguf/reader.h"
#include "model/config.h"

namespace daisy::model {

struct ArchSpec {
  std::string_view name;  // general.architecture, and the prefix of the family's keys
  kernels::RopeMode rope_mode;
  Activation activation;
  bool embed_scale;  // embeddings multiplied by sqrt(d_model)
  bool qk_norm;      // per-head q/k RMS norms (attn_q_norm, attn_k_norm)
  bool post_norms;   // norms after the attention and FFN blocks
  bool qkv_bias;     // attn_q/k/v.bias required (Qwen2); other families may carry them optionally
  // Keys beyond the ones every family shares (sliding windows, soft-caps, per-layer RoPE
  // bases): read them into `c` (null: none), and write them as the family's converter does.
  Status (*read_extra)(const gguf::Reader& r, ModelConfig& c);
  void (*write_extra)(const ModelConfig& c, gguf::Writer& w);
  // What the family's keys fix rather than state (Gemma 3's local/global pattern, its local
  // RoPE base, its q scale), applied to a description before its layers are resolved (null:
  // nothing).
  void (*implied)(ModelConfig& c);
};

// The row for `name`, or nullptr.
const ArchSpec* FindArch(std::string_view name);
// "llama, qwen2, ...": for messages.
std::string ArchNames();
// Sets `c`'s architecture to `arch` with that family's features (RoPE mode, activation, norms,
// what its keys imply). Dimensions and windows are left as they are.
void ApplyArch(const ArchSpec& arch, ModelConfig& c);

}  // namespace daisy::model
