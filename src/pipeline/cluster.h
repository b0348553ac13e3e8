// Cluster files: one TOML file that describes a whole pipeline, so that the coordinator
// (`daisy run|serve --cluster FILE`) and every worker (`daisy worker --cluster FILE --stage N`)
// start from the same description instead of repeating shard paths, addresses and the key on
// each command line. Format (docs/cluster-file.md):
//
//   key_file = "cluster.key"          # optional; relative paths are relative to this file
//   tls = true                        # optional: TLS 1.3 on every link, keyed by key_file
//   wire = "f32"                      # optional: f32 | bf16 | f16 | q8_0
//   connect_timeout = 30              # optional, seconds
//   peer_timeout = 10                 # optional, seconds a worker may stay silent (0: never fail)
//   forward_timeout = 300             # optional, seconds a forward may take (0: no bound)
//
//   [[stage]]                         # stage 0: run by the coordinator (no address)
//   shard = "shards/stage-0.daisy"
//
//   [[stage]]
//   shard = "shards/stage-1.daisy"
//   address = "192.168.1.12:7000"     # where the coordinator dials this stage
//   listen = "0.0.0.0:7000"           # optional: what its worker binds (default: address)
//
// Stages without an address run inside the coordinator and must come first; every later stage
// is a worker. Unknown keys are errors: a misspelt key must not be silently ignored.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"

namespace daisy::pipeline {

struct ClusterStage {
  std::string shard;    // path, resolved against the file's directory
  std::string address;  // HOST:PORT the coordinator dials; empty: runs in the coordinator
  std::string listen;   // HOST:PORT the worker binds (defaults to address)
  std::vector<std::string> standby;  // HOST:PORT of workers holding the same shard, in order
};

struct ClusterFile {
  std::string path;
  std::string key_file;                   // empty: open cluster
  bool tls = false;                       // every node runs --tls
  std::optional<std::string> wire;
  std::optional<double> connect_timeout;  // seconds
  std::optional<double> peer_timeout;     // seconds
  std::optional<double> forward_timeout;  // seconds
  std::vector<ClusterStage> stages;

  std::vector<std::string> LocalShards() const;  // the coordinator's stages, in order
  std::string Workers() const;                   // "HOST:PORT,HOST:PORT" of the rest
};

// Parses and validates; errors name the file, the line and what is wrong.
Result<ClusterFile> ParseClusterFile(const std::string& text, const std::filesystem::path& path);
Result<ClusterFile> LoadClusterFile(const std::filesystem::path& path);

}  // namespace daisy::pipeline
