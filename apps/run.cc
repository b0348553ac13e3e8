// daisy run (generate text on one machine) and daisy score (teacher-forced log-probabilities).
#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>

#include "apps/commands.h"
#include "apps/coordinator.h"
#include "base/log.h"
#include "base/memory_stats.h"
#include "base/strings.h"
#include "kernels/kernel_table.h"
#include "model/model.h"
#include "pipeline/cluster.h"
#include "pipeline/pipeline.h"
#include "coord/drafter.h"
#include "coord/generate.h"
#include "coord/k_controller.h"
#include "runtime/generate.h"
#include "shard/load.h"
#include "runtime/stage.h"
#include "coord/spec_profile.h"
#include "tokenizer/tokenizer.h"

namespace daisy::apps {
namespace {

// Forward times for --json: milliseconds, one decimal.
std::vector<double> Ms(const std::vector<double>& seconds) {
  std::vector<double> ms;
  for (double s : seconds) ms.push_back(std::round(s * 1e4) / 10);
  return ms;
}

struct RunFlags : CoordinatorFlags {
  std::string prompt;
  std::string ids;
  bool has_prompt = false;
  int n_predict = 16;
  int ctx = 0;
  runtime::SamplingParams sampling;
  bool ignore_eos = false;
  bool json = false;
  int top_logprobs = 5;  // score only
  double resume_wait = 0;
  SpeculativeFlags spec;
};

Result<std::vector<int32_t>> ParseIds(const std::string& text, int n_vocab) {
  std::vector<int32_t> ids;
  for (const std::string& part : StrSplit(text, ',')) {
    char* end = nullptr;
    const long v = std::strtol(part.c_str(), &end, 10);
    if (part.empty() || *end != '\0' || v < 0 || v >= n_vocab) {
      return InvalidArgument("--ids: '%s' is not a token id below %d", part.c_str(), n_vocab);
    }
    ids.push_back(static_cast<int32_t>(v));
  }
  return ids;
}

Result<std::vector<int32_t>> PromptIds(const RunFlags& f, const tokenizer::Tokenizer& tok) {
  if (f.has_prompt == !f.ids.empty()) return InvalidArgument("give exactly one of -p and --ids");
  if (!f.ids.empty()) return ParseIds(f.ids, tok.n_vocab());
  // Text prompts: BOS as the model asks, special-token text recognised (as llama.cpp's CLI).
  return tok.Encode(f.prompt, /*parse_special=*/true, /*add_bos=*/true);
}

int Run(const RunFlags& f) {
  const auto start = std::chrono::steady_clock::now();
  auto loaded = Load(f);
  if (!loaded.ok()) return Fail(loaded.status().message());
  Loaded& l = *loaded;
  auto prompt = PromptIds(f, *l.tokenizer);
  if (!prompt.ok()) return Fail(prompt.status().message());
  const int ctx = f.ctx > 0 ? f.ctx : static_cast<int>(prompt->size()) + f.n_predict;
  if (ctx > l.first().config().context_length) {
    DAISY_LOG_WARN("context %d is longer than the model's %d", ctx, l.first().config().context_length);
  }
  // Room for the drafted rows a verify appends past the last kept token.
  auto pipe = MakePipeline(f, l, ctx + (f.spec.any() ? f.spec.k_max + 1 : 0), 1, ctx);
  if (!pipe.ok()) return Fail(pipe.status().message());
  coord::GenerateOptions options;
  options.max_tokens = f.n_predict;
  options.prefill_chunk = f.batch;
  options.resume_wait = f.resume_wait;
  options.sampling = f.sampling;
  auto spec = MakeSpeculation(f.spec, f, l, ctx + f.spec.k_max + 1, 1, ctx);
  if (!spec.ok()) return Fail(spec.status().message());
  coord::Drafter* drafter = (*spec)->drafter.get();
  // Reading, checking and laying out the weights (the draft's too), and making the pipeline.
  const double load_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  options.drafter = drafter;
  options.spec_k = f.spec.k;
  options.spec_k_max = f.spec.k_max;
  coord::KController k_control(f.spec.k, f.spec.k_max);
  options.k_control = &k_control;
  bool restored = false;
  if (!f.spec.profile.empty()) {
    auto r = coord::LoadSpecProfile(f.spec.profile, (*spec)->pair, k_control);
    if (!r.ok()) return Fail(r.status().message());
    restored = *r;
  }
  if (!f.ignore_eos) options.is_eog = [&](int32_t t) { return l.tokenizer->is_eog(t); };
  tokenizer::StreamDecoder stream(*l.tokenizer, /*special=*/false);
  std::string text;
  const auto on_token = [&](int32_t id) {
    const std::string piece = stream.Push(id);
    text += piece;
    if (!f.json) {
      std::fwrite(piece.data(), 1, piece.size(), stdout);
      std::fflush(stdout);
    }
    return true;
  };
  coord::GenerateStats stats;
  auto ids = coord::Generate(**pipe, 0, *prompt, options, on_token, &stats);
  if (!ids.ok()) return Fail(ids.status().message());
  if (!f.spec.profile.empty()) {
    const Status saved = coord::SaveSpecProfile(f.spec.profile, (*spec)->pair, k_control);
    if (!saved.ok()) DAISY_LOG_WARN("%s", saved.message().c_str());
  }
  const std::string rest = stream.Flush();
  text += rest;
  const double prompt_tps = stats.prompt_seconds > 0 ? stats.prompt_tokens / stats.prompt_seconds : 0;
  // Decode speed counts the forwards after the first token: (generated - 1) of them.
  const double decode_tps = stats.generated > 1 && stats.decode_seconds > 0
                                ? (stats.generated - 1) / stats.decode_seconds : 0;
  if (f.json) {
    nlohmann::json j = {{"ids", *ids},
                        {"logprobs", stats.logprobs},
                        {"text", text},
                        {"prompt_tokens", stats.prompt_tokens},
                        {"generated_tokens", stats.generated},
                        {"prompt_tok_s", prompt_tps},
                        {"decode_tok_s", decode_tps},
                        {"threads", l.pool->size()},
                        {"process_threads", ProcessThreads()},
                        {"load_seconds", load_seconds},
                        {"stages", StageCount(**pipe)},
                        {"wire", f.workers.empty() ? "none" : f.wire},
                        {"wire_bytes_sent", (*pipe)->wire_bytes_sent()},
                        {"kernels", l.kernels->name},
                        {"kernel_choices", kernels::KernelChoices(*l.kernels)},
                        {"cpu", kernels::CpuModel()},
                        {"huge_page_bytes", HugePageBytes()},
                        {"peak_rss_bytes", PeakRssBytes()},
                        {"decode_forward_ms", Ms(stats.forward_seconds)}};
    if (stats.resumes > 0) {
      j["resumes"] = stats.resumes;
      j["refilled_tokens"] = stats.refilled_tokens;
      j["stage_refilled_tokens"] = stats.stage_refilled_tokens;
      j["paused_seconds"] = stats.paused_seconds;
    }
    if (drafter) {
      j["speculative"] = {{"drafter", f.spec.lookup ? "lookup" : "model"},
                          {"k", f.spec.k == 0 ? "adaptive" : std::to_string(f.spec.k)},
                          {"decode_forwards", stats.steps},
                          {"verifies", stats.verifies},
                          {"drafted", stats.drafted},
                          {"accepted", stats.accepted},
                          {"acceptance", stats.drafted > 0 ? static_cast<double>(stats.accepted) / stats.drafted : 0.0},
                          {"tokens_per_forward", stats.steps > 0 ? static_cast<double>(stats.generated - 1) / stats.steps : 0.0},
                          {"k_chosen", stats.k_chosen},
                          {"accepted_per_verify", stats.accepted_per_verify},
                          {"draft_confidence", stats.draft_confidence},
                          {"confidence_stops", stats.confidence_stops},
                          {"profile", f.spec.profile.empty() ? "none" : restored ? "restored" : "new"},
                          {"verify_ms", Ms(stats.verify_seconds)}};
    }
    std::printf("%s\n", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
  } else {
    std::fwrite(rest.data(), 1, rest.size(), stdout);
    std::printf("\n");
  }
  std::fprintf(stderr, "daisy: prompt %d tokens, %.2f tok/s; generated %d tokens, %.2f tok/s (%s, %d threads)\n",
               stats.prompt_tokens, prompt_tps, stats.generated, decode_tps, l.kernels->name,
               l.pool->size());
  return 0;
}

int Score(const RunFlags& f) {
  if (f.model.empty()) return Fail("score runs on a whole model: give -m MODEL");
  auto loaded = Load(f);
  if (!loaded.ok()) return Fail(loaded.status().message());
  Loaded& l = *loaded;
  auto tokens = PromptIds(f, *l.tokenizer);
  if (!tokens.ok()) return Fail(tokens.status().message());
  runtime::Stage stage(*l.model,
                       {.max_batch_rows = std::max(1, f.batch),
                        .seq_capacity = std::max(f.ctx, static_cast<int>(tokens->size())), .max_seqs = 1},
                       *l.kernels, *l.pool);
  auto scores = runtime::Score(stage, 0, *tokens, f.top_logprobs, f.batch);
  if (!scores.ok()) return Fail(scores.status().message());
  nlohmann::json positions = nlohmann::json::array();
  for (const auto& s : *scores) {
    nlohmann::json top = nlohmann::json::array();
    for (auto [id, lp] : s.top) top.push_back({id, lp});
    positions.push_back({{"next", s.next}, {"next_logprob", s.next_logprob}, {"top", top}});
  }
  nlohmann::json j = {{"tokens", *tokens}, {"positions", positions}, {"kernels", l.kernels->name}};
  std::printf("%s\n", j.dump().c_str());
  return 0;
}

void AddCommon(Flags& flags, const std::shared_ptr<RunFlags>& f) {
  flags.Option("-m,--model", f->model, "Model GGUF");
  flags.Option("-p,--prompt", f->prompt, "Prompt text (BOS added as the model asks)")
      .Each([f](const std::string&) { f->has_prompt = true; });
  flags.Option("--ids", f->ids, "Prompt as comma-separated token ids (no BOS added)");
  flags.Option("-t,--threads", f->threads, "Threads (default: all cores)");
  flags.Option("-b,--batch", f->batch, "Rows per prefill forward").ShowDefault();
  flags.Option("--kernels", f->kernels, "Force a kernel table: scalar|avx2|avx512|amx");
}

}  // namespace

Runner AddRun(Flags& flags) {
  auto f = std::make_shared<RunFlags>();
  AddCommon(flags, f);
  flags.Option("-n,--n-predict", f->n_predict, "Tokens to generate").ShowDefault();
  flags.Option("--resume-wait", f->resume_wait,
               "Seconds to wait for a lost worker to come back (then generation goes on exactly where it "
               "was); 0: fail at once")
      .ShowDefault()
      .InRange(0.0, 86400.0);
  flags.Option("-c,--ctx", f->ctx, "KV positions (default: prompt + n)");
  flags.Option("--temp", f->sampling.temperature, "Temperature (0: greedy)").ShowDefault();
  flags.Option("--top-k", f->sampling.top_k, "Top-k (0: off)").ShowDefault();
  flags.Option("--top-p", f->sampling.top_p, "Top-p (1: off)").ShowDefault();
  flags.Option("--min-p", f->sampling.min_p, "Min-p (0: off)").ShowDefault();
  flags.Option("--repeat-penalty", f->sampling.repeat_penalty, "Repetition penalty (1: off)")
      .ShowDefault();
  flags.Option("--repeat-last-n", f->sampling.repeat_last_n, "Tokens the penalty looks back")
      .ShowDefault();
  flags.Option("--seed", f->sampling.seed, "Sampling seed").ShowDefault();
  flags.Switch("--ignore-eos", f->ignore_eos, "Do not stop at end-of-generation tokens");
  flags.Switch("--json", f->json, "Print one JSON object (ids, text, speeds) instead of text");
  AddSpeculativeFlags(flags, f->spec);
  const GivenFlags given = AddPipelineFlags(flags, *f);
  return [f, given] {
    const Status s = ApplyCluster(*f, given);
    if (!s.ok()) return Fail(s.message());
    return Run(*f);
  };
}

Runner AddScore(Flags& flags) {
  auto f = std::make_shared<RunFlags>();
  AddCommon(flags, f);
  flags.Option("--top", f->top_logprobs, "Log-probabilities to list per position")
      .ShowDefault();
  flags.Option("-c,--ctx", f->ctx, "KV positions (default: the tokens'; decides Phi-3's LongRoPE factors)");
  flags.Switch("--json", f->json, "JSON output (the only format)");
  return [f] { return Score(*f); };
}

}  // namespace daisy::apps
