// daisy run (generate text on one machine) and daisy score (teacher-forced log-probabilities).
#include <chrono>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>

#include "apps/commands.h"
#include "base/log.h"
#include "base/memory_stats.h"
#include "base/strings.h"
#include "kernels/kernel_table.h"
#include "model/llama_weights.h"
#include "pipeline/cluster.h"
#include "pipeline/pipeline.h"
#include "runtime/generate.h"
#include "shard/load.h"
#include "runtime/stage.h"
#include "tokenizer/tokenizer.h"

namespace daisy::apps {
namespace {

struct RunFlags {
  std::string model;
  std::vector<std::string> shards;   // in-process stages, in order
  std::string workers;               // HOST:PORT,... for the remaining stages
  std::string cluster;               // TOML cluster file (pipeline/cluster.h)
  std::string key_file;
  std::string wire = "f32";
  double connect_timeout = 30;
  bool mmap_weights = false;
  std::string prompt;
  std::string ids;
  bool has_prompt = false;
  int n_predict = 16;
  int threads = 0;
  int ctx = 0;
  int batch = 256;
  runtime::SamplingParams sampling;
  bool ignore_eos = false;
  bool json = false;
  std::string kernels;
  int top_logprobs = 5;  // score only
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

// Fills the pipeline flags from --cluster FILE; flags given on the command line win for the key,
// the wire and the timeout. The shards and workers come from one place only.
struct GivenFlags {
  const CLI::Option* key_file;
  const CLI::Option* wire;
  const CLI::Option* connect_timeout;
};

Status ApplyCluster(RunFlags& f, const GivenFlags& given) {
  if (f.cluster.empty()) return Status::Ok();
  if (!f.model.empty() || !f.shards.empty() || !f.workers.empty()) {
    return InvalidArgument("--cluster lists the shards and workers: drop -m, --shard and --workers");
  }
  DAISY_ASSIGN_OR_RETURN(pipeline::ClusterFile c, pipeline::LoadClusterFile(f.cluster));
  f.shards = c.LocalShards();
  f.workers = c.Workers();
  if (given.key_file->count() == 0) f.key_file = c.key_file;
  if (given.wire->count() == 0 && c.wire) f.wire = *c.wire;
  if (given.connect_timeout->count() == 0 && c.connect_timeout) f.connect_timeout = *c.connect_timeout;
  return Status::Ok();
}

struct Loaded {
  std::unique_ptr<model::LlamaModel> model;  // -m
  std::vector<shard::Shard> shards;          // --shard
  std::unique_ptr<tokenizer::Tokenizer> tokenizer;
  std::unique_ptr<runtime::ThreadPool> pool;
  const kernels::KernelTable* kernels = nullptr;
  const model::LlamaModel& first() const { return model ? *model : *shards.front().model; }
};

Result<Loaded> Load(const RunFlags& f) {
  Loaded l;
  l.kernels = &kernels::BestKernels();
  if (!f.kernels.empty()) {
    l.kernels = kernels::FindKernels(f.kernels.c_str());
    if (l.kernels == nullptr) {
      return InvalidArgument("--kernels %s is not supported on this CPU", f.kernels.c_str());
    }
  }
  if (f.model.empty() == f.shards.empty()) {
    return InvalidArgument("give either -m MODEL or --shard DIR/stage-0.daisy (with --workers)");
  }
  if (!f.model.empty() && !f.workers.empty()) {
    return InvalidArgument("--workers runs with shards: --shard DIR/stage-0.daisy --workers ...");
  }
  l.pool = std::make_unique<runtime::ThreadPool>(f.threads);
  if (!f.model.empty()) {
    DAISY_ASSIGN_OR_RETURN(l.model, model::LlamaModel::Load(f.model, {.threads = l.pool->size()}));
  } else {
    for (const std::string& path : f.shards) {
      DAISY_ASSIGN_OR_RETURN(shard::Shard s, shard::LoadShard(path, !f.mmap_weights));
      l.shards.push_back(std::move(s));
    }
    if (!l.shards.front().info.embeddings()) {
      return InvalidArgument("%s: the coordinator runs stage 0 (the tokenizer and embeddings); "
                             "give DIR/stage-0.daisy first", f.shards.front().c_str());
    }
  }
  DAISY_ASSIGN_OR_RETURN(tokenizer::Tokenizer tok, tokenizer::Tokenizer::FromGguf(l.first().reader()));
  l.tokenizer = std::make_unique<tokenizer::Tokenizer>(std::move(tok));
  return l;
}

// The coordinator's pipeline: the model or the local shards, then the workers.
Result<std::unique_ptr<pipeline::Pipeline>> MakePipeline(const RunFlags& f, Loaded& l, int ctx) {
  std::vector<const model::LlamaModel*> models;
  std::vector<runtime::StageOptions> options;
  runtime::StageOptions base{.max_batch_rows = std::max(1, f.batch), .seq_capacity = ctx, .max_seqs = 1};
  if (l.model) {
    models.push_back(l.model.get());
    options.push_back(base);
  }
  std::vector<shard::ShardInfo> infos;
  for (const shard::Shard& s : l.shards) {
    models.push_back(s.model.get());
    options.push_back(pipeline::StageOptionsFor(s.info, base));
    infos.push_back(s.info);
  }
  std::unique_ptr<pipeline::RemoteChain> remote;
  if (!f.workers.empty()) {
    pipeline::RemoteOptions ro;
    for (const std::string& w : StrSplit(f.workers, ',')) {
      DAISY_ASSIGN_OR_RETURN(transport::HostPort hp, transport::ParseHostPort(w));
      ro.workers.push_back(hp);
    }
    if (!f.key_file.empty()) {
      DAISY_ASSIGN_OR_RETURN(transport::ClusterKey key, transport::ClusterKey::Load(f.key_file));
      ro.key = std::move(key);
    } else {
      DAISY_LOG_WARN("no --key-file: talking to the workers without authentication (open cluster)");
    }
    DAISY_ASSIGN_OR_RETURN(ro.wire, pipeline::ParseWireType(f.wire));
    ro.max_rows = base.max_batch_rows;
    ro.max_seqs = 1;
    ro.seq_capacity = ctx;
    ro.connect_deadline = transport::Millis(static_cast<int64_t>(f.connect_timeout * 1000));
    DAISY_ASSIGN_OR_RETURN(remote, pipeline::RemoteChain::Connect(ro, infos));
  } else if (!infos.empty()) {
    DAISY_RETURN_IF_ERROR(shard::CheckChain(infos).With("the local shards do not make a whole "
                                                        "model (add --workers for the rest)"));
  }
  return std::make_unique<pipeline::Pipeline>(std::move(models), std::move(options), *l.kernels,
                                              *l.pool, std::move(remote));
}

Result<std::vector<int32_t>> PromptIds(const RunFlags& f, const tokenizer::Tokenizer& tok) {
  if (f.has_prompt == !f.ids.empty()) return InvalidArgument("give exactly one of -p and --ids");
  if (!f.ids.empty()) return ParseIds(f.ids, tok.n_vocab());
  // Text prompts: BOS as the model asks, special-token text recognised (as llama.cpp's CLI).
  return tok.Encode(f.prompt, /*parse_special=*/true, /*add_bos=*/true);
}

int Run(const RunFlags& f) {
  auto loaded = Load(f);
  if (!loaded.ok()) return Fail(loaded.status().message());
  Loaded& l = *loaded;
  auto prompt = PromptIds(f, *l.tokenizer);
  if (!prompt.ok()) return Fail(prompt.status().message());
  const int ctx = f.ctx > 0 ? f.ctx : static_cast<int>(prompt->size()) + f.n_predict;
  if (ctx > l.first().config().context_length) {
    DAISY_LOG_WARN("context %d is longer than the model's %d", ctx, l.first().config().context_length);
  }
  auto pipe = MakePipeline(f, l, ctx);
  if (!pipe.ok()) return Fail(pipe.status().message());
  pipeline::GenerateOptions options;
  options.max_tokens = f.n_predict;
  options.prefill_chunk = f.batch;
  options.sampling = f.sampling;
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
  pipeline::GenerateStats stats;
  auto ids = pipeline::Generate(**pipe, 0, *prompt, options, on_token, &stats);
  if (!ids.ok()) return Fail(ids.status().message());
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
                        {"stages", (*pipe)->n_local() + ((*pipe)->remote() ? static_cast<int>((*pipe)->remote()->shards().size()) : 0)},
                        {"wire", f.workers.empty() ? "none" : f.wire},
                        {"wire_bytes_sent", (*pipe)->remote() ? (*pipe)->remote()->wire_bytes_sent() : 0},
                        {"kernels", l.kernels->name},
                        {"huge_page_bytes", HugePageBytes()},
                        {"peak_rss_bytes", PeakRssBytes()}};
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
                        .seq_capacity = static_cast<int>(tokens->size()), .max_seqs = 1},
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

void AddCommon(CLI::App& app, const std::shared_ptr<RunFlags>& f) {
  app.add_option("-m,--model", f->model, "Model GGUF");
  app.add_option("-p,--prompt", f->prompt, "Prompt text (BOS added as the model asks)")
      ->each([f](const std::string&) { f->has_prompt = true; });
  app.add_option("--ids", f->ids, "Prompt as comma-separated token ids (no BOS added)");
  app.add_option("-t,--threads", f->threads, "Threads (default: all cores)");
  app.add_option("-b,--batch", f->batch, "Rows per prefill forward")->capture_default_str();
  app.add_option("--kernels", f->kernels, "Force a kernel table: scalar|avx2|avx512");
}

}  // namespace

Runner AddRun(CLI::App& app) {
  auto f = std::make_shared<RunFlags>();
  AddCommon(app, f);
  app.add_option("-n,--n-predict", f->n_predict, "Tokens to generate")->capture_default_str();
  app.add_option("-c,--ctx", f->ctx, "KV positions (default: prompt + n)");
  app.add_option("--temp", f->sampling.temperature, "Temperature (0: greedy)")->capture_default_str();
  app.add_option("--top-k", f->sampling.top_k, "Top-k (0: off)")->capture_default_str();
  app.add_option("--top-p", f->sampling.top_p, "Top-p (1: off)")->capture_default_str();
  app.add_option("--min-p", f->sampling.min_p, "Min-p (0: off)")->capture_default_str();
  app.add_option("--repeat-penalty", f->sampling.repeat_penalty, "Repetition penalty (1: off)")
      ->capture_default_str();
  app.add_option("--repeat-last-n", f->sampling.repeat_last_n, "Tokens the penalty looks back")
      ->capture_default_str();
  app.add_option("--seed", f->sampling.seed, "Sampling seed")->capture_default_str();
  app.add_flag("--ignore-eos", f->ignore_eos, "Do not stop at end-of-generation tokens");
  app.add_flag("--json", f->json, "Print one JSON object (ids, text, speeds) instead of text");
  app.add_option("--shard", f->shards,
                 "Shard(s) to run in this process, stage 0 first (repeat for an in-process split)");
  app.add_option("--workers", f->workers, "HOST:PORT of the remaining stages, in order");
  app.add_option("--cluster", f->cluster,
                 "TOML cluster file listing the shards, workers and key (docs/cluster-file.md)");
  GivenFlags given;
  given.key_file = app.add_option("--key-file", f->key_file, "Cluster key the workers were started with");
  given.wire = app.add_option("--wire", f->wire, "Activations between stages: f32 (exact), bf16, f16, q8_0")
      ->capture_default_str();
  given.connect_timeout = app.add_option("--connect-timeout", f->connect_timeout,
                                         "Seconds to keep retrying the workers")
      ->capture_default_str();
  app.add_flag("--mmap-weights", f->mmap_weights,
               "Serve weights straight from the file mapping (4 KiB pages) instead of copying them "
               "into 2 MiB pages at load (faster compute; see docs/shard-format.md)");
  return [f, given] {
    const Status s = ApplyCluster(*f, given);
    if (!s.ok()) return Fail(s.message());
    return Run(*f);
  };
}

Runner AddScore(CLI::App& app) {
  auto f = std::make_shared<RunFlags>();
  AddCommon(app, f);
  app.add_option("--top", f->top_logprobs, "Log-probabilities to list per position")
      ->capture_default_str();
  app.add_flag("--json", f->json, "JSON output (the only format)");
  return [f] { return Score(*f); };
}

}  // namespace daisy::apps
