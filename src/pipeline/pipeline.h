// Pipeline: the coordinator's whole model — its own stages, run in this process (a monolithic
// model is the one-stage case; `--shard` files chain in-process), followed by any remote
// workers. Forwards can be submitted back to back and waited for later: the ring keeps them in
// order, so prefill chunks stream through the stages. Generate() is the one-sequence loop that
// `daisy run` uses on every topology.
#pragma once

#include <deque>
#include <functional>
#include <memory>
#include <vector>

#include "pipeline/local_stage.h"
#include "pipeline/remote.h"

namespace daisy::pipeline {

class Drafter;  // speculative.h
class KController;  // speculative.h

class Pipeline {
 public:
  // `models[i]` runs as in-process stage i with `options[i]`; `remote` (may be null) continues.
  Pipeline(std::vector<const model::Model*> models, std::vector<runtime::StageOptions> options,
           const kernels::KernelTable& kernels, runtime::ThreadPool& pool,
           std::unique_ptr<RemoteChain> remote);

  // Runs the local stages now and hands the rest to the workers. `tokens`: one per row.
  Status Submit(const ForwardHeader& h, std::span<const int32_t> tokens);
  Result<ResultMsg> Wait(uint64_t id);
  Result<ResultMsg> Forward(const ForwardHeader& h, std::span<const int32_t> tokens);
  Status Release(std::span<const int32_t> seqs);
  // After a failure: forget every sequence, rebuild the ring.
  Status Recover();

  const model::ModelConfig& config() const { return config_; }
  // Stages in all: this process's and the workers'.
  int n_stages() const;
  int n_local() const { return static_cast<int>(local_.size()); }
  // Whether the workers' ring is down (a lost, silent or failing worker), and why; a pipeline
  // without workers is never down. Recover() rebuilds it.
  bool broken() const;
  std::string why_broken() const;
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

// What the last stage returns for the next token of a sequence whose tokens so far are
// `history`: the argmax when greedy (temperature 0, no repetition penalty), else a token drawn
// there, seeded by (seed, position), with the recent tokens when a penalty is on.
OutputSpec NextTokenSpec(const runtime::SamplingParams& sp, std::span<const int32_t> history);

// Runs `tokens` as sequence `seq` from position `start` in chunks streamed without waiting;
// the last chunk's last row asks for `out`. Returns that chunk's result.
Result<ResultMsg> Prefill(Pipeline& p, int32_t seq, std::span<const int32_t> tokens, int32_t start,
                          int prefill_chunk, const OutputSpec& out);

struct GenerateOptions {
  int max_tokens = 16;
  int prefill_chunk = 256;
  runtime::SamplingParams sampling;
  std::function<bool(int32_t)> is_eog;
  // Speculative decoding (speculative.h): drafts from `drafter` (null: plain decoding),
  // `spec_k` per verify (0: adaptive, up to spec_k_max).
  Drafter* drafter = nullptr;
  int spec_k = 0;
  int spec_k_max = 12;
  // The K controller to use (null: a fresh one for spec_k, spec_k_max); the caller's keeps what
  // it learned (daisy run --spec-profile restores it before and saves it after).
  KController* k_control = nullptr;
};

struct GenerateStats {
  int prompt_tokens = 0;
  double prompt_seconds = 0;
  int generated = 0;
  double decode_seconds = 0;
  std::vector<float> logprobs;  // of each generated token, as the last stage computed it
  int steps = 0;      // decode forwards
  int verifies = 0;   // of them, those that carried drafts
  int drafted = 0;
  int accepted = 0;
  std::vector<int> k_chosen;             // drafts per verify
  std::vector<int> accepted_per_verify;  // of them, accepted
  std::vector<std::vector<float>> draft_confidence;  // per verify, the draft model's in each draft
  int confidence_stops = 0;  // verifies whose drafting the draft's confidence ended below K
  std::vector<double> verify_seconds;    // each verify's forward
};

// One sequence: chunked prefill (chunks streamed without waiting), then one forward per token.
// Greedy asks the last stage for the argmax; sampling for a token drawn there (the seed and the
// position travel with the forward, plus the recent tokens when a repetition penalty is on).
// The sequence is released on every stage at the end, also on failure.
Result<std::vector<int32_t>> Generate(Pipeline& p, int32_t seq, const std::vector<int32_t>& prompt,
                                      const GenerateOptions& options,
                                      const std::function<bool(int32_t)>& on_token,
                                      GenerateStats* stats);

}  // namespace daisy::pipeline
