// VocabData: a tokenizer as GGUF stores it (tokenizer.ggml.* keys), independent of how it is
// run. Read from a GGUF file, written by `daisy gen-model`, imported from a Hugging Face
// tokenizer.json (hf_import.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "gguf/reader.h"
#include "gguf/writer.h"

namespace daisy::tokenizer {

// tokenizer.ggml.token_type values.
enum class TokenType : int32_t {
  kUndefined = 0,
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,
  kUserDefined = 4,
  kUnused = 5,
  kByte = 6,
};

struct VocabData {
  std::string model;  // tokenizer.ggml.model: "gpt2" (byte-level BPE) or "llama" (SentencePiece)
  std::string pre;    // tokenizer.ggml.pre: "llama-bpe", "default", ... (BPE only; may be empty)
  std::vector<std::string> tokens;     // id -> text (byte-level encoded for gpt2, U+2581 for llama)
  std::vector<float> scores;           // SentencePiece merge scores (empty: all 0)
  std::vector<int32_t> token_types;    // TokenType per id (empty: all normal)
  std::vector<std::string> merges;     // BPE merges "left right", rank = index
  int32_t bos_id = -1, eos_id = -1, eot_id = -1, unk_id = -1, pad_id = -1;
  std::optional<bool> add_bos, add_eos, add_space_prefix;
  std::string chat_template;  // tokenizer.chat_template (Jinja), may be empty
  // general.name (read, never written by WriteVocab): llama.cpp sets some token attributes by
  // the model's name (Phi-3's special tokens strip the whitespace after them).
  std::string model_name;
};

// Reads the tokenizer.ggml.* keys. Errors name the file and the offending key; every id is
// checked against the vocabulary size and array lengths against each other.
Result<VocabData> ReadVocab(const gguf::Reader& reader);

// Adds the tokenizer.* keys for `vocab` to `writer`.
void WriteVocab(const VocabData& vocab, gguf::Writer& writer);

}  // namespace daisy::tokenizer
