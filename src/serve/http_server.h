// HttpServer: daisy's OpenAI-compatible HTTP API over a Scheduler (docs/serving.md).
//   POST /v1/completions, POST /v1/chat/completions (streamed as server-sent events or not),
//   GET /v1/models, GET /health, GET /metrics (Prometheus text).
// Connections are read by an event loop (http/server.h): idle, slow and half-open clients hold no
// thread, and each request must arrive whole within its deadlines. Requests are validated before
// anything is queued; a bad one gets a 4xx with an OpenAI-style
// error body ({"error": {"message", "type", "param", "code"}}) and the server carries on. A
// streamed request whose client goes away is cancelled, which frees its KV on every stage.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "coord/scheduler.h"
#include "http/server.h"
#include "serve/api.h"
#include "serve/chat.h"
#include "serve/metrics.h"
#include "tokenizer/tokenizer.h"

namespace daisy::serve {

struct HttpOptions {
  std::string host = "127.0.0.1";
  uint16_t port = 8080;  // 0: any free port
  std::string model_name = "daisy";
  std::string api_key;   // non-empty: requests must send "Authorization: Bearer <key>"
  size_t max_body_bytes = size_t{8} << 20;
  int threads = 64;      // completions handled at once (streams hold one each)
  int stages = 1;        // for /metrics
  std::string kernels, cpu;  // for /metrics: the kernel table and the CPU's model name
  std::string kernel_choices;  // for /metrics: the table's run-time choices, comma-separated
  // Open connections, idle ones included (they cost no thread); past it a client gets 503.
  size_t max_connections = 4096;
  // Deadlines for a request to arrive whole (headers, then body) and for an idle keep-alive
  // connection. A client that sends slowly or not at all is answered 408 or closed.
  http::Millis header_timeout{10000}, body_timeout{60000}, idle_timeout{60000};
};

class HttpServer {
 public:
  // Binds and starts serving on a background thread. `chat` is the model's chat template, or
  // why there is none (chat requests are then refused with that reason).
  static Result<std::unique_ptr<HttpServer>> Start(HttpOptions options, coord::Scheduler& scheduler,
                                                   const tokenizer::Tokenizer& tokenizer,
                                                   Result<ChatTemplate> chat);
  ~HttpServer();
  uint16_t port() const { return server_->port(); }
  void Stop();

 private:
  HttpServer(HttpOptions o, coord::Scheduler& s, const tokenizer::Tokenizer& t);
  void Routes();
  ApiContext Context() const;
  // Authorization: Bearer <key>, compared in constant time; answers 401 itself when it fails.
  bool Authorized(const http::Request& req, http::Response& res);
  // POST /v1/completions, POST /v1/chat/completions.
  void Complete(const http::Request& req, http::Response& res, bool chat);
  void ApplyTemplate(const http::Request& req, http::Response& res);
  void Refuse(http::Response& res, const ApiError& e);

  HttpOptions o_;
  coord::Scheduler& scheduler_;
  const tokenizer::Tokenizer& tokenizer_;
  Result<ChatTemplate> chat_ = Unimplemented("no chat template");
  std::unique_ptr<GrammarVocabs> vocabs_;
  std::unique_ptr<http::Server> server_;
  std::shared_ptr<HttpCounters> counters_;  // shared with in-flight streams
};

}  // namespace daisy::serve
