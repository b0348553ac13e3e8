// LocalStage: a runtime::Stage driven by pipeline messages — rows described by a ForwardHeader,
// token ids (first stage) or hidden states in, hidden states or the last stage's outputs out.
// The worker and the coordinator's in-process stages both run through it. Thread-compatible.
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "pipeline/protocol.h"
#include "runtime/stage.h"
#include "shard/format.h"

namespace daisy::pipeline {

// `base` (batch and KV limits) with the shard's layer range, embeddings and head.
runtime::StageOptions StageOptionsFor(const shard::ShardInfo& info, runtime::StageOptions base);

class LocalStage {
 public:
  LocalStage(const model::Model& model, const runtime::StageOptions& options,
             const kernels::KernelTable& kernels, runtime::ThreadPool& pool);

  // Runs the rows of `h`. First stage: `tokens` has one id per row; else `hidden_in` holds
  // [rows, d_model]. Last stage: fills `result`; else `hidden_out` gets [rows, d_model].
  Status Run(const ForwardHeader& h, std::span<const int32_t> tokens,
             std::span<const float> hidden_in, std::vector<float>& hidden_out, ResultMsg* result);

  void Release(int32_t seq) { stage_->Release(seq); }
  // Frees every sequence not in `keep`; returns the kept ones with their lengths (a resume).
  std::vector<std::pair<int32_t, int32_t>> KeepOnly(std::span<const int32_t> keep);
  // Forgets every sequence (a new session).
  void Reset();
  bool head() const { return options_.head; }
  bool embeddings() const { return options_.embeddings; }
  const runtime::Stage& stage() const { return *stage_; }

 private:
  const model::Model& model_;
  runtime::StageOptions options_;
  const kernels::KernelTable& kernels_;
  runtime::ThreadPool& pool_;
  std::unique_ptr<runtime::Stage> stage_;
  std::vector<runtime::BatchRow> rows_;
  std::vector<float> logits_;
};

}  // namespace daisy::pipeline
