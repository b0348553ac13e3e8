#include "apps/coordinator.h"

#include <algorithm>
#include <filesystem>

#include "base/log.h"
#include "base/strings.h"
#include "pipeline/cluster.h"

namespace daisy::apps {

void AddTlsFlags(Flags& flags, bool& tls, transport::TlsFiles& files, const char* tls_help) {
  flags.Switch("--tls", tls, tls_help);
  flags.Option("--tls-cert", files.cert, "TLS with certificates: this node's certificate (PEM)");
  flags.Option("--tls-key", files.key, "TLS with certificates: this node's private key (PEM file)");
  flags.Option("--tls-ca", files.ca, "TLS with certificates: the cluster CA that signed every node's certificate");
}

GivenFlags AddPipelineFlags(Flags& flags, CoordinatorFlags& f) {
  flags.Option("--shard", f.shards,
               "Shard(s) to run in this process, stage 0 first (repeat for an in-process split)");
  flags.Option("--workers", f.workers,
               "HOST:PORT of the remaining stages, in order; standbys holding the same shard after '|' "
               "(A,B|B2: B2 takes stage 2 when B is lost)");
  flags.Option("--cluster", f.cluster,
               "TOML cluster file listing the shards, workers and key (docs/cluster-file.md)");
  GivenFlags given;
  given.key_file = flags.Option("--key-file", f.key_file, "Cluster key the workers were started with");
  AddTlsFlags(flags, f.tls, f.tls_files,
              "Encrypt the links to the workers with TLS 1.3 keyed by --key-file (the workers need --tls too)");
  given.wire = flags.Option("--wire", f.wire, "Activations between stages: f32 (exact), bf16, f16, q8_0")
                   .ShowDefault();
  given.connect_timeout = flags.Option("--connect-timeout", f.connect_timeout,
                                       "Seconds to keep retrying the workers")
                              .ShowDefault();
  given.peer_timeout = flags.Option("--peer-timeout", f.peer_timeout,
                                    "Seconds a worker may answer nothing (not even a ping) before its "
                                    "requests fail naming it: a stopped or hung process (0: wait forever)")
                           .ShowDefault();
  given.forward_timeout = flags.Option("--forward-timeout", f.forward_timeout,
                                       "Seconds a forward may take through the workers before it fails "
                                       "naming the stage that has not finished it (0: no bound)")
                              .ShowDefault();
  flags.Switch("--mmap-weights", f.mmap_weights,
               "Serve weights straight from the file mapping (4 KiB pages) instead of copying them "
               "into 2 MiB pages at load (faster compute; see docs/shard-format.md)");
  return given;
}

Status ApplyCluster(CoordinatorFlags& f, const GivenFlags& given) {
  if (f.cluster.empty()) return Status::Ok();
  if (!f.model.empty() || !f.shards.empty() || !f.workers.empty()) {
    return InvalidArgument("--cluster lists the shards and workers: drop -m, --shard and --workers");
  }
  DAISY_ASSIGN_OR_RETURN(pipeline::ClusterFile c, pipeline::LoadClusterFile(f.cluster));
  f.shards = c.LocalShards();
  f.workers = c.Workers();
  if (!given.key_file.Given()) f.key_file = c.key_file;
  f.tls = f.tls || c.tls;
  if (!given.wire.Given() && c.wire) f.wire = *c.wire;
  if (!given.connect_timeout.Given() && c.connect_timeout) f.connect_timeout = *c.connect_timeout;
  if (!given.peer_timeout.Given() && c.peer_timeout) f.peer_timeout = *c.peer_timeout;
  if (!given.forward_timeout.Given() && c.forward_timeout) f.forward_timeout = *c.forward_timeout;
  return Status::Ok();
}

Result<Loaded> Load(const CoordinatorFlags& f, std::shared_ptr<runtime::ThreadPool> pool) {
  Loaded l;
  l.kernels = &kernels::BestKernels();
  if (!f.kernels.empty()) {
    l.kernels = kernels::FindKernels(f.kernels.c_str());
    if (l.kernels == nullptr) {
      return InvalidArgument("--kernels %s is not supported on this CPU", f.kernels.c_str());
    }
  }
  if (f.model.empty() == f.shards.empty()) {
    return InvalidArgument("give either -m MODEL, --shard DIR/stage-0.daisy (with --workers) or "
                           "--cluster FILE");
  }
  if (!f.model.empty() && !f.workers.empty()) {
    return InvalidArgument("--workers runs with shards: --shard DIR/stage-0.daisy --workers ...");
  }
  l.pool = pool != nullptr ? std::move(pool) : std::make_shared<runtime::ThreadPool>(f.threads);
  std::string path;
  if (!f.model.empty()) {
    DAISY_ASSIGN_OR_RETURN(l.model, model::Model::Load(f.model, {.threads = l.pool->size()}));
    path = f.model;
  } else {
    for (const std::string& p : f.shards) {
      DAISY_ASSIGN_OR_RETURN(shard::Shard s, shard::LoadShard(p, !f.mmap_weights));
      l.shards.push_back(std::move(s));
    }
    if (!l.shards.front().info.embeddings()) {
      return InvalidArgument("%s: the coordinator runs stage 0 (the tokenizer and embeddings); "
                             "give DIR/stage-0.daisy first", f.shards.front().c_str());
    }
    path = f.shards.front();
  }
  DAISY_ASSIGN_OR_RETURN(tokenizer::Tokenizer tok, tokenizer::Tokenizer::FromGguf(l.first().reader()));
  l.tokenizer = std::make_unique<tokenizer::Tokenizer>(std::move(tok));
  const gguf::Reader& r = l.first().reader();
  l.name = std::filesystem::path(path).stem().string();
  if (r.Find("general.name") != nullptr) {
    auto n = r.GetString("general.name");
    if (n.ok() && !n->empty()) l.name = std::string(*n);
  }
  return l;
}

Result<std::unique_ptr<pipeline::Pipeline>> MakePipeline(const CoordinatorFlags& f, Loaded& l,
                                                         int ctx, int max_seqs, int rope_context) {
  std::vector<const model::Model*> models;
  std::vector<runtime::StageOptions> options;
  runtime::StageOptions base{.max_batch_rows = std::max(1, f.batch), .seq_capacity = ctx,
                             .max_seqs = max_seqs, .rope_context = rope_context};
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
    // "A,B|B2,C": stage by stage, each a worker and its standbys after '|'.
    for (const std::string& stage : StrSplit(f.workers, ',')) {
      std::vector<transport::HostPort> candidates;
      for (const std::string& w : StrSplit(stage, '|')) {
        DAISY_ASSIGN_OR_RETURN(transport::HostPort hp, transport::ParseHostPort(w));
        candidates.push_back(hp);
      }
      ro.workers.push_back(candidates.front());
      ro.standby.emplace_back(candidates.begin() + 1, candidates.end());
    }
    if (!f.key_file.empty()) {
      DAISY_ASSIGN_OR_RETURN(transport::ClusterKey key, transport::ClusterKey::Load(f.key_file));
      ro.key = std::move(key);
    } else if (f.tls_files.ca.empty()) {
      DAISY_LOG_WARN("no --key-file: talking to the workers without authentication (open cluster)");
    }
    DAISY_ASSIGN_OR_RETURN(ro.tls, transport::TlsFromFlags(f.tls, f.tls_files, ro.key ? &*ro.key : nullptr));
    if (ro.tls) DAISY_LOG_INFO("links to the workers: %s", ro.tls->Describe().c_str());
    DAISY_ASSIGN_OR_RETURN(ro.wire, pipeline::ParseWireType(f.wire));
    ro.max_rows = base.max_batch_rows;
    // Releases travel to each worker directly while forwards go round the ring, so a worker
    // may briefly hold a finished sequence next to the new one that took its slot.
    ro.max_seqs = max_seqs == 1 ? 1 : 2 * max_seqs;
    ro.seq_capacity = ctx;
    ro.rope_context = rope_context;
    ro.connect_deadline = transport::Millis(static_cast<int64_t>(f.connect_timeout * 1000));
    if (!(f.peer_timeout >= 0 && f.peer_timeout <= 86400) || !(f.forward_timeout >= 0 && f.forward_timeout <= 86400)) {
      return InvalidArgument("--peer-timeout and --forward-timeout must be 0 to 86400 seconds");
    }
    ro.peer_timeout = transport::Millis(static_cast<int64_t>(f.peer_timeout * 1000));
    ro.forward_timeout = transport::Millis(static_cast<int64_t>(f.forward_timeout * 1000));
    // Pings several times per peer timeout, so one late pong is not a failure.
    ro.heartbeat = std::clamp(ro.peer_timeout / 5, transport::Millis(50), transport::Millis(1000));
    DAISY_ASSIGN_OR_RETURN(remote, pipeline::RemoteChain::Connect(ro, infos));
  } else if (!infos.empty()) {
    DAISY_RETURN_IF_ERROR(shard::CheckChain(infos).With("the local shards do not make a whole "
                                                        "model (add --workers for the rest)"));
  }
  return std::make_unique<pipeline::Pipeline>(std::move(models), std::move(options), *l.kernels,
                                              *l.pool, std::move(remote));
}

