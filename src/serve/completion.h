// One completion request's answer, in OpenAI's shapes: the text so far (held back while it could
// still be the start of a stop string), the usage, the single JSON response and the stream of
// server-sent events. Knows no sockets: the server hands it a writer.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "coord/scheduler.h"
#include "serve/api.h"
#include "tokenizer/tokenizer.h"

namespace daisy::serve {

// The text of a request's tokens, cut at the first stop string (which then stops the request).
class StopText {
 public:
  // `preserved`: special tokens to print as their text (the markers a chat format parses).
  StopText(const tokenizer::Tokenizer& t, std::vector<std::string> stops, std::vector<int32_t> preserved = {});
  // Takes new tokens (`end`: the request is over); returns the text now safe to send.
  std::string Add(const std::vector<int32_t>& tokens, bool end);
  bool stopped() const { return stopped_; }  // a stop string was found: the text ends before it
  const std::string& text() const { return text_; }
  std::string_view sent() const { return std::string_view(text_).substr(0, sent_); }  // returned so far
  size_t tokens() const { return have_; }

 private:
  const tokenizer::Tokenizer& tokenizer_;
  tokenizer::StreamDecoder decoder_;
  std::vector<int32_t> preserved_;
  std::vector<std::string> stops_;
  std::string text_;
  size_t sent_ = 0, have_ = 0;
  bool stopped_ = false;
};

class Completion {
 public:
  // `req`: the scheduler's request for `parsed`; `id`, `created`: the response's identity.
  Completion(std::shared_ptr<coord::Request> req, const tokenizer::Tokenizer& t, const CompletionRequest& parsed,
             std::string model, std::string id, long long created);

  const coord::Request& request() const { return *req_; }
  // Choice `index` of several (n > 1): its events carry the index; only the `last` writes the
  // usage chunk (with `earlier_tokens`, the other choices' completion tokens) and [DONE].
  void AsChoice(int index, bool last, int earlier_tokens) {
    index_ = index;
    last_ = last;
    earlier_tokens_ = earlier_tokens;
  }
  int completion_tokens() const { return static_cast<int>(text_.tokens()); }
  // The whole answer once the request ends, or the error it ended with. `alive` (may be empty)
  // says whether the client still waits: once it does not, the request is cancelled (its KV
  // freed on every stage) and the answer is a 499 nobody reads.
  std::optional<ApiError> Once(nlohmann::json& body, const std::function<bool()>& alive = {});
  // One turn of a stream: waits up to `wait` for news and writes what is ready as events
  // through `write` (false: the client is gone). kMore: call again; kDone: the last event and
  // [DONE] are written; kGone: the client went away (the request is cancelled).
  enum class Turn { kMore, kDone, kGone };
  Turn Stream(const std::function<bool(const std::string&)>& write, const std::function<bool()>& writable,
              std::chrono::milliseconds wait = std::chrono::milliseconds(100));
  // Whether the request finished (for the server's counters: completed, not failed).
  bool finished() const { return finished_; }
  // The client is gone: stop the request and free its KV.
  void Cancel() { req_->Cancel(); }

  nlohmann::json Usage() const;

 private:
  nlohmann::json FinishReason(const coord::Request::Update& u) const;
  std::string Event(const nlohmann::json& choice, const nlohmann::json& usage = nullptr) const;
  // A streamed choice: a piece of text, or the last one (`last`: an empty delta, the finish reason).
  nlohmann::json Choice(const std::string& text, const nlohmann::json& finish, bool last) const;
  // Structured chat output (reasoning, tool calls): whether this request parses it; the message
  // of the whole output; the delta of what a stream has not sent yet (null: nothing new).
  bool structured() const { return chat_ && (output_.reasoning || output_.tools != ToolFormat::kNone); }
  nlohmann::json Message(const ChatOutput& o) const;
  nlohmann::json StructuredDelta(bool final);
  nlohmann::json ToolCallJson(const ToolCall& c, size_t index, bool with_index) const;
  // Log-probabilities in OpenAI's shapes for `tokens` (the chat API's content list, or the
  // completions API's parallel lists from text offset `offset`).
  nlohmann::json Logprobs(const std::vector<int32_t>& tokens, const std::vector<coord::TokenLogprob>& lps,
                          size_t offset) const;

  std::shared_ptr<coord::Request> req_;
  const tokenizer::Tokenizer& tok_;
  StopText text_;
  ChatOutputFormat output_;
  bool logprobs_ = false;
  std::vector<int32_t> all_tokens_;
  std::vector<coord::TokenLogprob> all_logprobs_;
  size_t logprob_offset_ = 0;  // completions: text bytes before the next token
  size_t sent_reasoning_ = 0, sent_content_ = 0, sent_calls_ = 0;
  bool chat_, include_usage_, continuous_usage_;
  int prompt_tokens_;
  std::string model_, id_;
  long long created_;
  bool started_ = false;   // a chat stream's first (role) event is out
  int index_ = 0;
  bool last_ = true;
  int earlier_tokens_ = 0;
  bool finished_ = false;
};

}  // namespace daisy::serve
