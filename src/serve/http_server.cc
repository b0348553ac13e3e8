#include "serve/http_server.h"

#include <ctime>
#include <random>

#include "base/log.h"
#include "base/strings.h"
#include "serve/completion.h"

namespace daisy::serve {

using json = nlohmann::json;

namespace {

void Reply(http::Response& res, const ApiError& e) {
  res.status = e.status;
  res.body = Dump(ErrorBody(e));
}

// The OpenAI-style body of an answer the HTTP layer gives itself.
std::string LayerError(int status, const std::string& message) {
  const char* code = status == 408   ? "request_timeout"
                     : status == 413 ? "payload_too_large"
                     : status == 503 ? "server_busy"
                     : status == 404 ? "not_found"
                                     : "";
  const char* type = status >= 500 ? "server_error" : "invalid_request_error";
  return Dump(ErrorBody({status, message, type, "", code}));
}

constexpr const char* kEndpoints =
    "daisy serves POST /v1/completions, POST /v1/chat/completions, POST /apply-template, GET /v1/models, GET "
    "/health, GET /metrics";

std::string ResponseId(bool chat) {
  std::random_device rd;
  return StrFormat("%s-%016llx", chat ? "chatcmpl" : "cmpl", static_cast<unsigned long long>(rd()) << 32 | rd());
}

}  // namespace

HttpServer::HttpServer(HttpOptions o, coord::Scheduler& s, const tokenizer::Tokenizer& t)
    : o_(std::move(o)), scheduler_(s), tokenizer_(t) {}

HttpServer::~HttpServer() { Stop(); }

void HttpServer::Stop() {
  if (server_) server_->Stop();
}

Result<std::unique_ptr<HttpServer>> HttpServer::Start(HttpOptions options, coord::Scheduler& scheduler,
                                                      const tokenizer::Tokenizer& tokenizer,
                                                      Result<ChatTemplate> chat) {
  std::unique_ptr<HttpServer> s(new HttpServer(std::move(options), scheduler, tokenizer));
  s->chat_ = std::move(chat);
  s->vocabs_ = std::make_unique<GrammarVocabs>(tokenizer);
  if (!s->chat_.ok()) DAISY_LOG_WARN("chat requests will be refused: %s", s->chat_.status().message().c_str());
  s->counters_ = std::make_shared<HttpCounters>();
  http::ServerOptions so;
  so.host = s->o_.host;
  so.port = s->o_.port;
  so.limits.max_body_bytes = s->o_.max_body_bytes;
  so.workers = std::max(4, s->o_.threads);
  so.max_connections = s->o_.max_connections;
  so.max_pending = std::max<size_t>(64, static_cast<size_t>(so.workers) * 4);
  so.header_timeout = s->o_.header_timeout;
  so.body_timeout = s->o_.body_timeout;
  so.idle_timeout = s->o_.idle_timeout;
  so.error_body = LayerError;
  auto server = http::Server::Create(std::move(so));
  if (!server.ok()) return server.status();
  s->server_ = std::move(*server);
  s->Routes();
  DAISY_RETURN_IF_ERROR(s->server_->Start());
  return s;
}

void HttpServer::Refuse(http::Response& res, const ApiError& e) {
  counters_->Refused(e.status);
  Reply(res, e);
}

bool HttpServer::Authorized(const http::Request& req, http::Response& res) {
  if (o_.api_key.empty()) return true;
  const std::string h(req.Header("Authorization").value_or(""));
  const std::string want = "Bearer " + o_.api_key;
  unsigned diff = h.size() == want.size() ? 0 : 1;
  for (size_t i = 0; i < std::min(h.size(), want.size()); ++i) diff |= static_cast<unsigned>(h[i] ^ want[i]);
  if (diff == 0) return true;
  ++counters_->unauthorized;
  Reply(res, {401, h.empty() ? "missing API key: send Authorization: Bearer <key>" : "incorrect API key",
              "invalid_request_error", "", "invalid_api_key"});
  return false;
}

ApiContext HttpServer::Context() const {
  return ApiContext{&tokenizer_, &chat_, o_.model_name, scheduler_.options().seq_capacity,
                    scheduler_.options().spec_k_max, vocabs_.get()};
}

void HttpServer::Routes() {
  http::Server& srv = *server_;
  const bool quick = true;
  srv.Route("GET", "/health", [this](const http::Request&, http::Response& res) {
    const coord::SchedulerMetrics m = scheduler_.metrics();
    res.body = Dump({{"status", "ok"}, {"active", m.active}, {"queued", m.queued}});
  }, quick);
  srv.Route("GET", "/v1/models", [this](const http::Request& req, http::Response& res) {
    if (!Authorized(req, res)) return;
    json data = json::array({{{"id", o_.model_name}, {"object", "model"}, {"created", 0}, {"owned_by", "daisy"}}});
    res.body = Dump({{"object", "list"}, {"data", data}});
  }, quick);
  srv.Route("GET", "/metrics", [this](const http::Request&, http::Response& res) {
    res.content_type = "text/plain; version=0.0.4";
    res.body = RenderMetrics(scheduler_.metrics(), *counters_, o_.stages, &server_->stats(), {o_.kernels, o_.cpu, o_.kernel_choices});
  }, quick);
  srv.Route("POST", "/v1/completions", [this](const http::Request& req, http::Response& res) { Complete(req, res, false); });
  srv.Route("POST", "/v1/chat/completions",
            [this](const http::Request& req, http::Response& res) { Complete(req, res, true); });
  // llama-server's endpoint: the prompt text a chat request would be fed, {"prompt": ...}.
  srv.Route("POST", "/apply-template", [this](const http::Request& req, http::Response& res) { ApplyTemplate(req, res); });
  srv.Fallback([this](const http::Request& req, http::Response& res) {
    if (const std::string allow = server_->AllowedMethods(req.path); !allow.empty()) {
      res.headers.emplace_back("Allow", allow);
      return Refuse(res, {405, "method " + req.method + " is not allowed on " + req.path + " (" + kEndpoints + ")",
                          "invalid_request_error", "", "method_not_allowed"});
    }
    Refuse(res, {404, "no such endpoint: " + req.method + " " + req.path + " (" + kEndpoints + ")",
                 "invalid_request_error", "", "not_found"});
  });
}

void HttpServer::ApplyTemplate(const http::Request& req, http::Response& res) {
  if (!Authorized(req, res)) return;
  const nlohmann::ordered_json body = nlohmann::ordered_json::parse(req.body, nullptr, /*allow_exceptions=*/false);
  if (body.is_discarded() || !body.is_object()) return Refuse(res, Invalid("", "the request body must be a JSON object"));
  if (jinja::JsonDepth(body) > jinja::kMaxJsonDepth) {
    return Refuse(res, Invalid("", StrFormat("the request is nested deeper than %zu levels", jinja::kMaxJsonDepth)));
  }
  std::string prompt;
  if (std::optional<ApiError> refused = RenderChatPrompt(body, Context(), prompt)) return Refuse(res, *refused);
  res.body = Dump({{"prompt", prompt}});
}

void HttpServer::Complete(const http::Request& req, http::Response& res, bool chat) {
  if (!Authorized(req, res)) return;
  const ApiContext ctx = Context();
  CompletionRequest parsed;
  if (std::optional<ApiError> refused = ParseCompletion(req.body, chat, ctx, parsed)) return Refuse(res, *refused);
  // n choices: n requests of the same prompt, the seed counting up from the request's.
  std::vector<std::shared_ptr<Completion>> completions;
  const std::string id = ResponseId(chat);
  const long long created = static_cast<long long>(std::time(nullptr));
  for (int i = 0; i < parsed.n; ++i) {
    coord::RequestParams params = parsed.params;
    params.sampling.seed += static_cast<uint64_t>(i);
    auto submitted = scheduler_.Submit(std::move(params));
    if (!submitted.ok()) {
      for (auto& c : completions) c->Cancel();
      return Refuse(res, FromStatus(submitted.status()));
    }
    completions.push_back(std::make_shared<Completion>(*submitted, tokenizer_, parsed, o_.model_name, id, created));
    completions.back()->AsChoice(i, i + 1 == parsed.n, 0);
  }
  auto counters = counters_;
  const auto record = [counters](const Completion& c) { counters->Completed(c.request().time_to_first_token()); };
  if (!parsed.stream) {
    json body;
    int completion_tokens = 0;
    for (auto& c : completions) {
      json one;
      if (std::optional<ApiError> failed = c->Once(one, req.client_alive)) {
        for (auto& other : completions) other->Cancel();
        return Refuse(res, *failed);
      }
      record(*c);
      completion_tokens += one["usage"]["completion_tokens"].get<int>();
      if (body.is_null()) {
        body = std::move(one);
      } else {
        body["choices"].push_back(one["choices"][0]);
      }
    }
    body["usage"]["completion_tokens"] = completion_tokens;
    body["usage"]["total_tokens"] = body["usage"]["prompt_tokens"].get<int>() + completion_tokens;
    res.body = Dump(body);
    return;
  }
  // Streamed: the choices one after the other (clients assemble them by index).
  res.content_type = "text/event-stream";
  res.headers.emplace_back("Cache-Control", "no-cache");
  res.stream = [completions, record](http::StreamWriter& w) {
    const auto write = [&](const std::string& s) { return w.Write(s); };
    const auto alive = [&] { return w.Alive(); };
    int earlier = 0;
    for (size_t i = 0; i < completions.size(); ++i) {
      Completion& c = *completions[i];
      if (i > 0 && i + 1 == completions.size()) c.AsChoice(static_cast<int>(i), true, earlier);
      Completion::Turn turn = Completion::Turn::kMore;
      while (turn == Completion::Turn::kMore) turn = c.Stream(write, alive);
      if (turn == Completion::Turn::kGone) {
        for (auto& other : completions) other->Cancel();
        return;
      }
      if (c.finished()) record(c);
      earlier += c.completion_tokens();
    }
  };
}

}  // namespace daisy::serve
