// daisy quantize: a model re-written in one of llama-quantize's file types.
#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>

#include "apps/commands.h"
#include "base/strings.h"
#include "kernels/quant/formats.h"
#include "model/quantize.h"

namespace daisy::apps {
namespace {

struct QuantizeFlags {
  std::string input, output, type;
  bool pure = false;
  int threads = 0;
  bool json = false;
};

uint64_t PeakRss() {
  struct rusage usage {};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<uint64_t>(usage.ru_maxrss) * 1024;
}

nlohmann::json ErrorJson(const model::TypeError& e) {
  return {{"tensors", e.tensors},
          {"elements", e.elements},
          {"bytes", e.bytes},
          {"bits_per_weight", e.bits_per_weight()},
          {"rmse", e.rmse()},
          {"relative_rmse", e.relative_rmse()}};
}

int Run(const QuantizeFlags& f) {
  std::optional<model::QuantMix> mix = model::FindQuantMix(f.type);
  if (!mix) {
    return Fail("--type must be one of " + model::QuantMixNames() + " (a llama-quantize file type) or a weight type (" +
                kernels::WeightFormatNames() + "); got '" + f.type + "'");
  }
  if (f.pure) mix = model::Pure(*mix);
  if (f.input == f.output) return Fail("the output would overwrite the input: give another file name");
  model::QuantizeOptions o{f.input, f.output, *mix, f.threads, nullptr};
  const auto start = std::chrono::steady_clock::now();
  const auto elapsed = [start] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
  const bool tty = isatty(STDERR_FILENO) != 0;
  o.progress = [&](uint64_t done, uint64_t total, const std::string& tensor) {
    std::fprintf(stderr, "%squantize: %s / %s (%.0f%%) %s %.1f s%s", tty ? "\r" : "", HumanBytes(done).c_str(),
                 HumanBytes(total).c_str(), total ? 100.0 * static_cast<double>(done) / static_cast<double>(total) : 100.0,
                 tensor.c_str(), elapsed(), tty && done != total ? "      " : "\n");
  };
  auto report = model::QuantizeModel(o);
  if (!report.ok()) return Fail(report.status().message());
  if (f.json) {
    nlohmann::json types = nlohmann::json::object();
    for (const auto& [name, e] : report->by_type) types[name] = ErrorJson(e);
    nlohmann::json j = {{"input", f.input},
                        {"output", f.output},
                        {"type", mix->name},
                        {"pure", mix->pure},
                        {"file_type", mix->file_type},
                        {"input_bytes", report->input_bytes},
                        {"output_bytes", report->output_bytes},
                        {"tensors", report->tensors},
                        {"quantised", report->quantised},
                        {"by_type", types},
                        {"all", ErrorJson(report->all)},
                        {"seconds", elapsed()},
                        {"peak_rss_bytes", PeakRss()}};
    std::printf("%s\n", j.dump().c_str());
  } else {
    std::printf("wrote %s: %s, %s -> %s in %.1f s; %d of %d tensors quantised\n", f.output.c_str(), mix->name,
                HumanBytes(report->input_bytes).c_str(), HumanBytes(report->output_bytes).c_str(), elapsed(),
                report->quantised, report->tensors);
    for (const auto& [name, e] : report->by_type) {
      std::printf("  %-7s %4d tensors %6.3f bits/weight  rmse %.3g (%.2f%% of the weights' rms)\n", name.c_str(),
                  e.tensors, e.bits_per_weight(), e.rmse(), 100 * e.relative_rmse());
    }
  }
  return 0;
}

}  // namespace

Runner AddQuantize(Flags& flags) {
  auto f = std::make_shared<QuantizeFlags>();
  flags.Option("input", f->input, "Model GGUF (f32, f16, bf16 or q8_0 weights)").Required();
  flags.Option("output", f->output, "GGUF to write").Required();
  flags.Option("--type", f->type,
               "A llama-quantize file type (" + model::QuantMixNames() +
                     "): each tensor's type as llama.cpp's quantiser chooses it; or a weight type for every matrix")
      .Required();
  flags.Switch("--pure", f->pure, "Every weight matrix in the file type's base type (llama-quantize --pure)");
  flags.Option("-t,--threads", f->threads, "Threads (default: all cores)");
  flags.Switch("--json", f->json, "Print a JSON report as the last line (error per type)");
  return [f] { return Run(*f); };
}

}  // namespace daisy::apps
