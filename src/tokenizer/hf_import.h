// Builds a VocabData from a Hugging Face tokenizer.json (and the tokenizer_config.json beside
// it, when present, for BOS/EOS and the chat template), the way llama.cpp's converter does;
// and daisy's built-in byte-level vocabulary for models made without a tokenizer file.
#pragma once

#include <filesystem>
#include <string>

#include "base/status.h"
#include "tokenizer/vocab.h"

namespace daisy::tokenizer {

struct HfImportOptions {
  // Overrides the detected pre-tokenizer name ("llama-bpe", "default"); empty: detect.
  std::string pre;
};

// Byte-level BPE files (Llama 3 style) become model "gpt2"; BPE with byte_fallback (Llama 2
// style, SentencePiece exported as BPE) becomes model "llama" with merge-rank scores.
// Errors: NotFound, InvalidArgument (not JSON, not a BPE tokenizer, inconsistent ids).
Result<VocabData> ImportHfTokenizer(const std::filesystem::path& tokenizer_json,
                                    const HfImportOptions& options = {});

// 256 byte tokens, a few dozen English merges, and Llama 3's special tokens
// (<|begin_of_text|>, <|end_of_text|>, <|start_header_id|>, <|end_header_id|>, <|eot_id|>),
// with the "default" pre-tokenizer and a Llama 3 chat template.
VocabData BuiltinByteVocab();

}  // namespace daisy::tokenizer
