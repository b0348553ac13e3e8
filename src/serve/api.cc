#include "serve/api.h"

#include <random>

#include "base/strings.h"

namespace daisy::serve {

using json = nlohmann::json;

json ErrorBody(const ApiError& e) {
  return {{"error", {{"message", e.message}, {"type", e.type},
                     {"param", e.param.empty() ? json(nullptr) : json(e.param)},
                     {"code", e.code.empty() ? json(nullptr) : json(e.code)}}}};
}

ApiError Invalid(const std::string& param, const std::string& message) {
  return {400, message, "invalid_request_error", param, ""};
}

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

std::string Dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

namespace {

using Refusal = std::optional<ApiError>;

// Optional number in [lo, hi]; `integer` requires a whole number.
Refusal Number(const json& body, const char* key, double lo, double hi, bool integer, std::optional<double>& out) {
  out.reset();
  if (!body.contains(key) || body[key].is_null()) return std::nullopt;
  const json& v = body[key];
  if (!v.is_number() || (integer && !v.is_number_integer())) {
    return Invalid(key, StrFormat("'%s' must be %s", key, integer ? "an integer" : "a number"));
  }
  const double d = v.get<double>();
  if (!(d >= lo && d <= hi)) return Invalid(key, StrFormat("'%s' is %g; it must be between %g and %g", key, d, lo, hi));
  out = d;
  return std::nullopt;
}

// Optional boolean.
Refusal Bool(const json& body, const char* key, bool& out) {
  if (!body.contains(key) || body[key].is_null()) return std::nullopt;
  if (!body[key].is_boolean()) return Invalid(key, StrFormat("'%s' must be a boolean", key));
  out = body[key].get<bool>();
  return std::nullopt;
}

// A message's content: a string, or text parts [{"type": "text", "text": ...}].
Refusal Text(const json& v, const std::string& param, std::string& out) {
  if (v.is_string()) {
    out = v.get<std::string>();
    return std::nullopt;
  }
  if (!v.is_array()) return Invalid(param, "'" + param + "' must be a string");
  out.clear();
  for (const json& part : v) {
    if (!part.is_object() || !part.contains("type") || part["type"] != "text" || !part.contains("text") ||
        !part["text"].is_string()) {
      return Invalid(param, "'" + param + "' parts must be {\"type\": \"text\", \"text\": string}; daisy serves text only");
    }
    out += part["text"].get<std::string>();
  }
  return std::nullopt;
}

Refusal ChatPrompt(const json& body, const ApiContext& ctx, std::vector<int32_t>& prompt) {
  if (!ctx.chat->ok()) return ApiError{400, ctx.chat->status().message(), "invalid_request_error", "messages", "unsupported_chat_template"};
  if (!body.contains("messages") || !body["messages"].is_array() || body["messages"].empty()) {
    return Invalid("messages", "'messages' must be a non-empty array");
  }
  if (body["messages"].size() > kMaxMessages) return Invalid("messages", "too many messages");
  std::vector<ChatMessage> messages;
  for (size_t i = 0; i < body["messages"].size(); ++i) {
    const json& m = body["messages"][i];
    const std::string where = StrFormat("messages[%zu]", i);
    if (!m.is_object() || !m.contains("role") || !m["role"].is_string()) {
      return Invalid(where, "'" + where + "' must be an object with a string 'role'");
    }
    std::string role = m["role"].get<std::string>();
    if (role == "developer") role = "system";
    if (role != "system" && role != "user" && role != "assistant") {
      return Invalid(where + ".role", "'" + where + ".role' is '" + role + "'; daisy takes system, user and assistant messages");
    }
    if (!m.contains("content")) return Invalid(where + ".content", "'" + where + ".content' is missing");
    std::string text;
    if (Refusal r = Text(m["content"], where + ".content", text)) return r;
    messages.push_back({role, std::move(text)});
  }
  prompt = ctx.tokenizer->Encode(RenderChat(**ctx.chat, messages), /*parse_special=*/true, /*add_bos=*/true);
  return std::nullopt;
}

Refusal TextPrompt(const json& body, const ApiContext& ctx, std::vector<int32_t>& prompt) {
  if (!body.contains("prompt")) return Invalid("prompt", "'prompt' is missing");
  json p = body["prompt"];
  if (p.is_array() && p.size() == 1 && p[0].is_string()) p = p[0];
  if (p.is_string()) {
    prompt = ctx.tokenizer->Encode(p.get<std::string>(), /*parse_special=*/true, /*add_bos=*/true);
  } else if (p.is_array() && !p.empty() && p[0].is_number_integer()) {
    for (const json& t : p) {
      if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() >= ctx.tokenizer->n_vocab()) {
        return Invalid("prompt", StrFormat("'prompt' token ids must be integers below %d", ctx.tokenizer->n_vocab()));
      }
      prompt.push_back(static_cast<int32_t>(t.get<int64_t>()));
    }
  } else {
    return Invalid("prompt", "'prompt' must be a string, or an array of token ids (one prompt per request)");
  }
  bool echo = false;
  if (Refusal r = Bool(body, "echo", echo)) return r;
  if (echo) return Invalid("echo", "'echo' is not supported");
  return std::nullopt;
}

// max_tokens (or max_completion_tokens) and the sampling parameters.
Refusal Sampling(const json& body, bool chat, int prompt_len, const ApiContext& ctx, coord::RequestParams& p) {
  const char* max_key = chat && body.contains("max_completion_tokens") ? "max_completion_tokens" : "max_tokens";
  std::optional<double> max_tokens, temperature, top_p, top_k, min_p, seed, n, penalty;
  for (const auto& [key, lo, hi, integer, out] :
       {std::tuple{max_key, 1.0, double(1 << 30), true, &max_tokens}, std::tuple{"temperature", 0.0, 2.0, false, &temperature},
        std::tuple{"top_p", 0.0, 1.0, false, &top_p}, std::tuple{"top_k", 0.0, double(1 << 20), true, &top_k},
        std::tuple{"min_p", 0.0, 1.0, false, &min_p}, std::tuple{"seed", -9.3e18, 9.3e18, true, &seed}}) {
    if (Refusal r = Number(body, key, lo, hi, integer, *out)) return r;
  }
  if (Number(body, "n", 1, 1, true, n)) return Invalid("n", "'n' must be 1: daisy returns one choice per request");
  for (const char* k : {"presence_penalty", "frequency_penalty"}) {
    if (Refusal r = Number(body, k, -2, 2, false, penalty)) return r;
    if (penalty && *penalty != 0) return Invalid(k, std::string("'") + k + "' is not supported (only 0)");
  }
  if (body.contains("logprobs") && !body["logprobs"].is_null() && body["logprobs"] != false) {
    return Invalid("logprobs", "'logprobs' is not supported yet");
  }
  const int room = ctx.capacity - prompt_len;
  if (max_tokens) {
    if (*max_tokens > room) {
      return ApiError{400, StrFormat("the prompt (%d tokens) plus %s (%.0f) is longer than this server's context of %d tokens",
                                     prompt_len, max_key, *max_tokens, ctx.capacity),
                      "invalid_request_error", max_key, "context_length_exceeded"};
    }
    p.max_tokens = static_cast<int>(*max_tokens);
  } else {
    p.max_tokens = chat ? room : std::min(16, room);  // OpenAI's defaults
  }
  runtime::SamplingParams& sp = p.sampling;
  sp.temperature = static_cast<float>(temperature.value_or(1.0));
  sp.top_p = static_cast<float>(top_p.value_or(1.0));
  sp.top_k = static_cast<int>(top_k.value_or(0));
  sp.min_p = static_cast<float>(min_p.value_or(0.0));
  sp.repeat_penalty = 1.0f;
  sp.seed = seed ? static_cast<uint64_t>(static_cast<int64_t>(*seed)) : std::random_device{}();
  return std::nullopt;
}

// Stop strings, streaming and daisy's and llama.cpp's extensions.
Refusal Options(const json& body, const ApiContext& ctx, CompletionRequest& out) {
  if (body.contains("stop") && !body["stop"].is_null()) {
    const json& s = body["stop"];
    std::vector<json> list = s.is_array() ? std::vector<json>(s.begin(), s.end()) : std::vector<json>{s};
    if (list.size() > kMaxStops) return Invalid("stop", "'stop' takes at most 4 strings");
    for (const json& x : list) {
      if (!x.is_string() || x.get<std::string>().empty() || x.get<std::string>().size() > kMaxStopBytes) {
        return Invalid("stop", "'stop' must be a non-empty string or an array of up to 4 of them (at most 256 bytes each)");
      }
      out.stops.push_back(x.get<std::string>());
    }
  }
  bool ignore_eos = !out.params.stop_at_eog;
  if (Refusal r = Bool(body, "ignore_eos", ignore_eos)) return r;  // llama.cpp's extension
  out.params.stop_at_eog = !ignore_eos;
  if (Refusal r = Bool(body, "speculative", out.params.speculate)) return r;  // daisy's extension
  if (body.contains("speculative_k") && !body["speculative_k"].is_null()) {    // daisy's extension
    const json& k = body["speculative_k"];
    if (!k.is_number_integer() || k.get<int64_t>() < 0 || k.get<int64_t>() > ctx.spec_k_max) {
      return Invalid("speculative_k", StrFormat("'speculative_k' must be an integer from 0 (adaptive) to %d (the server's --spec-k-max)",
                                                ctx.spec_k_max));
    }
    out.params.spec_k = static_cast<int>(k.get<int64_t>());
  }
  if (Refusal r = Bool(body, "stream", out.stream)) return r;
  if (body.contains("stream_options") && !body["stream_options"].is_null()) {
    const json& so = body["stream_options"];
    if (!so.is_object()) return Invalid("stream_options", "'stream_options' must be an object");
    for (const char* k : {"include_usage", "continuous_usage_stats"}) {
      if (so.contains(k) && !so[k].is_boolean() && !so[k].is_null()) {
        return Invalid("stream_options", StrFormat("'stream_options.%s' must be a boolean", k));
      }
    }
    out.include_usage = so.value("include_usage", false);
    out.continuous_usage = so.value("continuous_usage_stats", false);
  }
  return std::nullopt;
}

}  // namespace

