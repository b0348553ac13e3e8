// Tokenizer: text <-> token ids, identical to llama.cpp's tokenizer for the same GGUF metadata.
//
// Supports byte-level BPE (tokenizer.ggml.model = "gpt2", pre-tokenizers "llama-bpe" and
// "default") and SentencePiece ("llama", with byte fallback). Special-token text is recognised
// only when asked (parse_special), except user-defined tokens, which are always recognised
// (llama.cpp's rule). Immutable after Create(): thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "gguf/reader.h"
#include "tokenizer/vocab.h"

namespace daisy::tokenizer {

class Tokenizer {
 public:
  // Errors: Unimplemented for a tokenizer model or pre-tokenizer daisy does not support,
  // DataLoss for inconsistent data (for example a merge that names an unknown token pair is
  // fine, but a byte-fallback vocabulary without <0xXX> tokens is not).
  static Result<Tokenizer> Create(VocabData vocab);
  static Result<Tokenizer> FromGguf(const gguf::Reader& reader);

  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;
  ~Tokenizer();

  // Token ids for `text`. Invalid UTF-8 is replaced by U+FFFD first, as llama.cpp does.
  // `add_bos` prepends BOS when the model asks for it (add_bos_token).
  std::vector<int32_t> Encode(std::string_view text, bool parse_special, bool add_bos) const;

  // The bytes a token stands for. With `special` false, control and unknown tokens render as
  // "" (llama.cpp's token_to_piece). Pieces may be partial UTF-8 (byte tokens).
  const std::string& Piece(int32_t id) const;
  std::string_view TokenToPiece(int32_t id, bool special) const;

  // Concatenated pieces; for SentencePiece models that add a space prefix, the first piece's
  // leading space is dropped. Round-trips: Decode(Encode(s, false, false), false) == s for valid
  // UTF-8 s without special-token text.
  std::string Decode(std::span<const int32_t> ids, bool special) const;

  int32_t n_vocab() const;
  int32_t bos_id() const;   // -1 when the model has none
  int32_t eos_id() const;
  int32_t eot_id() const;   // <|eot_id|> and the like; -1 when none
  bool add_bos() const;
  bool is_eog(int32_t id) const;  // ends generation: EOS, EOT and llama.cpp's end-of-turn texts
  TokenType type(int32_t id) const;
  const VocabData& vocab() const;
  // Id of a token's exact text, or -1.
  int32_t Find(std::string_view text) const;

 private:
  struct Impl;
  Tokenizer() = default;
  std::unique_ptr<Impl> impl_;
};

// Turns a stream of token ids into text that never ends in half a UTF-8 character: bytes of an
// incomplete sequence are held back until the next pieces complete it. Thread-compatible.
class StreamDecoder {
 public:
  StreamDecoder(const Tokenizer& tokenizer, bool special)
      : tokenizer_(tokenizer), special_(special) {}
  // Text that is complete after `id`; may be empty.
  std::string Push(int32_t id);
  // Whatever is still held back (an incomplete sequence at the very end, as is).
  std::string Flush();

 private:
  const Tokenizer& tokenizer_;
  bool special_;
  bool first_ = true;
  std::string pending_;
};

}  // namespace daisy::tokenizer
