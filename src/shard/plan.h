// Planning a split: which layers go to which stage. A plan is the list of stage boundaries,
// bounds[i] = first layer of stage i, bounds[n_stages] = n_layers; every stage gets at least one
// layer. Stage 0 also holds the embeddings, the last stage the final norm and the LM head.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"

namespace daisy::shard {

struct SplitCosts {
  std::vector<uint64_t> layer_bytes;  // weight bytes of each layer
  uint64_t embed_bytes = 0;           // token_embd (stored on stage 0; one row read per token)
  uint64_t head_bytes = 0;            // output_norm + LM head (read in full for every token)
  uint64_t shared_bytes = 0;          // on every stage (rope_freqs)
};

// Balanced by the weight bytes each stage reads per token (its layers, plus the head on the
// last stage): that is what a stage's decode time is proportional to, and the pipeline runs at
// the pace of its slowest stage. Minimises the largest stage.
Result<std::vector<int>> PlanBalanced(const SplitCosts& costs, int n_stages);

// Split for nodes of different memory: minimises the largest (bytes stored / memory) over the
// stages; an InvalidArgument when even the best split leaves some stage over its memory.
Result<std::vector<int>> PlanByMemory(const SplitCosts& costs, std::span<const uint64_t> memory);

// An explicit split: `counts[i]` layers on stage i. They must be positive and add up to n_layers.
Result<std::vector<int>> PlanExplicit(int n_layers, std::span<const int> counts);

// Bytes stored on stage i of `bounds` (layers, plus embeddings/head/shared as placed; a tied
// head stores the embeddings again on the last stage when it is not stage 0).
uint64_t StoredBytes(const SplitCosts& costs, std::span<const int> bounds, int stage, bool tied);

// "16G" / "512M" / "1.5G" / plain bytes -> bytes.
Result<uint64_t> ParseBytes(const std::string& text);

}  // namespace daisy::shard
