#include "testing/topology.h"

#include "shard/compile.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>

namespace daisy::testing {

using pipeline::Pipeline;
using pipeline::RemoteChain;
using pipeline::RemoteOptions;
using pipeline::Worker;
using pipeline::WorkerOptions;

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
      opts.push_back(pipeline::StageOptionsFor(shards.back().info, base));
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

}  // namespace daisy::testing
