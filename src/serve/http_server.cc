#include "serve/http_server.h"

#include <httplib.h>

#include <chrono>
#include <ctime>
#include <nlohmann/json.hpp>
#include <random>

#include "base/log.h"
#include "base/strings.h"

namespace daisy::serve {

using coord::Finish;
using coord::FinishName;
using coord::Request;
using coord::RequestParams;
using coord::Scheduler;
using coord::SchedulerMetrics;

using json = nlohmann::json;

struct HttpServer::Counters {
  std::atomic<uint64_t> bad_requests{0}, unauthorized{0}, not_found{0}, too_busy{0}, failed{0};
  std::atomic<uint64_t> completed{0};
  std::mutex mu;
  double ttft_sum = 0;
  uint64_t ttft_count = 0;
};

namespace {

using Clock = std::chrono::steady_clock;
constexpr int kMaxStops = 4;
constexpr size_t kMaxStopBytes = 256;
constexpr size_t kMaxMessages = 4096;

std::string Dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

// An OpenAI-style error.
struct ApiError {
  int status = 400;
  std::string message;
  std::string type = "invalid_request_error";
  std::string param;
  std::string code;
};

json ErrorBody(const ApiError& e) {
  return {{"error", {{"message", e.message}, {"type", e.type},
                     {"param", e.param.empty() ? json(nullptr) : json(e.param)},
                     {"code", e.code.empty() ? json(nullptr) : json(e.code)}}}};
}

void Reply(httplib::Response& res, const ApiError& e) {
  res.status = e.status;
  res.set_content(Dump(ErrorBody(e)), "application/json");
}

ApiError Invalid(const std::string& param, const std::string& message) {
  return {400, message, "invalid_request_error", param, ""};
}

// Maps a scheduler or pipeline failure to an HTTP status.
ApiError FromStatus(const Status& s) {
  switch (s.code()) {
    case StatusCode::kInvalidArgument: return {400, s.message(), "invalid_request_error", "", ""};
    case StatusCode::kOutOfRange:
      return {400, s.message(), "invalid_request_error", "max_tokens", "context_length_exceeded"};
    case StatusCode::kResourceExhausted: return {429, s.message(), "rate_limit_error", "", "server_busy"};
    case StatusCode::kUnavailable: return {503, s.message(), "server_error", "", "unavailable"};
    default: return {500, s.message(), "server_error", "", ""};
  }
}

// A parsed, validated request.
struct Parsed {
  bool chat = false;
  bool stream = false;
  bool include_usage = false;
  bool continuous_usage = false;  // vLLM's extension: usage on every chunk, one chunk per update
  RequestParams params;
  std::vector<std::string> stops;
  bool echo = false;
};

// Optional number in [lo, hi]; `integer` requires a whole number.
Result<std::optional<double>> Number(const json& body, const char* key, double lo, double hi,
                                     bool integer, ApiError& err) {
  if (!body.contains(key) || body[key].is_null()) return std::optional<double>();
  const json& v = body[key];
  if (!v.is_number() || (integer && !v.is_number_integer())) {
    err = Invalid(key, StrFormat("'%s' must be %s", key, integer ? "an integer" : "a number"));
    return InvalidArgument("bad");
  }
  const double d = v.get<double>();
  if (!(d >= lo && d <= hi)) {
    err = Invalid(key, StrFormat("'%s' is %g; it must be between %g and %g", key, d, lo, hi));
    return InvalidArgument("bad");
  }
  return std::optional<double>(d);
}

Result<std::string> Text(const json& v, const char* param, ApiError& err) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_array()) {  // content parts: [{"type": "text", "text": ...}]
    std::string out;
    for (const json& part : v) {
      if (!part.is_object() || !part.contains("type") || part["type"] != "text" ||
          !part.contains("text") || !part["text"].is_string()) {
        err = Invalid(param, std::string("'") + param + "' parts must be {\"type\": \"text\", \"text\": string}; daisy serves text only");
        return InvalidArgument("bad");
      }
      out += part["text"].get<std::string>();
    }
    return out;
  }
  err = Invalid(param, std::string("'") + param + "' must be a string");
  return InvalidArgument("bad");
}

}  // namespace

