// Fixtures shared by the pipeline, speculative and scheduler tests: a temporary directory, a
// compile into stage shards, and a pipeline in one of three topologies over the same model.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "pipeline/pipeline.h"
#include "pipeline/worker.h"
#include "shard/compile.h"
#include "shard/load.h"

namespace daisy::pipeline::testing {

// <temp>/<name>-<pid>, emptied when made and removed when destroyed.
struct TempDir {
  std::filesystem::path path;
  explicit TempDir(std::string_view name);
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
};

// Compiles `model` into `stages` shards in `out`, quietly; a failure ends the test binary.
void CompileShards(const std::filesystem::path& model, const std::filesystem::path& out, int stages);

struct TopologyOptions {
  // "whole": `model` in one stage; "split": the 2 shards in `shards`, both in this process;
  // "remote": stage 0 here and stage 1 in a worker over loopback.
  std::string kind;
  std::filesystem::path model, shards;
  int capacity = 256;  // positions per sequence
  int max_seqs = 4;
};

struct Topology {
  runtime::ThreadPool pool{1};
  std::unique_ptr<model::Model> whole;
  std::vector<shard::Shard> shards;
  std::unique_ptr<Worker> worker;
  std::unique_ptr<Pipeline> p;

  explicit Topology(const TopologyOptions& o);
};

}  // namespace daisy::pipeline::testing
