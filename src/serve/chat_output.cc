#include "serve/chat_output.h"

#include <algorithm>

#include <nlohmann/json.hpp>

namespace daisy::serve {
namespace {

using ojson = nlohmann::ordered_json;

constexpr std::string_view kThinkOpen = "<think>", kThinkClose = "</think>";
constexpr std::string_view kHermesOpen = "<tool_call>", kHermesClose = "</tool_call>";
constexpr std::string_view kPythonTag = "<|python_tag|>";
constexpr std::string_view kMistralCalls = "[TOOL_CALLS]", kMistralArgs = "[ARGS]";

bool IsSpace(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

std::string_view TrimLeft(std::string_view s) {
  while (!s.empty() && IsSpace(s.front())) s.remove_prefix(1);
  return s;
}
std::string_view Trim(std::string_view s) {
  s = TrimLeft(s);
  while (!s.empty() && IsSpace(s.back())) s.remove_suffix(1);
  return s;
}

// The length of the longest suffix of `s` that is a proper prefix of `marker`.
size_t PartialMarker(std::string_view s, std::string_view marker) {
  for (size_t k = std::min(marker.size() - 1, s.size()); k > 0; --k) {
    if (s.substr(s.size() - k) == marker.substr(0, k)) return k;
  }
  return 0;
}

// {"name": ..., "arguments" | "parameters": {...} or "..."} as a call.
bool CallFromJson(const ojson& j, ToolCall& call) {
  if (!j.is_object() || !j.contains("name") || !j["name"].is_string()) return false;
  call.name = j["name"].get<std::string>();
  const char* key = j.contains("arguments") ? "arguments" : j.contains("parameters") ? "parameters" : nullptr;
  if (key == nullptr) {
    call.arguments = "{}";
  } else if (j[key].is_string()) {
    call.arguments = j[key].get<std::string>();
  } else {
    call.arguments = j[key].dump(-1, ' ', false, ojson::error_handler_t::replace);
  }
  return true;
}

bool ParseCall(std::string_view text, ToolCall& call) {
  const ojson j = ojson::parse(Trim(text), nullptr, /*allow_exceptions=*/false);
  return !j.is_discarded() && CallFromJson(j, call);
}

// The tool calls in `text` (reasoning already removed): content around them, calls in order.
void ParseTools(const ChatOutputFormat& f, std::string_view text, bool final, ChatOutput& out) {
  switch (f.tools) {
    case ToolFormat::kNone: out.content += text; return;
    case ToolFormat::kHermes: {
      while (true) {
        const size_t open = text.find(kHermesOpen);
        if (open == std::string_view::npos) {
          const size_t hold = final ? 0 : PartialMarker(text, kHermesOpen);
          out.content += text.substr(0, text.size() - hold);
          return;
        }
        const size_t close = text.find(kHermesClose, open);
        const std::string_view body =
            text.substr(open + kHermesOpen.size(), close == std::string_view::npos ? std::string_view::npos
                                                                                     : close - open - kHermesOpen.size());
        if (close == std::string_view::npos && !final) {  // still being written
          out.content += text.substr(0, open);
          return;
        }
        ToolCall call;
        if (!ParseCall(body, call)) {  // not a call after all: text
          out.content += text.substr(0, close == std::string_view::npos ? text.size() : close + kHermesClose.size());
          if (close == std::string_view::npos) return;
          text.remove_prefix(close + kHermesClose.size());
          continue;
        }
        out.content += text.substr(0, open);
        out.calls.push_back(std::move(call));
        if (close == std::string_view::npos) return;
        text.remove_prefix(close + kHermesClose.size());
        // Whitespace between calls is not content.
        const std::string_view rest = TrimLeft(text);
        if (rest.substr(0, kHermesOpen.size()) == kHermesOpen || (!final && kHermesOpen.substr(0, rest.size()) == rest)) {
          text = rest;
        }
      }
    }
    case ToolFormat::kLlama3: {
      // The whole answer is one call: {"name": ..., "parameters": {...}}, maybe after <|python_tag|>.
      std::string_view body = TrimLeft(text);
      const bool tagged = body.substr(0, kPythonTag.size()) == kPythonTag;
      if (tagged) body = TrimLeft(body.substr(kPythonTag.size()));
      const bool maybe = tagged || (!body.empty() && body.front() == '{') ||
                         (!final && (body.empty() || kPythonTag.substr(0, body.size()) == body));
      if (!maybe) {
        out.content += text;
        return;
      }
      if (!final) return;  // held until the end: a call or, if it does not parse, text
      ToolCall call;
      if (ParseCall(body, call)) {
        out.calls.push_back(std::move(call));
      } else {
        out.content += text;
      }
      return;
    }
    case ToolFormat::kMistral: {
      const size_t at = text.find(kMistralCalls);
      if (at == std::string_view::npos) {
        const size_t hold = final ? 0 : PartialMarker(text, kMistralCalls);
        out.content += text.substr(0, text.size() - hold);
        return;
      }
      out.content += text.substr(0, at);
      if (!final) return;
      std::string_view rest = Trim(text.substr(at + kMistralCalls.size()));
      std::vector<ToolCall> calls;
      bool ok = false;
      if (!rest.empty() && rest.front() == '[') {  // [{"name", "arguments"}, ...]
        const ojson j = ojson::parse(rest, nullptr, /*allow_exceptions=*/false);
        ok = j.is_array() && !j.empty();
        for (size_t i = 0; ok && i < j.size(); ++i) {
          ToolCall call;
          ok = CallFromJson(j[i], call);
          calls.push_back(std::move(call));
        }
      } else {  // name[ARGS]{...}[TOOL_CALLS]name[ARGS]{...}
        ok = true;
        while (ok && !rest.empty()) {
          const size_t args = rest.find(kMistralArgs);
          if (args == std::string_view::npos) {
            ok = false;
            break;
          }
          ToolCall call;
          call.name = std::string(Trim(rest.substr(0, args)));
          rest.remove_prefix(args + kMistralArgs.size());
          const size_t next = rest.find(kMistralCalls);
          const std::string_view json_text = Trim(rest.substr(0, next));
          const ojson j = ojson::parse(json_text, nullptr, /*allow_exceptions=*/false);
          ok = !call.name.empty() && j.is_object();
          if (ok) call.arguments = j.dump(-1, ' ', false, ojson::error_handler_t::replace);
          calls.push_back(std::move(call));
          rest = next == std::string_view::npos ? std::string_view() : Trim(rest.substr(next + kMistralCalls.size()));
        }
      }
      if (ok) {
        for (ToolCall& c : calls) out.calls.push_back(std::move(c));
      } else {
        out.content += text.substr(at);
      }
      return;
    }
  }
}

}  // namespace

ChatOutputFormat DetectChatOutput(const std::string& source, const std::string& prompt, bool tools,
                                  const std::string& reasoning_format) {
  ChatOutputFormat f;
  if (reasoning_format != "none" && source.find(kThinkOpen) != std::string::npos) {
    f.reasoning = true;
    const std::string_view p = Trim(prompt);
    f.thinking_open = p.size() >= kThinkOpen.size() && p.substr(p.size() - kThinkOpen.size()) == kThinkOpen;
  }
  if (tools) {
    if (source.find(kHermesOpen) != std::string::npos) {
      f.tools = ToolFormat::kHermes;
    } else if (source.find(kMistralCalls) != std::string::npos) {
      f.tools = ToolFormat::kMistral;
    } else if (source.find(kPythonTag) != std::string::npos ||
               (source.find("<|start_header_id|>") != std::string::npos && source.find("parameters") != std::string::npos)) {
      f.tools = ToolFormat::kLlama3;
    }
  }
  return f;
}

std::vector<int32_t> PreservedTokens(const ChatOutputFormat& f, const tokenizer::Tokenizer& tokenizer) {
  std::vector<std::string_view> texts;
  if (f.reasoning) texts.insert(texts.end(), {kThinkOpen, kThinkClose});
  if (f.tools == ToolFormat::kHermes) texts.insert(texts.end(), {kHermesOpen, kHermesClose});
  if (f.tools == ToolFormat::kLlama3) texts.push_back(kPythonTag);
  if (f.tools == ToolFormat::kMistral) texts.insert(texts.end(), {kMistralCalls, kMistralArgs});
  std::vector<int32_t> ids;
  for (std::string_view t : texts) {
    const std::vector<int32_t> enc = tokenizer.Encode(t, /*parse_special=*/true, /*add_bos=*/false);
    if (enc.size() == 1) ids.push_back(enc[0]);
  }
  return ids;
}

ChatOutput ParseChatOutput(const ChatOutputFormat& f, const std::string& all, bool final) {
  ChatOutput out;
  std::string_view text = all;
  if (f.reasoning) {
    // Reasoning: from the start (the prompt left <think> open, or the output opens it) to </think>.
    std::string_view lead = TrimLeft(text);
    bool open = f.thinking_open;
    if (!open && lead.substr(0, kThinkOpen.size()) == kThinkOpen) {
      open = true;
      text = lead.substr(kThinkOpen.size());
    } else if (!open && !final && !lead.empty() && kThinkOpen.substr(0, lead.size()) == lead) {
      return out;  // maybe "<think" so far
    } else if (!open && !final && lead.empty()) {
      return out;
    }
    if (open) {
      const size_t close = text.find(kThinkClose);
      if (close == std::string_view::npos) {
        const size_t hold = final ? 0 : PartialMarker(text, kThinkClose);
        out.reasoning = std::string(Trim(text.substr(0, text.size() - hold)));
        if (!final) {  // keep trailing whitespace out until more text shows it is inside
          out.reasoning = std::string(TrimLeft(text.substr(0, text.size() - hold)));
          while (!out.reasoning.empty() && IsSpace(out.reasoning.back())) out.reasoning.pop_back();
        }
        return out;
      }
      out.reasoning = std::string(Trim(text.substr(0, close)));
      text = TrimLeft(text.substr(close + kThinkClose.size()));
    }
  }
  ParseTools(f, text, final, out);
  return out;
}

}  // namespace daisy::serve
