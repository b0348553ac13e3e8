#include "serve/http_server.h"

#include <httplib.h>

#include <ctime>
#include <random>

#include "base/log.h"
#include "base/strings.h"
#include "serve/completion.h"

namespace daisy::serve {

using json = nlohmann::json;

namespace {

void Reply(httplib::Response& res, const ApiError& e) {
  res.status = e.status;
  res.set_content(Dump(ErrorBody(e)), "application/json");
}

std::string ResponseId(bool chat) {
  std::random_device rd;
  return StrFormat("%s-%016llx", chat ? "chatcmpl" : "cmpl", static_cast<unsigned long long>(rd()) << 32 | rd());
}

}  // namespace

HttpServer::HttpServer(HttpOptions o, coord::Scheduler& s, const tokenizer::Tokenizer& t)
    : o_(std::move(o)), scheduler_(s), tokenizer_(t) {}

HttpServer::~HttpServer() { Stop(); }

void HttpServer::Stop() {
  if (server_) server_->stop();
  if (thread_.joinable()) thread_.join();
}

Result<std::unique_ptr<HttpServer>> HttpServer::Start(HttpOptions options, coord::Scheduler& scheduler,
                                                      const tokenizer::Tokenizer& tokenizer,
                                                      Result<ChatTemplate> chat) {
  std::unique_ptr<HttpServer> s(new HttpServer(std::move(options), scheduler, tokenizer));
  s->chat_ = std::move(chat);
  s->vocabs_ = std::make_unique<GrammarVocabs>(tokenizer);
  if (!s->chat_.ok()) DAISY_LOG_WARN("chat requests will be refused: %s", s->chat_.status().message().c_str());
  s->counters_ = std::make_shared<HttpCounters>();
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

void HttpServer::Refuse(httplib::Response& res, const ApiError& e) {
  counters_->Refused(e.status);
  Reply(res, e);
}

bool HttpServer::Authorized(const httplib::Request& req, httplib::Response& res) {
  if (o_.api_key.empty()) return true;
  const std::string h = req.get_header_value("Authorization");
  const std::string want = "Bearer " + o_.api_key;
  unsigned diff = h.size() == want.size() ? 0 : 1;
  for (size_t i = 0; i < std::min(h.size(), want.size()); ++i) diff |= static_cast<unsigned>(h[i] ^ want[i]);
  if (diff == 0) return true;
  ++counters_->unauthorized;
  Reply(res, {401, h.empty() ? "missing API key: send Authorization: Bearer <key>" : "incorrect API key",
              "invalid_request_error", "", "invalid_api_key"});
  return false;
}

void HttpServer::Routes() {
  httplib::Server& srv = *server_;
  auto counters = counters_;
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
                           " (daisy serves POST /v1/completions, POST /v1/chat/completions, POST "
                           "/apply-template, GET /v1/models, GET /health, GET /metrics)", "invalid_request_error", "", "not_found"});
    } else if (res.status == 413) {
      ++counters->bad_requests;
      Reply(res, {413, "the request body is too large", "invalid_request_error", "", "payload_too_large"});
    } else if (res.status >= 400) {
      ++counters->bad_requests;
      Reply(res, {res.status, "bad request", "invalid_request_error", "", ""});
    }
  });
  srv.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
    const coord::SchedulerMetrics m = scheduler_.metrics();
    res.set_content(Dump({{"status", "ok"}, {"active", m.active}, {"queued", m.queued}}), "application/json");
  });
  srv.Get("/v1/models", [this](const httplib::Request& req, httplib::Response& res) {
    if (!Authorized(req, res)) return;
    json data = json::array({{{"id", o_.model_name}, {"object", "model"}, {"created", 0}, {"owned_by", "daisy"}}});
    res.set_content(Dump({{"object", "list"}, {"data", data}}), "application/json");
  });
  srv.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(RenderMetrics(scheduler_.metrics(), *counters_, o_.stages), "text/plain; version=0.0.4");
  });
  srv.Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) { Complete(req, res, false); });
  srv.Post("/v1/chat/completions", [this](const httplib::Request& req, httplib::Response& res) { Complete(req, res, true); });
  // llama-server's endpoint: the prompt text a chat request would be fed, {"prompt": ...}.
  srv.Post("/apply-template", [this](const httplib::Request& req, httplib::Response& res) {
    if (!Authorized(req, res)) return;
    const nlohmann::ordered_json body = nlohmann::ordered_json::parse(req.body, nullptr, /*allow_exceptions=*/false);
    if (body.is_discarded() || !body.is_object()) return Refuse(res, Invalid("", "the request body must be a JSON object"));
    if (jinja::JsonDepth(body) > jinja::kMaxJsonDepth) {
      return Refuse(res, Invalid("", StrFormat("the request is nested deeper than %zu levels", jinja::kMaxJsonDepth)));
    }
    const ApiContext ctx{&tokenizer_, &chat_, o_.model_name, scheduler_.options().seq_capacity,
                         scheduler_.options().spec_k_max, vocabs_.get()};
    std::string prompt;
    if (std::optional<ApiError> refused = RenderChatPrompt(body, ctx, prompt)) return Refuse(res, *refused);
    res.set_content(Dump({{"prompt", prompt}}), "application/json");
  });
}

void HttpServer::Complete(const httplib::Request& req, httplib::Response& res, bool chat) {
  if (!Authorized(req, res)) return;
  const ApiContext ctx{&tokenizer_, &chat_, o_.model_name, scheduler_.options().seq_capacity,
                       scheduler_.options().spec_k_max, vocabs_.get()};
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
      if (std::optional<ApiError> failed = c->Once(one)) {
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
    res.set_content(Dump(body), "application/json");
    return;
  }
  // Streamed: the choices one after the other (clients assemble them by index).
  res.set_header("Cache-Control", "no-cache");
  auto next = std::make_shared<size_t>(0);
  res.set_chunked_content_provider(
      "text/event-stream",
      [completions, next, record](size_t, httplib::DataSink& sink) {
        Completion& c = *completions[*next];
        const Completion::Turn turn = c.Stream(
            [&](const std::string& s) { return sink.write(s.data(), s.size()); }, [&] { return sink.is_writable(); });
        if (turn == Completion::Turn::kGone) {
          for (auto& other : completions) other->Cancel();
          return false;
        }
        if (turn == Completion::Turn::kDone) {
          if (c.finished()) record(c);
          if (++*next == completions.size()) {
            sink.done();
          } else {
            int earlier = 0;
            for (size_t k = 0; k < *next; ++k) earlier += completions[k]->completion_tokens();
            if (*next + 1 == completions.size()) completions[*next]->AsChoice(static_cast<int>(*next), true, earlier);
          }
        }
        return true;
      },
      [completions](bool success) {
        if (!success) {
          for (auto& c : completions) c->Cancel();
        }
      });
}

}  // namespace daisy::serve
