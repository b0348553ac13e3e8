// daisy perplexity: perplexity over a text (as llama-perplexity computes it) and, with
// --kl-base, the KL divergence and top-token agreement against a base model.
#include <cstdio>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

#include "apps/commands.h"
#include "kernels/kernel_table.h"
#include "model/model.h"
#include "runtime/perplexity.h"
#include "runtime/thread_pool.h"
#include "tokenizer/tokenizer.h"

namespace daisy::apps {
namespace {

struct PerplexityFlags {
  std::string model, text_file, base;
  int ctx = 512;
  int batch = 512;
  int chunks = -1;
  int threads = 0;
  std::string kernels;
  bool json = false;
};

constexpr uint64_t kMaxText = uint64_t{1} << 30;  // 1 GiB of text

Result<std::string> ReadText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound("%s: no such file (or not readable)", path.c_str());
  in.seekg(0, std::ios::end);
  const auto size = static_cast<uint64_t>(in.tellg());
  if (size > kMaxText) return InvalidArgument("%s: %llu bytes is more text than daisy reads (1 GiB)", path.c_str(),
                                              static_cast<unsigned long long>(size));
  in.seekg(0);
  std::string text(size, '\0');
  in.read(text.data(), static_cast<std::streamsize>(size));
  return text;
}

int Run(const PerplexityFlags& f) {
  const kernels::KernelTable* table = &kernels::BestKernels();
  if (!f.kernels.empty() && (table = kernels::FindKernels(f.kernels.c_str())) == nullptr) {
    return Fail("--kernels " + f.kernels + " is not supported on this CPU");
  }
  if (f.ctx < 4) return Fail("--ctx must be at least 4");
  if (f.batch < 1) return Fail("--batch must be at least 1");
  auto text = ReadText(f.text_file);
  if (!text.ok()) return Fail(text.status().message());
  runtime::ThreadPool pool(f.threads);
  auto model = model::Model::Load(f.model, {.threads = pool.size()});
  if (!model.ok()) return Fail(model.status().message());
  std::unique_ptr<model::Model> base;
  if (!f.base.empty()) {
    auto b = model::Model::Load(f.base, {.threads = pool.size()});
    if (!b.ok()) return Fail(b.status().message());
    base = std::move(b).value();
  }
  auto tok = tokenizer::Tokenizer::FromGguf((*model)->reader());
  if (!tok.ok()) return Fail(tok.status().message());
  // llama-perplexity: the whole text tokenised once (BOS first when the model adds one), and
  // each chunk's first token replaced by BOS.
  const std::vector<int32_t> tokens = tok->Encode(*text, false, tok->add_bos());
  const runtime::StageOptions so{.max_batch_rows = std::min(f.batch, f.ctx), .seq_capacity = f.ctx, .max_seqs = 1};
  runtime::Stage stage(**model, so, *table, pool);
  std::unique_ptr<runtime::Stage> base_stage;
  if (base) base_stage = std::make_unique<runtime::Stage>(*base, so, *table, pool);
  const runtime::PerplexityOptions po{f.ctx, f.batch, f.chunks, tok->add_bos() ? tok->bos_id() : -1};
  auto report = runtime::Perplexity(stage, base_stage.get(), tokens, po, [&](const runtime::PerplexityReport& r) {
    std::fprintf(stderr, "perplexity: chunk %d: ppl %.4f", r.chunks, r.ppl);
    if (r.has_base) std::fprintf(stderr, ", mean KL %.6f, same top %.2f%%", r.kl_mean, 100 * r.same_top);
    std::fprintf(stderr, "\n");
  });
  if (!report.ok()) return Fail(report.status().message());
  const runtime::PerplexityReport& r = *report;
  if (f.json) {
    nlohmann::json j = {{"model", f.model},      {"tokens", tokens.size()}, {"ctx", f.ctx},
                        {"chunks", r.chunks},    {"scored", r.scored},     {"nll", r.nll},
                        {"nll_stderr", r.nll_stderr}, {"ppl", r.ppl},      {"running_ppl", r.running_ppl},
                        {"kernels", table->name}};
    if (r.has_base) {
      j["base"] = f.base;
      j["base_ppl"] = r.base_ppl;
      j["ln_ppl_ratio"] = r.nll - r.base_nll;
      j["kl"] = {{"mean", r.kl_mean}, {"stderr", r.kl_stderr}, {"median", r.kl_median},
                 {"p99", r.kl_p99},   {"max", r.kl_max}};
      j["same_top"] = r.same_top;
    }
    std::printf("%s\n", j.dump().c_str());
  } else {
    std::printf("perplexity: %.4f +/- %.4f over %lld tokens (%d chunks of %d)\n", r.ppl, r.ppl * r.nll_stderr,
                static_cast<long long>(r.scored), r.chunks, f.ctx);
    if (r.has_base) {
      std::printf("base perplexity: %.4f; ln(ppl / base ppl) %.6f\n", r.base_ppl, r.nll - r.base_nll);
      std::printf("KL divergence from the base: mean %.6f +/- %.6f, median %.6f, 99%% %.6f, max %.6f\n", r.kl_mean,
                  r.kl_stderr, r.kl_median, r.kl_p99, r.kl_max);
      std::printf("same top token as the base: %.2f%%\n", 100 * r.same_top);
    }
  }
  return 0;
}

}  // namespace

Runner AddPerplexity(Flags& flags) {
  auto f = std::make_shared<PerplexityFlags>();
  flags.Option("-m,--model", f->model, "Model GGUF").Required();
  flags.Option("-f,--file", f->text_file, "Text file to score").Required();
  flags.Option("--kl-base", f->base,
               "A base model (same vocabulary, e.g. the f32/f16 file a quant was made from): also report "
               "the KL divergence of the model's next-token distributions from the base's and how often "
               "their top tokens agree");
  flags.Option("-c,--ctx", f->ctx, "Tokens per chunk; the second half of each is scored").ShowDefault();
  flags.Option("-b,--batch", f->batch, "Rows per forward").ShowDefault();
  flags.Option("--chunks", f->chunks, "Score at most this many chunks (default: all)");
  flags.Option("-t,--threads", f->threads, "Threads (default: all cores)");
  flags.Option("--kernels", f->kernels, "Force a kernel table: scalar|avx2|avx512|amx");
  flags.Switch("--json", f->json, "Print a JSON report as the last line");
  return [f] { return Run(*f); };
}

}  // namespace daisy::apps
