// The BPE pre-tokenizer: splits text into words with the Unicode regexes llama.cpp uses for the
// supported tokenizer.ggml.pre values, matched by PCRE2 (UTF + UCP, JIT when available).
// Thread-safe: Split() may be called concurrently.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace daisy::tokenizer {

enum class PreType {
  kDefault,  // "default" (and a missing key): four regexes, GPT-2's in the middle
  kLlama3,   // "llama-bpe", "llama3", "llama-v3": Llama 3's single regex
  kQwen2,    // "qwen2" (Qwen2, Qwen2.5, Qwen3): Llama 3's with single digits
  kDeepseek3,  // "deepseek-v3": digits in threes, CJK runs, then DeepSeek's word regex
  kGpt2,       // "gpt-2" (GPT-2, OLMo, MPT, ...): GPT-2's regex alone
  kSmollm,     // "smollm", "starcoder": single digits, then GPT-2's regex
};

// Maps a tokenizer.ggml.pre value; Unimplemented (listing the supported names) otherwise.
Result<PreType> ParsePreType(std::string_view name);

class PreTokenizer {
 public:
  static Result<PreTokenizer> Create(PreType type);
  PreTokenizer(PreTokenizer&&) noexcept;
  PreTokenizer& operator=(PreTokenizer&&) noexcept;
  ~PreTokenizer();

  // Appends the words of `text` (which must be valid UTF-8) to `words`, as views into `text`.
  // Every byte of `text` lands in exactly one word, in order.
  void Split(std::string_view text, std::vector<std::string_view>& words) const;

 private:
  struct Impl;
  PreTokenizer() = default;
  std::unique_ptr<Impl> impl_;
};

}  // namespace daisy::tokenizer
