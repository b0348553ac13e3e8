#include "pipeline/pipeline.h"

#include <algorithm>
#include <chrono>

namespace daisy::pipeline {

Pipeline::Pipeline(std::vector<const model::LlamaModel*> models,
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

Status Pipeline::Recover() {
  for (auto& s : local_) s->Reset();
  local_results_.clear();
  return remote_ != nullptr ? remote_->Reconnect() : Status::Ok();
}

namespace {
double Since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}
}  // namespace

OutputSpec NextTokenSpec(const runtime::SamplingParams& sp, std::span<const int32_t> history) {
  OutputSpec o;
  const bool penalty = sp.repeat_penalty != 1.0f && sp.repeat_last_n != 0;
  if (sp.temperature <= 0 && !penalty) return o;  // kArgmax
  o.kind = OutputKind::kSample;
  o.sampling = sp;
  o.position = history.size();
  if (penalty) {
    const size_t n = sp.repeat_last_n < 0 ? history.size()
                                          : std::min<size_t>(history.size(), sp.repeat_last_n);
    o.history.assign(history.end() - static_cast<std::ptrdiff_t>(std::min<size_t>(n, 4096)), history.end());
  }
  return o;
}

Result<std::vector<int32_t>> Generate(Pipeline& p, int32_t seq, const std::vector<int32_t>& prompt,
                                      const GenerateOptions& options,
                                      const std::function<bool(int32_t)>& on_token,
                                      GenerateStats* stats) {
  if (prompt.empty()) return InvalidArgument("empty prompt: give at least one token");
  GenerateStats local;
  GenerateStats& st = stats != nullptr ? *stats : local;
  st = {};
  st.prompt_tokens = static_cast<int>(prompt.size());
  std::vector<int32_t> history = prompt;
  auto spec_for_next = [&] { return NextTokenSpec(options.sampling, history); };
  // The sequence is freed on every stage however this returns.
  struct ReleaseAtEnd {
    Pipeline& p;
    int32_t seq;
    ~ReleaseAtEnd() {
      const int32_t s[1] = {seq};
      (void)p.Release(s);
    }
  } release_at_end{p, seq};
  // Prefill: every chunk submitted at once; only the last asks for an output.
  const int chunk = std::max(1, options.prefill_chunk);
  auto start = std::chrono::steady_clock::now();
  std::vector<uint64_t> ids;
  for (size_t begin = 0; begin < prompt.size(); begin += chunk) {
    const size_t end = std::min(prompt.size(), begin + chunk);
    ForwardHeader h;
    h.id = p.NextId();
    h.dim = p.config().d_model;
    SeqRows rows{seq, static_cast<int32_t>(begin), static_cast<int32_t>(end - begin), {}};
    if (end == prompt.size()) {
      rows.out = spec_for_next();
    } else {
      rows.out.kind = OutputKind::kNone;
    }
    h.seqs.push_back(std::move(rows));
    Status s = p.Submit(h, std::span<const int32_t>(prompt).subspan(begin, end - begin));
    if (!s.ok()) return s;
    ids.push_back(h.id);
  }
  ResultMsg last;
  for (uint64_t id : ids) {
    auto r = p.Wait(id);
    if (!r.ok()) return r.status();
    last = std::move(*r);
  }
  st.prompt_seconds = Since(start);
  std::vector<int32_t> generated;
  start = std::chrono::steady_clock::now();
  while (true) {
    if (last.seqs.size() != 1 || last.seqs[0].rows.size() != 1) {
      return Internal("the last stage returned %zu outputs, expected 1", last.seqs.size());
    }
    const int32_t token = last.seqs[0].rows[0].token;
    if (token < 0 || token >= p.config().n_vocab) {
      return DataLoss("the last stage returned token %d", token);
    }
    generated.push_back(token);
    st.logprobs.push_back(last.seqs[0].rows[0].logprob);
    history.push_back(token);
    const bool keep_going = on_token ? on_token(token) : true;
    if (!keep_going || (options.is_eog && options.is_eog(token)) ||
        static_cast<int>(generated.size()) >= options.max_tokens) {
      break;
    }
    ForwardHeader h;
    h.id = p.NextId();
    h.dim = p.config().d_model;
    h.seqs.push_back({seq, static_cast<int32_t>(history.size() - 1), 1, spec_for_next()});
    const int32_t tok[1] = {token};
    auto r = p.Forward(h, tok);
    if (!r.ok()) return r.status();
    last = std::move(*r);
  }
  st.generated = static_cast<int>(generated.size());
  st.decode_seconds = Since(start);
  return generated;
}

}  // namespace daisy::pipeline
