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
  // Keys beyond the ones every family shares (sliding windows, soft-caps, per-layer RoPE
  // bases): read them into `c` (null: none).
  Status (*read_extra)(const gguf::Reader& r, ModelConfig& c);
};

// The row for `name`, or nullptr.
const ArchSpec* FindArch(std::string_view name);
// "llama": for messages.
std::string ArchNames();

}  // namespace daisy::model
