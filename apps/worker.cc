// daisy worker (serve one shard) and daisy proxy (WAN emulator between stages).
#include <signal.h>

#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>

#include "apps/commands.h"
#include "apps/coordinator.h"
#include "base/log.h"
#include "base/memory_stats.h"
#include "base/strings.h"
#include "pipeline/cluster.h"
#include "pipeline/worker.h"
#include "shard/plan.h"
#include "transport/proxy.h"

namespace daisy::apps {

// Blocks until SIGINT or SIGTERM.
void WaitForTermSignal() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  int sig = 0;
  sigwait(&set, &sig);
}

void BlockTermSignals() {  // before any thread starts, so that only sigwait sees them
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

namespace {

struct WorkerFlags {
  std::string shard, listen = "127.0.0.1:7000", key_file, kv_budget, kernels, cluster;
  int stage = -1;
  int threads = 0;
  bool mmap_weights = false;
  bool tls = false;
  transport::TlsFiles tls_files;
};

// Takes this worker's shard, listen address and key from --cluster FILE --stage N; flags given on
// the command line win.
Status ApplyCluster(WorkerFlags& f, bool shard_given, bool listen_given, bool key_given) {
  if (f.cluster.empty()) {
    if (f.stage >= 0) return InvalidArgument("--stage goes with --cluster FILE");
    if (!shard_given) return InvalidArgument("give --shard FILE (or --cluster FILE --stage N)");
    return Status::Ok();
  }
  DAISY_ASSIGN_OR_RETURN(pipeline::ClusterFile c, pipeline::LoadClusterFile(f.cluster));
  if (f.stage < 0) return InvalidArgument("--cluster needs --stage N: which of its stages to serve");
  if (f.stage >= static_cast<int>(c.stages.size())) {
    return InvalidArgument("--stage %d: %s lists %zu stages", f.stage, f.cluster.c_str(), c.stages.size());
  }
  const pipeline::ClusterStage& s = c.stages[f.stage];
  if (s.address.empty()) {
    return InvalidArgument("%s: stage %d runs in the coordinator (it has no address), not in a worker",
                           f.cluster.c_str(), f.stage);
  }
  if (!shard_given) {
    if (s.shard.empty()) return InvalidArgument("%s: stage %d has no shard; give --shard", f.cluster.c_str(), f.stage);
    f.shard = s.shard;
  }
  if (!listen_given) f.listen = s.listen;
  if (!key_given) f.key_file = c.key_file;
  f.tls = f.tls || c.tls;
  return Status::Ok();
}

int RunWorker(const WorkerFlags& f) {
  BlockTermSignals();
  pipeline::WorkerOptions o;
  auto listen = transport::ParseHostPort(f.listen);
  if (!listen.ok()) return Fail("--listen: " + listen.status().message());
  o.listen = *listen;
  o.threads = f.threads;
  if (!f.key_file.empty()) {
    auto key = transport::ClusterKey::Load(f.key_file);
    if (!key.ok()) return Fail(key.status().message());
    o.key = std::move(*key);
  }
  auto tls = transport::TlsFromFlags(f.tls, f.tls_files, o.key ? &*o.key : nullptr);
  if (!tls.ok()) return Fail(tls.status().message());
  o.tls = std::move(*tls);
  if (!f.kv_budget.empty()) {
    auto b = shard::ParseBytes(f.kv_budget);
    if (!b.ok()) return Fail("--kv-budget: " + b.status().message());
    o.kv_budget_bytes = *b;
  }
  if (!f.kernels.empty()) {
    o.kernels = kernels::FindKernels(f.kernels.c_str());
    if (o.kernels == nullptr) return Fail("--kernels " + f.kernels + " is not supported on this CPU");
  }
  auto shard = shard::LoadShard(f.shard, !f.mmap_weights);
  if (!shard.ok()) return Fail(shard.status().message());
  const shard::ShardInfo info = shard->info;
  if (f.stage >= 0 && info.stage != f.stage) {
    return Fail(StrFormat("%s holds stage %d, but %s lists it as stage %d", f.shard.c_str(),
                          info.stage, f.cluster.c_str(), f.stage));
  }
  const double load_seconds = shard->load_seconds;
  const std::string o_tls_name = o.tls ? o.tls->Describe() : "off";
  auto worker = pipeline::Worker::Start(std::move(*shard), std::move(o));
  if (!worker.ok()) return Fail(worker.status().message());
  if (f.key_file.empty() && f.tls_files.ca.empty()) {
    DAISY_LOG_WARN("worker: no --key-file: the cluster runs open; anyone who can reach %s can "
                   "drive this worker", f.listen.c_str());
  }
  nlohmann::json ready = {{"event", "ready"},      {"port", (*worker)->port()},
                          {"stage", info.stage},    {"stages", info.n_stages},
                          {"first_layer", info.first_layer}, {"last_layer", info.last_layer},
                          {"fingerprint", info.fingerprint}, {"load_seconds", load_seconds},
                          {"huge_page_bytes", HugePageBytes()}, {"rss_bytes", PeakRssBytes()},
                          {"tls", o_tls_name}};
  std::printf("%s\n", ready.dump().c_str());
  std::fflush(stdout);
  DAISY_LOG_INFO("worker: %s ready on %s:%u in %.2f s", info.Describe().c_str(),
                 listen->host.c_str(), (*worker)->port(), load_seconds);
  WaitForTermSignal();
  (*worker)->Stop();
  return 0;
}

struct ProxyFlags {
  std::string listen, to;
  double delay = 0, jitter = 0, rate = 0;
  uint64_t seed = 1;
  bool blackhole = false;
};

int RunProxy(const ProxyFlags& f) {
  sigset_t set;
  sigemptyset(&set);
  for (int sig : {SIGINT, SIGTERM, SIGUSR1, SIGUSR2}) sigaddset(&set, sig);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);  // before any thread starts: only sigwait sees them
  transport::ProxyOptions o;
  auto listen = transport::ParseHostPort(f.listen);
  if (!listen.ok()) return Fail("--listen: " + listen.status().message());
  if (f.to.empty() && !f.blackhole) return Fail("--to HOST:PORT is required (unless --blackhole)");
  if (!f.to.empty()) {
    auto to = transport::ParseHostPort(f.to);
    if (!to.ok()) return Fail("--to: " + to.status().message());
    o.to = *to;
  }
  o.listen = *listen;
  o.blackhole = f.blackhole;
  o.delay_ms = f.delay;
  o.jitter_ms = f.jitter;
  o.rate_mbit = f.rate;
  o.seed = f.seed;
  auto proxy = transport::Proxy::Start(o);
  if (!proxy.ok()) return Fail(proxy.status().message());
  nlohmann::json ready = {{"event", "ready"}, {"port", (*proxy)->port()}, {"to", f.to},
                          {"delay_ms", f.delay}, {"jitter_ms", f.jitter}, {"rate_mbit", f.rate},
                          {"blackhole", f.blackhole}};
  std::printf("%s\n", ready.dump().c_str());
  std::fflush(stdout);
  while (true) {
    int sig = 0;
    sigwait(&set, &sig);
    if (sig == SIGUSR1) {
      DAISY_LOG_INFO("proxy: SIGUSR1: cutting %zu links mid-frame", (*proxy)->Cut());
    } else if (sig == SIGUSR2) {
      DAISY_LOG_INFO("proxy: SIGUSR2: %zu links go silent", (*proxy)->Stall());
    } else {
      break;
    }
  }
  (*proxy)->Stop();
  return 0;
}

}  // namespace