// Everything about one HTTP request's generation: the scheduler's request, the text so far and
// the stop strings (the text is held back while it could still be the start of one).
struct Generation {
  std::shared_ptr<Request> req;
  tokenizer::StreamDecoder decoder;
  std::vector<std::string> stops;
  std::string text;
  size_t sent = 0, have = 0;
  bool stopped = false;
  Generation(std::shared_ptr<Request> r, const tokenizer::Tokenizer& t, std::vector<std::string> s)
      : req(std::move(r)), decoder(t, false), stops(std::move(s)) {}

  // Takes new tokens; returns text now safe to send.
  std::string Add(const std::vector<int32_t>& tokens, bool end) {
    have += tokens.size();
    if (stopped) return "";
    for (int32_t t : tokens) text += decoder.Push(t);
    if (end) text += decoder.Flush();
    size_t cut = std::string::npos;
    size_t longest = 0;
    for (const std::string& s : stops) longest = std::max(longest, s.size());
    const size_t from = sent > longest ? sent - longest : 0;
    for (const std::string& s : stops) {
      const size_t p = text.find(s, from);
      if (p != std::string::npos) cut = std::min(cut, p);
    }
    size_t safe = text.size();
    if (cut != std::string::npos) {
      text.resize(cut);
      stopped = true;
      safe = cut;
      req->StopAtString();
    } else if (!end) {
      // Hold back a tail that could be the start of a stop string.
      for (const std::string& s : stops) {
        for (size_t k = std::min(s.size() - 1, text.size()); k > 0; --k) {
          if (text.compare(text.size() - k, k, s, 0, k) == 0) {
            safe = std::min(safe, text.size() - k);
            break;
          }
        }
      }
    }
    if (safe < sent) safe = sent;
    std::string out = text.substr(sent, safe - sent);
    sent = safe;
    return out;
  }
};

HttpServer::HttpServer(HttpOptions o, Scheduler& s, const tokenizer::Tokenizer& t)
    : o_(std::move(o)), scheduler_(s), tokenizer_(t) {}

HttpServer::~HttpServer() { Stop(); }

void HttpServer::Stop() {
  if (server_) server_->stop();
  if (thread_.joinable()) thread_.join();
}

Result<std::unique_ptr<HttpServer>> HttpServer::Start(HttpOptions options, Scheduler& scheduler,
                                                      const tokenizer::Tokenizer& tokenizer,
                                                      const std::string& chat_template) {
  std::unique_ptr<HttpServer> s(new HttpServer(std::move(options), scheduler, tokenizer));
  s->chat_ = DetectChatFormat(chat_template);
  s->counters_ = std::make_shared<Counters>();
  s->server_ = std::make_unique<httplib::Server>();
  const int threads = std::max(4, s->o_.threads);
  s->server_->new_task_queue = [threads] { return new httplib::ThreadPool(static_cast<size_t>(threads)); };
  s->server_->set_payload_max_length(s->o_.max_body_bytes);
  s->server_->set_read_timeout(30, 0);
  s->Routes();
  int port = s->o_.port == 0 ? s->server_->bind_to_any_port(s->o_.host)
                             : (s->server_->bind_to_port(s->o_.host, s->o_.port) ? s->o_.port : -1);
  if (port <= 0) {
    return Unavailable("cannot listen on %s:%u (in use, or not an address of this machine)",
                       s->o_.host.c_str(), static_cast<unsigned>(s->o_.port));
  }
  s->port_ = static_cast<uint16_t>(port);
  httplib::Server* srv = s->server_.get();
  s->thread_ = std::thread([srv] { srv->listen_after_bind(); });
  return s;
}

