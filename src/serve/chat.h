// Chat templates: turning OpenAI-style messages into the prompt text a model was trained on,
// by rendering the model's own Jinja template (tokenizer.chat_template, or a --chat-template
// file) with daisy's Jinja engine (jinja/jinja.h) as Hugging Face transformers renders it.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "jinja/jinja.h"
#include "tokenizer/tokenizer.h"

namespace daisy::serve {

class ChatTemplate {
 public:
  // `source`: the template text; `bos`, `eos`: the texts of the model's BOS and EOS tokens (""
  // when it has none). Errors: no template, or one daisy cannot parse (naming the construct).
  static Result<ChatTemplate> Create(const std::string& source, std::string bos, std::string eos);
  // The model's template (or `file`'s, --chat-template, when not empty) with the tokenizer's
  // BOS and EOS texts.
  static Result<ChatTemplate> ForModel(const tokenizer::Tokenizer& tokenizer, const std::string& file);

  // Renders `input`: an object with `messages`, optional `tools`, `add_generation_prompt`
  // (default true) and any template kwargs (enable_thinking, date_string, ...; bos_token and
  // eos_token override the model's). Messages are passed as given (transformers'
  // apply_chat_template).
  Result<std::string> Apply(const nlohmann::ordered_json& input) const;

  const std::string& bos() const { return bos_; }
  const std::string& eos() const { return eos_; }
  const std::string& source() const { return source_; }

 private:
  jinja::Template template_;
  std::string source_, bos_, eos_;
};

}  // namespace daisy::serve