Runner AddWorker(Flags& flags) {
  auto f = std::make_shared<WorkerFlags>();
  const Flag shard = flags.Option("--shard", f->shard, "Shard file (from daisy compile)");
  const Flag listen =
      flags.Option("--listen", f->listen, "HOST:PORT to listen on (port 0: any free port)")
          .ShowDefault();
  const Flag key =
      flags.Option("--key-file", f->key_file, "Cluster key: peers must prove they hold it");
  AddTlsFlags(flags, f->tls, f->tls_files, "Encrypt every link of this worker with TLS 1.3 keyed by --key-file");
  flags.Option("--cluster", f->cluster, "TOML cluster file (docs/cluster-file.md); with --stage");
  flags.Option("--stage", f->stage, "Which stage of --cluster FILE to serve");
  flags.Option("-t,--threads", f->threads, "Compute threads (default: all cores)");
  flags.Option("--kv-budget", f->kv_budget, "KV cache memory limit, e.g. 4G");
  flags.Option("--kernels", f->kernels, "Force a kernel table: scalar|avx2|avx512|amx");
  flags.Switch("--mmap-weights", f->mmap_weights,
               "Serve weights straight from the file mapping (4 KiB pages) instead of copying them "
               "into 2 MiB pages at load (faster compute; see docs/shard-format.md)");
  return [f, shard, listen, key] {
    const Status s = ApplyCluster(*f, shard.Given(), listen.Given(), key.Given());
    if (!s.ok()) return Fail(s.message());
    return RunWorker(*f);
  };
}

Runner AddProxy(Flags& flags) {
  auto f = std::make_shared<ProxyFlags>();
  flags.Option("--listen", f->listen, "HOST:PORT to accept on").Required();
  flags.Option("--to", f->to, "HOST:PORT to forward to");
  flags.Option("--delay", f->delay, "Added one-way latency per chunk, ms").ShowDefault();
  flags.Option("--jitter", f->jitter, "Extra uniform random latency 0..J ms").ShowDefault();
  flags.Option("--rate", f->rate, "Bandwidth limit per direction, Mbit/s (0: none)").ShowDefault();
  flags.Option("--seed", f->seed, "Jitter seed").ShowDefault();
  flags.Switch("--blackhole", f->blackhole,
               "Accept connections and never answer (a peer that hangs); SIGUSR1 cuts the open links "
               "mid-frame, SIGUSR2 makes them go silent");
  return [f] { return RunProxy(*f); };
}

}  // namespace daisy::apps
