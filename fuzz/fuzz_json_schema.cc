// JSON schemas (response_format, tool parameters) compiled into grammars, and the grammar run
// over the same bytes: errors are fine, crashes and hangs are not.
#include <cstdint>
#include <string_view>

#include "grammar/json_schema.h"
#include "jinja/jinja.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 1 << 14) return 0;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const auto schema = nlohmann::ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (schema.is_discarded()) return 0;
  if (daisy::jinja::JsonDepth(schema) > daisy::jinja::kMaxJsonDepth) return 0;  // as the server checks
  auto g = daisy::grammar::JsonSchemaGrammar(schema);
  if (!g.ok()) return 0;
  daisy::grammar::Matcher m(*g);
  for (char c : text.substr(0, 256)) {
    if (!m.Advance(std::string_view(&c, 1))) break;
  }
  (void)m.CanEnd();
  return 0;
}
