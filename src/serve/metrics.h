// GET /metrics: the scheduler's and the HTTP server's counters in Prometheus' text format.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>

#include "coord/scheduler.h"
#include "http/server.h"

namespace daisy::serve {

// What the HTTP server counts itself. Thread-safe.
struct HttpCounters {
  std::atomic<uint64_t> bad_requests{0}, unauthorized{0}, not_found{0}, too_busy{0}, failed{0};
  std::atomic<uint64_t> completed{0};
  std::mutex mu;  // guards the two below
  double ttft_sum = 0;
  uint64_t ttft_count = 0;

  // A request that got its answer: its time to the first token.
  void Completed(double ttft);
  // A refusal or failure with this HTTP status.
  void Refused(int status);
};

// Where the server runs: the kernel table and the CPU (daisy_host_info's labels).
struct HostInfo {
  std::string kernels, cpu;
  std::string kernel_choices;  // kernels::KernelChoices, comma-separated
};

// `conn`: the HTTP layer's connection counters, when there is one.
std::string RenderMetrics(const coord::SchedulerMetrics& m, HttpCounters& c, int stages,
                          const http::ServerStats* conn = nullptr, const HostInfo& host = {});

}  // namespace daisy::serve