std::optional<ApiError> ParseCompletion(std::string_view text, bool chat, const ApiContext& ctx, CompletionRequest& out) {
  out = CompletionRequest{};
  out.chat = chat;
  const json body = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (body.is_discarded()) return Invalid("", "the request body is not valid JSON");
  if (!body.is_object()) return Invalid("", "the request body must be a JSON object");
  if (body.contains("model")) {
    if (!body["model"].is_string()) return Invalid("model", "'model' must be a string");
    const std::string m = body["model"].get<std::string>();
    if (m != ctx.model_name) {
      return ApiError{404, "the model '" + m + "' does not exist; this server serves '" + ctx.model_name + "'",
                      "invalid_request_error", "model", "model_not_found"};
    }
  }
  std::vector<int32_t>& prompt = out.params.prompt;
  if (Refusal r = chat ? ChatPrompt(body, ctx, prompt) : TextPrompt(body, ctx, prompt)) return r;
  if (prompt.empty()) return Invalid(chat ? "messages" : "prompt", "the prompt is empty");
  const int prompt_len = static_cast<int>(prompt.size());
  if (prompt_len >= ctx.capacity) {
    return ApiError{400, StrFormat("the prompt is %d tokens; this server's context is %d tokens", prompt_len, ctx.capacity),
                    "invalid_request_error", chat ? "messages" : "prompt", "context_length_exceeded"};
  }
  if (Refusal r = Sampling(body, chat, prompt_len, ctx, out.params)) return r;
  return Options(body, ctx, out);
}

}  // namespace daisy::serve
