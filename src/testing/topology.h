// A pipeline in one of three topologies over the same model, for the pipeline, speculative and
// scheduler tests (test code only).
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "pipeline/pipeline.h"
#include "pipeline/worker.h"
#include "shard/load.h"
#include "testing/fixtures.h"

namespace daisy::testing {

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
  std::unique_ptr<pipeline::Worker> worker;
  std::unique_ptr<pipeline::Pipeline> p;

  explicit Topology(const TopologyOptions& o);
};

}  // namespace daisy::testing
