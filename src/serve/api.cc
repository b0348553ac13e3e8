#include "serve/api.h"

#include <random>

#include "base/strings.h"
#include "grammar/json_schema.h"

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

using ojson = nlohmann::ordered_json;

// A message's content for the template: a string as it is, text parts
// [{"type": "text", "text": ...}] joined into one string (daisy serves text only; some templates
// take only strings), null kept (an assistant turn that only calls tools).
Refusal Content(const ojson& v, const std::string& param, ojson& out) {
  if (v.is_string() || v.is_null()) {
    out = v;
    return std::nullopt;
  }
  if (!v.is_array()) return Invalid(param, "'" + param + "' must be a string, null or an array of text parts");
  std::string text;
  for (const ojson& part : v) {
    if (!part.is_object() || !part.contains("type") || part["type"] != "text" || !part.contains("text") ||
        !part["text"].is_string()) {
      return Invalid(param, "'" + param + "' parts must be {\"type\": \"text\", \"text\": string}; daisy serves text only");
    }
    text += part["text"].get<std::string>();
  }
  out = text;
  return std::nullopt;
}

// The messages as the template takes them: roles checked, content flattened, tool calls'
// arguments parsed from the JSON strings OpenAI clients send into the objects templates
// expect (`objects`; else left as strings).
Refusal Messages(const ojson& body, bool objects, bool empty_for_null, ojson& out) {
  if (!body.contains("messages") || !body["messages"].is_array() || body["messages"].empty()) {
    return Invalid("messages", "'messages' must be a non-empty array");
  }
  if (body["messages"].size() > kMaxMessages) return Invalid("messages", "too many messages");
  out = ojson::array();
  for (size_t i = 0; i < body["messages"].size(); ++i) {
    const ojson& m = body["messages"][i];
    const std::string where = StrFormat("messages[%zu]", i);
    if (!m.is_object() || !m.contains("role") || !m["role"].is_string()) {
      return Invalid(where, "'" + where + "' must be an object with a string 'role'");
    }
    ojson msg = m;
    std::string role = m["role"].get<std::string>();
    if (role == "developer") msg["role"] = role = "system";
    if (role != "system" && role != "user" && role != "assistant" && role != "tool") {
      return Invalid(where + ".role", "'" + where + ".role' is '" + EscapeForMessage(role) +
                                          "'; daisy takes system, developer, user, assistant and tool messages");
    }
    const bool calls = role == "assistant" && m.contains("tool_calls") && !m["tool_calls"].is_null();
    if (!m.contains("content") && !calls) return Invalid(where + ".content", "'" + where + ".content' is missing");
    ojson content = nullptr;
    if (m.contains("content")) {
      if (Refusal r = Content(m["content"], where + ".content", content)) return r;
    }
    msg["content"] = content.is_null() && empty_for_null ? ojson("") : content;
    if (calls) {
      if (!m["tool_calls"].is_array()) return Invalid(where + ".tool_calls", "'" + where + ".tool_calls' must be an array");
      for (size_t k = 0; k < m["tool_calls"].size(); ++k) {
        const ojson& c = m["tool_calls"][k];
        const std::string cw = StrFormat("%s.tool_calls[%zu]", where.c_str(), k);
        if (!c.is_object() || !c.contains("function") || !c["function"].is_object() || !c["function"].contains("name") ||
            !c["function"]["name"].is_string()) {
          return Invalid(cw, "'" + cw + "' must be {\"type\": \"function\", \"function\": {\"name\": string, \"arguments\": ...}}");
        }
        ojson& call = msg["tool_calls"][k];
        if (!call.contains("type")) call["type"] = "function";
        ojson& args = call["function"]["arguments"];
        if (args.is_null()) args = objects ? ojson::object() : ojson("{}");
        if (objects && args.is_string()) {
          ojson parsed = ojson::parse(args.get<std::string>(), nullptr, /*allow_exceptions=*/false);
          if (parsed.is_discarded()) return Invalid(cw + ".function.arguments", "'" + cw + ".function.arguments' is not valid JSON");
          args = std::move(parsed);
        } else if (!objects && !args.is_string()) {
          args = args.dump();
        }
      }
    }
    out.push_back(std::move(msg));
  }
  return std::nullopt;
}

// The template's input: messages, tools (unless tool_choice is "none"), the generation prompt,
// and chat_template_kwargs (llama-server's and vLLM's extension: enable_thinking, ...).
Refusal TemplateInput(const ojson& body, bool object_arguments, bool empty_for_null, ojson& input) {
  input = ojson::object();
  ojson messages;
  if (Refusal r = Messages(body, object_arguments, empty_for_null, messages)) return r;
  input["messages"] = std::move(messages);
  if (body.contains("tools") && !body["tools"].is_null()) {
    if (!body["tools"].is_array()) return Invalid("tools", "'tools' must be an array");
    const bool none = body.contains("tool_choice") && body["tool_choice"] == "none";
    if (!body["tools"].empty() && !none) input["tools"] = body["tools"];
  }
  input["add_generation_prompt"] = true;
  if (body.contains("chat_template_kwargs") && !body["chat_template_kwargs"].is_null()) {
    if (!body["chat_template_kwargs"].is_object()) {
      return Invalid("chat_template_kwargs", "'chat_template_kwargs' must be an object");
    }
    for (auto it = body["chat_template_kwargs"].begin(); it != body["chat_template_kwargs"].end(); ++it) {
      input[it.key()] = it.value();
    }
  }
  return std::nullopt;
}

}  // namespace

