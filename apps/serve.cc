// daisy serve: many users over an OpenAI-compatible HTTP API, on a whole model, in-process shards
// or a pipeline of workers, with the continuous-batching scheduler (docs/serving.md).
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <nlohmann/json.hpp>

#include "apps/commands.h"
#include "apps/coordinator.h"
#include "base/log.h"
#include "base/memory_stats.h"
#include "base/strings.h"
#include "coord/drafter.h"
#include "coord/generate.h"
#include "coord/k_controller.h"
#include "serve/http_server.h"
#include "coord/scheduler.h"
#include "coord/spec_profile.h"
#include "transport/net.h"

namespace daisy::apps {
namespace {

struct ServeFlags : CoordinatorFlags {
  std::string http = "127.0.0.1:8080";
  std::string api_key_file;
  std::string model_name;
  int ctx = 0;
  int max_seqs = 8;
  int micro_batches = 0;
  int queue = 64;
  int prefill_chunk = 64;
  std::string chat_template;
  double resume_wait = 30;
  size_t http_max_connections = 4096;
  double http_timeout = 60;
  SpeculativeFlags spec;
};

Result<std::string> ReadApiKey(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound("cannot open --api-key-file %s", path.c_str());
  std::string key;
  std::getline(in, key);
  while (!key.empty() && (key.back() == '\r' || key.back() == ' ')) key.pop_back();
  if (key.empty()) return InvalidArgument("--api-key-file %s: the first line is empty", path.c_str());
  return key;
}

int Serve(const ServeFlags& f) {
  BlockTermSignals();
  auto http = transport::ParseHostPort(f.http);
  if (!http.ok()) return Fail("--http: " + http.status().message());
  if (f.max_seqs < 1 || f.max_seqs > 1024) return Fail("--max-seqs must be 1..1024");
  if (f.queue < 0 || f.queue > 100000) return Fail("--queue must be 0..100000");
  if (f.prefill_chunk < 1) return Fail("--prefill-chunk must be at least 1");
  std::string api_key;
  if (!f.api_key_file.empty()) {
    auto k = ReadApiKey(f.api_key_file);
    if (!k.ok()) return Fail(k.status().message());
    api_key = *k;
  } else if (const char* env = std::getenv("DAISY_API_KEY"); env != nullptr && *env != '\0') {
    api_key = env;
  }
  auto loaded = Load(f);
  if (!loaded.ok()) return Fail(loaded.status().message());
  Loaded& l = *loaded;
  const int model_ctx = l.first().config().context_length;
  const int ctx = f.ctx > 0 ? f.ctx : std::min(model_ctx, 4096);
  if (ctx > model_ctx) DAISY_LOG_WARN("--ctx %d is longer than the model's %d", ctx, model_ctx);
  auto pipe = MakePipeline(f, l, ctx, f.max_seqs);
  if (!pipe.ok()) return Fail(pipe.status().message());
  auto spec = MakeSpeculation(f.spec, f, l, ctx, 2 * f.max_seqs);
  if (!spec.ok()) return Fail(spec.status().message());
  const int stages = StageCount(**pipe);
  coord::SchedulerOptions so;
  so.micro_batches = f.micro_batches > 0 ? f.micro_batches : stages;
  so.max_seqs = f.max_seqs;
  so.max_queue = f.queue;
  so.seq_capacity = ctx;
  so.max_batch_rows = std::max(1, f.batch);
  so.prefill_chunk = f.prefill_chunk;
  if (!(f.resume_wait >= 0 && f.resume_wait <= 86400)) return Fail("--resume-wait must be 0 to 86400 seconds");
  so.resume_wait = f.resume_wait;
  const tokenizer::Tokenizer& tok = *l.tokenizer;
  so.is_eog = [&tok](int32_t t) { return tok.is_eog(t); };
  so.drafter = (*spec)->drafter.get();
  so.spec_k = f.spec.k;
  so.spec_k_max = f.spec.k_max;
  std::optional<coord::KController> profile;
  if (!f.spec.profile.empty()) {
    profile.emplace(f.spec.k, f.spec.k_max, so.max_batch_rows);
    auto r = coord::LoadSpecProfile(f.spec.profile, (*spec)->pair, *profile);
    if (!r.ok()) return Fail(r.status().message());
    if (*r) so.spec_start = &*profile;
    so.on_learned = [path = f.spec.profile, pair = (*spec)->pair](const coord::KController& k) {
      const Status saved = coord::SaveSpecProfile(path, pair, k);
      if (!saved.ok()) DAISY_LOG_WARN("%s", saved.message().c_str());
    };
  }
  coord::Scheduler scheduler(**pipe, so);
  serve::HttpOptions ho;
  ho.host = http->host;
  ho.port = http->port;
  ho.model_name = f.model_name.empty() ? l.name : f.model_name;
  ho.api_key = api_key;
  ho.threads = std::min(256, f.max_seqs + f.queue + 8);
  ho.stages = stages;
  ho.max_connections = f.http_max_connections;
  ho.body_timeout = ho.idle_timeout = http::Millis(static_cast<int64_t>(f.http_timeout * 1000));
  ho.header_timeout = std::min(ho.header_timeout, ho.body_timeout);
  auto chat = serve::ChatTemplate::ForModel(tok, f.chat_template);
  if (!chat.ok() && !f.chat_template.empty()) return Fail(chat.status().message());
  ho.kernels = l.kernels->name;
  ho.cpu = kernels::CpuModel();
  for (const std::string& c : kernels::KernelChoices(*l.kernels)) {
    ho.kernel_choices += (ho.kernel_choices.empty() ? "" : ",") + c;
  }
  auto server = serve::HttpServer::Start(ho, scheduler, tok, std::move(chat));
  if (!server.ok()) return Fail(server.status().message());
  if (api_key.empty()) {
    DAISY_LOG_WARN("serve: no API key: anyone who can reach %s can use this server", f.http.c_str());
  }
  nlohmann::json ready = {{"event", "ready"},         {"port", (*server)->port()},
                          {"model", ho.model_name},   {"stages", stages},
                          {"micro_batches", so.micro_batches}, {"max_seqs", so.max_seqs},
                          {"ctx", ctx},               {"kernels", l.kernels->name},
                          {"kernel_choices", kernels::KernelChoices(*l.kernels)},
                          {"cpu", ho.cpu},
                          {"huge_page_bytes", HugePageBytes()},
                          {"speculative", f.spec.lookup ? "lookup" : f.spec.draft.empty() ? "off" : "draft"}};
  std::printf("%s\n", ready.dump().c_str());
  std::fflush(stdout);
  DAISY_LOG_INFO("serve: %s on http://%s:%u (%d stages, %d micro-batches, %d sequences, context %d)",
                 ho.model_name.c_str(), http->host.c_str(), (*server)->port(), stages,
                 so.micro_batches, so.max_seqs, ctx);
  WaitForTermSignal();
  (*server)->Stop();
  return 0;
}

}  // namespace

Runner AddServe(Flags& flags) {
  auto f = std::make_shared<ServeFlags>();
  flags.Option("-m,--model", f->model, "Model GGUF (the whole model in this process)");
  flags.Option("-t,--threads", f->threads, "Compute threads (default: all cores)");
  flags.Option("-b,--batch", f->batch, "Rows per micro-batch forward").ShowDefault();
  flags.Option("--kernels", f->kernels, "Force a kernel table: scalar|avx2|avx512|amx");
  const GivenFlags given = AddPipelineFlags(flags, *f);
  flags.Option("--http", f->http, "HOST:PORT to serve HTTP on (port 0: any free port)")
      .ShowDefault();
  flags.Option("--api-key-file", f->api_key_file,
               "File whose first line is the API key clients must send (Authorization: Bearer); "
               "default: $DAISY_API_KEY, else none");
  flags.Option("--http-max-connections", f->http_max_connections,
               "Open HTTP connections, idle ones included (they hold no thread); past it, 503")
      .ShowDefault()
      .InRange(size_t{1}, size_t{1} << 20);
  flags.Option("--http-timeout", f->http_timeout,
               "Seconds a request may take to arrive whole, and an idle keep-alive connection stays open "
               "(the headers must arrive within 10 s)")
      .ShowDefault()
      .InRange(0.1, 86400.0);
  flags.Option("--model-name", f->model_name, "The model id in the API (default: general.name)");
  flags.Option("--resume-wait", f->resume_wait,
               "Seconds to hold the requests in flight while a lost worker comes back (then they resume "
               "exactly where they were); 0: fail them at once")
      .ShowDefault();
  flags.Option("--chat-template", f->chat_template,
               "A Jinja chat template file to use instead of the model's tokenizer.chat_template");
  flags.Option("-c,--ctx", f->ctx, "KV positions per sequence (default: the model's, at most 4096)");
  flags.Option("--max-seqs", f->max_seqs, "Sequences generating at once (KV slots per stage)")
      .ShowDefault();
  flags.Option("--micro-batches", f->micro_batches, "Micro-batches in flight (default: the stages)");
  flags.Option("--queue", f->queue, "Requests that may wait for a slot (then HTTP 429)")
      .ShowDefault();
  AddSpeculativeFlags(flags, f->spec);
  flags.Option("--prefill-chunk", f->prefill_chunk, "Prompt rows per sequence per step")
      .ShowDefault();
  return [f, given] {
    const Status s = ApplyCluster(*f, given);
    if (!s.ok()) return Fail(s.message());
    return Serve(*f);
  };
}

}  // namespace daisy::apps
