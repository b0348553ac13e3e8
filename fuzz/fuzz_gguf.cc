// Model files: any bytes as a GGUF — read, described, tokenizer built, weights bound and
// repacked. Errors are fine; crashes, huge allocations and undefined behaviour are not.
#include <cstdint>
#include <span>

#include "gguf/reader.h"
#include "model/config.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto r = daisy::gguf::Reader::FromBytes(std::span<const uint8_t>(data, size), "fuzz.gguf");
  if (!r.ok()) return 0;
  auto tok = daisy::tokenizer::Tokenizer::FromGguf(*r);
  if (tok.ok()) {
    const auto ids = tok->Encode("Hello <s> wörld 123", true, true);
    (void)tok->Decode(ids, true);
  }
  daisy::model::LoadOptions o;
  o.threads = 1;
  (void)daisy::model::Model::Open(std::move(*r), o);
  return 0;
}