std::shared_ptr<const grammar::TokenVocab> GrammarVocabs::Get(const std::vector<int32_t>& preserved) {
  std::lock_guard lock(mu_);
  auto& v = vocabs_[preserved];
  if (!v) v = std::make_shared<const grammar::TokenVocab>(tokenizer_, preserved);
  return v;
}

std::optional<ApiError> RenderChatPrompt(const ojson& body, const ApiContext& ctx, std::string& text) {
  if (!ctx.chat->ok()) return ApiError{400, ctx.chat->status().message(), "invalid_request_error", "messages", "unsupported_chat_template"};
  // Tool-call arguments as objects (what transformers' templates take), else as the strings a
  // template may concatenate (DeepSeek's); a tool-calling turn's null content as null (DeepSeek
  // tests for none), else as "" (Qwen3 searches it): the first that renders.
  Status first = Status::Ok();
  for (const bool empty_for_null : {false, true}) {
    for (const bool objects : {true, false}) {
      ojson input;
      if (Refusal r = TemplateInput(body, objects, empty_for_null, input)) return r;
      Result<std::string> out = (*ctx.chat)->Apply(input);
      if (out.ok()) {
        text = std::move(*out);
        return std::nullopt;
      }
      if (first.ok()) first = out.status();
    }
  }
  return ApiError{400, first.message(), "invalid_request_error", "messages", "chat_template_error"};
}

