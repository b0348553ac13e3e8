// The pipeline shard format (docs/shard-format.md): a GGUF v3 file holding one stage of a Llama
// model, written by `daisy compile`. Metadata: every key of the source model (tokenizer.* only on
// stage 0), llama.vocab_size and daisy.tied_embeddings (a shard may hold neither embeddings nor
// head), and the daisy.shard.* keys below. Tensors: the stage's layers (plus token_embd on stage
// 0, output_norm and the head on the last stage, rope_freqs on every stage); q8_0/q4_0 matrices
// already in the kernels' packed layout (model/model.h), data aligned to 4096 bytes.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "gguf/reader.h"

namespace daisy::shard {

// 2: the description replaces the family keys (1: llama.* keys).
inline constexpr uint32_t kFormatVersion = 2;
inline constexpr uint32_t kAlignment = 4096;
inline constexpr std::string_view kFileSuffix = ".daisy";

inline constexpr std::string_view kKeyFormatVersion = "daisy.shard.format_version";
inline constexpr std::string_view kKeyFingerprint = "daisy.shard.fingerprint";
inline constexpr std::string_view kKeyStage = "daisy.shard.stage";
inline constexpr std::string_view kKeyStages = "daisy.shard.stage_count";
inline constexpr std::string_view kKeyFirstLayer = "daisy.shard.first_layer";
inline constexpr std::string_view kKeyLastLayer = "daisy.shard.last_layer";  // exclusive
inline constexpr size_t kFingerprintChars = 32;  // XXH3-128 in hex

// What a shard says about itself.
struct ShardInfo {
  std::string file;
  uint32_t format_version = 0;
  std::string fingerprint;  // of the source model: every metadata byte and every tensor byte
  int stage = 0;
  int n_stages = 0;
  int first_layer = 0;
  int last_layer = 0;  // exclusive
  int n_layers = 0;    // of the whole model
  int d_model = 0;
  int n_vocab = 0;
  std::string model_name;  // general.name, or ""

  bool embeddings() const { return stage == 0; }
  bool head() const { return stage == n_stages - 1; }
  // "stage 1 of 3, layers 6-11 of 16"
  std::string Describe() const;
};

// Reads and checks the daisy.shard.* keys. A plain GGUF (no daisy.shard keys) is an
// InvalidArgument saying to run `daisy compile`; a different format version is Unimplemented
// naming both versions.
Result<ShardInfo> ReadShardInfo(const gguf::Reader& reader);

// Checks that `shards` (in pipeline order) are the stages of one compiled model: same format
// version and fingerprint, stage i at position i of the same stage count, layer ranges that
// cover every layer exactly once. The message names the offending shard and what is wrong.
Status CheckChain(const std::vector<ShardInfo>& shards);

}  // namespace daisy::shard
