// Chat templates: turning OpenAI-style messages into the prompt text a model was trained on.
// daisy does not run Jinja. It recognises the template families it can render exactly and
// refuses every other template with a message, rather than guess and silently misformat:
//   Llama 3: <|start_header_id|>{role}<|end_header_id|>\n\n{content, trimmed}<|eot_id|> per
//   message, then <|start_header_id|>assistant<|end_header_id|>\n\n (BOS comes from the
//   tokenizer). Templates that add their own text (Llama 3.1's "Cutting Knowledge Date"
//   preamble, tool calls) are not this family and are refused.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"

namespace daisy::serve {

struct ChatMessage {
  std::string role;  // system, user or assistant
  std::string content;
};

enum class ChatFormat { kLlama3 };

// From the GGUF's tokenizer.chat_template. Errors say why the template is not renderable.
Result<ChatFormat> DetectChatFormat(const std::string& chat_template);

// The prompt text, ending with the assistant's header (add_generation_prompt), without BOS.
std::string RenderChat(ChatFormat format, const std::vector<ChatMessage>& messages);

}  // namespace daisy::serve
