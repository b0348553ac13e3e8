#include "pipeline/local_stage.h"

#include <algorithm>

#include "pipeline/outputs.h"

namespace daisy::pipeline {

runtime::StageOptions StageOptionsFor(const shard::ShardInfo& info, runtime::StageOptions base) {
  base.first_layer = info.first_layer;
  base.last_layer = info.last_layer;
  base.embeddings = info.embeddings();
  base.head = info.head();
  return base;
}

LocalStage::LocalStage(const model::Model& model, const runtime::StageOptions& options,
                       const kernels::KernelTable& kernels, runtime::ThreadPool& pool)
    : model_(model), options_(options), kernels_(kernels), pool_(pool) {
  Reset();
}

void LocalStage::Reset() {
  stage_ = std::make_unique<runtime::Stage>(model_, options_, kernels_, pool_);
}

std::vector<std::pair<int32_t, int32_t>> LocalStage::KeepOnly(std::span<const int32_t> keep) {
  std::vector<std::pair<int32_t, int32_t>> kept;
  for (const auto& [seq, length] : stage_->kv().Lengths()) {
    if (std::find(keep.begin(), keep.end(), seq) == keep.end()) {
      stage_->Release(seq);
    } else {
      kept.emplace_back(seq, length);
    }
  }
  return kept;
}

Status LocalStage::Run(const ForwardHeader& h, std::span<const int32_t> tokens,
                       std::span<const float> hidden_in, std::vector<float>& hidden_out,
                       ResultMsg* result) {
  const int n = h.total_rows();
  if (options_.embeddings && tokens.size() != static_cast<size_t>(n)) {
    return InvalidArgument("%zu tokens for %d rows", tokens.size(), n);
  }
  rows_.clear();
  int logit_rows = 0;
  for (const SeqRows& s : h.seqs) {
    const int want = LogitRows(s);
    for (int i = 0; i < s.n_rows; ++i) {
      const bool logits = options_.head && (want == s.n_rows || (want == 1 && i == s.n_rows - 1));
      rows_.push_back({s.seq, s.start_pos + i,
                       options_.embeddings ? tokens[rows_.size()] : 0, logits});
      logit_rows += logits ? 1 : 0;
    }
  }
  const auto& c = stage_->config();
  if (options_.head) {
    logits_.resize(static_cast<size_t>(logit_rows) * c.n_vocab);
    DAISY_RETURN_IF_ERROR(stage_->Forward(rows_, hidden_in, logits_));
    if (result != nullptr) *result = ComputeOutputs(h.id, h.seqs, logits_, c.n_vocab, stage_->kernels().ops);
    return Status::Ok();
  }
  hidden_out.resize(static_cast<size_t>(n) * c.d_model);
  return stage_->Forward(rows_, hidden_in, hidden_out);
}

}  // namespace daisy::pipeline
