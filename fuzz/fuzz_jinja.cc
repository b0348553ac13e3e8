// Chat templates: any text as a template, rendered over a conversation with tools; any error is
// fine, a crash, hang, leak or undefined behaviour is not.
#include <cstdint>
#include <string_view>

#include "jinja/jinja.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 1 << 16) return 0;
  auto t = daisy::jinja::Template::Parse(std::string_view(reinterpret_cast<const char*>(data), size));
  if (!t.ok()) return 0;
  static const nlohmann::ordered_json vars = nlohmann::ordered_json::parse(R"({
    "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi é"},
                 {"role": "assistant", "content": null, "tool_calls": [{"type": "function",
                   "function": {"name": "f", "arguments": {"x": [1, 2.5, null, true]}}}]},
                 {"role": "tool", "content": "ok"}],
    "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}],
    "add_generation_prompt": true, "bos_token": "<s>", "eos_token": "</s>"})");
  (void)t->Render(daisy::jinja::FromJson(vars));
  return 0;
}
