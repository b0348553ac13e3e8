// UTF-8 helpers shared by the tokenizers, with llama.cpp's exact rules for malformed input.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "base/strings.h"

namespace daisy::tokenizer {

inline constexpr uint32_t kReplacementChar = 0xFFFD;

// Appends the UTF-8 encoding of `cpt` (< 0x110000) to `out` (base/strings.h).
using ::daisy::AppendUtf8;

// Rewrites `text` as valid UTF-8 the way llama.cpp decodes it before pre-tokenising: a byte that
// does not start a well-formed sequence (bad lead, missing continuation, truncated) becomes
// U+FFFD and decoding resumes at the next byte; overlong forms are re-encoded canonically.
// Surrogates and code points above U+10FFFF also become U+FFFD (llama.cpp leaves these
// undefined). Returns `text` unchanged (no copy needed) when it is already valid: check
// IsValidUtf8 first to avoid the copy.
std::string SanitizeUtf8(std::string_view text);
bool IsValidUtf8(std::string_view text);

// Length in bytes of the UTF-8 sequence a lead byte announces, by its high nibble (0-B: 1,
// C-D: 2, E: 3, F: 4), as llama.cpp's unicode_len_utf8. No validation.
inline size_t Utf8SeqLen(uint8_t lead) {
  static constexpr uint8_t kLen[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
  return kLen[lead >> 4];
}

// Number of bytes at the end of `text` that form an incomplete (so far valid) UTF-8 sequence:
// a streaming decoder holds these back until the rest arrives. 0..3.
size_t IncompleteUtf8Tail(std::string_view text);

// GPT-2's byte-level alphabet: every byte maps to one printable code point (bytes_to_unicode).
// ByteToUnicode(b) is that code point's UTF-8; UnicodeToByte returns -1 for code points that
// are not in the alphabet.
const std::string& ByteToUnicode(uint8_t byte);
int UnicodeToByte(uint32_t cpt);

// Decodes one well-formed code point at `text[pos]`, advancing `pos`; U+FFFD (one byte) when
// malformed.
uint32_t DecodeUtf8(std::string_view text, size_t& pos);

}  // namespace daisy::tokenizer
