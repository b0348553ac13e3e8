// HttpServer: daisy's OpenAI-compatible HTTP API over a Scheduler (docs/serving.md).
//   POST /v1/completions, POST /v1/chat/completions (streamed as server-sent events or not),
//   GET /v1/models, GET /health, GET /metrics (Prometheus text).
// Requests are validated before anything is queued; a bad one gets a 4xx with an OpenAI-style
// error body ({"error": {"message", "type", "param", "code"}}) and the server carries on. A
// streamed request whose client goes away is cancelled, which frees its KV on every stage.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "coord/scheduler.h"
#include "serve/api.h"
#include "serve/chat.h"
#include "serve/metrics.h"
#include "tokenizer/tokenizer.h"

namespace httplib {
class Server;
struct Request;
struct Response;
}  // namespace httplib

namespace daisy::serve {

struct HttpOptions {
  std::string host = "127.0.0.1";
  uint16_t port = 8080;  // 0: any free port
  std::string model_name = "daisy";
  std::string api_key;   // non-empty: requests must send "Authorization: Bearer <key>"
  size_t max_body_bytes = size_t{8} << 20;
  int threads = 64;      // connections served at once (streams hold one each)
  int stages = 1;        // for /metrics
};

class HttpServer {
 public:
  // Binds and starts serving on a background thread. `chat` is the model's chat template, or
  // why there is none (chat requests are then refused with that reason).
  static Result<std::unique_ptr<HttpServer>> Start(HttpOptions options, coord::Scheduler& scheduler,
                                                   const tokenizer::Tokenizer& tokenizer,
                                                   Result<ChatTemplate> chat);
  ~HttpServer();
  uint16_t port() const { return port_; }
  void Stop();

 private:
  HttpServer(HttpOptions o, coord::Scheduler& s, const tokenizer::Tokenizer& t);
  void Routes();
  // Authorization: Bearer <key>, compared in constant time; answers 401 itself when it fails.
  bool Authorized(const httplib::Request& req, httplib::Response& res);
  // POST /v1/completions, POST /v1/chat/completions.
  void Complete(const httplib::Request& req, httplib::Response& res, bool chat);
  void Refuse(httplib::Response& res, const ApiError& e);

  HttpOptions o_;
  coord::Scheduler& scheduler_;
  const tokenizer::Tokenizer& tokenizer_;
  Result<ChatTemplate> chat_ = Unimplemented("no chat template");
  std::unique_ptr<GrammarVocabs> vocabs_;
  std::unique_ptr<httplib::Server> server_;
  std::shared_ptr<HttpCounters> counters_;  // shared with in-flight streams
  std::thread thread_;
  uint16_t port_ = 0;
};

}  // namespace daisy::serve
