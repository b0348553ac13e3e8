// Model output parsed for reasoning and tool calls, in every format, whole and as every prefix
// of a stream.
#include <cstdint>
#include <string>

#include "serve/chat_output.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace daisy::serve;
  if (size < 1 || size > 4096) return 0;
  ChatOutputFormat f;
  f.reasoning = data[0] & 1;
  f.thinking_open = data[0] & 2;
  f.tools = static_cast<ToolFormat>((data[0] >> 2) % 4);
  const std::string text(reinterpret_cast<const char*>(data + 1), size - 1);
  for (size_t n = 0; n <= text.size(); n += 1 + text.size() / 64) (void)ParseChatOutput(f, text.substr(0, n), false);
  (void)ParseChatOutput(f, text, true);
  return 0;
}