int StageCount(pipeline::Pipeline& p) {
  return p.n_stages();
}

void AddSpeculativeFlags(Flags& flags, SpeculativeFlags& s) {
  flags.Option("--draft", s.draft, "Speculative decoding with this draft model (same vocabulary)");
  flags.Switch("--lookup", s.lookup, "Speculative decoding by prompt lookup (no draft model)");
  flags.Option("--spec-k", s.k, "Drafted tokens per verify (0: adaptive)").ShowDefault();
  flags.Option("--spec-k-max", s.k_max, "Largest adaptive K").ShowDefault();
  flags.Option("--spec-profile", s.profile,
               "JSON file keeping what the adaptive K learned about this model and draft between runs "
               "(read at the start if it exists; written back at the end, and by serve whenever it goes idle)");
}

namespace {

// A file's name and size: cheap, and enough to tell models apart (a wrong match costs speed only).
std::string FileIdentity(const std::string& path) {
  std::error_code ec;
  const uintmax_t size = std::filesystem::file_size(path, ec);
  return std::filesystem::path(path).filename().string() + " (" + (ec ? "?" : std::to_string(size)) + " bytes)";
}

}  // namespace

Result<std::unique_ptr<Speculation>> MakeSpeculation(const SpeculativeFlags& s, const CoordinatorFlags& f,
                                                     const Loaded& target, int ctx, int max_seqs,
                                                     int rope_context) {
  if (!s.draft.empty() && s.lookup) return InvalidArgument("give one of --draft and --lookup, not both");
  if (s.k < 0 || s.k_max < 1 || s.k_max > 64) {
    return InvalidArgument("--spec-k must be 0 (adaptive) or more, and --spec-k-max 1 to 64");
  }
  if (!s.profile.empty() && !s.any()) return InvalidArgument("--spec-profile needs --draft or --lookup");
  auto spec = std::make_unique<Speculation>();
  spec->pair = (target.shards.empty() ? "model " + FileIdentity(f.model)
                                      : "model fingerprint " + target.shards.front().info.fingerprint) +
               ", " + (s.lookup ? std::string("prompt lookup") : "draft " + FileIdentity(s.draft));
  if (s.lookup) spec->drafter = std::make_unique<coord::LookupDrafter>();
  if (s.draft.empty()) return spec;
  CoordinatorFlags df;
  df.model = s.draft;
  df.threads = f.threads;
  df.batch = f.batch;
  df.kernels = f.kernels;
  df.mmap_weights = f.mmap_weights;
  auto l = Load(df, target.pool);
  if (!l.ok()) return Status(l.status().code(), "--draft: " + l.status().message());
  spec->draft = std::move(*l);
  const tokenizer::Tokenizer& a = *target.tokenizer;
  const tokenizer::Tokenizer& b = *spec->draft.tokenizer;
  if (a.n_vocab() != b.n_vocab() || spec->draft.first().config().n_vocab != target.first().config().n_vocab) {
    return InvalidArgument("--draft %s: its vocabulary has %d tokens, the model's %d: a draft must share "
                           "the model's vocabulary", s.draft.c_str(), b.n_vocab(), a.n_vocab());
  }
  for (int32_t id = 0; id < a.n_vocab(); ++id) {
    if (a.Piece(id) != b.Piece(id) || a.type(id) != b.type(id)) {
      return InvalidArgument("--draft %s: token %d is '%s' there and '%s' in the model: a draft must "
                             "share the model's vocabulary", s.draft.c_str(), id, b.Piece(id).c_str(),
                             a.Piece(id).c_str());
    }
  }
  auto pipe = MakePipeline(df, spec->draft, ctx, max_seqs, rope_context);
  if (!pipe.ok()) return Status(pipe.status().code(), "--draft: " + pipe.status().message());
  spec->draft_pipe = std::move(*pipe);
  spec->drafter = std::make_unique<coord::ModelDrafter>(*spec->draft_pipe, std::max(1, f.batch));
  return spec;
}

}  // namespace daisy::apps
