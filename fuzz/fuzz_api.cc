// HTTP request bodies as /v1/chat/completions, /v1/completions and /apply-template parse them
// (a tokenizer and chat template built in, constrained output on): errors are fine, crashes are
// not.
#include <cstdint>
#include <string_view>

#include "serve/api.h"
#include "tokenizer/hf_import.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace daisy;
  if (size > 1 << 16) return 0;
  static tokenizer::Tokenizer tok = tokenizer::Tokenizer::Create(tokenizer::BuiltinByteVocab()).value();
  static Result<serve::ChatTemplate> chat =
      serve::ChatTemplate::Create(tokenizer::BuiltinByteVocab().chat_template, "<|begin_of_text|>", "<|eot_id|>");
  static serve::GrammarVocabs vocabs(tok);
  const serve::ApiContext ctx{&tok, &chat, "tiny", 256, 8, &vocabs};
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  serve::CompletionRequest r;
  (void)serve::ParseCompletion(body, /*chat=*/true, ctx, r);
  (void)serve::ParseCompletion(body, /*chat=*/false, ctx, r);
  const auto j = nlohmann::ordered_json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_object() && jinja::JsonDepth(j) <= jinja::kMaxJsonDepth) {
    std::string prompt;
    (void)serve::RenderChatPrompt(j, ctx, prompt);
  }
  return 0;
}
