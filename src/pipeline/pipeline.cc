#include "pipeline/pipeline.h"

#include <algorithm>
#include <chrono>


namespace daisy::pipeline {

Pipeline::Pipeline(std::vector<const model::Model*> models,
                   std::vector<runtime::StageOptions> options, const kernels::KernelTable& kernels,
                   runtime::ThreadPool& pool, std::unique_ptr<RemoteChain> remote)
    : config_(models.front()->config()), remote_(std::move(remote)) {
  for (size_t i = 0; i < models.size(); ++i) {
    local_.push_back(std::make_unique<LocalStage>(*models[i], options[i], kernels, pool));
  }
}

Status Pipeline::Submit(const ForwardHeader& h, std::span<const int32_t> tokens) {
  std::span<const float> in;
  for (size_t i = 0; i < local_.size(); ++i) {
    std::vector<float>& out = i % 2 == 0 ? a_ : b_;
    ResultMsg result;
    Status s = local_[i]->Run(h, i == 0 ? tokens : std::span<const int32_t>{}, in, out, &result);
    if (!s.ok()) return s.With("stage " + std::to_string(i));
    if (local_[i]->head()) {
      local_results_.push_back(std::move(result));
      return Status::Ok();
    }
    if (h.last_stage == static_cast<int>(i)) {
      ResultMsg done;
      done.id = h.id;
      local_results_.push_back(std::move(done));
      return Status::Ok();
    }
    in = out;
  }
  if (remote_ == nullptr) return Internal("the pipeline has no last stage");
  ForwardHeader w = h;
  w.dim = config_.d_model;
  return remote_->Send(w, in);
}

Result<ResultMsg> Pipeline::Wait(uint64_t id) {
  for (auto it = local_results_.begin(); it != local_results_.end(); ++it) {
    if (it->id == id) {
      ResultMsg r = std::move(*it);
      local_results_.erase(it);
      return r;
    }
  }
  if (remote_ == nullptr) return Internal("no result for forward %llu", static_cast<unsigned long long>(id));
  return remote_->Wait(id);
}

Result<ResultMsg> Pipeline::Forward(const ForwardHeader& h, std::span<const int32_t> tokens) {
  DAISY_RETURN_IF_ERROR(Submit(h, tokens));
  return Wait(h.id);
}

Status Pipeline::Release(std::span<const int32_t> seqs) {
  for (auto& s : local_) {
    for (int32_t q : seqs) s->Release(q);
  }
  return remote_ != nullptr ? remote_->Release(seqs) : Status::Ok();
}

int Pipeline::n_stages() const {
  return n_local() + (remote_ != nullptr ? static_cast<int>(remote_->shards().size()) : 0);
}

bool Pipeline::broken() const { return remote_ != nullptr && remote_->broken(); }

std::string Pipeline::why_broken() const { return remote_ != nullptr ? remote_->why_broken() : ""; }

size_t Pipeline::local_sequences() const {
  size_t n = 0;
  for (const auto& s : local_) n += s->stage().kv().n_sequences();
  return n;
}

std::vector<int64_t> Pipeline::stage_sequences() const {
  std::vector<int64_t> out;
  for (const auto& s : local_) out.push_back(static_cast<int64_t>(s->stage().kv().n_sequences()));
  if (remote_ != nullptr) {
    const std::vector<int64_t> remote = remote_->held_sequences();
    out.insert(out.end(), remote.begin(), remote.end());
  }
  return out;
}

std::vector<uint64_t> Pipeline::stage_failures() const {
  std::vector<uint64_t> out(local_.size(), 0);
  if (remote_ != nullptr) {
    const std::vector<uint64_t> remote = remote_->failures();
    out.insert(out.end(), remote.begin(), remote.end());
  }
  return out;
}

uint64_t Pipeline::wire_bytes_sent() const { return remote_ != nullptr ? remote_->wire_bytes_sent() : 0; }

Status Pipeline::Recover(std::span<const int32_t> keep) {
  for (auto& s : local_) s->KeepOnly(keep);
  local_results_.clear();
  // The workers free what they kept of sequences that ended meanwhile (their release may have
  // been lost with the ring) before they answer the Configure: no release in flight can meet a
  // sequence id used again.
  return remote_ != nullptr ? remote_->Reconnect(keep) : Status::Ok();
}

std::vector<int32_t> Pipeline::HeldLengths(int32_t seq) const {
  std::vector<int32_t> out;
  for (const auto& s : local_) out.push_back(s->stage().kv().Length(seq));
  if (remote_ != nullptr) {
    for (const auto& stage : remote_->kept()) {
      auto it = stage.find(seq);
      out.push_back(it == stage.end() ? 0 : it->second);
    }
  }
  return out;
}

}  // namespace daisy::pipeline