namespace {

// tool_choice: "auto", "none", "required" (some call is forced) or a named function (that call
// is forced).
Refusal ToolChoice(const ojson& body, bool& tools_active, CompletionRequest& out) {
  tools_active = body.contains("tools") && body["tools"].is_array() && !body["tools"].empty();
  if (!body.contains("tool_choice") || body["tool_choice"].is_null()) return std::nullopt;
  const ojson& c = body["tool_choice"];
  if (c == "none") {
    tools_active = false;
    return std::nullopt;
  }
  if (c == "auto") return std::nullopt;
  const bool named = c.is_object() && c.contains("function") && c["function"].is_object() &&
                     c["function"].contains("name") && c["function"]["name"].is_string();
  if (c != "required" && !named) {
    return Invalid("tool_choice", "'tool_choice' must be \"auto\", \"none\", \"required\" or {\"type\": \"function\", \"function\": {\"name\": ...}}");
  }
  if (!tools_active) return Invalid("tool_choice", "'tool_choice' forces a tool call but 'tools' is empty");
  out.tool_required = true;
  if (named) {
    out.tool_name = c["function"]["name"].get<std::string>();
    bool found = false;
    for (const ojson& t : body["tools"]) found = found || (t.is_object() && t.contains("function") && t["function"].is_object() &&
                                                           t["function"].value("name", "") == out.tool_name);
    if (!found) return Invalid("tool_choice", "'tool_choice' names '" + EscapeForMessage(out.tool_name) + "', which is not among 'tools'");
  }
  return std::nullopt;
}

// The grammar a request's output must follow: response_format (json_object, json_schema) or a
// forced tool call in the template's format; none for free text.
Refusal Constraint(const ojson& body, const ApiContext& ctx, CompletionRequest& out) {
  std::optional<grammar::Grammar> g;
  if (body.contains("response_format") && !body["response_format"].is_null()) {
    const ojson& rf = body["response_format"];
    const std::string type = rf.is_object() && rf.contains("type") && rf["type"].is_string() ? rf["type"].get<std::string>() : "";
    if (type == "json_object") {
      g = grammar::JsonObjectGrammar();
    } else if (type == "json_schema") {
      if (!rf.contains("json_schema") || !rf["json_schema"].is_object() || !rf["json_schema"].contains("schema")) {
        return Invalid("response_format", "'response_format' of type json_schema needs json_schema.schema");
      }
      auto s = grammar::JsonSchemaGrammar(rf["json_schema"]["schema"]);
      if (!s.ok()) return Invalid("response_format", s.status().message());
      g = std::move(*s);
    } else if (type != "text") {
      return Invalid("response_format", "'response_format.type' must be \"text\", \"json_object\" or \"json_schema\"");
    }
  }
  if (out.tool_required) {
    if (g) return Invalid("response_format", "'response_format' and a forced tool call cannot be combined");
    ojson tools = ojson::array();
    for (const ojson& t : body["tools"]) {
      if (out.tool_name.empty() || (t.is_object() && t.contains("function") && t["function"].value("name", "") == out.tool_name)) {
        tools.push_back(t);
      }
    }
    grammar::ToolCallShape shape;
    switch (out.output.tools) {
      case ToolFormat::kLlama3: shape = {"", "", "parameters"}; break;
      case ToolFormat::kMistral: shape = {"[TOOL_CALLS][", "]", "arguments"}; break;
      case ToolFormat::kHermes:
      case ToolFormat::kNone:
        shape = {"<tool_call>\n", "\n</tool_call>", "arguments"};
        out.output.tools = ToolFormat::kHermes;
        break;
    }
    out.preserved_tokens = PreservedTokens(out.output, *ctx.tokenizer);
    auto s = grammar::ToolCallGrammar(tools, shape);
    if (!s.ok()) return Invalid("tools", s.status().message());
    g = std::move(*s);
  }
  if (!g) return std::nullopt;
  if (ctx.vocabs == nullptr) return Invalid("response_format", "constrained output is not available on this server");
  out.params.grammar = std::make_shared<const grammar::Grammar>(std::move(*g));
  out.params.grammar_vocab = ctx.vocabs->Get(out.preserved_tokens);
  return std::nullopt;
}

Refusal ChatPrompt(const json&, const ojson& obody, const ApiContext& ctx, CompletionRequest& out) {
  std::vector<int32_t>& prompt = out.params.prompt;
  bool tools_active = false;
  if (Refusal r = ToolChoice(obody, tools_active, out)) return r;
  std::string reasoning_format = "auto";
  if (obody.contains("reasoning_format") && !obody["reasoning_format"].is_null()) {
    if (!obody["reasoning_format"].is_string()) return Invalid("reasoning_format", "'reasoning_format' must be a string");
    reasoning_format = obody["reasoning_format"].get<std::string>();
    if (reasoning_format != "none" && reasoning_format != "auto" && reasoning_format != "deepseek") {
      return Invalid("reasoning_format", "'reasoning_format' must be \"auto\", \"deepseek\" or \"none\"");
    }
  }
  std::string text;
  if (Refusal r = RenderChatPrompt(obody, ctx, text)) return r;
  out.output = DetectChatOutput((*ctx.chat)->source(), text, tools_active, reasoning_format);
  out.preserved_tokens = PreservedTokens(out.output, *ctx.tokenizer);
  // The template writes BOS itself; the tokenizer adds one too when the model asks for it:
  // keep one (as llama-server does).
  const std::string& bos = (*ctx.chat)->bos();
  const bool adds_bos = ctx.tokenizer->add_bos() && ctx.tokenizer->bos_id() >= 0;
  if (adds_bos && !bos.empty() && text.compare(0, bos.size(), bos) == 0) text.erase(0, bos.size());
  prompt = ctx.tokenizer->Encode(text, /*parse_special=*/true, /*add_bos=*/true);
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
  if (Refusal r = Number(body, "n", 1, kMaxChoices, true, n)) return r;
  for (const char* k : {"presence_penalty", "frequency_penalty"}) {
    if (Refusal r = Number(body, k, -2, 2, false, penalty)) return r;
    if (penalty && *penalty != 0) return Invalid(k, std::string("'") + k + "' is not supported (only 0)");
  }
  if (chat) {
    if (Refusal r = Bool(body, "logprobs", p.logprobs)) return r;
    std::optional<double> top;
    if (Refusal r = Number(body, "top_logprobs", 0, 20, true, top)) return r;
    if (top && !p.logprobs) return Invalid("top_logprobs", "'top_logprobs' needs 'logprobs': true");
    p.top_logprobs = top ? static_cast<int>(*top) : 0;
  } else if (body.contains("logprobs") && !body["logprobs"].is_null()) {
    // The legacy completions API: logprobs is the number of alternatives (0 to 5).
    std::optional<double> top;
    if (Refusal r = Number(body, "logprobs", 0, 5, true, top)) return r;
    p.logprobs = true;
    p.top_logprobs = static_cast<int>(*top);
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
  std::optional<double> n;
  if (Refusal r = Number(body, "n", 1, kMaxChoices, true, n)) return r;
  out.n = n ? static_cast<int>(*n) : 1;
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
  const ojson obody = ojson::parse(text, nullptr, /*allow_exceptions=*/false);  // keys in the client's order
  if (jinja::JsonDepth(obody) > jinja::kMaxJsonDepth) {
    return Invalid("", StrFormat("the request is nested deeper than %zu levels", jinja::kMaxJsonDepth));
  }
  if (chat) {
    if (Refusal r = ChatPrompt(body, obody, ctx, out)) return r;
  } else if (Refusal r = TextPrompt(body, ctx, prompt)) {
    return r;
  }
  if (prompt.empty()) return Invalid(chat ? "messages" : "prompt", "the prompt is empty");
  const int prompt_len = static_cast<int>(prompt.size());
  if (prompt_len >= ctx.capacity) {
    return ApiError{400, StrFormat("the prompt is %d tokens; this server's context is %d tokens", prompt_len, ctx.capacity),
                    "invalid_request_error", chat ? "messages" : "prompt", "context_length_exceeded"};
  }
  if (Refusal r = Sampling(body, chat, prompt_len, ctx, out.params)) return r;
  if (Refusal r = Options(body, ctx, out)) return r;
  return Constraint(obody, ctx, out);
}

}  // namespace daisy::serve
