// Text through the tokenizer and back (the byte-level vocabulary daisy generates models with):
// any bytes, special-token parsing on and off; decoding must round-trip valid UTF-8 text.
#include <cstdint>
#include <string_view>

#include "tokenizer/hf_import.h"
#include "tokenizer/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace daisy::tokenizer;
  if (size > 1 << 14) return 0;
  static Tokenizer tok = Tokenizer::Create(BuiltinByteVocab()).value();
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  for (bool special : {false, true}) {
    const auto ids = tok.Encode(text, special, true);
    (void)tok.Decode(ids, special);
    StreamDecoder d(tok, special);
    for (int32_t id : ids) (void)d.Push(id);
    (void)d.Flush();
  }
  return 0;
}
