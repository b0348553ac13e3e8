#include "pipeline/pipeline.h"

#include <algorithm>
#include <chrono>

#include "pipeline/speculative.h"

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

uint64_t Pipeline::wire_bytes_sent() const { return remote_ != nullptr ? remote_->wire_bytes_sent() : 0; }

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

Result<ResultMsg> Prefill(Pipeline& p, int32_t seq, std::span<const int32_t> prompt, int32_t start,
                          int prefill_chunk, const OutputSpec& out) {
  // Every chunk submitted at once; only the last asks for an output.
  const size_t chunk = static_cast<size_t>(std::max(1, prefill_chunk));
  std::vector<uint64_t> ids;
  for (size_t begin = 0; begin < prompt.size(); begin += chunk) {
    const size_t end = std::min(prompt.size(), begin + chunk);
    ForwardHeader h;
    h.id = p.NextId();
    h.dim = p.config().d_model;
    SeqRows rows{seq, start + static_cast<int32_t>(begin), static_cast<int32_t>(end - begin), {}};
    if (end == prompt.size()) {
      rows.out = out;
    } else {
      rows.out.kind = OutputKind::kNone;
    }
    h.seqs.push_back(std::move(rows));
    Status s = p.Submit(h, prompt.subspan(begin, end - begin));
    if (!s.ok()) return s;
    ids.push_back(h.id);
  }
  ResultMsg last;
  for (uint64_t id : ids) {
    auto r = p.Wait(id);
    if (!r.ok()) return r.status();
    last = std::move(*r);
  }
  return last;
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
  auto start = std::chrono::steady_clock::now();
  auto prefilled = Prefill(p, seq, prompt, 0, options.prefill_chunk, spec_for_next());
  if (!prefilled.ok()) return prefilled.status();
  ResultMsg last = std::move(*prefilled);
  st.prompt_seconds = Since(start);
  std::vector<int32_t> generated;
  start = std::chrono::steady_clock::now();
  Drafter* drafter = options.drafter;
  KController own_k_control(options.spec_k, options.spec_k_max);
  KController& k_control = options.k_control != nullptr ? *options.k_control : own_k_control;
  struct ForgetDraft {  // the draft's cache too, however this returns
    Drafter* d;
    int32_t seq;
    ~ForgetDraft() {
      if (d != nullptr) d->Release(seq);
    }
  } forget_draft{drafter, seq};
  std::vector<int32_t> draft;
  std::vector<DraftDistribution> q;
  std::vector<float> confidence;
  while (true) {
    // The tokens this forward settled: one, or the accepted drafts plus one.
    const SeqResult* out = last.seqs.size() == 1 && last.seqs[0].seq == seq ? &last.seqs[0] : nullptr;
    DAISY_RETURN_IF_ERROR(CheckSettled(out, draft, p.config().n_vocab));
    const size_t n_out = out->rows.size();
    bool stop = false;
    for (size_t i = 0; i < n_out && !stop; ++i) {
      const RowOutput& row = out->rows[i];
      const int32_t token = row.token;
      generated.push_back(token);
      st.logprobs.push_back(row.logprob);
      history.push_back(token);
      const bool keep_going = on_token ? on_token(token) : true;
      stop = !keep_going || (options.is_eog && options.is_eog(token)) ||
             static_cast<int>(generated.size()) >= options.max_tokens;
    }
    if (!draft.empty()) {
      st.accepted += static_cast<int>(n_out) - 1;
      drafter->Settled(seq, history.size() - 1);
    }
    if (stop) break;
    // Draft (at most what is still wanted, less the token the verify adds itself).
    draft.clear();
    q.clear();
    const int want = options.max_tokens - static_cast<int>(generated.size()) - 1;
    const int k = drafter != nullptr ? std::min(k_control.Choose(), want) : 0;
    confidence.clear();
    if (k > 0) {
      DraftJob job;
      job.seq = seq;
      job.history = history;
      job.k = k;
      job.sampling = &options.sampling;
      job.more = [&](std::span<const float> c) { return k_control.MoreDrafts(c); };
      drafter->ProposeAll(std::span<DraftJob>(&job, 1));
      DAISY_RETURN_IF_ERROR(job.status);
      k_control.Drafted(std::max(static_cast<int>(job.draft.size()), job.rows), job.seconds);
      draft = std::move(job.draft);
      q = std::move(job.q);
      confidence = std::move(job.confidence);
      if (job.more && !confidence.empty() && static_cast<int>(draft.size()) < k) ++st.confidence_stops;
    }
    ForwardHeader h;
    h.id = p.NextId();
    h.dim = p.config().d_model;
    SeqRows rows{seq, static_cast<int32_t>(history.size() - 1), 1 + static_cast<int32_t>(draft.size()),
                 spec_for_next()};
    if (!draft.empty()) {
      rows.out.kind = OutputKind::kVerify;
      rows.out.position = history.size();
      rows.out.draft = draft;
      rows.out.draft_q = q;
    }
    h.seqs.push_back(std::move(rows));
    std::vector<int32_t> tokens{history.back()};
    tokens.insert(tokens.end(), draft.begin(), draft.end());
    const auto t0 = std::chrono::steady_clock::now();
    auto r = p.Forward(h, tokens);
    if (!r.ok()) return r.status();
    last = std::move(*r);
    ++st.steps;
    if (!draft.empty()) {
      const int accepted = last.seqs.size() == 1 ? static_cast<int>(last.seqs[0].rows.size()) - 1 : 0;
      const double seconds = Since(t0);
      k_control.Verified(static_cast<int>(draft.size()), accepted, seconds, 0, confidence);
      ++st.verifies;
      st.drafted += static_cast<int>(draft.size());
      st.k_chosen.push_back(static_cast<int>(draft.size()));
      st.accepted_per_verify.push_back(accepted);
      st.draft_confidence.push_back(confidence);
      st.verify_seconds.push_back(seconds);
    } else if (drafter != nullptr) {
      k_control.Verified(0, 0, Since(t0));
    }
  }
  st.generated = static_cast<int>(generated.size());
  st.decode_seconds = Since(start);
  return generated;
}

}  // namespace daisy::pipeline
