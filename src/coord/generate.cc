#include "coord/generate.h"

#include <chrono>
#include <thread>

#include "base/log.h"
#include "base/strings.h"

namespace daisy::coord {
namespace {
using Clock = std::chrono::steady_clock;
double Since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }
}  // namespace

Result<pipeline::ResultMsg> Prefill(pipeline::Pipeline& p, SeqDecoder& s, size_t chunk) {
  std::vector<uint64_t> ids;
  Status submitted = Status::Ok();
  while (!s.prompt_done() && submitted.ok()) {
    pipeline::ForwardHeader h;
    h.id = p.NextId();
    h.dim = p.config().d_model;
    std::vector<int32_t> tokens;
    s.AddPromptRows(h, tokens, chunk);
    submitted = p.Submit(h, tokens);
    if (submitted.ok()) ids.push_back(h.id);
  }
  // Every submitted chunk is waited for, even after an error, so the ring stays in step.
  Status failed = submitted;
  Result<pipeline::ResultMsg> last = Internal("no prompt");
  for (uint64_t id : ids) {
    auto r = p.Wait(id);
    if (!r.ok() && failed.ok()) failed = r.status();
    if (r.ok()) last = std::move(r);
  }
  if (!failed.ok()) return failed;
  return last;
}

Result<std::vector<int32_t>> Generate(pipeline::Pipeline& p, int32_t seq, const std::vector<int32_t>& prompt,
                                      const GenerateOptions& options,
                                      const std::function<bool(int32_t)>& on_token, GenerateStats* stats) {
  if (prompt.empty()) return InvalidArgument("empty prompt: give at least one token");
  GenerateStats local;
  GenerateStats& st = stats != nullptr ? *stats : local;
  st = {};
  st.prompt_tokens = static_cast<int>(prompt.size());
  Drafter* drafter = options.drafter;
  // The sequence is freed on every stage, and in the draft's cache, however this returns.
  struct ReleaseAtEnd {
    pipeline::Pipeline& p;
    Drafter* d;
    int32_t seq;
    ~ReleaseAtEnd() {
      const int32_t s[1] = {seq};
      (void)p.Release(s);
      if (d != nullptr) d->Release(seq);
    }
  } release_at_end{p, drafter, seq};
  KController own_k_control(options.spec_k, options.spec_k_max);
  KController* k = drafter == nullptr ? nullptr : options.k_control != nullptr ? options.k_control : &own_k_control;
  SeqDecoder s(seq, prompt, options.sampling, options.max_tokens, k);
  const size_t max_rows = static_cast<size_t>(std::max(1, options.prefill_chunk));
  // While `last` failed because the ring went down: wait for it, bounded by resume_wait, then
  // read the history again; the last chunk of that read asks for the next token as the
  // interrupted step would have. A wait that runs out ends the run with its reason.
  const auto resume_while_down = [&](Result<pipeline::ResultMsg>& last) {
    while (!last.ok() && options.resume_wait > 0 && p.broken()) {
      const Status why = last.status();
      const auto t0 = Clock::now();
      DAISY_LOG_WARN("the pipeline went down (%s); waiting up to %g s for it", why.message().c_str(), options.resume_wait);
      const int32_t keep[1] = {seq};
      Status back = p.Recover(keep);
      while (!back.ok() && Since(t0) < options.resume_wait) {
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        back = p.Recover(keep);
      }
      if (!back.ok()) {
        last = Unavailable("%s; the pipeline was not back within %g s (%s)", why.message().c_str(), options.resume_wait,
                           back.message().c_str());
        return;
      }
      const std::vector<size_t> refill = s.Restart(p.HeldLengths(seq), static_cast<int32_t>(max_rows / 2));
      ++st.resumes;
      st.refilled_tokens += refill.front();
      st.stage_refilled_tokens.resize(refill.size());
      for (size_t i = 0; i < refill.size(); ++i) st.stage_refilled_tokens[i] += refill[i];
      st.paused_seconds += Since(t0);
      DAISY_LOG_INFO("the pipeline is back after %.1f s; reading again %s tokens (per stage)", Since(t0),
                     JoinNumbers(refill).c_str());
      last = Prefill(p, s, max_rows);
    }
  };
  auto start = Clock::now();
  auto last = Prefill(p, s, max_rows);
  resume_while_down(last);
  if (!last.ok()) return last.status();
  st.prompt_seconds = Since(start);
  std::vector<int32_t> generated;
  start = Clock::now();
  double seconds = -1;  // the last decode forward's
  int forward_rows = 0;
  while (true) {
    const int k_sent = static_cast<int>(s.draft().size());
    const std::vector<float> confidence = s.confidence();
    auto settled = s.Settle(*last, p.config().n_vocab, seconds, forward_rows, drafter);
    if (!settled.ok()) return settled.status();
    if (k_sent > 0) {
      const int accepted = static_cast<int>(settled->size()) - 1;
      st.accepted += accepted;
      ++st.verifies;
      st.drafted += k_sent;
      st.k_chosen.push_back(k_sent);
      st.accepted_per_verify.push_back(accepted);
      st.draft_confidence.push_back(confidence);
      st.verify_seconds.push_back(seconds);
    }
    bool stop = false;
    for (size_t i = 0; i < settled->size() && !stop; ++i) {
      const int32_t token = (*settled)[i].token;
      generated.push_back(token);
      st.logprobs.push_back((*settled)[i].logprob);
      const bool keep_going = on_token ? on_token(token) : true;
      stop = !keep_going || (options.is_eog && options.is_eog(token)) ||
             static_cast<int>(generated.size()) >= options.max_tokens;
    }
    if (stop) break;
    if (drafter != nullptr) {
      SeqDecoder* one[1] = {&s};
      const DraftReport drafted = DraftTogether(one, static_cast<int>(max_rows), *drafter);
      if (!drafted.status.ok()) return drafted.status;
      st.confidence_stops += drafted.confidence_stops;
    }
    pipeline::ForwardHeader h;
    h.id = p.NextId();
    h.dim = p.config().d_model;
    std::vector<int32_t> tokens;
    s.AddDecodeRows(h, tokens);
    forward_rows = static_cast<int>(tokens.size());
    const auto t0 = Clock::now();
    last = p.Forward(h, tokens);
    seconds = Since(t0);
    if (!last.ok()) {
      resume_while_down(last);
      if (!last.ok()) return last.status();
      seconds = -1;  // not a clean measurement of a decode step
    } else {
      st.forward_seconds.push_back(seconds);
    }
    ++st.steps;
  }
  st.generated = static_cast<int>(generated.size());
  st.decode_seconds = Since(start);
  return generated;
}

}  // namespace daisy::coord
