// Pipeline: the coordinator's whole model — its own stages, run in this process (a monolithic
// model is the one-stage case; `--shard` files chain in-process), followed by any remote
// workers. Forwards can be submitted back to back and waited for later: the ring keeps them in
// order, so prefill chunks stream through the stages. The decode loops that drive it are the
// coordinator's (coord/generate.h, coord/scheduler.h).
#pragma once

#include <deque>
#include <functional>
#include <memory>
#include <vector>

#include "pipeline/local_stage.h"
#include "pipeline/remote.h"

namespace daisy::pipeline {

class Pipeline {
 public:
  // `models[i]` runs as in-process stage i with `options[i]`; `remote` (may be null) continues.
  Pipeline(std::vector<const model::Model*> models, std::vector<runtime::StageOptions> options,
           const kernels::KernelTable& kernels, runtime::ThreadPool& pool,
           std::unique_ptr<RemoteChain> remote);

  // Runs the local stages now and hands the rest to the workers. `tokens`: one per row. A
  // forward with h.last_stage set ends at that stage, whose result has no sequences.
  Status Submit(const ForwardHeader& h, std::span<const int32_t> tokens);
  Result<ResultMsg> Wait(uint64_t id);
  Result<ResultMsg> Forward(const ForwardHeader& h, std::span<const int32_t> tokens);
  Status Release(std::span<const int32_t> seqs);
  // After a failure: rebuilds the ring, keeping the KV of the sequences in `keep` wherever it
  // survived (this process's stages, and workers that are still the ones configured last) and
  // freeing every other sequence. HeldLengths then says what survived.
  Status Recover(std::span<const int32_t> keep);
  // Per stage, the positions of `seq` held there (0: none). After Recover, a worker's count is
  // what it kept.
  std::vector<int32_t> HeldLengths(int32_t seq) const;

  const model::ModelConfig& config() const { return config_; }
  // Stages in all: this process's and the workers'.
  int n_stages() const;
  int n_local() const { return static_cast<int>(local_.size()); }
  // Whether the workers' ring is down (a lost, silent or failing worker), and why; a pipeline
  // without workers is never down. Recover() rebuilds it.
  bool broken() const;
  std::string why_broken() const;
  // Sequences holding KV in this process's stages (summed over them).
  size_t local_sequences() const;
  // Per stage, the sequences holding KV: the local stages' own (call from the thread that runs
  // them), the workers' as their last pongs said (-1: not known yet).
  std::vector<int64_t> stage_sequences() const;
  // Per stage, the times the ring went down because of that stage's worker (0 for local stages).
  // Thread-safe.
  std::vector<uint64_t> stage_failures() const;
  // Bytes of forwards sent to the workers so far (frames included).
  uint64_t wire_bytes_sent() const;
  uint64_t NextId() { return ++next_id_; }

 private:
  model::ModelConfig config_;
  std::vector<std::unique_ptr<LocalStage>> local_;
  std::unique_ptr<RemoteChain> remote_;
  std::deque<ResultMsg> local_results_;
  std::vector<float> a_, b_;
  uint64_t next_id_ = 0;
};

}  // namespace daisy::pipeline
