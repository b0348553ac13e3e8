// daisy compile: splits a Llama GGUF into pipeline shards (shard/format.h), streaming: each
// tensor is read from the mapped source, packed in chunks of rows and written out, and the
// source pages are dropped once used, so peak memory stays near a few tens of MB whatever the
// model size (plus the scales of the largest matrix, 1/9 of its bytes for q4_0).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "base/status.h"
#include "shard/format.h"
#include "shard/plan.h"

namespace daisy::shard {

struct CompileOptions {
  std::filesystem::path model;
  std::filesystem::path out_dir;
  int stages = 0;                   // balanced split (PlanBalanced) unless one of:
  std::vector<int> layer_counts;    // explicit layers per stage
  std::vector<uint64_t> memory;     // per-node memory (PlanByMemory)
  bool progress = true;             // progress lines on stderr
};

struct CompiledShard {
  ShardInfo info;
  std::filesystem::path path;
  uint64_t bytes = 0;
};

struct CompileReport {
  std::string fingerprint;
  std::vector<CompiledShard> shards;
  double seconds = 0;
};

// Writes out_dir/stage-<i>.daisy for every stage (via a temporary name, renamed once complete:
// a failed compile leaves no shard behind).
Result<CompileReport> Compile(const CompileOptions& options);

// Path of stage i's shard in a compile output directory.
std::filesystem::path ShardPath(const std::filesystem::path& dir, int stage);

}  // namespace daisy::shard
