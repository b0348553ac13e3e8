// daisy compile: split a model into pre-packed pipeline shards.
#include <sys/resource.h>

#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>

#include "apps/commands.h"
#include "base/strings.h"
#include "shard/compile.h"

namespace daisy::apps {
namespace {

struct CompileFlags {
  std::string model;
  std::string out_dir;
  int stages = 0;
  std::string layers;
  std::string memory;
  bool json = false;
};

int Run(const CompileFlags& f) {
  shard::CompileOptions o;
  o.model = f.model;
  o.out_dir = f.out_dir;
  o.stages = f.stages;
  if (!f.layers.empty()) {
    for (const std::string& part : StrSplit(f.layers, ',')) {
      char* end = nullptr;
      const long v = std::strtol(part.c_str(), &end, 10);
      if (part.empty() || *end != '\0' || v < 1 || v > 1 << 20) {
        return Fail("--layers: '" + part + "' is not a positive layer count");
      }
      o.layer_counts.push_back(static_cast<int>(v));
    }
  }
  if (!f.memory.empty()) {
    for (const std::string& part : StrSplit(f.memory, ',')) {
      auto bytes = shard::ParseBytes(part);
      if (!bytes.ok()) return Fail("--memory: " + bytes.status().message());
      o.memory.push_back(*bytes);
    }
  }
  if (o.stages == 0 && o.layer_counts.empty() && o.memory.empty()) {
    return Fail("give --stages N, --layers a,b,... or --memory M0,M1,...");
  }
  o.progress = !f.json;
  auto report = shard::Compile(o);
  if (!report.ok()) return Fail(report.status().message());
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  const uint64_t peak_rss = static_cast<uint64_t>(usage.ru_maxrss) * 1024;
  nlohmann::json shards = nlohmann::json::array();
  for (const auto& s : report->shards) {
    shards.push_back({{"path", s.path.string()},
                      {"stage", s.info.stage},
                      {"first_layer", s.info.first_layer},
                      {"last_layer", s.info.last_layer},
                      {"bytes", s.bytes}});
    if (!f.json) {
      std::printf("%s: layers %d-%d%s%s, %s\n", s.path.c_str(), s.info.first_layer,
                  s.info.last_layer - 1, s.info.embeddings() ? " + embeddings" : "",
                  s.info.head() ? " + head" : "", HumanBytes(s.bytes).c_str());
    }
  }
  if (f.json) {
    nlohmann::json j = {{"fingerprint", report->fingerprint}, {"shards", shards},
                        {"seconds", report->seconds}, {"peak_rss_bytes", peak_rss}};
    std::printf("%s\n", j.dump().c_str());
  } else {
    std::printf("fingerprint %s; %zu shards in %.1f s, peak memory %s\n",
                report->fingerprint.c_str(), report->shards.size(), report->seconds,
                HumanBytes(peak_rss).c_str());
  }
  return 0;
}

}  // namespace

Runner AddCompile(Flags& flags) {
  auto f = std::make_shared<CompileFlags>();
  flags.Option("-m,--model", f->model, "Model GGUF to split").Required();
  flags.Option("-o,--out", f->out_dir, "Output directory (stage-<i>.daisy)").Required();
  flags.Option("--stages", f->stages, "Number of stages, balanced by weight bytes read per token");
  flags.Option("--layers", f->layers, "Explicit split: layers per stage, e.g. 10,6");
  flags.Option("--memory", f->memory,
               "Split for nodes of these memory sizes, e.g. 16G,8G (weights per stage in "
               "proportion, each within its node)");
  flags.Switch("--json", f->json, "Print one JSON object (shards, fingerprint, time, peak memory)");
  return [f] { return Run(*f); };
}

}  // namespace daisy::apps
