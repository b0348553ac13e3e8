// What a chat model's output says, apart from its text: the reasoning it wrote in
// <think>…</think> (Qwen3, DeepSeek-R1 distills) and the tool calls it made in its family's
// format: Qwen/Hermes <tool_call>{json}</tool_call>, Llama 3.x's bare {"name", "parameters"}
// JSON (after <|python_tag|> or alone), Mistral's [TOOL_CALLS][{...}] or [TOOL_CALLS]name[ARGS]{...}.
//
// Parsing works on all the text so far: while the output is still growing, text that could be
// the start of a marker, and a tool call not yet closed, are held back, so what a parse returns
// only ever grows (a stream sends the differences).
#pragma once

#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace daisy::serve {

enum class ToolFormat { kNone, kHermes, kLlama3, kMistral };

struct ChatOutputFormat {
  bool reasoning = false;      // split <think>…</think> off as reasoning_content
  bool thinking_open = false;  // the prompt ends inside <think> (the output starts as reasoning)
  ToolFormat tools = ToolFormat::kNone;
};

// From the template's source, the rendered prompt and whether the request offers tools (and
// does not say tool_choice "none"). `reasoning_format` "none" turns reasoning parsing off.
ChatOutputFormat DetectChatOutput(const std::string& template_source, const std::string& prompt, bool tools,
                                  const std::string& reasoning_format);

// The special tokens a format needs to see as text (daisy otherwise does not print control
// tokens): their ids in `tokenizer`'s vocabulary.
std::vector<int32_t> PreservedTokens(const ChatOutputFormat& f, const tokenizer::Tokenizer& tokenizer);

struct ToolCall {
  std::string name;
  std::string arguments;  // a JSON object's text
};

struct ChatOutput {
  std::string reasoning;
  std::string content;
  std::vector<ToolCall> calls;
};

// Parses `text` (everything generated so far); `final`: the output is complete.
ChatOutput ParseChatOutput(const ChatOutputFormat& f, const std::string& text, bool final);

}  // namespace daisy::serve
