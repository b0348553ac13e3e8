// What `daisy run` and `daisy serve` share: the flags that say where the model is (a whole
// model, in-process shards, workers, or a cluster file), loading it, and building the
// coordinator's Pipeline.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "apps/flags.h"
#include "kernels/kernel_table.h"
#include "model/model.h"
#include "pipeline/pipeline.h"
#include "transport/tls.h"
#include "coord/drafter.h"
#include "coord/generate.h"
#include "coord/k_controller.h"
#include "shard/load.h"
#include "tokenizer/tokenizer.h"

namespace daisy::apps {

struct CoordinatorFlags {
  std::string model;
  std::vector<std::string> shards;   // in-process stages, in order
  std::string workers;               // HOST:PORT,... for the remaining stages
  std::string cluster;               // TOML cluster file (pipeline/cluster.h)
  std::string key_file;
  bool tls = false;
  transport::TlsFiles tls_files;
  std::string wire = "f32";
  double connect_timeout = 30;
  double peer_timeout = 10;
  double forward_timeout = 300;
  bool mmap_weights = false;
  int threads = 0;
  int batch = 256;
  std::string kernels;
};

// Which of the flags a cluster file may fill were given on the command line (they win).
struct GivenFlags {
  Flag key_file;
  Flag wire;
  Flag connect_timeout;
  Flag peer_timeout;
  Flag forward_timeout;
};

// --tls (`tls_help` says which links) and --tls-cert, --tls-key, --tls-ca: coordinator and worker.
void AddTlsFlags(Flags& flags, bool& tls, transport::TlsFiles& files, const char* tls_help);

// --shard, --workers, --cluster, --key-file, --wire, --connect-timeout, --peer-timeout,
// --forward-timeout, --mmap-weights.
GivenFlags AddPipelineFlags(Flags& flags, CoordinatorFlags& f);
// Fills shards, workers (and the key, wire and timeout unless given) from --cluster FILE.
Status ApplyCluster(CoordinatorFlags& f, const GivenFlags& given);

struct Loaded {
  std::unique_ptr<model::Model> model;  // -m
  std::vector<shard::Shard> shards;          // --shard
  std::unique_ptr<tokenizer::Tokenizer> tokenizer;
  // Shared by a draft model loaded in the same process (MakeSpeculation): the target's and the
  // draft's forwards run one after the other on the coordinator's thread, and two pools of
  // spinning workers on the same cores would take turns stealing them from each other.
  std::shared_ptr<runtime::ThreadPool> pool;
  const kernels::KernelTable* kernels = nullptr;
  const model::Model& first() const { return model ? *model : *shards.front().model; }
  // A name for the model: general.name, else the file name.
  std::string name;
};

// `pool`: the threads to run on (nullptr: a new pool of f.threads).
Result<Loaded> Load(const CoordinatorFlags& f, std::shared_ptr<runtime::ThreadPool> pool = nullptr);

// The coordinator's pipeline: the model or the local shards, then the workers. `ctx`: KV
// positions per sequence; `max_seqs`: sequences at once; `rope_context`: the context the user
// asked for when `ctx` holds more (StageOptions::rope_context; 0: ctx).
Result<std::unique_ptr<pipeline::Pipeline>> MakePipeline(const CoordinatorFlags& f, Loaded& l,
                                                         int ctx, int max_seqs, int rope_context = 0);
int StageCount(pipeline::Pipeline& p);

// Speculative decoding (docs/speculative.md), for run and serve.
struct SpeculativeFlags {
  std::string draft;  // a draft model
  bool lookup = false;
  int k = 0;          // 0: adaptive
  int k_max = 12;
  std::string profile;  // --spec-profile: what the K controller learned, kept between runs
  bool any() const { return !draft.empty() || lookup; }
};
// --draft, --lookup, --spec-k, --spec-k-max, --spec-profile.
void AddSpeculativeFlags(Flags& flags, SpeculativeFlags& s);

struct Speculation {
  // What a --spec-profile is for: the target (its shards' fingerprint, or its file's name and
  // size) and the drafter (the draft's file name and size, or prompt lookup).
  std::string pair;
  Loaded draft;                                // --draft: the draft model
  std::unique_ptr<pipeline::Pipeline> draft_pipe;
  std::unique_ptr<coord::Drafter> drafter;  // null without --draft or --lookup
};
// Checks the flags; loads the draft (same threads, kernels and weight handling as the target)
// and checks that it shares the target's vocabulary token for token.
Result<std::unique_ptr<Speculation>> MakeSpeculation(const SpeculativeFlags& s, const CoordinatorFlags& f,
                                                     const Loaded& target, int ctx, int max_seqs,
                                                     int rope_context = 0);

}  // namespace daisy::apps
