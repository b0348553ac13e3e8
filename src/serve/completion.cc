#include "serve/completion.h"

#include <algorithm>
#include <cmath>

#include "base/strings.h"

namespace daisy::serve {

using coord::Finish;
using coord::Request;
using json = nlohmann::json;

StopText::StopText(const tokenizer::Tokenizer& t, std::vector<std::string> stops, std::vector<int32_t> preserved)
    : tokenizer_(t), decoder_(t, false), preserved_(std::move(preserved)), stops_(std::move(stops)) {}

std::string StopText::Add(const std::vector<int32_t>& tokens, bool end) {
  have_ += tokens.size();
  if (stopped_) return "";
  for (int32_t t : tokens) {
    if (std::find(preserved_.begin(), preserved_.end(), t) != preserved_.end()) {
      text_ += decoder_.Flush() + tokenizer_.Piece(t);
    } else {
      text_ += decoder_.Push(t);
    }
  }
  if (end) text_ += decoder_.Flush();
  size_t cut = std::string::npos;
  size_t longest = 0;
  for (const std::string& s : stops_) longest = std::max(longest, s.size());
  const size_t from = sent_ > longest ? sent_ - longest : 0;
  for (const std::string& s : stops_) {
    const size_t p = text_.find(s, from);
    if (p != std::string::npos) cut = std::min(cut, p);
  }
  size_t safe = text_.size();
  if (cut != std::string::npos) {
    text_.resize(cut);
    stopped_ = true;
    safe = cut;
  } else if (!end) {
    // Hold back a tail that could be the start of a stop string.
    for (const std::string& s : stops_) {
      for (size_t k = std::min(s.size() - 1, text_.size()); k > 0; --k) {
        if (text_.compare(text_.size() - k, k, s, 0, k) == 0) {
          safe = std::min(safe, text_.size() - k);
          break;
        }
      }
    }
  }
  if (safe < sent_) safe = sent_;
  std::string out = text_.substr(sent_, safe - sent_);
  sent_ = safe;
  return out;
}

Completion::Completion(std::shared_ptr<Request> req, const tokenizer::Tokenizer& t, const CompletionRequest& parsed,
                       std::string model, std::string id, long long created)
    : req_(std::move(req)), tok_(t), text_(t, parsed.stops, parsed.preserved_tokens), output_(parsed.output),
      logprobs_(parsed.params.logprobs),
      chat_(parsed.chat), include_usage_(parsed.include_usage),
      continuous_usage_(parsed.continuous_usage), prompt_tokens_(static_cast<int>(parsed.params.prompt.size())),
      model_(std::move(model)), id_(std::move(id)), created_(created) {}

json Completion::Usage() const {
  const int completion = static_cast<int>(text_.tokens());
  json u = {{"prompt_tokens", prompt_tokens_}, {"completion_tokens", completion},
            {"total_tokens", prompt_tokens_ + completion}};
  const int v = req_->verifies(), d = req_->drafted(), a = req_->accepted();
  if (d > 0) {
    // Speculative decoding, in the fields OpenAI uses for predicted outputs.
    u["completion_tokens_details"] = {{"accepted_prediction_tokens", a}, {"rejected_prediction_tokens", d - a}};
    // daisy's: the same as `daisy run --json` reports (docs/speculative.md).
    u["speculative"] = {{"verifies", v},
                        {"drafted", d},
                        {"accepted", a},
                        {"acceptance", static_cast<double>(a) / d},
                        {"tokens_per_verify", v > 0 ? static_cast<double>(a + v) / v : 0.0},
                        {"k_mean", v > 0 ? static_cast<double>(d) / v : 0.0},
                        {"k_last", req_->last_k()}};
  }
  return u;
}

json Completion::ToolCallJson(const ToolCall& c, size_t index, bool with_index) const {
  json j = {{"id", StrFormat("call_%s_%zu", id_.c_str() + std::min<size_t>(id_.size(), id_.find('-') + 1), index)},
            {"type", "function"},
            {"function", {{"name", c.name}, {"arguments", c.arguments}}}};
  if (with_index) j["index"] = index;
  return j;
}

json Completion::Logprobs(const std::vector<int32_t>& tokens, const std::vector<coord::TokenLogprob>& lps,
                          size_t offset) const {
  auto piece = [&](int32_t id) { return std::string(tok_.TokenToPiece(id, false)); };
  auto bytes = [](const std::string& s) {
    json b = json::array();
    for (unsigned char c : s) b.push_back(static_cast<int>(c));
    return b;
  };
  const size_t n = std::min(tokens.size(), lps.size());
  if (chat_) {
    json content = json::array();
    for (size_t i = 0; i < n; ++i) {
      const std::string t = piece(tokens[i]);
      json top = json::array();
      for (auto [id, lp] : lps[i].top) {
        const std::string a = piece(id);
        top.push_back({{"token", a}, {"logprob", std::isfinite(lp) ? lp : -9999.0f}, {"bytes", bytes(a)}});
      }
      content.push_back({{"token", t}, {"logprob", lps[i].logprob}, {"bytes", bytes(t)}, {"top_logprobs", top}});
    }
    return {{"content", content}, {"refusal", nullptr}};
  }
  json toks = json::array(), token_lps = json::array(), tops = json::array(), offsets = json::array();
  for (size_t i = 0; i < n; ++i) {
    const std::string t = piece(tokens[i]);
    toks.push_back(t);
    token_lps.push_back(lps[i].logprob);
    json top = json::object();
    for (auto [id, lp] : lps[i].top) top[piece(id)] = std::isfinite(lp) ? lp : -9999.0f;
    tops.push_back(top);
    offsets.push_back(offset);
    offset += t.size();
  }
  return {{"tokens", toks}, {"token_logprobs", token_lps}, {"top_logprobs", tops}, {"text_offset", offsets}};
}

json Completion::Message(const ChatOutput& o) const {
  json m = {{"role", "assistant"}, {"content", o.content.empty() && !o.calls.empty() ? json(nullptr) : json(o.content)}};
  if (!o.reasoning.empty()) m["reasoning_content"] = o.reasoning;
  if (!o.calls.empty()) {
    json calls = json::array();
    for (size_t i = 0; i < o.calls.size(); ++i) calls.push_back(ToolCallJson(o.calls[i], i, false));
    m["tool_calls"] = std::move(calls);
  }
  return m;
}

json Completion::StructuredDelta(bool final) {
  const ChatOutput o = ParseChatOutput(output_, std::string(text_.sent()), final);
  json delta = json::object();
  // What a parse returns only grows (chat_output.h); guard anyway against sending twice.
  if (o.reasoning.size() > sent_reasoning_) {
    delta["reasoning_content"] = o.reasoning.substr(sent_reasoning_);
    sent_reasoning_ = o.reasoning.size();
  }
  if (o.content.size() > sent_content_) {
    delta["content"] = o.content.substr(sent_content_);
    sent_content_ = o.content.size();
  }
  if (o.calls.size() > sent_calls_) {
    json calls = json::array();
    for (size_t i = sent_calls_; i < o.calls.size(); ++i) calls.push_back(ToolCallJson(o.calls[i], i, true));
    delta["tool_calls"] = std::move(calls);
    sent_calls_ = o.calls.size();
  }
  return delta.empty() ? json(nullptr) : delta;
}

json Completion::FinishReason(const Request::Update& u) const {
  if (sent_calls_ > 0 && (text_.stopped() || u.finish == Finish::kStop)) return "tool_calls";
  if (text_.stopped() || u.finish == Finish::kStop) return "stop";
  if (u.finish == Finish::kLength) return "length";
  return nullptr;
}

json Completion::Choice(const std::string& text, const json& finish, bool last) const {
  json choice = {{"index", index_}, {"logprobs", nullptr}, {"finish_reason", finish}};
  if (chat_) {
    choice["delta"] = last ? json::object() : json{{"content", text}};
  } else {
    choice["text"] = text;
  }
  return choice;
}

std::string Completion::Event(const json& choice, const json& usage) const {
  json c = {{"id", id_}, {"object", chat_ ? "chat.completion.chunk" : "text_completion"},
            {"created", created_}, {"model", model_}, {"choices", choice.is_null() ? json::array() : json::array({choice})}};
  if (!usage.is_null()) c["usage"] = usage;
  return "data: " + Dump(c) + "\n\n";
}

std::optional<ApiError> Completion::Once(json& body, const std::function<bool()>& alive) {
  Request::Update u;
  do {
    if (alive && !alive()) {
      req_->Cancel();
      return ApiError{499, "the client closed the connection before the answer", "invalid_request_error", "",
                      "client_closed_request"};
    }
    u = req_->Wait(text_.tokens(), std::chrono::milliseconds(alive ? 250 : 1000));
    all_tokens_.insert(all_tokens_.end(), u.tokens.begin(), u.tokens.end());
    all_logprobs_.insert(all_logprobs_.end(), u.logprobs.begin(), u.logprobs.end());
    text_.Add(u.tokens, u.done);
    if (text_.stopped()) req_->StopAtString();
  } while (!u.done);
  if (u.finish == Finish::kError) return FromStatus(u.error.ok() ? Internal("failed") : u.error);
  finished_ = true;
  json choice = {{"index", index_}, {"logprobs", nullptr}, {"finish_reason", FinishReason(u)}};
  if (structured()) {
    const ChatOutput o = ParseChatOutput(output_, text_.text(), true);
    sent_calls_ = o.calls.size();
    choice["message"] = Message(o);
    choice["finish_reason"] = FinishReason(u);
  } else if (chat_) {
    choice["message"] = {{"role", "assistant"}, {"content", text_.text()}};
  } else {
    choice["text"] = text_.text();
  }
  if (logprobs_) choice["logprobs"] = Logprobs(all_tokens_, all_logprobs_, 0);
  body = {{"id", id_}, {"object", chat_ ? "chat.completion" : "text_completion"}, {"created", created_},
          {"model", model_}, {"choices", json::array({choice})}, {"usage", Usage()}};
  return std::nullopt;
}

Completion::Turn Completion::Stream(const std::function<bool(const std::string&)>& write,
                                    const std::function<bool()>& writable, std::chrono::milliseconds wait) {
  const auto gone = [&] {
    req_->Cancel();
    return Turn::kGone;
  };
  if (chat_ && !started_) {
    started_ = true;
    json first = {{"index", index_}, {"delta", {{"role", "assistant"}, {"content", ""}}}, {"logprobs", nullptr},
                  {"finish_reason", nullptr}};
    if (!write(Event(first))) return gone();
  }
  const Request::Update u = req_->Wait(text_.tokens(), wait);
  const bool was_stopped = text_.stopped();
  const std::string piece = text_.Add(u.tokens, u.done);
  if (text_.stopped() && !was_stopped) req_->StopAtString();
  // This update's tokens' log-probabilities go with the chunk they arrive in.
  const json lps = logprobs_ && !u.tokens.empty() ? Logprobs(u.tokens, u.logprobs, logprob_offset_) : json(nullptr);
  if (logprobs_) {
    for (int32_t t : u.tokens) logprob_offset_ += tok_.TokenToPiece(t, false).size();
  }
  if (structured()) {
    const json delta = StructuredDelta(u.done || text_.stopped());
    if (!delta.is_null() || !lps.is_null() || (continuous_usage_ && !u.tokens.empty())) {
      json choice = {{"index", index_}, {"delta", delta.is_null() ? json::object() : delta}, {"logprobs", lps},
                     {"finish_reason", nullptr}};
      if (!write(Event(choice, continuous_usage_ ? Usage() : json(nullptr)))) return gone();
    }
  } else if (!piece.empty() || !lps.is_null() || (continuous_usage_ && !u.tokens.empty())) {
    json choice = Choice(piece, nullptr, false);
    choice["logprobs"] = lps;
    if (!write(Event(choice, continuous_usage_ ? Usage() : json(nullptr)))) return gone();
  }
  if (!u.done && !text_.stopped()) return writable() ? Turn::kMore : gone();
  std::string tail;
  if (u.done && u.finish == Finish::kError && !text_.stopped()) {
    tail = "data: " + Dump(ErrorBody(FromStatus(u.error))) + "\n\n";
  } else {
    finished_ = true;
    tail = Event(Choice("", FinishReason(u), true), continuous_usage_ ? Usage() : json(nullptr));
    if (include_usage_ && last_) {
      json usage = Usage();
      usage["completion_tokens"] = usage["completion_tokens"].get<int>() + earlier_tokens_;
      usage["total_tokens"] = usage["total_tokens"].get<int>() + earlier_tokens_;
      tail += Event(nullptr, usage);
    }
  }
  if (last_) tail += "data: [DONE]\n\n";
  write(tail);
  return Turn::kDone;
}

}  // namespace daisy::serve
