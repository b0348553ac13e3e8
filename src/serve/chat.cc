#include "serve/chat.h"

#include <fstream>

namespace daisy::serve {

Result<ChatTemplate> ChatTemplate::Create(const std::string& source, std::string bos, std::string eos) {
  if (source.empty()) {
    return Unimplemented("the model has no chat template (tokenizer.chat_template): give one with "
                         "--chat-template FILE, or use /v1/completions with a prompt");
  }
  auto t = jinja::Template::Parse(source);
  if (!t.ok()) return Status(t.status().code(), "the chat template cannot be used: " + t.status().message());
  ChatTemplate c;
  c.template_ = std::move(*t);
  c.source_ = source;
  c.bos_ = std::move(bos);
  c.eos_ = std::move(eos);
  return c;
}

Result<ChatTemplate> ChatTemplate::ForModel(const tokenizer::Tokenizer& tokenizer, const std::string& file) {
  std::string source = tokenizer.vocab().chat_template;
  if (!file.empty()) {
    constexpr std::streamoff kMaxBytes = 1 << 20;
    std::ifstream in(file, std::ios::binary | std::ios::ate);
    if (!in) return NotFound("cannot open --chat-template %s", file.c_str());
    const std::streamoff size = in.tellg();
    if (size > kMaxBytes) return InvalidArgument("--chat-template %s: larger than 1 MiB", file.c_str());
    in.seekg(0);
    source.assign(static_cast<size_t>(size), '\0');
    in.read(source.data(), size);
    if (source.empty()) return InvalidArgument("--chat-template %s is empty", file.c_str());
  }
  auto text = [&](int32_t id) { return id >= 0 && id < tokenizer.n_vocab() ? tokenizer.Piece(id) : std::string(); };
  return Create(source, text(tokenizer.bos_id()), text(tokenizer.eos_id()));
}

Result<std::string> ChatTemplate::Apply(const nlohmann::ordered_json& input) const {
  if (!input.is_object()) return InvalidArgument("the chat template's input must be a JSON object");
  if (jinja::JsonDepth(input) > jinja::kMaxJsonDepth) {
    return InvalidArgument("the chat template's input is nested deeper than %zu levels", jinja::kMaxJsonDepth);
  }
  if (!input.contains("messages") || !input["messages"].is_array()) {
    return InvalidArgument("the chat template's input needs 'messages', an array");
  }
  jinja::Value vars = jinja::Value::MakeObject();
  jinja::Object& o = vars.mutable_object();
  // transformers passes the special tokens it has (none when the tokenizer lacks one).
  if (!bos_.empty()) o.Set("bos_token", jinja::Value(bos_));
  if (!eos_.empty()) o.Set("eos_token", jinja::Value(eos_));
  o.Set("add_generation_prompt", jinja::Value(true));
  for (auto it = input.begin(); it != input.end(); ++it) {
    if (it.key() == "tools" && it.value().is_null()) continue;
    o.Set(it.key(), jinja::FromJson(it.value()));
  }
  auto out = template_.Render(vars);
  if (!out.ok()) return Status(out.status().code(), "the chat template failed: " + out.status().message());
  return out;
}

}  // namespace daisy::serve
