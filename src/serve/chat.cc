#include "serve/chat.h"

namespace daisy::serve {

namespace {
// Jinja's trim: leading and trailing whitespace.
std::string Trim(const std::string& s) {
  const char* ws = " \t\n\r\f\v";
  const size_t b = s.find_first_not_of(ws);
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(ws) - b + 1);
}
}  // namespace

Result<ChatFormat> DetectChatFormat(const std::string& t) {
  if (t.empty()) {
    return Unimplemented("the model has no chat template (tokenizer.chat_template): use "
                         "/v1/completions with a prompt");
  }
  const bool llama3 = t.find("<|start_header_id|>") != std::string::npos &&
                      t.find("<|end_header_id|>") != std::string::npos &&
                      t.find("<|eot_id|>") != std::string::npos;
  // Features of later Llama templates that inject text daisy would not reproduce.
  const bool extra = t.find("Cutting Knowledge Date") != std::string::npos ||
                     t.find("tools") != std::string::npos || t.find("ipython") != std::string::npos ||
                     t.find("date_string") != std::string::npos;
  if (llama3 && !extra) return ChatFormat::kLlama3;
  return Unimplemented("the model's chat template is not one daisy can render exactly (it renders "
                       "the Llama 3 format); use /v1/completions with a prompt");
}

std::string RenderChat(ChatFormat, const std::vector<ChatMessage>& messages) {
  std::string out;
  for (const ChatMessage& m : messages) {
    out += "<|start_header_id|>" + m.role + "<|end_header_id|>\n\n" + Trim(m.content) + "<|eot_id|>";
  }
  out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
  return out;
}

}  // namespace daisy::serve
