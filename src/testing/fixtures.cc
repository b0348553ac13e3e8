#include "testing/fixtures.h"

#include "model/arch.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <random>

#include "gguf/reader.h"
#include "gguf/writer.h"
#include "shard/compile.h"
#include "tokenizer/hf_import.h"

namespace daisy::testing {

namespace fs = std::filesystem;

namespace {
[[noreturn]] void Abort(const std::string& what, const Status& s) {
  std::fprintf(stderr, "test fixture: %s: %s\n", what.c_str(), s.ToString().c_str());
  std::abort();
}
}  // namespace

TempDir::TempDir(std::string_view name)
    : path(fs::temp_directory_path() / (std::string(name) + "-" + std::to_string(getpid()))) {
  fs::remove_all(path);
  fs::create_directories(path);
}

TempDir::~TempDir() {
  std::error_code ec;
  fs::remove_all(path, ec);
}

model::GenerateOptions Options(const ModelSpec& spec) {
  auto shape = model::FindShape(spec.shape);
  if (!shape.ok()) Abort("shape " + spec.shape, shape.status());
  model::GenerateOptions o;
  o.config = shape->config;
  if (spec.layers > 0) o.config.n_layers = spec.layers;
  if (spec.kv_heads > 0) o.config.n_kv_heads = spec.kv_heads;
  o.config.tied_embeddings = spec.tied;
  if (!spec.arch.empty()) {
    const model::ArchSpec* arch = model::FindArch(spec.arch);
    if (arch == nullptr) Abort("architecture " + spec.arch, InvalidArgument("unknown"));
    o.config.sliding_window = spec.sliding_window;
    model::ApplyArch(*arch, o.config);
  }
  if (spec.longrope > 0) o.config.EnableLongRope(spec.longrope);
  o.attention_bias = spec.bias;
  o.type = spec.type;
  o.seed = spec.seed;
  o.branch_layers = spec.branch_layers;
  o.scaled_from = spec.scaled_from;
  o.scaled_by = spec.scaled_by;
  return o;
}

fs::path MakeModel(const ModelSpec& spec, const fs::path& path) {
  const Status s = model::GenerateModel(Options(spec), tokenizer::BuiltinByteVocab(), path);
  if (!s.ok()) Abort("generating " + path.string(), s);
  return path;
}

void MakeTargetAndDraft(const fs::path& dir, int target_layers, int draft_layers, uint64_t seed, float scaled_by) {
  ModelSpec target{.layers = target_layers, .seed = seed, .branch_layers = draft_layers, .scaled_from = draft_layers,
                   .scaled_by = scaled_by};
  MakeModel(target, dir / "target.gguf");
  ModelSpec draft = target;
  draft.layers = draft_layers;
  draft.scaled_from = -1;
  MakeModel(draft, dir / "draft.gguf");
}

fs::path WithDescription(const fs::path& src, const fs::path& dst,
                         const std::function<void(model::ModelConfig&)>& change) {
  auto r = gguf::Reader::Open(src);
  if (!r.ok()) Abort("opening " + src.string(), r.status());
  auto config = model::ModelConfig::FromGguf(*r);
  if (!config.ok()) Abort("reading " + src.string(), config.status());
  change(*config);
  auto w = gguf::Writer::Create(dst);
  if (!w.ok()) Abort("creating " + dst.string(), w.status());
  const std::string family = config->arch + ".";
  for (const gguf::MetadataEntry& e : r->metadata()) {
    if (e.key != "general.alignment" && !e.key.starts_with(family)) w->AddValue(e.key, e.value);
  }
  config->WriteDescription(*w);
  for (const gguf::TensorInfo& t : r->tensors()) {
    const Status s = w->AddTensor(t.name, t.type, std::span<const int64_t>(t.ne, t.n_dims));
    if (!s.ok()) Abort("writing " + dst.string(), s);
  }
  for (const gguf::TensorInfo& t : r->tensors()) {
    const Status s = w->WriteTensorData(r->TensorData(t));
    if (!s.ok()) Abort("writing " + dst.string(), s);
  }
  if (auto f = w->Finish(); !f.ok()) Abort("finishing " + dst.string(), f.status());
  return dst;
}

void CompileShards(const fs::path& model, const fs::path& out, int stages, std::vector<int> layer_counts) {
  shard::CompileOptions c;
  c.model = model;
  c.out_dir = out;
  c.stages = stages;
  c.layer_counts = std::move(layer_counts);
  c.progress = false;
  if (auto r = shard::Compile(c); !r.ok()) Abort("compiling " + model.string(), r.status());
}

std::vector<int32_t> Prompt(int n, int salt) {
  std::vector<int32_t> t;
  for (int i = 0; i < n; ++i) t.push_back((i * 37 + salt * 13) % 250 + 1);
  return t;
}

std::vector<int32_t> RandomTokens(int n, uint32_t seed, int vocab) {
  std::mt19937 rng(seed);
  std::vector<int32_t> t(n);
  for (int32_t& x : t) x = static_cast<int32_t>(rng() % vocab);
  return t;
}

}  // namespace daisy::testing
