// The OpenAI-style API without the sockets: errors in OpenAI's shape, and a completion request
// (POST /v1/completions, /v1/chat/completions) parsed and validated into what the scheduler
// takes — every refusal through one channel, an ApiError with its HTTP status, message, type,
// parameter and code. Unit-testable: no server, no scheduler.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "coord/scheduler.h"
#include <map>
#include <mutex>

#include "grammar/token_mask.h"
#include "serve/chat.h"
#include "serve/chat_output.h"
#include "tokenizer/tokenizer.h"

namespace daisy::serve {

// {"error": {"message", "type", "param", "code"}} with an HTTP status.
struct ApiError {
  int status = 400;
  std::string message;
  std::string type = "invalid_request_error";
  std::string param;
  std::string code;
};
nlohmann::json ErrorBody(const ApiError& e);
// A 400 about one parameter.
ApiError Invalid(const std::string& param, const std::string& message);
// A scheduler or pipeline failure as an HTTP error (400 bad input, 429 busy, 503 unavailable,
// 500 otherwise).
ApiError FromStatus(const Status& s);
// JSON as text, invalid UTF-8 replaced (model output may split a character).
std::string Dump(const nlohmann::json& j);

// What a completion request asks for, validated.
struct CompletionRequest {
  bool chat = false;
  bool stream = false;
  bool include_usage = false;     // stream_options.include_usage: a last chunk with the usage
  bool continuous_usage = false;  // vLLM's extension: usage on every chunk, one chunk per update
  coord::RequestParams params;
  std::vector<std::string> stops;
  // Chat: what to look for in the output (reasoning, tool calls) and the special tokens that
  // must come out as text for it.
  ChatOutputFormat output;
  std::vector<int32_t> preserved_tokens;
  // tool_choice "required" (any of the tools) or naming one: the output is forced to a call.
  bool tool_required = false;
  std::string tool_name;
  int n = 1;  // choices: n requests of the same prompt, seeds seed, seed + 1, ...
};

// The vocabularies constrained decoding works over (one per set of special tokens printed as
// text), built on first use and shared by every request. Thread-safe.
class GrammarVocabs {
 public:
  explicit GrammarVocabs(const tokenizer::Tokenizer& t) : tokenizer_(t) {}
  std::shared_ptr<const grammar::TokenVocab> Get(const std::vector<int32_t>& preserved);

 private:
  const tokenizer::Tokenizer& tokenizer_;
  std::mutex mu_;
  std::map<std::vector<int32_t>, std::shared_ptr<const grammar::TokenVocab>> vocabs_;
};

// What validation needs to know of the server.
struct ApiContext {
  const tokenizer::Tokenizer* tokenizer = nullptr;
  const Result<ChatTemplate>* chat = nullptr;  // the model's chat template, or why it is refused
  std::string model_name;
  int capacity = 0;     // KV positions per sequence: prompt + max_tokens must fit
  int spec_k_max = 0;   // the server's --spec-k-max (speculative_k's bound)
  GrammarVocabs* vocabs = nullptr;  // constrained output (none: refused)
};

inline constexpr int kMaxStops = 4;
inline constexpr int kMaxChoices = 8;
inline constexpr size_t kMaxStopBytes = 256;
inline constexpr size_t kMaxMessages = 4096;

// The chat prompt text of a /v1/chat/completions-shaped request (messages, tools,
// tool_choice, chat_template_kwargs) through the model's template: also POST /apply-template.
std::optional<ApiError> RenderChatPrompt(const nlohmann::ordered_json& body, const ApiContext& ctx, std::string& text);

// Parses `body` (the raw request body) for /v1/chat/completions (`chat`) or /v1/completions:
// fills `out`, or returns the error to answer with.
std::optional<ApiError> ParseCompletion(std::string_view body, bool chat, const ApiContext& ctx,
                                        CompletionRequest& out);

}  // namespace daisy::serve
