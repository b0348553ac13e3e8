#include "pipeline/test_topology.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>


namespace daisy::pipeline::testing {

namespace fs = std::filesystem;

namespace {

template <typename T>
T Must(Result<T> r, const char* what) {
  if (!r.ok()) {
    std::fprintf(stderr, "test fixture: %s: %s\n", what, r.status().ToString().c_str());
    std::abort();
  }
  return std::move(*r);
}

}  // namespace

TempDir::TempDir(std::string_view name)
    : path(fs::temp_directory_path() / (std::string(name) + "-" + std::to_string(getpid()))) {
  fs::remove_all(path);
  fs::create_directories(path);
}

TempDir::~TempDir() {
  std::error_code ec;
  fs::remove_all(path, ec);
}

void CompileShards(const fs::path& model, const fs::path& out, int stages) {
  shard::CompileOptions c;
  c.model = model;
  c.out_dir = out;
  c.stages = stages;
  c.progress = false;
  if (auto r = shard::Compile(c); !r.ok()) {
    std::fprintf(stderr, "test fixture: compiling %s: %s\n", model.c_str(), r.status().ToString().c_str());
    std::abort();
  }
}

Topology::Topology(const TopologyOptions& o) {
  runtime::StageOptions base{.max_batch_rows = 64, .seq_capacity = o.capacity, .max_seqs = o.max_seqs};
  std::vector<const model::Model*> models;
  std::vector<runtime::StageOptions> opts;
  std::unique_ptr<RemoteChain> remote;
  if (o.kind == "whole") {
    whole = Must(model::Model::Load(o.model), "loading the model");
    models.push_back(whole.get());
    opts.push_back(base);
  } else {
    const int local = o.kind == "split" ? 2 : 1;
    for (int i = 0; i < local; ++i) {
      shards.push_back(Must(shard::LoadShard(shard::ShardPath(o.shards, i)), "loading a shard"));
      models.push_back(shards.back().model.get());
      opts.push_back(StageOptionsFor(shards.back().info, base));
    }
    if (o.kind == "remote") {
      WorkerOptions wo;
      wo.listen = {"127.0.0.1", 0};
      wo.threads = 1;
      worker = Must(Worker::Start(Must(shard::LoadShard(shard::ShardPath(o.shards, 1)), "loading stage 1"),
                                  std::move(wo)),
                    "starting a worker");
      RemoteOptions ro;
      ro.workers.push_back({"127.0.0.1", worker->port()});
      ro.max_rows = 64;
      ro.max_seqs = o.max_seqs;
      ro.seq_capacity = o.capacity;
      ro.connect_deadline = transport::Millis(1000);
      remote = Must(RemoteChain::Connect(ro, {shards[0].info}), "connecting to the worker");
    }
  }
  p = std::make_unique<Pipeline>(models, opts, kernels::BestKernels(), pool, std::move(remote));
}

}  // namespace daisy::pipeline::testing
