// Matrix-kernel throughput per kernel table and weight type, against the machine's read
// bandwidth measured in the same run. Prints one JSON object.
//   daisy-bench-kernels [--rows 8192] [--cols 4096] [--batch 1] [--reps 5] [--prefetch-ab]
//   daisy-bench-kernels --log-sum-exp 151936 [--reps 11] [--kernels scalar,avx512]
// --prefetch-ab runs each product with the decode tiles' software prefetches off and on
// (OverridePrefetch), taking turns rep by rep in this one process, and reports both: this
// host's speed swings between runs far more than between reps.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>
#include <vector>

#include "apps/flags.h"
#include "base/aligned_buffer.h"
#include "kernels/activations.h"
#include "kernels/int_matmul.h"
#include "kernels/kernel_table.h"
#include "kernels/quant/q8_0.h"
#include "kernels/quant/q4_0.h"
#include "kernels/quant/float_formats.h"
#include "kernels/weights.h"

using namespace daisy::kernels;

namespace {
double Seconds(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

uint64_t SumRange(const uint64_t* p, size_t n) {
  uint64_t a = 0, b = 0, c = 0, d = 0;
  for (size_t i = 0; i < n; i += 4) {
    a += p[i];
    b += p[i + 1];
    c += p[i + 2];
    d += p[i + 3];
  }
  return a + b + c + d;
}

// Read bandwidth: `threads` threads each summing their share of a buffer much larger than the
// caches; best of `reps`.
double ReadBandwidth(const std::vector<uint64_t>& buf, int reps, int threads) {
  double best = 0;
  for (int r = 0; r < reps; ++r) {
    std::vector<uint64_t> sums(threads);
    const size_t share = buf.size() / threads / 4 * 4;
    const auto t = std::chrono::steady_clock::now();
    std::vector<std::thread> pool;
    for (int i = 0; i < threads; ++i) {
      pool.emplace_back([&, i] { sums[i] = SumRange(buf.data() + i * share, share); });
    }
    for (auto& th : pool) th.join();
    const double s = Seconds(t);
    uint64_t total = 0;
    for (uint64_t v : sums) total += v;
    if (total == 42) std::printf(" ");
    best = std::max(best, share * threads * 8.0 / s / 1e9);
  }
  return best;
}
}  // namespace

// Times OpKernels::log_sum_exp per table over 64 rows of `vocab` normal logits (one output row
// of a model of that vocabulary each), the tables taking turns rep by rep; prints one JSON object
// of microseconds a row (min / median / max over reps).
int LogSumExpBench(int64_t vocab, int reps, const std::string& names) {
  std::vector<const KernelTable*> tables;
  for (const KernelTable* t : AllSupportedKernels()) {
    bool named = names.empty();
    for (size_t at = 0; at <= names.size() && !named;) {
      const size_t comma = std::min(names.find(',', at), names.size());
      named = std::string_view(names).substr(at, comma - at) == t->name;
      at = comma + 1;
    }
    if (named) tables.push_back(t);
  }
  constexpr int kRows = 64;
  std::mt19937 rng(1);
  std::normal_distribution<float> dist(0.f, 3.f);
  std::vector<float> logits(static_cast<size_t>(vocab) * kRows);
  for (float& v : logits) v = dist(rng);
  std::vector<std::vector<double>> us(tables.size());
  double sink = 0;
  for (int r = 0; r < reps; ++r) {
    for (size_t i = 0; i < tables.size(); ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      for (int row = 0; row < kRows; ++row) sink += tables[i]->ops.log_sum_exp(logits.data() + row * vocab, vocab);
      us[i].push_back(Seconds(t0) * 1e6 / kRows);
    }
  }
  nlohmann::json out = {{"vocab", vocab}, {"reps", reps}, {"checksum", sink}};
  for (size_t i = 0; i < tables.size(); ++i) {
    std::sort(us[i].begin(), us[i].end());
    out["us_per_row"][tables[i]->name] = {{"min", us[i].front()}, {"median", us[i][us[i].size() / 2]}, {"max", us[i].back()}};
  }
  std::printf("%s\n", out.dump().c_str());
  return 0;
}

int main(int argc, char** argv) {
  daisy::apps::CommandLine cli("daisy kernel benchmark");
  daisy::apps::Flags& flags = cli.flags();
  int64_t rows = 8192, cols = 4096;
  int batch = 1, reps = 5;
  bool bandwidth_only = false;
  flags.Option("--rows", rows);
  flags.Option("--cols", cols);
  flags.Option("--batch", batch);
  flags.Option("--reps", reps);
  std::string type_names = "q4_0,q8_0,f16,q4_K,q6_K";
  flags.Option("--types", type_names, "Weight types, comma-separated").ShowDefault();
  flags.Switch("--bandwidth-only", bandwidth_only, "Only measure read bandwidth (1 and 2 threads)");
  bool prefetch_ab = false;
  flags.Switch("--prefetch-ab", prefetch_ab, "Each product with the decode prefetches off and on, taking turns");
  std::string kernel_names;
  flags.Option("--kernels", kernel_names, "Kernel tables to run, comma-separated (default: every one this CPU has)");
  int64_t lse_vocab = 0;
  flags.Option("--log-sum-exp", lse_vocab,
               "Only time the log-probabilities' normaliser (OpKernels::log_sum_exp) over rows of this many "
               "logits, each table in turn, rep by rep");
  bool list_tables = false;
  flags.Switch("--list", list_tables, "Only print the kernel tables this CPU runs, one per line (scripts/test.sh)");
  if (const int code = cli.Parse(argc, argv); code >= 0) return code;
  if (list_tables) {
    for (const KernelTable* t : AllSupportedKernels()) std::printf("%s\n", t->name);
    return 0;
  }
  if (lse_vocab > 0) return LogSumExpBench(lse_vocab, std::max(1, reps), kernel_names);

  std::vector<uint64_t> big(static_cast<size_t>(1) << 27);  // 1 GiB
  for (size_t i = 0; i < big.size(); ++i) big[i] = i;
  nlohmann::json out;
  out["read_gb_s_1thread"] = ReadBandwidth(big, 3, 1);
  out["read_gb_s_2threads"] = ReadBandwidth(big, 3, 2);
  if (bandwidth_only) {
    std::printf("%s\n", out.dump().c_str());
    return 0;
  }
  big.clear();
  big.shrink_to_fit();

  std::mt19937 rng(1);
  std::normal_distribution<float> dist;
  std::vector<float> values(rows * cols);
  for (float& v : values) v = dist(rng);
  nlohmann::json results = nlohmann::json::array();
  std::vector<WeightType> types;
  for (size_t at = 0; at <= type_names.size();) {
    const size_t comma = std::min(type_names.find(',', at), type_names.size());
    const WeightFormat* f = FindFormat(std::string_view(type_names).substr(at, comma - at));
    if (f == nullptr) {
      std::fprintf(stderr, "unknown type in --types %s\n", type_names.c_str());
      return 2;
    }
    types.push_back(f->type);
    at = comma + 1;
  }
  for (WeightType type : types) {
    std::vector<uint8_t> gguf(GgufBytes(type, rows, cols));
    FormatOf(type).quantize_row(values.data(), gguf.data(), rows * cols);
    // Weights in huge-page-backed buffers, as a loaded model's are (base/aligned_buffer.h).
    const size_t data_bytes = PackedDataBytes(type, rows, cols), scale_bytes = PackedScaleBytes(type, rows, cols);
    daisy::AlignedBuffer data = daisy::AlignedBuffer::Allocate(data_bytes);
    daisy::AlignedBuffer scales = daisy::AlignedBuffer::Allocate(scale_bytes + 64);
    PackFromGguf(type, gguf.data(), rows, cols, data.data(), reinterpret_cast<uint16_t*>(scales.data()));
    const WeightMatrix w{type, rows, cols, data.data(), reinterpret_cast<const uint16_t*>(scales.data())};
    const size_t stride = (ActRowBytes(type, cols) + 63) / 64 * 64;
    std::vector<uint8_t> act(stride * batch);
    for (int r = 0; r < batch; ++r) ConvertActRow(type, values.data() + r * cols, cols, act.data() + r * stride);
    std::vector<float> y(rows * batch);
    const double bytes = static_cast<double>(data_bytes + scale_bytes);
    const std::string wanted_kernels = std::string(",") + kernel_names + ",";
    for (const KernelTable* t : AllSupportedKernels()) {
      if (std::strcmp(t->name, "scalar") == 0 && rows * cols > (1 << 24)) continue;
      if (!kernel_names.empty() && wanted_kernels.find(std::string(",") + t->name + ",") == std::string::npos) continue;
      // Per variant (the CPU's prefetch choice; or, with --prefetch-ab, off and on in turns).
      std::vector<double> secs[2];
      const int variants = prefetch_ab ? 2 : 1;
      for (int r = 0; r < reps; ++r) {
        for (int i = 0; i < variants; ++i) {
          const int v = r % 2 == 0 ? i : variants - 1 - i;
          if (prefetch_ab) OverridePrefetch(v);
          const auto start = std::chrono::steady_clock::now();
          t->Matmul(type)(w, act.data(), stride, batch, y.data(), rows, 0, rows);
          secs[v].push_back(Seconds(start));
        }
      }
      OverridePrefetch(-1);
      for (int v = 0; v < variants; ++v) {
        std::sort(secs[v].begin(), secs[v].end());
        const double median = secs[v][secs[v].size() / 2];
        nlohmann::json result = {{"kernels", t->name},
                                 {"type", WeightTypeName(type)},
                                 {"batch", batch},
                                 {"median_ms", median * 1e3},
                                 {"gb_s", bytes / median / 1e9},
                                 {"gflops", 2.0 * rows * cols * batch / median / 1e9}};
        if (prefetch_ab) result["prefetch"] = v == 1;
        results.push_back(result);
      }
    }
  }
  out["rows"] = rows;
  out["cols"] = cols;
  out["results"] = results;
  std::printf("%s\n", out.dump().c_str());
  return 0;
}
