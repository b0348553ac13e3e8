// daisy chat-template: what a chat template makes of a conversation, without loading weights.
// Reads one JSON object from stdin (messages, tools, add_generation_prompt and any template
// kwargs), renders it with the model's tokenizer.chat_template (or --chat-template FILE) exactly
// as transformers' apply_chat_template would, and prints the prompt text (--json: as a JSON
// string). --batch: stdin a JSON list of such objects, stdout one JSON list with {"text": ...} or
// {"error": ...} for each (one process for many conversations: loading a 262k-token vocabulary
// costs ~0.3 s).
#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>

#include <nlohmann/json.hpp>

#include "apps/commands.h"
#include "gguf/reader.h"
#include "serve/chat.h"
#include "tokenizer/tokenizer.h"

namespace daisy::apps {
namespace {

struct ChatTemplateFlags {
  std::string model;
  std::string chat_template;
  bool json = false;
  bool batch = false;
};

std::string JsonText(const nlohmann::json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

int Run(const ChatTemplateFlags& f) {
  if (f.model.empty() && f.chat_template.empty()) return Fail("give -m MODEL and/or --chat-template FILE");
  std::unique_ptr<tokenizer::Tokenizer> tok;
  Result<serve::ChatTemplate> chat = InvalidArgument("no template");
  if (!f.model.empty()) {
    auto reader = gguf::Reader::Open(f.model);
    if (!reader.ok()) return Fail(reader.status().message());
    auto t = tokenizer::Tokenizer::FromGguf(*reader);
    if (!t.ok()) return Fail(t.status().message());
    chat = serve::ChatTemplate::ForModel(*t, f.chat_template);
  } else {
    // A template alone: no BOS or EOS texts unless the input gives them.
    std::ifstream probe(f.chat_template);
    if (!probe) return Fail("cannot open --chat-template " + f.chat_template);
    const std::string source(std::istreambuf_iterator<char>(probe), {});
    chat = serve::ChatTemplate::Create(source, "", "");
  }
  if (!chat.ok()) return Fail(chat.status().message());
  const std::string input(std::istreambuf_iterator<char>(std::cin), {});
  const nlohmann::ordered_json j = nlohmann::ordered_json::parse(input, nullptr, /*allow_exceptions=*/false);
  if (f.batch) {
    if (j.is_discarded() || !j.is_array()) return Fail("--batch: stdin must be a JSON list of conversation objects");
    nlohmann::json results = nlohmann::json::array();
    for (const nlohmann::ordered_json& request : j) {
      if (!request.is_object()) {
        results.push_back({{"error", "a conversation must be a JSON object"}});
        continue;
      }
      auto text = chat->Apply(request);
      if (text.ok()) results.push_back({{"text", *text}});
      else results.push_back({{"error", text.status().message()}});
    }
    std::printf("%s\n", JsonText(results).c_str());
    return 0;
  }
  if (j.is_discarded() || !j.is_object()) {
    return Fail("stdin must be one JSON object: {\"messages\": [...], \"tools\": [...], \"add_generation_prompt\": true, ...}");
  }
  auto text = chat->Apply(j);
  if (!text.ok()) return Fail(text.status().message());
  if (f.json) {
    std::printf("%s\n", JsonText(*text).c_str());
  } else {
    std::fwrite(text->data(), 1, text->size(), stdout);
  }
  return 0;
}

}  // namespace

Runner AddChatTemplate(Flags& flags) {
  auto f = std::make_shared<ChatTemplateFlags>();
  flags.Option("-m,--model", f->model, "Model GGUF (its tokenizer.chat_template and BOS/EOS texts; weights not loaded)");
  flags.Option("--chat-template", f->chat_template, "A Jinja chat template file instead of the model's");
  flags.Switch("--json", f->json, "Print the prompt as a JSON string");
  flags.Switch("--batch", f->batch,
               "stdin: a JSON list of conversations; stdout: a JSON list of {\"text\": ...} or {\"error\": ...}");
  return [f] { return Run(*f); };
}

}  // namespace daisy::apps