void HttpServer::Routes() {
  httplib::Server& srv = *server_;
  auto counters = counters_;
  const std::string model = o_.model_name;
  const std::string api_key = o_.api_key;

  srv.set_exception_handler([counters](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    std::string what = "internal error";
    try {
      if (ep) std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    ++counters->failed;
    Reply(res, {500, "internal error: " + what, "server_error", "", ""});
  });
  srv.set_error_handler([counters](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    if (res.status == 404) {
      ++counters->not_found;
      Reply(res, {404, "no such endpoint: " + req.method + " " + req.path +
                           " (daisy serves POST /v1/completions, POST /v1/chat/completions, GET "
                           "/v1/models, GET /health, GET /metrics)", "invalid_request_error", "", "not_found"});
    } else if (res.status == 413) {
      ++counters->bad_requests;
      Reply(res, {413, "the request body is too large", "invalid_request_error", "", "payload_too_large"});
    } else if (res.status >= 400) {
      ++counters->bad_requests;
      Reply(res, {res.status, "bad request", "invalid_request_error", "", ""});
    }
  });

  // Authorization: Bearer <key>, compared in constant time.
  auto authorized = [api_key, counters](const httplib::Request& req, httplib::Response& res) {
    if (api_key.empty()) return true;
    const std::string h = req.get_header_value("Authorization");
    const std::string want = "Bearer " + api_key;
    unsigned diff = h.size() == want.size() ? 0 : 1;
    for (size_t i = 0; i < std::min(h.size(), want.size()); ++i) diff |= static_cast<unsigned>(h[i] ^ want[i]);
    if (diff == 0) return true;
    ++counters->unauthorized;
    Reply(res, {401, h.empty() ? "missing API key: send Authorization: Bearer <key>" : "incorrect API key",
                "invalid_request_error", "", "invalid_api_key"});
    return false;
  };

  srv.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
    const SchedulerMetrics m = scheduler_.metrics();
    res.set_content(Dump({{"status", "ok"}, {"active", m.active}, {"queued", m.queued}}), "application/json");
  });

  srv.Get("/v1/models", [model, authorized](const httplib::Request& req, httplib::Response& res) {
    if (!authorized(req, res)) return;
    json data = json::array({{{"id", model}, {"object", "model"}, {"created", 0}, {"owned_by", "daisy"}}});
    res.set_content(Dump({{"object", "list"}, {"data", data}}), "application/json");
  });

  srv.Get("/metrics", [this, counters](const httplib::Request&, httplib::Response& res) {
    const SchedulerMetrics m = scheduler_.metrics();
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
    by += sample("daisy_requests_total", static_cast<double>(m.rejected_too_long + counters->bad_requests),
                 "{outcome=\"rejected_invalid\"}");
    by += sample("daisy_requests_total", static_cast<double>(counters->unauthorized), "{outcome=\"unauthorized\"}");
    metric("daisy_requests_total", "counter", "Requests by outcome.", by);
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
    metric("daisy_stages", "gauge", "Pipeline stages.", sample("daisy_stages", o_.stages));
    metric("daisy_forwards_total", "counter", "Micro-batch forwards started.", sample("daisy_forwards_total", static_cast<double>(m.forwards)));
    metric("daisy_forward_rows_total", "counter", "Rows in those forwards.", sample("daisy_forward_rows_total", static_cast<double>(m.forward_rows)));
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
    double ttft_sum;
    uint64_t ttft_count;
    {
      std::lock_guard lock(counters->mu);
      ttft_sum = counters->ttft_sum;
      ttft_count = counters->ttft_count;
    }
    metric("daisy_time_to_first_token_seconds", "summary", "Time from arrival to the first token.",
           sample("daisy_time_to_first_token_seconds_sum", ttft_sum) +
               sample("daisy_time_to_first_token_seconds_count", static_cast<double>(ttft_count)));
    res.set_content(out, "text/plain; version=0.0.4");
  });

  auto handle = [this, model, authorized, counters](bool chat) {
    return [this, model, authorized, counters, chat](const httplib::Request& req, httplib::Response& res) {
      if (!authorized(req, res)) return;
      ApiError err;
      auto fail = [&](const ApiError& e) {
        if (e.status == 404) {
          ++counters->not_found;
        } else if (e.status == 429) {
          ++counters->too_busy;
        } else if (e.status < 500) {
          ++counters->bad_requests;
        } else {
          ++counters->failed;
        }
        Reply(res, e);
      };
      json body = json::parse(req.body, nullptr, /*allow_exceptions=*/false);
      if (body.is_discarded()) return fail(Invalid("", "the request body is not valid JSON"));
      if (!body.is_object()) return fail(Invalid("", "the request body must be a JSON object"));
      if (body.contains("model")) {
        if (!body["model"].is_string()) return fail(Invalid("model", "'model' must be a string"));
        const std::string m = body["model"].get<std::string>();
        if (m != model) {
          return fail({404, "the model '" + m + "' does not exist; this server serves '" + model + "'",
                       "invalid_request_error", "model", "model_not_found"});
        }
      }
      Parsed p;
      p.chat = chat;
      const int capacity = scheduler_.options().seq_capacity;
      // The prompt.
      if (chat) {
        if (!chat_.ok()) return fail({400, chat_.status().message(), "invalid_request_error", "messages", "unsupported_chat_template"});
        if (!body.contains("messages") || !body["messages"].is_array() || body["messages"].empty()) {
          return fail(Invalid("messages", "'messages' must be a non-empty array"));
        }
        if (body["messages"].size() > kMaxMessages) return fail(Invalid("messages", "too many messages"));
        std::vector<ChatMessage> messages;
        for (size_t i = 0; i < body["messages"].size(); ++i) {
          const json& m = body["messages"][i];
          const std::string where = StrFormat("messages[%zu]", i);
          if (!m.is_object() || !m.contains("role") || !m["role"].is_string()) {
            return fail(Invalid(where, "'" + where + "' must be an object with a string 'role'"));
          }
          std::string role = m["role"].get<std::string>();
          if (role == "developer") role = "system";
          if (role != "system" && role != "user" && role != "assistant") {
            return fail(Invalid(where + ".role", "'" + where + ".role' is '" + role +
                                                    "'; daisy takes system, user and assistant messages"));
          }
          if (!m.contains("content")) return fail(Invalid(where + ".content", "'" + where + ".content' is missing"));
          const std::string param = where + ".content";
          auto text = Text(m["content"], param.c_str(), err);
          if (!text.ok()) return fail(err);
          messages.push_back({role, *text});
        }
        p.params.prompt = tokenizer_.Encode(RenderChat(*chat_, messages), /*parse_special=*/true, /*add_bos=*/true);
      } else {
        if (!body.contains("prompt")) return fail(Invalid("prompt", "'prompt' is missing"));
        json prompt = body["prompt"];
        if (prompt.is_array() && prompt.size() == 1 && prompt[0].is_string()) prompt = prompt[0];
        if (prompt.is_string()) {
          p.params.prompt = tokenizer_.Encode(prompt.get<std::string>(), /*parse_special=*/true, /*add_bos=*/true);
        } else if (prompt.is_array() && !prompt.empty() && prompt[0].is_number_integer()) {
          for (const json& t : prompt) {
            if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() >= tokenizer_.n_vocab()) {
              return fail(Invalid("prompt", StrFormat("'prompt' token ids must be integers below %d", tokenizer_.n_vocab())));
            }
            p.params.prompt.push_back(static_cast<int32_t>(t.get<int64_t>()));
          }
        } else {
          return fail(Invalid("prompt", "'prompt' must be a string, or an array of token ids (one prompt per request)"));
        }
        if (body.contains("echo") && !body["echo"].is_null()) {
          if (!body["echo"].is_boolean()) return fail(Invalid("echo", "'echo' must be a boolean"));
          if (body["echo"].get<bool>()) return fail(Invalid("echo", "'echo' is not supported"));
        }
      }
      if (p.params.prompt.empty()) return fail(Invalid(chat ? "messages" : "prompt", "the prompt is empty"));
      const int prompt_len = static_cast<int>(p.params.prompt.size());
      if (prompt_len >= capacity) {
        return fail({400, StrFormat("the prompt is %d tokens; this server's context is %d tokens", prompt_len, capacity),
                     "invalid_request_error", chat ? "messages" : "prompt", "context_length_exceeded"});
      }
      // Numbers.
      const char* max_key = chat && body.contains("max_completion_tokens") ? "max_completion_tokens" : "max_tokens";
      auto max_tokens = Number(body, max_key, 1, 1 << 30, true, err);
      if (!max_tokens.ok()) return fail(err);
      auto temperature = Number(body, "temperature", 0, 2, false, err);
      if (!temperature.ok()) return fail(err);
      auto top_p = Number(body, "top_p", 0, 1, false, err);
      if (!top_p.ok()) return fail(err);
      auto top_k = Number(body, "top_k", 0, 1 << 20, true, err);
      if (!top_k.ok()) return fail(err);
      auto min_p = Number(body, "min_p", 0, 1, false, err);
      if (!min_p.ok()) return fail(err);
      auto seed = Number(body, "seed", -9.3e18, 9.3e18, true, err);
      if (!seed.ok()) return fail(err);
      auto n = Number(body, "n", 1, 1, true, err);
      if (!n.ok()) return fail(Invalid("n", "'n' must be 1: daisy returns one choice per request"));
      for (const char* k : {"presence_penalty", "frequency_penalty"}) {
        auto v = Number(body, k, -2, 2, false, err);
        if (!v.ok()) return fail(err);
        if (v->has_value() && **v != 0) return fail(Invalid(k, std::string("'") + k + "' is not supported (only 0)"));
      }
      if (body.contains("logprobs") && !body["logprobs"].is_null() && body["logprobs"] != false) {
        return fail(Invalid("logprobs", "'logprobs' is not supported yet"));
      }
      const int room = capacity - prompt_len;
      if (max_tokens->has_value()) {
        if (**max_tokens > room) {
          return fail({400, StrFormat("the prompt (%d tokens) plus %s (%.0f) is longer than this server's context of %d tokens",
                                      prompt_len, max_key, **max_tokens, capacity),
                       "invalid_request_error", max_key, "context_length_exceeded"});
        }
        p.params.max_tokens = static_cast<int>(**max_tokens);
      } else {
        p.params.max_tokens = chat ? room : std::min(16, room);  // OpenAI's defaults
      }
      runtime::SamplingParams& sp = p.params.sampling;
      sp.temperature = static_cast<float>(temperature->value_or(1.0));
      sp.top_p = static_cast<float>(top_p->value_or(1.0));
      sp.top_k = static_cast<int>(top_k->value_or(0));
      sp.min_p = static_cast<float>(min_p->value_or(0.0));
      sp.repeat_penalty = 1.0f;
      if (seed->has_value()) {
        sp.seed = static_cast<uint64_t>(static_cast<int64_t>(**seed));
      } else {
        sp.seed = std::random_device{}();
      }
      // Stops and streaming.
      if (body.contains("stop") && !body["stop"].is_null()) {
        const json& s = body["stop"];
        std::vector<json> list = s.is_array() ? std::vector<json>(s.begin(), s.end()) : std::vector<json>{s};
        if (list.size() > kMaxStops) return fail(Invalid("stop", "'stop' takes at most 4 strings"));
        for (const json& x : list) {
          if (!x.is_string() || x.get<std::string>().empty() || x.get<std::string>().size() > kMaxStopBytes) {
            return fail(Invalid("stop", "'stop' must be a non-empty string or an array of up to 4 of them (at most 256 bytes each)"));
          }
          p.stops.push_back(x.get<std::string>());
        }
      }
      if (body.contains("ignore_eos") && !body["ignore_eos"].is_null()) {  // llama.cpp's extension
        if (!body["ignore_eos"].is_boolean()) return fail(Invalid("ignore_eos", "'ignore_eos' must be a boolean"));
        p.params.stop_at_eog = !body["ignore_eos"].get<bool>();
      }
      if (body.contains("speculative") && !body["speculative"].is_null()) {  // daisy's extension
        if (!body["speculative"].is_boolean()) return fail(Invalid("speculative", "'speculative' must be a boolean"));
        p.params.speculate = body["speculative"].get<bool>();
      }
      if (body.contains("speculative_k") && !body["speculative_k"].is_null()) {  // daisy's extension
        const json& k = body["speculative_k"];
        const int k_max = scheduler_.options().spec_k_max;
        if (!k.is_number_integer() || k.get<int64_t>() < 0 || k.get<int64_t>() > k_max) {
          return fail(Invalid("speculative_k", StrFormat("'speculative_k' must be an integer from 0 (adaptive) to %d (the server's --spec-k-max)", k_max)));
        }
        p.params.spec_k = static_cast<int>(k.get<int64_t>());
      }
      if (body.contains("stream") && !body["stream"].is_null()) {
        if (!body["stream"].is_boolean()) return fail(Invalid("stream", "'stream' must be a boolean"));
        p.stream = body["stream"].get<bool>();
      }
      if (body.contains("stream_options") && !body["stream_options"].is_null()) {
        const json& so = body["stream_options"];
        if (!so.is_object()) return fail(Invalid("stream_options", "'stream_options' must be an object"));
        for (const char* k : {"include_usage", "continuous_usage_stats"}) {
          if (so.contains(k) && !so[k].is_boolean() && !so[k].is_null()) {
            return fail(Invalid("stream_options", StrFormat("'stream_options.%s' must be a boolean", k)));
          }
        }
        p.include_usage = so.value("include_usage", false);
        p.continuous_usage = so.value("continuous_usage_stats", false);
      }
      auto submitted = scheduler_.Submit(p.params);
      if (!submitted.ok()) return fail(FromStatus(submitted.status()));
      auto gen = std::make_shared<Generation>(*submitted, tokenizer_, p.stops);
      const std::string id = StrFormat("%s-%016llx", chat ? "chatcmpl" : "cmpl",
                                       static_cast<unsigned long long>(std::random_device{}()) << 32 | std::random_device{}());
      const long long created = static_cast<long long>(std::time(nullptr));
      auto usage = [gen, prompt_len] {
        json u = {{"prompt_tokens", prompt_len}, {"completion_tokens", gen->have},
                  {"total_tokens", prompt_len + static_cast<int>(gen->have)}};
        if (gen->req->drafted() > 0) {
          // Speculative decoding, in the fields OpenAI uses for predicted outputs.
          u["completion_tokens_details"] = {{"accepted_prediction_tokens", gen->req->accepted()},
                                            {"rejected_prediction_tokens", gen->req->drafted() - gen->req->accepted()}};
          // daisy's: the same as `daisy run --json` reports (docs/speculative.md).
          const int v = gen->req->verifies(), d = gen->req->drafted(), a = gen->req->accepted();
          u["speculative"] = {{"verifies", v},
                              {"drafted", d},
                              {"accepted", a},
                              {"acceptance", static_cast<double>(a) / d},
                              {"tokens_per_verify", v > 0 ? static_cast<double>(a + v) / v : 0.0},
                              {"k_mean", v > 0 ? static_cast<double>(d) / v : 0.0},
                              {"k_last", gen->req->last_k()}};
        }
        return u;
      };
      auto finish_reason = [gen](const Request::Update& u) -> json {
        if (gen->stopped || u.finish == Finish::kStop) return "stop";
        if (u.finish == Finish::kLength) return "length";
        return nullptr;
      };
      auto record = [counters, gen] {
        std::lock_guard lock(counters->mu);
        counters->ttft_sum += gen->req->time_to_first_token();
        ++counters->ttft_count;
        ++counters->completed;
      };
      if (!p.stream) {
        Request::Update u;
        while (true) {
          u = gen->req->Wait(gen->have, std::chrono::milliseconds(1000));
          gen->Add(u.tokens, u.done);
          if (u.done) break;
        }
        if (u.finish == Finish::kError) return fail(FromStatus(u.error.code() == StatusCode::kOk ? Internal("failed") : u.error));
        record();
        json choice = {{"index", 0}, {"logprobs", nullptr}, {"finish_reason", finish_reason(u)}};
        if (chat) {
          choice["message"] = {{"role", "assistant"}, {"content", gen->text}};
        } else {
          choice["text"] = gen->text;
        }
        res.set_content(Dump({{"id", id}, {"object", chat ? "chat.completion" : "text_completion"},
                              {"created", created}, {"model", model}, {"choices", json::array({choice})},
                              {"usage", usage()}}),
                        "application/json");
        return;
      }
      const bool include_usage = p.include_usage;
      const bool continuous_usage = p.continuous_usage;
      auto chunk = [id, created, model, chat](const json& choice, const json& usage_so_far = nullptr) {
        json c = {{"id", id}, {"object", chat ? "chat.completion.chunk" : "text_completion"},
                  {"created", created}, {"model", model}, {"choices", json::array({choice})}};
        if (!usage_so_far.is_null()) c["usage"] = usage_so_far;
        return "data: " + Dump(c) + "\n\n";
      };
      auto started = std::make_shared<bool>(false);
      res.set_header("Cache-Control", "no-cache");
      res.set_chunked_content_provider(
          "text/event-stream",
          [gen, chunk, started, chat, include_usage, continuous_usage, usage, finish_reason, record, id, created,
           model](
              size_t, httplib::DataSink& sink) {
            if (chat && !*started) {
              *started = true;
              const std::string first = chunk({{"index", 0}, {"delta", {{"role", "assistant"}, {"content", ""}}},
                                               {"logprobs", nullptr}, {"finish_reason", nullptr}});
              if (!sink.write(first.data(), first.size())) {
                gen->req->Cancel();
                return false;
              }
            }
            const Request::Update u = gen->req->Wait(gen->have, std::chrono::milliseconds(100));
            const std::string piece = gen->Add(u.tokens, u.done);
            if (!piece.empty() || (continuous_usage && !u.tokens.empty())) {
              json choice = {{"index", 0}, {"logprobs", nullptr}, {"finish_reason", nullptr}};
              if (chat) {
                choice["delta"] = {{"content", piece}};
              } else {
                choice["text"] = piece;
              }
              const std::string c = chunk(choice, continuous_usage ? usage() : json(nullptr));
              if (!sink.write(c.data(), c.size())) {
                gen->req->Cancel();
                return false;
              }
            }
            if (!u.done && !gen->stopped) {
              if (!sink.is_writable()) {
                gen->req->Cancel();
                return false;
              }
              return true;
            }
            std::string tail;
            if (u.done && u.finish == Finish::kError && !gen->stopped) {
              tail = "data: " + Dump(ErrorBody(FromStatus(u.error))) + "\n\n";
            } else {
              record();
              json choice = {{"index", 0}, {"logprobs", nullptr}, {"finish_reason", finish_reason(u)}};
              if (chat) {
                choice["delta"] = json::object();
              } else {
                choice["text"] = "";
              }
              tail = chunk(choice, continuous_usage ? usage() : json(nullptr));
              if (include_usage) {
                json c = {{"id", id}, {"object", chat ? "chat.completion.chunk" : "text_completion"},
                          {"created", created}, {"model", model}, {"choices", json::array()}, {"usage", usage()}};
                tail += "data: " + Dump(c) + "\n\n";
              }
            }
            tail += "data: [DONE]\n\n";
            sink.write(tail.data(), tail.size());
            sink.done();
            return true;
          },
          [gen](bool success) {
            if (!success) gen->req->Cancel();
          });
    };
  };
  srv.Post("/v1/completions", handle(false));
  srv.Post("/v1/chat/completions", handle(true));
}

}  // namespace daisy::serve
