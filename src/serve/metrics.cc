#include "serve/metrics.h"

#include "base/strings.h"

namespace daisy::serve {
namespace {

// A Prometheus label value: backslash, double quote and newline escaped.
std::string LabelValue(const std::string& v) {
  std::string out;
  for (const char ch : v) {
    if (ch == '\\' || ch == '"') out += '\\';
    if (ch == '\n') {
      out += "\\n";
      continue;
    }
    out += ch;
  }
  return out;
}

}  // namespace

using coord::Finish;
using coord::FinishName;

void HttpCounters::Completed(double ttft) {
  std::lock_guard lock(mu);
  ttft_sum += ttft;
  ++ttft_count;
  ++completed;
}

void HttpCounters::Refused(int status) {
  if (status == 499) {
    return;  // the client left: the scheduler counts the request as cancelled
  } else if (status == 404) {
    ++not_found;
  } else if (status == 429) {
    ++too_busy;
  } else if (status < 500) {
    ++bad_requests;
  } else {
    ++failed;
  }
}

std::string RenderMetrics(const coord::SchedulerMetrics& m, HttpCounters& c, int stages, const http::ServerStats* conn,
                          const HostInfo& host) {
  std::string out;
  auto metric = [&](const char* name, const char* type, const char* help, const std::string& samples) {
    out += StrFormat("# HELP %s %s\n# TYPE %s %s\n", name, help, name, type) + samples;
  };
  auto sample = [](const char* name, double v, const std::string& labels = "") {
    return StrFormat("%s%s %.17g\n", name, labels.c_str(), v);
  };
  std::string by;
  for (Finish f : {Finish::kStop, Finish::kLength, Finish::kCancelled, Finish::kError}) {
    by += sample("daisy_requests_total", static_cast<double>(m.requests_by_finish[static_cast<int>(f)]),
                 StrFormat("{outcome=\"%s\"}", FinishName(f)));
  }
  by += sample("daisy_requests_total", static_cast<double>(m.rejected_queue_full), "{outcome=\"rejected_busy\"}");
  by += sample("daisy_requests_total", static_cast<double>(m.rejected_too_long + c.bad_requests),
               "{outcome=\"rejected_invalid\"}");
  by += sample("daisy_requests_total", static_cast<double>(c.unauthorized), "{outcome=\"unauthorized\"}");
  metric("daisy_requests_total", "counter", "Requests by outcome.", by);
  metric("daisy_http_errors_total", "counter",
         "Requests the API answered with an error other than a bad request, by status: 404 (no such route or "
         "model), 429 (a full queue; also daisy_requests_total{outcome=\"rejected_busy\"}), 5xx (failed).",
         sample("daisy_http_errors_total", static_cast<double>(c.not_found), "{status=\"404\"}") +
             sample("daisy_http_errors_total", static_cast<double>(c.too_busy), "{status=\"429\"}") +
             sample("daisy_http_errors_total", static_cast<double>(c.failed), "{status=\"5xx\"}"));
  metric("daisy_host_info", "gauge",
         "Where this server computes: its kernel table, the table's run-time choices on this CPU, and the CPU "
         "model (always 1).",
         sample("daisy_host_info", 1,
                StrFormat("{kernels=\"%s\",kernel_choices=\"%s\",cpu=\"%s\"}", LabelValue(host.kernels).c_str(),
                          LabelValue(host.kernel_choices).c_str(), LabelValue(host.cpu).c_str())));
  metric("daisy_prompt_tokens_total", "counter", "Prompt tokens read.", sample("daisy_prompt_tokens_total", static_cast<double>(m.prompt_tokens)));
  metric("daisy_generated_tokens_total", "counter", "Tokens generated.", sample("daisy_generated_tokens_total", static_cast<double>(m.generated_tokens)));
  metric("daisy_generated_tokens_per_second", "gauge", "Tokens generated per second over the last 10 s.",
         sample("daisy_generated_tokens_per_second", m.tokens_per_second));
  metric("daisy_queue_depth", "gauge", "Requests waiting for a slot.", sample("daisy_queue_depth", m.queued));
  metric("daisy_active_sequences", "gauge", "Sequences holding KV.", sample("daisy_active_sequences", m.active));
  metric("daisy_max_sequences", "gauge", "KV slots per stage.", sample("daisy_max_sequences", m.max_seqs));
  metric("daisy_kv_positions_used", "gauge", "KV positions filled, all sequences.", sample("daisy_kv_positions_used", static_cast<double>(m.kv_positions)));
  metric("daisy_kv_positions_capacity", "gauge", "KV positions reserved, all slots.",
         sample("daisy_kv_positions_capacity", static_cast<double>(m.max_seqs) * m.seq_capacity));
  metric("daisy_micro_batches_in_flight", "gauge", "Micro-batches in the pipeline now.", sample("daisy_micro_batches_in_flight", m.in_flight));
  metric("daisy_micro_batches", "gauge", "Micro-batches the scheduler keeps in flight at most.", sample("daisy_micro_batches", m.micro_batches));
  metric("daisy_stages", "gauge", "Pipeline stages.", sample("daisy_stages", stages));
  metric("daisy_forwards_total", "counter", "Micro-batch forwards started.", sample("daisy_forwards_total", static_cast<double>(m.forwards)));
  metric("daisy_forward_rows_total", "counter", "Rows in those forwards.", sample("daisy_forward_rows_total", static_cast<double>(m.forward_rows)));
  metric("daisy_batched_decode_forwards_total", "counter", "Forwards that decoded two sequences or more at once.",
         sample("daisy_batched_decode_forwards_total", static_cast<double>(m.batched_decode_forwards)));
  metric("daisy_coordinator_compute_seconds_total", "counter", "Time in the coordinator's own stages (and sending to the next).",
         sample("daisy_coordinator_compute_seconds_total", m.submit_seconds));
  metric("daisy_ring_wait_seconds_total", "counter", "Time waiting for the rest of the pipeline (later stages and hops).",
         sample("daisy_ring_wait_seconds_total", m.wait_seconds));
  metric("daisy_speculative_verifies_total", "counter", "Decode steps that verified drafted tokens.",
         sample("daisy_speculative_verifies_total", static_cast<double>(m.verifies)));
  metric("daisy_speculative_drafted_tokens_total", "counter", "Tokens drafted.",
         sample("daisy_speculative_drafted_tokens_total", static_cast<double>(m.drafted_tokens)));
  metric("daisy_speculative_accepted_tokens_total", "counter", "Drafted tokens the last stage accepted.",
         sample("daisy_speculative_accepted_tokens_total", static_cast<double>(m.accepted_tokens)));
  metric("daisy_speculative_acceptance_ratio", "gauge", "Accepted over drafted tokens since start.",
         sample("daisy_speculative_acceptance_ratio",
                m.drafted_tokens > 0 ? static_cast<double>(m.accepted_tokens) / m.drafted_tokens : 0.0));
  metric("daisy_speculative_tokens_per_verify", "gauge", "Tokens each verify yielded (accepted drafts plus one), mean since start.",
         sample("daisy_speculative_tokens_per_verify",
                m.verifies > 0 ? static_cast<double>(m.accepted_tokens + m.verifies) / m.verifies : 0.0));
  metric("daisy_speculative_k_mean", "gauge", "Drafted tokens per verify (the K chosen), mean since start.",
         sample("daisy_speculative_k_mean", m.verifies > 0 ? static_cast<double>(m.drafted_tokens) / m.verifies : 0.0));
  metric("daisy_speculative_k_start", "gauge",
         "The K the next adaptive speculative request starts from (learned from the last verified one).",
         sample("daisy_speculative_k_start", m.spec_k_start));
  metric("daisy_draft_seconds_total", "counter", "Time in the drafter (draft model or prompt lookup).",
         sample("daisy_draft_seconds_total", m.draft_seconds));
  metric("daisy_ring_failures_total", "counter", "Times the workers' ring went down (a worker lost, silent or stuck).",
         sample("daisy_ring_failures_total", static_cast<double>(m.ring_failures)));
  metric("daisy_resumes_total", "counter", "Times the ring came back with the requests in flight resumed.",
         sample("daisy_resumes_total", static_cast<double>(m.resumes)));
  metric("daisy_refilled_tokens_total", "counter", "Tokens read again to rebuild resumed requests' KV.",
         sample("daisy_refilled_tokens_total", static_cast<double>(m.refilled_tokens)));
  metric("daisy_paused_seconds_total", "counter", "Time requests waited for the ring to come back.",
         sample("daisy_paused_seconds_total", m.paused_seconds));
  std::string held;
  for (size_t i = 0; i < m.stage_sequences.size(); ++i) {
    if (m.stage_sequences[i] >= 0) {
      held += sample("daisy_stage_sequences", static_cast<double>(m.stage_sequences[i]), StrFormat("{stage=\"%zu\"}", i));
    }
  }
  std::string failed;
  for (size_t i = 0; i < m.stage_failures.size(); ++i) {
    failed += sample("daisy_stage_failures_total", static_cast<double>(m.stage_failures[i]), StrFormat("{stage=\"%zu\"}", i));
  }
  std::string refilled;
  for (size_t i = 0; i < m.stage_refilled_tokens.size(); ++i) {
    refilled += sample("daisy_stage_refilled_tokens_total", static_cast<double>(m.stage_refilled_tokens[i]),
                       StrFormat("{stage=\"%zu\"}", i));
  }
  metric("daisy_stage_refilled_tokens_total", "counter",
         "Tokens each stage read again to rebuild the KV it lost (only the stages up to the last that lost it read "
         "more than one per request).",
         refilled);
  std::string stage_resumes, stage_paused;
  for (size_t i = 0; i < m.stage_resumes.size(); ++i) {
    stage_resumes += sample("daisy_stage_resumes_total", static_cast<double>(m.stage_resumes[i]), StrFormat("{stage=\"%zu\"}", i));
  }
  for (size_t i = 0; i < m.stage_paused_seconds.size(); ++i) {
    stage_paused += sample("daisy_stage_paused_seconds_total", m.stage_paused_seconds[i], StrFormat("{stage=\"%zu\"}", i));
  }
  metric("daisy_stage_resumes_total", "counter", "Resumes after a failure of this stage's worker.", stage_resumes);
  metric("daisy_stage_paused_seconds_total", "counter", "Time requests waited for the ring after failures of this stage's worker.",
         stage_paused);
  metric("daisy_stage_failures_total", "counter",
         "Times the workers' ring went down because of this stage's worker (lost, silent, a bad frame).", failed);
  metric("daisy_stage_sequences", "gauge",
         "Sequences holding KV on each stage (a worker's as of its last pong, every second or so).", held);
  double ttft_sum;
  uint64_t ttft_count;
  {
    std::lock_guard lock(c.mu);
    ttft_sum = c.ttft_sum;
    ttft_count = c.ttft_count;
  }
  metric("daisy_time_to_first_token_seconds", "summary", "Time from arrival to the first token.",
         sample("daisy_time_to_first_token_seconds_sum", ttft_sum) +
             sample("daisy_time_to_first_token_seconds_count", static_cast<double>(ttft_count)));
  if (conn) {
    metric("daisy_http_connections_open", "gauge", "HTTP connections open now (idle ones included).",
           sample("daisy_http_connections_open", static_cast<double>(conn->open.load())));
    metric("daisy_http_connections_total", "counter", "HTTP connections accepted.",
           sample("daisy_http_connections_total", static_cast<double>(conn->accepted.load())));
    std::string refused = sample("daisy_http_refused_total", static_cast<double>(conn->refused_busy.load()),
                                 "{reason=\"busy\"}");
    refused += sample("daisy_http_refused_total", static_cast<double>(conn->timed_out.load()), "{reason=\"timeout\"}");
    refused += sample("daisy_http_refused_total", static_cast<double>(conn->malformed.load()), "{reason=\"malformed\"}");
    metric("daisy_http_refused_total", "counter",
           "Requests the HTTP layer answered itself: busy (503), not whole in time (408), malformed (4xx).", refused);
    metric("daisy_http_idle_closed_total", "counter", "Keep-alive connections closed after their idle timeout.",
           sample("daisy_http_idle_closed_total", static_cast<double>(conn->idle_closed.load())));
  }
  return out;
}

}  // namespace daisy::serve
